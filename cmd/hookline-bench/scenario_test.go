package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/internal/config"
	"github.com/hookline/hookline/internal/pgcluster"
)

// The order checker: a line forwarded in its places' order passes; a
// swap, a missing or extra forward, a line Postgres does not know and
// places against the senders' real-time order are each reported.
func TestCheckOrder(t *testing.T) {
	t0 := time.Unix(1764504000, 0)
	at := func(sent, acked int) span {
		return span{t0.Add(time.Duration(sent) * time.Millisecond), t0.Add(time.Duration(acked) * time.Millisecond)}
	}
	spans := map[string]span{"a": at(0, 5), "b": at(1, 6), "c": at(10, 12), "d": at(11, 13)}
	want := map[string][]string{"default k1": {"a", "b", "c"}, "default k2": {"d"}}

	c := checkOrder(map[string][]string{"default k1": {"a", "b", "c"}, "default k2": {"d"}}, want, spans)
	require.Equal(t, orderCheck{lines: 2}, c)

	c = checkOrder(map[string][]string{"default k1": {"b", "a", "c"}, "default k2": {"d"}}, want, spans)
	require.Equal(t, 1, c.violations)
	require.Zero(t, c.missing)
	require.Contains(t, c.example, `line "default k1"`)

	c = checkOrder(map[string][]string{"default k1": {"a", "c"}, "default k2": {"d", "d"}, "default k3": {"x"}}, want, spans)
	require.Equal(t, 2, c.violations, "k1 skips b, k3 unknown; k2 forwarded twice in a row is a double, not out of order")
	require.Equal(t, 1, c.missing)

	c = checkOrder(map[string][]string{"default k1": {"a", "a", "b", "c"}, "default k2": {"d"}}, want, spans)
	require.Zero(t, c.violations, "a forwarded again before b (a retry holding its key) is in order")
	c = checkOrder(map[string][]string{"default k1": {"a", "b", "a", "c"}, "default k2": {"d"}}, want, spans)
	require.Equal(t, 1, c.violations, "a forwarded again after b is not")

	c = checkOrder(map[string][]string{"default k1": {"a"}}, want, spans)
	require.Zero(t, c.violations, "a line forwarded in part is not out of order")
	require.Equal(t, 3, c.missing)

	// a and b were in flight together: either order is right. c was sent
	// after a and b were answered: placing it before them is not.
	require.Zero(t, realTimeInversions([]string{"b", "a", "c"}, spans))
	require.Equal(t, 1, realTimeInversions([]string{"c", "a", "b"}, spans))
	require.Equal(t, 2, realTimeInversions([]string{"c", "d", "a"}, spans))
	require.Zero(t, realTimeInversions([]string{"unknown", "a"}, spans), "events without a span are passed over")
	c = checkOrder(map[string][]string{"default k1": {"c", "a", "b"}, "default k2": {"d"}},
		map[string][]string{"default k1": {"c", "a", "b"}, "default k2": {"d"}}, spans)
	require.Equal(t, 1, c.inversions)
	require.Zero(t, c.violations)
}

// The loopback destination records each line's forwards in the order they
// began, notices two forwards of one line in progress at once, holds each
// request for the sink's latency and tells destinations apart.
func TestSinkRecordsLines(t *testing.T) {
	d, err := startDestination()
	require.NoError(t, err)
	defer d.Close()
	s := d.newSink("r", 20*time.Millisecond)
	send := func(dest, id, key string) {
		req, _ := http.NewRequest(http.MethodPost, d.url+"/hooks/r", strings.NewReader("{}"))
		req.Header.Set("Idempotency-Key", "stripe:"+id)
		req.Header.Set("Hookline-Event-Id", id)
		req.Header.Set("Hookline-Destination", dest)
		if key != "" {
			req.Header.Set("Hookline-Order-Key", key)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	send("d1", "e1", "k")
	send("d1", "e2", "k")
	send("d2", "e1", "k") // another destination's line
	send("d1", "e3", "")  // unordered
	got := s.snapshot()
	require.Zero(t, got.overlaps)
	require.Equal(t, map[string][]string{"d1 k": {"e1", "e2"}, "d2 k": {"e1"}}, got.lines)
	require.Equal(t, 1, got.hits[hitKey("d1", "stripe:e3")])
	require.GreaterOrEqual(t, got.heldMs, 20.0)

	var wg sync.WaitGroup
	for _, id := range []string{"e4", "e5"} {
		wg.Go(func() { send("d1", id, "k") })
	}
	wg.Wait()
	require.Equal(t, 1, s.snapshot().overlaps, "two forwards of one line at once")
	require.Equal(t, 1, got.hits[hitKey("d1", "stripe:e1")])
	require.Equal(t, 1, got.hits[hitKey("d2", "stripe:e1")])

	rec := httptest.NewRecorder()
	d.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/hooks/unknown", nil))
	require.Equal(t, http.StatusNotFound, rec.Code)
}

func TestObjectKeys(t *testing.T) {
	seen := map[string]int{}
	for i := range 20000 {
		seen[objectKey(i, 10000)]++
	}
	require.Len(t, seen, 10000)
	require.Equal(t, 2, seen[objectKey(0, 10000)])
	require.Equal(t, objectKey(0, 1), objectKey(12345, 1), "one hot key")
	g, err := newGenerator(benchSecret, "r", "http://127.0.0.1:1/webhooks/stripe", 2, 1)
	require.NoError(t, err)
	require.Contains(t, string(g.pre[1].req), `"id": "`+objectKey(0, 1)+`"`)
}

// The plan: the ingest scenario as before (levels, rounds, modes taking
// turns); the drain scenarios' runs taking turns in each round.
func TestPlan(t *testing.T) {
	o, err := parseFlags([]string{"-c", "16,64", "-repeat", "2", "-backlog", "1000", "-keys", "100", "-hot-events", "50", "-latency", "3ms", "-destinations", "4"}, os.Stderr)
	require.NoError(t, err)
	var names []string
	for _, s := range plan(o, scenarioIngest) {
		names = append(names, s.runName(o.repeat))
	}
	require.Equal(t, []string{"naive_c16_r1", "batched_c16_r1", "naive_c16_r2", "batched_c16_r2",
		"naive_c64_r1", "batched_c64_r1", "naive_c64_r2", "batched_c64_r2"}, names)

	ord := plan(o, scenarioOrdering)
	require.Len(t, ord, 6)
	require.Equal(t, runSpec{scenario: scenarioOrdering, name: runUnordered, batch: true, c: drainSenders, round: 1, events: 1000, keys: 100, dests: 1}, ord[0])
	require.Equal(t, runSpec{scenario: scenarioOrdering, name: runOrdered, batch: true, c: drainSenders, round: 1, events: 1000, keys: 100, ordered: true, dests: 1}, ord[1])
	require.Equal(t, runSpec{scenario: scenarioOrdering, name: runHotKey, batch: true, c: drainSenders, round: 1, events: 50, keys: 1, ordered: true, dests: 1, latency: 3 * time.Millisecond}, ord[2])
	require.Equal(t, 2, ord[3].round)
	require.Equal(t, "hot_key_c64_r2", ord[5].runName(o.repeat))

	fan := plan(o, scenarioFanout)
	require.Len(t, fan, 4)
	require.Equal(t, []string{"default"}, fan[0].destNames())
	require.Equal(t, "fanout-4", fan[1].name)
	require.Equal(t, []string{"d1", "d2", "d3", "d4"}, fan[1].destNames())
}

// The configuration the bench writes is one hookline accepts: ordering on
// data.object.id, several destinations.
func TestConfigYAML(t *testing.T) {
	b := &bench{o: options{}, server: "postgres://u@127.0.0.1:5432/postgres", secret: benchSecret}
	for _, spec := range []runSpec{
		{name: runOrdered, batch: true, ordered: true, dests: 1},
		{name: "fanout-3", batch: true, dests: 3},
		{name: modeNaive, dests: 1},
	} {
		text := b.configYAML(spec, "db", "127.0.0.1:1", "http://127.0.0.1:2/hooks/r")
		cfg, err := config.Parse([]byte(text), os.Getenv)
		require.NoError(t, err, text)
		src := cfg.Sources[0]
		require.Len(t, src.Destinations, spec.dests, text)
		require.Equal(t, spec.ordered, src.Ordering != nil, text)
		if spec.ordered {
			require.Equal(t, "json:data.object.id", src.Ordering.Key)
		}
	}
}

func TestDrainRatiosAndSummary(t *testing.T) {
	rs := []Result{
		{Scenario: scenarioOrdering, Mode: runUnordered, Round: 1, ProcessedPerSec: 2000, Keys: 10000, Destinations: 1},
		{Scenario: scenarioOrdering, Mode: runOrdered, Round: 1, ProcessedPerSec: 1500, Keys: 10000, Destinations: 1, Ordered: true},
		{Scenario: scenarioOrdering, Mode: runHotKey, Round: 1, ProcessedPerSec: 300, SteadyPerSec: 320, BoundPerSec: 500, HeldMs: 2.1, Keys: 1, Destinations: 1, Ordered: true},
		{Scenario: scenarioOrdering, Mode: runUnordered, Round: 2, ProcessedPerSec: 1800},
		{Scenario: scenarioOrdering, Mode: runOrdered, Round: 2, ProcessedPerSec: 1000},
		{Scenario: scenarioFanout, Mode: "fanout-1", Round: 1, ProcessedPerSec: 2000, DeliveriesPerSec: 2000, Destinations: 1},
		{Scenario: scenarioFanout, Mode: "fanout-3", Round: 1, ProcessedPerSec: 800, DeliveriesPerSec: 2400, Destinations: 3},
	}
	ratios := drainRatios(rs, 3)
	require.Equal(t, []Ratio{
		{Scenario: scenarioOrdering, Name: "ordered/unordered processed/s", OfMedians: 0.66, Rounds: []float64{0.75, 0.56}},
		{Scenario: scenarioFanout, Name: "fanout-3/fanout-1 events/s", OfMedians: 0.4, Rounds: []float64{0.4}},
		{Scenario: scenarioFanout, Name: "fanout-3/fanout-1 deliveries/s", OfMedians: 1.2, Rounds: []float64{1.2}},
	}, ratios)
	ss := summarize(rs)
	require.Equal(t, 1900.0, ss[0].ProcessedPerSec)
	require.Equal(t, 1800.0, ss[0].MinProcessed)
	var out bytes.Buffer
	printFooter(&out, &Report{Results: rs, Summary: ss, Ratios: ratios})
	require.Contains(t, out.String(), "ordered/unordered processed/s: 0.66 of the medians (rounds: 0.75 0.56); target ≥ 0.70 NOT met: ordered is 34 % slower")
	require.Contains(t, out.String(), "hot key: 320 events/s steady against a bound of 500/s")
	require.Contains(t, out.String(), "fanout-3/fanout-1 deliveries/s: 1.20")
	require.Contains(t, out.String(), "LOST=0 DOUBLE=0 OUT-OF-ORDER=0 OVERLAPS=0")
	require.Empty(t, ingestPoints(&Report{Summary: ss}))
}

// TestSmokeScenarios runs the ordering and fanout scenarios in miniature
// and checks what must hold anywhere: counts and order.
func TestSmokeScenarios(t *testing.T) {
	if _, err := pgcluster.FindBinDir(); err != nil {
		t.Skipf("needs local PostgreSQL binaries: %v", err)
	}
	o, err := parseFlags([]string{"-scenario", "ordering,fanout", "-backlog", "600", "-keys", "50", "-hot-events", "60",
		"-drain-timeout", "60s", "-out", t.TempDir()}, os.Stderr)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var stdout bytes.Buffer
	rep, err := run(ctx, o, &stdout)
	t.Log("\n" + stdout.String())
	require.NoError(t, err)
	require.True(t, rep.OK, "LOST/DOUBLE, order or a problem: see the table")
	require.Len(t, rep.Results, 5)
	for _, r := range rep.Results {
		require.Positive(t, r.ProcessedPerSec, r.Mode)
		require.Equal(t, r.Accepted*r.Destinations, r.Jobs, r.Mode)
		if r.Ordered {
			require.Positive(t, r.OrderLines, r.Mode)
		}
	}
	require.Equal(t, 50, rep.Results[1].OrderLines)
	require.Equal(t, 1, rep.Results[2].OrderLines)
	require.InDelta(t, 500, rep.Results[2].BoundPerSec, 1e-9)
	require.Len(t, rep.Ratios, 3)
	require.Contains(t, stdout.String(), "LOST=0 DOUBLE=0 OUT-OF-ORDER=0 OVERLAPS=0")
}
