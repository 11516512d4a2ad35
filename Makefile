# hookline — make help lists the targets.
GO        ?= go
BIN       := bin/hookline
FUZZTIME  ?= 2s
PKGS      := ./...

.DEFAULT_GOAL := help

.PHONY: help
help: ## list the targets
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  \033[36m%-12s\033[0m %s\n", $$1, $$2}'

.PHONY: build
build: ## build bin/hookline
	$(GO) build -o $(BIN) ./cmd/hookline

.PHONY: run
run: build ## run hookline dev: local Postgres (or Docker), demo source, ready send line
	./$(BIN) dev

.PHONY: postgres
postgres: ## make sure PostgreSQL binaries are installed (apt-get on Debian/Ubuntu)
	@bash .ci/ensure-postgres

.PHONY: chromium
chromium: ## make sure Chromium is installed for the console's browser tests (apt-get on Debian/Ubuntu)
	@bash .ci/ensure-chromium

.PHONY: lint
lint: ## gofmt and go vet
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "not gofmt-formatted:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

.PHONY: test
test: postgres chromium lint ## everything CI runs: lint, go test -race (browser tests in Chromium too), short fuzzing, short chaos
	$(GO) test -race -count=1 -timeout 25m $(PKGS)
	@FUZZTIME=$(FUZZTIME) bash .ci/fuzz

.PHONY: fuzz
fuzz: ## run every fuzz target for FUZZTIME (default 2s; try FUZZTIME=5m)
	@FUZZTIME=$(FUZZTIME) bash .ci/fuzz

BENCHFLAGS ?= -repeat 3

.PHONY: bench
bench: postgres ## Go benchmarks of the hot pieces plus the side-by-side ingest, ordering, fan-out and processing benchmarks (~40-60 min; BENCHFLAGS='-repeat 1' for one round)
	$(GO) test -run='^$$' -bench=. -benchmem ./providers/... ./idem/ ./ingest/ ./jobs/
	$(GO) run ./cmd/hookline-bench $(BENCHFLAGS)

.PHONY: chaos
chaos: postgres build ## the full chaos scenario (kills instances, restarts Postgres, checks the promises)
	$(GO) run ./cmd/hookline-chaos

.PHONY: sdk-vectors
sdk-vectors: ## re-record the official SDKs' vectors (providers/testdata/sdkvectors/vectors.json; AWS's SNS validator's in providers/sns/testdata; Google's auth library's in providers/googleplay/testdata; Apple's App Store Server Library's in providers/appstore/testdata; needs node, npm and openssl)
	cd providers/testdata/sdkvectors && npm ci --no-audit --no-fund && node gen.mjs
	cd providers/sns/testdata/validator && npm ci --no-audit --no-fund && node gen.mjs
	cd providers/googleplay/testdata/oracle && npm ci --no-audit --no-fund && node gen.mjs
	cd providers/appstore/testdata/oracle && npm ci --no-audit --no-fund && node gen.mjs

.PHONY: clean
clean: ## remove build output and the dev cluster
	rm -rf bin .hookline
