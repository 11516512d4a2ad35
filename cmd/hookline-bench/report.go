package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Report is results.json.
type Report struct {
	Started  time.Time          `json:"started"`
	Finished time.Time          `json:"finished"`
	Machine  Machine            `json:"machine"`
	Settings map[string]any     `json:"settings"`
	Results  []Result           `json:"results"`
	Summary  []Summary          `json:"summary"`
	Speedup  map[string]float64 `json:"speedup_accepted_per_s"` // batched / naive of the median accepted/s, by concurrency
	Ratios   []Ratio            `json:"drain_ratios,omitempty"` // the drain scenarios' comparisons
	Targets  []Target           `json:"targets,omitempty"`      // the processing scenario's targets
	OK       bool               `json:"ok"`
}

// Machine describes where the numbers come from.
type Machine struct {
	CPUs      int    `json:"cpus"`
	CPUModel  string `json:"cpu_model,omitempty"`
	GoVersion string `json:"go_version"`
	OS        string `json:"os"`
	Postgres  string `json:"postgres"`
	Fsync     string `json:"fsync"`
	SyncCmt   string `json:"synchronous_commit"`
}

// Result is one (mode, concurrency) run. In the drain scenarios (ordering,
// fanout, processing) Mode names the run (unordered, ordered, hot-key,
// fanout-N, textbook, per-event, batched). A textbook run has no hookline:
// its "hookline" CPU figures are the textbook worker's, and having no load
// (its backlog is written, not sent) it has no load figures.
type Result struct {
	Scenario       string  `json:"scenario,omitempty"` // ingest, ordering, fanout, processing ("": ingest)
	Mode           string  `json:"mode"`
	Concurrency    int     `json:"concurrency"`
	Round          int     `json:"round"` // 1.., with -repeat`
	DurationSec    float64 `json:"duration_s"`
	Sent           int     `json:"sent"`
	DupSent        int     `json:"duplicates_sent"`
	Accepted       int     `json:"accepted"`
	Duplicates     int     `json:"duplicates_answered"`
	Unavailable    int     `json:"unavailable_503"`
	Errors         int     `json:"errors"`
	Unexpected     int     `json:"unexpected_answers"`
	AcceptedPerSec float64 `json:"accepted_per_s"`
	RequestsPerSec float64 `json:"requests_per_s"`
	P50ms          float64 `json:"ack_p50_ms"`
	P99ms          float64 `json:"ack_p99_ms"`
	Maxms          float64 `json:"ack_max_ms"`
	EndToEndPerSec float64 `json:"e2e_events_per_s"`
	// ProcessedPerSec is events fully processed (delivered, completed) per
	// second: accepted events / (last completion - the worker's start). With
	// -colocated the worker starts with the load, so it equals e2e.
	ProcessedPerSec float64 `json:"processed_per_s"`
	// DeliveriesPerSec is forwards completed (event, destination) per
	// second over the same time: ProcessedPerSec × Destinations.
	DeliveriesPerSec float64 `json:"deliveries_per_s,omitempty"`
	// SteadyPerSec is events per second between the first completion and
	// the last (the worker's start-up excluded).
	SteadyPerSec float64 `json:"steady_events_per_s,omitempty"`
	// The drain scenarios' setup: distinct data.object.id values (0: one
	// per event), destinations, ordering, and the destination's latency
	// (HeldMs: measured, the mean) with its bound on a hot key (1/latency).
	Keys          int     `json:"keys,omitempty"`
	Destinations  int     `json:"destinations,omitempty"`
	Ordered       bool    `json:"ordered,omitempty"`
	DestLatencyMs float64 `json:"destination_latency_ms,omitempty"`
	HeldMs        float64 `json:"destination_held_ms,omitempty"`
	BoundPerSec   float64 `json:"bound_per_s,omitempty"`
	// The order check of an ordered run: lines (destination, key), lines
	// forwarded out of their places' order, forwards begun while another
	// of their line was in progress, places out of the senders' real-time
	// order, places never forwarded in their line (not forwarded: LOST too;
	// or forwarded without Hookline-Order-Key).
	OrderLines      int `json:"order_lines,omitempty"`
	OrderViolations int `json:"order_violations"`
	Overlaps        int `json:"order_overlaps"`
	Inversions      int `json:"order_realtime_inversions"`
	Missing         int `json:"order_missing"`
	// The processing phase's CPU per 1,000 events (default topology only:
	// the worker process and Postgres from the worker's start to the last completion).
	ProcCPUPer1k   float64 `json:"processing_hookline_cpu_s_per_1k,omitempty"`
	ProcPGCPUPer1k float64 `json:"processing_postgres_cpu_s_per_1k,omitempty"`
	DrainSec       float64 `json:"drain_after_load_s"`
	CPUPer1k       float64 `json:"hookline_cpu_s_per_1k"`
	PGCPUPer1k     float64 `json:"postgres_cpu_s_per_1k"`
	BenchCPUPer1k  float64 `json:"bench_cpu_s_per_1k"`
	// During the load only (default topology: the cost of ingest alone).
	LoadCPUPer1k   float64 `json:"load_hookline_cpu_s_per_1k"`
	LoadPGCPUPer1k float64 `json:"load_postgres_cpu_s_per_1k"`
	// Share of the machine's CPU during the load, by process (the bench
	// process is the load generator and the destination).
	LoadCPUPct  map[string]float64 `json:"load_cpu_pct"`
	PeakRSSMB   float64            `json:"hookline_peak_rss_mb"`
	OtherCPUPct float64            `json:"other_processes_cpu_pct"` // CPU used by other processes during the load, % of the machine
	// ProcOtherCPUPct is the same during the processing phase (default
	// topology, subprocess).
	ProcOtherCPUPct float64 `json:"processing_other_processes_cpu_pct,omitempty"`
	// WorkerPeakRSSMB is the peak RSS (VmHWM) of the process that drained
	// the queue: the --role worker (or, -colocated, all) process, or the
	// textbook worker (subprocesses only).
	WorkerPeakRSSMB float64 `json:"worker_peak_rss_mb,omitempty"`
	MeanBatch       float64 `json:"mean_batch_size,omitempty"`
	SignedInline    int     `json:"signed_inline"`
	Jobs            int     `json:"event_jobs"` // event jobs run: attempts logged (one per event and destination)
	Lost            int     `json:"lost"`
	Double          int     `json:"double"`
	Stray           int     `json:"stray"`
	Problem         string  `json:"problem,omitempty"`
	Unchecked       bool    `json:"unchecked,omitempty"` // -no-drain: counts not checked
	// The colocated scenario: accepted and delivered once a second from
	// the load's start to the end of the drain, and the figures over the
	// steady part of the load (colocated.go).
	Series    []Sample   `json:"series,omitempty"`
	Colocated *Colocated `json:"colocated,omitempty"`
}

func (r *Result) fill(ld *loadResult) {
	r.Sent, r.DupSent, r.Accepted = ld.sent, ld.dupSent, len(ld.accepted)
	r.Duplicates, r.Unavailable, r.Errors, r.Unexpected = ld.duplicates, ld.unavailable, ld.errors, ld.unexpected
	if s := ld.elapsed.Seconds(); s > 0 {
		r.AcceptedPerSec = float64(r.Accepted) / s
		r.RequestsPerSec = float64(r.Sent) / s
	}
	lat := ld.latencies
	slices.Sort(lat)
	if len(lat) > 0 {
		q := func(p float64) float64 {
			i := int(math.Ceil(p*float64(len(lat)))) - 1
			return ms(lat[max(0, min(i, len(lat)-1))])
		}
		r.P50ms, r.P99ms, r.Maxms = q(0.50), q(0.99), ms(lat[len(lat)-1])
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func machineInfo(ctx context.Context, conn *pgx.Conn) Machine {
	m := Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				m.CPUModel = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	_ = conn.QueryRow(ctx, "SHOW server_version").Scan(&m.Postgres)
	m.Postgres = "PostgreSQL " + strings.Fields(m.Postgres + " ")[0]
	_ = conn.QueryRow(ctx, "SHOW fsync").Scan(&m.Fsync)
	_ = conn.QueryRow(ctx, "SHOW synchronous_commit").Scan(&m.SyncCmt)
	return m
}

func settingsOf(o options) map[string]any {
	def := func(v any, zero bool) any {
		if zero {
			return "default"
		}
		return v
	}
	return map[string]any{
		"levels":                 o.levels,
		"modes":                  o.modes,
		"duration":               o.duration.String(),
		"repeat":                 o.repeat,
		"duplicate_ratio":        o.dupRatio,
		"workers":                def(o.workers, o.workers == 0),
		"database.max_conns":     def(o.maxConns, o.maxConns == 0),
		"ingest.batch_size":      def(o.batchSize, o.batchSize == 0),
		"ingest.batch_wait":      def(o.batchWait.String(), o.batchWait == 0),
		"ingest.queue_timeout":   def(o.queueTimeout.String(), o.queueTimeout == 0),
		"hookline":               map[bool]string{true: "in-process", false: "subprocess"}[o.inProcess],
		"topology":               topology(o),
		"max_events_per_run":     o.maxEvents,
		"colocated_rate":         o.rate,
		"scenarios":              o.scenarios,
		"backlog":                o.backlog,
		"keys":                   o.keys,
		"hot_key_events":         o.hotEvents,
		"hot_key_latency":        o.latency.String(),
		"fanout_destinations":    o.fanout,
		"processing_runs":        o.processing,
		"colocated_senders":      o.colocatedSenders,
		"body_bytes_approximate": len(stripeEvent("evt_naive_c64_000000001", "pi_3Qnaive_c64_000000001", 1764504000)),
	}
}

const rowFormat = "%-8s %5s %11s %7s %7s %7s %8s %8s %12s %11s %7s %6s %5s %s\n"

func printHeader(w io.Writer) {
	fmt.Fprintf(w, rowFormat, "MODE", "C", "ACCEPTED/s", "P50 ms", "P99 ms", "MAX ms", "HL s/1k", "PG s/1k", "PROCESSED/s", "HL+PG s/1k", "RSS MB", "batch", "503s", "CHECK")
}

func printRow(w io.Writer, r *Result) {
	check := checkText(r)
	batch := "-"
	if r.MeanBatch > 0 {
		batch = fmt.Sprintf("%.1f", r.MeanBatch)
	}
	proc, procCPU := "-", "-"
	if r.ProcessedPerSec > 0 {
		proc = fmt.Sprintf("%.0f", r.ProcessedPerSec)
	}
	if r.ProcCPUPer1k > 0 {
		procCPU = fmt.Sprintf("%.3f", r.ProcCPUPer1k+r.ProcPGCPUPer1k)
	}
	fmt.Fprintf(w, rowFormat, r.Mode, fmt.Sprint(r.Concurrency), fmt.Sprintf("%.0f", r.AcceptedPerSec),
		fmt.Sprintf("%.1f", r.P50ms), fmt.Sprintf("%.1f", r.P99ms), fmt.Sprintf("%.1f", r.Maxms),
		fmt.Sprintf("%.3f", r.LoadCPUPer1k), fmt.Sprintf("%.3f", r.LoadPGCPUPer1k), proc, procCPU,
		fmt.Sprintf("%.0f", r.PeakRSSMB), batch, fmt.Sprint(r.Unavailable+r.Errors), check)
}

// Summary is the median of a (mode, concurrency)'s runs; with one run, that run.
type Summary struct {
	Scenario        string  `json:"scenario,omitempty"`
	Mode            string  `json:"mode"`
	Concurrency     int     `json:"concurrency"`
	Runs            int     `json:"runs"`
	AcceptedPerSec  float64 `json:"accepted_per_s"` // median
	MinAccepted     float64 `json:"accepted_per_s_min"`
	MaxAccepted     float64 `json:"accepted_per_s_max"`
	P50ms           float64 `json:"ack_p50_ms"` // medians, each on its own
	P99ms           float64 `json:"ack_p99_ms"`
	EndToEndPerSec  float64 `json:"e2e_events_per_s"`
	ProcessedPerSec float64 `json:"processed_per_s"`
	// The drain scenarios: processed/s min and max, medians of deliveries/s,
	// steady events/s and the processing phase's CPU (hookline's and
	// Postgres's, s per 1,000 events), the setup and the hot key's bound.
	MinProcessed     float64 `json:"processed_per_s_min,omitempty"`
	MaxProcessed     float64 `json:"processed_per_s_max,omitempty"`
	DeliveriesPerSec float64 `json:"deliveries_per_s,omitempty"`
	SteadyPerSec     float64 `json:"steady_events_per_s,omitempty"`
	ProcCPUPer1k     float64 `json:"processing_hookline_cpu_s_per_1k,omitempty"`
	ProcPGCPUPer1k   float64 `json:"processing_postgres_cpu_s_per_1k,omitempty"`
	Keys             int     `json:"keys,omitempty"`
	Destinations     int     `json:"destinations,omitempty"`
	BoundPerSec      float64 `json:"bound_per_s,omitempty"`
	HeldMs           float64 `json:"destination_held_ms,omitempty"`
	// The worker's peak RSS: the median and the largest of the runs.
	WorkerPeakRSSMB    float64 `json:"worker_peak_rss_mb,omitempty"`
	MaxWorkerPeakRSSMB float64 `json:"worker_peak_rss_mb_max,omitempty"`
	// PairRatios compare each round's runs: batched/naive (batched rows), traced/batched (traced rows).
	PairRatios []float64 `json:"pair_ratios,omitempty"`
	// Colocated: the colocated scenario's medians over the steady part.
	Colocated *ColocatedSummary `json:"colocated,omitempty"`
}

func median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// summarize gives one Summary per (scenario, mode, concurrency), in the
// order first run (the ingest and processing scenarios both have a batched
// mode).
func summarize(rs []Result) []Summary {
	type key struct {
		scenario, mode string
		c              int
	}
	var order []key
	groups := map[key][]Result{}
	for _, r := range rs {
		k := key{cmp.Or(r.Scenario, scenarioIngest), r.Mode, r.Concurrency}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	var out []Summary
	for _, k := range order {
		g := groups[k]
		col := func(f func(Result) float64) []float64 {
			v := make([]float64, len(g))
			for i, r := range g {
				v[i] = f(r)
			}
			return v
		}
		acc := col(func(r Result) float64 { return r.AcceptedPerSec })
		s := Summary{Mode: k.mode, Concurrency: k.c, Runs: len(g), AcceptedPerSec: median(acc),
			MinAccepted: slices.Min(acc), MaxAccepted: slices.Max(acc),
			P50ms:           median(col(func(r Result) float64 { return r.P50ms })),
			P99ms:           median(col(func(r Result) float64 { return r.P99ms })),
			EndToEndPerSec:  median(col(func(r Result) float64 { return r.EndToEndPerSec })),
			ProcessedPerSec: median(col(func(r Result) float64 { return r.ProcessedPerSec })),
		}
		if sc := g[0].Scenario; sc != "" && sc != scenarioIngest {
			s.fillDrain(g, col)
		}
		if g[0].Scenario == scenarioColocated {
			s.Colocated = colocatedSummary(g)
		}
		// Per round, batched against naive, traced against batched.
		if base := map[string]string{modeBatched: modeNaive, modeTraced: modeBatched}[k.mode]; base != "" {
			for _, r := range g {
				for _, n := range groups[key{k.scenario, base, k.c}] {
					if n.Round == r.Round && n.AcceptedPerSec > 0 {
						s.PairRatios = append(s.PairRatios, math.Round(r.AcceptedPerSec/n.AcceptedPerSec*100)/100)
					}
				}
			}
		}
		out = append(out, s)
	}
	return out
}

// fillDrain sets a drain scenario's summary fields from its runs g (col
// gives a column of g).
func (s *Summary) fillDrain(g []Result, col func(func(Result) float64) []float64) {
	proc := col(func(r Result) float64 { return r.ProcessedPerSec })
	s.Scenario, s.Keys, s.Destinations = g[0].Scenario, g[0].Keys, g[0].Destinations
	s.MinProcessed, s.MaxProcessed = slices.Min(proc), slices.Max(proc)
	s.DeliveriesPerSec = median(col(func(r Result) float64 { return r.DeliveriesPerSec }))
	s.SteadyPerSec = median(col(func(r Result) float64 { return r.SteadyPerSec }))
	s.ProcCPUPer1k = median(col(func(r Result) float64 { return r.ProcCPUPer1k }))
	s.ProcPGCPUPer1k = median(col(func(r Result) float64 { return r.ProcPGCPUPer1k }))
	s.BoundPerSec = median(col(func(r Result) float64 { return r.BoundPerSec }))
	s.HeldMs = median(col(func(r Result) float64 { return r.HeldMs }))
	rss := col(func(r Result) float64 { return r.WorkerPeakRSSMB })
	s.WorkerPeakRSSMB, s.MaxWorkerPeakRSSMB = median(rss), slices.Max(rss)
}

// speedups is batched/naive of the median accepted/s, by concurrency (the
// ingest scenario's).
func speedups(ss []Summary) map[string]float64 {
	naive := map[int]float64{}
	for _, s := range ss {
		if s.Mode == modeNaive && s.Scenario == "" {
			naive[s.Concurrency] = s.AcceptedPerSec
		}
	}
	out := map[string]float64{}
	for _, s := range ss {
		if s.Mode == modeBatched && s.Scenario == "" && naive[s.Concurrency] > 0 {
			out[fmt.Sprint(s.Concurrency)] = math.Round(s.AcceptedPerSec/naive[s.Concurrency]*100) / 100
		}
	}
	return out
}

// printFooter prints the summaries (the ingest scenario's, then each drain
// scenario's) and the totals of the checks.
func printFooter(w io.Writer, rep *Report) {
	printIngestSummary(w, rep)
	for _, sc := range []string{scenarioOrdering, scenarioFanout, scenarioProcessing} {
		if slices.ContainsFunc(rep.Summary, func(s Summary) bool { return s.Scenario == sc }) {
			printDrainSummary(w, rep, sc)
		}
	}
	if slices.ContainsFunc(rep.Summary, func(s Summary) bool { return s.Scenario == scenarioColocated }) {
		printColocatedSummary(w, rep)
	}
	var lost, double, stray, order, overlaps int
	ordered := false
	for _, r := range rep.Results {
		lost, double, stray = lost+r.Lost, double+r.Double, stray+r.Stray
		order, overlaps = order+r.OrderViolations+r.Inversions, overlaps+r.Overlaps
		ordered = ordered || r.Ordered
	}
	fmt.Fprintf(w, "LOST=%d DOUBLE=%d", lost, double)
	if ordered {
		fmt.Fprintf(w, " OUT-OF-ORDER=%d OVERLAPS=%d", order, overlaps)
	}
	if stray > 0 {
		fmt.Fprintf(w, " (stored or processed without a 2xx to the sender: %d)", stray)
	}
	fmt.Fprintln(w)
}

// printIngestSummary prints the ingest scenario's medians (with -repeat)
// and batched/naive.
func printIngestSummary(w io.Writer, rep *Report) {
	var levels []int
	for k := range rep.Speedup {
		n, _ := strconv.Atoi(k)
		levels = append(levels, n)
	}
	slices.Sort(levels)
	repeated := false
	for _, s := range rep.Summary {
		repeated = repeated || (s.Runs > 1 && s.Scenario == "")
	}
	if repeated {
		fmt.Fprintln(w, "summary: median of each level's runs (min-max), the modes having taken turns")
		fmt.Fprintf(w, "%-8s %5s %5s %11s %15s %7s %7s %12s  %s\n", "MODE", "C", "RUNS", "ACCEPTED/s", "(min-max)", "P50 ms", "P99 ms", "PROCESSED/s", "per round: batched/naive, traced/batched")
		for _, s := range rep.Summary {
			if s.Scenario != "" {
				continue
			}
			var pairs []string
			for _, p := range s.PairRatios {
				pairs = append(pairs, fmt.Sprintf("%.1f×", p))
			}
			fmt.Fprintf(w, "%-8s %5d %5d %11.0f %15s %7.1f %7.1f %12.0f  %s\n", s.Mode, s.Concurrency, s.Runs, s.AcceptedPerSec,
				fmt.Sprintf("(%.0f-%.0f)", s.MinAccepted, s.MaxAccepted), s.P50ms, s.P99ms, s.ProcessedPerSec, strings.Join(pairs, " "))
		}
	}
	var parts []string
	for _, c := range levels {
		parts = append(parts, fmt.Sprintf("c=%d %.1f×", c, rep.Speedup[strconv.Itoa(c)]))
	}
	if len(parts) > 0 {
		of := ""
		if repeated {
			of = " (of the medians)"
		}
		fmt.Fprintf(w, "batched vs naive accepted/s%s: %s\n", of, strings.Join(parts, ", "))
	}
}

func writeResults(dir string, rep *Report) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	if err := writeColocatedChart(dir, rep); err != nil {
		return err
	}
	if len(ingestPoints(rep)) == 0 {
		return nil // no ingest runs: nothing to draw
	}
	return os.WriteFile(filepath.Join(dir, "chart.svg"), []byte(chartSVG(rep)), 0o644)
}

// writeColocatedChart writes dir/colocated.svg when rep has colocated runs
// with a series.
func writeColocatedChart(dir string, rep *Report) error {
	svg := colocatedSVG(rep)
	if svg == "" {
		return nil
	}
	return os.WriteFile(filepath.Join(dir, "colocated.svg"), []byte(svg), 0o644)
}

// replot redraws dir/chart.svg (and dir/colocated.svg, with colocated
// runs) from dir/results.json.
func replot(dir string) error {
	raw, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		return err
	}
	var rep Report
	if err := json.Unmarshal(raw, &rep); err != nil {
		return fmt.Errorf("results.json: %w", err)
	}
	if err := writeColocatedChart(dir, &rep); err != nil {
		return err
	}
	if len(ingestPoints(&rep)) == 0 && colocatedSVG(&rep) != "" {
		return nil // colocated runs only: no ingest chart
	}
	return os.WriteFile(filepath.Join(dir, "chart.svg"), []byte(chartSVG(&rep)), 0o644)
}

// chartSVG draws two panels against concurrency: throughput (accepted/s
// solid, end-to-end events/s dashed) and p99 ack latency, one colour per mode.
func chartSVG(rep *Report) string {
	const (
		W, H         = 960, 430
		panelW       = 400
		top, bottom  = 72, 360
		leftA, leftB = 80, 560
	)
	points := ingestPoints(rep)
	var levels []int
	for _, r := range points {
		if !slices.Contains(levels, r.Concurrency) {
			levels = append(levels, r.Concurrency)
		}
	}
	slices.Sort(levels)
	colors := map[string]string{modeNaive: "#d9534f", modeBatched: "#1f77b4"}
	xAt := func(left int, c int) float64 {
		i := slices.Index(levels, c)
		if len(levels) == 1 {
			return float64(left) + panelW/2
		}
		return float64(left) + 30 + float64(i)*(panelW-60)/float64(len(levels)-1)
	}
	var maxT, maxL float64
	for _, r := range points {
		maxT = max(maxT, r.AcceptedPerSec, r.EndToEndPerSec)
		maxL = max(maxL, r.P99ms)
	}
	maxT, maxL = niceCeil(maxT), niceCeil(maxL)
	yAt := func(v, vmax float64) float64 { return bottom - (v/vmax)*(bottom-top) }

	var sb strings.Builder
	fmt.Fprintf(&sb, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", W, H, W, H)
	fmt.Fprintf(&sb, `<rect width="%d" height="%d" fill="white"/>`+"\n", W, H)
	fmt.Fprintf(&sb, `<text x="%d" y="20" font-size="15" font-weight="bold">hookline ingest: naive vs group commit (%s, %d CPUs, fsync %s)</text>`+"\n",
		leftA-40, html.EscapeString(rep.Machine.Postgres), rep.Machine.CPUs, html.EscapeString(rep.Machine.Fsync))
	dup, _ := rep.Settings["duplicate_ratio"].(float64)
	runs := "" // repeat is an int, or a float64 once read back from results.json
	if n, _ := strconv.Atoi(fmt.Sprint(rep.Settings["repeat"])); n > 1 {
		runs = fmt.Sprintf(" (points: medians of %d runs, modes alternating)", n)
	}
	fmt.Fprintf(&sb, `<text x="%d" y="38" fill="#555">hookline %s; %v per run%s, %.0f%% duplicates</text>`+"\n",
		leftA-40, html.EscapeString(fmt.Sprint(rep.Settings["topology"])), rep.Settings["duration"], runs, dup*100)
	panel := func(left int, title string, vmax float64, unit string) {
		chartAxes(&sb, chartPanel{left: left, top: top, bottom: bottom, width: panelW}, title, 14, vmax)
		for _, c := range levels {
			x := xAt(left, c)
			fmt.Fprintf(&sb, `<text x="%.1f" y="%d" text-anchor="middle">%d</text>`+"\n", x, bottom+18, c)
		}
		fmt.Fprintf(&sb, `<text x="%d" y="%d" text-anchor="middle">concurrent senders</text>`+"\n", left+panelW/2, bottom+36)
		fmt.Fprintf(&sb, `<text x="%d" y="%d" text-anchor="middle" transform="rotate(-90 %d %d)">%s</text>`+"\n",
			left-55, (top+bottom)/2, left-55, (top+bottom)/2, html.EscapeString(unit))
	}
	panel(leftA, "Throughput", maxT, "events per second")
	panel(leftB, "p99 ack latency", maxL, "milliseconds")
	line := func(left int, mode string, val func(Summary) float64, vmax float64, dash string) {
		labels := dash == "" // the dashed end-to-end lines sit close together: no labels
		var pts []string
		for _, r := range points {
			if r.Mode != mode {
				continue
			}
			x, y := xAt(left, r.Concurrency), yAt(val(r), vmax)
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y))
			fmt.Fprintf(&sb, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"/>`+"\n", x, y, colors[mode])
			if labels {
				fmt.Fprintf(&sb, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="10" fill="%s">%s</text>`+"\n", x, y-7, colors[mode], fmtNum(val(r)))
			}
		}
		if len(pts) > 1 {
			fmt.Fprintf(&sb, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"%s/>`+"\n", strings.Join(pts, " "), colors[mode], dash)
		}
	}
	for _, mode := range []string{modeNaive, modeBatched} {
		line(leftA, mode, func(r Summary) float64 { return r.AcceptedPerSec }, maxT, "")
		line(leftA, mode, func(r Summary) float64 { return r.EndToEndPerSec }, maxT, ` stroke-dasharray="6 4"`)
		line(leftB, mode, func(r Summary) float64 { return r.P99ms }, maxL, "")
	}
	// Legend.
	ly := H - 22
	legend := []struct{ label, color, dash string }{
		{"naive: accepted/s", colors[modeNaive], ""}, {"naive: end-to-end/s", colors[modeNaive], ` stroke-dasharray="6 4"`},
		{"group commit: accepted/s", colors[modeBatched], ""}, {"group commit: end-to-end/s", colors[modeBatched], ` stroke-dasharray="6 4"`},
	}
	x := leftA - 40
	for _, l := range legend {
		fmt.Fprintf(&sb, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/>`+"\n", x, ly, x+24, ly, l.color, l.dash)
		fmt.Fprintf(&sb, `<text x="%d" y="%d">%s</text>`+"\n", x+30, ly+4, html.EscapeString(l.label))
		x += 215
	}
	sb.WriteString("</svg>\n")
	return sb.String()
}

// ingestPoints are the chart's points, one per (mode, level) of the ingest
// scenario: the median of its runs.
func ingestPoints(rep *Report) []Summary {
	all := rep.Summary
	if len(all) == 0 { // results.json of an older version
		all = summarize(rep.Results)
	}
	var points []Summary
	for _, s := range all {
		if (s.Mode == modeNaive || s.Mode == modeBatched) && s.Scenario == "" {
			points = append(points, s)
		}
	}
	return points
}

func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10} {
		if m*p >= v*1.05 {
			return m * p
		}
	}
	return 10 * p
}

func fmtNum(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v >= 10000:
		return fmt.Sprintf("%.1fk", v/1000)
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

func topology(o options) string {
	if o.colocated {
		return "--role all: workers run during the load"
	}
	return "--role ingest during the load, then --role worker drains"
}

// chartPanel is a chart panel's frame in SVG pixels.
type chartPanel struct{ left, top, bottom, width int }

// chartAxes draws a panel's title (titleDY above its top), its two axes
// and five horizontal grid lines labelled from 0 to vmax.
func chartAxes(sb *strings.Builder, p chartPanel, title string, titleDY int, vmax float64) {
	yAt := func(v float64) float64 { return float64(p.bottom) - (v/vmax)*float64(p.bottom-p.top) }
	fmt.Fprintf(sb, `<text x="%d" y="%d" font-weight="bold">%s</text>`+"\n", p.left, p.top-titleDY, html.EscapeString(title))
	fmt.Fprintf(sb, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", p.left, p.bottom, p.left+p.width, p.bottom)
	fmt.Fprintf(sb, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", p.left, p.top, p.left, p.bottom)
	for i := 0; i <= 5; i++ {
		v := vmax * float64(i) / 5
		y := yAt(v)
		fmt.Fprintf(sb, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>`+"\n", p.left+1, y, p.left+p.width, y)
		fmt.Fprintf(sb, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", p.left-6, y+4, fmtNum(v))
	}
}
