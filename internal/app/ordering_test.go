package app_test

// Ordering end to end: per-key lines across instances and a SIGKILL, a
// failing event holding its key, dead events letting it go, stale events
// (skip and deliver), over real HTTP, real processes and a real Postgres.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/ingest"
	"github.com/hookline/hookline/internal/app"
	"github.com/hookline/hookline/internal/pgtest"
	"github.com/hookline/hookline/internal/proctest"
)

// lineSink is a destination that records, per ordering key
// (Hookline-Order-Key; "" for unordered events), the event ids of every
// request in arrival order, the ids it answered 2xx, the headers of each
// event's last request, and every time two requests of one key overlapped.
type lineSink struct {
	*httptest.Server
	mu       sync.Mutex
	arrivals map[string][]string // key → event ids, every request
	okByKey  map[string][]string // key → event ids answered 2xx
	headers  map[string]http.Header
	inFlight map[string]int
	overlaps []string
	answer   func(id string, n int) int // status for the n-th request of event id; nil: 200
	perEvent map[string]int
	delay    time.Duration
}

func newLineSink(t *testing.T, delay time.Duration, answer func(id string, n int) int) *lineSink {
	s := &lineSink{arrivals: map[string][]string{}, okByKey: map[string][]string{}, headers: map[string]http.Header{},
		inFlight: map[string]int{}, perEvent: map[string]int{}, answer: answer, delay: delay}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		key, id := r.Header.Get("Hookline-Order-Key"), r.Header.Get("Hookline-Event-Id")
		s.mu.Lock()
		s.inFlight[key]++
		if key != "" && s.inFlight[key] > 1 {
			s.overlaps = append(s.overlaps, fmt.Sprintf("key %s: %s arrived while %d other(s) were in flight", key, id, s.inFlight[key]-1))
		}
		s.arrivals[key] = append(s.arrivals[key], id)
		s.perEvent[id]++
		n := s.perEvent[id]
		s.headers[id] = r.Header.Clone()
		s.mu.Unlock()
		status := http.StatusOK
		if s.answer != nil {
			status = s.answer(id, n)
		}
		if s.delay > 0 { // the destination's latency
			select {
			case <-time.After(s.delay):
			case <-r.Context().Done():
			}
		}
		s.mu.Lock()
		s.inFlight[key]--
		if status < 300 {
			s.okByKey[key] = append(s.okByKey[key], id)
		}
		s.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *lineSink) delivered(key string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.okByKey[key])
}

func (s *lineSink) header(id string) http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.headers[id]
}

// orderedBody is a Stripe event about object key (data.object.id; none when
// key is empty), created at created (omitted when negative).
func orderedBody(id, key string, created int64) []byte {
	obj := `{}`
	if key != "" {
		obj = fmt.Sprintf(`{"id":%q}`, key)
	}
	c := ""
	if created >= 0 {
		c = fmt.Sprintf(`"created":%d,`, created)
	}
	return []byte(fmt.Sprintf(`{"id":%q,"object":"event","type":"payment_intent.updated",%s"data":{"object":%s}}`, id, c, obj))
}

func postOrdered(t *testing.T, base, source, id, key string, created int64) {
	t.Helper()
	body := orderedBody(id, key, created)
	a := postRaw(t, base+"/webhooks/"+source, body, "Content-Type", "application/json", "Stripe-Signature", stripeSig(body, stripeSecret))
	require.NoError(t, a.Err)
	require.Equal(t, http.StatusOK, a.Status, a.Body)
}

// A failing event holds its key: the events after it wait until it
// completes (or goes dead), while other keys go on; an unordered event
// carries no Hookline-Order-Key; an operator's retry of a dead event runs
// outside the order.
func TestOrderingFailingEventHoldsItsKey(t *testing.T) {
	t.Parallel()
	var release atomic.Bool // A1 fails until released
	a1FailedThrice := make(chan struct{})
	dest := newLineSink(t, 2*time.Millisecond, func(id string, n int) int {
		switch {
		case id == "A1" && !release.Load():
			if n == 3 {
				close(a1FailedThrice)
			}
			return http.StatusInternalServerError
		case id == "C1" && n <= 3:
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	cfg := stripeConfig(pgtest.NewURL(t), "", fmt.Sprintf(`    ordering: {key: "json:data.object.id"}
    destination: {url: %q, max_attempts: 3, backoff: {min: 50ms, max: 100ms}}
  - name: pay
    provider: stripe
    secrets: [%q]
    ordering: {key: "json:data.object.id"}
    destination: {url: %q, max_attempts: 1000, backoff: {min: 50ms, max: 100ms}}
`, dest.URL, stripeSecret, dest.URL))
	ip := startApp(t, cfg, app.Options{})
	base := ip.url(0)

	postOrdered(t, base, "pay", "A1", "pi_A", 1)
	postOrdered(t, base, "pay", "A2", "pi_A", 2)
	postOrdered(t, base, "pay", "A3", "pi_A", 3)
	postOrdered(t, base, "pay", "B1", "pi_B", 1)
	postOrdered(t, base, "pay", "U1", "", 1)
	postOrdered(t, base, "pay", "U2", "\u200b\u00a0", 1) // nothing visible: no key
	eventState(t, base, "pay", "B1", 30*time.Second, "completed")
	eventState(t, base, "pay", "U1", 30*time.Second, "completed")
	eventState(t, base, "pay", "U2", 30*time.Second, "completed")
	select {
	case <-a1FailedThrice: // A1 kept failing meanwhile
	case <-time.After(30 * time.Second):
		t.Fatal("A1 was not attempted three times within 30s")
	}
	require.Empty(t, dest.delivered("pi_A"), "A2 and A3 wait behind the failing A1")
	ev := eventState(t, base, "pay", "A2", time.Second, "queued")
	require.Equal(t, "pi_A", ev["order_key"])
	release.Store(true)
	eventState(t, base, "pay", "A3", 30*time.Second, "completed")
	require.Equal(t, []string{"A1", "A2", "A3"}, dest.delivered("pi_A"))
	require.Equal(t, "pi_A", dest.header("A2").Get("Hookline-Order-Key"))
	require.Empty(t, dest.header("U1").Values("Hookline-Order-Key"), "an unordered event has no key")
	require.Empty(t, dest.header("U2").Values("Hookline-Order-Key"), "a key of invisible characters is no key")
	require.Empty(t, dest.header("A2").Values("Hookline-Stale"), "a normal forward carries no Hookline-Stale")
	require.Empty(t, dest.header("A2").Values("Hookline-Origin"), "a webhook forward carries no Hookline-Origin")

	// C1 dies after 3 attempts; C2 waits for it, then goes.
	postOrdered(t, base, "s", "C1", "pi_C", 1)
	postOrdered(t, base, "s", "C2", "pi_C", 2)
	eventState(t, base, "s", "C1", 30*time.Second, "dead")
	eventState(t, base, "s", "C2", 30*time.Second, "completed")
	dest.mu.Lock()
	require.Equal(t, []string{"C1", "C1", "C1", "C2"}, dest.arrivals["pi_C"], "C2 is forwarded only after C1 went dead")
	require.Empty(t, dest.overlaps, "forwards of one key overlapped")
	dest.mu.Unlock()

	// The operator retries C1 while C3 is accepted: the retry runs outside
	// the order and holds nothing up (so C3 may overlap the retried C1, and
	// no overlap is asserted from here on).
	item := deadItem(t, base, "s", "C1")
	code, body := adminPost(t, base, "/admin/dead/"+item["id"].(string)+"/retry")
	require.Equal(t, http.StatusAccepted, code, body)
	postOrdered(t, base, "s", "C3", "pi_C", 3)
	eventState(t, base, "s", "C1", 30*time.Second, "completed")
	eventState(t, base, "s", "C3", 30*time.Second, "completed")
	dest.mu.Lock()
	defer dest.mu.Unlock()
	require.Equal(t, 4, dest.perEvent["C1"], "C1 was forwarded once more, by the operator's retry")
}

// A provider's re-delivery of a dead event is a new arrival: it takes its
// key's next place, so it waits for an event accepted before it (never
// overlapping it) and holds the events accepted after it. Only an
// operator's retry runs outside the order.
func TestProviderRedeliveryJoinsTheLine(t *testing.T) {
	t.Parallel()
	var release atomic.Bool // D1 fails until released
	dest := newLineSink(t, 300*time.Millisecond, func(id string, n int) int {
		if id == "D1" && !release.Load() {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	cfg := stripeConfig(pgtest.NewURL(t), "", fmt.Sprintf(`    ordering: {key: "json:data.object.id"}
    destination: {url: %q, max_attempts: 2, backoff: {min: 50ms, max: 100ms}}
`, dest.URL))
	ip := startApp(t, cfg, app.Options{})
	base := ip.url(0)

	postOrdered(t, base, "s", "D1", "pi_D", 1)
	eventState(t, base, "s", "D1", 30*time.Second, "dead")
	release.Store(true)
	postOrdered(t, base, "s", "D2", "pi_D", 2) // forwarded at once, held 300 ms
	postOrdered(t, base, "s", "D1", "pi_D", 1) // the provider re-delivers D1 meanwhile
	postOrdered(t, base, "s", "D3", "pi_D", 3)
	ev := eventState(t, base, "s", "D3", 30*time.Second, "completed")
	require.Equal(t, "pi_D", ev["order_key"])
	eventState(t, base, "s", "D1", 30*time.Second, "completed")
	dest.mu.Lock()
	defer dest.mu.Unlock()
	require.Equal(t, []string{"D1", "D1", "D2", "D1", "D3"}, dest.arrivals["pi_D"], "the re-delivered D1 goes after D2, and D3 after it")
	require.Empty(t, dest.overlaps, "forwards of one key overlapped")
	require.Equal(t, "pi_D", dest.headers["D1"].Get("Hookline-Order-Key"))
}

// An ordering key Postgres cannot store as it is (over 1,024 bytes, a NUL)
// does not get the event refused: its line is the key's SHA-256, which is
// what Hookline-Order-Key and the lookup carry.
func TestOrderingKeysStoredAsDigests(t *testing.T) {
	t.Parallel()
	dest := newLineSink(t, 50*time.Millisecond, nil)
	cfg := stripeConfig(pgtest.NewURL(t), "", fmt.Sprintf(`    ordering: {key: "json:data.object.id"}
    destination: {url: %q}
`, dest.URL))
	ip := startApp(t, cfg, app.Options{})
	base := ip.url(0)
	long := "pi_" + strings.Repeat("x", 1100)
	digest := func(key string) string {
		sum := sha256.Sum256([]byte(key))
		return ingest.DigestKeyPrefix + hex.EncodeToString(sum[:])
	}
	for i, id := range []string{"L1", "L2", "L3"} {
		postOrdered(t, base, "s", id, long, int64(i))
	}
	// A NUL, as JSON escapes it (%q in orderedBody would not).
	body := []byte(`{"id":"N1","object":"event","type":"payment_intent.updated","created":1,"data":{"object":{"id":"pi_\u0000"}}}`)
	a := postRaw(t, base+"/webhooks/s", body, "Content-Type", "application/json", "Stripe-Signature", stripeSig(body, stripeSecret))
	require.Equal(t, http.StatusOK, a.Status, a.Body)
	for _, id := range []string{"L1", "L2", "L3", "N1"} {
		eventState(t, base, "s", id, 30*time.Second, "completed")
	}
	ev := eventState(t, base, "s", "L2", time.Second, "completed")
	require.Equal(t, digest(long), ev["order_key"])
	require.Equal(t, []string{"L1", "L2", "L3"}, dest.delivered(digest(long)), "one line, in acceptance order")
	require.Equal(t, []string{"N1"}, dest.delivered(digest("pi_\x00")))
	dest.mu.Lock()
	defer dest.mu.Unlock()
	require.Empty(t, dest.overlaps)
}

// Stale events: with ordering.by, an event accepted after one of its key
// with a greater by was forwarded is skipped (stale: skip: completed,
// "skipped": "stale", never forwarded) or forwarded with Hookline-Stale:
// true (stale: deliver). An equal by is not stale; a missing by is never
// stale; RFC 3339 times compare as instants.
func TestStaleEvents(t *testing.T) {
	t.Parallel()
	dest := newLineSink(t, 0, nil)
	cfg := fmt.Sprintf(`listen: 127.0.0.1:0
database_url: %q
admin_token: %s
sources:
  - name: skip
    provider: stripe
    secrets: [%q]
    ordering: {key: "json:data.object.id", by: "json:created", stale: skip}
    destination: {url: %q}
  - name: deliver
    provider: stripe
    secrets: [%q]
    ordering: {key: "json:data.object.id", by: "json:data.object.updated_at"}
    destination: {url: %q}
`, pgtest.NewURL(t), hostileToken, stripeSecret, dest.URL, stripeSecret, dest.URL)
	ip := startApp(t, cfg, app.Options{})
	base := ip.url(0)

	send := func(source, id string, created int64, final string) map[string]any {
		postOrdered(t, base, source, id, "pi_"+source, created)
		return eventState(t, base, source, id, 30*time.Second, final)
	}
	send("skip", "k1", 100, "completed")
	send("skip", "k2", 300, "completed")
	ev := send("skip", "k3", 200, "completed")
	require.Equal(t, "stale", ev["skipped"], "older than k2, already forwarded")
	require.EqualValues(t, 0, ev["attempts"], "nothing was sent: no attempt counted")
	require.Empty(t, ev["attempts_log"], "nor logged")
	send("skip", "k4", 300, "completed")
	send("skip", "k5", -1, "completed")
	ev = send("skip", "k6", 250, "completed")
	require.Equal(t, "stale", ev["skipped"], "a skipped event does not lower the greatest by")
	require.Equal(t, []string{"k1", "k2", "k4", "k5"}, dest.delivered("pi_skip"), "equal is not stale, no by is never stale")
	for _, id := range []string{"k1", "k2", "k4", "k5"} {
		require.Empty(t, dest.header(id).Values("Hookline-Stale"), id)
	}

	sendTimed := func(id, at string) {
		body := []byte(fmt.Sprintf(`{"id":%q,"object":"event","type":"payment_intent.updated","data":{"object":{"id":"pi_t","updated_at":%q}}}`, id, at))
		a := postRaw(t, base+"/webhooks/deliver", body, "Content-Type", "application/json", "Stripe-Signature", stripeSig(body, stripeSecret))
		require.Equal(t, http.StatusOK, a.Status, a.Body)
		eventState(t, base, "deliver", id, 30*time.Second, "completed")
	}
	sendTimed("t1", "2026-12-01T10:00:00Z")
	sendTimed("t2", "2026-12-01T11:00:00+01:00") // the same instant: not stale
	sendTimed("t3", "2026-12-01T09:59:59.5Z")    // half a second older: stale
	sendTimed("t4", "2026-12-01T10:00:00.000000001Z")
	require.Equal(t, []string{"t1", "t2", "t3", "t4"}, dest.delivered("pi_t"), "stale: deliver forwards stale events too")
	require.Equal(t, "true", dest.header("t3").Get("Hookline-Stale"))
	require.Empty(t, dest.header("t2").Values("Hookline-Stale"))
	require.Empty(t, dest.header("t4").Values("Hookline-Stale"))
	_, ev = adminGet(t, base, "/admin/events/deliver/t3")
	require.Nil(t, ev["skipped"], "delivered, not skipped")
}

// An operator's retry runs outside the order, but its forward is a forward:
// a 2xx raises its key's greatest by, so that an event accepted after it
// with a smaller by is stale.
func TestOperatorRetryRaisesGreatestBy(t *testing.T) {
	t.Parallel()
	var release atomic.Bool // R1 fails until released
	dest := newLineSink(t, 0, func(id string, n int) int {
		if id == "R1" && !release.Load() {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	cfg := stripeConfig(pgtest.NewURL(t), "", fmt.Sprintf(`    ordering: {key: "json:data.object.id", by: "json:created", stale: skip}
    destination: {url: %q, max_attempts: 2, backoff: {min: 50ms, max: 100ms}}
`, dest.URL))
	ip := startApp(t, cfg, app.Options{})
	base := ip.url(0)

	postOrdered(t, base, "s", "R1", "pi_R", 50)
	eventState(t, base, "s", "R1", 30*time.Second, "dead")
	postOrdered(t, base, "s", "R2", "pi_R", 10)
	eventState(t, base, "s", "R2", 30*time.Second, "completed")
	release.Store(true)
	item := deadItem(t, base, "s", "R1")
	code, body := adminPost(t, base, "/admin/dead/"+item["id"].(string)+"/retry")
	require.Equal(t, http.StatusAccepted, code, body)
	ev := eventState(t, base, "s", "R1", 30*time.Second, "completed")
	require.Nil(t, ev["skipped"])

	postOrdered(t, base, "s", "R3", "pi_R", 20)
	ev = eventState(t, base, "s", "R3", 30*time.Second, "completed")
	require.Equal(t, "stale", ev["skipped"], "R1 (by 50) was forwarded with a 2xx before R3 (by 20) was accepted")
	postOrdered(t, base, "s", "R4", "pi_R", 60)
	ev = eventState(t, base, "s", "R4", 30*time.Second, "completed")
	require.Nil(t, ev["skipped"])
	require.Equal(t, []string{"R2", "R1", "R4"}, dest.delivered("pi_R"))
}

// 5 events × 500 keys arrive in random order (each key's events in
// sequence, keys interleaved by 32 senders) at three instances, one of
// which is SIGKILLed in the middle and started again. Per key, forwards
// never overlap and the events are delivered in the order they were
// accepted (a forward the crash cut short may repeat, right away).
func TestOrderingAcrossInstancesAndACrash(t *testing.T) {
	t.Parallel()
	const keys, perKey, senders = 500, 5, 32
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 17))
	dest := newLineSink(t, 3*time.Millisecond, func(id string, n int) int {
		if n == 1 && rand.IntN(10) == 0 { // the package-level source: safe from many goroutines
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	dbURL := pgtest.NewURL(t)
	order := `    ordering: {key: "json:data.object.id"}`
	cfg := serveConfig("ADDR", dbURL, dest.URL, "", order)
	cfg = strings.Replace(cfg, "max_attempts: 5", "max_attempts: 50", 1)
	start := func() *procInstance {
		addr := freeAddr(t)
		return &procInstance{addr: addr, p: startServe(t, writeConfig(t, strings.Replace(cfg, "ADDR", addr, 1)), addr)}
	}
	insts := []*procInstance{start(), start(), start()}

	// Each key's events are sent in sequence (the next after the previous
	// was answered), so their acceptance order is their sequence.
	work := make(chan int, keys)
	for _, k := range rng.Perm(keys) {
		work <- k
	}
	close(work)
	var sent atomic.Int64
	var wg sync.WaitGroup
	var killOnce sync.Once
	for s := range senders {
		wg.Go(func() {
			for k := range work {
				for i := range perKey {
					inst := insts[(s+i)%2] // instances 0 and 1 take deliveries; 2 only works
					id := fmt.Sprintf("evt_%03d_%d", k, i)
					body := orderedBody(id, fmt.Sprintf("pi_%03d", k), int64(i))
					a := postRaw(t, inst.p.BaseURL()+"/webhooks/s", body, "Content-Type", "application/json", "Stripe-Signature", stripeSig(body, stripeSecret))
					if a.Err != nil || a.Status != http.StatusOK {
						t.Errorf("%s: %v %d %s", id, a.Err, a.Status, a.Body)
						return
					}
					if sent.Add(1) == keys*perKey/2 {
						killOnce.Do(func() { insts[2].p.Kill() })
					}
				}
			}
		})
	}
	wg.Wait()
	require.False(t, t.Failed())
	insts[2] = start() // the killed instance comes back

	pool := connect(t, dbURL)
	require.Eventually(t, func() bool {
		var waiting int
		err := pool.QueryRow(context.Background(), `SELECT count(*) FROM hookline_event_destinations WHERE state <> 'completed'`).Scan(&waiting)
		return err == nil && waiting == 0
	}, 3*rescueBound, 500*time.Millisecond, "every event completes")

	dest.mu.Lock()
	defer dest.mu.Unlock()
	require.Empty(t, dest.overlaps, "forwards of one key overlapped")
	for k := range keys {
		key := fmt.Sprintf("pi_%03d", k)
		got := slices.Compact(slices.Clone(dest.okByKey[key]))
		want := make([]string, perKey)
		for i := range perKey {
			want[i] = fmt.Sprintf("evt_%03d_%d", k, i)
		}
		require.Equal(t, want, got, "key %s: delivered out of acceptance order (arrivals %v)", key, dest.arrivals[key])
	}
}

type procInstance struct {
	addr string
	p    *proctest.Proc
}

// Staleness survives a crash: the instance forwarding E2 (by 300) is
// SIGKILLed mid-request; E3 (by 200), accepted meanwhile by another
// instance, waits behind E2 until E2's forward is rescued and completes,
// then is skipped as stale; so is E4 (by 250) after a restart.
func TestStaleAcrossACrash(t *testing.T) {
	t.Parallel()
	first := make(chan struct{})
	var once sync.Once
	dest := newLineSink(t, 0, nil)
	hang := dest.Config.Handler
	dest.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Hookline-Event-Id") == "E2" {
			hung := false
			once.Do(func() { hung = true })
			if hung {
				_, _ = io.Copy(io.Discard, r.Body) // then the server notices the client going away
				close(first)
				select {
				case <-r.Context().Done(): // the worker died
				case <-time.After(2 * time.Minute):
				}
				return
			}
		}
		hang.ServeHTTP(w, r)
	})
	dbURL := pgtest.NewURL(t)
	cfg := serveConfig("ADDR", dbURL, dest.URL, "admin_token: "+hostileToken,
		`    ordering: {key: "json:data.object.id", by: "json:created", stale: skip}`)
	cfg = strings.Replace(cfg, "max_attempts: 5", "max_attempts: 50", 1)
	start := func() *proctest.Proc {
		addr := freeAddr(t)
		return startServe(t, writeConfig(t, strings.Replace(cfg, "ADDR", addr, 1)), addr)
	}
	a := start()
	postOrdered(t, a.BaseURL(), "s", "E1", "pi_x", 100)
	eventState(t, a.BaseURL(), "s", "E1", 30*time.Second, "completed")
	postOrdered(t, a.BaseURL(), "s", "E2", "pi_x", 300)
	select {
	case <-first:
	case <-time.After(30 * time.Second):
		t.Fatal("E2 was never forwarded")
	}
	a.Kill()
	b := start()
	postOrdered(t, b.BaseURL(), "s", "E3", "pi_x", 200)
	eventState(t, b.BaseURL(), "s", "E2", rescueBound, "completed")
	ev := eventState(t, b.BaseURL(), "s", "E3", 30*time.Second, "completed")
	require.Equal(t, "stale", ev["skipped"])
	b.Kill()
	c := start()
	postOrdered(t, c.BaseURL(), "s", "E4", "pi_x", 250)
	ev = eventState(t, c.BaseURL(), "s", "E4", 30*time.Second, "completed")
	require.Equal(t, "stale", ev["skipped"], "the line's greatest by outlives the processes")
	require.Equal(t, []string{"E1", "E2"}, slices.Compact(dest.delivered("pi_x")))
}

// A graceful stop ends a line's chain at the event in flight: the worker
// finishes that forward and starts no next event of the line, which waits
// for the next start (or another instance). Chains otherwise run the
// line's next events for up to 2 s per River job, and a stop would start
// new forwards while it drains.
func TestStopEndsChains(t *testing.T) {
	t.Parallel()
	dest := newLineSink(t, 700*time.Millisecond, nil)
	dbURL := pgtest.NewURL(t)
	cfg := stripeConfig(dbURL, "shutdown_timeout: 20s\n", fmt.Sprintf(`    ordering: {key: "json:data.object.id"}
    destination: {url: %q, max_attempts: 3, backoff: {min: 50ms, max: 100ms}}
`, dest.URL))
	ip := startApp(t, cfg, app.Options{})
	base := ip.url(0)
	for i := 1; i <= 4; i++ {
		postOrdered(t, base, "s", fmt.Sprintf("K%d", i), "pi_K", int64(i))
	}
	require.Eventually(t, func() bool {
		dest.mu.Lock()
		defer dest.mu.Unlock()
		return len(dest.arrivals["pi_K"]) >= 1
	}, 30*time.Second, 5*time.Millisecond, "the line's first forward")
	ip.stop(t) // graceful: the forward in flight finishes
	dest.mu.Lock()
	defer dest.mu.Unlock()
	require.Equal(t, []string{"K1"}, dest.arrivals["pi_K"], "no forward started after the stop began")
	require.Equal(t, []string{"K1"}, dest.okByKey["pi_K"], "the forward in flight finished")
}
