package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// The ordered source (docs/chaos.md, "Ordering"): ordering.key
// json:data.object.id, ordering.by json:created, stale: deliver, with the
// destinations destHook (HTTP, failing at random) and destBooks (the Go
// handler in transactional mode). Each key's events are sent one after
// another (under the key's lock), so the key's acceptance order is its
// sending order; the keys' steps are shuffled among every other delivery,
// so concurrent senders interleave them and the faults land between them.

// orderedTypes are the ordered events' types, by place in their key.
var orderedTypes = []string{"payment_intent.created", "payment_intent.processing", "payment_intent.succeeded", "charge.refunded", "charge.dispute.created"}

// orderKey is one ordering key of the ordered source (a data.object.id)
// and its sending script.
type orderKey struct {
	id     string
	events []*event // in sending (= acceptance) order: events[i].seq == i
	// script is every delivery of the key's events, in sending order: each
	// event's first delivery in events' order, its re-deliveries later.
	script []*event

	mu   sync.Mutex
	next int // the script's next step
}

// step sends the key's next delivery, after the previous one was answered.
func (k *orderKey) step(ctx context.Context, s *sender, rng *rand.Rand) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.next >= len(k.script) {
		return
	}
	ev := k.script[k.next]
	k.next++
	first := ev.firstSend.IsZero()
	if first {
		ev.firstSend = time.Now()
	}
	s.deliver(ctx, ev, rng)
	if first {
		ev.firstDone = time.Now()
	}
}

// makeOrdered makes the ordered source's keys and events. A key's created
// times mostly grow, but an event may be as old as the one before it (not
// stale: equal) or older (stale, like a provider's late retry).
func makeOrdered(o Options, rng *rand.Rand) ([]*orderKey, []*event) {
	base := time.Now().Add(-time.Hour).Unix()
	var keys []*orderKey
	var all []*event
	for i := range o.OrderedKeys {
		k := &orderKey{id: fmt.Sprintf("pi_chaos_%04d", i)}
		created := base + int64(i)
		for j := range o.OrderedPerKey {
			switch r := rng.Float64(); {
			case j == 0:
			case r < 0.15:
				created -= 1 + int64(rng.IntN(120))
			case r < 0.25:
			default:
				created += 1 + int64(rng.IntN(60))
			}
			id := fmt.Sprintf("evt_%s_%04d_%02d", srcOrdered, i, j)
			// Doomed events only in a key's first half: it holds the rest
			// of its key until it dies (after max_attempts), and a key's
			// first steps come early in the sending, so the rest does not
			// drag the settling out.
			doomed := j < max(1, o.OrderedPerKey/2) && rng.Float64() < 2*o.DoomedShare
			if doomed {
				id += "_doom"
			}
			ev := &event{source: srcOrdered, id: id, typ: orderedTypes[j%len(orderedTypes)], doomed: doomed,
				routes: []string{destHook, destBooks}, okey: k, seq: j, created: created}
			ev.body, _ = json.Marshal(map[string]any{
				"id": id, "object": "event", "type": ev.typ, "created": created,
				"data": map[string]any{"object": map[string]any{"id": k.id, "object": "payment_intent", "step": j}},
			})
			k.events = append(k.events, ev)
			all = append(all, ev)
		}
		k.script = orderScript(k.events, o.Deliveries, rng)
		keys = append(keys, k)
	}
	return keys, all
}

// orderScript is a key's deliveries: each event once, in order, and each
// event that is not doomed deliveries-1 more times at random later points
// (a provider's re-deliveries: duplicates, which must neither be forwarded
// again nor disturb the order). A doomed event is not re-delivered: a
// re-delivery of a dead event is queued again outside the order
// (docs/ordering.md), which the order checks would have to except.
func orderScript(evs []*event, deliveries int, rng *rand.Rand) []*event {
	script := slices.Clone(evs)
	for _, ev := range evs {
		if ev.doomed {
			continue
		}
		for range deliveries - 1 {
			first := slices.Index(script, ev)
			script = slices.Insert(script, first+1+rng.IntN(len(script)-first), ev)
		}
	}
	return script
}

// OrderedReport is what the ordered source's destinations got.
type OrderedReport struct {
	Keys, Events, Doomed int
	// StaleEvents are the events that must be forwarded to destHook with
	// Hookline-Stale: true (older than one already forwarded with a 2xx).
	StaleEvents             int
	Stored, Completed, Dead int
	// Forwards are destHook's requests; StaleForwards those with
	// Hookline-Stale; Reforwards those for an event that had already got a
	// 2xx (at-least-once after a crash).
	Forwards, StaleForwards, Reforwards int
	LedgerRows                          int // destBooks's effects
	// Violations, each must be 0: events lost; at destHook, forwards of two
	// events of a key overlapping, a forward of an event after a later
	// event of its key was forwarded, first 2xx out of acceptance order,
	// wrong Hookline-Order-Key / Hookline-Stale / Hookline-Origin, places
	// (order_seq) out of acceptance order; at destBooks, effects out of
	// order or with the wrong stale flag, two of a key's transactions at
	// once, double or missing effects.
	Lost, Overlaps, OutOfOrder, FirstOutOfOrder, WrongHeaders, PlaceMismatch int
	LedgerOutOfOrder, HandlerOverlaps, DoubleEffects, MissingEffects         int
}

// orderedRow is an ordered (event, destination) as hookline left it.
type orderedRow struct {
	state    string
	attempts int
	key      string
	seq      *int64
}

// ledgerRow is one chaos_ledger row, in insertion (id) order.
type ledgerRow struct {
	dest, id, orderKey, origin string
	stale                      bool
}

// readOrdered reads the ordered source's destination rows, by edKey, and
// its ledger rows in id order.
func (h *harness) readOrdered(ctx context.Context) (map[string]orderedRow, []ledgerRow, error) {
	rows := map[string]orderedRow{}
	err := queryPairs(ctx, h.pool, `SELECT event_id, destination, state, attempts, coalesce(order_key, ''), order_seq
		FROM hookline_event_destinations WHERE source = '`+srcOrdered+`'`, func(r pgx.Rows) error {
		var id, dest string
		var row orderedRow
		if err := r.Scan(&id, &dest, &row.state, &row.attempts, &row.key, &row.seq); err != nil {
			return err
		}
		rows[edKey(srcOrdered, dest, id)] = row
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("read the ordered source's destinations: %w", err)
	}
	ledger, err := h.readLedger(ctx, srcOrdered)
	return rows, ledger, err
}

// readLedger reads source's chaos_ledger rows in id order.
func (h *harness) readLedger(ctx context.Context, source string) ([]ledgerRow, error) {
	var out []ledgerRow
	err := queryPairs(ctx, h.pool, `SELECT destination, event_id, order_key, origin, stale FROM chaos_ledger
		WHERE source = '`+source+`' ORDER BY id`, func(r pgx.Rows) error {
		var l ledgerRow
		if err := r.Scan(&l.dest, &l.id, &l.orderKey, &l.origin, &l.stale); err != nil {
			return err
		}
		out = append(out, l)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the ledger of %s: %w", source, err)
	}
	return out, nil
}

// expectedStale is, per event, whether it is stale at a destination: its
// created is older than that of an earlier event of its key that
// completed there (stored; at destHook not doomed, as a dead event does
// not raise the key's greatest by).
func expectedStale(k *orderKey, stored func(*event) bool, completes func(*event) bool) map[*event]bool {
	out := map[*event]bool{}
	var maxBy *int64
	for _, ev := range k.events {
		if !stored(ev) {
			continue
		}
		out[ev] = maxBy != nil && ev.created < *maxBy
		if completes(ev) && (maxBy == nil || ev.created > *maxBy) {
			c := ev.created
			maxBy = &c
		}
	}
	return out
}

// checkOrdered checks the ordered source: every accepted event completed
// at both destinations (a doomed one dead at destHook after max_attempts);
// its places follow acceptance order; destHook's forwards per key never
// overlap, never go back to an earlier event, carry the key and the right
// staleness; destBooks's effects are exactly one per event, in order, with
// the right staleness, never two of a key's transactions at once.
func (h *harness) checkOrdered(ctx context.Context, st *finalState, rep *Report, lim *limiter) {
	r := &rep.Ordered
	if h.o.OrderedKeys == 0 {
		return
	}
	rows, ledger, err := h.readOrdered(ctx)
	if err != nil {
		h.violation("%v", err)
		return
	}
	fws := map[*orderKey][]forward{}
	byID := map[string]*event{}
	for _, ev := range h.ordered {
		byID[ev.id] = ev
	}
	for _, fw := range h.dest.forwardsOf(srcOrdered, destHook) {
		if ev := byID[fw.id]; ev != nil {
			fws[ev.okey] = append(fws[ev.okey], fw)
		}
	}
	byKey := map[*orderKey][]ledgerRow{}
	for _, l := range ledger {
		if ev := byID[l.id]; ev != nil && l.dest == destBooks {
			byKey[ev.okey] = append(byKey[ev.okey], l)
		}
	}
	r.Keys = len(h.okeys)
	for _, k := range h.okeys {
		stored := func(ev *event) bool { _, ok := st.stored[srcOrdered+":"+ev.id]; return ok }
		hookStale := expectedStale(k, stored, func(ev *event) bool { return !ev.doomed })
		booksStale := expectedStale(k, stored, func(*event) bool { return true })
		for _, ev := range k.events {
			h.checkOrderedEvent(ev, st, rows, rep, lim)
			if hookStale[ev] {
				r.StaleEvents++
			}
		}
		h.checkPlaces(k, rows, stored, r, lim)
		h.checkLine(k, fws[k], rows, hookStale, r, lim)
		checkLedgerLine(k, byKey[k], booksStale, r, lim)
	}
	overlaps, _ := readOverlaps(h.overlapsPath())
	for _, ov := range overlaps {
		if strings.HasPrefix(ov, orderOverlapPrefix) {
			r.HandlerOverlaps++
			lim.add("ordering", "two of one key's events in the %s handler at once: %s", destBooks, ov)
		}
	}
}

// checkOrderedEvent checks one ordered event's states, dead item and
// effects, and accounts for it in st.known and st.knownED.
func (h *harness) checkOrderedEvent(ev *event, st *finalState, rows map[string]orderedRow, rep *Report, lim *limiter) {
	r := &rep.Ordered
	k := srcOrdered + ":" + ev.id
	hook, books := edKey(srcOrdered, destHook, ev.id), edKey(srcOrdered, destBooks, ev.id)
	st.known[k], st.knownED[hook], st.knownED[books] = true, true, true
	r.Events++
	if ev.doomed {
		r.Doomed++
	}
	row, ok := st.stored[k]
	switch {
	case !ok && ev.got2xx.Load():
		r.Lost++
		lim.add("ordered", "event %s got a 2xx but is not stored", k)
		return
	case !ok:
		lim.add("ordered", "event %s was never stored (its sender gave up)", k)
		return
	}
	r.Stored++
	hr, br := rows[hook], rows[books]
	switch {
	case ev.doomed && hr.state == "dead" && row.state == "dead":
		r.Dead++
		if st.deadFailed[hook] == 0 {
			lim.add("ordered", "%s is dead but not in the dead set", hook)
		}
		if hr.attempts < h.o.MaxAttempts {
			lim.add("ordered", "%s is dead after %d attempts (max_attempts %d)", hook, hr.attempts, h.o.MaxAttempts)
		}
	case !ev.doomed && hr.state == "completed" && row.state == "completed":
		r.Completed++
		if st.keys[hook].successes == 0 {
			r.Lost++
			lim.add("ordered", "%s completed without a 2xx from the destination", hook)
		}
	default:
		r.Lost++
		lim.add("ordered", "event %s (doomed %v) is %s, at %s %s, at %s %s", k, ev.doomed, row.state, destHook, hr.state, destBooks, br.state)
	}
	switch n := st.effects[books]; {
	case br.state != "completed":
		lim.add("ordered", "%s is %q (the handler fails only at random early)", books, br.state)
	case n == 0:
		r.MissingEffects++
		lim.add("effects", "%s completed without its ledger row", books)
	case n > 1:
		r.DoubleEffects++
		lim.add("effects", "%s has %d ledger rows", books, n)
	}
}

// checkPlaces checks that the key's stored events hold places (order_seq)
// at both destinations in acceptance order, under the key.
func (h *harness) checkPlaces(k *orderKey, rows map[string]orderedRow, stored func(*event) bool, r *OrderedReport, lim *limiter) {
	for _, dest := range []string{destHook, destBooks} {
		var last *event
		var lastSeq int64
		for _, ev := range k.events {
			if !stored(ev) {
				continue
			}
			row := rows[edKey(srcOrdered, dest, ev.id)]
			switch {
			case row.key != k.id:
				r.PlaceMismatch++
				lim.add("ordering", "%s has order_key %q (want %q)", edKey(srcOrdered, dest, ev.id), row.key, k.id)
			case row.seq == nil:
				r.PlaceMismatch++
				lim.add("ordering", "%s has no place in its line (order_seq NULL)", edKey(srcOrdered, dest, ev.id))
			case last != nil && *row.seq <= lastSeq:
				r.PlaceMismatch++
				lim.add("ordering", "%s: place %d, not after %s's %d, though accepted after it (first sends %s-%s and %s-%s)",
					edKey(srcOrdered, dest, ev.id), *row.seq, last.id, lastSeq, h.at(last.firstSend), h.at(last.firstDone), h.at(ev.firstSend), h.at(ev.firstDone))
			default:
				last, lastSeq = ev, *row.seq
			}
		}
	}
}

// at renders t as seconds since the run started.
func (h *harness) at(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return fmt.Sprintf("%.3fs", t.Sub(h.start).Seconds())
}

// printOrdered writes the ordered source's lines of the report.
func (r *Report) printOrdered(w io.Writer) {
	o, or := r.Options, r.Ordered
	if o.OrderedKeys == 0 {
		fmt.Fprintf(w, "  ordered: off\n")
		return
	}
	fmt.Fprintf(w, "  ordered: %d keys x %d events (%d doomed, %d stale at %s): stored %d, completed %d, dead %d\n",
		or.Keys, o.OrderedPerKey, or.Doomed, or.StaleEvents, destHook, or.Stored, or.Completed, or.Dead)
	fmt.Fprintf(w, "  ordered: %s requests %d (%d with Hookline-Stale, %d re-forwards after a 2xx: at-least-once); %s ledger rows %d\n",
		destHook, or.Forwards, or.StaleForwards, or.Reforwards, destBooks, or.LedgerRows)
	fmt.Fprintf(w, "  ordered: lost %d, overlapping forwards per key %d, forwards back to an earlier event %d, first 2xx out of order %d, places out of order %d, wrong headers %d,\n",
		or.Lost, or.Overlaps, or.OutOfOrder, or.FirstOutOfOrder, or.PlaceMismatch, or.WrongHeaders)
	fmt.Fprintf(w, "           %s effects out of order or wrong %d, %s transactions of one key at once %d, double-effects %d, missing effects %d  (each must be 0)\n",
		destBooks, or.LedgerOutOfOrder, destBooks, or.HandlerOverlaps, or.DoubleEffects, or.MissingEffects)
}
