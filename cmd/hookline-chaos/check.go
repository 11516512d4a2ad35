package main

import (
	"context"
	"fmt"
	"io"
	"slices"
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

	Events, EventsHTTP, EventsLedger, EventsFanout, Doomed int

	Sent, Accepted, Duplicates, Unavailable, ConnErrors int64
	Outage503s, OutageProbes                            int64
	MaxOutageLatency                                    time.Duration

	Got2xx, StoredWithout2xx int
	Completed, CompletedHTTP int
	CompletedLedger          int
	CompletedFanout          int
	Dead, DeadItems          int

	DestRequests            int // the http source's destination
	RedeliveredAfterCrash   int // every HTTP destination
	RedeliveredAfterSuccess int // every HTTP destination
	Rescued                 int // attempts lost mid-way (their worker died, lost Postgres or let its lease run out), run again
	MaxCrashGap             time.Duration

	// Lost counts events (any of whose destinations lost it), the others
	// (event, destination)s; each sums every source, the fan-out one's
	// included.
	Lost, DoubleEffects, MissingEffects, Concurrent int
	StuckClaims                                     int64

	Fanout  FanoutReport
	Ordered OrderedReport
	Recon   ReconReport

	SendTime, SettleTime, Duration time.Duration
	Violations                     []string
	// Aborted is the harness's own error when the run could not finish
	// (nothing was checked then).
	Aborted string
}

// FanoutReport is what the fan-out source's destinations got, by
// destination name; only events that were stored count.
type FanoutReport struct {
	// Routed and FilteredOut count the (event, destination)s the harness's
	// model of the filters (fanoutRoutes) lets through and keeps out.
	Routed, FilteredOut map[string]int
	Completed, Dead     map[string]int
	// Requests and MaxInFlight are the HTTP destinations' (sink, flaky);
	// LedgerRows is the books handler's committed effects.
	Requests, MaxInFlight map[string]int
	LedgerRows            int
	// Violations, each must be 0: (event, destination)s lost, with two or
	// more or no effects, with concurrent requests or handler transactions;
	// and (event, destination)s a filter excludes that got a state row, a
	// request, an effect or a dead item anyway.
	Lost, DoubleEffects, MissingEffects, Concurrent, Misrouted int
}

type dbEvent struct {
	state    string
	attempts int
}

// finalState is what check read from Postgres and the HTTP destinations,
// for the per-source checks; known and knownED collect the source:event_id
// and edKeys the checks account for.
type finalState struct {
	stored         map[string]dbEvent  // by source:event_id
	eds            map[string]dbEvent  // by edKey
	deadFailed     map[string]int      // dead items (reason failed) by edKey
	effects        map[string]int      // chaos_ledger rows by edKey
	keys           map[string]keyState // the HTTP destinations' view, by edKey
	known, knownED map[string]bool
}

// check reads the final state from Postgres and compares it with what the
// senders, the HTTP destinations and the Go handlers saw.
func (h *harness) check(ctx context.Context, rep *Report) {
	o := h.o
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	stored := map[string]dbEvent{} // by source + ":" + event_id
	if err := queryPairs(ctx, h.pool, `SELECT source, event_id, state, attempts FROM hookline_event_states`, func(r pgx.Rows) error {
		var src, id string
		var e dbEvent
		if err := r.Scan(&src, &id, &e.state, &e.attempts); err != nil {
			return err
		}
		stored[src+":"+id] = e
		return nil
	}); err != nil {
		h.violation("read hookline_event_states: %v", err)
		return
	}
	eds := map[string]dbEvent{} // by edKey
	if err := queryPairs(ctx, h.pool, `SELECT source, event_id, destination, state, attempts FROM hookline_event_destinations`, func(r pgx.Rows) error {
		var src, id, dest string
		var e dbEvent
		if err := r.Scan(&src, &id, &dest, &e.state, &e.attempts); err != nil {
			return err
		}
		eds[edKey(src, dest, id)] = e
		return nil
	}); err != nil {
		h.violation("read hookline_event_destinations: %v", err)
		return
	}
	deadFailed := map[string]int{} // by edKey
	if err := queryPairs(ctx, h.pool, `SELECT source, event_id, destination, reason FROM hookline_dead`, func(r pgx.Rows) error {
		var src, id, dest, reason string
		if err := r.Scan(&src, &id, &dest, &reason); err != nil {
			return err
		}
		rep.DeadItems++
		if reason != "failed" {
			h.violation("dead item %s with reason %q (sources use on_duplicate: skip)", edKey(src, dest, id), reason)
			return nil
		}
		deadFailed[edKey(src, dest, id)]++
		return nil
	}); err != nil {
		h.violation("read hookline_dead: %v", err)
		return
	}
	effects := map[string]int{} // by edKey
	if err := queryPairs(ctx, h.pool, `SELECT source, destination, event_id, count(*) FROM chaos_ledger GROUP BY 1, 2, 3`, func(r pgx.Rows) error {
		var src, dest, id string
		var n int
		if err := r.Scan(&src, &dest, &id, &n); err != nil {
			return err
		}
		effects[edKey(src, dest, id)] = n
		return nil
	}); err != nil {
		h.violation("read chaos_ledger: %v", err)
		return
	}
	overlaps, err := readOverlaps(h.overlapsPath())
	if err != nil {
		h.violation("read the handlers' overlaps: %v", err)
	}
	js, err := jobs.ReadJobStats(ctx, h.pool, true)
	if err != nil {
		h.violation("read River's event jobs: %v", err)
		return
	}
	riverAttempts := js.LatestAttempts // by edKey: attempts River counted on the (event, destination)'s latest job
	// Attempts cut short by a crash: each is logged as lost when the next
	// attempt starts (River's record of the rescue leaves with the job
	// when its event completes).
	if err := h.pool.QueryRow(ctx, `SELECT count(*) FROM hookline_attempts WHERE starts_with(error, $1)`, jobs.LostAttemptPrefix).Scan(&rep.Rescued); err != nil {
		h.violation("read lost attempts: %v", err)
	}
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
	known := map[string]bool{}   // source:event_id of every event sent
	knownED := map[string]bool{} // edKey of every (event, destination) the checks below account for
	lim := newLimiter(h)
	fr := &rep.Fanout
	fr.Routed, fr.FilteredOut, fr.Completed, fr.Dead = map[string]int{}, map[string]int{}, map[string]int{}, map[string]int{}
	fr.Requests, fr.MaxInFlight = map[string]int{}, map[string]int{}
	// deadAttempts checks a dead (event, destination): dead only after
	// max_attempts attempts at the destination.
	deadAttempts := func(dk string, attempts int) {
		if attempts < o.MaxAttempts {
			// River's budget ran out with fewer destination attempts:
			// an attempt was used up without reaching the destination
			// (a crash or an outage before its claim committed).
			lim.add("dead", "%s is dead after %d attempts (max_attempts %d; River counted %d on its job)",
				dk, attempts, o.MaxAttempts, riverAttempts[dk])
		}
	}
	for _, ev := range h.events {
		k := ev.source + ":" + ev.id
		dk := edKey(ev.source, destDefault, ev.id) // the http and ledger sources' single destination
		known[k] = true
		rep.Events++
		switch ev.source {
		case srcHTTP:
			rep.EventsHTTP++
		case srcLedger:
			rep.EventsLedger++
		case srcFanout:
			rep.EventsFanout++
		}
		if ev.doomed {
			rep.Doomed++
		}
		if ev.source == srcFanout {
			for _, dest := range fanoutDests {
				knownED[edKey(ev.source, dest, ev.id)] = true
			}
		} else {
			knownED[dk] = true
		}
		row, ok := stored[k]
		if ev.got2xx.Load() {
			rep.Got2xx++
			if !ok {
				rep.Lost++
				if ev.source == srcFanout {
					fr.Lost += len(ev.routes)
				}
				lim.add("lost", "event %s got a 2xx but is not stored", k)
				continue
			}
		} else if ok {
			rep.StoredWithout2xx++ // committed, but the answer was cut (a kill): allowed
		} else {
			continue
		}
		if ev.source == srcFanout {
			h.checkFanout(ev, row, eds, deadFailed, effects, keys, riverAttempts, rep, lim, deadAttempts)
			continue
		}
		switch row.state {
		case "completed":
			rep.Completed++
			if deadFailed[dk] > 0 {
				lim.add("dead", "event %s is completed but still in the dead set", k)
			}
			if ev.doomed {
				lim.add("dead", "doomed event %s completed (its every attempt fails)", k)
			}
			if ev.source == srcHTTP {
				rep.CompletedHTTP++
				if keys[dk].successes == 0 {
					lim.add("lost", "event %s completed without a 2xx from the destination", k)
				}
			} else {
				rep.CompletedLedger++
				switch n := effects[dk]; {
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
			if deadFailed[dk] == 0 {
				lim.add("dead", "event %s is dead but not in the dead set", k)
			}
			deadAttempts(dk, row.attempts)
			if !ev.doomed {
				lim.add("dead", "event %s is dead though only its first %d attempts may fail", k, o.RandomAttempts)
			}
			if effects[dk] > 0 {
				rep.DoubleEffects++
				lim.add("effects", "dead event %s has %d ledger rows", k, effects[dk])
			}
		default:
			rep.Lost++
			lim.add("lost", "event %s is still %s (attempts %d)", k, row.state, row.attempts)
		}
	}
	st := &finalState{stored: stored, eds: eds, deadFailed: deadFailed, effects: effects, keys: keys, known: known, knownED: knownED}
	h.checkOrdered(ctx, st, rep, lim)
	h.checkRecon(ctx, st, rep, lim)
	for k := range stored {
		if !known[k] {
			lim.add("lost", "stored event %s was never sent with a 2xx expected (a probe during the outage?)", k)
		}
	}
	for dk := range eds {
		if !knownED[dk] {
			lim.add("routing", "hookline_event_destinations has %s, an (event, destination) no event sent can have", dk)
		}
	}
	for dk := range deadFailed {
		if !knownED[dk] {
			lim.add("dead", "dead item for unknown (event, destination) %s", dk)
		}
	}
	for dk, n := range effects {
		if !knownED[dk] {
			lim.add("effects", "%d ledger rows for unknown (event, destination) %s", n, dk)
		}
		if strings.HasPrefix(dk, srcFanout+":"+destBooks+":") {
			fr.LedgerRows += n
		}
	}
	lim.flush()

	// The HTTP destinations' view.
	h.dest.mu.Lock()
	var concurrent, wrongKey, wrongBody, wrongDest, unknown, filtered int
	for _, ep := range h.dest.endpoints {
		concurrent += ep.concurrent
		wrongKey += ep.wrongKey
		wrongBody += ep.wrongBody
		wrongDest += ep.wrongDest
		unknown += ep.unknown
		filtered += ep.filtered
		if ep.source == srcFanout {
			fr.Requests[ep.name] = ep.requests
			fr.MaxInFlight[ep.name] = ep.maxInFlight
			fr.Concurrent += ep.concurrent
		}
	}
	rep.DestRequests = h.dest.endpoint(srcHTTP, destDefault).requests
	rep.Concurrent = concurrent
	if concurrent+wrongKey+wrongBody+wrongDest+unknown+filtered+h.dest.stray > 0 {
		h.violation("destinations: %d concurrent requests for one (destination, event), %d wrong Idempotency-Key, %d wrong body, %d wrong Hookline-Destination, %d unknown events, %d events their filter excludes, %d requests to no destination; e.g. %s",
			concurrent, wrongKey, wrongBody, wrongDest, unknown, filtered, h.dest.stray, strings.Join(h.dest.examples, "; "))
	}
	h.dest.mu.Unlock()
	// The Go handlers' view: two transactions running the handler for one
	// (destination, event) at once. (Two of one ordering key's are
	// checkOrdered's.)
	overlaps = slices.DeleteFunc(overlaps, func(ov string) bool { return strings.HasPrefix(ov, orderOverlapPrefix) })
	rep.Concurrent += len(overlaps)
	for _, ov := range overlaps {
		if strings.HasPrefix(ov, srcFanout+":") {
			fr.Concurrent++
		}
	}
	if len(overlaps) > 0 {
		h.violation("Go handlers: %d concurrent transactions for one (destination, event); e.g. %s",
			len(overlaps), strings.Join(overlaps[:min(len(overlaps), 5)], "; "))
	}
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
				h.violation("%s: retried %s after its worker crashed (bound lease + 30s + slack = %s)", k, gap.Round(time.Millisecond), bound)
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

// checkFanout checks a stored fan-out event at each of its source's
// destinations: a destination its filter matches has a state row that ended
// completed (with a 2xx from the HTTP destination, exactly one ledger row
// from the handler) or, for a doomed event at flaky only, dead (after
// max_attempts, with its dead item and no effect); a destination its filter
// excludes has no state row, no request, no effect and no dead item. The
// event's own state (hookline_event_states) is dead exactly when one of its
// destinations is.
func (h *harness) checkFanout(ev *event, row dbEvent, eds map[string]dbEvent, deadFailed, effects map[string]int,
	keys map[string]keyState, riverAttempts map[string]int, rep *Report, lim *limiter, deadAttempts func(string, int)) {
	fr := &rep.Fanout
	k := ev.source + ":" + ev.id
	lost := false
	for _, dest := range fanoutDests {
		dk := edKey(ev.source, dest, ev.id)
		ed, has := eds[dk]
		if !ev.routedTo(dest) {
			fr.FilteredOut[dest]++
			misrouted := func(what string, args ...any) {
				fr.Misrouted++
				lim.add("filter", "%s (type %s, region %q), which the filter excludes, %s", dk, ev.typ, ev.region, fmt.Sprintf(what, args...))
			}
			switch {
			case has:
				misrouted("has a %s state row", ed.state)
			case keys[dk].requests > 0:
				misrouted("reached the destination %d times", keys[dk].requests)
			case effects[dk] > 0:
				misrouted("has %d ledger rows", effects[dk])
			case deadFailed[dk] > 0:
				misrouted("has a dead item")
			}
			continue
		}
		fr.Routed[dest]++
		if !has {
			fr.Lost++
			lost = true
			lim.add("lost", "%s (type %s, region %q) matches the filter but has no state row", dk, ev.typ, ev.region)
			continue
		}
		switch ed.state {
		case "completed":
			fr.Completed[dest]++
			if deadFailed[dk] > 0 {
				lim.add("dead", "%s is completed but still in the dead set", dk)
			}
			if ev.deadAt(dest) {
				lim.add("dead", "doomed %s completed (its every attempt fails)", dk)
			}
			if dest == destBooks {
				switch n := effects[dk]; {
				case n == 0:
					fr.MissingEffects++
					rep.MissingEffects++
					lim.add("effects", "%s completed without its ledger row", dk)
				case n > 1:
					fr.DoubleEffects++
					rep.DoubleEffects++
					lim.add("effects", "%s has %d ledger rows", dk, n)
				}
			} else if keys[dk].successes == 0 {
				fr.Lost++
				lost = true
				lim.add("lost", "%s completed without a 2xx from the destination", dk)
			}
		case "dead":
			fr.Dead[dest]++
			if deadFailed[dk] == 0 {
				lim.add("dead", "%s is dead but not in the dead set", dk)
			}
			deadAttempts(dk, ed.attempts)
			if !ev.deadAt(dest) {
				lim.add("dead", "%s is dead though only its first %d attempts may fail (River counted %d on its job)", dk, h.o.RandomAttempts, riverAttempts[dk])
			}
			if effects[dk] > 0 {
				fr.DoubleEffects++
				rep.DoubleEffects++
				lim.add("effects", "dead %s has %d ledger rows", dk, effects[dk])
			}
		default:
			fr.Lost++
			lost = true
			lim.add("lost", "%s is still %s (attempts %d)", dk, ed.state, ed.attempts)
		}
	}
	wantDead := ev.deadAt(destFlaky)
	switch {
	case row.state == "completed" && !wantDead:
		rep.Completed++
		rep.CompletedFanout++
	case row.state == "dead" && wantDead:
		rep.Dead++
	case row.state == "completed" || row.state == "dead":
		if row.state == "dead" {
			rep.Dead++
		} else {
			rep.Completed++
			rep.CompletedFanout++
		}
		lim.add("dead", "event %s is %s in hookline_event_states, though its destinations say otherwise (doomed %v, routes %v)", k, row.state, ev.doomed, ev.routes)
	default:
		lost = true
		lim.add("lost", "event %s is still %s in hookline_event_states (attempts %d)", k, row.state, row.attempts)
	}
	if lost {
		rep.Lost++
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
	ledger, fanout := "off", "off"
	if o.LedgerShare > 0 {
		ledger = fmt.Sprintf("%d events", r.EventsLedger)
	}
	if o.FanoutShare > 0 {
		fanout = fmt.Sprintf("%d events", r.EventsFanout)
	}
	fmt.Fprintf(w, "hookline chaos report\n")
	fmt.Fprintf(w, "  scenario: %d events x %d deliveries, %d senders; instances %s; seed %d\n",
		o.Events, o.Deliveries, o.Senders, strings.Join(o.Instances, ","), o.Seed)
	fmt.Fprintf(w, "            sources: http -> destination (%d events), ledger -> Go handler in transactional mode (%s); %d doomed\n",
		r.EventsHTTP, ledger, r.Doomed)
	fmt.Fprintf(w, "            fanout -> sink (HTTP, all), books (Go handler, transactional, types [%s*]), flaky (HTTP, where data.object.region = %s, max_in_flight %d) (%s)\n",
		booksTypePrefix, flakyRegion, flakyMaxInFlight, fanout)
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
	line("delivered", r.Completed, fmt.Sprintf("completed events: http %d, ledger %d, fanout %d", r.CompletedHTTP, r.CompletedLedger, r.CompletedFanout))
	line("destination requests", r.DestRequests, "the http source's destination")
	line("redelivered after crash", r.RedeliveredAfterCrash, fmt.Sprintf("HTTP destination call cut by a kill, retried; slowest retry %s", r.MaxCrashGap.Round(time.Millisecond)))
	line("rescued after crash", r.Rescued, "attempts whose worker died, lost Postgres or outlived its lease mid-attempt, logged as lost and run again (every source and destination)")
	line("redelivered after 2xx", r.RedeliveredAfterSuccess, "at-least-once: 2xx sent, completion not recorded (HTTP destinations)")
	line("dead", r.Dead, fmt.Sprintf("events; %d dead items, reason failed (one more each time a re-delivery re-queues a dead one); doomed events: %d (fan-out ones die at flaky only, if routed there)", r.DeadItems, r.Doomed))
	f := r.Fanout
	byDest := func(m map[string]int, dests ...string) string {
		var parts []string
		for _, d := range dests {
			parts = append(parts, fmt.Sprintf("%s %d", d, m[d]))
		}
		return strings.Join(parts, ", ")
	}
	fmt.Fprintf(w, "  fan-out: routed             %s; filtered out: %s\n", byDest(f.Routed, fanoutDests...), byDest(f.FilteredOut, destBooks, destFlaky))
	fmt.Fprintf(w, "  fan-out: completed          %s; dead: %s (doomed, routed to flaky)\n", byDest(f.Completed, fanoutDests...), byDest(f.Dead, destFlaky))
	fmt.Fprintf(w, "  fan-out: requests           %s (max in flight: %s; flaky's max_in_flight %d); books ledger rows %d\n",
		byDest(f.Requests, destSink, destFlaky), byDest(f.MaxInFlight, destSink, destFlaky), flakyMaxInFlight, f.LedgerRows)
	fmt.Fprintf(w, "  fan-out: lost %d, double-effects %d, missing effects %d, concurrent per (destination, event) %d, misrouted %d  (each must be 0)\n",
		f.Lost, f.DoubleEffects, f.MissingEffects, f.Concurrent, f.Misrouted)
	r.printOrdered(w)
	r.printRecon(w)
	line("lost", r.Lost, "must be 0")
	line("double-effects", r.DoubleEffects, "must be 0")
	line("missing effects", r.MissingEffects, "must be 0")
	line("concurrent per key", r.Concurrent, "must be 0")
	line("stuck claims", r.StuckClaims, "must be 0")
	fmt.Fprintf(w, "  time: %s (sending %s, settling %s)\n", r.Duration.Round(time.Second), r.SendTime.Round(time.Second), r.SettleTime.Round(time.Second))
	if r.Dir != "" {
		fmt.Fprintf(w, "  logs: %s\n", r.Dir)
	}
	if r.Aborted != "" {
		fmt.Fprintf(w, "  RESULT: ABORTED, nothing checked: %s\n", r.Aborted)
		for _, v := range r.Violations {
			fmt.Fprintf(w, "    - %s\n", v)
		}
		return
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
