// Package fakeapi serves fake events APIs of Stripe, GoCardless and Paddle
// Billing on loopback (httptest), for tests and the chaos harness. Each
// follows what the provider's published API reference says of its "list
// events" endpoint (the listers of package reconcile cite it): path, auth
// header, query parameters, page shape, cursor pagination, list order and
// error bodies. Each file says what it does not model.
//
// A Server holds a list of events; each listing sees the events as they
// are when its request arrives (Add may add more). Failures are injected
// with Inject or FailNext, and every request is counted.
//
// Internal: no stability promise.
package fakeapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Event is one event the fake lists.
type Event struct {
	ID      string
	Type    string    // the provider's event type (GoCardless: {resource_type}.{action})
	Created time.Time // the provider's creation time (Stripe: whole seconds count)
	// Body is the event's JSON as the API lists it, byte for byte; nil:
	// the fake writes a body of the provider's shape from ID, Type and
	// Created. A Body must be valid JSON and hold the same id and time.
	Body []byte
}

// Fault is an injected failure: matching requests answer Status with the
// provider's error body for that status.
type Fault struct {
	Status int // 429, 500, 503, 401, 403...
	// RetryAfter is the Retry-After header in seconds; "": none. The
	// GoCardless fake sends it as RateLimit-Reset (an HTTP date) instead,
	// as GoCardless does.
	RetryAfter string
	Request    int // only the Nth request the server receives, from 1; 0: any
	Page       int // only requests for page N of a listing, from 1; 0: any
	Times      int // how many requests it answers; 0: 1
}

// Server is a fake events API. Its methods are safe for concurrent use.
type Server struct {
	// URL is the API's base URL (the api_url of a reconcile block).
	URL string

	api    api
	apiKey string
	ts     *httptest.Server

	mu       sync.Mutex
	events   []Event
	requests int
	queries  []url.Values
	faults   []Fault
}

// api is one provider's behaviour.
type api interface {
	path() string
	// body is the provider-shaped JSON of an event without a Body.
	body(e Event) []byte
	// authorize answers 0 for a request with key, else the status and the
	// provider's error body.
	authorize(r *http.Request, key string) (int, []byte)
	// plan selects the page that q asks for among events; a bad query
	// answers a status and the provider's error body.
	plan(events []Event, q url.Values, now time.Time) (page, int, []byte)
	// answer is the provider's answer holding p.
	answer(p page, q url.Values, baseURL string) []byte
	// fault is the provider's error body for status (an injected fault).
	fault(status int) []byte
	// faultHeader adds the provider's headers of an injected fault
	// (Retry-After or its equivalent).
	faultHeader(h http.Header, f Fault, now time.Time)
}

// page is one page of a listing.
type page struct {
	number  int     // from 1
	items   []Event // in list order
	hasMore bool
	before  string // cursor of the previous page ("": first page)
	limit   int
	total   int // events the listing's filters select
}

// newServer starts a fake of api; t (may be nil) closes it when the test
// ends, otherwise the caller calls Close.
func newServer(t testing.TB, a api, apiKey string, events []Event) *Server {
	s := &Server{api: a, apiKey: apiKey}
	if err := s.add(events); err != nil {
		if t != nil {
			t.Fatalf("fakeapi: %v", err)
		}
		panic("fakeapi: " + err.Error())
	}
	s.ts = httptest.NewServer(s)
	s.URL = s.ts.URL
	if t != nil {
		t.Cleanup(s.Close)
	}
	return s
}

// Close shuts the server down.
func (s *Server) Close() { s.ts.Close() }

// Add adds events to the list (it panics on an event without an id, a
// time, or with a Body that is not valid JSON).
func (s *Server) Add(events ...Event) {
	if err := s.add(events); err != nil {
		panic("fakeapi: " + err.Error())
	}
}

func (s *Server) add(events []Event) error {
	out := make([]Event, 0, len(events))
	for i, e := range events {
		if e.ID == "" || e.Created.IsZero() {
			return fmt.Errorf("event %d: an event needs an ID and a Created time", i)
		}
		if e.Body == nil {
			e.Body = s.api.body(e)
		} else if !json.Valid(e.Body) {
			return fmt.Errorf("event %s: Body is not valid JSON", e.ID)
		}
		out = append(out, e)
	}
	s.mu.Lock()
	s.events = append(s.events, out...)
	s.mu.Unlock()
	return nil
}

// Inject adds a fault; faults are tried in the order injected.
func (s *Server) Inject(f Fault) {
	if f.Times <= 0 {
		f.Times = 1
	}
	s.mu.Lock()
	s.faults = append(s.faults, f)
	s.mu.Unlock()
}

// FailNext makes the next n requests answer status; a 429 comes with
// Retry-After: 1.
func (s *Server) FailNext(status, n int) {
	f := Fault{Status: status, Times: n}
	if status == http.StatusTooManyRequests {
		f.RetryAfter = "1"
	}
	s.Inject(f)
}

// Events are the events the server lists, in the order added, each with
// the Body the API answers.
func (s *Server) Events() []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.events)
}

// Requests is the number of requests received.
func (s *Server) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

// Queries are the query parameters of every request received, in order.
func (s *Server) Queries() []url.Values {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]url.Values, len(s.queries))
	for i, q := range s.queries {
		out[i] = cloneValues(q)
	}
	return out
}

func cloneValues(q url.Values) url.Values {
	out := make(url.Values, len(q))
	for k, v := range q {
		out[k] = slices.Clone(v)
	}
	return out
}

// ServeHTTP answers one request: auth, then the query, then an injected
// fault, then the page.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	s.mu.Lock()
	s.requests++
	n := s.requests
	s.queries = append(s.queries, cloneValues(q))
	events := slices.Clone(s.events)
	s.mu.Unlock()
	now := time.Now()
	if r.Method != http.MethodGet || r.URL.Path != s.api.path() {
		writeJSON(w, http.StatusNotFound, s.api.fault(http.StatusNotFound))
		return
	}
	if status, body := s.api.authorize(r, s.apiKey); status != 0 {
		writeJSON(w, status, body)
		return
	}
	p, status, body := s.api.plan(events, q, now)
	if status != 0 {
		writeJSON(w, status, body)
		return
	}
	if f, ok := s.takeFault(n, p.number); ok {
		s.api.faultHeader(w.Header(), f, now)
		writeJSON(w, f.Status, s.api.fault(f.Status))
		return
	}
	writeJSON(w, http.StatusOK, s.api.answer(p, q, s.URL))
}

// takeFault consumes one use of the first fault matching request n for
// page pageNo.
func (s *Server) takeFault(n, pageNo int) (Fault, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.faults {
		f := &s.faults[i]
		if (f.Request != 0 && f.Request != n) || (f.Page != 0 && f.Page != pageNo) {
			continue
		}
		out := *f
		if f.Times--; f.Times <= 0 {
			s.faults = slices.Delete(s.faults, i, i+1)
		}
		return out, true
	}
	return Fault{}, false
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// mustJSON marshals v, whose types always marshal.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("fakeapi: " + err.Error())
	}
	return b
}

// joinBodies is a JSON array of the items' bodies, byte for byte.
func joinBodies(items []Event) []byte {
	out := []byte{'['}
	for i, e := range items {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, e.Body...)
	}
	return append(out, ']')
}

// byPosition pages list (already filtered and in list order) after or
// before the event with id cursor (positional cursors, as Stripe's and
// GoCardless's); ok is false when the cursor is not in list.
func byPosition(list []Event, after, before string, limit int) (p page, ok bool) {
	p.limit, p.total = limit, len(list)
	start, end := 0, min(limit, len(list))
	switch {
	case after != "":
		i := slices.IndexFunc(list, func(e Event) bool { return e.ID == after })
		if i < 0 {
			return p, false
		}
		start, end = i+1, min(i+1+limit, len(list))
	case before != "":
		i := slices.IndexFunc(list, func(e Event) bool { return e.ID == before })
		if i < 0 {
			return p, false
		}
		start, end = max(0, i-limit), i
	}
	p.items = list[start:end]
	p.hasMore = end < len(list)
	p.number = start/max(limit, 1) + 1
	if start > 0 && len(p.items) > 0 {
		p.before = p.items[0].ID
	}
	return p, true
}

// intParam reads q[name] as an integer in [lo, hi]; def when absent.
func intParam(q url.Values, name string, def, lo, hi int) (int, error) {
	v := q.Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("%s must be an integer between %d and %d", name, lo, hi)
	}
	return n, nil
}
