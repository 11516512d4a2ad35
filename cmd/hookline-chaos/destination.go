package main

import (
	"bytes"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
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
}

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
	key := r.Header.Get("Idempotency-Key")
	id := r.Header.Get("Hookline-Event-Id")
	attempt, _ := strconv.Atoi(r.Header.Get("Hookline-Attempt"))
	ep := d.endpoints[r.URL.Path]

	d.mu.Lock()
	if ep == nil {
		d.stray++
		d.note("request for %s (event %q): no such destination", r.URL.Path, id)
		d.mu.Unlock()
		w.WriteHeader(http.StatusOK)
		return
	}
	ep.requests++
	ev := ep.events[id]
	if ev == nil {
		ep.unknown++
		d.note("%s/%s: request for unknown event %q", ep.source, ep.name, id)
		d.mu.Unlock()
		w.WriteHeader(http.StatusOK)
		return
	}
	if !ev.routedTo(ep.name) {
		ep.filtered++
		d.note("%s/%s: event %s (type %s, region %q) reached it though its filter excludes it", ep.source, ep.name, id, ev.typ, ev.region)
	}
	if got := r.Header.Get("Hookline-Destination"); got != ep.name {
		ep.wrongDest++
		d.note("%s/%s: event %s with Hookline-Destination %q", ep.source, ep.name, id, got)
	}
	if key != ep.source+":"+id {
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
	d.mu.Unlock()
	defer func() { d.mu.Lock(); ks.inFlight--; ep.inFlight--; d.mu.Unlock() }()

	random := ep.flaky && attempt <= d.randomUpTo
	roll := rand.Float64()
	switch {
	case ep.flaky && ev.doomed:
		http.Error(w, "doomed: always fails", http.StatusInternalServerError)
		return
	case random && roll < d.failRate:
		code := []int{http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable}[rand.IntN(3)]
		http.Error(w, "random failure", code)
		return
	case random && roll < d.failRate+d.timeoutRate:
		select { // outlast the destination timeout; hookline gives up first
		case <-time.After(d.hang):
		case <-r.Context().Done():
		}
		w.WriteHeader(http.StatusOK)
		return
	}
	select {
	case <-time.After(time.Duration(10+rand.IntN(90)) * time.Millisecond):
	case <-r.Context().Done():
		// We meant to answer 2xx and the caller vanished: it crashed (the
		// destination timeout is far longer than this delay).
		d.mu.Lock()
		ks.interrupted++
		ks.lastInterrup = time.Now()
		d.mu.Unlock()
		return
	}
	d.mu.Lock()
	ks.successes++
	d.mu.Unlock()
	w.WriteHeader(http.StatusOK)
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
