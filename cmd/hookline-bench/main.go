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
// Usage:
//
//	go run ./cmd/hookline-bench [flags]     (make bench)
//	go run ./cmd/hookline-bench -short      (smoke: one level, 2 s)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const usageHeader = `hookline-bench — side-by-side ingest benchmark of hookline (naive vs group commit)

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

Results: <out>/results.json and <out>/chart.svg (default ./bench-results).

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
	drainTimeout time.Duration
	keep         bool
	colocated    bool
	noDrain      bool
	replot       bool
	pgURL        string
	verbose      bool
}

func main() {
	os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
}

func realMain(args []string, stdout, stderr io.Writer) int {
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
	levels := fs.String("c", "16,64,128", "concurrency levels: comma-separated numbers of concurrent senders")
	modes := fs.String("modes", "naive,batched", "modes to run, in order at each level: naive (ingest.batch: false), batched (group commit)")
	fs.DurationVar(&o.duration, "d", 10*time.Second, "load duration per level and mode")
	fs.IntVar(&o.repeat, "repeat", 1, "runs of each level and mode, the modes taking turns (naive, batched, naive, …) so that both meet the same machine; the summary gives medians and batched/naive of the medians")
	fs.Float64Var(&o.dupRatio, "dup", 0.10, "share of requests that re-send an already accepted event (0..0.9)")
	fs.IntVar(&o.workers, "workers", 0, "hookline workers (0: hookline's default)")
	fs.IntVar(&o.maxConns, "max-conns", 0, "hookline database.max_conns (0: hookline's default)")
	fs.IntVar(&o.batchSize, "batch-size", 0, "hookline ingest.batch_size (0: hookline's default)")
	fs.DurationVar(&o.batchWait, "batch-wait", 0, "hookline ingest.batch_wait (0: hookline's default)")
	fs.DurationVar(&o.queueTimeout, "queue-timeout", 0, "hookline ingest.queue_timeout (0: hookline's default)")
	fs.StringVar(&o.out, "out", "bench-results", "directory for results.json and chart.svg (empty: write nothing)")
	fs.StringVar(&o.hookline, "hookline", "", "hookline binary to run (default: go build ./cmd/hookline of this module)")
	fs.BoolVar(&o.inProcess, "inprocess", false, "run hookline in this process (internal/app) instead of a subprocess; CPU and RSS then include the load generator")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "with -inprocess: write a CPU profile of each run's load phase to FILE-<mode>-<c>.prof")
	fs.IntVar(&o.maxEvents, "max-events", 0, "stop a run after this many new events (0: no limit; the duration still applies)")
	fs.DurationVar(&o.drainTimeout, "drain-timeout", 0, "how long to wait for accepted events to be processed (default 120s + 10 x -d)")
	fs.StringVar(&o.pgURL, "pg", "", "use this PostgreSQL server (a URL whose role may CREATE DATABASE) instead of a throwaway cluster")
	fs.BoolVar(&o.colocated, "colocated", false, "run one hookline --role all during the load (workers compete with ingest for the same CPUs) instead of the default: --role ingest during the load, then a --role worker process that drains the queue (processed/s is measured over that drain)")
	fs.BoolVar(&o.noDrain, "no-drain", false, "diagnostic: measure the load phase only; do not wait for processing and do not check counts (CHECK shows unchecked)")
	fs.BoolVar(&o.replot, "replot", false, "only redraw <out>/chart.svg from <out>/results.json")
	fs.BoolVar(&o.keep, "keep", false, "keep the temporary directory (Postgres data and logs)")
	fs.BoolVar(&o.verbose, "v", false, "log progress")
	short := fs.Bool("short", false, "smoke run: one level (16 senders), 2s per mode (-c and -d still apply)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if *short { // unless given explicitly
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if !set["c"] {
			*levels = "16"
		}
		if !set["d"] {
			o.duration = 2 * time.Second
		}
	}
	for _, f := range strings.Split(*levels, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 4096 {
			return o, fmt.Errorf("-c: %q is not a concurrency level (1..4096)", f)
		}
		o.levels = append(o.levels, n)
	}
	for _, m := range strings.Split(*modes, ",") {
		m = strings.TrimSpace(m)
		if m != modeNaive && m != modeBatched {
			return o, fmt.Errorf("-modes: %q: want naive or batched", m)
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
	if o.drainTimeout <= 0 {
		o.drainTimeout = 120*time.Second + 10*o.duration
	}
	return o, nil
}

const (
	modeNaive   = "naive"
	modeBatched = "batched"
)
