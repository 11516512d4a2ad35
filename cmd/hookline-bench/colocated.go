package main

import (
	"cmp"
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The colocated scenario: what users run by default, one `hookline serve
// --role all` process taking webhooks and processing them on the same
// cores. Each round has three runs taking turns, "colocated-batched" (the
// default configuration), "colocated-unpaced" (the same without pacing,
// ingest: {pace: false}) and "colocated-per-event" (processing: {batch:
// false}): a fresh database, closed-loop senders (no duplicates) for -d,
// then the drain and the usual checks. During the run a sampler records,
// once a second, the events accepted so far (2xx "accepted" answers), the
// events delivered so far (distinct events the destination received) and
// the queue depth (their difference); the figures are taken over the
// steady part of the load (from 2 s to its end).
const (
	runColocatedBatched  = "colocated-batched"
	runColocatedUnpaced  = "colocated-unpaced"
	runColocatedPerEvent = "colocated-per-event"
)

// colocatedRuns are the colocated scenario's runs, in the order they take
// turns.
var colocatedRuns = []string{runColocatedBatched, runColocatedUnpaced, runColocatedPerEvent}

const (
	// colocatedSenders is the scenario's concurrency unless -c is given
	// (then its first level).
	colocatedSenders = 64
	// steadyFrom ends the ramp-up: the steady part of the load runs from
	// the sample at 2 s to the last sample of the load.
	steadyFrom = 2 * time.Second
	// Keeping up: delivered/s at least 95 % of accepted/s, and the queue
	// depth growing by at most 5 % of accepted/s.
	keepUpDelivered = 0.95
	keepUpGrowth    = 0.05
	// The targets: colocated-batched delivers at least 3,000 events/s over
	// the steady part while keeping up, with a p99 ack latency of at most
	// 50 ms.
	colocatedTargetRate  = 3000
	colocatedTargetP99ms = 50
)

// Sample is one point of a colocated run's series: seconds since the load
// began, events accepted and delivered so far, and the queue depth
// (accepted - delivered). Drain marks the samples taken after the load,
// while the queue drained.
type Sample struct {
	TSec      float64 `json:"t_s"`
	Accepted  int     `json:"accepted"`
	Delivered int     `json:"delivered"`
	Depth     int     `json:"depth"`
	Drain     bool    `json:"drain,omitempty"`
}

// Colocated are a colocated run's figures over the steady part of its
// load (From → To, seconds since the load began): accepted/s and
// delivered/s between the two samples, the queue depth at the end of the
// load, the depth's growth per second (the least-squares slope of the
// steady samples' depths: positive when the workers fall behind) and
// whether the workers kept up.
type Colocated struct {
	FromSec           float64 `json:"steady_from_s"`
	ToSec             float64 `json:"steady_to_s"`
	AcceptedPerSec    float64 `json:"steady_accepted_per_s"`
	DeliveredPerSec   float64 `json:"steady_delivered_per_s"`
	EndDepth          int     `json:"depth_at_load_end"`
	DepthGrowthPerSec float64 `json:"depth_growth_per_s"`
	KeepsUp           bool    `json:"keeps_up"`
}

// keepsUp: delivered/s ≥ 95 % of accepted/s and the depth grows by at
// most 5 % of accepted/s (nothing accepted: not measured, not kept up).
func keepsUp(accepted, delivered, growth float64) bool {
	return accepted > 0 && delivered >= keepUpDelivered*accepted && growth <= keepUpGrowth*accepted
}

// steadyFigures computes a series' figures over the steady part of its
// load: from the first load sample at or after 2 s to the last load
// sample. When that leaves less than a second or fewer than two samples
// (a load of 2 or 3 s), the whole load is used. False without two load
// samples.
func steadyFigures(series []Sample) (Colocated, bool) {
	var load []Sample
	for _, s := range series {
		if !s.Drain {
			load = append(load, s)
		}
	}
	if len(load) < 2 {
		return Colocated{}, false
	}
	win := load
	if i := slices.IndexFunc(load, func(s Sample) bool { return s.TSec >= steadyFrom.Seconds()-0.05 }); i >= 0 &&
		len(load)-i >= 2 && load[len(load)-1].TSec-load[i].TSec >= 1 {
		win = load[i:]
	}
	a, b := win[0], win[len(win)-1]
	dt := b.TSec - a.TSec
	if dt <= 0 {
		return Colocated{}, false
	}
	c := Colocated{FromSec: a.TSec, ToSec: b.TSec, EndDepth: b.Depth,
		AcceptedPerSec:  float64(b.Accepted-a.Accepted) / dt,
		DeliveredPerSec: float64(b.Delivered-a.Delivered) / dt,
	}
	// Least squares: depth = α + slope·t over the window's samples.
	var mt, md float64
	for _, s := range win {
		mt, md = mt+s.TSec, md+float64(s.Depth)
	}
	mt, md = mt/float64(len(win)), md/float64(len(win))
	var num, den float64
	for _, s := range win {
		num += (s.TSec - mt) * (float64(s.Depth) - md)
		den += (s.TSec - mt) * (s.TSec - mt)
	}
	if den > 0 {
		c.DepthGrowthPerSec = num / den
	}
	c.KeepsUp = keepsUp(c.AcceptedPerSec, c.DeliveredPerSec, c.DepthGrowthPerSec)
	return c, true
}

// sampler records a colocated run's series: a sample when the load
// starts, one a second from a ticker, one when the load ends and one when
// the drain is done. Reading the two counters is all it does (no database
// queries). A tick less than half a second after the previous sample
// replaces it, unless that one is pinned (the first, the load's end),
// when the tick is dropped: the per-second rates of the chart stay
// per-second.
type sampler struct {
	accepted atomic.Int64 // the load generator's "accepted" answers
	sink     *sink        // its distinct counts the events delivered

	mu       sync.Mutex
	t0       time.Time
	samples  []Sample
	pinned   []bool
	loadDone bool
	quit     chan struct{}
	done     chan struct{}
	stopped  bool
}

func newSampler(s *sink) *sampler {
	return &sampler{sink: s, quit: make(chan struct{}), done: make(chan struct{})}
}

// start takes the first sample and starts the ticker (just before the load).
func (s *sampler) start() {
	s.mu.Lock()
	s.t0 = time.Now()
	s.take(true)
	s.mu.Unlock()
	go func() {
		defer close(s.done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-s.quit:
				return
			case <-t.C:
				s.mu.Lock()
				s.take(false)
				s.mu.Unlock()
			}
		}
	}()
}

// endLoad takes the load's last sample; the later ones are marked Drain.
func (s *sampler) endLoad() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.take(true)
	s.loadDone = true
}

// stop takes the last sample (after the drain), stops the ticker and
// returns the series. Later calls return it again.
func (s *sampler) stop() []Sample {
	s.mu.Lock()
	if s.stopped || s.t0.IsZero() {
		defer s.mu.Unlock()
		return slices.Clone(s.samples)
	}
	s.take(true)
	s.stopped = true
	s.mu.Unlock()
	close(s.quit)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.samples)
}

// take adds a sample of now (s.mu held).
func (s *sampler) take(pin bool) {
	a, d := int(s.accepted.Load()), int(s.sink.distinct.Load())
	s.push(Sample{TSec: math.Round(time.Since(s.t0).Seconds()*1000) / 1000, Accepted: a, Delivered: d, Depth: a - d, Drain: s.loadDone}, pin)
}

func (s *sampler) push(sm Sample, pin bool) {
	if n := len(s.samples); n > 0 && sm.TSec-s.samples[n-1].TSec < 0.5 {
		switch {
		case !s.pinned[n-1]:
			s.samples[n-1], s.pinned[n-1] = sm, pin
			return
		case !pin:
			return
		}
	}
	s.samples, s.pinned = append(s.samples, sm), append(s.pinned, pin)
}

// finishSeries stops the sampler (if the run has one) and sets the run's
// series and steady figures.
func (rs *runState) finishSeries() {
	if rs.smp == nil {
		return
	}
	rs.r.Series = rs.smp.stop()
	if c, ok := steadyFigures(rs.r.Series); ok {
		rs.r.Colocated = &c
	}
}

// ColocatedSummary is the medians of a colocated run's rounds (the p99 is
// Summary.P99ms), delivered/s's range and the rounds that kept up.
type ColocatedSummary struct {
	AcceptedPerSec    float64 `json:"steady_accepted_per_s"`
	DeliveredPerSec   float64 `json:"steady_delivered_per_s"`
	MinDelivered      float64 `json:"steady_delivered_per_s_min"`
	MaxDelivered      float64 `json:"steady_delivered_per_s_max"`
	EndDepth          float64 `json:"depth_at_load_end"`
	DepthGrowthPerSec float64 `json:"depth_growth_per_s"`
	RoundsKeptUp      int     `json:"rounds_kept_up"`
}

// colocatedSummary summarises runs g (those with figures; nil if none).
func colocatedSummary(g []Result) *ColocatedSummary {
	var cs []Colocated
	for _, r := range g {
		if r.Colocated != nil {
			cs = append(cs, *r.Colocated)
		}
	}
	if len(cs) == 0 {
		return nil
	}
	col := func(f func(Colocated) float64) []float64 {
		v := make([]float64, len(cs))
		for i, c := range cs {
			v[i] = f(c)
		}
		return v
	}
	del := col(func(c Colocated) float64 { return c.DeliveredPerSec })
	s := &ColocatedSummary{
		AcceptedPerSec:    median(col(func(c Colocated) float64 { return c.AcceptedPerSec })),
		DeliveredPerSec:   median(del),
		MinDelivered:      slices.Min(del),
		MaxDelivered:      slices.Max(del),
		EndDepth:          median(col(func(c Colocated) float64 { return float64(c.EndDepth) })),
		DepthGrowthPerSec: median(col(func(c Colocated) float64 { return c.DepthGrowthPerSec })),
	}
	for _, c := range cs {
		s.RoundsKeptUp += b2i(c.KeepsUp)
	}
	return s
}

// colocatedTargets checks the colocated-batched runs against the targets:
// delivered/s over the steady part ≥ 3,000 while keeping up (met: the
// median, with more than half the rounds kept up; a round: both), and p99
// ack ≤ 50 ms (the median; each round). None without such runs.
func colocatedTargets(rs []Result) []Target {
	var rate, p99 []float64
	var rateMet, kept int
	for _, r := range rs {
		if r.Scenario != scenarioColocated || r.Mode != runColocatedBatched || r.Colocated == nil {
			continue
		}
		c := r.Colocated
		rate, p99 = append(rate, c.DeliveredPerSec), append(p99, r.P99ms)
		kept += b2i(c.KeepsUp)
		rateMet += b2i(c.KeepsUp && c.DeliveredPerSec >= colocatedTargetRate)
	}
	if len(rate) == 0 {
		return nil
	}
	t := Target{Scenario: scenarioColocated, Name: fmt.Sprintf("%s delivered/s ≥ %d while keeping up", runColocatedBatched, colocatedTargetRate),
		Value: median(rate), Measured: fmt.Sprintf("median %.0f/s, kept up in %d of %d rounds", median(rate), kept, len(rate)),
		Met: median(rate) >= colocatedTargetRate && 2*kept > len(rate), Rounds: len(rate), RoundsMet: rateMet}
	l := Target{Scenario: scenarioColocated, Name: fmt.Sprintf("%s p99 ack ≤ %d ms", runColocatedBatched, colocatedTargetP99ms),
		Value: median(p99), Measured: fmt.Sprintf("median %.1f ms", median(p99)), Met: median(p99) <= colocatedTargetP99ms, Rounds: len(p99)}
	for _, v := range p99 {
		l.RoundsMet += b2i(v <= colocatedTargetP99ms)
	}
	return []Target{t, l}
}

const colocatedFormat = "%-19s %5s %4s %8s %11s %12s %7s %7s %9s %8s %8s %8s %s\n"

func printColocatedHeader(w io.Writer, o options) {
	paced := ""
	if o.rate > 0 {
		paced = fmt.Sprintf(" paced to %.0f/s together", o.rate)
	}
	fmt.Fprintf(w, "\ncolocated: one --role all process taking webhooks from %d senders%s for %s (no duplicates) and processing them on the same CPUs,\n"+
		"  batched (default), unpaced (ingest.pace: false) and per-event (processing.batch: false) taking turns; rates over the steady part (%s → the end of the load);\n"+
		"  keeps up: delivered/s ≥ %.0f %% of accepted/s and depth growth ≤ %.0f %% of accepted/s\n",
		o.colocatedSenders, paced, o.duration, steadyFrom, keepUpDelivered*100, keepUpGrowth*100)
	fmt.Fprintf(w, colocatedFormat, "RUN", "ROUND", "C", "EVENTS", "ACCEPTED/s", "DELIVERED/s", "P99 ms", "MAX ms", "END DEPTH", "DEPTH/s", "KEEPS UP", "E2E/s", "CHECK")
}

func printColocatedRow(w io.Writer, r *Result) {
	acc, del, depth, growth, kept := "-", "-", "-", "-", "-"
	if c := r.Colocated; c != nil {
		acc, del = fmt.Sprintf("%.0f", c.AcceptedPerSec), fmt.Sprintf("%.0f", c.DeliveredPerSec)
		depth, growth = fmt.Sprint(c.EndDepth), fmt.Sprintf("%+.0f", c.DepthGrowthPerSec)
		kept = map[bool]string{true: "yes", false: "NO"}[c.KeepsUp]
	}
	fmt.Fprintf(w, colocatedFormat, r.Mode, fmt.Sprint(r.Round), fmt.Sprint(r.Concurrency), fmt.Sprint(r.Accepted), acc, del,
		fmt.Sprintf("%.1f", r.P99ms), fmt.Sprintf("%.1f", r.Maxms), depth, growth, kept, fmt.Sprintf("%.0f", r.EndToEndPerSec), checkText(r))
}

// printColocatedSummary prints the colocated scenario's medians and targets.
func printColocatedSummary(w io.Writer, rep *Report) {
	fmt.Fprintln(w, "colocated summary: medians (min-max) of each run's rounds, the runs having taken turns")
	const f = "%-19s %5s %11s %12s %15s %7s %9s %8s %8s\n"
	fmt.Fprintf(w, f, "RUN", "RUNS", "ACCEPTED/s", "DELIVERED/s", "(min-max)", "P99 ms", "END DEPTH", "DEPTH/s", "KEPT UP")
	for _, s := range rep.Summary {
		if s.Scenario != scenarioColocated || s.Colocated == nil {
			continue
		}
		c := s.Colocated
		fmt.Fprintf(w, f, s.Mode, fmt.Sprint(s.Runs), fmt.Sprintf("%.0f", c.AcceptedPerSec), fmt.Sprintf("%.0f", c.DeliveredPerSec),
			fmt.Sprintf("(%.0f-%.0f)", c.MinDelivered, c.MaxDelivered), fmt.Sprintf("%.1f", s.P99ms), fmt.Sprintf("%.0f", c.EndDepth),
			fmt.Sprintf("%+.0f", c.DepthGrowthPerSec), fmt.Sprintf("%d of %d", c.RoundsKeptUp, s.Runs))
	}
	for _, t := range rep.Targets {
		if t.Scenario != scenarioColocated {
			continue
		}
		verdict := "met"
		if !t.Met {
			verdict = "NOT met"
		}
		fmt.Fprintf(w, "  target %s: %s, %s (%d of %d rounds)\n", t.Name, verdict, t.Measured, t.RoundsMet, t.Rounds)
	}
}

// chartRuns picks the runs colocated.svg draws: the batched run of the
// median round (by delivered/s over the steady part; with an even number
// of rounds, the lower of the middle two) and the per-event run of the
// same round (either nil when missing).
func chartRuns(rs []Result) (batched, perEvent *Result) {
	var bs []*Result
	for i := range rs {
		if r := &rs[i]; r.Scenario == scenarioColocated && r.Mode == runColocatedBatched && len(r.Series) > 1 {
			bs = append(bs, r)
		}
	}
	round := -1
	if len(bs) > 0 {
		slices.SortStableFunc(bs, func(a, b *Result) int { return cmp.Compare(deliveredPerSec(a), deliveredPerSec(b)) })
		batched = bs[(len(bs)-1)/2]
		round = batched.Round
	}
	for i := range rs {
		if r := &rs[i]; r.Scenario == scenarioColocated && r.Mode == runColocatedPerEvent && len(r.Series) > 1 {
			if r.Round == round || (round < 0 && perEvent == nil) {
				perEvent = r
			}
		}
	}
	return batched, perEvent
}

func deliveredPerSec(r *Result) float64 {
	if r.Colocated == nil {
		return 0
	}
	return r.Colocated.DeliveredPerSec
}

// colocatedSVG draws two panels against time since the load began, for the
// batched and per-event runs chartRuns picks: accepted/s (solid) and
// delivered/s (dashed) over each second, and the queue depth, with the end
// of the load marked. "" when there is nothing to draw.
func colocatedSVG(rep *Report) string {
	batched, perEvent := chartRuns(rep.Results)
	type run struct {
		r     *Result
		label string
		color string
	}
	var runs []run
	if batched != nil {
		runs = append(runs, run{batched, "batched", "#1f77b4"})
	}
	if perEvent != nil {
		runs = append(runs, run{perEvent, "per-event", "#ff7f0e"})
	}
	if len(runs) == 0 {
		return ""
	}
	const (
		W, H         = 960, 450
		panelW       = 400
		top, bottom  = 90, 370
		leftA, leftB = 80, 560
	)
	// The per-second rates: between consecutive samples, drawn at the
	// middle of the interval; accepted/s only during the load.
	type pt struct{ t, v float64 }
	rates := func(s []Sample, accepted bool) []pt {
		var out []pt
		for i := 1; i < len(s); i++ {
			dt := s[i].TSec - s[i-1].TSec
			if dt <= 0 || (accepted && s[i].Drain) {
				continue
			}
			d := s[i].Delivered - s[i-1].Delivered
			if accepted {
				d = s[i].Accepted - s[i-1].Accepted
			}
			out = append(out, pt{(s[i].TSec + s[i-1].TSec) / 2, float64(d) / dt})
		}
		return out
	}
	var maxT, maxR, maxD, loadEnd float64
	for _, ru := range runs {
		s := ru.r.Series
		maxT = max(maxT, s[len(s)-1].TSec)
		for _, p := range append(rates(s, true), rates(s, false)...) {
			maxR = max(maxR, p.v)
		}
		for _, sm := range s {
			maxD = max(maxD, float64(sm.Depth))
			if !sm.Drain {
				loadEnd = max(loadEnd, sm.TSec)
			}
		}
	}
	maxT, maxR, maxD = math.Max(1, math.Ceil(maxT)), niceCeil(maxR), niceCeil(maxD)
	xAt := func(left int, t float64) float64 { return float64(left) + t/maxT*panelW }
	yAt := func(v, vmax float64) float64 { return bottom - (v/vmax)*(bottom-top) }
	step := math.Max(1, niceCeil(maxT/8)) // seconds between x ticks
	if step > 1 {
		step = math.Ceil(step)
	}

	var sb strings.Builder
	fmt.Fprintf(&sb, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", W, H, W, H)
	fmt.Fprintf(&sb, `<rect width="%d" height="%d" fill="white"/>`+"\n", W, H)
	fmt.Fprintf(&sb, `<text x="%d" y="20" font-size="15" font-weight="bold">hookline --role all: does processing keep up with ingest? (%s, %d CPUs, fsync %s)</text>`+"\n",
		leftA-40, html.EscapeString(rep.Machine.Postgres), rep.Machine.CPUs, html.EscapeString(rep.Machine.Fsync))
	r0 := runs[0].r
	rounds := 0
	for _, r := range rep.Results {
		if r.Scenario == scenarioColocated && r.Mode == r0.Mode {
			rounds++
		}
	}
	senders := "closed-loop senders"
	if rate, _ := rep.Settings["colocated_rate"].(float64); rate > 0 {
		senders = fmt.Sprintf("senders paced to %.0f/s together", rate)
	}
	fmt.Fprintf(&sb, `<text x="%d" y="38" fill="#555">%s</text>`+"\n", leftA-40,
		html.EscapeString(fmt.Sprintf("%d %s, no duplicates, %v load; round %d of %d (the median round by batched delivered/s)",
			r0.Concurrency, senders, rep.Settings["duration"], r0.Round, rounds)))
	for i, ru := range runs {
		if c := ru.r.Colocated; c != nil {
			fmt.Fprintf(&sb, `<text x="%d" y="%d" fill="%s">%s</text>`+"\n", leftA-40, 54+14*i, ru.color,
				html.EscapeString(fmt.Sprintf("%s: steady %.0f accepted/s, %.0f delivered/s, depth %+.0f/s, %d at the end of the load, p99 ack %.1f ms: %s",
					ru.label, c.AcceptedPerSec, c.DeliveredPerSec, c.DepthGrowthPerSec, c.EndDepth, ru.r.P99ms,
					map[bool]string{true: "keeps up", false: "falls behind"}[c.KeepsUp])))
		}
	}
	panel := func(left int, title string, vmax float64, unit string) {
		chartAxes(&sb, chartPanel{left: left, top: top, bottom: bottom, width: panelW}, title, 10, vmax)
		for t := 0.0; t <= maxT+1e-9; t += step {
			fmt.Fprintf(&sb, `<text x="%.1f" y="%d" text-anchor="middle">%g</text>`+"\n", xAt(left, t), bottom+18, t)
		}
		x := xAt(left, loadEnd)
		fmt.Fprintf(&sb, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#888" stroke-dasharray="3 3"/>`+"\n", x, top, x, bottom)
		fmt.Fprintf(&sb, `<text x="%.1f" y="%d" font-size="10" fill="#555">end of load</text>`+"\n", x+3, top+12)
		fmt.Fprintf(&sb, `<text x="%d" y="%d" text-anchor="middle">seconds since the load began</text>`+"\n", left+panelW/2, bottom+36)
		fmt.Fprintf(&sb, `<text x="%d" y="%d" text-anchor="middle" transform="rotate(-90 %d %d)">%s</text>`+"\n",
			left-55, (top+bottom)/2, left-55, (top+bottom)/2, html.EscapeString(unit))
	}
	panel(leftA, "Accepted and delivered per second", maxR, "events per second")
	panel(leftB, "Queue depth (accepted − delivered)", maxD, "events")
	line := func(left int, pts []pt, vmax float64, color, dash string) {
		if len(pts) < 2 {
			return
		}
		s := make([]string, len(pts))
		for i, p := range pts {
			s[i] = fmt.Sprintf("%.1f,%.1f", xAt(left, p.t), yAt(p.v, vmax))
		}
		fmt.Fprintf(&sb, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"%s/>`+"\n", strings.Join(s, " "), color, dash)
	}
	const dashed = ` stroke-dasharray="6 4"`
	for _, ru := range runs {
		line(leftA, rates(ru.r.Series, true), maxR, ru.color, "")
		line(leftA, rates(ru.r.Series, false), maxR, ru.color, dashed)
		depth := make([]pt, len(ru.r.Series))
		for i, sm := range ru.r.Series {
			depth[i] = pt{sm.TSec, float64(sm.Depth)}
		}
		line(leftB, depth, maxD, ru.color, "")
	}
	ly := H - 22
	x := leftA - 40
	for _, ru := range runs {
		for _, l := range []struct{ label, dash string }{{ru.label + ": accepted/s", ""}, {ru.label + ": delivered/s", dashed}} {
			fmt.Fprintf(&sb, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/>`+"\n", x, ly, x+24, ly, ru.color, l.dash)
			fmt.Fprintf(&sb, `<text x="%d" y="%d">%s</text>`+"\n", x+30, ly+4, html.EscapeString(l.label))
			x += 215
		}
	}
	sb.WriteString("</svg>\n")
	return sb.String()
}
