package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookline/hookline/jobs"
)

// Report is what a run found.
type Report struct {
	Options Options
	Dir     string // kept working directory (logs), when kept

	Faults []string

	Events, EventsHTTP, EventsLedger, Doomed int

	Sent, Accepted, Duplicates, Unavailable, ConnErrors int64
	Outage503s, OutageProbes                            int64
	MaxOutageLatency                                    time.Duration

	Got2xx, StoredWithout2xx int
	Completed, CompletedHTTP int
	CompletedLedger          int
	Dead, DeadItems          int

	DestRequests            int
	RedeliveredAfterCrash   int
	RedeliveredAfterSuccess int
	Rescued                 int // event jobs River rescued: their worker died (or lost Postgres) mid-attempt
	MaxCrashGap             time.Duration

	Lost, DoubleEffects, MissingEffects, Concurrent int
	StuckClaims                                     int64

	SendTime, SettleTime, Duration time.Duration
	Violations                     []string
}

type dbEvent struct {
	state    string
	attempts int
}

// check reads the final state from Postgres and compares it with what the
// senders and the destination saw.
func (h *harness) check(ctx context.Context, rep *Report) {
	o := h.o
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	stored := map[string]dbEvent{} // by source + ":" + event_id
	if err := queryPairs(ctx, h.pool, `SELECT source, event_id, state, attempts FROM hookline_events`, func(r pgx.Rows) error {
		var src, id string
		var e dbEvent
		if err := r.Scan(&src, &id, &e.state, &e.attempts); err != nil {
			return err
		}
		stored[src+":"+id] = e
		return nil
	}); err != nil {
		h.violation("read hookline_events: %v", err)
		return
	}
	deadFailed := map[string]int{}
	if err := queryPairs(ctx, h.pool, `SELECT source, event_id, reason FROM hookline_dead`, func(r pgx.Rows) error {
		var src, id, reason string
		if err := r.Scan(&src, &id, &reason); err != nil {
			return err
		}
		rep.DeadItems++
		if reason != "failed" {
			h.violation("dead item %s:%s with reason %q (sources use on_duplicate: skip)", src, id, reason)
			return nil
		}
		deadFailed[src+":"+id]++
		return nil
	}); err != nil {
		h.violation("read hookline_dead: %v", err)
		return
	}
	effects := map[string]int{}
	if err := queryPairs(ctx, h.pool, `SELECT source, event_id, count(*) FROM chaos_ledger GROUP BY 1, 2`, func(r pgx.Rows) error {
		var src, id string
		var n int
		if err := r.Scan(&src, &id, &n); err != nil {
			return err
		}
		effects[src+":"+id] = n
		return nil
	}); err != nil {
		h.violation("read chaos_ledger: %v", err)
		return
	}
	js, err := jobs.ReadJobStats(ctx, h.pool, true)
	if err != nil {
		h.violation("read River's event jobs: %v", err)
		return
	}
	riverAttempts := js.LatestAttempts // event key -> attempts River counted on its latest job
	rep.Rescued = js.Rescued
	discarded := js.Abandoned
	var processing int
	if err := h.pool.QueryRow(ctx, `SELECT count(*) FROM hookline_claims WHERE state = 'processing'`).Scan(&processing); err != nil {
		h.violation("read claims: %v", err)
	}
	if processing > 0 {
		h.violation("%d claims still processing after settling", processing)
	}
	if discarded > 0 {
		h.violation("%d event jobs discarded or cancelled by River (their events never reach hookline's dead set)", discarded)
	}

	keys := h.dest.snapshot()
	known := map[string]bool{}
	lim := newLimiter(h)
	for _, ev := range h.events {
		k := ev.source + ":" + ev.id
		known[k] = true
		rep.Events++
		if ev.source == "http" {
			rep.EventsHTTP++
		} else {
			rep.EventsLedger++
		}
		if ev.doomed {
			rep.Doomed++
		}
		row, ok := stored[k]
		if ev.got2xx.Load() {
			rep.Got2xx++
			if !ok {
				rep.Lost++
				lim.add("lost", "event %s got a 2xx but is not stored", k)
				continue
			}
		} else if ok {
			rep.StoredWithout2xx++ // committed, but the answer was cut (a kill): allowed
		} else {
			continue
		}
		switch row.state {
		case "completed":
			rep.Completed++
			if deadFailed[k] > 0 {
				lim.add("dead", "event %s is completed but still in the dead set", k)
			}
			if ev.doomed {
				lim.add("dead", "doomed event %s completed (its every attempt fails)", k)
			}
			if ev.source == "http" {
				rep.CompletedHTTP++
				if keys[k].successes == 0 {
					lim.add("lost", "event %s completed without a 2xx from the destination", k)
				}
			} else {
				rep.CompletedLedger++
				switch n := effects[k]; {
				case n == 0:
					rep.MissingEffects++
					lim.add("effects", "event %s completed without its ledger row", k)
				case n > 1:
					rep.DoubleEffects++
					lim.add("effects", "event %s has %d ledger rows", k, n)
				}
			}
		case "dead":
			rep.Dead++
			if deadFailed[k] == 0 {
				lim.add("dead", "event %s is dead but not in the dead set", k)
			}
			if row.attempts < o.MaxAttempts {
				// River's budget ran out with fewer destination attempts:
				// an attempt was used up without reaching the destination
				// (a crash or an outage before its claim committed).
				lim.add("dead", "event %s is dead after %d attempts (max_attempts %d; River counted %d on its job)",
					k, row.attempts, o.MaxAttempts, riverAttempts[k])
			}
			if !ev.doomed {
				lim.add("dead", "event %s is dead though only its first %d attempts may fail", k, o.RandomAttempts)
			}
			if effects[k] > 0 {
				rep.DoubleEffects++
				lim.add("effects", "dead event %s has %d ledger rows", k, effects[k])
			}
		default:
			rep.Lost++
			lim.add("lost", "event %s is still %s (attempts %d)", k, row.state, row.attempts)
		}
	}
	for k := range stored {
		if !known[k] {
			lim.add("lost", "stored event %s was never sent with a 2xx expected (a probe during the outage?)", k)
		}
	}
	for k := range deadFailed {
		if !known[k] {
			lim.add("dead", "dead item for unknown event %s", k)
		}
	}
	lim.flush()

	// The destination's view.
	h.dest.mu.Lock()
	rep.DestRequests = h.dest.requests
	rep.Concurrent = h.dest.concurrent
	if h.dest.concurrent+h.dest.wrongKey+h.dest.wrongBody+h.dest.unknown > 0 {
		h.violation("destination: %d concurrent requests for one key, %d wrong Idempotency-Key, %d wrong body, %d unknown events; e.g. %s",
			h.dest.concurrent, h.dest.wrongKey, h.dest.wrongBody, h.dest.unknown, strings.Join(h.dest.examples, "; "))
	}
	h.dest.mu.Unlock()
	gapBound := o.Lease + rescuerInterval + slack
	for k, ks := range keys {
		if ks.afterCrash {
			rep.RedeliveredAfterCrash++
		}
		if ks.redelivered && !ks.afterCrash {
			rep.RedeliveredAfterSuccess++
		}
		for _, g := range ks.gaps {
			gap := g[1].Sub(g[0])
			rep.MaxCrashGap = max(rep.MaxCrashGap, gap)
			bound := gapBound
			if h.out.overlaps(g[0], g[1]) {
				bound += o.PGDown
			}
			if gap > bound {
				h.violation("event %s: retried %s after its worker crashed (bound lease + 30s + slack = %s)", k, gap.Round(time.Millisecond), bound)
			}
		}
	}

	// The senders' view.
	s := &h.stats
	rep.Sent, rep.Accepted, rep.Duplicates = s.requests.Load(), s.accepted.Load(), s.duplicates.Load()
	rep.Unavailable, rep.ConnErrors = s.unavailable.Load(), s.connErrors.Load()
	rep.Outage503s = s.outage503s.Load()
	rep.OutageProbes = h.probe503s.Load() + h.probeReadyz503.Load()
	rep.MaxOutageLatency = time.Duration(s.maxOutageLatency.Load())
	if n := s.unexpected.Load() + s.badRetryAfter.Load() + s.twoXXWhileDown.Load() + s.gaveUp.Load(); n > 0 {
		s.mu.Lock()
		h.violation("senders: %d unexpected answers, %d 503s without whole-second Retry-After, %d 2xx while Postgres was down, %d gave up; e.g. %s",
			s.unexpected.Load(), s.badRetryAfter.Load(), s.twoXXWhileDown.Load(), s.gaveUp.Load(), strings.Join(s.examples, "; "))
		s.mu.Unlock()
	}
	if rep.MaxOutageLatency > outageAnswerBound {
		h.violation("an ingest answer took %s during the outage (bound %s)", rep.MaxOutageLatency.Round(time.Millisecond), outageAnswerBound)
	}
	rep.StuckClaims = h.stuckMax.Load()
	if rep.StuckClaims > 0 {
		ex, _ := h.stuckExample.Load().(string)
		h.violation("%d claims stayed processing more than %s past their lease (e.g. %s)", rep.StuckClaims, rescuerInterval+slack, ex)
	}
	if unsent := rep.Events - rep.Got2xx - rep.StoredWithout2xx; unsent > 0 {
		h.violation("%d events were never stored (their senders gave up)", unsent)
	}
}

// overlaps reports whether [a, b] overlaps the last outage.
func (o *outage) overlaps(a, b time.Time) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.down.IsZero() {
		return false
	}
	end := o.up
	if o.inProgress || end.IsZero() {
		end = time.Now()
	}
	return a.Before(end) && b.After(o.down)
}

// limiter groups violations by kind, keeping a few examples each.
type limiter struct {
	h     *harness
	n     map[string]int
	ex    map[string][]string
	order []string
}

func newLimiter(h *harness) *limiter {
	return &limiter{h: h, n: map[string]int{}, ex: map[string][]string{}}
}

func (l *limiter) add(kind, format string, args ...any) {
	if l.n[kind] == 0 {
		l.order = append(l.order, kind)
	}
	l.n[kind]++
	if len(l.ex[kind]) < 5 {
		l.ex[kind] = append(l.ex[kind], fmt.Sprintf(format, args...))
	}
}

func (l *limiter) flush() {
	for _, k := range l.order {
		l.h.violation("%s: %d cases; e.g. %s", k, l.n[k], strings.Join(l.ex[k], "; "))
	}
}

// Print writes the report.
func (r *Report) Print(w io.Writer) {
	o := r.Options
	ledger := "off"
	if o.LedgerShare > 0 {
		ledger = fmt.Sprintf("%d events", r.EventsLedger)
	}
	fmt.Fprintf(w, "hookline chaos report\n")
	fmt.Fprintf(w, "  scenario: %d events x %d deliveries, %d senders; instances %s; seed %d\n",
		o.Events, o.Deliveries, o.Senders, strings.Join(o.Instances, ","), o.Seed)
	fmt.Fprintf(w, "            sources: http -> destination (%d events), ledger -> Go handler in transactional mode (%s); %d doomed\n",
		r.EventsHTTP, ledger, r.Doomed)
	fmt.Fprintf(w, "            lease %s, destination timeout %s, max_attempts %d, random 5xx %.0f%% / time-outs %.0f%% on attempts 1-%d\n",
		o.Lease, o.DestTimeout, o.MaxAttempts, o.FailRate*100, o.TimeoutRate*100, o.RandomAttempts)
	fmt.Fprintf(w, "  faults (%d instance kills, %d Postgres restarts of %s):\n", o.Kills, o.PGRestarts, o.PGDown)
	for _, f := range r.Faults {
		fmt.Fprintf(w, "    %s\n", f)
	}
	line := func(name string, v any, note string) {
		if note != "" {
			note = "  (" + note + ")"
		}
		fmt.Fprintf(w, "  %-26s %8v%s\n", name, v, note)
	}
	line("sent", r.Sent, "HTTP requests, retries included")
	line("accepted", r.Accepted, "answered 200 accepted")
	line("duplicates", r.Duplicates, "answered 200 duplicate")
	line("503 + Retry-After", r.Unavailable, fmt.Sprintf("%d of them during the outage, slowest %s (bound 5s)", r.Outage503s, r.MaxOutageLatency.Round(time.Millisecond)))
	line("outage probes", r.OutageProbes, "ingest POST -> 503 + Retry-After, /readyz -> 503, each within 5s")
	line("connection errors", r.ConnErrors, "instance killed; retried elsewhere")
	line("stored without 2xx", r.StoredWithout2xx, "committed, answer cut by a kill: allowed")
	line("delivered", r.Completed, fmt.Sprintf("completed: http %d, ledger %d", r.CompletedHTTP, r.CompletedLedger))
	line("destination requests", r.DestRequests, "")
	line("redelivered after crash", r.RedeliveredAfterCrash, fmt.Sprintf("destination call cut by a kill, retried; slowest retry %s", r.MaxCrashGap.Round(time.Millisecond)))
	line("rescued after crash", r.Rescued, "event jobs whose worker died or lost Postgres mid-attempt, run again (both sources)")
	line("redelivered after 2xx", r.RedeliveredAfterSuccess, "at-least-once: 2xx sent, completion not recorded")
	line("dead", r.Dead, fmt.Sprintf("%d dead items, reason failed; doomed events: %d", r.DeadItems, r.Doomed))
	line("lost", r.Lost, "must be 0")
	line("double-effects", r.DoubleEffects, "must be 0")
	line("missing effects", r.MissingEffects, "must be 0")
	line("concurrent per key", r.Concurrent, "must be 0")
	line("stuck claims", r.StuckClaims, "must be 0")
	fmt.Fprintf(w, "  time: %s (sending %s, settling %s)\n", r.Duration.Round(time.Second), r.SendTime.Round(time.Second), r.SettleTime.Round(time.Second))
	if r.Dir != "" {
		fmt.Fprintf(w, "  logs: %s\n", r.Dir)
	}
	if len(r.Violations) == 0 {
		fmt.Fprintf(w, "  RESULT: PASS (0 violations)\n")
		return
	}
	fmt.Fprintf(w, "  RESULT: FAIL (%d violations)\n", len(r.Violations))
	for _, v := range r.Violations {
		fmt.Fprintf(w, "    - %s\n", v)
	}
}
