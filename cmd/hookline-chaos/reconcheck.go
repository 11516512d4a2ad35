package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// ReconReport is what became of the reconciled source's events.
type ReconReport struct {
	// Listed are the events the API lists within the lookback (APIOnly +
	// Both); Old the listed ones older than it.
	Listed, APIOnly, Both, Old int
	// Stored events, by the origin of the delivery that stored them;
	// BothByReconcile are sent events whose reconciliation came first
	// (their webhooks then answered duplicate).
	Stored, ByReconcile, ByWebhook, BothByReconcile int
	// Forwards are destHook's requests; Reforwards those of an event that
	// had already got a 2xx (at-least-once), each explained by a kill or an
	// outage in between (AfterFault) or else by hookline's log saying, in
	// between, that it could not record the completion (AfterLogged: its
	// database connection failed); LedgerRows destBooks's effects.
	Forwards, Reforwards, AfterFault, AfterLogged, LedgerRows int
	// Runs from the instances' logs; APIRequests the events API's.
	RunsFinished, RunsFailed, APIRequests, FaultsInjected int
	// Admin counts the on-demand runs during the chaos by answer status (0:
	// none); AdminMissing what they stored. CatchUp is the run once the
	// senders were done, Final the one after settling (Missing must be 0,
	// Checked = Listed). LastRun is hookline_reconcile_runs's row.
	Admin           map[int]int
	AdminMissing    int
	CatchUp, Final  reconRun
	LastRun         string
	ReconcileDelivs int // hookline_deliveries of origin reconcile (a run that lost the race to a webhook stores one too)
	// Violations, each must be 0: listed events never stored, old ones
	// stored, a wrong origin (stored row, Hookline-Origin, handler), forwards
	// of another delivery than the stored one, 2xx re-forwards no fault
	// explains, double or missing effects.
	Missing, OldStored, WrongOrigin, WrongDelivery, DoubleForwards, DoubleEffects, MissingEffects int
}

// reconStored is a stored event of the reconciled source: the delivery
// that stored it and that delivery's origin.
type reconStored struct {
	delivery int64
	origin   string
}

// readRecon reads the reconciled source's events with their deliveries'
// origins, and counts the deliveries of origin reconcile.
func (h *harness) readRecon(ctx context.Context, r *ReconReport) (map[string]reconStored, error) {
	out := map[string]reconStored{}
	err := queryPairs(ctx, h.pool, `SELECT e.event_id, e.delivery_id, coalesce(d.origin, '') FROM hookline_events e
		LEFT JOIN hookline_deliveries d ON d.id = e.delivery_id WHERE e.source = '`+srcRecon+`'`, func(row pgx.Rows) error {
		var id string
		var s reconStored
		if err := row.Scan(&id, &s.delivery, &s.origin); err != nil {
			return err
		}
		out[id] = s
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the reconciled source's events: %w", err)
	}
	err = h.pool.QueryRow(ctx, `SELECT count(*) FROM hookline_deliveries WHERE source = $1 AND origin = 'reconcile'`, srcRecon).Scan(&r.ReconcileDelivs)
	return out, err
}

// checkRecon checks the reconciled source: every event the API lists
// within the lookback is stored once (an API-only one by reconciliation),
// completed at both destinations, forwarded as the delivery that stored it
// with the matching Hookline-Origin, and processed once (one effect at
// destBooks; at destHook a second 2xx forward only with a crash or an
// outage in between); no event older than the lookback is stored; the
// runs are recorded.
func (h *harness) checkRecon(ctx context.Context, st *finalState, rep *Report, lim *limiter) {
	r := &rep.Recon
	if h.o.ReconEvents == 0 {
		return
	}
	rows, err := h.readRecon(ctx, r)
	if err != nil {
		h.violation("%v", err)
		return
	}
	ledger, err := h.readLedger(ctx, srcRecon)
	if err != nil {
		h.violation("%v", err)
		return
	}
	ledgerOrigin := map[string]string{}
	for _, l := range ledger {
		r.LedgerRows++
		ledgerOrigin[l.id] = l.origin
	}
	fws := map[string][]forward{}
	for _, fw := range h.dest.forwardsOf(srcRecon, destHook) {
		fws[fw.id] = append(fws[fw.id], fw)
	}
	for _, ev := range h.recon {
		h.checkReconEvent(ev, rows, ledgerOrigin[ev.id], fws[ev.id], st, r, lim)
	}
	h.checkReconRuns(ctx, r)
}

// checkReconEvent checks one event of the reconciled source.
func (h *harness) checkReconEvent(ev *event, rows map[string]reconStored, ledgerOrigin string, fws []forward, st *finalState, r *ReconReport, lim *limiter) {
	k := srcRecon + ":" + ev.id
	hook, books := edKey(srcRecon, destHook, ev.id), edKey(srcRecon, destBooks, ev.id)
	st.known[k], st.knownED[hook], st.knownED[books] = true, true, true
	row, stored := rows[ev.id]
	switch ev.recon {
	case reconOld:
		r.Old++
		if stored {
			r.OldStored++
			lim.add("reconcile", "event %s, created %s before the lookback (%s), is stored", k, time.Unix(ev.created, 0).Format(time.RFC3339), reconLookback)
		}
		return
	case reconAPIOnly:
		r.APIOnly++
	case reconBoth:
		r.Both++
	}
	r.Listed++
	if !stored {
		r.Missing++
		lim.add("reconcile", "event %s (%s) is listed by the API but not stored (webhook 2xx: %v)", k, reconKindName(ev.recon), ev.got2xx.Load())
		return
	}
	r.Stored++
	h.checkReconOrigin(ev, row, ledgerOrigin, r, lim)
	if s := st.stored[k].state; s != "completed" || st.eds[hook].state != "completed" || st.eds[books].state != "completed" {
		r.Missing++
		lim.add("reconcile", "event %s is %q (at %s %q, at %s %q)", k, s, destHook, st.eds[hook].state, destBooks, st.eds[books].state)
	}
	switch n := st.effects[books]; {
	case n == 0:
		r.MissingEffects++
		lim.add("effects", "%s has no ledger row", books)
	case n > 1:
		r.DoubleEffects++
		lim.add("effects", "%s has %d ledger rows", books, n)
	}
	h.checkReconForwards(ev, row, fws, r, lim)
}

func reconKindName(k reconKind) string {
	return map[reconKind]string{reconAPIOnly: "API only", reconBoth: "API and webhooks", reconOld: "older than the lookback"}[k]
}

// checkReconOrigin checks where the stored event came from: an event only
// in the API from reconciliation; the handler saw the same origin.
func (h *harness) checkReconOrigin(ev *event, row reconStored, ledgerOrigin string, r *ReconReport, lim *limiter) {
	switch row.origin {
	case "reconcile":
		r.ByReconcile++
		if ev.recon == reconBoth {
			r.BothByReconcile++
		}
	case "webhook":
		r.ByWebhook++
	}
	if (ev.recon == reconAPIOnly && row.origin != "reconcile") || (row.origin != "reconcile" && row.origin != "webhook") {
		r.WrongOrigin++
		lim.add("reconcile", "event %s (%s) stored by delivery %d of origin %q", ev.id, reconKindName(ev.recon), row.delivery, row.origin)
	}
	if ledgerOrigin != "" && ledgerOrigin != row.origin {
		r.WrongOrigin++
		lim.add("reconcile", "%s/%s %s: the handler saw origin %q, the stored delivery's is %q", srcRecon, destBooks, ev.id, ledgerOrigin, row.origin)
	}
}

// checkReconForwards checks destHook's forwards of one event: each carries
// the stored delivery's id and the Hookline-Origin of its origin; a forward
// after a 2xx hookline can have seen (seen2xx) needs a crash, an outage or
// hookline's word (loggedBetween) between that 2xx and it.
func (h *harness) checkReconForwards(ev *event, row reconStored, fws []forward, r *ReconReport, lim *limiter) {
	wantOrigin := ""
	if row.origin == "reconcile" {
		wantOrigin = "reconcile"
	}
	slices.SortFunc(fws, func(a, b forward) int { return a.start.Compare(b.start) })
	var firstOK *forward
	for i, fw := range fws {
		r.Forwards++
		if fw.deliveryID != strconv.FormatInt(row.delivery, 10) || fw.origin != wantOrigin || fw.orderKey != "" || fw.stale != "" {
			r.WrongDelivery++
			lim.add("reconcile", "%s/%s %s (attempt %d at %s): Hookline-Delivery-Id %q, Hookline-Origin %q (stored: delivery %d, origin %q; want Hookline-Origin %q, no ordering headers)",
				srcRecon, destHook, ev.id, fw.attempt, h.at(fw.start), fw.deliveryID, fw.origin, row.delivery, row.origin, wantOrigin)
		}
		if firstOK == nil {
			if h.seen2xx(edKey(srcRecon, destHook, ev.id), fw) {
				firstOK = &fws[i]
			}
			continue
		}
		r.Reforwards++
		switch {
		case h.faultBetween(firstOK.end, fw.start):
			r.AfterFault++
		case h.loggedBetween(edKey(srcRecon, destHook, ev.id), firstOK.end, fw.start):
			r.AfterLogged++
		default:
			r.DoubleForwards++
			lim.add("reconcile", "%s/%s %s forwarded again at %s (attempt %d, delivery %s) after a 2xx at %s (attempt %d), with no kill, outage or logged lost completion in between (origin %q)",
				srcRecon, destHook, ev.id, h.at(fw.start), fw.attempt, fw.deliveryID, h.at(firstOK.end), firstOK.attempt, row.origin)
		}
	}
}

// faultBetween reports whether an instance kill or a Postgres outage
// overlaps [a - 1 s, b]: what can cut a worker between a destination's 2xx
// and recording it.
func (h *harness) faultBetween(a, b time.Time) bool {
	h.faultMu.Lock()
	defer h.faultMu.Unlock()
	a = a.Add(-time.Second)
	for _, w := range h.windows {
		if !w[0].After(b) && !w[1].Before(a) {
			return true
		}
	}
	return false
}

// hooklineLog is what the instances' logs say about forwards, by edKey.
type hooklineLog struct {
	// again: when hookline said that a forward it got a 2xx for will be
	// forwarded again (againMsgs).
	again map[string][]time.Time
	// failed: the attempts hookline counted as failed (failedMsgs) — a 2xx
	// the destination wrote for one of them came too late (after
	// hookline's destination timeout): hookline never saw it.
	failed map[string]map[int]bool
}

// againMsgs are what hookline logs when an event it forwarded with a 2xx
// will be forwarded again: its completion could not be recorded (the
// database failed), or another worker took its claim over. failedMsgs are
// what it logs for an attempt that failed.
var (
	againMsgs  = []string{"delivered, but the completion could not be recorded; the event will be forwarded again", "lease lost; the new holder finishes the event"}
	failedMsgs = []string{"attempt failed; will retry", "event dead: attempts ran out"}
)

// hlog reads the instances' logs once.
func (h *harness) hlog() *hooklineLog {
	h.logOnce.Do(func() { h.logged = h.readHooklineLog() })
	return h.logged
}

// loggedBetween reports whether an instance logged one of againMsgs for
// the (event, destination) dk within [a - 1 s, b + 1 s].
func (h *harness) loggedBetween(dk string, a, b time.Time) bool {
	for _, t := range h.hlog().again[dk] {
		if !t.Before(a.Add(-time.Second)) && !t.After(b.Add(time.Second)) {
			return true
		}
	}
	return false
}

// seen2xx reports whether hookline can have seen the 2xx of fw, a forward
// of the (event, destination) dk the destination answered 2xx: not when
// hookline logged that attempt as failed.
func (h *harness) seen2xx(dk string, fw forward) bool {
	return fw.result == resOK && !h.hlog().failed[dk][fw.attempt]
}

// readHooklineLog reads the instances' logs for againMsgs and failedMsgs.
func (h *harness) readHooklineLog() *hooklineLog {
	out := &hooklineLog{again: map[string][]time.Time{}, failed: map[string]map[int]bool{}}
	has := func(line string, msgs []string) bool {
		return slices.ContainsFunc(msgs, func(m string) bool { return strings.Contains(line, `"msg":"`+m+`"`) })
	}
	for _, p := range h.procs {
		b, err := os.ReadFile(p.logPath)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			again, failed := has(line, againMsgs), has(line, failedMsgs)
			if !again && !failed {
				continue
			}
			var l struct {
				Time                time.Time `json:"time"`
				Source, Destination string
				EventID             string `json:"event_id"`
				Attempt             int
			}
			if json.Unmarshal([]byte(line), &l) != nil {
				continue
			}
			dk := edKey(l.Source, l.Destination, l.EventID)
			if again {
				out.again[dk] = append(out.again[dk], l.Time)
			} else {
				if out.failed[dk] == nil {
					out.failed[dk] = map[int]bool{}
				}
				out.failed[dk][l.Attempt] = true
			}
		}
	}
	return out
}

// checkReconRuns reads hookline_reconcile_runs (the last run must have
// ended without an error and checked every listed event; a periodic run
// may be under way, so it waits a little for one that ended), and counts
// the runs in the instances' logs.
func (h *harness) checkReconRuns(ctx context.Context, r *ReconReport) {
	var started, finished *time.Time
	var checked, missing int
	var runErr string
	for try := 0; try < 20; try++ {
		err := h.pool.QueryRow(ctx, `SELECT started_at, finished_at, checked, missing, coalesce(error, '') FROM hookline_reconcile_runs WHERE source = $1`,
			srcRecon).Scan(&started, &finished, &checked, &missing, &runErr)
		if err != nil {
			h.violation("hookline_reconcile_runs: no row for %s: %v", srcRecon, err)
			return
		}
		if finished != nil {
			break
		}
		sleepCtx(ctx, 500*time.Millisecond)
	}
	r.LastRun = fmt.Sprintf("started %s, finished %v, checked %d, missing %d, error %q", started.Format(time.RFC3339), finished != nil, checked, missing, runErr)
	if finished == nil || runErr != "" || checked != r.Listed {
		h.violation("hookline_reconcile_runs: the last run of %s: %s (want finished, no error, checked %d)", srcRecon, r.LastRun, r.Listed)
	}
	for _, p := range h.procs {
		b, err := os.ReadFile(p.logPath)
		if err != nil {
			continue
		}
		r.RunsFinished += strings.Count(string(b), `"msg":"reconcile run finished"`)
		r.RunsFailed += strings.Count(string(b), `"msg":"reconcile run failed"`)
	}
	r.APIRequests, r.FaultsInjected = h.rc.api.Requests(), int(h.rc.injected.Load())
	h.rc.mu.Lock()
	r.Admin, r.AdminMissing, r.CatchUp, r.Final = h.rc.admin, h.rc.adminMiss, h.rc.catchUp, h.rc.final
	h.rc.mu.Unlock()
	if r.Final.Status != 200 || r.Final.Missing != 0 || r.Final.Checked != r.Listed {
		h.violation("the on-demand reconciliation after settling answered %d, checked %d, missing %d (want 200, checked %d, missing 0)",
			r.Final.Status, r.Final.Checked, r.Final.Missing, r.Listed)
	}
	if r.RunsFinished == 0 {
		h.violation("no reconciliation run finished in any instance's log")
	}
}

// printRecon writes the reconciled source's lines of the report.
func (r *Report) printRecon(w io.Writer) {
	o, rr := r.Options, r.Recon
	if o.ReconEvents == 0 {
		fmt.Fprintf(w, "  reconcile: off\n")
		return
	}
	fmt.Fprintf(w, "  reconcile: the API lists %d events within the lookback (%d only there, %d also sent as webhooks) and %d older, never sent; every %s\n",
		rr.Listed, rr.APIOnly, rr.Both, rr.Old, o.ReconEvery)
	fmt.Fprintf(w, "  reconcile: stored %d: %d by reconciliation (%d of them sent events it got first), %d by webhook; %d deliveries of origin reconcile\n",
		rr.Stored, rr.ByReconcile, rr.BothByReconcile, rr.ByWebhook, rr.ReconcileDelivs)
	var admin []string
	for _, code := range slices.Sorted(maps.Keys(rr.Admin)) {
		admin = append(admin, fmt.Sprintf("%d x%d", code, rr.Admin[code]))
	}
	fmt.Fprintf(w, "  reconcile: runs %d finished, %d failed (instances' logs); API requests %d, faults injected %d; on demand during the chaos: %s (0: no answer), storing %d\n",
		rr.RunsFinished, rr.RunsFailed, rr.APIRequests, rr.FaultsInjected, strings.Join(admin, ", "), rr.AdminMissing)
	fmt.Fprintf(w, "  reconcile: on demand once the senders were done: %d, checked %d, missing %d; after settling: %d, checked %d, missing %d\n",
		rr.CatchUp.Status, rr.CatchUp.Checked, rr.CatchUp.Missing, rr.Final.Status, rr.Final.Checked, rr.Final.Missing)
	fmt.Fprintf(w, "  reconcile: hookline_reconcile_runs: %s\n", rr.LastRun)
	fmt.Fprintf(w, "  reconcile: %s requests %d (%d re-forwards after a 2xx: %d after a kill or an outage, %d after hookline logged the completion lost); %s ledger rows %d\n",
		destHook, rr.Forwards, rr.Reforwards, rr.AfterFault, rr.AfterLogged, destBooks, rr.LedgerRows)
	fmt.Fprintf(w, "  reconcile: missing %d, older than the lookback stored %d, wrong origin %d, wrong delivery %d, double forwards %d, double-effects %d, missing effects %d  (each must be 0)\n",
		rr.Missing, rr.OldStored, rr.WrongOrigin, rr.WrongDelivery, rr.DoubleForwards, rr.DoubleEffects, rr.MissingEffects)
}
