package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookline/hookline/internal/reconcile/fakeapi"
)

// The reconciled source (docs/chaos.md, "Reconciliation"): reconcile
// against a fake Stripe events API on loopback (internal/reconcile/fakeapi),
// every ReconEvery, and on demand through the admin route during the chaos,
// on random instances; destinations destHook (HTTP) and destBooks (the Go
// handler in transactional mode).

const (
	adminToken    = "hookline-chaos-admin-token"        // every instance's admin_token
	reconAPIKey   = "sk_test_hookline_chaos_0123456789" // the fake events API's key
	reconLookback = "1h"                                // the reconciled source's lookback
)

// reconKind is what the events API and the webhooks do with an event of the
// reconciled source.
type reconKind int

const (
	reconAPIOnly reconKind = iota + 1 // listed, never sent as a webhook: reconciliation must store it
	reconBoth                         // listed and sent as webhooks: stored once, whichever comes first
	reconOld                          // listed, but older than the lookback, never sent: must never be stored
)

// reconState is the reconciled source's machinery.
type reconState struct {
	api       *fakeapi.Server
	injected  atomic.Int64 // faults injected into the events API
	published atomic.Int64

	mu        sync.Mutex
	admin     map[int]int // on-demand runs during the chaos, by answer status (0: no answer)
	adminMiss int         // events the on-demand runs during the chaos stored
	catchUp   reconRun    // the on-demand run once the senders are done
	final     reconRun    // the on-demand run after settling
}

// reconRun is an on-demand run's answer.
type reconRun struct {
	Checked, Missing int
	Status           int
}

// makeRecon makes the reconciled source's events: a third only in the
// events API, half listed and sent as webhooks, a sixth older than the
// lookback (listed, never sent).
func makeRecon(o Options, rng *rand.Rand) []*event {
	now := time.Now()
	evs := make([]*event, o.ReconEvents)
	for i := range evs {
		kind := reconAPIOnly
		created := now.Add(-time.Duration(1+rng.IntN(600)) * time.Second)
		switch r := rng.Float64(); {
		case r < 1.0/3:
		case r < 5.0/6:
			kind = reconBoth
		default:
			kind = reconOld
			created = now.Add(-2*time.Hour - time.Duration(rng.IntN(3600))*time.Second)
		}
		id := fmt.Sprintf("evt_%s_%05d", srcRecon, i)
		ev := &event{source: srcRecon, id: id, typ: []string{"invoice.paid", "customer.updated"}[i%2], recon: kind,
			routes: []string{destHook, destBooks}, created: created.Unix()}
		ev.body, _ = json.Marshal(map[string]any{
			"id": id, "object": "event", "type": ev.typ, "created": ev.created, "livemode": false,
			"data": map[string]any{"object": map[string]any{"id": fmt.Sprintf("in_chaos_%05d", i), "object": "invoice"}},
		})
		evs[i] = ev
	}
	return evs
}

// startRecon starts the fake events API and lists in it, before anything
// starts, every old event and a quarter of the others; it returns the
// tasks that publish the rest and deliver the webhooks, D per sent event
// (a sent event is listed at the latest when its first webhook goes).
func (h *harness) startRecon(rng *rand.Rand) []task {
	h.rc = &reconState{api: fakeapi.NewStripe(nil, reconAPIKey, nil), admin: map[int]int{}}
	var tasks []task
	for _, ev := range h.recon {
		if ev.recon == reconOld || rng.IntN(4) == 0 {
			ev.published.Do(func() { h.publish(ev) })
			continue
		}
		tasks = append(tasks, task{pub: ev})
		if ev.recon == reconBoth {
			for range h.o.Deliveries {
				tasks = append(tasks, task{ev: ev})
			}
		}
	}
	return tasks
}

// publish lists ev in the fake events API, with the bytes its webhooks
// carry.
func (h *harness) publish(ev *event) {
	h.rc.api.Add(fakeapi.Event{ID: ev.id, Type: ev.typ, Created: time.Unix(ev.created, 0), Body: ev.body})
	h.rc.published.Add(1)
}

var adminClient = &http.Client{Timeout: 2 * time.Minute}

// adminReconcile runs POST /admin/sources/reconciled/reconcile on p; status
// 0 is no answer (killed, refused).
func (h *harness) adminReconcile(ctx context.Context, p *proc) reconRun {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+p.addr+"/admin/sources/"+srcRecon+"/reconcile", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := adminClient.Do(req)
	if err != nil {
		return reconRun{}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	out := reconRun{Status: resp.StatusCode}
	if resp.StatusCode == http.StatusOK {
		var res struct{ Checked, Missing int }
		if err := json.Unmarshal(b, &res); err != nil {
			h.violation("%s: reconcile answered 200 with %q", p.name(), b)
		}
		out.Checked, out.Missing = res.Checked, res.Missing
	}
	return out
}

// reconTrigger runs on-demand reconciliations on random instances every 2-4
// s until stop, and every third time first makes the events API fail the
// next request (a 500 or a 429 with Retry-After: 1), which the run must
// retry. Any answer but 200, 409 (a run in progress), 502 (the API failed
// for good), 503 (Postgres down) or none (killed) is a violation.
func (h *harness) reconTrigger(ctx context.Context, stop <-chan struct{}) {
	rng := rand.New(rand.NewPCG(uint64(h.o.Seed), 0x7265636f6e))
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-time.After(2*time.Second + time.Duration(rng.IntN(2000))*time.Millisecond):
		}
		if i%3 == 1 {
			h.rc.api.FailNext([]int{http.StatusInternalServerError, http.StatusTooManyRequests}[rng.IntN(2)], 1)
			h.rc.injected.Add(1)
		}
		p := h.procs[rng.IntN(len(h.procs))]
		res := h.adminReconcile(ctx, p)
		h.rc.mu.Lock()
		h.rc.admin[res.Status]++
		h.rc.adminMiss += res.Missing
		h.rc.mu.Unlock()
		switch res.Status {
		case 0, http.StatusOK, http.StatusConflict, http.StatusBadGateway, http.StatusServiceUnavailable:
		default:
			h.violation("%s: POST /admin/sources/%s/reconcile answered %d", p.name(), srcRecon, res.Status)
		}
	}
}

// reconcileNow runs an on-demand reconciliation until one answers 200
// (another run in progress answers 409), bounded by a minute.
func (h *harness) reconcileNow(ctx context.Context, what string) reconRun {
	deadline := time.Now().Add(time.Minute)
	var res reconRun
	for i := 0; ; i++ {
		res = h.adminReconcile(ctx, h.procs[i%len(h.procs)])
		if res.Status == http.StatusOK || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		sleepCtx(ctx, 500*time.Millisecond)
	}
	if res.Status != http.StatusOK {
		h.violation("reconcile %s: no on-demand run answered 200 within a minute (last answer %d)", what, res.Status)
	}
	h.logf("reconcile %s: status %d, checked %d, missing %d", what, res.Status, res.Checked, res.Missing)
	return res
}
