package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/internal/pgcluster"
)

// TestSmoke runs the benchmark end to end in miniature (both modes, one
// level, 2 s, at most 1,000 new events each) and checks only what must hold
// on any machine: the counts. Throughput is never asserted.
func TestSmoke(t *testing.T) {
	if _, err := pgcluster.FindBinDir(); err != nil {
		t.Skipf("needs local PostgreSQL binaries: %v", err)
	}
	out := t.TempDir()
	o, err := parseFlags([]string{"-scenario", "ingest", "-short", "-c", "8", "-max-events", "1000", "-drain-timeout", "60s", "-out", out}, os.Stderr)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout bytes.Buffer
	rep, err := run(ctx, o, &stdout)
	t.Log("\n" + stdout.String())
	require.NoError(t, err)
	require.True(t, rep.OK, "LOST/DOUBLE or a problem: see the table")
	require.Len(t, rep.Results, 2)
	for _, r := range rep.Results {
		require.Positive(t, r.Accepted, "%s accepted nothing", r.Mode)
		require.Zero(t, r.Lost, r.Mode)
		require.Zero(t, r.Double, r.Mode)
		require.Zero(t, r.Stray, r.Mode)
		require.Empty(t, r.Problem, r.Mode)
		require.Positive(t, r.Duplicates, "%s: the re-sent events were not answered duplicate", r.Mode)
		require.Zero(t, r.Unexpected, r.Mode)
		require.Equal(t, r.Accepted, r.Jobs, r.Mode)
		require.Positive(t, r.PeakRSSMB, r.Mode)
	}
	require.Contains(t, stdout.String(), "LOST=0 DOUBLE=0")

	raw, err := os.ReadFile(filepath.Join(out, "results.json"))
	require.NoError(t, err)
	var back Report
	require.NoError(t, json.Unmarshal(raw, &back))
	require.True(t, back.OK)
	svg, err := os.ReadFile(filepath.Join(out, "chart.svg"))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(svg), "<svg"), "chart.svg")
}

func TestFlags(t *testing.T) {
	o, err := parseFlags(nil, os.Stderr)
	require.NoError(t, err)
	require.Equal(t, []int{16, 64, 128}, o.levels)
	require.Equal(t, []string{modeNaive, modeBatched}, o.modes)
	require.Equal(t, 10*time.Second, o.duration)
	require.InDelta(t, 0.10, o.dupRatio, 1e-9)

	o, err = parseFlags([]string{"-short"}, os.Stderr)
	require.NoError(t, err)
	require.Equal(t, []int{16}, o.levels)
	require.Equal(t, 2*time.Second, o.duration)
	o, err = parseFlags([]string{"-short", "-c", "8"}, os.Stderr)
	require.NoError(t, err)
	require.Equal(t, []int{8}, o.levels)
	require.Equal(t, 2*time.Second, o.duration)

	require.Equal(t, allScenarios, o.scenarios)
	require.Equal(t, 2000, o.backlog)
	require.Equal(t, 200, o.hotEvents)
	o, err = parseFlags([]string{"-scenario", "fanout, ordering", "-backlog", "500"}, os.Stderr)
	require.NoError(t, err)
	require.Equal(t, []string{scenarioFanout, scenarioOrdering}, o.scenarios)
	require.Equal(t, 500, o.backlog)
	require.Equal(t, 10000, o.keys)
	require.Equal(t, 2*time.Millisecond, o.latency)
	require.Equal(t, 3, o.fanout)

	for _, bad := range [][]string{{"-c", "0"}, {"-c", "x"}, {"-modes", "fast"}, {"-dup", "1"}, {"-cpuprofile", "p"}, {"extra"},
		{"-scenario", "order"}, {"-scenario", "ingest,ingest"}, {"-backlog", "0"}, {"-keys", "0"}, {"-destinations", "1"}, {"-latency", "-1ms"}} {
		_, err := parseFlags(bad, &bytes.Buffer{})
		require.Error(t, err, "%v", bad)
	}
}

// The load generator's HTTP/1.1 client reads fixed-length and chunked
// answers, and keeps the connection alive across requests.
func TestClient(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/chunked" {
			for i := range 3 {
				fmt.Fprintf(w, `{"part":%d}`, i)
				w.(http.Flusher).Flush()
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"error":"busy"}`))
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	c := &client{addr: u.Host}
	defer c.close()
	req := func(path string) []byte {
		return []byte("POST " + path + " HTTP/1.1\r\nHost: " + u.Host + "\r\nContent-Length: 2\r\n\r\n{}")
	}
	for range 3 {
		status, body, err := c.do(req("/fixed"))
		require.NoError(t, err)
		require.Equal(t, http.StatusServiceUnavailable, status)
		require.Equal(t, `{"error":"busy"}`, string(body))
		status, body, err = c.do(req("/chunked"))
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, status)
		require.Equal(t, `{"part":0}{"part":1}{"part":2}`, string(body))
	}
	require.NotNil(t, c.conn, "the connection is kept alive")
}

func TestChartAndSpeedup(t *testing.T) {
	rep := &Report{Machine: Machine{CPUs: 2, Postgres: "PostgreSQL 15", Fsync: "on"}, Results: []Result{
		{Mode: modeNaive, Concurrency: 16, AcceptedPerSec: 1000, P99ms: 20, EndToEndPerSec: 500},
		{Mode: modeBatched, Concurrency: 16, AcceptedPerSec: 4000, P99ms: 8, EndToEndPerSec: 900},
		{Mode: modeNaive, Concurrency: 64, AcceptedPerSec: 1500, P99ms: 60, EndToEndPerSec: 600},
		{Mode: modeBatched, Concurrency: 64, AcceptedPerSec: 9000, P99ms: 15, EndToEndPerSec: 950},
	}}
	require.Equal(t, map[string]float64{"16": 4, "64": 6}, speedups(summarize(rep.Results)))
	svg := chartSVG(rep)
	require.True(t, strings.HasPrefix(svg, "<svg") && strings.HasSuffix(svg, "</svg>\n"))
	// Per mode: accepted/s and e2e/s in the throughput panel, p99 in the latency panel.
	require.Equal(t, 6, strings.Count(svg, "<polyline"))
}

// With -repeat, each level's runs are summarised by their medians, and the
// speed-up is batched/naive of the medians; each round's own ratio is kept.
func TestSummaryOfRepeatedRuns(t *testing.T) {
	rs := []Result{
		{Mode: modeNaive, Concurrency: 64, Round: 1, AcceptedPerSec: 2000, P99ms: 40},
		{Mode: modeBatched, Concurrency: 64, Round: 1, AcceptedPerSec: 9000, P99ms: 12},
		{Mode: modeNaive, Concurrency: 64, Round: 2, AcceptedPerSec: 1500, P99ms: 60},
		{Mode: modeBatched, Concurrency: 64, Round: 2, AcceptedPerSec: 6000, P99ms: 20},
		{Mode: modeNaive, Concurrency: 64, Round: 3, AcceptedPerSec: 2200, P99ms: 38},
		{Mode: modeBatched, Concurrency: 64, Round: 3, AcceptedPerSec: 10000, P99ms: 11},
	}
	ss := summarize(rs)
	require.Len(t, ss, 2)
	require.Equal(t, Summary{Mode: modeNaive, Concurrency: 64, Runs: 3, AcceptedPerSec: 2000, MinAccepted: 1500, MaxAccepted: 2200, P99ms: 40}, ss[0])
	require.Equal(t, 9000.0, ss[1].AcceptedPerSec)
	require.Equal(t, 12.0, ss[1].P99ms)
	require.Equal(t, []float64{4.5, 4, 4.55}, ss[1].PairRatios)
	require.Equal(t, map[string]float64{"64": 4.5}, speedups(ss))

	var out bytes.Buffer
	printFooter(&out, &Report{Results: rs, Summary: ss, Speedup: speedups(ss)})
	require.Contains(t, out.String(), "4.5× 4.0× 4.5×")
	require.Contains(t, out.String(), "batched vs naive accepted/s (of the medians): c=64 4.5×")
	svg := chartSVG(&Report{Results: rs, Summary: ss})
	require.Equal(t, 1, strings.Count(svg, ">9000<"), "the batched median is plotted, once: %s", svg)
	require.Equal(t, 6, strings.Count(svg, "<circle"), "one point per mode and line, not one per run")
}
