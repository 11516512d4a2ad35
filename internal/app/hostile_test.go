package app_test

// Hostile senders and misbehaving destinations, end to end: real HTTP into
// an App, a real Postgres, destinations on loopback. Each test is one rule of
// the threat model (README, "Threat model").

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/ingest"
	"github.com/hookline/hookline/internal/app"
	"github.com/hookline/hookline/internal/pgtest"
	"github.com/hookline/hookline/jobs"
	"github.com/hookline/hookline/providers"
)

const hostileToken = "hostile-admin-token"

// adminGet GETs an admin route and decodes its JSON answer.
func adminGet(t *testing.T, base, path string) (int, map[string]any) {
	t.Helper()
	code, _, body := get(base+path, "Authorization", "Bearer "+hostileToken)
	var out map[string]any
	if strings.HasPrefix(strings.TrimSpace(body), "{") {
		require.NoError(t, json.Unmarshal([]byte(body), &out), body)
	}
	return code, out
}

// eventState polls the admin lookup until the event's state is one of
// want, and returns the lookup.
func eventState(t *testing.T, base, source, id string, within time.Duration, want ...string) map[string]any {
	t.Helper()
	var last map[string]any
	timeout := time.After(within)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		code, ev := adminGet(t, base, "/admin/events/"+source+"/"+url.PathEscape(id))
		if code == http.StatusOK {
			last = ev
			if slices.Contains(want, fmt.Sprint(ev["state"])) {
				return ev
			}
		}
		select {
		case <-tick.C:
		case <-timeout:
			t.Fatalf("event %s/%s is not %v within %s; last lookup: %v", source, id, want, within, last)
		}
	}
}

// noJobLeft waits (at most 30 s) until no event job waits or runs: from
// then on nothing more is forwarded.
func noJobLeft(t *testing.T, pool jobs.Querier) {
	t.Helper()
	require.Eventually(t, func() bool {
		unfinished, err := jobs.AnyUnfinishedJob(context.Background(), pool)
		return err == nil && !unfinished
	}, 30*time.Second, 50*time.Millisecond, "event jobs still waiting or running")
}

// deadItem returns the newest dead item of the event, with its payload.
func deadItem(t *testing.T, base, source, id string) map[string]any {
	t.Helper()
	code, list := adminGet(t, base, "/admin/dead?source="+source)
	require.Equal(t, http.StatusOK, code)
	for _, it := range list["items"].([]any) {
		item := it.(map[string]any)
		if item["event_id"] == id {
			code, full := adminGet(t, base, "/admin/dead/"+item["id"].(string))
			require.Equal(t, http.StatusOK, code)
			return full
		}
	}
	t.Fatalf("no dead item for %s/%s in %v", source, id, list)
	return nil
}

func postRaw(t *testing.T, u string, body []byte, header ...string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, u, bytes.NewReader(body))
	require.NoError(t, err)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	start := time.Now()
	resp, err := testClient.Do(req)
	if err != nil {
		return answer{Err: err, Took: time.Since(start)}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{Status: resp.StatusCode, Header: resp.Header, Body: string(b), Took: time.Since(start)}
}

// A signed event whose id (or type) is blank after resolution, Unicode
// spaces and invisible format characters included, is a 400 naming the resolver, and nothing is stored: no
// event that no worker could ever claim.
func TestBlankEventIDsAreRefused(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewURL(t)
	ip := startApp(t, serveConfig("127.0.0.1:0", dbURL, "http://127.0.0.1:9/x", "admin_token: "+hostileToken, ""), app.Options{})
	// Nothing visible: white space, and format characters Unicode does not
	// count as white space (zero width space, word joiner, BOM, Mongolian
	// vowel separator).
	for _, id := range []string{"", "   ", "\t", " \u00a0 ", "\u2003\n", "\u200b", "\ufeff", "\u2060", "\u180e", "\u200b\u3000\u200d", "\u3164", "\u2800", "\uffa0\u034f", "\ufe0f"} {
		body, _ := json.Marshal(map[string]any{"id": id, "object": "event", "type": "charge.succeeded", "created": 1764504000})
		a := postRaw(t, ip.url(0)+"/webhooks/s", body, "Content-Type", "application/json", "Stripe-Signature", stripeSig(body, stripeSecret))
		require.Equal(t, http.StatusBadRequest, a.Status, "id %q: %s", id, a.Body)
		require.Contains(t, a.Body, "event id", "id %q", id)
		require.Contains(t, a.Body, "resolver", "the answer names the resolver")
	}
	// Every Stripe event has a type: blank, empty or missing is refused.
	for _, body := range []string{
		`{"id":"evt_blank_type","object":"event","type":"  ","created":1764504000}`,
		`{"id":"evt_empty_type","object":"event","type":"","created":1764504000}`,
		`{"id":"evt_no_type","object":"event","created":1764504000}`,
	} {
		a := postRaw(t, ip.url(0)+"/webhooks/s", []byte(body), "Content-Type", "application/json", "Stripe-Signature", stripeSig([]byte(body), stripeSecret))
		require.Equal(t, http.StatusBadRequest, a.Status, a.Body)
		require.Contains(t, a.Body, "event type resolved by the provider's default resolver json:type is empty or blank", body)
	}

	pool := connect(t, dbURL)
	var events, deliveries int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM hookline_events), (SELECT count(*) FROM hookline_deliveries)`).Scan(&events, &deliveries))
	require.Zero(t, events+deliveries, "nothing stored")
}

// An id or type a forward could not carry intact in its headers
// (Idempotency-Key, Hookline-Event-Id, Hookline-Event-Type) is a 400 naming
// the resolver, and nothing is stored: a control character, which HTTP
// refuses (the event could never be forwarded), or whitespace at either
// end, which HTTP strips ("evt_1" and "evt_1 " would reach the destination
// under one Idempotency-Key). Whitespace inside is carried intact.
func TestEventIDsHeadersCannotCarryAreRefused(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewURL(t)
	ip := startApp(t, serveConfig("127.0.0.1:0", dbURL, "http://127.0.0.1:9/x", "admin_token: "+hostileToken, ""), app.Options{})
	post := func(id, typ string) answer {
		body, _ := json.Marshal(map[string]any{"id": id, "object": "event", "type": typ, "created": 1764504000})
		return postRaw(t, ip.url(0)+"/webhooks/s", body, "Content-Type", "application/json", "Stripe-Signature", stripeSig(body, stripeSecret))
	}
	for _, c := range []struct{ id, typ, want string }{
		{"evt\nnl", "charge.succeeded", "event id resolved by resolver json:id contains the control character U+000A"},
		{"evt\r\nX-Inject: 1", "charge.succeeded", "control character U+000D"},
		{"evt\u0001\u007f", "charge.succeeded", "control character U+0001"},
		{"evt_del\u007f", "charge.succeeded", "control character U+007F"},
		{"evt_nel\u0085", "charge.succeeded", "control character U+0085"},
		{"evt_ws ", "charge.succeeded", "event id resolved by resolver json:id starts or ends with whitespace"},
		{" evt_ws", "charge.succeeded", "starts or ends with whitespace"},
		{"evt_tab\t", "charge.succeeded", "control character U+0009"},
		{"evt_type_nl", "charge.\nsucceeded", "event type resolved by the provider's default resolver json:type contains the control character U+000A"},
		{"evt_type_ws", "charge.succeeded ", "event type resolved by the provider's default resolver json:type starts or ends with whitespace"},
	} {
		id, typ := c.id, c.typ
		a := post(id, typ)
		require.Equal(t, http.StatusBadRequest, a.Status, "id %q type %q: %s", id, typ, a.Body)
		require.Contains(t, a.Body, c.want, "id %q type %q", id, typ)
	}
	pool := connect(t, dbURL)
	var events int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM hookline_events`).Scan(&events))
	require.Zero(t, events, "nothing stored")

	a := post("evt inner space", "charge.succeeded")
	require.Equal(t, http.StatusOK, a.Status, a.Body)
	require.Contains(t, a.Body, `"event_id":"evt inner space"`)
}

// Events that no worker can ever claim, stored by an older release (a blank
// id) or left behind by a source removed from the configuration, end in the
// dead set with reason failed and a readable error: nothing snoozes for
// ever.
func TestUnclaimableEventsGoDead(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewURL(t)
	dest := newSink(t, 0)
	extra := "admin_token: " + hostileToken
	twoSources := serveConfig("127.0.0.1:0", dbURL, "http://127.0.0.1:9/unreachable", extra, "") + fmt.Sprintf(`  - name: gone
    provider: stripe
    secrets: [%q]
    lease: 3s
    destination: {url: "http://127.0.0.1:9/unreachable", timeout: 1s, max_attempts: 5, backoff: {min: 1h, max: 1h}}
`, stripeSecret)
	// Ingest only: the events and their jobs exist before any worker runs.
	in := startApp(t, twoSources, app.Options{Role: app.RoleIngest})
	require.Equal(t, http.StatusOK, postEvent(testClient, in.url(0), "gone", "evt_orphan", stripeSecret).Status)
	require.Equal(t, http.StatusOK, postEvent(testClient, in.url(0), "s", "evt_will_blank", stripeSecret).Status)
	in.stop(t)

	pool := connect(t, dbURL)
	ctx := context.Background()
	// As an older release stored it: a blank id, with its job.
	_, err := pool.Exec(ctx, `WITH e AS (UPDATE hookline_events SET event_id = '   ' WHERE event_id = 'evt_will_blank'),
		r AS (UPDATE hookline_event_destinations SET event_id = '   ' WHERE event_id = 'evt_will_blank')
		UPDATE river_job SET args = jsonb_set(args, '{event_id}', '"   "') WHERE args->>'event_id' = 'evt_will_blank'`)
	require.NoError(t, err)
	// The ingest instance stopped, and with it the last instance that
	// configured "gone": its event goes dead within seconds of the next
	// instance's start, not after a rolling deploy's grace.
	ip := startApp(t, serveConfig("127.0.0.1:0", dbURL, dest.URL, extra, ""), app.Options{})
	for _, ev := range []struct{ source, id, errPart string }{
		{"s", "   ", "blank"},
		{"gone", "evt_orphan", "not configured"},
	} {
		var state, lastErr string
		var dead int
		require.Eventually(t, func() bool {
			return pool.QueryRow(ctx, `SELECT e.state, COALESCE(e.last_error, ''),
				(SELECT count(*) FROM hookline_dead d WHERE d.source = e.source AND d.event_id = e.event_id AND d.reason = 'failed')
				FROM hookline_event_destinations e WHERE e.source = $1 AND e.event_id = $2`, ev.source, ev.id).Scan(&state, &lastErr, &dead) == nil &&
				state == "dead" && dead == 1
		}, 60*time.Second, 100*time.Millisecond, "%s/%q ends dead (now %s, %d dead items)", ev.source, ev.id, state, dead)
		require.Contains(t, lastErr, ev.errPart)
		var active int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE args->>'event_id' = $1
			AND state NOT IN ('completed', 'cancelled', 'discarded')`, ev.id).Scan(&active))
		require.Zero(t, active, "no job left running or snoozing")
	}
	if code, _ := adminGet(t, ip.url(0), "/admin/events/gone/evt_orphan"); code != http.StatusOK {
		t.Fatalf("the orphan's lookup answers %d", code)
	}
}

// A source removed from the configuration while the last instance that
// had it was killed (its record neither renewed nor stopped): the killed
// instance's record keeps the source's queue for a restart, but no longer
// than its events' own bound, max_attempts × (timeout + backoff.max) +
// lease + 60 s, which that record carries (67 s here).
func TestKilledInstancesQueueKeptNoLongerThanItsBound(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewURL(t)
	extra := "admin_token: " + hostileToken
	withSmall := serveConfig("127.0.0.1:0", dbURL, "http://127.0.0.1:9/unreachable", extra, "") + fmt.Sprintf(`  - name: small
    provider: stripe
    secrets: [%q]
    lease: 3s
    destination: {url: "http://127.0.0.1:9/unreachable", timeout: 1s, max_attempts: 2, backoff: {min: 1s, max: 1s}}
`, stripeSecret)
	in := startApp(t, withSmall, app.Options{Role: app.RoleIngest})
	require.Equal(t, http.StatusOK, postEvent(testClient, in.url(0), "small", "evt_small", stripeSecret).Status)
	in.stop(t)

	pool := connect(t, dbURL)
	ctx := context.Background()
	var bound int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT bounds[array_position(configures, $1)] FROM hookline_instances`,
		jobs.QueueFor("small", jobs.DefaultDestination)).Scan(&bound))
	// Each of the two attempts may wait the longest Retry-After honoured
	// (1 h) rather than backoff.max.
	require.Equal(t, (2*(time.Second+time.Hour) + 3*time.Second + time.Minute).Microseconds(), bound, "the record carries the queue's bound")
	// As if killed a minute ago, its event accepted a minute longer ago
	// than that bound.
	_, err := pool.Exec(ctx, `UPDATE hookline_instances SET stopped_at = NULL, seen_at = now() - interval '1 minute'`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE river_job SET created_at = now() - interval '1 minute' - $1::bigint * interval '1 microsecond' WHERE args->>'event_id' = 'evt_small'`, bound)
	require.NoError(t, err)

	startApp(t, serveConfig("127.0.0.1:0", dbURL, "http://127.0.0.1:9/unreachable", extra, ""), app.Options{})
	var state, lastErr string
	require.Eventually(t, func() bool {
		return pool.QueryRow(ctx, `SELECT state, COALESCE(last_error, '') FROM hookline_event_destinations WHERE event_id = 'evt_small'`).
			Scan(&state, &lastErr) == nil && state == "dead"
	}, 60*time.Second, 100*time.Millisecond, "the killed instance's queue is not kept past the bound (state %s)", state)
	require.Contains(t, lastErr, "not configured on any running instance")
}

// A destination answering 500 with a body Postgres cannot store as text
// (invalid UTF-8, NUL, a character cut at the excerpt's end) does not stall
// the event: each retry follows the backoff (100 ms - 1 s), not the lease
// (60 s), and the event is dead after its three attempts with a readable
// last error.
func TestGarbageErrorBodiesKeepTheBackoff(t *testing.T) {
	t.Parallel()
	bodies := [][]byte{
		[]byte("bad \xff\xfe utf-8"),
		[]byte("nul \x00 inside"),
		append([]byte("a"), bytes.Repeat([]byte("é"), 300)...), // byte 512 cuts an é in two
	}
	var calls atomic.Int32
	dest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		n := calls.Add(1)
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write(bodies[int(n-1)%len(bodies)])
	}))
	t.Cleanup(dest.Close)
	cfg := stripeConfig(pgtest.NewURL(t), "", fmt.Sprintf(`    lease: 60s
    destination: {url: %q, timeout: 2s, max_attempts: 3, backoff: {min: 100ms, max: 1s}}
`, dest.URL))
	ip := startApp(t, cfg, app.Options{})
	for i := range bodies {
		id := fmt.Sprintf("evt_garbage_%d", i)
		require.Equal(t, http.StatusOK, postEvent(testClient, ip.url(0), "s", id, stripeSecret).Status)
	}
	for i := range bodies {
		id := fmt.Sprintf("evt_garbage_%d", i)
		// Three attempts with backoff of at most 1 s end well inside one
		// lease (60 s); waiting on the lease once would take longer.
		ev := eventState(t, ip.url(0), "s", id, 30*time.Second, "dead")
		require.EqualValues(t, 3, ev["attempts"])
		item := deadItem(t, ip.url(0), "s", id)
		lastErr := item["last_error"].(string)
		require.True(t, utf8.ValidString(lastErr), "%q", lastErr)
		require.NotContains(t, lastErr, "\x00")
		require.Contains(t, lastErr, "500")
		require.LessOrEqual(t, len(lastErr), 1000)
	}
}

// The forwarder never follows a redirect: a 302 (to a body-less GET) or 307
// (the signed body re-sent to Location) is a failed attempt naming the
// Location, and the redirect's target never hears of the event.
func TestRedirectsAreNotDeliveries(t *testing.T) {
	t.Parallel()
	var targetHits atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		targetHits.Add(1)
	}))
	t.Cleanup(target.Close)
	for _, code := range []int{http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			t.Parallel()
			dest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				http.Redirect(w, r, target.URL+"/elsewhere", code)
			}))
			t.Cleanup(dest.Close)
			cfg := strings.Replace(serveConfig("127.0.0.1:0", pgtest.NewURL(t), dest.URL, "admin_token: "+hostileToken, ""),
				"max_attempts: 5", "max_attempts: 2", 1)
			ip := startApp(t, cfg, app.Options{})
			require.Equal(t, http.StatusOK, postEvent(testClient, ip.url(0), "s", "evt_redirected", stripeSecret).Status)
			eventState(t, ip.url(0), "s", "evt_redirected", 30*time.Second, "dead")
			lastErr := deadItem(t, ip.url(0), "s", "evt_redirected")["last_error"].(string)
			require.Contains(t, lastErr, fmt.Sprint(code))
			require.Contains(t, lastErr, target.URL+"/elsewhere", "the last error names Location")
		})
	}
	t.Cleanup(func() { require.Zero(t, targetHits.Load(), "a redirect target was called") })
}

// signed builds a delivery for a provider with its own signer.
func signed(t *testing.T, provider, secret string, u *url.URL, body []byte, header ...string) *providers.Request {
	t.Helper()
	p, err := providers.New(provider, providers.Config{Source: "x", Secrets: []string{secret}})
	require.NoError(t, err)
	r := &providers.Request{Body: body, Header: http.Header{}, URL: u}
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	require.NoError(t, p.(providers.Signer).Sign(r, time.Now()))
	return r
}

// A captured delivery whose event id comes from a header the signature does
// not cover, replayed with a fresh id, is a duplicate of the event it
// replays: it is not stored or forwarded again.
func TestReplayWithFreshUnsignedID(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewURL(t)
	dest := newSink(t, 0)
	const secret = "replay-secret"
	cfg := fmt.Sprintf("listen: 127.0.0.1:0\ndatabase_url: %q\nadmin_token: %s\nsources:\n", dbURL, hostileToken)
	for _, name := range []string{"github", "shopify", "razorpay", "twilio"} {
		cfg += fmt.Sprintf("  - {name: %s, provider: %s, secrets: [%q], destination: {url: %q}}\n", name, name, secret, dest.URL)
	}
	ip := startApp(t, cfg, app.Options{})
	base, err := url.Parse(ip.url(0))
	require.NoError(t, err)
	cases := []struct {
		source   string
		body     []byte
		idHeader string
		header   []string
	}{
		{"github", []byte(`{"zen":"Keep it logically awesome.","hook_id":7}`), "X-GitHub-Delivery",
			[]string{"Content-Type", "application/json", "X-GitHub-Event", "ping", "X-GitHub-Hook-ID", "7"}},
		{"shopify", []byte(`{"id":820982911946154508,"email":"jon@example.com"}`), "X-Shopify-Event-Id",
			[]string{"Content-Type", "application/json", "X-Shopify-Topic", "orders/create"}},
		{"razorpay", []byte(`{"entity":"event","event":"payment.captured","payload":{"payment":{"entity":{"id":"pay_1"}}}}`), "X-Razorpay-Event-Id",
			[]string{"Content-Type", "application/json"}},
		{"twilio", []byte("AccountSid=AC1&MessageSid=SM1&MessageStatus=delivered"), "I-Twilio-Idempotency-Token",
			[]string{"Content-Type", "application/x-www-form-urlencoded"}},
	}
	for _, tc := range cases {
		u := *base
		u.Path = "/webhooks/" + tc.source
		r := signed(t, tc.source, secret, &u, tc.body, append(tc.header, tc.idHeader, "original-id")...)
		send := func(id string) answer {
			h := []string{}
			for k, vs := range r.Header {
				h = append(h, k, vs[0])
			}
			h = append(h, tc.idHeader, id)
			return postRaw(t, u.String(), r.Body, h...)
		}
		first := send("original-id")
		require.Equal(t, http.StatusOK, first.Status, "%s: %s", tc.source, first.Body)
		require.Contains(t, first.Body, `"accepted"`, tc.source)
		for i := range 3 {
			again := send(fmt.Sprintf("fresh-id-%d", i))
			require.Equal(t, http.StatusOK, again.Status, "%s: %s", tc.source, again.Body)
			require.Contains(t, again.Body, `"duplicate"`, "%s: a replay under a fresh id", tc.source)
		}
	}
	require.Eventually(t, func() bool {
		dest.mu.Lock()
		defer dest.mu.Unlock()
		return len(dest.headers) == len(cases)
	}, 30*time.Second, 50*time.Millisecond)
	pool := connect(t, dbURL)
	noJobLeft(t, pool)
	dest.mu.Lock()
	defer dest.mu.Unlock()
	require.Len(t, dest.headers, len(cases), "one forward per original delivery, none for the replays")
	var events int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM hookline_events`).Scan(&events))
	require.Equal(t, len(cases), events)
}

// With on_duplicate: reject, a replay under a fresh unsigned id is dead-set
// as a duplicate of the event it replays: retrying the item runs that event
// again (its Idempotency-Key), never a second event made of the same
// content under the replay's id.
func TestRejectedReplayNamesTheEventItReplays(t *testing.T) {
	t.Parallel()
	dest := newSink(t, 0)
	const secret = "replay-secret"
	cfg := fmt.Sprintf("listen: 127.0.0.1:0\ndatabase_url: %q\nadmin_token: %s\nsources:\n"+
		"  - {name: shop, provider: shopify, secrets: [%q], on_duplicate: reject, destination: {url: %q}}\n",
		pgtest.NewURL(t), hostileToken, secret, dest.URL)
	ip := startApp(t, cfg, app.Options{})
	u, err := url.Parse(ip.url(0) + "/webhooks/shop")
	require.NoError(t, err)
	body := []byte(`{"id":820982911946154508,"email":"jon@example.com"}`)
	r := signed(t, "shopify", secret, u, body, "Content-Type", "application/json", "X-Shopify-Topic", "orders/create")
	send := func(id string) answer {
		h := []string{"X-Shopify-Event-Id", id}
		for k, vs := range r.Header {
			h = append(h, k, vs[0])
		}
		return postRaw(t, u.String(), body, h...)
	}
	require.Contains(t, send("original-id").Body, `"accepted"`)
	eventState(t, ip.url(0), "shop", "original-id", 30*time.Second, "completed")
	require.Contains(t, send("fresh-id").Body, `"duplicate"`)

	item := deadItem(t, ip.url(0), "shop", "original-id")
	require.Equal(t, "duplicate", item["reason"])
	code, body2 := adminPost(t, ip.url(0), "/admin/dead/"+item["id"].(string)+"/retry")
	require.Equal(t, http.StatusAccepted, code, body2)
	require.Eventually(t, func() bool { dest.mu.Lock(); defer dest.mu.Unlock(); return len(dest.headers) == 2 }, 30*time.Second, 50*time.Millisecond)
	noJobLeft(t, ip.app.Pool)
	dest.mu.Lock()
	defer dest.mu.Unlock()
	for _, h := range dest.headers {
		require.Equal(t, "shop:original-id", h.Get("Idempotency-Key"), "the retry runs the event the replay duplicated")
	}
	code, _ = adminGet(t, ip.url(0), "/admin/events/shop/fresh-id")
	require.Equal(t, http.StatusNotFound, code, "no event is made of the replay's id")
}

// Hundreds of senders that announce 1 MiB bodies and send a byte a second
// neither exhaust the body budget nor delay anyone else: a normal delivery
// to any source is answered 200 within 5 s, and each slow body is cut off
// with 408 once ingest.body_timeout (10 s by default) has passed.
func TestSlowBodiesDoNotStarveOthers(t *testing.T) {
	t.Parallel()
	const slowClients = 300
	cfg := serveConfig("127.0.0.1:0", pgtest.NewURL(t), "http://127.0.0.1:9/x", "", "") + fmt.Sprintf(`  - name: other
    provider: stripe
    secrets: [%q]
    destination: {url: "http://127.0.0.1:9/x"}
`, stripeSecret)
	// Requests reaching ingest's router are counted, so that the test knows
	// when every slow body is being read.
	var entered atomic.Int32
	allIn := make(chan struct{})
	ip := startApp(t, cfg, app.Options{Mount: func(s *ingest.Server) {
		s.Echo().Use(func(next echo.HandlerFunc) echo.HandlerFunc {
			return func(c echo.Context) error {
				if entered.Add(1) == slowClients {
					close(allIn)
				}
				return next(c)
			}
		})
	}})
	addr := ip.addrs[0].String()

	conns := make([]net.Conn, 0, slowClients)
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	for range slowClients {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		conns = append(conns, c)
		_, err = fmt.Fprintf(c, "POST /webhooks/s HTTP/1.1\r\nHost: hookline\r\nContent-Type: application/json\r\nStripe-Signature: t=1,v1=00\r\nContent-Length: %d\r\n\r\n{", 1<<20)
		require.NoError(t, err)
	}
	stop := make(chan struct{})
	var trickle sync.WaitGroup
	trickle.Go(func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				for _, c := range conns {
					_, _ = c.Write([]byte(" "))
				}
			}
		}
	})
	defer func() { close(stop); trickle.Wait() }()
	select {
	case <-allIn: // every slow body is being read
	case <-time.After(30 * time.Second):
		t.Fatalf("only %d of %d slow requests reached ingest within 30s", entered.Load(), slowClients)
	}

	for i, source := range []string{"s", "other"} {
		a := postEvent(testClient, ip.url(0), source, fmt.Sprintf("evt_normal_%d", i), stripeSecret)
		require.NoError(t, a.Err)
		require.Equal(t, http.StatusOK, a.Status, a.Body)
		require.Less(t, a.Took, 5*time.Second, "a normal delivery waited behind the slow ones")
	}

	// The slow bodies end with 408 after body_timeout (10 s).
	c := conns[0]
	require.NoError(t, c.SetReadDeadline(time.Now().Add(30*time.Second)))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusRequestTimeout, resp.StatusCode)
	b, _ := io.ReadAll(resp.Body)
	require.Contains(t, string(b), "ingest.body_timeout")
}

// After the destination answered 2xx the event never goes to the dead set,
// even when recording the completion fails on the last attempt: it is
// forwarded again (at-least-once) and completes.
func TestCompletionFailureAfter2xxIsNotDead(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewURL(t)
	dest := newSink(t, 0)
	cfg := strings.Replace(serveConfig("127.0.0.1:0", dbURL, dest.URL, "admin_token: "+hostileToken, ""), "max_attempts: 5", "max_attempts: 1", 1)
	ip := startApp(t, cfg, app.Options{})
	// Recording the first attempt's completion fails, as if the database had
	// gone away at that moment: in its batch, and in the statement of its own
	// the job falls back to.
	pool := connect(t, dbURL)
	_, err := pool.Exec(context.Background(), `CREATE FUNCTION fail_first_completion() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			RAISE EXCEPTION 'injected: completion could not be recorded';
		END $$;
		CREATE TRIGGER fail_first_completion BEFORE UPDATE ON hookline_event_destinations
			FOR EACH ROW WHEN (NEW.state = 'completed' AND NEW.attempts = 1) EXECUTE FUNCTION fail_first_completion();`)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, postEvent(testClient, ip.url(0), "s", "evt_final_2xx", stripeSecret).Status)
	ev := eventState(t, ip.url(0), "s", "evt_final_2xx", 60*time.Second, "completed", "dead")
	require.Equal(t, "completed", ev["state"], "a 2xx answer never dead-letters its event: %v", ev)
	require.Equal(t, 2, dest.got("s:evt_final_2xx"), "forwarded again after the lost completion")
}

// Headers that carry credentials are never stored, shown by the admin API,
// or forwarded: Authorization, Cookie, and the adapter's own (Xendit's
// X-Callback-Token, its only credential).
func TestCredentialsAreNotStored(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewURL(t)
	var mu sync.Mutex
	var forwarded []http.Header
	dest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		forwarded = append(forwarded, r.Header.Clone())
		mu.Unlock()
		w.WriteHeader(http.StatusInternalServerError) // dead after one attempt: the dead item shows its headers
	}))
	t.Cleanup(dest.Close)
	const token = "xnd-callback-token-SECRET"
	cfg := fmt.Sprintf(`listen: 127.0.0.1:0
database_url: %q
admin_token: %s
sources:
  - {name: x, provider: xendit, secrets: [%q], destination: {url: %q, max_attempts: 1}}
  - {name: s, provider: stripe, secrets: [%q], destination: {url: %q, max_attempts: 1}}
`, dbURL, hostileToken, token, dest.URL, stripeSecret, dest.URL)
	ip := startApp(t, cfg, app.Options{})
	a := postRaw(t, ip.url(0)+"/webhooks/x", []byte(`{"id":"inv_1","status":"PAID"}`), "Content-Type", "application/json",
		"X-Callback-Token", token, "Webhook-Id", "xnd_evt_1", "Authorization", "Basic c2VjcmV0", "Cookie", "session=SECRET")
	require.Equal(t, http.StatusOK, a.Status, a.Body)
	require.Equal(t, http.StatusOK, postEvent(testClient, ip.url(0), "s", "evt_cred", stripeSecret,
		"Authorization", "Bearer SECRET", "Cookie", "session=SECRET", "Proxy-Authorization", "Basic SECRET").Status)
	for _, ev := range [][2]string{{"x", "xnd_evt_1"}, {"s", "evt_cred"}} {
		eventState(t, ip.url(0), ev[0], ev[1], 30*time.Second, "dead")
		item := deadItem(t, ip.url(0), ev[0], ev[1])
		headers, _ := json.Marshal(item["headers"])
		require.NotContains(t, string(headers), "SECRET", "%s", headers)
		require.NotContains(t, strings.ToLower(string(headers)), "x-callback-token")
		require.Contains(t, string(headers), "Content-Type", "the other headers are kept")
	}
	pool := connect(t, dbURL)
	var stored int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM hookline_deliveries WHERE headers::text LIKE '%SECRET%'`).Scan(&stored))
	require.Zero(t, stored)
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, forwarded)
	for _, h := range forwarded {
		for k, v := range h {
			require.NotContains(t, strings.Join(v, ","), "SECRET", "forwarded header %s", k)
		}
	}
}

// /readyz says unavailable without the database's error text, and a flood
// of /metrics scrapes (50 scrapers against a pool of 4 connections) leaves
// ingest answering 200: the database metrics run one set of queries at a
// time and are reused.
func TestCheapProbes(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewURL(t)
	ip := startApp(t, serveConfig("127.0.0.1:0", dbURL, "http://127.0.0.1:9/x", "database: {max_conns: 4}", ""), app.Options{})
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var scrapes atomic.Int32
	for range 50 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if code, _, _ := get(ip.url(0) + "/metrics"); code == http.StatusOK {
					scrapes.Add(1)
				}
			}
		})
	}
	for i := range 20 {
		a := postEvent(testClient, ip.url(0), "s", fmt.Sprintf("evt_probe_%d", i), stripeSecret)
		require.Equal(t, http.StatusOK, a.Status, a.Body)
	}
	close(stop)
	wg.Wait()
	require.Positive(t, scrapes.Load())
	pool := connect(t, dbURL)

	// A readiness check that fails says so, and nothing about the database.
	cfg := serveConfig("127.0.0.1:0", dbURL, "http://127.0.0.1:9/x", "", "")
	ip2 := startApp(t, cfg, app.Options{NoMigrate: true})
	_, err := pool.Exec(context.Background(), `ALTER TABLE hookline_migration RENAME TO hookline_migration_away`)
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = pool.Exec(context.Background(), `ALTER TABLE hookline_migration_away RENAME TO hookline_migration`)
	})
	code, _, body := get(ip2.url(0) + "/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code, body)
	require.JSONEq(t, `{"status":"unavailable"}`, body)
}

// With admin_listen and metrics_on_admin, /metrics is served on the admin
// listener only.
func TestMetricsOnAdmin(t *testing.T) {
	t.Parallel()
	ip := startApp(t, serveConfig("127.0.0.1:0", pgtest.NewURL(t), "http://127.0.0.1:9/x",
		"admin_token: "+hostileToken+"\nadmin_listen: 127.0.0.1:0\nmetrics_on_admin: true", ""), app.Options{})
	code, _, _ := get(ip.url(0) + "/metrics")
	require.Equal(t, http.StatusNotFound, code)
	code, _, body := get(ip.url(1) + "/metrics")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "hookline_queue_jobs")
}

// A body that must be parsed before its signature can be checked (Adyen's
// items carry their own HMACs) is refused beyond 64 levels of nesting.
func TestDeepJSONBeforeVerification(t *testing.T) {
	t.Parallel()
	cfg := fmt.Sprintf(`listen: 127.0.0.1:0
database_url: %q
sources:
  - {name: adyen, provider: adyen, secrets: ["44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056"], destination: {url: "http://127.0.0.1:9/x"}}
`, pgtest.NewURL(t))
	ip := startApp(t, cfg, app.Options{})
	deep := `{"live":"false","notificationItems":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`
	a := postRaw(t, ip.url(0)+"/webhooks/adyen", []byte(deep), "Content-Type", "application/json")
	require.Equal(t, http.StatusBadRequest, a.Status, a.Body)
	require.Contains(t, a.Body, "64")
}

// Instances serving different sources on one database leave each other's
// events alone: an event of the source only instance A serves, accepted
// an hour ago (as far as River knows) and waiting out its backoff, is not
// dead-lettered by instance B's orphan sweeps, which see A's live record.
// Once A stops cleanly and nobody configures the source any more, the event
// goes dead within seconds.
func TestInstancesWithDifferentSourcesKeepEachOthersEvents(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewURL(t)
	onlyA := serveConfig("127.0.0.1:0", dbURL, "http://127.0.0.1:9/unreachable", "", "")
	onlyA = strings.Replace(onlyA, "backoff: {min: 100ms, max: 1s}", "backoff: {min: 1h, max: 1h}", 1)
	onlyB := strings.Replace(serveConfig("127.0.0.1:0", dbURL, "http://127.0.0.1:9/unreachable", "", ""), "  - name: s\n", "  - name: b\n", 1)
	a := startApp(t, onlyA, app.Options{})
	startApp(t, onlyB, app.Options{})
	require.Equal(t, http.StatusOK, postEvent(testClient, a.url(0), "s", "evt_kept", stripeSecret).Status)

	pool := connect(t, dbURL)
	ctx := context.Background()
	state := func() (st string, attempts int) {
		_ = pool.QueryRow(ctx, `SELECT state, attempts FROM hookline_event_destinations WHERE source = 's' AND event_id = 'evt_kept'`).Scan(&st, &attempts)
		return st, attempts
	}
	require.Eventually(t, func() bool { st, n := state(); return st == "queued" && n == 1 }, 30*time.Second, 50*time.Millisecond,
		"the first attempt fails and the event waits out its backoff")
	_, err := pool.Exec(ctx, `UPDATE river_job SET created_at = now() - interval '1 hour' WHERE args->>'event_id' = 'evt_kept'`)
	require.NoError(t, err)

	// Three orphan sweeps (every 10 s), run by either instance.
	time.Sleep(35 * time.Second) // a bounded wait for sweeps that must not act; nothing to poll for
	st, n := state()
	require.Equal(t, "queued", st, "B's sweeps leave A's event alone")
	require.Equal(t, 1, n)

	a.stop(t)
	require.Eventually(t, func() bool { st, _ := state(); return st == "dead" }, 45*time.Second, 100*time.Millisecond,
		"once no instance configures the source, its event goes dead")
	var lastErr string
	require.NoError(t, pool.QueryRow(ctx, `SELECT last_error FROM hookline_dead WHERE source = 's' AND event_id = 'evt_kept'`).Scan(&lastErr))
	require.Contains(t, lastErr, "not configured on any running instance")
}
