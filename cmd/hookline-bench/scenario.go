package main

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"
)

// Scenarios. ingest is the side-by-side ingest benchmark (naive vs group
// commit at each -c level, -d each). ordering and fanout measure the
// drain of a backlog of -backlog events by a --role worker process:
// ordering an unordered source, the same source ordered by
// data.object.id over -keys keys, and one hot key behind a destination
// that takes -latency per request; fanout one destination against
// -destinations destinations that all match; processing hookline's worker,
// per event and batched, against the textbook design (textbook.go);
// colocated one --role all process under load, batched and per event, and
// whether its workers keep up (colocated.go).
const (
	scenarioIngest     = "ingest"
	scenarioOrdering   = "ordering"
	scenarioFanout     = "fanout"
	scenarioProcessing = "processing"
	scenarioColocated  = "colocated"
)

var allScenarios = []string{scenarioIngest, scenarioOrdering, scenarioFanout, scenarioProcessing, scenarioColocated}

// The runs of the drain scenarios (Result.Mode). The processing scenario's
// are the textbook River worker, hookline's worker with processing.batch:
// false, and with the default (batched).
const (
	runUnordered = "unordered"
	runOrdered   = "ordered"
	runHotKey    = "hot-key"
	runTextbook  = "textbook"
	runPerEvent  = "per-event"
	runBatched   = "batched"
)

// processingRuns are the processing scenario's runs, in the order they
// take turns (-processing-runs chooses among them).
var processingRuns = []string{runTextbook, runPerEvent, runBatched}

// The targets for processing: batched hookline drains at least
// twice the textbook worker's rate and at least 5,000 events/s with a
// 100,000-event backlog, at no more than 0.3 ms of CPU (worker and
// Postgres) per event, and its worker's peak RSS stays under 150 MB.
const (
	processingTargetRatio   = 2.00
	processingTargetRate    = 5000
	processingTargetCPUms   = 0.30
	processingTargetRSSMB   = 150
	processingTargetBacklog = 100_000
)

func fanoutRun(dests int) string { return fmt.Sprintf("fanout-%d", dests) }

// orderingTarget is the target: ordered with many keys keeps at
// least 70 % of the unordered drain rate.
const orderingTarget = 0.70

// drainSenders is the load generator's concurrency when it builds a drain
// scenario's backlog (group commit), and backlogLoadLimit how long it may
// take.
const (
	drainSenders     = 64
	backlogLoadLimit = 5 * time.Minute
)

// runSpec is one run.
type runSpec struct {
	scenario string
	name     string // Result.Mode: naive, batched, unordered, ordered, hot-key, fanout-N, textbook, per-event, colocated-batched, …
	batch    bool   // ingest.batch
	c        int    // concurrent senders
	round    int
	events   int           // new events to send; 0: as many as -d (and -max-events) allow
	keys     int           // distinct data.object.id values (objectKey); 0: one per event
	ordered  bool          // ordering: {key: json:data.object.id, by: json:created}
	dests    int           // destinations, all matching every event
	latency  time.Duration // the loopback destination holds each request this long
	perEvent bool          // processing.batch: false
	unpaced  bool          // ingest.pace: false
	textbook bool          // the textbook River worker (textbook.go) instead of hookline
}

// runName names the run's database, sink, logs and event ids. The
// processing scenario's are prefixed "proc_": its batched run would
// otherwise share the ingest scenario's batched names.
func (s runSpec) runName(repeat int) string {
	name := fmt.Sprintf("%s_c%d", strings.ReplaceAll(s.name, "-", "_"), s.c)
	if s.scenario == scenarioProcessing {
		name = "proc_" + name
	}
	if repeat > 1 {
		name += fmt.Sprintf("_r%d", s.round)
	}
	return name
}

// destNames are the names of the run's destinations, as hookline reports
// them (Hookline-Destination, hookline_event_destinations.destination).
func (s runSpec) destNames() []string {
	if s.dests <= 1 {
		return []string{"default"}
	}
	names := make([]string, s.dests)
	for i := range names {
		names[i] = fmt.Sprintf("d%d", i+1)
	}
	return names
}

// plan lists a scenario's runs in the order they run: the runs of a round
// take turns, so that a slow spell of a shared machine falls on all of
// them rather than on one's.
func plan(o options, scenario string) []runSpec {
	var out []runSpec
	if scenario == scenarioIngest {
		for _, c := range o.levels {
			for round := 1; round <= o.repeat; round++ {
				for _, mode := range o.modes {
					out = append(out, runSpec{scenario: scenario, name: mode, batch: mode != modeNaive, c: c, round: round, dests: 1})
				}
			}
		}
		return out
	}
	if scenario == scenarioColocated { // like ingest: a load of -d, no backlog
		for round := 1; round <= o.repeat; round++ {
			for _, name := range colocatedRuns {
				out = append(out, runSpec{scenario: scenario, name: name, batch: true, c: o.colocatedSenders, round: round, dests: 1,
					perEvent: name == runColocatedPerEvent, unpaced: name == runColocatedUnpaced})
			}
		}
		return out
	}
	for round := 1; round <= o.repeat; round++ {
		base := runSpec{scenario: scenario, batch: true, c: drainSenders, round: round, events: o.backlog, dests: 1}
		switch scenario {
		case scenarioOrdering:
			un, ord, hot := base, base, base
			un.name, un.keys = runUnordered, o.keys
			ord.name, ord.keys, ord.ordered = runOrdered, o.keys, true
			hot.name, hot.keys, hot.ordered, hot.events, hot.latency = runHotKey, 1, true, o.hotEvents, o.latency
			out = append(out, un, ord, hot)
		case scenarioFanout:
			one, many := base, base
			one.name = fanoutRun(1)
			many.name, many.dests = fanoutRun(o.fanout), o.fanout
			out = append(out, one, many)
		case scenarioProcessing:
			for _, name := range o.processing {
				run := base
				run.name, run.textbook, run.perEvent = name, name == runTextbook, name == runPerEvent
				out = append(out, run)
			}
		}
	}
	return out
}

const drainFormat = "%-10s %5s %6s %6s %5s %11s %12s %13s %9s %8s %8s %8s %s\n"

func printDrainHeader(w io.Writer, scenario string, o options) {
	switch scenario {
	case scenarioOrdering:
		fmt.Fprintf(w, "\nordering: drain of %d events (hot key: %d, the destination holding each request %s), by a --role worker\n",
			o.backlog, o.hotEvents, o.latency)
	case scenarioFanout:
		fmt.Fprintf(w, "\nfan-out: drain of %d events to 1 and to %d destinations (all matching), by a --role worker\n", o.backlog, o.fanout)
	case scenarioProcessing:
		fmt.Fprintf(w, "\nprocessing: drain of %d events by the textbook River worker (HL: its CPU) and by a --role worker per event (processing.batch: false) and batched\n",
			o.backlog)
	}
	fmt.Fprintf(w, drainFormat, "RUN", "ROUND", "EVENTS", "KEYS", "DESTS", "ACCEPTED/s", "PROCESSED/s", "DELIVERIES/s", "STEADY/s", "BOUND/s", "HL s/1k", "PG s/1k", "CHECK")
}

func printDrainRow(w io.Writer, r *Result) {
	keys, bound, accepted := "-", "-", "-" // accepted: the textbook backlog is written, not sent
	if r.Keys > 0 {
		keys = fmt.Sprint(r.Keys)
	}
	if r.BoundPerSec > 0 {
		bound = fmt.Sprintf("%.0f", r.BoundPerSec)
	}
	if r.AcceptedPerSec > 0 {
		accepted = fmt.Sprintf("%.0f", r.AcceptedPerSec)
	}
	fmt.Fprintf(w, drainFormat, r.Mode, fmt.Sprint(r.Round), fmt.Sprint(r.Accepted), keys, fmt.Sprint(r.Destinations),
		accepted, fmt.Sprintf("%.0f", r.ProcessedPerSec), fmt.Sprintf("%.0f", r.DeliveriesPerSec),
		fmt.Sprintf("%.0f", r.SteadyPerSec), bound, fmt.Sprintf("%.3f", r.ProcCPUPer1k), fmt.Sprintf("%.3f", r.ProcPGCPUPer1k), checkText(r))
}

// checkText is a run's CHECK column.
func checkText(r *Result) string {
	check := fmt.Sprintf("LOST=%d DOUBLE=%d", r.Lost, r.Double)
	if r.Unchecked {
		check = "unchecked (-no-drain)"
	}
	if r.Ordered && !r.Unchecked {
		if r.OrderViolations+r.Overlaps+r.Inversions+r.Missing == 0 {
			check += fmt.Sprintf(" ORDER ok (%d lines)", r.OrderLines)
		} else {
			check += fmt.Sprintf(" ORDER FAILED: %d of %d lines out of order, %d overlaps, %d real-time inversions, %d places not forwarded in their line",
				r.OrderViolations, r.OrderLines, r.Overlaps, r.Inversions, r.Missing)
		}
	}
	// The drain scenarios' noise is that of the drain; the ingest and
	// colocated scenarios', that of the load.
	switch drain := r.Scenario != "" && r.Scenario != scenarioIngest && r.Scenario != scenarioColocated; {
	case drain && r.ProcOtherCPUPct >= 5:
		check += fmt.Sprintf(" [other processes used %.0f%% of the CPU during the drain: noisy]", r.ProcOtherCPUPct)
	case !drain && r.OtherCPUPct >= 5:
		check += fmt.Sprintf(" [other processes used %.0f%% of the CPU: noisy]", r.OtherCPUPct)
	}
	if r.Problem != "" {
		check += " (" + r.Problem + ")"
	}
	return check
}

// Ratio compares two runs of a drain scenario: num/den of the medians, and
// of each round's pair.
type Ratio struct {
	Scenario  string    `json:"scenario"`
	Name      string    `json:"name"`
	OfMedians float64   `json:"of_medians"`
	Rounds    []float64 `json:"rounds"`
}

// ratioOf is num/den of f over the results of scenario (false when either
// has no runs).
func ratioOf(rs []Result, scenario, name, num, den string, f func(Result) float64) (Ratio, bool) {
	var nv, dv []float64
	byRound := map[int]float64{}
	for _, r := range rs {
		if r.Scenario == scenario && r.Mode == den {
			dv = append(dv, f(r))
			byRound[r.Round] = f(r)
		}
	}
	out := Ratio{Scenario: scenario, Name: name}
	for _, r := range rs {
		if r.Scenario == scenario && r.Mode == num {
			nv = append(nv, f(r))
			if d := byRound[r.Round]; d > 0 {
				out.Rounds = append(out.Rounds, round2(f(r)/d))
			}
		}
	}
	if len(nv) == 0 || len(dv) == 0 || median(dv) == 0 {
		return out, false
	}
	out.OfMedians = round2(median(nv) / median(dv))
	return out, true
}

func round2(v float64) float64 { return math.Round(v*100) / 100 }

// drainRatios are the drain scenarios' comparisons.
func drainRatios(rs []Result, fanout int) []Ratio {
	var out []Ratio
	add := func(r Ratio, ok bool) {
		if ok {
			out = append(out, r)
		}
	}
	proc := func(r Result) float64 { return r.ProcessedPerSec }
	deliv := func(r Result) float64 { return r.DeliveriesPerSec }
	add(ratioOf(rs, scenarioOrdering, "ordered/unordered processed/s", runOrdered, runUnordered, proc))
	many, one := fanoutRun(fanout), fanoutRun(1)
	add(ratioOf(rs, scenarioFanout, many+"/"+one+" events/s", many, one, proc))
	add(ratioOf(rs, scenarioFanout, many+"/"+one+" deliveries/s", many, one, deliv))
	add(ratioOf(rs, scenarioProcessing, ratioBatchedTextbook, runBatched, runTextbook, proc))
	add(ratioOf(rs, scenarioProcessing, ratioPerEventTextbook, runPerEvent, runTextbook, proc))
	add(ratioOf(rs, scenarioProcessing, ratioTextbookBatchedCPU, runTextbook, runBatched, processingCPU))
	return out
}

// The processing scenario's ratios (Ratio.Name).
const (
	ratioBatchedTextbook  = runBatched + "/" + runTextbook + " processed/s"
	ratioPerEventTextbook = runPerEvent + "/" + runTextbook + " processed/s"
	// The CPU one event costs (worker and Postgres), the textbook worker's
	// over batched hookline's: on cores that both runs keep busy, the ratio
	// of their rates comes near it.
	ratioTextbookBatchedCPU = runTextbook + "/" + runBatched + " CPU per event"
)

// processingCPU is a drain's CPU per event, worker and Postgres (s per
// 1,000 events: ms per event).
func processingCPU(r Result) float64 { return r.ProcCPUPer1k + r.ProcPGCPUPer1k }

// printDrainSummary prints a drain scenario's medians and ratios.
func printDrainSummary(w io.Writer, rep *Report, scenario string) {
	fmt.Fprintf(w, "%s summary: medians (min-max) of each run's rounds, the runs having taken turns\n", scenario)
	const f = "%-10s %6s %5s %5s %12s %15s %13s %9s %8s %8s %8s\n"
	fmt.Fprintf(w, f, "RUN", "KEYS", "DESTS", "RUNS", "PROCESSED/s", "(min-max)", "DELIVERIES/s", "STEADY/s", "HL s/1k", "PG s/1k", "BOUND/s")
	for _, s := range rep.Summary {
		if s.Scenario != scenario {
			continue
		}
		keys, bound := "-", "-"
		if s.Keys > 0 {
			keys = fmt.Sprint(s.Keys)
		}
		if s.BoundPerSec > 0 {
			bound = fmt.Sprintf("%.0f", s.BoundPerSec)
		}
		fmt.Fprintf(w, f, s.Mode, keys, fmt.Sprint(s.Destinations), fmt.Sprint(s.Runs), fmt.Sprintf("%.0f", s.ProcessedPerSec),
			fmt.Sprintf("(%.0f-%.0f)", s.MinProcessed, s.MaxProcessed), fmt.Sprintf("%.0f", s.DeliveriesPerSec),
			fmt.Sprintf("%.0f", s.SteadyPerSec), fmt.Sprintf("%.3f", s.ProcCPUPer1k), fmt.Sprintf("%.3f", s.ProcPGCPUPer1k), bound)
		if s.Mode == runHotKey && s.BoundPerSec > 0 && s.SteadyPerSec > 0 {
			fmt.Fprintf(w, "  hot key: %.0f events/s steady against a bound of %.0f/s (1/latency; requests held %.2f ms): %.2f ms per event, %.2f ms more than the destination's\n",
				s.SteadyPerSec, s.BoundPerSec, s.HeldMs, 1000/s.SteadyPerSec, 1000/s.SteadyPerSec-s.HeldMs)
		}
	}
	for _, r := range rep.Ratios {
		if r.Scenario != scenario {
			continue
		}
		fmt.Fprintf(w, "  %s: %.2f of the medians (rounds: %s)", r.Name, r.OfMedians, joinRatios(r.Rounds))
		if r.Name == ratioTextbookBatchedCPU {
			fmt.Fprint(w, "; on busy cores batched/textbook processed/s comes near it")
		}
		if r.Name == "ordered/unordered processed/s" {
			if r.OfMedians >= orderingTarget {
				fmt.Fprintf(w, "; target ≥ %.2f met", orderingTarget)
			} else {
				fmt.Fprintf(w, "; target ≥ %.2f NOT met: ordered is %.0f %% slower", orderingTarget, 100*(1-r.OfMedians))
			}
		}
		fmt.Fprintln(w)
	}
	if scenario == scenarioProcessing {
		printProcessingSummary(w, rep)
	}
}

func joinRatios(vs []float64) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = fmt.Sprintf("%.2f", v)
	}
	return strings.Join(parts, " ")
}

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }
