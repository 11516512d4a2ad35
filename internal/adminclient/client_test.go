package adminclient_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/admin"
	"github.com/hookline/hookline/internal/adminclient"
	"github.com/hookline/hookline/internal/pgtest"
	"github.com/hookline/hookline/jobs"
)

const token = "client-test-token"

// newAPI runs a real admin API with source "s" configured (max_attempts 4,
// one destination "default") and returns a client of it with the right token, and the pool.
func newAPI(t *testing.T) (*adminclient.Client, func(sql string, args ...any)) {
	t.Helper()
	pool := pgtest.NewPool(t)
	logger := slog.New(slog.DiscardHandler)
	rc, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Logger: logger})
	require.NoError(t, err)
	e := echo.New()
	require.NoError(t, admin.Mount(e, admin.Config{Token: token, Pool: pool, River: rc, Logger: logger, NoRiverUI: true,
		MaxAttempts:  func(source, _ string) (int, bool) { return 4, source == "s" },
		Destinations: []jobs.DestinationName{{Source: "s", Name: "default"}}}))
	hs := httptest.NewServer(e)
	t.Cleanup(hs.Close)
	exec := func(sql string, args ...any) {
		t.Helper()
		_, err := pool.Exec(context.Background(), sql, args...)
		require.NoError(t, err)
	}
	return &adminclient.Client{BaseURL: hs.URL + "/", Token: token}, exec
}

// insertDead inserts dead items evt_1..evt_n of source "s" (reason failed,
// except evt_2: duplicate), evt_i dying i minutes before base.
func insertDead(exec func(string, ...any), n int, base time.Time) {
	exec(`INSERT INTO hookline_dead (source, event_id, event_type, reason, attempts, last_error, dead_at, content_type, headers, payload)
		SELECT 's', 'evt_' || i, 'charge.failed', CASE WHEN i = 2 THEN 'duplicate' ELSE 'failed' END, 4, 'boom',
			$2::timestamptz - i * interval '1 minute', 'application/json', '{"Content-Type":["application/json"]}',
			convert_to('{"id":"evt_' || i || '"}', 'UTF8')
		FROM generate_series(1, $1) i`, n, base)
}

func TestClientDeadSet(t *testing.T) {
	t.Parallel()
	c, exec := newAPI(t)
	ctx := context.Background()
	base := time.Now().UTC().Truncate(time.Second)
	insertDead(exec, 5, base)

	list, raw, err := c.List(ctx, adminclient.ListParams{})
	require.NoError(t, err)
	require.Contains(t, string(raw), `"items":[`)
	require.Len(t, list.Items, 5)
	require.Empty(t, list.NextCursor)
	first := list.Items[0]
	require.Equal(t, "evt_1", first.EventID, "newest first")
	require.Equal(t, adminclient.Item{ID: first.ID, Source: "s", EventID: "evt_1", Destination: "default", EventType: "charge.failed", Reason: "failed",
		Attempts: 4, LastError: "boom", DeadAt: base.Add(-time.Minute)}, first)

	// Filters and pages.
	list, _, err = c.List(ctx, adminclient.ListParams{Reason: "failed", Limit: 2})
	require.NoError(t, err)
	require.Equal(t, []string{"evt_1", "evt_3"}, eventIDs(list))
	require.NotEmpty(t, list.NextCursor)
	list, _, err = c.List(ctx, adminclient.ListParams{Reason: "failed", Limit: 2, Cursor: list.NextCursor})
	require.NoError(t, err)
	require.Equal(t, []string{"evt_4", "evt_5"}, eventIDs(list))
	list, _, err = c.List(ctx, adminclient.ListParams{Source: "s", EventType: "charge.failed",
		Since: base.Add(-4 * time.Minute), Until: base.Add(-time.Minute)})
	require.NoError(t, err)
	require.Equal(t, []string{"evt_2", "evt_3", "evt_4"}, eventIDs(list), "since inclusive, until exclusive")

	// One item.
	it, _, err := c.Show(ctx, first.ID)
	require.NoError(t, err)
	require.Equal(t, first, it.Item)
	require.Equal(t, "application/json", it.ContentType)
	require.Equal(t, map[string][]string{"Content-Type": {"application/json"}}, it.Headers)
	require.Equal(t, `{"id":"evt_1"}`, it.Payload)
	require.Empty(t, it.PayloadEncoding)
	require.Nil(t, it.DeliveryID)

	r, _, err := c.Retry(ctx, first.ID)
	require.NoError(t, err)
	require.Equal(t, "requeued", r.Status)
	require.Equal(t, "s", r.Source)
	require.Equal(t, "evt_1", r.EventID)
	require.Positive(t, r.JobID)
	require.False(t, r.Joined)
	require.True(t, r.Override)

	_, _, err = c.Show(ctx, first.ID)
	require.ErrorIs(t, err, adminclient.ErrNotFound)
	var ae *adminclient.APIError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, &adminclient.APIError{Status: http.StatusNotFound, Message: "dead item not found"}, ae)
	require.Equal(t, "404 dead item not found", err.Error())

	list, _, err = c.List(ctx, adminclient.ListParams{})
	require.NoError(t, err)
	require.Equal(t, "evt_2", list.Items[0].EventID)
	require.NoError(t, c.Delete(ctx, list.Items[0].ID))
	require.ErrorIs(t, c.Delete(ctx, list.Items[0].ID), adminclient.ErrNotFound)

	// Bulk: a dry run counts, the rest acts. Left: evt_3..evt_5, failed.
	b, raw, err := c.RetryAll(ctx, adminclient.Filter{Reason: "failed", DryRun: true})
	require.NoError(t, err)
	require.JSONEq(t, `{"matched":3,"dry_run":true}`, string(raw))
	require.Equal(t, &adminclient.Bulk{Matched: 3, DryRun: true}, b)
	b, _, err = c.RetryAll(ctx, adminclient.Filter{Reason: "failed"})
	require.NoError(t, err)
	require.Equal(t, 3, b.Matched)
	require.Equal(t, 3, *b.Retried)
	require.Nil(t, b.Deleted)
	exec(`INSERT INTO hookline_dead (source, event_id, reason, payload) VALUES ('gone', 'e', 'failed', 'p')`)
	b, _, err = c.RetryAll(ctx, adminclient.Filter{})
	require.NoError(t, err)
	require.Equal(t, &adminclient.Bulk{Matched: 1, Retried: new(0), Skipped: 1}, b, "a source not configured is skipped")
	b, _, err = c.DeleteAll(ctx, adminclient.Filter{})
	require.NoError(t, err)
	require.Equal(t, &adminclient.Bulk{Matched: 1, Deleted: new(1)}, b)

	_, _, err = c.DeleteAll(ctx, adminclient.Filter{Since: "monday"})
	require.ErrorAs(t, err, &ae)
	require.Equal(t, http.StatusBadRequest, ae.Status)
	require.Contains(t, ae.Message, "since")
}

// TestClientDestinationFilter: the destination filter of the list and the
// bulk routes, and each item's destination.
func TestClientDestinationFilter(t *testing.T) {
	t.Parallel()
	c, exec := newAPI(t)
	ctx := context.Background()
	base := time.Now().UTC().Truncate(time.Second)
	insertDead(exec, 3, base)
	exec(`INSERT INTO hookline_dead (source, event_id, destination, reason, last_error, dead_at, payload)
		SELECT 's', 'bill_' || i, 'billing', 'failed', 'boom', $1::timestamptz - i * interval '1 second', 'p' FROM generate_series(1, 2) i`, base)

	list, raw, err := c.List(ctx, adminclient.ListParams{Destination: "billing"})
	require.NoError(t, err)
	require.Equal(t, []string{"bill_1", "bill_2"}, eventIDs(list))
	require.Contains(t, string(raw), `"destination":"billing"`)
	for _, it := range list.Items {
		require.Equal(t, "billing", it.Destination)
	}
	it, _, err := c.Show(ctx, list.Items[0].ID)
	require.NoError(t, err)
	require.Equal(t, "billing", it.Destination)
	list, _, err = c.List(ctx, adminclient.ListParams{Destination: "default", Reason: "failed"})
	require.NoError(t, err)
	require.Equal(t, []string{"evt_1", "evt_3"}, eventIDs(list))

	f := adminclient.Filter{Destination: "billing", DryRun: true}
	require.False(t, f.Empty(), "a destination alone is a filter")
	b, _, err := c.RetryAll(ctx, f)
	require.NoError(t, err)
	require.Equal(t, &adminclient.Bulk{Matched: 2, DryRun: true}, b)
	b, _, err = c.DeleteAll(ctx, adminclient.Filter{Destination: "billing"})
	require.NoError(t, err)
	require.Equal(t, &adminclient.Bulk{Matched: 2, Deleted: new(2)}, b)
	list, _, err = c.List(ctx, adminclient.ListParams{})
	require.NoError(t, err)
	require.Equal(t, []string{"evt_1", "evt_2", "evt_3"}, eventIDs(list), "the other destination's items stay")

	// A limit below 1 is sent, for the server to refuse, not dropped.
	for _, limit := range []int{-1, -500} {
		_, _, err = c.List(ctx, adminclient.ListParams{Limit: limit})
		var ae *adminclient.APIError
		require.ErrorAs(t, err, &ae, limit)
		require.Equal(t, http.StatusBadRequest, ae.Status)
		require.Contains(t, ae.Message, "limit")
	}
}

func eventIDs(l *adminclient.ItemList) []string {
	var ids []string
	for _, it := range l.Items {
		ids = append(ids, it.EventID)
	}
	return ids
}

func TestClientEvent(t *testing.T) {
	t.Parallel()
	c, exec := newAPI(t)
	ctx := context.Background()
	exec(`WITH d AS (INSERT INTO hookline_deliveries (source, body) VALUES ('s', '{}') RETURNING id)
		, e AS (INSERT INTO hookline_events (source, event_id, event_type, delivery_id) SELECT 's', 'a/b c:%d', 't', id FROM d)
		INSERT INTO hookline_event_destinations (source, event_id, destination, delivery_id) SELECT 's', 'a/b c:%d', 'default', id FROM d`)

	ev, raw, err := c.Event(ctx, "s", "a/b c:%d")
	require.NoError(t, err)
	require.Contains(t, string(raw), `"state":"queued"`)
	require.Equal(t, "s", ev.Source)
	require.Equal(t, "a/b c:%d", ev.EventID, "the id is escaped on the way")
	require.Equal(t, "t", ev.EventType)
	require.Equal(t, "queued", ev.State)
	require.Equal(t, 1, ev.Deliveries)
	require.False(t, ev.ReceivedAt.IsZero())
	require.Nil(t, ev.CompletedAt)
	require.Nil(t, ev.DeadItemID)

	_, _, err = c.Event(ctx, "s", "nope")
	require.ErrorIs(t, err, adminclient.ErrNotFound)
	require.NotErrorIs(t, err, adminclient.ErrUnauthorized)
}

func TestClientDestinations(t *testing.T) {
	t.Parallel()
	c, exec := newAPI(t)
	ctx := context.Background()
	exec(`WITH d AS (INSERT INTO hookline_deliveries (source, body) VALUES ('s', '{}') RETURNING id)
		INSERT INTO hookline_event_destinations (source, event_id, destination, delivery_id) SELECT 's', 'e' || i, 'default', id FROM d, generate_series(1, 2) i`)

	list, raw, err := c.Destinations(ctx)
	require.NoError(t, err)
	require.Contains(t, string(raw), `"items":[`)
	require.Contains(t, string(raw), `"paused_at":null`)
	require.Equal(t, &adminclient.DestinationList{Items: []adminclient.Destination{{Source: "s", Name: "default", State: "active", Queued: 2}}}, list)

	before := time.Now()
	require.NoError(t, c.PauseDestination(ctx, "s", "default"))
	list, _, err = c.Destinations(ctx)
	require.NoError(t, err)
	d := list.Items[0]
	require.Equal(t, "paused", d.State)
	require.Equal(t, int64(2), d.Queued, "paused: events wait")
	require.NotNil(t, d.PausedAt)
	require.WithinDuration(t, before, *d.PausedAt, time.Minute)
	pausedAt := *d.PausedAt
	require.NoError(t, c.PauseDestination(ctx, "s", "default"), "pausing again is no error")
	list, _, err = c.Destinations(ctx)
	require.NoError(t, err)
	require.Equal(t, pausedAt, *list.Items[0].PausedAt, "a second pause keeps the time of the first")

	require.NoError(t, c.ResumeDestination(ctx, "s", "default"))
	list, _, err = c.Destinations(ctx)
	require.NoError(t, err)
	require.Equal(t, "active", list.Items[0].State)
	require.Nil(t, list.Items[0].PausedAt)
	require.NoError(t, c.ResumeDestination(ctx, "s", "default"), "resuming again is no error")

	exec(`UPDATE hookline_destinations SET circuit = 'open', failure_streak = 5, last_error = 'destination answered 502'`)
	list, _, err = c.Destinations(ctx)
	require.NoError(t, err)
	d = list.Items[0]
	require.Equal(t, "open", d.State)
	require.Equal(t, 5, d.FailureStreak)
	require.Equal(t, new("destination answered 502"), d.LastError)

	for _, set := range []func(context.Context, string, string) error{c.PauseDestination, c.ResumeDestination} {
		for _, dest := range [][2]string{{"s", "nope"}, {"x", "default"}} {
			err := set(ctx, dest[0], dest[1])
			require.ErrorIs(t, err, adminclient.ErrNotFound, dest)
			var ae *adminclient.APIError
			require.ErrorAs(t, err, &ae)
			require.Equal(t, fmt.Sprintf("destination not found: %q of source %q", dest[1], dest[0]), ae.Message)
		}
	}
}

func TestClientUnauthorized(t *testing.T) {
	t.Parallel()
	c, _ := newAPI(t)
	c.Token = "wrong"
	_, raw, err := c.List(context.Background(), adminclient.ListParams{})
	require.ErrorIs(t, err, adminclient.ErrUnauthorized)
	require.NotErrorIs(t, err, adminclient.ErrNotFound)
	require.Equal(t, "401 unauthorized", err.Error())
	require.JSONEq(t, `{"error":"unauthorized"}`, string(raw), "the answer as received")

	_, _, err = c.Destinations(context.Background())
	require.ErrorIs(t, err, adminclient.ErrUnauthorized)
	require.ErrorIs(t, c.PauseDestination(context.Background(), "s", "default"), adminclient.ErrUnauthorized)
	require.ErrorIs(t, c.ResumeDestination(context.Background(), "s", "default"), adminclient.ErrUnauthorized)
}

// TestClientWire checks the requests the client sends and how it reads
// answers that are not the admin API's.
func TestClientWire(t *testing.T) {
	t.Parallel()
	type seen struct{ method, uri, auth, accept, contentType, body string }
	var got seen
	answer := func(w http.ResponseWriter) {}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = seen{r.Method, r.RequestURI, r.Header.Get("Authorization"), r.Header.Get("Accept"), r.Header.Get("Content-Type"), string(b)}
		answer(w)
	}))
	t.Cleanup(hs.Close)
	c := &adminclient.Client{BaseURL: hs.URL, Token: "tok", HTTP: hs.Client()}
	ctx := context.Background()

	answer = func(w http.ResponseWriter) { _, _ = io.WriteString(w, `{"items":[]}`) }
	_, _, err := c.List(ctx, adminclient.ListParams{Source: "a b", Limit: 7, Since: time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)})
	require.NoError(t, err)
	require.Equal(t, seen{http.MethodGet, "/admin/dead?limit=7&since=2026-01-02T03%3A04%3A05.000006Z&source=a+b", "Bearer tok", "application/json", "", ""}, got)

	_, _, err = c.List(ctx, adminclient.ListParams{Destination: "bill ing", Limit: -1})
	require.NoError(t, err)
	require.Equal(t, "/admin/dead?destination=bill+ing&limit=-1", got.uri)

	answer = func(w http.ResponseWriter) { _, _ = io.WriteString(w, `{"matched":0}`) }
	_, _, err = c.DeleteAll(ctx, adminclient.Filter{Source: "s", DryRun: true})
	require.NoError(t, err)
	require.Equal(t, seen{http.MethodPost, "/admin/dead/delete", "Bearer tok", "application/json", "application/json", `{"source":"s","dry_run":true}`}, got)
	_, _, err = c.RetryAll(ctx, adminclient.Filter{Source: "s", Destination: "billing", Reason: "failed"})
	require.NoError(t, err)
	require.Equal(t, seen{http.MethodPost, "/admin/dead/retry", "Bearer tok", "application/json", "application/json", `{"source":"s","destination":"billing","reason":"failed"}`}, got)

	answer = func(w http.ResponseWriter) { w.WriteHeader(http.StatusNoContent) }
	require.NoError(t, c.Delete(ctx, "1/2"))
	require.Equal(t, "/admin/dead/1%2F2", got.uri)

	answer = func(w http.ResponseWriter) { _, _ = io.WriteString(w, `{"items":[]}`) }
	_, _, err = c.Destinations(ctx)
	require.NoError(t, err)
	require.Equal(t, seen{http.MethodGet, "/admin/destinations", "Bearer tok", "application/json", "", ""}, got)

	answer = func(w http.ResponseWriter) {
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, `{"status":"paused"}`)
	}
	require.NoError(t, c.PauseDestination(ctx, "a/b", "c d%"))
	require.Equal(t, seen{http.MethodPost, "/admin/destinations/a%2Fb/c%20d%25/pause", "Bearer tok", "application/json", "", ""}, got)
	require.NoError(t, c.ResumeDestination(ctx, "a/b", "c d%"))
	require.Equal(t, seen{http.MethodPost, "/admin/destinations/a%2Fb/c%20d%25/resume", "Bearer tok", "application/json", "", ""}, got)

	answer = func(w http.ResponseWriter) { http.Error(w, "upstream down", http.StatusBadGateway) }
	_, _, err = c.Show(ctx, "1")
	require.Equal(t, "502 upstream down", err.Error(), "a short text answer is the message")
	answer = func(w http.ResponseWriter) { w.WriteHeader(http.StatusServiceUnavailable) }
	_, _, err = c.Retry(ctx, "1")
	require.Equal(t, "503 service unavailable", err.Error(), "no body: the status text")

	answer = func(w http.ResponseWriter) { _, _ = io.WriteString(w, "<html>hello</html>") }
	_, raw, err := c.Event(ctx, "s", "e")
	require.ErrorContains(t, err, "unexpected answer from GET /admin/events/s/e (is --url the hookline server?)")
	require.Equal(t, "<html>hello</html>", string(raw))
	require.False(t, errors.Is(err, adminclient.ErrNotFound))
}

// TestClientBaseURL: a BaseURL that is not an http:// or https:// URL is
// refused before anything is sent.
func TestClientBaseURL(t *testing.T) {
	t.Parallel()
	for base, want := range map[string]string{
		"http://127.0.0.1:8080":      "",
		"https://hookline.example/":  "",
		"HTTP://127.0.0.1:8080":      "",
		"http://h/prefix":            "",
		"":                           "want an http:// or https:// URL",
		"not-a-url":                  "want an http:// or https:// URL",
		"127.0.0.1:8080":             "not a URL: first path segment in URL cannot contain colon",
		"ftp://x":                    "want an http:// or https:// URL",
		"unix:///run/hookline.sock":  "want an http:// or https:// URL",
		"http://[::1":                "not a URL: missing ']' in host",
		"http://":                    "no host",
		"http:///admin":              "no host",
		"http://h/?token=x":          "want the server's root, without a query or fragment",
		"http://h/#x":                "want the server's root, without a query or fragment",
		"http://h/?":                 "want the server's root, without a query or fragment",
		"http://127.0.0.1:8080/%zz/": "not a URL: invalid URL escape \"%zz\"",
	} {
		err := adminclient.CheckBaseURL(base)
		if want == "" {
			require.NoError(t, err, base)
			continue
		}
		require.EqualError(t, err, want, base)
	}

	var calls int
	hs := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { calls++ }))
	t.Cleanup(hs.Close)
	c := &adminclient.Client{BaseURL: "ftp://" + hs.Listener.Addr().String(), Token: "tok", HTTP: hs.Client()}
	_, _, err := c.List(context.Background(), adminclient.ListParams{})
	require.EqualError(t, err, `base URL "ftp://`+hs.Listener.Addr().String()+`": want an http:// or https:// URL`)
	require.Zero(t, calls)
}
