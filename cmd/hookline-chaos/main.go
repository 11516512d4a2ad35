// Command hookline-chaos is hookline's chaos harness (`make chaos`): a
// bounded scenario on loopback that runs several hookline instances on one
// Postgres, sends every event several times from concurrent senders, and
// meanwhile SIGKILLs random instances (restarting them), restarts Postgres
// (keeping it down for a while) and makes the destination fail and time out
// at random. Then it checks hookline's promises (README, "What it promises") and prints
// a report; it exits 1 on any violation.
//
// What runs:
//
//   - Postgres: a cluster of its own from the local PostgreSQL binaries
//     (internal/pgcluster), in a temporary directory, with fsync on.
//   - Instances (--instances, default "serve:ingest,self:all,self:worker"):
//     "serve:ROLE" is the real `hookline serve --role ROLE` binary (built
//     from this module unless --hookline-bin is given); "self:ROLE" is this
//     harness binary re-executed as a hookline instance (internal/app, the
//     code behind `hookline serve`) that also registers the Go handlers
//     "ledger" and "books" (transactional mode), which `hookline serve`
//     cannot do. Every instance gets the same sources; only the listen
//     address differs.
//   - Three sources, all Stripe-signed: "http" forwards to a destination in
//     this process; "ledger" runs a Go handler in transactional mode that
//     writes one row per event into chaos_ledger, in the claim's
//     transaction; "fanout" routes each event to three destinations: "sink"
//     (HTTP, every event, never fails on purpose), "books" (the Go handler
//     in transactional mode, types ["charge.*"]) and "flaky" (HTTP, where
//     data.object.region is "eu", max_in_flight 8, failing like the http
//     source's destination). The senders mix event types and regions, so
//     each filter lets about half the fan-out events through.
//     --ledger-share and --fanout-share split the events (the rest go to
//     "http"); with both 0 no Go handler is needed, and then "serve"
//     instances may run workers too.
//   - Two more Stripe-signed sources, each with the destinations "hook"
//     (HTTP, failing like flaky) and "books": "ordered" (ordering.key
//     json:data.object.id, by json:created, stale: deliver; --ordered-keys
//     keys of --ordered-per-key events, each key's sent one after another,
//     the keys interleaved among all the other deliveries) and "reconciled"
//     (reconcile every --recon-every against a fake Stripe events API on
//     loopback holding --recon-events events, some never sent as webhooks,
//     some sent, some older than the lookback; on-demand runs through the
//     admin route on random instances during the chaos).
//   - The destinations and the handlers fail at random during an event's
//     first attempts (5xx, time-outs, handler errors), except "sink"; and
//     always for a few "doomed" events, which must end in the dead set (on
//     the fan-out source only at "flaky", the other two succeed).
//
// What it checks (any failure is a violation):
//
//   - every event that got a 2xx is stored, and ends completed or dead
//     (lost = 0); nothing gets a 2xx while Postgres is down;
//   - no HTTP destination ever sees two concurrent requests for one
//     (destination, Idempotency-Key), nor a Go handler two concurrent
//     transactions for one (destination, event); always the same key, the
//     right Hookline-Destination and the exact bytes sent;
//   - in transactional mode each completed (event, destination)'s effect
//     exists exactly once, and a dead one's not at all (double-effects = 0);
//   - fan-out: each destination gets exactly the events its filter matches
//     (a row in hookline_event_destinations, a 2xx or a ledger row), each
//     completed or dead on its own; a filtered-out event never reaches it;
//   - the dead set holds exactly the (event, destination)s whose attempts
//     ran out (the doomed ones);
//   - during the outage every ingest answer is a 503 with Retry-After in
//     whole seconds within 5 s, /readyz answers 503, and 200 after it;
//   - no claim stays processing long past its lease (stuck claims = 0), and
//     a crashed worker's event is retried within lease + 30 s;
//   - ordered: per key and destination, forwards never overlap and never go
//     back to an earlier-accepted event, first 2xx and places follow
//     acceptance order, Hookline-Order-Key and Hookline-Stale are right;
//     the handler's effects are once each, in order, never two at once;
//   - reconciled: every event the API lists within the lookback is stored
//     once and processed once (one delivery id per event's forwards, one
//     effect, no unexplained second 2xx), none older than the lookback is,
//     and the runs are recorded (docs/chaos.md).
//
// Usage:
//
//	go run ./cmd/hookline-chaos [-events 10000] [-deliveries 3] [-instances serve:ingest,self:all,self:worker]
//	    [-kills 2] [-pg-restarts 1] [-pg-down 30s] [-ordered-keys 300] [-ordered-per-key 5]
//	    [-recon-events 600] [-recon-every 2s] [-timeout 15m] [-seed N] [-keep]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// Options is one scenario.
type Options struct {
	// Events is the number of distinct events (E).
	Events int
	// Deliveries is how many times each event is delivered (D).
	Deliveries int
	// Instances are "kind:role" specs, kind serve or self, role all, ingest
	// or worker.
	Instances []string
	// Kills is how many times a random instance is SIGKILLed (and restarted).
	Kills int
	// PGRestarts is how many times Postgres is stopped and started again.
	PGRestarts int
	// PGDown is how long Postgres stays down on each restart.
	PGDown time.Duration
	// Senders is the number of concurrent senders.
	Senders int
	// Rate caps deliveries per second over all senders (0: no cap).
	Rate float64
	// LedgerShare is the share of events on the transactional source,
	// FanoutShare the share on the fan-out source; the rest go to the http
	// source.
	LedgerShare, FanoutShare float64
	// DoomedShare is the share of events that always fail.
	DoomedShare float64
	// OrderedKeys is the number of ordering keys (data.object.id) of the
	// ordered source, each with OrderedPerKey events; 0 turns it off.
	OrderedKeys, OrderedPerKey int
	// ReconEvents is the number of events the fake Stripe events API holds
	// for the reconciled source (some never sent as webhooks, some sent, a
	// few older than the lookback); 0 turns it off. ReconEvery is its
	// reconcile.every.
	ReconEvents int
	ReconEvery  time.Duration
	// FailRate and TimeoutRate are the chances that an early attempt fails
	// with a 5xx or times out; RandomAttempts is how many of an event's
	// first attempts may fail at random (later ones succeed, unless doomed).
	FailRate, TimeoutRate float64
	RandomAttempts        int
	// Lease, DestTimeout, MaxAttempts, BackoffMin and BackoffMax go into the
	// sources' configuration.
	Lease, DestTimeout     time.Duration
	MaxAttempts            int
	BackoffMin, BackoffMax time.Duration
	// Workers is the number of concurrent jobs per worker instance.
	Workers int
	// Settle bounds the wait, after sending and faults, for every event to
	// finish; Timeout bounds the whole run.
	Settle, Timeout time.Duration
	// Seed makes the run's choices repeatable (0: from the clock).
	Seed int64
	// HooklineBin is a built cmd/hookline; empty builds one.
	HooklineBin string
	// Race builds hookline with -race.
	Race bool
	// PGFast turns fsync and synchronous_commit off (faster, and still
	// correct for Stop/Start restarts, which flush; not for crashes).
	PGFast bool
	// Dir holds Postgres, configs and logs; empty makes a temporary one,
	// removed after a passing run unless Keep.
	Dir  string
	Keep bool
	// Log receives progress lines; nil discards them.
	Log io.Writer
}

// DefaultOptions is the full scenario `make chaos` runs.
func DefaultOptions() Options {
	return Options{
		Events:         10000,
		Deliveries:     3,
		Instances:      []string{"serve:ingest", "self:all", "self:worker"},
		Kills:          2,
		PGRestarts:     1,
		PGDown:         30 * time.Second,
		Senders:        32,
		LedgerShare:    1.0 / 3,
		FanoutShare:    1.0 / 3,
		DoomedShare:    0.01,
		OrderedKeys:    300,
		OrderedPerKey:  5,
		ReconEvents:    600,
		ReconEvery:     2 * time.Second,
		FailRate:       0.10,
		TimeoutRate:    0.03,
		RandomAttempts: 3,
		Lease:          3 * time.Second,
		DestTimeout:    time.Second,
		MaxAttempts:    8,
		BackoffMin:     200 * time.Millisecond,
		BackoffMax:     2 * time.Second,
		Workers:        20,
		Settle:         5 * time.Minute,
		Timeout:        20 * time.Minute,
	}
}

func main() {
	if os.Getenv(instanceEnv) != "" {
		os.Exit(instanceMain(os.Args[1:]))
	}
	os.Exit(cli(os.Args[1:], os.Stdout, os.Stderr))
}

func cli(args []string, stdout, stderr io.Writer) int {
	o := DefaultOptions()
	fs := flag.NewFlagSet("hookline-chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&o.Events, "events", o.Events, "distinct events (E)")
	fs.IntVar(&o.Deliveries, "deliveries", o.Deliveries, "deliveries of each event (D)")
	instances := fs.String("instances", strings.Join(o.Instances, ","), "comma-separated kind:role; kind serve (`hookline serve`) or self (this binary with the Go handlers); role all, ingest or worker")
	fs.IntVar(&o.Kills, "kills", o.Kills, "SIGKILLs of random instances (each restarted)")
	fs.IntVar(&o.PGRestarts, "pg-restarts", o.PGRestarts, "Postgres stop/start cycles")
	fs.DurationVar(&o.PGDown, "pg-down", o.PGDown, "how long Postgres stays down per restart")
	fs.IntVar(&o.Senders, "senders", o.Senders, "concurrent senders")
	fs.Float64Var(&o.Rate, "rate", o.Rate, "max deliveries per second over all senders (0: unlimited)")
	fs.Float64Var(&o.LedgerShare, "ledger-share", o.LedgerShare, "share of events on the transactional (Go handler) source; 0 turns it off")
	fs.Float64Var(&o.FanoutShare, "fanout-share", o.FanoutShare, "share of events on the fan-out source (sink, books, flaky); 0 turns it off")
	fs.IntVar(&o.OrderedKeys, "ordered-keys", o.OrderedKeys, "ordering keys of the ordered source; 0 turns it off")
	fs.IntVar(&o.OrderedPerKey, "ordered-per-key", o.OrderedPerKey, "events per ordering key (sent one after another, each key's in order)")
	fs.IntVar(&o.ReconEvents, "recon-events", o.ReconEvents, "events the fake Stripe events API lists for the reconciled source; 0 turns it off")
	fs.DurationVar(&o.ReconEvery, "recon-every", o.ReconEvery, "the reconciled source's reconcile.every")
	fs.Float64Var(&o.DoomedShare, "doomed-share", o.DoomedShare, "share of events whose every attempt fails (they must end dead)")
	fs.Float64Var(&o.FailRate, "fail-rate", o.FailRate, "chance that an early attempt fails (5xx / handler error)")
	fs.Float64Var(&o.TimeoutRate, "timeout-rate", o.TimeoutRate, "chance that an early attempt times out at the destination")
	fs.IntVar(&o.RandomAttempts, "random-attempts", o.RandomAttempts, "how many first attempts of an event may fail at random")
	fs.DurationVar(&o.Lease, "lease", o.Lease, "sources' lease")
	fs.DurationVar(&o.DestTimeout, "dest-timeout", o.DestTimeout, "destination timeout (must be < lease)")
	fs.IntVar(&o.MaxAttempts, "max-attempts", o.MaxAttempts, "every destination's max_attempts")
	fs.IntVar(&o.Workers, "workers", o.Workers, "concurrent jobs per worker instance")
	fs.DurationVar(&o.Settle, "settle", o.Settle, "max wait for every event to finish after sending and faults")
	fs.DurationVar(&o.Timeout, "timeout", o.Timeout, "bound on the whole run")
	fs.Int64Var(&o.Seed, "seed", 0, "random seed (0: from the clock; printed in the report)")
	fs.StringVar(&o.HooklineBin, "hookline-bin", "", "a built cmd/hookline (default: go build it)")
	fs.BoolVar(&o.Race, "race", false, "build cmd/hookline with -race")
	fs.BoolVar(&o.PGFast, "pg-fast", false, "Postgres with fsync and synchronous_commit off")
	fs.StringVar(&o.Dir, "dir", "", "working directory (default: a temporary one)")
	fs.BoolVar(&o.Keep, "keep", false, "keep the working directory (logs, Postgres) after a passing run")
	quiet := fs.Bool("q", false, "no progress lines, only the report")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	o.Instances = splitList(*instances)
	if !*quiet {
		o.Log = stderr
	}
	if err := o.validate(); err != nil {
		fmt.Fprintln(stderr, "hookline-chaos:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := Run(ctx, o)
	if rep != nil {
		rep.Print(stdout)
	}
	if err != nil {
		fmt.Fprintln(stderr, "hookline-chaos:", err)
		return 1
	}
	if len(rep.Violations) > 0 {
		return 1
	}
	return 0
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// instanceSpec is one parsed --instances entry.
type instanceSpec struct {
	kind string // serve | self
	role string // all | ingest | worker
}

func (s instanceSpec) String() string { return s.kind + ":" + s.role }
func (s instanceSpec) ingests() bool  { return s.role != "worker" }
func (s instanceSpec) works() bool    { return s.role != "ingest" }

// parseInstances parses --instances; handlers says whether a Go handler is
// configured (then only "self" instances may run workers).
func parseInstances(list []string, handlers bool) ([]instanceSpec, error) {
	var specs []instanceSpec
	for _, it := range list {
		kind, role, ok := strings.Cut(it, ":")
		if !ok {
			kind, role = "serve", it
		}
		if kind != "serve" && kind != "self" {
			return nil, fmt.Errorf("-instances %q: kind must be serve or self", it)
		}
		if role != "all" && role != "ingest" && role != "worker" {
			return nil, fmt.Errorf("-instances %q: role must be all, ingest or worker", it)
		}
		if kind == "serve" && role != "ingest" && handlers {
			return nil, fmt.Errorf("-instances %q: `hookline serve` cannot run the Go handlers (the ledger source, the books destinations of the fanout, ordered and reconciled sources); use self:%s, or -ledger-share 0 -fanout-share 0 -ordered-keys 0 -recon-events 0", it, role)
		}
		specs = append(specs, instanceSpec{kind, role})
	}
	var in, work bool
	for _, s := range specs {
		in = in || s.ingests()
		work = work || s.works()
	}
	if !in || !work {
		return nil, errors.New("-instances: need at least one instance that ingests and one that works")
	}
	return specs, nil
}

func (o *Options) validate() error {
	switch {
	case o.Events < 1:
		return errors.New("-events: at least 1")
	case o.Deliveries < 1:
		return errors.New("-deliveries: at least 1")
	case o.Senders < 1:
		return errors.New("-senders: at least 1")
	case o.Kills < 0 || o.PGRestarts < 0:
		return errors.New("-kills and -pg-restarts must not be negative")
	case o.DestTimeout >= o.Lease:
		return errors.New("-dest-timeout must be shorter than -lease")
	case o.MaxAttempts <= o.RandomAttempts:
		return errors.New("-max-attempts must exceed -random-attempts, so that only doomed events run out of attempts")
	case o.LedgerShare < 0 || o.FanoutShare < 0 || o.LedgerShare+o.FanoutShare > 1 || o.DoomedShare < 0 || o.DoomedShare > 1:
		return errors.New("-ledger-share, -fanout-share and -doomed-share are fractions, and -ledger-share + -fanout-share must not exceed 1")
	case o.FailRate+o.TimeoutRate > 1:
		return errors.New("-fail-rate + -timeout-rate must not exceed 1")
	case o.OrderedKeys < 0 || (o.OrderedKeys > 0 && o.OrderedPerKey < 1):
		return errors.New("-ordered-keys must not be negative, and -ordered-per-key must be at least 1")
	case o.ReconEvents < 0 || (o.ReconEvents > 0 && o.ReconEvery < time.Second):
		return errors.New("-recon-events must not be negative, and -recon-every at least 1s")
	}
	_, err := parseInstances(o.Instances, o.handlers())
	return err
}

// handlers reports whether a Go handler is configured: the ledger source,
// or the books destination of the fan-out, ordered or reconciled source.
func (o *Options) handlers() bool {
	return o.LedgerShare > 0 || o.FanoutShare > 0 || o.OrderedKeys > 0 || o.ReconEvents > 0
}
