package app_test

// Reconciliation end to end: a fake Stripe events API (following Stripe's
// published reference), real ingest, workers and Postgres, and the admin
// route and its answers.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/internal/app"
	"github.com/hookline/hookline/internal/pgtest"
	"github.com/hookline/hookline/internal/reconcile/fakeapi"
)

const stripeAPIKey = "rk_test_reconcile"

// stripeEvents are n events created a minute apart, ending a minute ago;
// every third is about object pi_{i%7} (ordered), the others about nothing.
func stripeEvents(n int) []fakeapi.Event {
	out := make([]fakeapi.Event, n)
	start := time.Now().Add(-time.Duration(n+1) * time.Minute).Truncate(time.Second)
	for i := range n {
		id := fmt.Sprintf("evt_rec_%04d", i)
		created := start.Add(time.Duration(i) * time.Minute)
		key := ""
		if i%3 == 0 {
			key = fmt.Sprintf("pi_%d", i%7)
		}
		out[i] = fakeapi.Event{ID: id, Type: "payment_intent.updated", Created: created, Body: orderedBody(id, key, created.Unix())}
	}
	return out
}

// proxyTo is api in front of which every request first calls before.
func proxyTo(t *testing.T, api string, before func()) *httptest.Server {
	u, err := url.Parse(api)
	require.NoError(t, err)
	rp := httputil.NewSingleHostReverseProxy(u)
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		before()
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func reconcileConfig(t *testing.T, apiURL, destURL string) string {
	return fmt.Sprintf(`listen: 127.0.0.1:0
database_url: %q
admin_token: %s
sources:
  - name: s
    provider: stripe
    secrets: [%q]
    ordering: {key: "json:data.object.id"}
    reconcile: {api_key: %q, api_url: %q, lookback: 72h}
    destination: {url: %q}
  - name: plain
    provider: stripe
    secrets: [%q]
    destination: {url: %q}
`, pgtest.NewURL(t), hostileToken, stripeSecret, stripeAPIKey, apiURL, destURL, stripeSecret, destURL)
}

// 1,000 events listed, 37 never delivered: exactly those 37 are stored and
// forwarded, once each, with Hookline-Origin: reconcile, oldest first (so
// an ordered key sees them in provider order); the webhooks' events are not
// forwarded again; hookline_reconciled_total counts 37; a second run finds
// nothing missing.
func TestReconcileStoresWhatWasNeverDelivered(t *testing.T) {
	t.Parallel()
	events := stripeEvents(1000)
	api := fakeapi.NewStripe(t, stripeAPIKey, events)
	dest := newLineSink(t, 0, nil)
	ip := startApp(t, reconcileConfig(t, api.URL, dest.URL), app.Options{})
	base := ip.url(0)

	missing := map[string]bool{}
	for i := 0; len(missing) < 37; i += 27 {
		missing[events[i%1000].ID] = true
	}
	var wg sync.WaitGroup
	work := make(chan fakeapi.Event)
	for range 16 {
		wg.Go(func() {
			for e := range work {
				a := postRaw(t, base+"/webhooks/s", e.Body, "Content-Type", "application/json", "Stripe-Signature", stripeSig(e.Body, stripeSecret))
				if a.Status != http.StatusOK {
					t.Errorf("%s: %d %s", e.ID, a.Status, a.Body)
				}
			}
		})
	}
	for _, e := range events {
		if !missing[e.ID] {
			work <- e
		}
	}
	close(work)
	wg.Wait()
	require.False(t, t.Failed())

	code, body := adminPost(t, base, "/admin/sources/s/reconcile")
	require.Equal(t, http.StatusOK, code, body)
	require.JSONEq(t, `{"checked": 1000, "missing": 37}`, body)

	require.Eventually(t, func() bool {
		dest.mu.Lock()
		defer dest.mu.Unlock()
		return len(dest.perEvent) == 1000
	}, time.Minute, 100*time.Millisecond, "every event forwarded")
	noJobLeft(t, ip.app.Pool)
	dest.mu.Lock()
	for _, e := range events {
		require.Equal(t, 1, dest.perEvent[e.ID], "%s forwarded once", e.ID)
		origin := dest.headers[e.ID].Get("Hookline-Origin")
		if missing[e.ID] {
			require.Equal(t, "reconcile", origin, e.ID)
		} else {
			require.Empty(t, origin, "%s came as a webhook", e.ID)
		}
	}
	// Per ordered key, the reconciled events arrived in provider order.
	for key, ids := range dest.okByKey {
		var found []string
		for _, id := range ids {
			if missing[id] {
				found = append(found, id)
			}
		}
		if key != "" && len(found) > 1 {
			require.IsIncreasing(t, found, "key %s: reconciled events forwarded out of provider order", key)
		}
	}
	// Each reconciled event has a trace of its own, shown by the lookup
	// and carried by its forward.
	traces := map[string]bool{}
	for id := range missing {
		_, ev := adminGet(t, base, "/admin/events/s/"+id)
		require.Equal(t, "reconcile", ev["origin"])
		m := traceparentRE.FindStringSubmatch(dest.headers[id].Get("Traceparent"))
		require.NotNil(t, m, "%s: forward's traceparent %q", id, dest.headers[id].Get("Traceparent"))
		require.Equal(t, ev["trace_id"], m[1], "%s: the forward is in the trace the lookup shows", id)
		traces[m[1]] = true
	}
	require.Len(t, traces, len(missing), "one trace per reconciled event")
	dest.mu.Unlock()

	_, _, metricsText := get(base + "/metrics")
	require.Contains(t, metricsText, `hookline_reconciled_total{source="s"} 37`)
	require.Regexp(t, `(?m)^hookline_forward_slot_wait_seconds_count\{destination="default",source="s"\} 1000$`, metricsText,
		"each forward's wait for a slot observed: the 963 delivered as webhooks and the 37 reconciled")

	code, body = adminPost(t, base, "/admin/sources/s/reconcile")
	require.Equal(t, http.StatusOK, code, body)
	require.JSONEq(t, `{"checked": 1000, "missing": 0}`, body)
}

func firstKey(m map[string]bool) string {
	for k := range m {
		return k
	}
	return ""
}

// Webhooks for events the run also finds arrive while it runs: whichever
// commits first, each event is accepted once and forwarded once.
func TestReconcileRacingWebhooks(t *testing.T) {
	t.Parallel()
	events := stripeEvents(60)
	api := fakeapi.NewStripe(t, stripeAPIKey, events)
	dest := newLineSink(t, 0, nil)
	var base atomic.Value
	var webhooksAccepted atomic.Int64
	var racers sync.WaitGroup
	var once sync.Once
	proxy := proxyTo(t, api.URL, func() {
		once.Do(func() { // the run has started listing: the provider delivers after all
			// In ten waves, each sent once the previous one was answered,
			// so that the deliveries spread over the run.
			racers.Go(func() {
				for wave := range 10 {
					var sent sync.WaitGroup
					for i, e := range events {
						if i%10 != wave {
							continue
						}
						sent.Go(func() {
							a := postRaw(t, base.Load().(string)+"/webhooks/s", e.Body, "Content-Type", "application/json",
								"Stripe-Signature", stripeSig(e.Body, stripeSecret))
							if a.Status == http.StatusOK && strings.Contains(a.Body, `"accepted"`) {
								webhooksAccepted.Add(1)
							}
						})
					}
					sent.Wait()
				}
			})
		})
	})
	ip := startApp(t, reconcileConfig(t, proxy.URL, dest.URL), app.Options{})
	base.Store(ip.url(0))
	code, body := adminPost(t, ip.url(0), "/admin/sources/s/reconcile")
	require.Equal(t, http.StatusOK, code, body)
	racers.Wait()
	var res struct{ Checked, Missing int64 }
	require.NoError(t, json.Unmarshal([]byte(body), &res))
	require.Equal(t, int64(60), res.Checked)
	require.Equal(t, int64(60), res.Missing+webhooksAccepted.Load(), "each event accepted exactly once (run stored %d)", res.Missing)
	require.Eventually(t, func() bool {
		dest.mu.Lock()
		defer dest.mu.Unlock()
		return len(dest.perEvent) == 60
	}, time.Minute, 100*time.Millisecond)
	noJobLeft(t, ip.app.Pool)
	dest.mu.Lock()
	defer dest.mu.Unlock()
	for _, e := range events {
		require.Equal(t, 1, dest.perEvent[e.ID], "%s forwarded once", e.ID)
	}
}

// The route's answers: 404 unknown source, 400 no reconcile block, 409 a
// run in progress (on any instance), 502 the provider failing (with what
// was found), 401 without the token.
func TestReconcileAnswers(t *testing.T) {
	t.Parallel()
	api := fakeapi.NewStripe(t, stripeAPIKey, stripeEvents(10))
	hold := make(chan struct{})
	var held atomic.Bool
	entered := make(chan struct{}, 1)
	proxy := proxyTo(t, api.URL, func() {
		if held.Load() {
			entered <- struct{}{}
			<-hold
		}
	})
	dest := newLineSink(t, 0, nil)
	cfg := reconcileConfig(t, proxy.URL, dest.URL)
	one := startApp(t, cfg, app.Options{})
	two := startApp(t, cfg, app.Options{NoMigrate: true}) // a second instance on the same database

	code, body := adminPost(t, one.url(0), "/admin/sources/nope/reconcile")
	require.Equal(t, http.StatusNotFound, code, body)
	code, body = adminPost(t, one.url(0), "/admin/sources/plain/reconcile")
	require.Equal(t, http.StatusBadRequest, code, body)
	require.Contains(t, body, "reconcile block")
	req, _ := http.NewRequest(http.MethodPost, one.url(0)+"/admin/sources/s/reconcile", nil)
	resp, err := testClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)

	held.Store(true)
	first := make(chan string, 1)
	go func() { c, b := adminPost(t, one.url(0), "/admin/sources/s/reconcile"); first <- fmt.Sprint(c, " ", b) }()
	<-entered
	held.Store(false)
	code, body = adminPost(t, two.url(0), "/admin/sources/s/reconcile")
	require.Equal(t, http.StatusConflict, code, "another instance's run is in progress: %s", body)
	close(hold)
	require.Contains(t, <-first, "200 ")

	api.FailNext(http.StatusInternalServerError, 10)
	code, body = adminPost(t, one.url(0), "/admin/sources/s/reconcile")
	require.Equal(t, http.StatusBadGateway, code, body)
	var eb map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &eb))
	require.NotEmpty(t, eb["error"])
	require.NotContains(t, body, stripeAPIKey, "the API key never shows")
}

// An event the provider lists that hookline can never store (an id a
// webhook carrying it would be refused for: a control character, past the
// length cap, no type where the provider's events all have one) is skipped and logged; the run stores the rest of its page
// and answers 200, instead of failing on it every run until it leaves the
// lookback.
func TestReconcileSkipsEventsItCannotStore(t *testing.T) {
	t.Parallel()
	created := time.Now().Add(-time.Hour).Truncate(time.Second)
	event := func(id string, i int) fakeapi.Event {
		body, err := json.Marshal(map[string]any{"id": id, "object": "event", "type": "charge.succeeded", "created": created.Unix() + int64(i)})
		require.NoError(t, err)
		return fakeapi.Event{ID: id, Type: "charge.succeeded", Created: created.Add(time.Duration(i) * time.Second), Body: body}
	}
	api := fakeapi.NewStripe(t, stripeAPIKey, []fakeapi.Event{
		event("evt_ok_1", 0), event("evt_bad\r\nX-Injected: 1", 1), event("evt_ok_2", 2),
		event("evt_"+strings.Repeat("x", 2000), 3), event("evt_ok_3", 4),
		// No type, where every Stripe event has one: a webhook is refused.
		{ID: "evt_no_type", Created: created.Add(5 * time.Second), Body: []byte(`{"id":"evt_no_type","object":"event","created":` + strconv.FormatInt(created.Unix()+5, 10) + `}`)},
	})
	dest := newLineSink(t, 0, nil)
	ip := startApp(t, reconcileConfig(t, api.URL, dest.URL), app.Options{})
	code, body := adminPost(t, ip.url(0), "/admin/sources/s/reconcile")
	require.Equal(t, http.StatusOK, code, body)
	require.JSONEq(t, `{"checked": 6, "missing": 3}`, body)
	for _, id := range []string{"evt_ok_1", "evt_ok_2", "evt_ok_3"} {
		code, body := adminGet(t, ip.url(0), "/admin/events/s/"+id)
		require.Equal(t, http.StatusOK, code, "%s: %s", id, body)
	}
	code, _ = adminGet(t, ip.url(0), "/admin/events/s/evt_no_type")
	require.Equal(t, http.StatusNotFound, code, "an event without a type is not stored")
	code, body = adminPost(t, ip.url(0), "/admin/sources/s/reconcile")
	require.Equal(t, http.StatusOK, code, body)
	require.JSONEq(t, `{"checked": 6, "missing": 0}`, body, "the next run skips them again, and finds nothing missing")
}
