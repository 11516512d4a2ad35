package main

import (
	"bytes"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"
)

// destination is the HTTP server behind every HTTP destination of the
// scenario: one endpoint per (source, destination), at destPath. It checks
// what hookline promises about forwards and fails at random as a real
// receiver would.
type destination struct {
	failRate    float64
	timeoutRate float64
	randomUpTo  int           // attempts 1..randomUpTo may fail at random
	hang        time.Duration // how long a "time-out" answer takes (> destination timeout)
	endpoints   map[string]*endpoint

	mu       sync.Mutex
	stray    int // requests to a path that is no endpoint
	examples []string
}

// endpoint is one HTTP destination: what it saw, per event. Its keys are
// its own, so concurrency is judged per (destination, event): the fan-out
// source's destinations get the same Idempotency-Key for one event.
type endpoint struct {
	source, name string
	// flaky endpoints fail at random during early attempts, and always for
	// doomed events; the others answer 2xx to every request.
	flaky  bool
	events map[string]*event // the source's events, by id

	keys map[string]*keyState // by event id
	// violations, by kind (examples in destination.examples)
	concurrent, wrongKey, wrongBody, wrongDest, unknown, filtered int
	requests                                                      int
	inFlight, maxInFlight                                         int // over every key
	// forwards are the requests for known events, in the order they ended.
	forwards []forward
}

// forward is one request an endpoint got for a known event: when it
// started (its body read) and ended (just before the answer was written),
// what came of it, and hookline's headers on it.
type forward struct {
	id                                  string
	start, end                          time.Time
	result                              fwResult
	attempt                             int
	orderKey, stale, origin, deliveryID string
}

// fwResult is what an endpoint made of a request.
type fwResult int

const (
	resOK      fwResult = iota + 1 // answered 2xx
	resFailed                      // answered 5xx
	resTimeout                     // held past hookline's destination timeout
	resGone                        // meant to answer 2xx, but the caller had gone (a crash)
)

// keyState is what an endpoint saw for one event (one Idempotency-Key).
type keyState struct {
	inFlight     int
	requests     int
	successes    int // 2xx answers written
	interrupted  int // the caller went away while we meant to answer 2xx: a crash
	lastInterrup time.Time
	redelivered  bool           // a request came after an interruption or a 2xx
	afterCrash   bool           // ... after an interruption
	gaps         [][2]time.Time // interruption, next request
}

// destPath is the URL path of a source's HTTP destination.
func destPath(source, dest string) string {
	if dest == destDefault {
		return "/hooks/" + source
	}
	return "/hooks/" + source + "/" + dest
}

// edKey names an (event, destination): "source:destination:event_id".
func edKey(source, dest, id string) string { return source + ":" + dest + ":" + id }

func newDestination(events []*event, o Options) *destination {
	d := &destination{failRate: o.FailRate, timeoutRate: o.TimeoutRate, randomUpTo: o.RandomAttempts,
		hang: o.DestTimeout + 2*time.Second, endpoints: map[string]*endpoint{}}
	add := func(source, name string, flaky bool) {
		ep := &endpoint{source: source, name: name, flaky: flaky, events: map[string]*event{}, keys: map[string]*keyState{}}
		for _, ev := range events {
			if ev.source == source {
				ep.events[ev.id] = ev
			}
		}
		d.endpoints[destPath(source, name)] = ep
	}
	add(srcHTTP, destDefault, true)
	add(srcFanout, destSink, false)
	add(srcFanout, destFlaky, true)
	add(srcOrdered, destHook, true)
	add(srcRecon, destHook, true)
	return d
}

// endpoint returns the endpoint of (source, dest).
func (d *destination) endpoint(source, dest string) *endpoint {
	return d.endpoints[destPath(source, dest)]
}

func (d *destination) note(format string, args ...any) {
	if len(d.examples) < 20 {
		d.examples = append(d.examples, sprintf(format, args...))
	}
}

func (d *destination) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Read the whole body first: it is checked, and it lets net/http notice
	// when the caller goes away (a killed worker, a time-out).
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	ep, ev, ks, fw := d.admit(r, body)
	if ev == nil {
		w.WriteHeader(http.StatusOK)
		return
	}
	res, code := d.respond(r, ep, ev, fw.attempt)
	// The forward's end is recorded before the answer leaves: hookline
	// cannot act on an answer before this point.
	d.finish(ep, ks, fw, res)
	switch res {
	case resFailed:
		http.Error(w, "random failure (or doomed)", code)
	case resOK, resTimeout:
		w.WriteHeader(http.StatusOK)
	}
}

// admit checks a request against what hookline promises and records it as
// in flight; ev is nil for a request to no endpoint or for an unknown
// event (answered 200 and counted as violations).
func (d *destination) admit(r *http.Request, body []byte) (*endpoint, *event, *keyState, *forward) {
	id := r.Header.Get("Hookline-Event-Id")
	attempt, _ := strconv.Atoi(r.Header.Get("Hookline-Attempt"))
	d.mu.Lock()
	defer d.mu.Unlock()
	ep := d.endpoints[r.URL.Path]
	if ep == nil {
		d.stray++
		d.note("request for %s (event %q): no such destination", r.URL.Path, id)
		return nil, nil, nil, nil
	}
	ep.requests++
	ev := ep.events[id]
	if ev == nil {
		ep.unknown++
		d.note("%s/%s: request for unknown event %q", ep.source, ep.name, id)
		return ep, nil, nil, nil
	}
	if !ev.routedTo(ep.name) {
		ep.filtered++
		d.note("%s/%s: event %s (type %s, region %q) reached it though its filter excludes it", ep.source, ep.name, id, ev.typ, ev.region)
	}
	if got := r.Header.Get("Hookline-Destination"); got != ep.name {
		ep.wrongDest++
		d.note("%s/%s: event %s with Hookline-Destination %q", ep.source, ep.name, id, got)
	}
	if key := r.Header.Get("Idempotency-Key"); key != ep.source+":"+id {
		ep.wrongKey++
		d.note("%s/%s: event %s: Idempotency-Key %q", ep.source, ep.name, id, key)
	}
	if !bytes.Equal(body, ev.body) {
		ep.wrongBody++
		d.note("%s/%s: event %s: body differs from the bytes sent (%d vs %d bytes)", ep.source, ep.name, id, len(body), len(ev.body))
	}
	ks := ep.keys[id]
	if ks == nil {
		ks = &keyState{}
		ep.keys[id] = ks
	}
	now := time.Now()
	if ks.requests > 0 && (ks.successes > 0 || ks.interrupted > 0) {
		ks.redelivered = true
	}
	if ks.interrupted > 0 {
		ks.afterCrash = true
		ks.gaps = append(ks.gaps, [2]time.Time{ks.lastInterrup, now})
		ks.interrupted, ks.lastInterrup = 0, time.Time{} // a gap is counted once
	}
	ks.requests++
	ks.inFlight++
	if ks.inFlight > 1 {
		ep.concurrent++
		d.note("%s/%s: event %s: %d concurrent requests for one Idempotency-Key", ep.source, ep.name, id, ks.inFlight)
	}
	ep.inFlight++
	ep.maxInFlight = max(ep.maxInFlight, ep.inFlight)
	fw := &forward{id: id, start: now, attempt: attempt, orderKey: r.Header.Get("Hookline-Order-Key"),
		stale: r.Header.Get("Hookline-Stale"), origin: r.Header.Get("Hookline-Origin"), deliveryID: r.Header.Get("Hookline-Delivery-Id")}
	return ep, ev, ks, fw
}

// respond decides the answer, as a flaky receiver would, and waits as long
// as it takes; code is the status of a resFailed answer.
func (d *destination) respond(r *http.Request, ep *endpoint, ev *event, attempt int) (res fwResult, code int) {
	random := ep.flaky && attempt <= d.randomUpTo
	roll := rand.Float64()
	switch {
	case ep.flaky && ev.doomed:
		return resFailed, http.StatusInternalServerError
	case random && roll < d.failRate:
		return resFailed, []int{http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable}[rand.IntN(3)]
	case random && roll < d.failRate+d.timeoutRate:
		select { // outlast the destination timeout; hookline gives up first
		case <-time.After(d.hang):
		case <-r.Context().Done():
		}
		return resTimeout, 0
	}
	select {
	case <-time.After(time.Duration(10+rand.IntN(90)) * time.Millisecond):
		return resOK, 0
	case <-r.Context().Done():
		// We meant to answer 2xx and the caller vanished: it crashed (the
		// destination timeout is far longer than this delay).
		return resGone, 0
	}
}

// finish records the end of a request admitted by admit.
func (d *destination) finish(ep *endpoint, ks *keyState, fw *forward, res fwResult) {
	d.mu.Lock()
	defer d.mu.Unlock()
	ks.inFlight--
	ep.inFlight--
	switch res {
	case resOK:
		ks.successes++
	case resGone:
		ks.interrupted++
		ks.lastInterrup = time.Now()
	}
	fw.end, fw.result = time.Now(), res
	ep.forwards = append(ep.forwards, *fw)
}

// snapshot returns a copy of the per-key state of every endpoint, by
// edKey.
func (d *destination) snapshot() map[string]keyState {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string]keyState{}
	for _, ep := range d.endpoints {
		for id, v := range ep.keys {
			out[edKey(ep.source, ep.name, id)] = *v
		}
	}
	return out
}

// forwardsOf returns a copy of the forwards of the endpoint of (source,
// dest), in the order they ended.
func (d *destination) forwardsOf(source, dest string) []forward {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.endpoint(source, dest).forwards)
}

// serveDestination starts d on a loopback port and returns its base URL.
func serveDestination(d *destination) (*http.Server, string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	srv := &http.Server{Handler: d, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	return srv, "http://" + l.Addr().String(), nil
}
