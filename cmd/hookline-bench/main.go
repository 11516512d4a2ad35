// Command hookline-bench measures hookline's ingest side by side: the naive
// mode (one transaction per request, `ingest.batch: false`) and group commit
// (`ingest.batch: true`, the default), against a throwaway PostgreSQL with
// fsync ON, at several levels of concurrent senders.
//
// For every (concurrency, mode) pair it creates a fresh database, starts
// `hookline serve` as a subprocess (built from this module with `go build`,
// or given with -hookline), a loopback destination that answers 200, and a
// load generator that POSTs pre-signed ~1.5 KB Stripe events (a share of
// them re-sent as duplicates) for a fixed duration. It then waits until every
// accepted event has been processed, and checks the counts: every accepted
// event is in hookline_events, completed, and was delivered to the
// destination exactly once (LOST=0 DOUBLE=0, or a non-zero exit).
//
// It prints a table (accepted/s, ack latency p50/p99/max, end-to-end
// events/s, hookline CPU seconds per 1,000 events, hookline peak RSS) and
// writes bench-results/results.json and bench-results/chart.svg.
//
// Three more scenarios (-scenario, all by default) measure the workers'
// drain of a backlog: ordering (an unordered source, the same source
// ordered per key over 10,000 keys, and one hot key behind a destination
// with a latency, with a per-key order check), fanout (one destination
// against three) and processing (hookline's worker, per event and batched,
// against a plain River worker: the textbook design, textbook.go). A fifth,
// colocated, runs one `hookline serve --role all` under load, batched and
// per event, and samples accepted and delivered once a second to tell
// whether its workers keep up (colocated.go, which also writes
// colocated.svg). See docs/performance.md#ordering, #fan-out,
// #processing-against-the-textbook-design and
// #colocated-does-one-process-keep-up.
//
// Usage:
//
//	go run ./cmd/hookline-bench [flags]     (make bench)
//	go run ./cmd/hookline-bench -short      (smoke: one level, 2 s)
//
// hookline-bench -textbook-worker … is the textbook worker itself, which
// the processing scenario runs as a subprocess (not for use by hand).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const usageHeader = `hookline-bench — side-by-side benchmarks of hookline: ingest (naive vs group
commit), ordering (unordered vs ordered per key, and one hot key), fan-out
(one destination vs several), processing (hookline's worker vs a plain
River worker) and colocated (one --role all process: do its workers keep up?)

Starts a throwaway PostgreSQL (fsync on) in a temporary directory, then for
each concurrency level and each mode: a fresh database, hookline as a
subprocess, a loopback destination answering 200 and a load generator sending
pre-signed ~1.5 KB Stripe events (a share of them duplicates). After the load
it waits until every accepted event is processed and checks that each was
stored and delivered exactly once (prints LOST=0 DOUBLE=0, else exits 1).

Columns: accepted/s (new events answered 2xx per second of load), ack latency
p50/p99/max (send to answer, every request), e2e ev/s (accepted events /
first send → last completion), CPU s/1k (hookline process user+sys CPU from
load start to the last completion, per 1,000 accepted events; pg = the
PostgreSQL server's), peak RSS (hookline's VmHWM).

Scenarios (-scenario, comma-separated; default all =
ingest,ordering,fanout,processing,colocated):

  ingest    the above, at each -c level for -d per mode (naive, batched).
  ordering  drain rate (PROCESSED/s) of a backlog of -backlog events whose
            data.object.id takes -keys values (round robin), by a --role
            worker process, three runs taking turns: "unordered" (no
            ordering block), "ordered" (ordering: {key: json:data.object.id,
            by: json:created, stale: deliver}) and "hot-key" (-hot-events
            events sharing one key, the destination holding each request
            -latency: bound to at most 1/latency events/s, printed as
            BOUND/s). Ordered runs are also checked per key: the destination
            saw each key's forwards one at a time (no overlap), in the order
            of their places in Postgres, and the places follow the senders'
            real-time order (an event answered before another was sent has
            the earlier place). The summary gives ordered/unordered (the
            target: at least 0.70).
  fanout    the drain of -backlog events (one object each, unordered) with
            one destination ("fanout-1") and with -destinations destinations
            that all match ("fanout-N"), taking turns: events/s and
            deliveries/s (events x destinations), and the ratios.
  processing
            the drain of -backlog events (one object each, unordered) by
            three workers taking turns (-processing-runs): "textbook", the
            baseline a user would compare with: a plain River worker
            (riverpgxv5, one queue of -workers workers, 5 ms fetch
            cooldown, River's batched completer) run as a subprocess, whose
            job reads the event's row, POSTs it to the destination and
            marks the row processed (its backlog is written straight into
            its table and River's, not sent); "per-event", hookline's
            --role worker with processing: {batch: false}; and "batched",
            with the default. HL s/1k is the textbook worker's CPU in its
            run. The summary gives batched/textbook and per-event/textbook
            of processed/s, each run's CPU per event (worker + Postgres)
            and its worker's peak RSS (VmHWM), against the targets
            (batched at least 2x textbook and 5,000 events/s; the worker's
            peak RSS at most 150 MB with -backlog 100000).
  colocated one hookline serve --role all (what users run by default)
            taking webhooks from 64 closed-loop senders (-c: its first
            level), no duplicates, for -d, while its workers process them
            on the same CPUs; three runs taking turns: "colocated-batched"
            (the default configuration, ingest paced to the workers),
            "colocated-unpaced" (ingest: {pace: false}) and
            "colocated-per-event" (processing: {batch: false}); then the
            drain and the checks.
            Once a second it samples accepted so far (2xx "accepted"),
            delivered so far (distinct events the destination received)
            and the queue depth (accepted - delivered). Over the steady
            part of the load (from 2 s to its end): ACCEPTED/s,
            DELIVERED/s, DEPTH/s (the depth's least-squares growth per
            second: positive, the workers fall behind), END DEPTH (at the
            end of the load) and KEEPS UP (delivered/s >= 95 % of
            accepted/s and DEPTH/s <= 5 % of accepted/s); P99/MAX ms (ack
            latency) and E2E/s (accepted / first send -> last completion).
            With -rate N the senders are paced to N webhooks/s together
            (still at most -c at once): whether one process sustains that
            arrival rate.
            Targets: colocated-batched delivers >= 3,000 events/s while
            keeping up, with p99 ack <= 50 ms. Writes <out>/colocated.svg
            (the median round's two runs over time).

The drain scenarios build their backlog with group commit at 64 senders
(-c, -d, -modes and -max-events do not apply); -repeat rounds apply to every
scenario, the runs of a round taking turns. LOST and DOUBLE count (event,
destination) pairs. Their table: PROCESSED/s (events / the worker's start →
the last completion), DELIVERIES/s ((event, destination) pairs, same time),
STEADY/s (events / first → last completion), HL and PG s/1k (the worker's
and Postgres's CPU during the drain, per 1,000 events).

Results: <out>/results.json, <out>/chart.svg (default ./bench-results;
the chart draws the ingest scenario) and <out>/colocated.svg (the colocated
scenario; -replot redraws both).

Flags:
`

type options struct {
	levels       []int
	modes        []string
	repeat       int
	duration     time.Duration
	dupRatio     float64
	workers      int
	maxConns     int
	batchSize    int
	batchWait    time.Duration
	queueTimeout time.Duration
	out          string
	hookline     string
	inProcess    bool
	cpuProfile   string
	maxEvents    int
	rate         float64
	drainTimeout time.Duration
	keep         bool
	colocated    bool
	noDrain      bool
	replot       bool
	pgURL        string
	verbose      bool
	// The scenarios and the drain scenarios' settings.
	scenarios []string
	backlog   int
	keys      int
	hotEvents int
	latency   time.Duration
	fanout    int
	// processing: the runs of each round (processingRuns, in order).
	processing []string
	// colocated: the concurrent senders (-c's first level if given, else 64).
	colocatedSenders int
}

func main() {
	os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
}

func realMain(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == textbookWorkerFlag {
		return textbookMain(args[1:], stdout, stderr)
	}
	o, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "hookline-bench:", err)
		return 2
	}
	if o.replot {
		if err := replot(o.out); err != nil {
			fmt.Fprintln(stderr, "hookline-bench:", err)
			return 1
		}
		return 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := run(ctx, o, stdout)
	if err != nil {
		fmt.Fprintln(stderr, "hookline-bench:", err)
		return 1
	}
	if !rep.OK {
		fmt.Fprintln(stderr, "hookline-bench: correctness check FAILED (see LOST/DOUBLE above)")
		return 1
	}
	return 0
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("hookline-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usageHeader)
		fs.PrintDefaults()
	}
	var o options
	levels := fs.String("c", "16,64,128", "concurrency levels: comma-separated numbers of concurrent senders (the colocated scenario: the first; 64 when not given)")
	modes := fs.String("modes", "naive,batched", "modes to run, in order at each level: naive (ingest.batch: false), batched (group commit), traced (group commit, every span exported over OTLP/HTTP to a loopback collector)")
	fs.DurationVar(&o.duration, "d", 10*time.Second, "load duration per level and mode (ingest), per run (colocated)")
	fs.IntVar(&o.repeat, "repeat", 1, "runs of each level and mode, the modes taking turns (naive, batched, naive, …) so that both meet the same machine; the summary gives medians and batched/naive of the medians")
	fs.Float64Var(&o.dupRatio, "dup", 0.10, "share of requests that re-send an already accepted event (0..0.9)")
	fs.IntVar(&o.workers, "workers", 0, "hookline workers, and the textbook worker's (0: hookline's default)")
	fs.IntVar(&o.maxConns, "max-conns", 0, "hookline database.max_conns, and the textbook worker's pool size (0: hookline's default)")
	fs.IntVar(&o.batchSize, "batch-size", 0, "hookline ingest.batch_size (0: hookline's default)")
	fs.DurationVar(&o.batchWait, "batch-wait", 0, "hookline ingest.batch_wait (0: hookline's default)")
	fs.DurationVar(&o.queueTimeout, "queue-timeout", 0, "hookline ingest.queue_timeout (0: hookline's default)")
	fs.StringVar(&o.out, "out", "bench-results", "directory for results.json and chart.svg (empty: write nothing)")
	fs.StringVar(&o.hookline, "hookline", "", "hookline binary to run (default: go build ./cmd/hookline of this module)")
	fs.BoolVar(&o.inProcess, "inprocess", false, "run hookline in this process (internal/app) instead of a subprocess; CPU and RSS then include the load generator")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "with -inprocess: write a CPU profile of each run's load phase to FILE-<mode>-<c>.prof")
	fs.IntVar(&o.maxEvents, "max-events", 0, "stop a run after this many new events (0: no limit; the duration still applies)")
	fs.Float64Var(&o.rate, "rate", 0, "colocated: pace the senders together to at most this many webhooks/s, an arrival rate to sustain (0: closed loop, each sender as fast as answers come)")
	fs.DurationVar(&o.drainTimeout, "drain-timeout", 0, "how long to wait for accepted events to be processed (default 120s + 10 x -d; in the drain scenarios 120s + 30ms per event)")
	fs.StringVar(&o.pgURL, "pg", "", "use this PostgreSQL server (a URL whose role may CREATE DATABASE) instead of a throwaway cluster")
	fs.BoolVar(&o.colocated, "colocated", false, "run one hookline --role all during the load (workers compete with ingest for the same CPUs) instead of the default: --role ingest during the load, then a --role worker process that drains the queue (processed/s is measured over that drain)")
	fs.BoolVar(&o.noDrain, "no-drain", false, "diagnostic: measure the load phase only; do not wait for processing and do not check counts (CHECK shows unchecked)")
	fs.BoolVar(&o.replot, "replot", false, "only redraw <out>/chart.svg (and <out>/colocated.svg, with colocated runs) from <out>/results.json")
	fs.BoolVar(&o.keep, "keep", false, "keep the temporary directory (Postgres data and logs) and each run's database (with -pg: on that server, to inspect; drop them yourself)")
	fs.BoolVar(&o.verbose, "v", false, "log progress")
	short := fs.Bool("short", false, "smoke run: one level (16 senders), 2s per mode, drain backlogs of 2,000 events (hot key: 200) (-c, -d, -backlog and -hot-events still apply)")
	scenarios, procRuns := scenarioFlags(fs, &o)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if *short {
		o.applyShort(fs, levels)
	}
	if err := o.parseScenarios(*scenarios); err != nil {
		return o, err
	}
	if err := o.parseProcessingRuns(*procRuns); err != nil {
		return o, err
	}
	for _, f := range strings.Split(*levels, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 4096 {
			return o, fmt.Errorf("-c: %q is not a concurrency level (1..4096)", f)
		}
		o.levels = append(o.levels, n)
	}
	o.colocatedSenders = colocatedSenders
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "c" {
			o.colocatedSenders = o.levels[0]
		}
	})
	for _, m := range strings.Split(*modes, ",") {
		m = strings.TrimSpace(m)
		if m != modeNaive && m != modeBatched && m != modeTraced {
			return o, fmt.Errorf("-modes: %q: want naive, batched or traced", m)
		}
		o.modes = append(o.modes, m)
	}
	if o.repeat < 1 || o.repeat > 50 {
		return o, fmt.Errorf("-repeat: want 1..50")
	}
	if o.duration <= 0 || o.duration > time.Hour {
		return o, fmt.Errorf("-d: want a duration between 0 and 1h")
	}
	if o.dupRatio < 0 || o.dupRatio > 0.9 {
		return o, fmt.Errorf("-dup: want 0..0.9")
	}
	if o.cpuProfile != "" && !o.inProcess {
		return o, fmt.Errorf("-cpuprofile needs -inprocess (profile a subprocess with perf, or pprof endpoints)")
	}
	return o, nil
}

// Ingest modes: one transaction per request, group commit, and group
// commit with every span exported (tracing.otlp_endpoint set to the
// loopback destination, which drops them; sample_ratio 1).
const (
	modeNaive   = "naive"
	modeBatched = "batched"
	modeTraced  = "traced"
)

// applyShort sets -short's values of the flags not given explicitly.
func (o *options) applyShort(fs *flag.FlagSet, levels *string) {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if !set["c"] {
		*levels = "16"
	}
	if !set["d"] {
		o.duration = 2 * time.Second
	}
	if !set["backlog"] {
		o.backlog = 2000
	}
	if !set["hot-events"] {
		o.hotEvents = 200
	}
}

// scenarioFlags declares -scenario and -processing-runs (returned) and the
// drain scenarios' other flags.
func scenarioFlags(fs *flag.FlagSet, o *options) (scenarios, procRuns *string) {
	sc := fs.String("scenario", "all", "scenarios to run, comma-separated: ingest, ordering, fanout, processing, colocated, or all (see above)")
	fs.IntVar(&o.backlog, "backlog", 20000, "ordering, fanout and processing: new events per run (the backlog the worker drains; processing: try -backlog 10000 and -backlog 100000)")
	fs.IntVar(&o.keys, "keys", 10000, "ordering: distinct ordering keys (data.object.id values) of the unordered and ordered runs")
	fs.IntVar(&o.hotEvents, "hot-events", 2000, "ordering: events of the hot-key run (all with one key)")
	fs.DurationVar(&o.latency, "latency", 2*time.Millisecond, "ordering: how long the destination holds each request in the hot-key run")
	fs.IntVar(&o.fanout, "destinations", 3, "fanout: destinations of the fanout-N run (2..16)")
	runs := fs.String("processing-runs", strings.Join(processingRuns, ","), "processing: the runs of each round, comma-separated, in turn: textbook, per-event, batched")
	return sc, runs
}

// parseScenarios reads -scenario and checks the drain scenarios' flags.
func (o *options) parseScenarios(list string) error {
	for _, f := range strings.Split(list, ",") {
		switch f = strings.TrimSpace(f); {
		case f == "all":
			o.scenarios = allScenarios
			return o.checkDrainFlags()
		case slices.Contains(allScenarios, f) && !slices.Contains(o.scenarios, f):
			o.scenarios = append(o.scenarios, f)
		default:
			return fmt.Errorf("-scenario: %q: want ingest, ordering, fanout, processing, colocated or all (each once)", f)
		}
	}
	return o.checkDrainFlags()
}

// parseProcessingRuns reads -processing-runs.
func (o *options) parseProcessingRuns(list string) error {
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		if !slices.Contains(processingRuns, f) || slices.Contains(o.processing, f) {
			return fmt.Errorf("-processing-runs: %q: want textbook, per-event or batched (each once)", f)
		}
		o.processing = append(o.processing, f)
	}
	return nil
}

func (o *options) checkDrainFlags() error {
	switch {
	case o.backlog < 1 || o.backlog > 1_000_000:
		return fmt.Errorf("-backlog: want 1..1000000")
	case o.keys < 1:
		return fmt.Errorf("-keys: want at least 1")
	case o.hotEvents < 1 || o.hotEvents > 1_000_000:
		return fmt.Errorf("-hot-events: want 1..1000000")
	case o.latency < 0 || o.latency > time.Second:
		return fmt.Errorf("-latency: want 0..1s")
	case o.fanout < 2 || o.fanout > 16:
		return fmt.Errorf("-destinations: want 2..16")
	}
	return nil
}
