package admin_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/admin"
	"github.com/hookline/hookline/internal/pgtest"
	"github.com/hookline/hookline/jobs"
)

// insertEvents inserts n events of source with ids prefix00001…, type typ,
// one destination in state (queued, completed or dead); event i is first
// received at base - (i/3) s, so events share timestamps three by three.
func insertEvents(t testing.TB, pool *pgxpool.Pool, source, prefix, typ, state string, n int, base time.Time) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `WITH g AS MATERIALIZED (
			SELECT i, $2 || lpad(i::text, 5, '0') AS eid FROM generate_series(1, $5) i),
		d AS (INSERT INTO hookline_deliveries (source, content_type, headers, body)
			SELECT $1, 'application/json', '{}', convert_to('{"id":"' || eid || '"}', 'UTF8') FROM g
			RETURNING id, convert_from(body, 'UTF8')::jsonb->>'id' AS eid),
		e AS (INSERT INTO hookline_events (source, event_id, event_type, delivery_id, first_received_at, received_at)
			SELECT $1, d.eid, $3, d.id, $6::timestamptz - (g.i / 3) * interval '1 second', $6::timestamptz FROM d JOIN g USING (eid))
		INSERT INTO hookline_event_destinations (source, event_id, destination, state, delivery_id, attempts)
		SELECT $1, eid, 'default', $4, id, 1 FROM d`, source, prefix, typ, state, n, base)
	require.NoError(t, err)
}

type eventPage struct {
	Items []struct {
		Source       string    `json:"source"`
		EventID      string    `json:"event_id"`
		EventType    string    `json:"event_type"`
		State        string    `json:"state"`
		Deliveries   int       `json:"deliveries"`
		Attempts     int       `json:"attempts"`
		Destinations int       `json:"destination_count"`
		ReceivedAt   time.Time `json:"received_at"`
	} `json:"items"`
	NextCursor string `json:"next_cursor"`
}

func (b *adminBundle) events(t testing.TB, query string) eventPage {
	t.Helper()
	status, raw := b.raw(t, http.MethodGet, "/admin/events?"+query, nil)
	require.Equal(t, http.StatusOK, status, string(raw))
	var p eventPage
	require.NoError(t, json.Unmarshal(raw, &p))
	return p
}

// ids pages through a search (limit per page) and returns every id, in
// order, checking that the order is newest first by (received_at, source,
// event_id).
func (b *adminBundle) searchAll(t testing.TB, query string, limit int) []string {
	t.Helper()
	var ids []string
	var last *struct {
		at          time.Time
		source, eid string
	}
	cursor := ""
	for {
		q := query + "&limit=" + strconv.Itoa(limit)
		if cursor != "" {
			q += "&cursor=" + cursor
		}
		p := b.events(t, q)
		require.LessOrEqual(t, len(p.Items), limit)
		for _, it := range p.Items {
			if last != nil {
				after := it.ReceivedAt.Before(last.at) || it.ReceivedAt.Equal(last.at) &&
					(it.Source < last.source || it.Source == last.source && it.EventID < last.eid)
				require.True(t, after, "%s/%s (%v) after %s/%s (%v)", it.Source, it.EventID, it.ReceivedAt, last.source, last.eid, last.at)
			}
			last = &struct {
				at          time.Time
				source, eid string
			}{it.ReceivedAt, it.Source, it.EventID}
			ids = append(ids, it.Source+"/"+it.EventID)
		}
		if p.NextCursor == "" {
			return ids
		}
		cursor = url.QueryEscape(p.NextCursor)
	}
}

func TestAdminEventSearch(t *testing.T) {
	t.Parallel()
	b := adminSetup(t, adminOpts{})
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	insertEvents(t, b.pool, "a", "evt_a", "invoice.paid", "completed", 300, base)
	insertEvents(t, b.pool, "b", "evt_b", "charge.failed", "dead", 250, base)
	insertEvents(t, b.pool, "b", "evt_q", "charge.pending", "queued", 20, base.Add(-time.Minute))

	// Every event exactly once across pages, newest first, while newer
	// events arrive (they are newer than the first page: not in the walk).
	ids := b.searchAll(t, "", 37)
	require.Len(t, ids, 570)
	seen := map[string]bool{}
	for _, id := range ids {
		require.False(t, seen[id], "%s twice", id)
		seen[id] = true
	}
	require.Equal(t, "b/evt_b00002", ids[0], "newest first; ties by source, then id, descending")

	p := b.events(t, "")
	require.Len(t, p.Items, admin50)
	require.NotEmpty(t, p.NextCursor)
	it := p.Items[0]
	require.Equal(t, "dead", it.State)
	require.Equal(t, "charge.failed", it.EventType)
	require.Equal(t, 1, it.Deliveries)
	require.Equal(t, 1, it.Attempts)
	require.Equal(t, 1, it.Destinations)
	require.Len(t, b.events(t, "limit=100000").Items, 500, "clamped to 500")

	for q, want := range map[string]int{
		"state=dead": 250, "state=completed": 300, "state=queued": 20, "state=processing": 0,
		"source=a": 300, "source=b&state=dead": 250, "source=a&state=dead": 0, "type=charge.pending": 20,
		"id_prefix=evt_a0001": 10, "id_prefix=evt_b00250": 1, "id_prefix=evt_%25": 0, "id_prefix=evt_": 570,
		"since=" + url.QueryEscape(base.Add(-10*time.Second).Format(time.RFC3339)):                           32 + 32, // i/3 <= 10
		"until=" + url.QueryEscape(base.Add(-90*time.Second).Format(time.RFC3339)) + "&source=a":             28,      // i >= 273
		"since=" + url.QueryEscape(base.Add(-2*time.Minute).Format(time.RFC3339)) + "&state=queued&source=b": 20,
		"id_prefix=evt_q&state=queued&type=charge.pending":                                                   20,
	} {
		require.Len(t, b.searchAll(t, q, 200), want, q)
	}

	for q, msg := range map[string]string{
		"cursor=nope":     "cursor: malformed; pass next_cursor from the previous page unchanged",
		"state=running":   `state: "running" is not a state (want queued, processing, completed or dead)`,
		"since=yesterday": `since: "yesterday" is not an RFC 3339 time (e.g. 2026-01-02T15:04:05Z)`,
		"limit=0":         `limit: "0" is not a positive integer`,
		"since=2026-01-02T00:00:00Z&until=2026-01-01T00:00:00Z": "since: must be before until",
		"event_type=x":  "event_type: unknown query parameter (known: source, state, type, id_prefix, since, until, limit, cursor)",
		"type=a&type=b": "type: given more than once",
	} {
		status, out := b.call(t, http.MethodGet, "/admin/events?"+q, nil)
		require.Equal(t, http.StatusBadRequest, status, q)
		require.Equal(t, map[string]any{"error": msg}, out, q)
	}
	status, _ := b.call(t, http.MethodGet, "/admin/events", nil, "")
	require.Equal(t, http.StatusUnauthorized, status)
}

const admin50 = 50

// A search by state starts from the destination rows in that state while
// they are few (jobs.DriveLimit), else walks the events newest first: both
// plans give the same answer.
func TestAdminEventSearchStatePlans(t *testing.T) {
	t.Parallel()
	b := adminSetup(t, adminOpts{})
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	insertEvents(t, b.pool, "a", "evt_a", "t", "completed", 100, base)
	insertEvents(t, b.pool, "b", "evt_d", "t", "dead", 120, base.Add(-30*time.Second))
	few := b.searchAll(t, "state=dead", 50)
	require.Len(t, few, 120)
	bySource := b.searchAll(t, "state=dead&source=b", 50)
	require.Len(t, bySource, 120)

	// Past the limit: as many more dead rows of source b, of events that
	// do not exist (destination rows only), so the answer must not change.
	_, err := b.pool.Exec(context.Background(), `INSERT INTO hookline_event_destinations (source, event_id, destination, state, delivery_id)
		SELECT 'b', 'ghost' || i, 'default', 'dead', 0 FROM generate_series(1, $1) i`, jobs.DriveLimit)
	require.NoError(t, err)
	require.Equal(t, few, b.searchAll(t, "state=dead", 50), "walking the events finds the same")
	require.Equal(t, bySource, b.searchAll(t, "state=dead&source=b", 50))
}

// GET /admin/overview: per source, per minute of the last hour, received =
// accepted + duplicate, and the queue.
func TestAdminOverview(t *testing.T) {
	t.Parallel()
	b := adminSetup(t, adminOpts{})
	require.Equal(t, "accepted", b.send(t, "s", "evt_1"))
	require.Equal(t, "accepted", b.send(t, "s", "evt_2"))
	require.Equal(t, "duplicate", b.send(t, "s", "evt_1"))
	_, err := b.pool.Exec(context.Background(), `INSERT INTO hookline_attempts (source, event_id, destination, n, status, error)
		VALUES ('s', 'evt_1', 'default', 1, 500, 'destination answered 500'), ('s', 'evt_2', 'default', 1, 200, '')`)
	require.NoError(t, err)

	status, raw := b.raw(t, http.MethodGet, "/admin/overview", nil)
	require.Equal(t, http.StatusOK, status, string(raw))
	var ov struct {
		Since        time.Time `json:"since"`
		CountedSince time.Time `json:"counted_since"`
		Minutes      int       `json:"minutes"`
		Sources      []struct {
			Source                                string
			Received, Accepted, Duplicate, Failed []int
		} `json:"sources"`
		Queue struct {
			Jobs                   map[string]int64 `json:"jobs"`
			OldestAvailableSeconds float64          `json:"oldest_available_seconds"`
		} `json:"queue"`
		Destinations []any `json:"destinations"`
	}
	require.NoError(t, json.Unmarshal(raw, &ov))
	require.Equal(t, 60, ov.Minutes)
	require.WithinDuration(t, time.Now().Truncate(time.Minute).Add(-59*time.Minute), ov.Since, time.Minute)
	require.Equal(t, ov.Since, ov.CountedSince, "a quiet hour is counted whole at once")
	require.Len(t, ov.Sources, 1)
	s := ov.Sources[0]
	require.Equal(t, "s", s.Source)
	sum := func(v []int) int {
		require.Len(t, v, 60)
		n := 0
		for _, x := range v {
			n += x
		}
		return n
	}
	require.Equal(t, 3, sum(s.Received))
	require.Equal(t, 2, sum(s.Accepted))
	require.Equal(t, 1, sum(s.Duplicate))
	require.Equal(t, 1, sum(s.Failed))
	require.Equal(t, int64(2), ov.Queue.Jobs["available"], "no workers here: both wait")
	require.GreaterOrEqual(t, ov.Queue.OldestAvailableSeconds, 0.0)
	require.NotNil(t, ov.Destinations)
	status, _ = b.call(t, http.MethodGet, "/admin/overview", nil, "")
	require.Equal(t, http.StatusUnauthorized, status)
}

// The lookup carries the stored payload and headers (the console's event
// page), null when retention pruned them and no dead item keeps a copy.
func TestAdminEventLookupPayload(t *testing.T) {
	t.Parallel()
	b := adminSetup(t, adminOpts{})
	b.send(t, "s", "evt_p")
	ev := b.eventState(t, "s", "evt_p")
	require.Equal(t, "application/json", ev["content_type"])
	require.Equal(t, `{"id":"evt_p","object":"event","type":"charge.succeeded","created":1764504000}`, ev["payload"])
	require.Equal(t, []any{"application/json"}, ev["headers"].(map[string]any)["Content-Type"])
	require.NotContains(t, ev, "payload_encoding")

	_, err := b.pool.Exec(context.Background(), `UPDATE hookline_deliveries SET body = '\xfffe'`)
	require.NoError(t, err)
	ev = b.eventState(t, "s", "evt_p")
	require.Equal(t, "//4=", ev["payload"])
	require.Equal(t, "base64", ev["payload_encoding"])

	_, err = b.pool.Exec(context.Background(), `DELETE FROM hookline_deliveries`)
	require.NoError(t, err)
	ev = b.eventState(t, "s", "evt_p")
	require.Nil(t, ev["payload"])
	require.Nil(t, ev["headers"])
	require.Nil(t, ev["content_type"])
}

// An OverviewCache counts the past once, backwards a step at a time when
// its budget is short, and ends with the counts of a whole count.
func TestOverviewCacheFillsTheHour(t *testing.T) {
	t.Parallel()
	b := adminSetup(t, adminOpts{})
	ctx := context.Background()
	_, err := b.pool.Exec(ctx, `INSERT INTO hookline_deliveries (source, received_at, body)
		SELECT 'hist', date_trunc('minute', now()) - k * interval '1 minute' + interval '5 seconds', '\x00'
		FROM generate_series(0, 59) k, generate_series(1, k % 4 + 1) i`)
	require.NoError(t, err)
	events := jobs.NewEvents(b.pool)
	// The hour is the database clock's: when its minute turns during a
	// run, the steps shift by one, and the run is repeated (a run takes far
	// less than a minute, so the second one sees one minute).
	for range 2 {
		whole, reads := overviewFill(t, events)
		if reads[0].Since.Equal(reads[len(reads)-1].Since) && whole.Since.Equal(reads[0].Since) {
			checkOverviewFill(t, whole, reads)
			return
		}
	}
	t.Fatal("the minute turned during both runs")
}

// overviewFill counts the hour whole, then with a cache that counts one
// step per read, and returns the whole count and every read (the last two
// after it is filled).
func overviewFill(t *testing.T, events *jobs.Events) (*jobs.Overview, []*jobs.Overview) {
	ctx := context.Background()
	whole, err := events.Overview(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, whole.Since, whole.CountedSince)
	c := jobs.NewOverviewCache(events, nil, 0)
	c.Budget = time.Nanosecond // one step per read
	var reads []*jobs.Overview
	for len(reads) < 20 {
		ov, err := c.Read(ctx)
		require.NoError(t, err)
		reads = append(reads, ov)
		if ov.CountedSince.Equal(ov.Since) {
			break
		}
	}
	again, err := c.Read(ctx)
	require.NoError(t, err)
	return whole, append(reads, again)
}

func checkOverviewFill(t *testing.T, whole *jobs.Overview, reads []*jobs.Overview) {
	filled, again := reads[len(reads)-2], reads[len(reads)-1]
	require.Len(t, reads, 13, "58 minutes, five a read, then one more read")
	for i, ov := range reads[:len(reads)-2] {
		// The unsettled minutes (since + 58 on), and one step before them
		// per read.
		require.Equal(t, ov.Since.Add(time.Duration(58-5*(i+1))*time.Minute), ov.CountedSince, "read %d", i+1)
	}
	require.Equal(t, filled.Since, filled.CountedSince)
	require.Equal(t, whole.Sources, filled.Sources)
	require.Equal(t, again.Since, again.CountedSince)
	require.Equal(t, filled.Sources, again.Sources, "the settled minutes come from the cache")
}

// The console is mounted with the admin API, behind its own login; without
// a token it is closed like every /admin route, and NoConsole leaves it out
// (the path is then the JSON API's, behind the bearer token).
func TestMountConsole(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	rc, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	budget := func(string, string) (int, bool) { return 1, true }
	get := func(cfg admin.Config, path string) *httptest.ResponseRecorder {
		e := echo.New()
		require.NoError(t, admin.Mount(e, cfg))
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec
	}
	open := admin.Config{Token: "t", Pool: pool, River: rc, MaxAttempts: budget, NoRiverUI: true}
	rec := get(open, "/admin/ui/")
	require.Equal(t, http.StatusOK, rec.Code)
	require.Contains(t, rec.Body.String(), `action="/admin/ui/login"`)
	require.Contains(t, rec.Header().Get("Content-Security-Policy"), "script-src 'self'")

	open.NoConsole = true
	rec = get(open, "/admin/ui/")
	require.Equal(t, http.StatusUnauthorized, rec.Code, "no console: the admin API's own answer")
	require.Equal(t, `{"error":"unauthorized"}`+"\n", rec.Body.String())

	rec = get(admin.Config{}, "/admin/ui/")
	require.Equal(t, http.StatusNotFound, rec.Code)
	require.Equal(t, `{"error":"not found"}`+"\n", rec.Body.String())
}
