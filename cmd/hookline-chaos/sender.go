package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	stripewebhook "github.com/stripe/stripe-go/v82/webhook"
)

// stripeSecret signs every delivery (every source is Stripe-signed).
const stripeSecret = "whsec_hookline_chaos"

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }

// The sources, and the destinations of the fan-out source.
const (
	srcHTTP   = "http"   // one HTTP destination ("default")
	srcLedger = "ledger" // one Go handler in transactional mode ("default")
	srcFanout = "fanout" // three destinations: destSink, destBooks, destFlaky
	// srcOrdered orders per data.object.id (ordering.key) and
	// srcRecon reconciles against a fake Stripe events API; each has two
	// destinations, destHook and destBooks.
	srcOrdered = "ordered"
	srcRecon   = "reconciled"

	destDefault = "default" // a source's single destination
	destSink    = "sink"    // HTTP, never fails on purpose, takes every event
	destBooks   = "books"   // Go handler in transactional mode, types: ["charge.*"]
	destFlaky   = "flaky"   // HTTP, fails at random early and always for doomed events, where: {data.object.region: eu}
	destHook    = "hook"    // the ordered and reconciled sources' HTTP destination, failing like destFlaky (no filter)
)

// fanoutDests are the fan-out source's destinations, in configuration order.
var fanoutDests = []string{destSink, destBooks, destFlaky}

// The fan-out filters: destBooks takes the event types booksTypePrefix*,
// destFlaky the events whose data.object.region is flakyRegion.
const (
	booksTypePrefix = "charge."
	flakyRegion     = "eu"
)

// fanoutTypes are the event types the fan-out source's events draw from:
// half of them match destBooks's filter, half do not ("charges.x" is a
// near miss of the glob).
var fanoutTypes = []string{"charge.succeeded", "charge.refunded", "invoice.paid", "charges.disputed"}

// fanoutRegions are the data.object.region values of fan-out events: only
// flakyRegion matches destFlaky's filter ("EU" is a near miss).
var fanoutRegions = []string{flakyRegion, "us", "EU", flakyRegion}

// event is one distinct event and what the senders learnt about it.
type event struct {
	source string // srcHTTP | srcLedger | srcFanout
	id     string
	typ    string
	region string // fan-out events only
	body   []byte
	doomed bool
	// routes are the destinations the event must reach: the harness's own
	// reading of the filters, independent of hookline's.
	routes []string

	got2xx    atomic.Bool
	accepted  atomic.Int32
	duplicate atomic.Int32

	// The ordered source's: the event's key, its place in the key's
	// sending order (which is its acceptance order: a key's events are
	// sent one after another), its created (ordering.by), and when its
	// first delivery started and ended (written under the key's lock).
	okey                 *orderKey
	seq                  int
	created              int64
	firstSend, firstDone time.Time
	// The reconciled source's: how the events API and the webhooks treat
	// it, and its publication in the API (once).
	recon     reconKind
	published sync.Once
}

// routedTo reports whether dest is one of the event's routes.
func (e *event) routedTo(dest string) bool { return slices.Contains(e.routes, dest) }

// deadAt reports whether the event must end dead at dest: a doomed event
// fails at every attempt of the destinations that fail it (the http
// source's, the ledger handler, and on the fan-out source only destFlaky).
func (e *event) deadAt(dest string) bool {
	if !e.doomed || !e.routedTo(dest) {
		return false
	}
	return e.source != srcFanout || dest == destFlaky
}

// fanoutRoutes is the harness's model of the fan-out filters: destSink
// takes every event, destBooks the types booksTypePrefix*, destFlaky the
// events whose data.object.region is flakyRegion.
func fanoutRoutes(typ, region string) []string {
	routes := []string{destSink}
	if strings.HasPrefix(typ, booksTypePrefix) {
		routes = append(routes, destBooks)
	}
	if region == flakyRegion {
		routes = append(routes, destFlaky)
	}
	return routes
}

func makeEvents(o Options, rng *rand.Rand) []*event {
	evs := make([]*event, o.Events)
	for i := range evs {
		src := srcHTTP
		switch r := rng.Float64(); {
		case r < o.FanoutShare:
			src = srcFanout
		case r < o.FanoutShare+o.LedgerShare:
			src = srcLedger
		}
		id := fmt.Sprintf("evt_%s_%06d", src, i)
		doomed := rng.Float64() < o.DoomedShare
		if doomed {
			id += "_doom"
		}
		ev := &event{source: src, id: id, typ: "chaos." + src, doomed: doomed, routes: []string{destDefault}}
		obj := map[string]any{"n": i, "pad": fmt.Sprintf("%x", rng.Uint64())}
		if src == srcFanout {
			ev.typ = fanoutTypes[rng.IntN(len(fanoutTypes))]
			ev.region = fanoutRegions[rng.IntN(len(fanoutRegions))]
			ev.routes = fanoutRoutes(ev.typ, ev.region)
			obj["region"] = ev.region
		}
		ev.body, _ = json.Marshal(map[string]any{
			"id": id, "object": "event", "type": ev.typ, "created": time.Now().Unix(),
			"data": map[string]any{"object": obj},
		})
		evs[i] = ev
	}
	return evs
}

// outage is the window in which Postgres is down (zero when it is up).
type outage struct {
	mu         sync.Mutex
	down, up   time.Time // down: Stop returned; up: Start is about to begin
	inProgress bool
}

func (o *outage) set(down bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if down {
		o.down, o.up, o.inProgress = time.Now(), time.Time{}, true
	} else {
		o.up, o.inProgress = time.Now(), false
	}
}

// within reports whether [start, end] lies entirely inside the current or
// last outage.
func (o *outage) within(start, end time.Time) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.down.IsZero() || start.Before(o.down) {
		return false
	}
	return o.inProgress || end.Before(o.up)
}

// sendStats are the senders' counters.
type sendStats struct {
	requests, accepted, duplicates, unavailable, connErrors, gaveUp atomic.Int64
	badRetryAfter, unexpected, twoXXWhileDown                       atomic.Int64
	outage503s                                                      atomic.Int64
	maxOutageLatency                                                atomic.Int64 // ns
	done                                                            atomic.Int64 // deliveries finished
	mu                                                              sync.Mutex
	examples                                                        []string
}

func (s *sendStats) note(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.examples) < 20 {
		s.examples = append(s.examples, sprintf(format, args...))
	}
}

func maxInt64(a *atomic.Int64, v int64) {
	for {
		cur := a.Load()
		if v <= cur || a.CompareAndSwap(cur, v) {
			return
		}
	}
}

// sender posts deliveries to the ingest instances, retrying 503s and
// connection errors as a provider would, for at most giveUp per delivery.
type sender struct {
	targets func() []string // addresses of ingest instances
	client  *http.Client
	stats   *sendStats
	out     *outage
	giveUp  time.Duration
	limiter <-chan time.Time // nil: no rate cap
	// publish adds a reconciled-source event to the fake events API (nil:
	// no reconciled source).
	publish func(*event)
}

// task is one step of the sending: a delivery of ev, the next step of an
// ordered key's script, or the publication of pub in the fake events API
// (as the provider creates the event; no request to hookline).
type task struct {
	ev  *event
	key *orderKey
	pub *event
}

func (s *sender) run(ctx context.Context, work <-chan task, rng *rand.Rand) {
	for t := range work {
		if s.limiter != nil {
			select {
			case <-s.limiter:
			case <-ctx.Done():
				return
			}
		}
		switch {
		case t.key != nil:
			t.key.step(ctx, s, rng)
		case t.pub != nil:
			s.publishOnce(t.pub)
		default:
			if t.ev.source == srcRecon {
				s.publishOnce(t.ev) // the provider lists an event before it sends its webhook
			}
			s.deliver(ctx, t.ev, rng)
		}
		s.stats.done.Add(1)
	}
}

// publishOnce adds ev to the fake events API the first time it is asked.
func (s *sender) publishOnce(ev *event) {
	if s.publish != nil {
		ev.published.Do(func() { s.publish(ev) })
	}
}

type postResult struct {
	status     int
	retryAfter string
	body       map[string]any
	err        error
}

func (s *sender) post(ctx context.Context, addr string, ev *event) postResult {
	sig := stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{Payload: ev.body, Secret: stripeSecret, Timestamp: time.Now()}).Header
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/webhooks/"+ev.source, bytes.NewReader(ev.body))
	if err != nil {
		return postResult{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Stripe-Signature", sig)
	resp, err := s.client.Do(req)
	if err != nil {
		return postResult{err: err}
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	r := postResult{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After")}
	_ = json.Unmarshal(raw, &r.body)
	if r.body == nil {
		r.body = map[string]any{"raw": string(raw)}
	}
	return r
}

func (s *sender) deliver(ctx context.Context, ev *event, rng *rand.Rand) {
	deadline := time.Now().Add(s.giveUp)
	for ctx.Err() == nil {
		targets := s.targets()
		addr := targets[rng.IntN(len(targets))]
		start := time.Now()
		s.stats.requests.Add(1)
		r := s.post(ctx, addr, ev)
		end := time.Now()
		switch {
		case r.err != nil:
			s.stats.connErrors.Add(1)
			sleepCtx(ctx, 100*time.Millisecond)
		case r.status == http.StatusOK:
			if s.out.within(start, end) {
				s.stats.twoXXWhileDown.Add(1)
				s.stats.note("%s got 200 while Postgres was down", ev.id)
			}
			ev.got2xx.Store(true)
			switch r.body["status"] {
			case "accepted":
				ev.accepted.Add(1)
				s.stats.accepted.Add(1)
			case "duplicate":
				ev.duplicate.Add(1)
				s.stats.duplicates.Add(1)
			default:
				s.stats.unexpected.Add(1)
				s.stats.note("%s: 200 with body %v", ev.id, r.body)
			}
			return
		case r.status == http.StatusServiceUnavailable:
			s.stats.unavailable.Add(1)
			secs, err := strconv.Atoi(r.retryAfter)
			if err != nil || secs < 1 {
				s.stats.badRetryAfter.Add(1)
				s.stats.note("%s: 503 with Retry-After %q", ev.id, r.retryAfter)
				secs = 1
			}
			if s.out.within(start, end) {
				s.stats.outage503s.Add(1)
				maxInt64(&s.stats.maxOutageLatency, int64(end.Sub(start)))
			}
			// Honour Retry-After, but spread the retries a little.
			sleepCtx(ctx, time.Duration(secs)*time.Second/2+time.Duration(rng.IntN(500))*time.Millisecond)
		default:
			s.stats.unexpected.Add(1)
			s.stats.note("%s: unexpected status %d %v", ev.id, r.status, r.body)
			return
		}
		if time.Now().After(deadline) {
			s.stats.gaveUp.Add(1)
			s.stats.note("%s: gave up after %s of 503s and connection errors", ev.id, s.giveUp)
			return
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
