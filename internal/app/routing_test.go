package app_test

// Routing end to end: several destinations per source, filters, pause and
// resume, rate limits across instances, Retry-After, the circuit breaker
// and alerts, over real HTTP and a real Postgres.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/internal/app"
	"github.com/hookline/hookline/internal/pgtest"
)

// hits is a destination that records, per destination name (the
// Hookline-Destination header), the event ids it answered 2xx, the times of
// all requests, and the most requests in flight at once.
type hits struct {
	*httptest.Server
	mu       sync.Mutex
	byDest   map[string]map[string]int // destination → event id → 2xx answers
	times    []time.Time
	inFlight int
	maxIn    int
	answer   func(r *http.Request, n int) int // status for the n-th request (1-based); nil: 200
	n        int
}

func newHits(t *testing.T, answer func(r *http.Request, n int) int) *hits {
	h := &hits{byDest: map[string]map[string]int{}, answer: answer}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		h.mu.Lock()
		h.n++
		n := h.n
		h.times = append(h.times, time.Now())
		h.inFlight++
		h.maxIn = max(h.maxIn, h.inFlight)
		h.mu.Unlock()
		status := http.StatusOK
		if h.answer != nil {
			status = h.answer(r, n)
		}
		time.Sleep(5 * time.Millisecond) // the destination's own latency, so requests overlap
		h.mu.Lock()
		h.inFlight--
		if status < 300 {
			d := r.Header.Get("Hookline-Destination")
			if h.byDest[d] == nil {
				h.byDest[d] = map[string]int{}
			}
			h.byDest[d][r.Header.Get("Hookline-Event-Id")]++
		}
		h.mu.Unlock()
		if r.Header.Get("Retry-After-Test") != "" {
			w.Header().Set("Retry-After", r.Header.Get("Retry-After-Test"))
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *hits) got(dest string) map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]int{}
	for k, v := range h.byDest[dest] {
		out[k] = v
	}
	return out
}

// postTyped posts a Stripe-signed event of type typ with livemode.
func postTyped(t *testing.T, base, source, id, typ string, livemode bool) answer {
	t.Helper()
	body := []byte(fmt.Sprintf(`{"id":%q,"object":"event","type":%q,"livemode":%v,"created":1764504000,"data":{"object":{"livemode":%v}}}`, id, typ, livemode, livemode))
	return postRaw(t, base+"/webhooks/"+source, body, "Content-Type", "application/json", "Stripe-Signature", stripeSig(body, stripeSecret))
}

// Three destinations with different filters receive exactly the events they
// match, each exactly once; one fails for a while and recovers without
// delaying or repeating the others; an event that matches none completes
// with no destinations.
func TestFanOutWithFilters(t *testing.T) {
	t.Parallel()
	var flaky atomic.Int32
	dest := newHits(t, func(r *http.Request, _ int) int {
		if r.Header.Get("Hookline-Destination") == "ledger" && flaky.Add(1) <= 10 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	dbURL := pgtest.NewURL(t)
	cfg := stripeConfig(dbURL, "", fmt.Sprintf(`    destinations:
      - {name: billing, url: %q, types: ["invoice.*"]}
      - {name: everything, url: %q}
      - {name: ledger, url: %q, types: ["charge.*", "invoice.paid"], where: {"data.object.livemode": true}, max_attempts: 20, backoff: {min: 50ms, max: 200ms}}
`, dest.URL, dest.URL, dest.URL))
	ip := startApp(t, cfg, app.Options{})
	events := []struct {
		id, typ  string
		livemode bool
		to       []string
	}{
		{"evt_inv_paid", "invoice.paid", true, []string{"billing", "everything", "ledger"}},
		{"evt_inv_paid_test", "invoice.paid", false, []string{"billing", "everything"}},
		{"evt_invitem", "invoiceitem.created", true, []string{"everything"}},
		{"evt_charge", "charge.succeeded", true, []string{"everything", "ledger"}},
		{"evt_charge_test", "charge.refunded", false, []string{"everything"}},
	}
	for i := range 10 {
		events = append(events, struct {
			id, typ  string
			livemode bool
			to       []string
		}{fmt.Sprintf("evt_charge_%d", i), "charge.succeeded", true, []string{"everything", "ledger"}})
	}
	want := map[string]map[string]int{"billing": {}, "everything": {}, "ledger": {}}
	for _, ev := range events {
		a := postTyped(t, ip.url(0), "s", ev.id, ev.typ, ev.livemode)
		require.Equal(t, http.StatusOK, a.Status, a.Body)
		require.Contains(t, a.Body, `"accepted"`)
		for _, d := range ev.to {
			want[d][ev.id] = 1
		}
	}
	for _, ev := range events {
		eventState(t, ip.url(0), "s", ev.id, 60*time.Second, "completed")
	}
	for d, w := range want {
		require.Equal(t, w, dest.got(d), "destination %s", d)
	}

	// The lookup shows each destination, and the attempts log the retries.
	_, ev := adminGet(t, ip.url(0), "/admin/events/s/evt_charge")
	dests := ev["destinations"].([]any)
	require.Len(t, dests, 2)
	names := []string{}
	for _, d := range dests {
		m := d.(map[string]any)
		names = append(names, m["name"].(string))
		require.Equal(t, "completed", m["state"])
	}
	sort.Strings(names)
	require.Equal(t, []string{"everything", "ledger"}, names)
	require.NotEmpty(t, ev["attempts_log"])

	// A re-delivery is a duplicate: nothing is forwarded again.
	a := postTyped(t, ip.url(0), "s", "evt_charge", "charge.succeeded", true)
	require.Contains(t, a.Body, `"duplicate"`)
	noJobLeft(t, connect(t, dbURL)) // had the duplicate been queued, its forward would be done by now
	require.Equal(t, 1, dest.got("everything")["evt_charge"])
}

// An event that matches no destination is completed with destinations: [].
func TestEventMatchingNoDestination(t *testing.T) {
	t.Parallel()
	dest := newHits(t, nil)
	cfg := stripeConfig(pgtest.NewURL(t), "", fmt.Sprintf(`    destinations:
      - {name: billing, url: %q, types: ["invoice.*"]}
`, dest.URL))
	ip := startApp(t, cfg, app.Options{})
	a := postTyped(t, ip.url(0), "s", "evt_nowhere", "customer.created", true)
	require.Contains(t, a.Body, `"accepted"`)
	ev := eventState(t, ip.url(0), "s", "evt_nowhere", 10*time.Second, "completed")
	require.Equal(t, []any{}, ev["destinations"])
	require.NotNil(t, ev["completed_at"])
}

// A paused destination accumulates events while another keeps delivering;
// after resume it drains them all. Nothing is spent while paused.
func TestPauseAndResume(t *testing.T) {
	t.Parallel()
	const n = 1000
	dest := newHits(t, nil)
	cfg := stripeConfig(pgtest.NewURL(t), "workers: 20\n", fmt.Sprintf(`    destinations:
      - {name: paused, url: %q}
      - {name: live, url: %q}
`, dest.URL, dest.URL))
	ip := startApp(t, cfg, app.Options{})
	code, out := adminPost(t, ip.url(0), "/admin/destinations/s/paused/pause")
	require.Equal(t, http.StatusAccepted, code, out)
	code, _ = adminPost(t, ip.url(0), "/admin/destinations/s/nope/pause")
	require.Equal(t, http.StatusNotFound, code)
	time.Sleep(5 * time.Second) // the promise's own bound: every instance stops starting attempts within 5 s (no signal to wait on)

	var wg sync.WaitGroup
	ids := make(chan string, n)
	for i := range n {
		ids <- fmt.Sprintf("evt_p_%04d", i)
	}
	close(ids)
	for range 16 {
		wg.Go(func() {
			for id := range ids {
				a := postEvent(testClient, ip.url(0), "s", id, stripeSecret)
				require.Equal(t, http.StatusOK, a.Status, a.Body)
			}
		})
	}
	wg.Wait()
	require.Eventually(t, func() bool { return len(dest.got("live")) == n }, 120*time.Second, 100*time.Millisecond, "the live destination delivers")
	require.Empty(t, dest.got("paused"), "nothing reaches a paused destination")

	d := destinationItem(t, ip.url(0), "s", "paused")
	require.Equal(t, "paused", d["state"])
	require.EqualValues(t, n, d["queued"])
	require.NotNil(t, d["paused_at"])
	_, ev := adminGet(t, ip.url(0), "/admin/events/s/evt_p_0000")
	require.Equal(t, "queued", ev["state"], "a paused destination's events are queued")

	code, _ = adminPost(t, ip.url(0), "/admin/destinations/s/paused/resume")
	require.Equal(t, http.StatusAccepted, code)
	require.Eventually(t, func() bool { return len(dest.got("paused")) == n }, 120*time.Second, 100*time.Millisecond, "it drains after resume")
	for id, c := range dest.got("paused") {
		require.Equal(t, 1, c, id)
	}
	_, ev = adminGet(t, ip.url(0), "/admin/events/s/evt_p_0000")
	for _, x := range ev["destinations"].([]any) {
		require.EqualValues(t, 1, x.(map[string]any)["attempts"], "no attempt was spent while paused")
	}
	require.Equal(t, "active", destinationItem(t, ip.url(0), "s", "paused")["state"])
}

// With three instances, a destination with rate_limit 20/s receives at most
// 20 × 10 × 1.1 + 5 requests in any 10 s window, and never more than
// max_in_flight at once.
func TestRateLimitAcrossInstances(t *testing.T) {
	t.Parallel()
	const n, rate, inFlight = 500, 20, 3
	dest := newHits(t, func(*http.Request, int) int { time.Sleep(20 * time.Millisecond); return http.StatusOK }) // a 20 ms destination
	dbURL := pgtest.NewURL(t)
	cfg := stripeConfig(dbURL, "workers: 20\n", fmt.Sprintf(`    destinations:
      - {name: limited, url: %q, rate_limit: %d/s, max_in_flight: %d}
`, dest.URL, rate, inFlight))
	var ips []*inproc
	for range 3 {
		ips = append(ips, startApp(t, cfg, app.Options{}))
	}
	for i := range n {
		a := postEvent(testClient, ips[i%3].url(0), "s", fmt.Sprintf("evt_r_%03d", i), stripeSecret)
		require.Equal(t, http.StatusOK, a.Status, a.Body)
	}
	require.Eventually(t, func() bool { return len(dest.got("limited")) == n }, 120*time.Second, 200*time.Millisecond)
	dest.mu.Lock()
	times := append([]time.Time(nil), dest.times...)
	maxIn := dest.maxIn
	dest.mu.Unlock()
	limit := rate*10*11/10 + 5
	for i := range times {
		j := i
		for j < len(times) && times[j].Sub(times[i]) < 10*time.Second {
			j++
		}
		require.LessOrEqual(t, j-i, limit, "requests in the 10 s after request %d", i)
	}
	require.LessOrEqual(t, maxIn, inFlight, "max_in_flight across instances")
}

// A 429 with Retry-After delays the next attempt until then, counting the
// attempt it was and no more.
func TestRetryAfterIsHonoured(t *testing.T) {
	t.Parallel()
	dest := newHits(t, func(r *http.Request, n int) int {
		if n == 1 {
			return http.StatusTooManyRequests
		}
		return http.StatusOK
	})
	// The destination's first answer carries Retry-After: 3.
	wrapped := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Set("Retry-After-Test", "3")
		dest.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(wrapped.Close)
	cfg := stripeConfig(pgtest.NewURL(t), "", fmt.Sprintf(`    destinations:
      - {name: d, url: %q, backoff: {min: 10ms, max: 20ms}}
`, wrapped.URL))
	ip := startApp(t, cfg, app.Options{})
	require.Equal(t, http.StatusOK, postEvent(testClient, ip.url(0), "s", "evt_ra", stripeSecret).Status)
	ev := eventState(t, ip.url(0), "s", "evt_ra", 30*time.Second, "completed")
	require.EqualValues(t, 2, ev["attempts"], "the 429 counted as the attempt it was")
	dest.mu.Lock()
	defer dest.mu.Unlock()
	require.Len(t, dest.times, 2)
	require.GreaterOrEqual(t, dest.times[1].Sub(dest.times[0]), 2900*time.Millisecond, "the next attempt waited for Retry-After, not the 10 ms backoff")
	log := ev["attempts_log"].([]any)
	require.Len(t, log, 2)
	require.EqualValues(t, 429, log[0].(map[string]any)["status"])
	require.EqualValues(t, 200, log[1].(map[string]any)["status"])
}

// After `failures` consecutive failures the circuit opens: no attempts for
// cool_down (none spent), then one probe; a 2xx closes it. Nothing is
// dead-lettered because the circuit was open.
func TestCircuitBreaker(t *testing.T) {
	t.Parallel()
	var healthy atomic.Bool
	dest := newHits(t, func(*http.Request, int) int {
		if healthy.Load() {
			return http.StatusOK
		}
		return http.StatusInternalServerError
	})
	cfg := stripeConfig(pgtest.NewURL(t), "workers: 1\n", fmt.Sprintf(`    destinations:
      - {name: d, url: %q, max_attempts: 3, backoff: {min: 10ms, max: 20ms}, circuit: {failures: 3, cool_down: 3s}}
`, dest.URL))
	ip := startApp(t, cfg, app.Options{})
	for i := range 5 {
		require.Equal(t, http.StatusOK, postEvent(testClient, ip.url(0), "s", fmt.Sprintf("evt_c_%d", i), stripeSecret).Status)
	}
	require.Eventually(t, func() bool { return destinationItem(t, ip.url(0), "s", "d")["state"] == "open" }, 30*time.Second, 50*time.Millisecond)
	dest.mu.Lock()
	opened := len(dest.times)
	dest.mu.Unlock()
	require.Equal(t, 3, opened, "it opened after 3 consecutive failures")
	// The destination recovers; the next request it sees is the probe, which
	// must come no earlier than cool_down after the failure that opened it.
	healthy.Store(true)
	require.Eventually(t, func() bool { dest.mu.Lock(); defer dest.mu.Unlock(); return len(dest.times) > opened },
		30*time.Second, 20*time.Millisecond, "a probe after cool_down")
	dest.mu.Lock()
	gap := dest.times[opened].Sub(dest.times[opened-1])
	dest.mu.Unlock()
	require.GreaterOrEqual(t, gap, 3*time.Second, "no attempt while open (cool_down 3s)")
	for i := range 5 {
		eventState(t, ip.url(0), "s", fmt.Sprintf("evt_c_%d", i), 60*time.Second, "completed", "dead")
	}
	require.Equal(t, "active", destinationItem(t, ip.url(0), "s", "d")["state"], "the probe's 2xx closed it")
	// The event whose attempts opened the circuit used its budget (3); the
	// others waited while open and were delivered, none dead because of it.
	dead := 0
	for i := range 5 {
		_, ev := adminGet(t, ip.url(0), fmt.Sprintf("/admin/events/s/evt_c_%d", i))
		if ev["state"] == "dead" {
			dead++
		}
	}
	require.LessOrEqual(t, dead, 1)
}

// A dead event raises one alert per min_interval to a Slack-compatible
// webhook, with its kind, source, destination and count.
func TestAlertOnDead(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var alerts []map[string]any
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m map[string]any
		_ = json.NewDecoder(r.Body).Decode(&m)
		mu.Lock()
		alerts = append(alerts, m)
		mu.Unlock()
	}))
	t.Cleanup(hook.Close)
	fail := newHits(t, func(*http.Request, int) int { return http.StatusInternalServerError })
	dbURL := pgtest.NewURL(t)
	cfg := fmt.Sprintf(`listen: 127.0.0.1:0
database_url: %q
admin_token: %s
alerts:
  - {url: %q, on: [dead], min_interval: 1h}
sources:
  - name: s
    provider: stripe
    secrets: [%q]
    destinations:
      - {name: d, url: %q, max_attempts: 1}
`, dbURL, hostileToken, hook.URL, stripeSecret, fail.URL)
	ip := startApp(t, cfg, app.Options{})
	// Alerting starts with its first scan (deaths before it are history).
	pool := connect(t, dbURL)
	require.Eventually(t, func() bool {
		var n int
		return pool.QueryRow(context.Background(), `SELECT count(*) FROM hookline_alerts`).Scan(&n) == nil && n > 0
	}, 30*time.Second, 100*time.Millisecond, "the first alert scan ran")
	for i := range 3 {
		require.Equal(t, http.StatusOK, postEvent(testClient, ip.url(0), "s", fmt.Sprintf("evt_al_%d", i), stripeSecret).Status)
	}
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(alerts) >= 1 }, 45*time.Second, 100*time.Millisecond,
		"an alert within 30 s of the deaths")
	time.Sleep(12 * time.Second) // a negative window: at least one more scan passes, and no second alert within min_interval
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, alerts, 1)
	a := alerts[0]
	require.Equal(t, "dead", a["kind"])
	require.Equal(t, "s", a["source"])
	require.Equal(t, "d", a["destination"])
	require.NotEmpty(t, a["text"])
	require.False(t, strings.Contains(a["text"].(string), "\n"), "one line")
	require.Positive(t, a["count"])
}

func adminPost(t *testing.T, base, path string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+path, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+hostileToken)
	resp, err := testClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func destinationItem(t *testing.T, base, source, name string) map[string]any {
	t.Helper()
	code, list := adminGet(t, base, "/admin/destinations")
	require.Equal(t, http.StatusOK, code)
	for _, it := range list["items"].([]any) {
		m := it.(map[string]any)
		if m["source"] == source && m["name"] == name {
			return m
		}
	}
	t.Fatalf("no destination %s/%s in %v", source, name, list)
	return nil
}

// A provider's re-delivery of a dead event runs it again; if it dies again,
// the dead set keeps one item for it (the newest), not one per death.
func TestDyingAgainKeepsOneDeadItem(t *testing.T) {
	t.Parallel()
	dest := newHits(t, func(*http.Request, int) int { return http.StatusInternalServerError })
	cfg := stripeConfig(pgtest.NewURL(t), "", fmt.Sprintf(`    destination: {url: %q, max_attempts: 1}
`, dest.URL))
	ip := startApp(t, cfg, app.Options{})
	for round := 1; round <= 2; round++ {
		a := postTyped(t, ip.url(0), "s", "evt_dies_twice", "charge.failed", true)
		require.Equal(t, http.StatusOK, a.Status, a.Body)
		require.Contains(t, a.Body, `"accepted"`, "round %d: a dead event's re-delivery runs again", round)
		ev := eventState(t, ip.url(0), "s", "evt_dies_twice", 30*time.Second, "dead")
		require.EqualValues(t, round, ev["attempts"])
	}
	code, list := adminGet(t, ip.url(0), "/admin/dead?source=s")
	require.Equal(t, http.StatusOK, code)
	items := list["items"].([]any)
	require.Len(t, items, 1, "one dead item per dead destination: %v", items)
	require.EqualValues(t, 2, items[0].(map[string]any)["attempts"])
}

// GET /admin/destinations counts an event in its attempt as in flight, not
// also as queued; the ones behind it are queued.
func TestDestinationCountsAnAttemptOnce(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var arrived atomic.Int32
	dest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		arrived.Add(1)
		<-release
	}))
	t.Cleanup(dest.Close)
	cfg := stripeConfig(pgtest.NewURL(t), "", fmt.Sprintf(`    lease: 30s
    destinations:
      - {name: slow, url: %q, timeout: 20s, max_in_flight: 1}
`, dest.URL))
	ip := startApp(t, cfg, app.Options{})
	t.Cleanup(func() { close(release) }) // before the app stops (cleanups run last first)
	for _, id := range []string{"evt_c1", "evt_c2", "evt_c3"} {
		require.Equal(t, http.StatusOK, postEvent(testClient, ip.url(0), "s", id, stripeSecret).Status)
	}
	require.Eventually(t, func() bool { return arrived.Load() == 1 }, 30*time.Second, 50*time.Millisecond, "one attempt runs")
	d := destinationItem(t, ip.url(0), "s", "slow")
	require.EqualValues(t, 1, d["in_flight"], "%v", d)
	require.EqualValues(t, 2, d["queued"], "the two waiting behind it, not the one in flight: %v", d)
}
