package main

import (
	"slices"
	"time"
)

// checkLine checks one key's forwards at destHook, taken in the order they
// started:
//
//   - no overlap: a forward starts only after every forward of another
//     event of the key has ended (heldUntil); two forwards of one event at
//     once are the per-event concurrency check's;
//   - no going back: once an event was forwarded, no earlier event of the
//     key is (at-least-once re-forwards of one event are allowed, but only
//     before the next event's first forward);
//   - the first 2xx of each event (that hookline can have seen: seen2xx)
//     follows acceptance order;
//   - each forward carries Hookline-Order-Key (the key), Hookline-Stale
//     exactly when the event is stale, and no Hookline-Origin.
//
// Forwards of an event whose place at destHook was dropped (order_seq
// NULL: queued again outside the line) are left out of the order checks.
func (h *harness) checkLine(k *orderKey, fws []forward, rows map[string]orderedRow, stale map[*event]bool, r *OrderedReport, lim *limiter) {
	byID := map[string]*event{}
	for _, ev := range k.events {
		byID[ev.id] = ev
	}
	slices.SortFunc(fws, func(a, b forward) int { return a.start.Compare(b.start) })
	var open []forward  // forwards not ended when the current one started
	var top *event      // the latest event (by acceptance) forwarded so far
	var topAt time.Time // its first forward
	firstOK := map[*event]time.Time{}
	for _, fw := range fws {
		ev := byID[fw.id]
		r.Forwards++
		h.checkForwardHeaders(k, ev, fw, stale[ev], r, lim)
		if _, ok := firstOK[ev]; ok {
			r.Reforwards++
		} else if h.seen2xx(edKey(srcOrdered, destHook, ev.id), fw) {
			firstOK[ev] = fw.end
		}
		open = slices.DeleteFunc(open, func(o forward) bool { return !h.heldUntil(o).After(fw.start) })
		for _, o := range open {
			if o.id != fw.id {
				r.Overlaps++
				lim.add("ordering", "%s/%s key %s: %s (attempt %d) forwarded %s-%s while %s (attempt %d, %s-%s) was still open",
					srcOrdered, destHook, k.id, fw.id, fw.attempt, h.at(fw.start), h.at(fw.end), o.id, o.attempt, h.at(o.start), h.at(o.end))
			}
		}
		open = append(open, fw)
		if rows[edKey(srcOrdered, destHook, ev.id)].seq == nil {
			continue
		}
		switch {
		case top == nil || ev.seq > top.seq:
			top, topAt = ev, fw.start
		case ev.seq < top.seq:
			r.OutOfOrder++
			lim.add("ordering", "%s/%s key %s: %s (accepted %d.) forwarded at %s (attempt %d), after %s (accepted %d.) was first forwarded at %s",
				srcOrdered, destHook, k.id, ev.id, ev.seq+1, h.at(fw.start), fw.attempt, top.id, top.seq+1, h.at(topAt))
		}
	}
	var prev *event
	for _, ev := range k.events {
		at, ok := firstOK[ev]
		if !ok {
			continue
		}
		if prev != nil && !at.After(firstOK[prev]) {
			r.FirstOutOfOrder++
			lim.add("ordering", "%s/%s key %s: %s's first 2xx at %s, not after that of %s, accepted before it, at %s",
				srcOrdered, destHook, k.id, ev.id, h.at(at), prev.id, h.at(firstOK[prev]))
		}
		prev = ev
	}
}

// heldUntil is when hookline was done with a forward at the latest: its
// end (recorded before the answer leaves, so hookline cannot have seen the
// answer earlier), but no later than the destination timeout after its
// start — hookline's request began before the destination read its body,
// and hookline gives up on it after the timeout, whenever a starved
// destination notices that the caller has gone.
func (h *harness) heldUntil(f forward) time.Time {
	if limit := f.start.Add(h.o.DestTimeout); limit.Before(f.end) {
		return limit
	}
	return f.end
}

// checkForwardHeaders checks hookline's ordering headers on one forward.
func (h *harness) checkForwardHeaders(k *orderKey, ev *event, fw forward, stale bool, r *OrderedReport, lim *limiter) {
	if fw.stale == "true" {
		r.StaleForwards++
	}
	want := ""
	if stale {
		want = "true"
	}
	if fw.orderKey != k.id || fw.stale != want || fw.origin != "" {
		r.WrongHeaders++
		lim.add("ordering", "%s/%s %s (attempt %d at %s): Hookline-Order-Key %q (want %q), Hookline-Stale %q (want %q; created %d), Hookline-Origin %q (want none)",
			srcOrdered, destHook, ev.id, fw.attempt, h.at(fw.start), fw.orderKey, k.id, fw.stale, want, ev.created, fw.origin)
	}
}

// checkLedgerLine checks the key's effects at destBooks (chaos_ledger rows
// in id order, which is commit order here: a key's next event runs only
// after the previous one's transaction committed): in acceptance order,
// with the key and the right staleness. One row per event is checked with
// the effects.
func checkLedgerLine(k *orderKey, rows []ledgerRow, stale map[*event]bool, r *OrderedReport, lim *limiter) {
	byID := map[string]*event{}
	for _, ev := range k.events {
		byID[ev.id] = ev
	}
	var prev *event
	for _, l := range rows {
		ev := byID[l.id]
		r.LedgerRows++
		if prev != nil && ev.seq < prev.seq {
			r.LedgerOutOfOrder++
			lim.add("ordering", "%s/%s key %s: %s (accepted %d.) took effect after %s (accepted %d.)",
				srcOrdered, destBooks, k.id, ev.id, ev.seq+1, prev.id, prev.seq+1)
		}
		if l.orderKey != k.id || l.stale != stale[ev] || l.origin != "webhook" {
			r.LedgerOutOfOrder++
			lim.add("ordering", "%s/%s %s: the handler saw OrderKey %q (want %q), Stale %v (want %v; created %d), Origin %q (want webhook)",
				srcOrdered, destBooks, ev.id, l.orderKey, k.id, l.stale, stale[ev], ev.created, l.origin)
		}
		prev = ev
	}
}
