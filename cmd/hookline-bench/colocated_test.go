package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/internal/config"
	"github.com/hookline/hookline/internal/pgcluster"
)

// The colocated scenario's plan: in -scenario all, batched and per-event
// taking turns each round, at 64 senders unless -c is given (then its
// first level), a load of -d (no backlog), one destination.
func TestPlanColocated(t *testing.T) {
	o, err := parseFlags([]string{"-repeat", "2", "-d", "30s"}, os.Stderr)
	require.NoError(t, err)
	require.Contains(t, o.scenarios, scenarioColocated)
	require.Equal(t, 30*time.Second, o.duration)
	runs := plan(o, scenarioColocated)
	require.Equal(t, []runSpec{
		{scenario: scenarioColocated, name: runColocatedBatched, batch: true, c: 64, round: 1, dests: 1},
		{scenario: scenarioColocated, name: runColocatedUnpaced, batch: true, c: 64, round: 1, dests: 1, unpaced: true},
		{scenario: scenarioColocated, name: runColocatedPerEvent, batch: true, c: 64, round: 1, dests: 1, perEvent: true},
		{scenario: scenarioColocated, name: runColocatedBatched, batch: true, c: 64, round: 2, dests: 1},
		{scenario: scenarioColocated, name: runColocatedUnpaced, batch: true, c: 64, round: 2, dests: 1, unpaced: true},
		{scenario: scenarioColocated, name: runColocatedPerEvent, batch: true, c: 64, round: 2, dests: 1, perEvent: true},
	}, runs)
	var names []string
	for _, s := range runs {
		names = append(names, s.runName(o.repeat))
	}
	require.Equal(t, []string{"colocated_batched_c64_r1", "colocated_unpaced_c64_r1", "colocated_per_event_c64_r1",
		"colocated_batched_c64_r2", "colocated_unpaced_c64_r2", "colocated_per_event_c64_r2"}, names)

	o, err = parseFlags([]string{"-scenario", "colocated", "-c", "32,128"}, os.Stderr)
	require.NoError(t, err)
	require.Equal(t, []string{scenarioColocated}, o.scenarios)
	runs = plan(o, scenarioColocated)
	require.Len(t, runs, 3)
	require.Equal(t, 32, runs[0].c, "-c given: its first level")
	require.Equal(t, "colocated_per_event_c32", runs[2].runName(o.repeat))

	// The default run paces ingest (the default); the unpaced run turns it
	// off; the per-event run selects the per-event path.
	b := &bench{o: o, server: "postgres://u@127.0.0.1:5432/postgres", secret: benchSecret}
	text := b.configYAML(runs[0], "db", "127.0.0.1:1", "http://127.0.0.1:2/hooks/r")
	require.NotContains(t, text, "processing")
	require.NotContains(t, text, "pace")
	text = b.configYAML(runs[1], "db", "127.0.0.1:1", "http://127.0.0.1:2/hooks/r")
	require.Contains(t, text, "  pace: false\n")
	_, err = config.Parse([]byte(text), os.Getenv)
	require.NoError(t, err, text)
	text = b.configYAML(runs[2], "db", "127.0.0.1:1", "http://127.0.0.1:2/hooks/r")
	require.Contains(t, text, "processing:\n  batch: false\n")
	_, err = config.Parse([]byte(text), os.Getenv)
	require.NoError(t, err, text)
}

// series builds a series: samples at ts with accepted a(t) and delivered
// d(t); those after loadEnd are marked Drain.
func series(ts []float64, loadEnd float64, a, d func(t float64) int) []Sample {
	out := make([]Sample, len(ts))
	for i, t := range ts {
		out[i] = Sample{TSec: t, Accepted: a(t), Delivered: d(t), Depth: a(t) - d(t), Drain: t > loadEnd}
	}
	return out
}

func seconds(from, to float64) []float64 {
	var ts []float64
	for t := from; t <= to+1e-9; t++ {
		ts = append(ts, t)
	}
	return ts
}

func TestSteadyFigures(t *testing.T) {
	rate := func(perSec float64) func(float64) int { return func(t float64) int { return int(perSec * t) } }
	// Ramp-up: nothing for the first 2 s, then 1,000/s.
	ramped := func(perSec float64) func(float64) int {
		return func(t float64) int { return int(perSec * max(0, t-2)) }
	}
	// The depth builds up by 200/s and is cleared at the very end: the
	// endpoints' rates match, the slope does not.
	lateCatchUp := func(t float64) int {
		if t >= 10 {
			return int(1000 * t)
		}
		return int(1000*t) - 200*max(0, int(t)-2)
	}
	cases := []struct {
		name   string
		series []Sample
		ok     bool
		want   Colocated
	}{
		{"keeps up, constant lag", series(seconds(0, 10), 10, rate(1000), func(t float64) int { return max(0, int(1000*t)-100) }), true,
			Colocated{FromSec: 2, ToSec: 10, AcceptedPerSec: 1000, DeliveredPerSec: 1000, EndDepth: 100, DepthGrowthPerSec: 0, KeepsUp: true}},
		{"falls behind", series(seconds(0, 10), 10, rate(1000), rate(800)), true,
			Colocated{FromSec: 2, ToSec: 10, AcceptedPerSec: 1000, DeliveredPerSec: 800, EndDepth: 2000, DepthGrowthPerSec: 200}},
		{"ramp-up excluded", series(seconds(0, 10), 10, ramped(1000), ramped(990)), true,
			Colocated{FromSec: 2, ToSec: 10, AcceptedPerSec: 1000, DeliveredPerSec: 990, EndDepth: 80, DepthGrowthPerSec: 10, KeepsUp: true}},
		{"at 96 %: keeps up", series(seconds(0, 10), 10, rate(1000), rate(960)), true,
			Colocated{FromSec: 2, ToSec: 10, AcceptedPerSec: 1000, DeliveredPerSec: 960, EndDepth: 400, DepthGrowthPerSec: 40, KeepsUp: true}},
		{"at 94 %: does not", series(seconds(0, 10), 10, rate(1000), rate(940)), true,
			Colocated{FromSec: 2, ToSec: 10, AcceptedPerSec: 1000, DeliveredPerSec: 940, EndDepth: 600, DepthGrowthPerSec: 60}},
		{"late catch-up: the slope says behind", series(seconds(0, 10), 10, rate(1000), lateCatchUp), true,
			Colocated{FromSec: 2, ToSec: 10, AcceptedPerSec: 1000, DeliveredPerSec: 1000, EndDepth: 0}},
		{"drain samples ignored", series(append(seconds(0, 8), 8.5, 9.5, 10.25), 8.5, func(t float64) int { return int(1000 * min(t, 8.5)) }, rate(500)), true,
			Colocated{FromSec: 2, ToSec: 8.5, AcceptedPerSec: 1000, DeliveredPerSec: 500, EndDepth: 4250, DepthGrowthPerSec: 500}},
		{"2 s load: the whole load", series([]float64{0, 1, 2.5}, 2.5, rate(1000), rate(1000)), true,
			Colocated{FromSec: 0, ToSec: 2.5, AcceptedPerSec: 1000, DeliveredPerSec: 1000, KeepsUp: true}},
		{"nothing accepted", series(seconds(0, 5), 5, rate(0), rate(0)), true, Colocated{FromSec: 2, ToSec: 5}},
		{"one load sample", series([]float64{0, 1}, 0, rate(1000), rate(1000)), false, Colocated{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := steadyFigures(c.series)
			require.Equal(t, c.ok, ok)
			if c.name == "late catch-up: the slope says behind" {
				require.Greater(t, got.DepthGrowthPerSec, keepUpGrowth*1000, "the depth grew most of the way")
				require.False(t, got.KeepsUp)
				got.DepthGrowthPerSec = 0
			}
			require.InDelta(t, c.want.AcceptedPerSec, got.AcceptedPerSec, 1e-6)
			require.InDelta(t, c.want.DeliveredPerSec, got.DeliveredPerSec, 1e-6)
			require.InDelta(t, c.want.DepthGrowthPerSec, got.DepthGrowthPerSec, 1e-6)
			got.AcceptedPerSec, got.DeliveredPerSec, got.DepthGrowthPerSec = c.want.AcceptedPerSec, c.want.DeliveredPerSec, c.want.DepthGrowthPerSec
			require.Equal(t, c.want, got)
		})
	}
}

// The sampler: a tick less than half a second after an unpinned sample
// replaces it; after a pinned one (the first, the load's end) it is
// dropped; samples after the load are marked Drain.
func TestSamplerPush(t *testing.T) {
	s := newSampler(&sink{})
	push := func(ts float64, pin bool) { s.push(Sample{TSec: ts, Drain: s.loadDone}, pin) }
	push(0, true)
	push(0.3, false) // dropped: the first is pinned
	push(1, false)
	push(2, false)
	push(2.2, true) // the load's end replaces the tick at 2
	s.loadDone = true
	push(2.6, false) // dropped
	push(3.2, false)
	push(3.3, true) // the drain's end replaces it
	var ts []float64
	for _, sm := range s.samples {
		ts = append(ts, sm.TSec)
	}
	require.Equal(t, []float64{0, 1, 2.2, 3.3}, ts)
	require.False(t, s.samples[2].Drain)
	require.True(t, s.samples[3].Drain)

	// Live: the counters are read, and stop is safe twice and without a start.
	sk := &sink{hits: map[string]int{}}
	live := newSampler(sk)
	require.Empty(t, live.stop())
	live = newSampler(sk)
	live.start()
	live.accepted.Add(5)
	sk.begin("default", "stripe:e1", "", "e1")
	sk.begin("default", "stripe:e1", "", "e1") // a second forward of e1: one event delivered
	live.endLoad()
	got := live.stop()
	require.Equal(t, got, live.stop())
	require.Equal(t, Sample{TSec: got[1].TSec, Accepted: 5, Delivered: 1, Depth: 4}, got[1])
}

// colocatedResults are two rounds of both runs, with series.
func colocatedResults() []Result {
	mk := func(mode string, round int, del float64) Result {
		s := series(append(seconds(0, 10), 10.5, 11.5, 12.2), 10, func(t float64) int { return int(1000 * min(t, 10)) },
			func(t float64) int { return min(int(del*t), 10000) })
		c, _ := steadyFigures(s)
		return Result{Scenario: scenarioColocated, Mode: mode, Concurrency: 64, Round: round, Accepted: 10000, Destinations: 1,
			AcceptedPerSec: 1000, P99ms: 20 + float64(round), Series: s, Colocated: &c}
	}
	return []Result{
		mk(runColocatedBatched, 1, 1000), mk(runColocatedPerEvent, 1, 700),
		mk(runColocatedBatched, 2, 990), mk(runColocatedPerEvent, 2, 650),
		mk(runColocatedBatched, 3, 980), mk(runColocatedPerEvent, 3, 600),
	}
}

// colocated.svg: well-formed XML, the median round's runs, redrawn by
// -replot; nothing without colocated runs.
func TestColocatedSVG(t *testing.T) {
	rs := colocatedResults()
	b, p := chartRuns(rs)
	require.Equal(t, 2, b.Round, "the median of 1000, 990, 980")
	require.Equal(t, runColocatedPerEvent, p.Mode)
	require.Equal(t, 2, p.Round)

	rep := &Report{Results: rs, Machine: Machine{CPUs: 2, Postgres: "PostgreSQL 15", Fsync: "on"}, Settings: map[string]any{"duration": "10s"}}
	svg := colocatedSVG(rep)
	requireWellFormed(t, svg)
	require.True(t, strings.HasPrefix(svg, "<svg"))
	require.Equal(t, 6, strings.Count(svg, "<polyline"), "accepted/s, delivered/s and depth, for each run")
	require.Contains(t, svg, "round 2 of 3")
	require.Contains(t, svg, "per-event: steady 1000 accepted/s, 650 delivered/s")
	require.Contains(t, svg, "falls behind")

	// One run, a short series: still well formed.
	one := []Result{{Scenario: scenarioColocated, Mode: runColocatedPerEvent, Round: 1, Series: []Sample{{TSec: 0}, {TSec: 1.5, Accepted: 3, Delivered: 1, Depth: 2}}}}
	requireWellFormed(t, colocatedSVG(&Report{Results: one}))
	require.Empty(t, colocatedSVG(&Report{Results: []Result{{Mode: modeBatched}}}))

	dir := t.TempDir()
	require.NoError(t, writeResults(dir, &Report{Results: rs, Summary: summarize(rs), Settings: map[string]any{}}))
	_, err := os.Stat(filepath.Join(dir, "chart.svg"))
	require.True(t, os.IsNotExist(err), "no ingest runs: no chart.svg")
	require.NoError(t, os.Remove(filepath.Join(dir, "colocated.svg")))
	require.NoError(t, replot(dir))
	_, err = os.Stat(filepath.Join(dir, "chart.svg"))
	require.True(t, os.IsNotExist(err), "-replot of colocated runs only: no chart.svg either")
	raw, err := os.ReadFile(filepath.Join(dir, "colocated.svg"))
	require.NoError(t, err)
	requireWellFormed(t, string(raw))

	raw, err = os.ReadFile(filepath.Join(dir, "results.json"))
	require.NoError(t, err)
	var back Report
	require.NoError(t, json.Unmarshal(raw, &back))
	require.Equal(t, rs[0].Series, back.Results[0].Series)
	require.Contains(t, string(raw), `"steady_delivered_per_s"`)
}

func requireWellFormed(t *testing.T, svg string) {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(svg))
	depth, elems := 0, 0
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err, svg)
		switch tok.(type) {
		case xml.StartElement:
			depth++
			elems++
		case xml.EndElement:
			depth--
		}
	}
	require.Zero(t, depth)
	require.Greater(t, elems, 10)
}

// The summary: medians over the steady part, rounds kept up, the targets
// with their rounds, and the table's rows.
func TestColocatedSummary(t *testing.T) {
	rs := colocatedResults()
	ss := summarize(rs)
	require.Len(t, ss, 2)
	require.Equal(t, scenarioColocated, ss[0].Scenario)
	require.Equal(t, &ColocatedSummary{AcceptedPerSec: 1000, DeliveredPerSec: 990, MinDelivered: 980, MaxDelivered: 1000,
		EndDepth: 100, DepthGrowthPerSec: 10, RoundsKeptUp: 3}, roundSummary(ss[0].Colocated))
	require.Equal(t, 0, ss[1].Colocated.RoundsKeptUp)
	require.Equal(t, 22.0, ss[0].P99ms)

	targets := colocatedTargets(rs)
	require.Equal(t, []Target{
		{Scenario: scenarioColocated, Name: "colocated-batched delivered/s ≥ 3000 while keeping up", Value: 990,
			Measured: "median 990/s, kept up in 3 of 3 rounds", Rounds: 3},
		{Scenario: scenarioColocated, Name: "colocated-batched p99 ack ≤ 50 ms", Value: 22, Measured: "median 22.0 ms", Met: true, Rounds: 3, RoundsMet: 3},
	}, roundTargets(targets))
	require.Nil(t, colocatedTargets(rs[1:2]), "no batched run, no targets")

	var out bytes.Buffer
	printFooter(&out, &Report{Results: rs, Summary: ss, Targets: targets})
	text := out.String()
	require.Contains(t, text, "colocated summary: medians")
	require.Regexp(t, `colocated-batched +3 +1000 +990 +\(980-1000\) +22\.0 +100 +\+10 +3 of 3`, text)
	require.Regexp(t, `colocated-per-event +3 +1000 +650 +\(600-700\) +22\.0 +3500 +\+350 +0 of 3`, text)
	require.Contains(t, text, "target colocated-batched delivered/s ≥ 3000 while keeping up: NOT met, median 990/s, kept up in 3 of 3 rounds (0 of 3 rounds)")
	require.Contains(t, text, "target colocated-batched p99 ack ≤ 50 ms: met, median 22.0 ms (3 of 3 rounds)")
	require.Contains(t, text, "LOST=0 DOUBLE=0")

	out.Reset()
	printColocatedHeader(&out, options{colocatedSenders: 64, duration: 10 * time.Second})
	printColocatedRow(&out, &rs[1])
	require.Contains(t, out.String(), "64 senders for 10s")
	require.Regexp(t, `colocated-per-event +1 +64 +10000 +1000 +700 +21\.0 .* NO .*LOST=0 DOUBLE=0`, out.String())
}

func roundSummary(s *ColocatedSummary) *ColocatedSummary {
	c := *s
	c.AcceptedPerSec, c.DeliveredPerSec, c.DepthGrowthPerSec = round2(c.AcceptedPerSec), round2(c.DeliveredPerSec), round2(c.DepthGrowthPerSec)
	c.MinDelivered, c.MaxDelivered = round2(c.MinDelivered), round2(c.MaxDelivered)
	return &c
}

func roundTargets(ts []Target) []Target {
	for i := range ts {
		ts[i].Value = round2(ts[i].Value)
	}
	return ts
}

// TestSmokeColocated runs the colocated scenario in miniature (8 senders,
// 3 s per run) and checks what must hold anywhere: the counts, a series
// that ends drained, and the chart.
func TestSmokeColocated(t *testing.T) {
	if _, err := pgcluster.FindBinDir(); err != nil {
		t.Skipf("needs local PostgreSQL binaries: %v", err)
	}
	out := t.TempDir()
	o, err := parseFlags([]string{"-scenario", "colocated", "-c", "8", "-d", "3s", "-drain-timeout", "60s", "-out", out}, os.Stderr)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var stdout bytes.Buffer
	rep, err := run(ctx, o, &stdout)
	t.Log("\n" + stdout.String())
	require.NoError(t, err)
	require.True(t, rep.OK, "LOST/DOUBLE or a problem: see the table")
	require.Len(t, rep.Results, len(colocatedRuns))
	for _, r := range rep.Results {
		require.Positive(t, r.Accepted, r.Mode)
		require.Zero(t, r.DupSent, r.Mode)
		require.Equal(t, r.Accepted, r.Jobs, r.Mode)
		require.NotNil(t, r.Colocated, r.Mode)
		require.Greater(t, len(r.Series), 3, r.Mode)
		last := r.Series[len(r.Series)-1]
		require.Equal(t, Sample{TSec: last.TSec, Accepted: r.Accepted, Delivered: r.Accepted, Drain: true}, last, "%s: drained", r.Mode)
	}
	require.Len(t, rep.Targets, 2)
	require.Contains(t, stdout.String(), "colocated summary")
	svg, err := os.ReadFile(filepath.Join(out, "colocated.svg"))
	require.NoError(t, err)
	requireWellFormed(t, string(svg))
}
