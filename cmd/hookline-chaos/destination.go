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

// destination is the "http" source's receiver. It checks what hookline
// promises about forwards and fails at random as a real receiver would.
type destination struct {
	events      map[string]*event // by event id
	failRate    float64
	timeoutRate float64
	randomUpTo  int           // attempts 1..randomUpTo may fail at random
	hang        time.Duration // how long a "time-out" answer takes (> destination timeout)

	mu   sync.Mutex
	keys map[string]*keyState
	// violations, by kind, with a few examples each.
	concurrent, wrongKey, wrongBody, unknown int
	examples                                 []string
	requests                                 int
}

// keyState is what the destination saw for one Idempotency-Key.
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

func newDestination(events []*event, o Options) *destination {
	d := &destination{events: map[string]*event{}, keys: map[string]*keyState{},
		failRate: o.FailRate, timeoutRate: o.TimeoutRate, randomUpTo: o.RandomAttempts,
		hang: o.DestTimeout + 2*time.Second}
	for _, ev := range events {
		if ev.source == "http" {
			d.events[ev.id] = ev
		}
	}
	return d
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
	ev := d.events[id]

	d.mu.Lock()
	d.requests++
	if ev == nil {
		d.unknown++
		d.note("request for unknown event %q", id)
		d.mu.Unlock()
		w.WriteHeader(http.StatusOK)
		return
	}
	if key != "http:"+id {
		d.wrongKey++
		d.note("event %s: Idempotency-Key %q", id, key)
	}
	if !bytes.Equal(body, ev.body) {
		d.wrongBody++
		d.note("event %s: body differs from the bytes sent (%d vs %d bytes)", id, len(body), len(ev.body))
	}
	ks := d.keys[key]
	if ks == nil {
		ks = &keyState{}
		d.keys[key] = ks
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
		d.concurrent++
		d.note("event %s: %d concurrent requests for one Idempotency-Key", id, ks.inFlight)
	}
	d.mu.Unlock()
	defer func() { d.mu.Lock(); ks.inFlight--; d.mu.Unlock() }()

	random := attempt <= d.randomUpTo
	roll := rand.Float64()
	switch {
	case ev.doomed:
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

// snapshot returns a copy of the per-key state.
func (d *destination) snapshot() map[string]keyState {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string]keyState, len(d.keys))
	for k, v := range d.keys {
		out[k] = *v
	}
	return out
}

// serveDestination starts d on a loopback port.
func serveDestination(d *destination) (*http.Server, string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	srv := &http.Server{Handler: d, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	return srv, "http://" + l.Addr().String() + "/hooks/http", nil
}
