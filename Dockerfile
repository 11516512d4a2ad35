# syntax=docker/dockerfile:1
#
# hookline image: a static binary built with Go 1.26, run on distroless as a
# non-root user. Build it with `docker build -t hookline .` (or let
# `docker compose up --build` do it); run `hookline serve` with a config file
# mounted at /etc/hookline/hookline.yaml (see docker-compose.yml).

FROM golang:1.26 AS build
WORKDIR /src
# Dependencies first, so that a source change does not download them again.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
# Static (no cgo): the runtime image has no libc.
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/hookline ./cmd/hookline

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/hookline /usr/local/bin/hookline
USER nonroot:nonroot
# 8080: webhooks, /healthz, /readyz, /metrics (listen); 8081: admin API (admin_listen).
EXPOSE 8080 8081
# SIGTERM drains within shutdown_timeout, then exits 0.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/hookline"]
CMD ["serve", "--config", "/etc/hookline/hookline.yaml"]
