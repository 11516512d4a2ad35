package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/internal/config"
	"github.com/hookline/hookline/internal/pgcluster"
)

// TestMain lets the test binary be the textbook worker, as hookline-bench
// is: the processing scenario re-executes os.Executable().
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == textbookWorkerFlag {
		os.Exit(textbookMain(os.Args[2:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// The processing scenario's plan: textbook, per-event and batched taking
// turns in each round, named apart from the ingest scenario's batched runs;
// -processing-runs picks among them.
func TestPlanProcessing(t *testing.T) {
	o, err := parseFlags([]string{"-repeat", "2", "-backlog", "1000"}, os.Stderr)
	require.NoError(t, err)
	require.Contains(t, o.scenarios, scenarioProcessing)
	runs := plan(o, scenarioProcessing)
	require.Len(t, runs, 6)
	base := runSpec{scenario: scenarioProcessing, batch: true, c: drainSenders, round: 1, events: 1000, dests: 1}
	tb, pe, ba := base, base, base
	tb.name, tb.textbook = runTextbook, true
	pe.name, pe.perEvent = runPerEvent, true
	ba.name = runBatched
	require.Equal(t, []runSpec{tb, pe, ba}, runs[:3])
	require.Equal(t, 2, runs[3].round)
	var names []string
	for _, s := range runs {
		names = append(names, s.runName(o.repeat))
	}
	require.Equal(t, []string{"proc_textbook_c64_r1", "proc_per_event_c64_r1", "proc_batched_c64_r1",
		"proc_textbook_c64_r2", "proc_per_event_c64_r2", "proc_batched_c64_r2"}, names)
	require.NotEqual(t, plan(o, scenarioIngest)[1].runName(o.repeat), runs[2].runName(o.repeat))

	o, err = parseFlags([]string{"-scenario", "processing", "-processing-runs", "batched, textbook"}, os.Stderr)
	require.NoError(t, err)
	require.Equal(t, []string{scenarioProcessing}, o.scenarios)
	require.Equal(t, 20000, o.backlog)
	runs = plan(o, scenarioProcessing)
	require.Len(t, runs, 2)
	require.Equal(t, runBatched, runs[0].name)
	require.True(t, runs[1].textbook)
}

func TestProcessingFlags(t *testing.T) {
	o, err := parseFlags(nil, os.Stderr)
	require.NoError(t, err)
	require.Equal(t, processingRuns, o.processing)
	for _, bad := range [][]string{{"-processing-runs", "naive"}, {"-processing-runs", "textbook,textbook"}, {"-processing-runs", ""}} {
		_, err := parseFlags(bad, &bytes.Buffer{})
		require.Error(t, err, "%v", bad)
	}

	to, err := parseTextbookFlags([]string{"-db", "postgres://x/db", "-dest", "http://127.0.0.1:1/hooks/r"}, os.Stderr)
	require.NoError(t, err)
	require.Equal(t, textbookOptions{db: "postgres://x/db", dest: "http://127.0.0.1:1/hooks/r", workers: config.DefaultWorkers, maxConns: config.DefaultPoolSize}, to)
	for _, bad := range [][]string{{"-db", "x"}, {"-dest", "x"}, {"-db", "x", "-dest", "y", "-workers", "0"}, {"-db", "x", "-dest", "y", "extra"}} {
		_, err := parseTextbookFlags(bad, &bytes.Buffer{})
		require.Error(t, err, "%v", bad)
	}
	var stderr bytes.Buffer
	require.Equal(t, 2, realMain([]string{textbookWorkerFlag}, &bytes.Buffer{}, &stderr), "the hidden subcommand")
	require.Contains(t, stderr.String(), "-db and -dest are required")
}

// The per-event run's configuration sets processing.batch: false, after
// the ingest block; the batched run's leaves the default.
func TestConfigYAMLProcessing(t *testing.T) {
	b := &bench{o: options{batchSize: 16}, server: "postgres://u@127.0.0.1:5432/postgres", secret: benchSecret}
	batched := b.configYAML(runSpec{name: runBatched, batch: true, dests: 1}, "db", "127.0.0.1:1", "http://127.0.0.1:2/hooks/r")
	require.NotContains(t, batched, "processing")
	_, err := config.Parse([]byte(batched), os.Getenv)
	require.NoError(t, err, batched)

	perEvent := b.configYAML(runSpec{name: runPerEvent, batch: true, perEvent: true, dests: 1}, "db", "127.0.0.1:1", "http://127.0.0.1:2/hooks/r")
	require.Contains(t, perEvent, "ingest:\n  batch: true\n  batch_size: 16\nprocessing:\n  batch: false\n")
	if _, err := config.Parse([]byte(perEvent), os.Getenv); err != nil {
		require.ErrorContains(t, err, "processing", "rejected for another reason:\n%s", perEvent)
		t.Skipf("hookline does not know processing.batch yet: %v", err)
	}
}

// The processing summary: the ratios to textbook, each run's CPU per event
// and worker peak RSS, and the targets with their rounds; the ingest
// scenario's batched runs (also at c=64) stay apart.
func TestProcessingSummary(t *testing.T) {
	proc := func(mode string, round int, perSec, hl, pg, rss float64) Result {
		return Result{Scenario: scenarioProcessing, Mode: mode, Concurrency: drainSenders, Round: round, Accepted: 20000, Destinations: 1,
			ProcessedPerSec: perSec, ProcCPUPer1k: hl, ProcPGCPUPer1k: pg, WorkerPeakRSSMB: rss}
	}
	rs := []Result{
		{Scenario: scenarioIngest, Mode: modeNaive, Concurrency: 64, Round: 1, AcceptedPerSec: 2000},
		{Scenario: scenarioIngest, Mode: modeBatched, Concurrency: 64, Round: 1, AcceptedPerSec: 10000, ProcessedPerSec: 2000},
		proc(runTextbook, 1, 2000, 0.2, 0.3, 20),
		proc(runPerEvent, 1, 1800, 0.3, 0.5, 50),
		proc(runBatched, 1, 5200, 0.1, 0.1, 60),
		proc(runTextbook, 2, 2600, 0.2, 0.3, 22),
		proc(runPerEvent, 2, 2000, 0.3, 0.5, 52),
		proc(runBatched, 2, 4800, 0.1, 0.2, 64),
	}
	ratios := drainRatios(rs, 3)
	require.Equal(t, []Ratio{
		{Scenario: scenarioProcessing, Name: "batched/textbook processed/s", OfMedians: 2.17, Rounds: []float64{2.6, 1.85}},
		{Scenario: scenarioProcessing, Name: "per-event/textbook processed/s", OfMedians: 0.83, Rounds: []float64{0.9, 0.77}},
		{Scenario: scenarioProcessing, Name: "textbook/batched CPU per event", OfMedians: 2, Rounds: []float64{2.5, 1.67}},
	}, ratios)
	ss := summarize(rs)
	require.Len(t, ss, 5)
	require.Equal(t, 10000.0, ss[1].AcceptedPerSec, "the ingest scenario's batched runs are summarised on their own")
	require.Equal(t, map[string]float64{"64": 5}, speedups(ss))
	require.Len(t, ingestPoints(&Report{Summary: ss}), 2)
	require.Equal(t, 62.0, ss[4].WorkerPeakRSSMB)
	require.Equal(t, 64.0, ss[4].MaxWorkerPeakRSSMB)

	targets := processingTargets(rs, ratios)
	require.Equal(t, []Target{
		{Scenario: scenarioProcessing, Name: "batched/textbook processed/s ≥ 2.00", Value: 2.17, Measured: "2.17× of the medians", Met: true, Rounds: 2, RoundsMet: 1},
		{Scenario: scenarioProcessing, Name: "batched processed/s ≥ 5000", Value: 5000, Measured: "median 5000/s", Met: true, Rounds: 2, RoundsMet: 1,
			Note: "with a backlog of 20000 events; the target is for 100000 (-backlog 100000)"},
		{Scenario: scenarioProcessing, Name: "batched CPU per event ≤ 0.30 ms", Value: 0.25, Measured: "median 0.250 ms (worker and Postgres)", Met: true, Rounds: 2, RoundsMet: 2},
		{Scenario: scenarioProcessing, Name: "batched worker peak RSS ≤ 150 MB", Value: 64, Measured: "largest 64 MB", Met: true, Rounds: 2, RoundsMet: 2,
			Note: "with a backlog of 20000 events; the target is for 100000 (-backlog 100000)"},
	}, targets)
	require.Nil(t, processingTargets(rs[:4], ratios), "no batched run, no targets")

	var out bytes.Buffer
	printFooter(&out, &Report{Results: rs, Summary: ss, Ratios: ratios, Targets: targets})
	text := out.String()
	require.Contains(t, text, "processing summary: medians")
	require.Contains(t, text, "batched/textbook processed/s: 2.17 of the medians (rounds: 2.60 1.85)")
	require.Contains(t, text, "per-event/textbook processed/s: 0.83 of the medians (rounds: 0.90 0.77)")
	require.Contains(t, text, "textbook:  CPU 0.500 ms/event (worker 0.200 + Postgres 0.300); worker peak RSS 21 MB (largest 22)")
	require.Contains(t, text, "batched:   CPU 0.250 ms/event (worker 0.100 + Postgres 0.150); worker peak RSS 62 MB (largest 64)")
	require.Contains(t, text, "target batched/textbook processed/s ≥ 2.00: met, 2.17× of the medians (1 of 2 rounds)")
	require.Contains(t, text, "textbook/batched CPU per event: 2.00 of the medians (rounds: 2.50 1.67); on busy cores batched/textbook processed/s comes near it")
	require.Contains(t, text, "target batched processed/s ≥ 5000: met, median 5000/s (1 of 2 rounds) [with a backlog of 20000 events")
	require.Contains(t, text, "target batched CPU per event ≤ 0.30 ms: met, median 0.250 ms (worker and Postgres) (2 of 2 rounds)")
	require.Contains(t, text, "target batched worker peak RSS ≤ 150 MB: met, largest 64 MB (2 of 2 rounds) [with a backlog of 20000 events")

	rs[4].ProcessedPerSec, rs[7].ProcessedPerSec = 3000, 3000
	rs[4].ProcPGCPUPer1k, rs[7].ProcPGCPUPer1k = 0.25, 0.3
	targets = processingTargets(rs, drainRatios(rs, 3))
	require.False(t, targets[0].Met)
	require.False(t, targets[1].Met)
	require.False(t, targets[2].Met)
	require.Equal(t, 0.375, targets[2].Value)
	require.Equal(t, 0, targets[2].RoundsMet)
	out.Reset()
	printProcessingSummary(&out, &Report{Targets: targets})
	require.Contains(t, out.String(), "target batched processed/s ≥ 5000: NOT met, median 3000/s (0 of 2 rounds)")
}

// The textbook run's table row has no accepted/s (its backlog is written,
// not sent).
func TestTextbookRow(t *testing.T) {
	var out bytes.Buffer
	printDrainRow(&out, &Result{Scenario: scenarioProcessing, Mode: runTextbook, Round: 1, Accepted: 500, Destinations: 1, ProcessedPerSec: 1234})
	require.Regexp(t, `^textbook +1 +500 +- +1 +- +1234 `, out.String())
}

// TestSmokeProcessing runs the processing scenario in miniature: the
// textbook worker (this test binary, re-executed) and hookline's batched
// worker, and the per-event one once hookline knows processing.batch.
func TestSmokeProcessing(t *testing.T) {
	if _, err := pgcluster.FindBinDir(); err != nil {
		t.Skipf("needs local PostgreSQL binaries: %v", err)
	}
	runs := "textbook,per-event,batched"
	b := &bench{server: "postgres://u@127.0.0.1:5432/postgres", secret: benchSecret}
	if _, err := config.Parse([]byte(b.configYAML(runSpec{perEvent: true, dests: 1}, "db", "127.0.0.1:1", "http://127.0.0.1:2/")), os.Getenv); err != nil {
		t.Logf("no per-event run: hookline does not know processing.batch yet (%v)", err)
		runs = "textbook,batched"
	}
	o, err := parseFlags([]string{"-scenario", "processing", "-processing-runs", runs, "-backlog", "400", "-drain-timeout", "60s", "-out", t.TempDir()}, os.Stderr)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var stdout bytes.Buffer
	rep, err := run(ctx, o, &stdout)
	t.Log("\n" + stdout.String())
	require.NoError(t, err)
	require.True(t, rep.OK, "LOST/DOUBLE or a problem: see the table")
	require.Len(t, rep.Results, strings.Count(runs, ",")+1)
	for _, r := range rep.Results {
		require.Equal(t, 400, r.Accepted, r.Mode)
		require.Equal(t, 400, r.Jobs, r.Mode)
		require.Positive(t, r.ProcessedPerSec, r.Mode)
		require.Positive(t, r.ProcCPUPer1k, r.Mode)
		require.Positive(t, r.WorkerPeakRSSMB, r.Mode)
	}
	require.Equal(t, runTextbook, rep.Results[0].Mode)
	require.Zero(t, rep.Results[0].AcceptedPerSec)
	require.Len(t, rep.Ratios, strings.Count(runs, ",")+1, "each run's rate against textbook's, and textbook's CPU per event against batched's")
	require.Len(t, rep.Targets, 4)
	require.Contains(t, stdout.String(), "target batched/textbook processed/s ≥ 2.00")
	require.Contains(t, stdout.String(), "LOST=0 DOUBLE=0")
}
