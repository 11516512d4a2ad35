package admin_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"
	stripewebhook "github.com/stripe/stripe-go/v82/webhook"

	"github.com/hookline/hookline/admin"
	"github.com/hookline/hookline/ingest"
	"github.com/hookline/hookline/internal/pgtest"
	"github.com/hookline/hookline/jobs"
	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/stripe"
)

const (
	adminToken  = "admin-test-token"
	adminSecret = "whsec_admin_test"
)

type adminBundle struct {
	pool   *pgxpool.Pool
	river  *river.Client[pgx.Tx]
	url    string
	server *ingest.Server
}

type adminOpts struct {
	// sources run on started River workers; none: an insert-only client
	// and one ingest source "s".
	sources []*jobs.Source
	token   string // default adminToken; "-" for none (closed)
	// reconcile is Config.Reconcile (nil: none).
	reconcile func(ctx context.Context, source string) (admin.ReconcileResult, error)
	// logger is the admin API's (nil: discarded).
	logger *slog.Logger
}

// adminSetup runs ingest (stripe-signed sources named like the worker
// sources, on_duplicate reject when the worker source rejects) with the admin
// API on the same router.
func adminSetup(t *testing.T, o adminOpts) *adminBundle {
	t.Helper()
	pool := pgtest.NewPool(t)
	logger := slog.New(slog.DiscardHandler)
	var rc *river.Client[pgx.Tx]
	var err error
	inSources := []*ingest.Source{}
	prov, err := stripe.New(providers.Config{Secrets: []string{adminSecret}})
	require.NoError(t, err)
	if len(o.sources) == 0 {
		rc, err = river.NewClient(riverpgxv5.New(pool), &river.Config{Logger: logger})
		require.NoError(t, err)
		inSources = append(inSources, &ingest.Source{Name: "s", Provider: prov, MaxAttempts: 3})
	} else {
		rc, err = jobs.NewClient(jobs.ClientConfig{Pool: pool, Sources: o.sources, Workers: 20, Logger: logger})
		require.NoError(t, err)
		require.NoError(t, rc.Start(context.Background()))
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = rc.Stop(ctx)
		})
		for _, s := range o.sources {
			onDup := ingest.OnDuplicateSkip
			if s.Reject {
				onDup = ingest.OnDuplicateReject
			}
			inSources = append(inSources, &ingest.Source{Name: s.Name, Provider: prov, MaxAttempts: s.MaxAttempts, OnDuplicate: onDup})
		}
	}
	srv, err := ingest.New(ingest.Config{Pool: pool, River: rc, IngestRoutes: true, Logger: logger, Sources: inSources})
	require.NoError(t, err)
	token := adminToken
	if o.token == "-" {
		token = ""
	} else if o.token != "" {
		token = o.token
	}
	maxAttempts := map[string]int{}
	for _, s := range inSources {
		maxAttempts[s.Name] = s.MaxAttempts
	}
	adminLogger := logger
	if o.logger != nil {
		adminLogger = o.logger
	}
	require.NoError(t, admin.Mount(srv.Echo(), admin.Config{Token: token, Pool: pool, River: rc, Logger: adminLogger, Context: t.Context(),
		MaxAttempts: func(source, _ string) (int, bool) { n, ok := maxAttempts[source]; return n, ok }, Reconcile: o.reconcile}))
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); srv.Close() })
	return &adminBundle{pool: pool, river: rc, url: hs.URL, server: srv}
}

// call makes an admin request with the right token; auth overrides the
// Authorization header ("" for none).
func (b *adminBundle) call(t testing.TB, method, path string, body any, auth ...string) (int, map[string]any) {
	t.Helper()
	status, raw := b.raw(t, method, path, body, auth...)
	var out map[string]any
	if len(raw) > 0 {
		require.NoError(t, json.Unmarshal(raw, &out), string(raw))
	}
	return status, out
}

func (b *adminBundle) raw(t testing.TB, method, path string, body any, auth ...string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		j, err := json.Marshal(body)
		require.NoError(t, err)
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, b.url+path, rd)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	if len(auth) > 0 {
		if auth[0] != "" {
			req.Header.Set("Authorization", auth[0])
		}
	} else {
		req.Header.Set("Authorization", "Bearer "+adminToken)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, raw
}

func (b *adminBundle) send(t testing.TB, source, id string) string {
	t.Helper()
	body := []byte(`{"id":"` + id + `","object":"event","type":"charge.succeeded","created":1764504000}`)
	sig := stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{Payload: body, Secret: adminSecret, Timestamp: time.Now()}).Header
	req, _ := http.NewRequest(http.MethodPost, b.url+"/webhooks/"+source, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Stripe-Signature", sig)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	require.Equal(t, http.StatusOK, resp.StatusCode, out)
	return out["status"].(string)
}

func (b *adminBundle) eventState(t testing.TB, source, id string) map[string]any {
	t.Helper()
	status, out := b.call(t, http.MethodGet, "/admin/events/"+source+"/"+id, nil)
	require.Equal(t, http.StatusOK, status, out)
	return out
}

func (b *adminBundle) waitEvent(t testing.TB, source, id, state string) map[string]any {
	t.Helper()
	var out map[string]any
	require.Eventually(t, func() bool { out = b.eventState(t, source, id); return out["state"] == state },
		30*time.Second, 20*time.Millisecond, "event %s/%s never reached %s", source, id, state)
	return out
}

func (b *adminBundle) deadCount(t testing.TB, where string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM hookline_dead WHERE `+where, args...).Scan(&n))
	return n
}

func (b *adminBundle) deadIDs(t testing.TB, where string, args ...any) []string {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), `SELECT id::text FROM hookline_dead WHERE `+where+` ORDER BY id`, args...)
	require.NoError(t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return ids
}

// insertDead inserts n bare dead items of source, reason failed; item i dies
// at base - (i/3) s, so items share timestamps three by three.
func insertDead(t testing.TB, pool *pgxpool.Pool, source string, n int, base time.Time) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `INSERT INTO hookline_dead (source, event_id, event_type, reason, attempts, last_error, dead_at, payload)
		SELECT $1, 'evt_' || i, 't', 'failed', 1, 'boom', $3::timestamptz - (i / 3) * interval '1 second', convert_to('{"id":"evt_' || i || '"}', 'UTF8')
		FROM generate_series(1, $2) i`, source, n, base)
	require.NoError(t, err)
}

// insertDeadEvents inserts n consistent dead events of source: a delivery,
// the event (state dead, one attempt spent) and its failed dead item.
func insertDeadEvents(t testing.TB, pool *pgxpool.Pool, source string, n int) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `WITH d AS (
			INSERT INTO hookline_deliveries (source, content_type, headers, body)
			SELECT $1, 'application/json', '{"Content-Type":["application/json"]}', convert_to('{"id":"evt_' || i || '","type":"t"}', 'UTF8')
			FROM generate_series(1, $2) i
			RETURNING id, convert_from(body, 'UTF8')::jsonb->>'id' AS eid, body),
		e AS (INSERT INTO hookline_events (source, event_id, event_type, delivery_id) SELECT $1, eid, 't', id FROM d),
		r AS (INSERT INTO hookline_event_destinations (source, event_id, destination, state, delivery_id, attempts, last_error)
			SELECT $1, eid, 'default', 'dead', id, 1, 'destination answered 500' FROM d)
		INSERT INTO hookline_dead (source, event_id, event_type, reason, attempts, last_error, delivery_id, content_type, headers, payload)
		SELECT $1, eid, 't', 'failed', 1, 'destination answered 500', id, 'application/json', '{"Content-Type":["application/json"]}', body FROM d`,
		source, n)
	require.NoError(t, err)
}

// recorder is a destination that answers 200 and records every call.
type recorder struct {
	mu       sync.Mutex
	calls    map[string]int      // by event id
	attempts map[string][]string // Hookline-Attempt by event id
	status   atomic.Int32
}

func newRecorder(t *testing.T) (*recorder, string) {
	rec := &recorder{calls: map[string]int{}, attempts: map[string][]string{}}
	rec.status.Store(http.StatusOK)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		id := r.Header.Get("Hookline-Event-Id")
		rec.mu.Lock()
		rec.calls[id]++
		rec.attempts[id] = append(rec.attempts[id], r.Header.Get("Hookline-Attempt"))
		rec.mu.Unlock()
		w.WriteHeader(int(rec.status.Load()))
	}))
	t.Cleanup(hs.Close)
	return rec, hs.URL
}

func (r *recorder) count(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[id]
}

func TestAdminAuth(t *testing.T) {
	t.Parallel()
	b := adminSetup(t, adminOpts{})
	routes := []struct{ method, path string }{
		{http.MethodGet, "/admin/dead"},
		{http.MethodGet, "/admin/dead/1"},
		{http.MethodPost, "/admin/dead/1/retry"},
		{http.MethodDelete, "/admin/dead/1"},
		{http.MethodPost, "/admin/dead/retry"},
		{http.MethodPost, "/admin/dead/delete"},
		{http.MethodGet, "/admin/events/s/evt_1"},
		{http.MethodGet, "/admin/river/"},
		{http.MethodGet, "/admin/nope"},
	}
	for _, r := range routes {
		for name, auth := range map[string]string{
			"none":        "",
			"wrong":       "Bearer wrong-token",
			"prefix":      "Bearer " + adminToken[:len(adminToken)-1],
			"longer":      "Bearer " + adminToken + "x",
			"no scheme":   adminToken,
			"basic wrong": "Basic " + base64.StdEncoding.EncodeToString([]byte("admin:nope")),
		} {
			status, out := b.call(t, r.method, r.path, nil, auth)
			require.Equal(t, http.StatusUnauthorized, status, "%s %s with %s", r.method, r.path, name)
			require.Equal(t, map[string]any{"error": "unauthorized"}, out, "no detail")
		}
	}
	status, out := b.call(t, http.MethodGet, "/admin/dead", nil)
	require.Equal(t, http.StatusOK, status, out)
	status, _ = b.call(t, http.MethodGet, "/admin/dead", nil, "bearer "+adminToken)
	require.Equal(t, http.StatusOK, status, "the scheme is case-insensitive")
	status, out = b.call(t, http.MethodGet, "/admin/nope", nil)
	require.Equal(t, http.StatusNotFound, status)
	require.NotEmpty(t, out["error"])
	// Basic is for the River UI only (browsers); the API wants Bearer.
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("admin:"+adminToken))
	status, _ = b.call(t, http.MethodGet, "/admin/dead", nil, basic)
	require.Equal(t, http.StatusUnauthorized, status)
}

func TestAdminClosedWithoutToken(t *testing.T) {
	t.Parallel()
	b := adminSetup(t, adminOpts{token: "-"})
	insertDead(t, b.pool, "s", 3, time.Now())
	for _, r := range []struct{ method, path string }{
		{http.MethodGet, "/admin/dead"},
		{http.MethodGet, "/admin/dead/1"},
		{http.MethodPost, "/admin/dead/1/retry"},
		{http.MethodDelete, "/admin/dead/1"},
		{http.MethodPost, "/admin/dead/retry"},
		{http.MethodPost, "/admin/dead/delete"},
		{http.MethodGet, "/admin/events/s/evt_1"},
		{http.MethodGet, "/admin/river/"},
		{http.MethodGet, "/admin"},
	} {
		for _, auth := range []string{"", "Bearer ", "Bearer " + adminToken} {
			status, _ := b.call(t, r.method, r.path, nil, auth)
			require.Equal(t, http.StatusNotFound, status, "%s %s", r.method, r.path)
		}
	}
	require.Equal(t, 3, b.deadCount(t, "true"), "nothing was touched")
}

type page struct {
	Items []struct {
		ID        string    `json:"id"`
		Source    string    `json:"source"`
		EventID   string    `json:"event_id"`
		EventType string    `json:"event_type"`
		Reason    string    `json:"reason"`
		Attempts  int       `json:"attempts"`
		LastError string    `json:"last_error"`
		DeadAt    time.Time `json:"dead_at"`
	} `json:"items"`
	NextCursor *string `json:"next_cursor"`
}

func (b *adminBundle) page(t testing.TB, query string) page {
	t.Helper()
	status, raw := b.raw(t, http.MethodGet, "/admin/dead?"+query, nil)
	require.Equal(t, http.StatusOK, status, string(raw))
	var p page
	require.NoError(t, json.Unmarshal(raw, &p))
	return p
}

func TestAdminDeadListPagination(t *testing.T) {
	t.Parallel()
	b := adminSetup(t, adminOpts{})
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	insertDead(t, b.pool, "s", 1000, base)
	original := b.deadIDs(t, "true")
	require.Len(t, original, 1000)

	seen, pages := b.pageAllWhileInserting(t, base)
	require.Greater(t, pages, 1000/37)
	for _, id := range original {
		require.Equal(t, 1, seen[id], "item %s seen %d times", id, seen[id])
	}
	for id, n := range seen {
		require.Equal(t, 1, n, "item %s repeated", id)
	}

	t.Run("LimitDefaultAndClamp", func(t *testing.T) { testListLimit(t, b) })
	t.Run("BadParameters400", func(t *testing.T) { testListBadParameters(t, b) })
	t.Run("Filters", func(t *testing.T) { testListFilters(t, b, base) })
}

// pageAllWhileInserting pages through GET /admin/dead, 37 items a page,
// checking the order, while items keep arriving: some newer than every
// page, some among the pages already read, some among those to come (dead
// around base). It returns how often each id was seen, and the pages read.
func (b *adminBundle) pageAllWhileInserting(t *testing.T, base time.Time) (seen map[string]int, pages int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	insert := func(ctx context.Context, n int) error {
		for range n {
			at := base.Add(-time.Duration(rand.IntN(400)) * time.Second)
			if rand.IntN(4) == 0 {
				at = time.Now()
			}
			if _, err := b.pool.Exec(ctx, `INSERT INTO hookline_dead (source, event_id, reason, dead_at, payload)
				VALUES ('s', 'late', 'failed', $1, '\x00')`, at); err != nil {
				return err
			}
		}
		return nil
	}
	wg.Go(func() {
		for ctx.Err() == nil {
			_ = insert(ctx, 1)
		}
	})

	seen = map[string]int{}
	var last struct {
		at time.Time
		id int64
	}
	cursor := ""
	for {
		q := "limit=37"
		if cursor != "" {
			q += "&cursor=" + cursor
		}
		p := b.page(t, q)
		pages++
		require.LessOrEqual(t, len(p.Items), 37)
		for _, it := range p.Items {
			seen[it.ID]++
			id, err := strconv.ParseInt(it.ID, 10, 64)
			require.NoError(t, err)
			if last.id != 0 {
				require.True(t, it.DeadAt.Before(last.at) || (it.DeadAt.Equal(last.at) && id < last.id),
					"newest first by (dead_at, id): %v/%d after %v/%d", it.DeadAt, id, last.at, last.id)
			}
			last.at, last.id = it.DeadAt, id
		}
		require.NoError(t, insert(context.Background(), 5))
		if p.NextCursor == nil || *p.NextCursor == "" {
			break
		}
		cursor = *p.NextCursor
	}
	cancel()
	wg.Wait()
	return seen, pages
}

func testListLimit(t *testing.T, b *adminBundle) {
	require.Len(t, b.page(t, "").Items, admin.DefaultAdminLimit)
	require.Len(t, b.page(t, "limit=1000").Items, admin.MaxAdminLimit)
	require.Len(t, b.page(t, "limit=500").Items, 500)
	require.Len(t, b.page(t, "limit=99999999999999999999").Items, admin.MaxAdminLimit, "too large for an int: clamped like any other")
}

func testListBadParameters(t *testing.T, b *adminBundle) {
	for q, param := range map[string]string{
		"cursor=!!!":              "cursor",
		"cursor=bm9wZQ":           "cursor", // "nope"
		"cursor=" + b64("v1.x.3"): "cursor",
		"cursor=" + b64("v1.1.0"): "cursor",
		// A time no cursor holds (it would overflow on its way to
		// Postgres and page from the newest item).
		"cursor=" + b64("v1.-9223372036854775808.3"): "cursor",
		"cursor=" + b64("v1.9223372036854775807.3"):  "cursor",
		"limit=abc":                   "limit",
		"limit=0":                     "limit",
		"limit=-3":                    "limit",
		"limit=-99999999999999999999": "limit",
		"limit=1e9":                   "limit",
		"reason=bogus":                "reason",
		"since=yesterday":             "since",
		"until=2026-13-01T00:00:00Z":  "until",
		"since=2026-02-01T00:00:00Z&until=2026-01-01T00:00:00Z": "since",
		// A misspelt or repeated filter is named, never an unfiltered page.
		"destinaton=billing": "destinaton: unknown query parameter",
		"sorce=stripe":       "sorce: unknown query parameter",
		"limit=500&limit=1":  "limit: given more than once",
		"source=a&source=b":  "source: given more than once",
	} {
		status, out := b.call(t, http.MethodGet, "/admin/dead?"+q, nil)
		require.Equal(t, http.StatusBadRequest, status, q)
		require.Contains(t, out["error"], param, q)
	}
}

func testListFilters(t *testing.T, b *adminBundle, base time.Time) {
	insertDead(t, b.pool, "other", 4, base)
	_, err := b.pool.Exec(context.Background(), `UPDATE hookline_dead SET reason = 'duplicate', event_type = 'dup.type' WHERE source = 'other' AND event_id IN ('evt_1', 'evt_2')`)
	require.NoError(t, err)
	p := b.page(t, "source=other")
	require.Len(t, p.Items, 4)
	require.Nil(t, p.NextCursor)
	require.Len(t, b.page(t, "source=other&reason=duplicate").Items, 2)
	require.Len(t, b.page(t, "event_type=dup.type").Items, 2)
	// evt_1..evt_4 die at base, base, base-1s, base-1s.
	since := base.Format(time.RFC3339)
	require.Len(t, b.page(t, "source=other&since="+since).Items, 2)
	require.Len(t, b.page(t, "source=other&until="+since).Items, 2)
	require.Empty(t, b.page(t, "source=nobody").Items)
	require.Equal(t, "[]", string(mustRaw(t, b, "/admin/dead?source=nobody", "items")), "an empty page is [], not null")
}

func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

func mustRaw(t testing.TB, b *adminBundle, path, field string) json.RawMessage {
	status, raw := b.raw(t, http.MethodGet, path, nil)
	require.Equal(t, http.StatusOK, status)
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(raw, &m))
	return m[field]
}

// The JSON API's answers (payloads, headers, errors) are never cached:
// Cache-Control: no-store on every route, answered or refused.
func TestAdminAnswersAreNotCached(t *testing.T) {
	t.Parallel()
	b := adminSetup(t, adminOpts{})
	insertDeadEvents(t, b.pool, "s", 1)
	id := b.deadIDs(t, "true")[0]
	for _, r := range []struct {
		path, auth string
		status     int
	}{
		{"/admin/dead/" + id, "Bearer " + adminToken, http.StatusOK},
		{"/admin/dead", "Bearer " + adminToken, http.StatusOK},
		{"/admin/events/s/evt_1", "Bearer " + adminToken, http.StatusOK},
		{"/admin/events?source=s", "Bearer " + adminToken, http.StatusOK},
		{"/admin/destinations", "Bearer " + adminToken, http.StatusOK},
		{"/admin/dead/" + id, "Bearer wrong", http.StatusUnauthorized},
		{"/admin/nope", "Bearer " + adminToken, http.StatusNotFound},
	} {
		req, err := http.NewRequest(http.MethodGet, b.url+r.path, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", r.auth)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		require.Equal(t, r.status, resp.StatusCode, r.path)
		require.Equal(t, "no-store", resp.Header.Get("Cache-Control"), "%s (%s)", r.path, r.auth)
		if r.status == http.StatusUnauthorized {
			// RFC 9110: a 401 names the scheme it wants.
			require.Equal(t, `Bearer realm="hookline admin"`, resp.Header.Get("WWW-Authenticate"), r.path)
		}
	}
}

func TestAdminShowAndDelete(t *testing.T) {
	t.Parallel()
	b := adminSetup(t, adminOpts{})
	insertDeadEvents(t, b.pool, "s", 2)
	ids := b.deadIDs(t, "true")

	status, out := b.call(t, http.MethodGet, "/admin/dead/"+ids[0], nil)
	require.Equal(t, http.StatusOK, status, out)
	require.Equal(t, ids[0], out["id"])
	require.Equal(t, "s", out["source"])
	require.Equal(t, "evt_1", out["event_id"])
	require.Equal(t, "t", out["event_type"])
	require.Equal(t, "failed", out["reason"])
	require.EqualValues(t, 1, out["attempts"])
	require.Equal(t, "destination answered 500", out["last_error"])
	require.Equal(t, `{"id":"evt_1","type":"t"}`, out["payload"])
	require.Equal(t, "application/json", out["content_type"])
	require.Equal(t, map[string]any{"Content-Type": []any{"application/json"}}, out["headers"])
	_, err := time.Parse(time.RFC3339, out["dead_at"].(string))
	require.NoError(t, err)

	// A payload that is not UTF-8 comes back as base64, marked.
	_, err = b.pool.Exec(context.Background(), `UPDATE hookline_dead SET payload = '\xff00fe' WHERE id = $1`, ids[1])
	require.NoError(t, err)
	_, out = b.call(t, http.MethodGet, "/admin/dead/"+ids[1], nil)
	require.Equal(t, "base64", out["payload_encoding"])
	require.Equal(t, base64.StdEncoding.EncodeToString([]byte{0xff, 0x00, 0xfe}), out["payload"])

	for _, id := range []string{"999999", "abc", "0", "-1", "1.5"} {
		status, out = b.call(t, http.MethodGet, "/admin/dead/"+id, nil)
		require.Equal(t, http.StatusNotFound, status, id)
		require.NotEmpty(t, out["error"])
		status, _ = b.call(t, http.MethodPost, "/admin/dead/"+id+"/retry", nil)
		require.Equal(t, http.StatusNotFound, status, id)
		status, _ = b.call(t, http.MethodDelete, "/admin/dead/"+id, nil)
		require.Equal(t, http.StatusNotFound, status, id)
	}

	status, raw := b.raw(t, http.MethodDelete, "/admin/dead/"+ids[0], nil)
	require.Equal(t, http.StatusNoContent, status)
	require.Empty(t, raw)
	status, _ = b.call(t, http.MethodDelete, "/admin/dead/"+ids[0], nil)
	require.Equal(t, http.StatusNotFound, status)
	status, _ = b.call(t, http.MethodGet, "/admin/dead/"+ids[0], nil)
	require.Equal(t, http.StatusNotFound, status)
	status, _ = b.call(t, http.MethodPost, "/admin/dead/"+ids[0]+"/retry", nil)
	require.Equal(t, http.StatusNotFound, status)
	require.Equal(t, 1, b.deadCount(t, "true"))
}

func TestAdminBulkRetryOf500FailedItems(t *testing.T) {
	t.Parallel()
	rec, dest := newRecorder(t)
	b := adminSetup(t, adminOpts{sources: []*jobs.Source{{Name: "s", MaxAttempts: 3, Destination: &jobs.Destination{URL: dest}}}})
	insertDeadEvents(t, b.pool, "s", 500)
	insertDead(t, b.pool, "gone", 7, time.Now()) // a source no longer configured

	status, out := b.call(t, http.MethodPost, "/admin/dead/retry", map[string]any{"source": "s", "dry_run": true})
	require.Equal(t, http.StatusOK, status, out)
	require.EqualValues(t, 500, out["matched"])
	require.Nil(t, out["retried"])
	require.Equal(t, 507, b.deadCount(t, "true"), "a dry run changes nothing")

	status, out = b.call(t, http.MethodPost, "/admin/dead/retry", map[string]any{"source": "s", "reason": "failed"})
	require.Equal(t, http.StatusOK, status, out)
	require.EqualValues(t, 500, out["matched"])
	require.EqualValues(t, 500, out["retried"])
	require.Equal(t, 7, b.deadCount(t, "true"), "the retried items left the dead set at once")

	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM hookline_event_states WHERE source = 's' AND state = 'completed'`).Scan(&n))
		return n == 500
	}, 60*time.Second, 50*time.Millisecond)
	require.Zero(t, b.deadCount(t, "source = 's'"))
	for i := 1; i <= 500; i++ {
		id := "evt_" + strconv.Itoa(i)
		require.Equal(t, 1, rec.count(id), id)
	}
	ev := b.eventState(t, "s", "evt_42")
	require.Equal(t, "completed", ev["state"])
	require.EqualValues(t, 2, ev["attempts"], "attempts keep counting across an operator retry")
	require.NotNil(t, ev["completed_at"])
	require.Nil(t, ev["dead_item_id"])
	rec.mu.Lock()
	require.Equal(t, []string{"2"}, rec.attempts["evt_42"])
	rec.mu.Unlock()

	// Items of a source not configured here are skipped, not lost.
	status, out = b.call(t, http.MethodPost, "/admin/dead/retry", map[string]any{})
	require.Equal(t, http.StatusOK, status, out)
	require.EqualValues(t, 7, out["matched"])
	require.EqualValues(t, 0, out["retried"])
	require.EqualValues(t, 7, out["skipped"])
	status, out = b.call(t, http.MethodPost, "/admin/dead/"+b.deadIDs(t, "true")[0]+"/retry", nil)
	require.Equal(t, http.StatusConflict, status)
	require.Contains(t, out["error"], "gone")
	require.Equal(t, 7, b.deadCount(t, "true"))
}

func TestAdminBulkDelete(t *testing.T) {
	t.Parallel()
	b := adminSetup(t, adminOpts{})
	insertDead(t, b.pool, "a", 250, time.Now())
	insertDead(t, b.pool, "b", 50, time.Now())

	for _, body := range []string{`{"sorce":"a"}`, `{"source":1}`, `[`, `{"reason":"x"}`, `{"since":"now"}`} {
		req, _ := http.NewRequest(http.MethodPost, b.url+"/admin/dead/delete", bytes.NewReader([]byte(body)))
		req.Header.Set("Authorization", "Bearer "+adminToken)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, body)
	}
	require.Equal(t, 300, b.deadCount(t, "true"), "a bad filter never widens to everything")

	status, out := b.call(t, http.MethodPost, "/admin/dead/delete", map[string]any{"source": "a", "dry_run": true})
	require.Equal(t, http.StatusOK, status, out)
	require.Equal(t, map[string]any{"matched": 250.0, "dry_run": true}, out)
	status, out = b.call(t, http.MethodPost, "/admin/dead/delete", map[string]any{"source": "a"})
	require.Equal(t, http.StatusOK, status, out)
	require.Equal(t, map[string]any{"matched": 250.0, "deleted": 250.0}, out)
	require.Equal(t, 50, b.deadCount(t, "true"))
	require.Equal(t, 50, b.deadCount(t, "source = 'b'"))

	// No body is refused; the empty filter {} is the whole dead set.
	status, out = b.call(t, http.MethodPost, "/admin/dead/delete", nil)
	require.Equal(t, http.StatusBadRequest, status, out)
	require.Equal(t, 50, b.deadCount(t, "true"))
	status, out = b.call(t, http.MethodPost, "/admin/dead/delete", map[string]any{})
	require.Equal(t, http.StatusOK, status, out)
	require.Equal(t, map[string]any{"matched": 50.0, "deleted": 50.0}, out)
	require.Zero(t, b.deadCount(t, "true"))
}

// A duplicate job for a completed event is waiting (scheduled); an operator
// retry cannot insert a second job (River's unique insert), so it joins the
// waiting one — the failure mode of riverqueue/riverui#622 — and the event is
// processed again all the same.
func TestAdminRetryJoinsActiveJob(t *testing.T) {
	t.Parallel()
	rec, dest := newRecorder(t)
	b := adminSetup(t, adminOpts{sources: []*jobs.Source{{Name: "s", Reject: true, MaxAttempts: 3, Destination: &jobs.Destination{URL: dest}}}})
	require.Equal(t, "accepted", b.send(t, "s", "evt_join"))
	b.waitEvent(t, "s", "evt_join", "completed")
	require.Equal(t, "duplicate", b.send(t, "s", "evt_join"))
	ids := b.deadIDs(t, "event_id = 'evt_join' AND reason = 'duplicate'")
	require.Len(t, ids, 1)

	opts := jobs.InsertOptsFor(3)
	opts.ScheduledAt = time.Now().Add(time.Hour)
	waiting, err := b.river.Insert(context.Background(), jobs.EventArgs{Source: "s", EventID: "evt_join", Destination: jobs.DefaultDestination}, opts)
	require.NoError(t, err)
	require.False(t, waiting.UniqueSkippedAsDuplicate)

	status, out := b.call(t, http.MethodPost, "/admin/dead/"+ids[0]+"/retry", nil)
	require.Equal(t, http.StatusAccepted, status, out)
	require.Equal(t, "requeued", out["status"])
	require.Equal(t, true, out["joined"])
	require.Equal(t, true, out["override"])
	require.EqualValues(t, waiting.Job.ID, out["job_id"])
	require.Zero(t, b.deadCount(t, "id = $1", ids[0]), "the item left the dead set")

	// The joined job runs now, with the override, and calls the destination again.
	require.Eventually(t, func() bool { return rec.count("evt_join") == 2 }, 30*time.Second, 20*time.Millisecond)
	ev := b.waitEvent(t, "s", "evt_join", "completed")
	require.EqualValues(t, 2, ev["attempts"])
	require.EqualValues(t, 2, ev["deliveries"])
	require.Zero(t, b.deadCount(t, "event_id = 'evt_join'"), "no new duplicate item: the override took the claim")
}

func TestAdminRetryDuplicateOfCompletedEventReprocesses(t *testing.T) {
	t.Parallel()
	rec, dest := newRecorder(t)
	b := adminSetup(t, adminOpts{sources: []*jobs.Source{{Name: "s", Reject: true, MaxAttempts: 3, Destination: &jobs.Destination{URL: dest}}}})
	require.Equal(t, "accepted", b.send(t, "s", "evt_dup"))
	b.waitEvent(t, "s", "evt_dup", "completed")
	require.Equal(t, "duplicate", b.send(t, "s", "evt_dup"))
	ids := b.deadIDs(t, "event_id = 'evt_dup'")
	require.Len(t, ids, 1)
	require.Equal(t, 1, rec.count("evt_dup"))

	// The original delivery may be pruned; the retry uses the item's own copy.
	_, err := b.pool.Exec(context.Background(), `DELETE FROM hookline_deliveries`)
	require.NoError(t, err)

	status, out := b.call(t, http.MethodPost, "/admin/dead/"+ids[0]+"/retry", nil)
	require.Equal(t, http.StatusAccepted, status, out)
	require.Equal(t, false, out["joined"])
	require.Equal(t, "s", out["source"])
	require.Equal(t, "evt_dup", out["event_id"])

	require.Eventually(t, func() bool { return rec.count("evt_dup") == 2 }, 30*time.Second, 20*time.Millisecond)
	ev := b.waitEvent(t, "s", "evt_dup", "completed")
	require.EqualValues(t, 2, ev["attempts"])
	rec.mu.Lock()
	require.Equal(t, []string{"1", "2"}, rec.attempts["evt_dup"])
	rec.mu.Unlock()
	require.Zero(t, b.deadCount(t, "true"))

	// The override is spent: a second job for the event is a duplicate again.
	_, err = b.river.Insert(context.Background(), jobs.EventArgs{Source: "s", EventID: "evt_dup"}, jobs.InsertOptsFor(3))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return b.deadCount(t, "event_id = 'evt_dup'") == 1 }, 30*time.Second, 20*time.Millisecond)
	require.Equal(t, 2, rec.count("evt_dup"))
}

// A failed event retried gets a fresh budget of max_attempts while its
// attempts keep counting, and dies again if it keeps failing.
func TestAdminRetryFreshBudget(t *testing.T) {
	t.Parallel()
	rec, dest := newRecorder(t)
	rec.status.Store(http.StatusInternalServerError)
	b := adminSetup(t, adminOpts{sources: []*jobs.Source{{Name: "s", MaxAttempts: 2, BackoffMin: 5 * time.Millisecond, BackoffMax: 10 * time.Millisecond,
		Destination: &jobs.Destination{URL: dest}}}})
	require.Equal(t, "accepted", b.send(t, "s", "evt_budget"))
	ev := b.waitEvent(t, "s", "evt_budget", "dead")
	require.EqualValues(t, 2, ev["attempts"])
	require.NotNil(t, ev["dead_item_id"])
	require.Nil(t, ev["completed_at"])
	require.Contains(t, ev["last_error"], "500")

	status, out := b.call(t, http.MethodPost, "/admin/dead/"+ev["dead_item_id"].(string)+"/retry", nil)
	require.Equal(t, http.StatusAccepted, status, out)
	ev = b.waitEvent(t, "s", "evt_budget", "dead")
	require.EqualValues(t, 4, ev["attempts"], "two more attempts: a fresh budget")
	rec.mu.Lock()
	require.Equal(t, []string{"1", "2", "3", "4"}, rec.attempts["evt_budget"])
	rec.mu.Unlock()

	rec.status.Store(http.StatusOK)
	status, _ = b.call(t, http.MethodPost, "/admin/dead/"+b.eventState(t, "s", "evt_budget")["dead_item_id"].(string)+"/retry", nil)
	require.Equal(t, http.StatusAccepted, status)
	ev = b.waitEvent(t, "s", "evt_budget", "completed")
	require.EqualValues(t, 5, ev["attempts"])
	require.Nil(t, ev["dead_item_id"])
	require.Nil(t, ev["last_error"])
}

// eventLookupSetup runs workers for three sources whose destinations answer
// 200 ("ok"), 503 ("fail", one attempt) and nothing until unblock is called
// ("block").
func eventLookupSetup(t *testing.T) (b *adminBundle, unblock func()) {
	t.Helper()
	release := make(chan struct{})
	var releaseOnce sync.Once
	unblock = func() { releaseOnce.Do(func() { close(release) }) }
	block := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(block.Close)
	fail := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "nope", http.StatusServiceUnavailable)
	}))
	t.Cleanup(fail.Close)
	_, ok := newRecorder(t)
	b = adminSetup(t, adminOpts{sources: []*jobs.Source{
		{Name: "ok", MaxAttempts: 3, Destination: &jobs.Destination{URL: ok}},
		{Name: "fail", MaxAttempts: 1, Destination: &jobs.Destination{URL: fail.URL}},
		{Name: "block", MaxAttempts: 3, Destination: &jobs.Destination{URL: block.URL, Timeout: time.Minute}},
	}})
	t.Cleanup(unblock) // before the workers stop (cleanups run last-in first-out)
	return b, unblock
}

func TestAdminEventLookup(t *testing.T) {
	t.Parallel()
	b, unblock := eventLookupSetup(t)

	t.Run("Completed", func(t *testing.T) {
		require.Equal(t, "accepted", b.send(t, "ok", "evt_ok"))
		require.Equal(t, "duplicate", b.send(t, "ok", "evt_ok"))
		ev := b.waitEvent(t, "ok", "evt_ok", "completed")
		require.Equal(t, "ok", ev["source"])
		require.Equal(t, "evt_ok", ev["event_id"])
		require.Equal(t, "charge.succeeded", ev["event_type"])
		require.EqualValues(t, 2, ev["deliveries"])
		require.EqualValues(t, 1, ev["attempts"])
		received, err := time.Parse(time.RFC3339, ev["received_at"].(string))
		require.NoError(t, err)
		completed, err := time.Parse(time.RFC3339, ev["completed_at"].(string))
		require.NoError(t, err)
		require.False(t, completed.Before(received))
		require.Nil(t, ev["dead_item_id"])
		require.Contains(t, ev, "last_error")
	})

	t.Run("Dead", func(t *testing.T) {
		require.Equal(t, "accepted", b.send(t, "fail", "evt_fail"))
		ev := b.waitEvent(t, "fail", "evt_fail", "dead")
		require.Equal(t, b.deadIDs(t, "event_id = 'evt_fail'"), []string{ev["dead_item_id"].(string)})
		require.Nil(t, ev["completed_at"])
		require.EqualValues(t, 1, ev["attempts"])
	})

	t.Run("ProcessingThenCompleted", func(t *testing.T) {
		require.Equal(t, "accepted", b.send(t, "block", "evt_block"))
		ev := b.waitEvent(t, "block", "evt_block", "processing")
		require.Nil(t, ev["completed_at"])
		unblock()
		b.waitEvent(t, "block", "evt_block", "completed")
	})

	t.Run("QueuedUnlessTheClaimIsLive", func(t *testing.T) {
		// A waiting event is processing while a worker's claim on it is
		// live; a claim whose lease ran out (its worker crashed) leaves it
		// queued, waiting for a retry.
		ctx := context.Background()
		_, err := b.pool.Exec(ctx, `WITH d AS (INSERT INTO hookline_deliveries (source, body) VALUES ('x', '{}') RETURNING id)
			, e AS (INSERT INTO hookline_events (source, event_id, delivery_id) SELECT 'x', e, d.id FROM d,
			(VALUES ('evt_q'), ('evt_stale'), ('evt_live')) AS v(e))
			INSERT INTO hookline_event_destinations (source, event_id, destination, delivery_id) SELECT 'x', e, 'default', d.id FROM d,
			(VALUES ('evt_q'), ('evt_stale'), ('evt_live')) AS v(e)`)
		require.NoError(t, err)
		_, err = b.pool.Exec(ctx, `INSERT INTO hookline_claims (key, state, expires_at) VALUES
			('hookline:x:default:evt_stale', 'processing', now() - interval '1 second'),
			('hookline:x:default:evt_live', 'processing', now() + interval '1 minute')`)
		require.NoError(t, err)
		require.Equal(t, "queued", b.eventState(t, "x", "evt_q")["state"])
		require.Equal(t, "queued", b.eventState(t, "x", "evt_stale")["state"])
		require.Equal(t, "processing", b.eventState(t, "x", "evt_live")["state"])
	})

	t.Run("Unknown404", func(t *testing.T) {
		status, out := b.call(t, http.MethodGet, "/admin/events/ok/evt_nope", nil)
		require.Equal(t, http.StatusNotFound, status)
		require.Equal(t, "event not found", out["error"])
		status, _ = b.call(t, http.MethodGet, "/admin/events/nope/evt_ok", nil)
		require.Equal(t, http.StatusNotFound, status)
	})

	t.Run("EscapedEventID", func(t *testing.T) {
		ctx := context.Background()
		_, err := b.pool.Exec(ctx, `WITH d AS (INSERT INTO hookline_deliveries (source, body) VALUES ('x', '{}') RETURNING id)
			INSERT INTO hookline_events (source, event_id, delivery_id) SELECT 'x', 'a/b c:%d', id FROM d`)
		require.NoError(t, err)
		ev := b.eventState(t, "x", "a%2Fb%20c:%25d")
		require.Equal(t, "a/b c:%d", ev["event_id"])
	})
}

var assetRE = regexp.MustCompile(`/admin/river/assets/[A-Za-z0-9._-]+\.(?:js|css)`)

func TestAdminRiverUI(t *testing.T) {
	t.Parallel()
	b := adminSetup(t, adminOpts{})

	status, raw := b.raw(t, http.MethodGet, "/admin/river/", nil)
	require.Equal(t, http.StatusOK, status, string(raw))
	require.Contains(t, string(raw), "<html")
	asset := assetRE.FindString(string(raw))
	require.NotEmpty(t, asset, "the index links its assets under the prefix")
	status, raw = b.raw(t, http.MethodGet, asset, nil)
	require.Equal(t, http.StatusOK, status)
	require.NotEmpty(t, raw)
	status, raw = b.raw(t, http.MethodGet, "/admin/river/api/jobs?state=available", nil)
	require.Equal(t, http.StatusOK, status, string(raw))

	for _, path := range []string{"/admin/river/", asset, "/admin/river/api/jobs?state=available"} {
		req, _ := http.NewRequest(http.MethodGet, b.url+path, nil)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, path)
		require.Contains(t, resp.Header.Get("WWW-Authenticate"), "Basic", "the browser asks for the token")
	}

	// A browser: HTTP Basic with the token as password.
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("operator:"+adminToken))
	status, _ = b.raw(t, http.MethodGet, "/admin/river/", nil, basic)
	require.Equal(t, http.StatusOK, status)

	// Another site cannot make that browser change jobs.
	req, _ := http.NewRequest(http.MethodPost, b.url+"/admin/river/api/jobs/cancel", bytes.NewReader([]byte(`{"ids":["1"]}`)))
	req.Header.Set("Authorization", basic)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", "https://evil.example")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
}
