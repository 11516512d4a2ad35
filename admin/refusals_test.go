package admin_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/admin"
	"github.com/hookline/hookline/internal/proctest"
)

// answer is an admin answer with its headers.
type answer struct {
	status int
	header http.Header
	body   map[string]any
}

// sendRaw makes an admin request with a raw body (nil: none) and the admin
// token, unless auth is given ("" for no Authorization header).
func (b *adminBundle) sendRaw(t testing.TB, method, path string, body []byte, auth ...string) answer {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, b.url+path, rd)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	if len(auth) == 0 {
		req.Header.Set("Authorization", "Bearer "+adminToken)
	} else if auth[0] != "" {
		req.Header.Set("Authorization", auth[0])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	a := answer{status: resp.StatusCode, header: resp.Header}
	if len(raw) > 0 {
		require.NoError(t, json.Unmarshal(raw, &a.body), "%s %s: %s", method, path, raw)
	}
	return a
}

// The bulk routes read their filter from the JSON body only, and strictly:
// a filter in the query string, a body that is not exactly one JSON object,
// or a null field is a 400, never an action on the whole dead set (or a
// dry run taken for the real thing).
func TestAdminBulkFilterIsStrict(t *testing.T) {
	t.Parallel()
	b := adminSetup(t, adminOpts{})
	insertDead(t, b.pool, "a", 5, time.Now())
	insertDead(t, b.pool, "b", 3, time.Now())
	const fields = "source, destination, reason, event_type, since, until, dry_run"

	for _, route := range []string{"/admin/dead/retry", "/admin/dead/delete"} {
		for _, c := range []struct {
			query, body string
			field, msg  string // the error starts with field + ": " and contains msg
		}{
			// The filter given as in GET /admin/dead.
			{"?source=a&dry_run=true", "", "query", "JSON body"},
			{"?dry_run=true", "{}", "query", "JSON body"},
			{"?source=a", `{"source":"a","dry_run":true}`, "query", "JSON body"},
			{"?x", `{"dry_run":true}`, "query", "JSON body"},
			// Not exactly one JSON object.
			{"", "", "body", fields},
			{"", "  \n", "body", "empty"},
			{"", "null", "body", "null"},
			{"", " null\n", "body", "null"},
			{"", "[]", "body", fields},
			{"", `"a"`, "body", fields},
			{"", "true", "body", fields},
			{"", `{"dry_run":true,"source":"a"} trailing`, "body", "more follows"},
			{"", `{"dry_run":true}{"source":"a"}`, "body", "more follows"},
			{"", `{"dry_run":true} null`, "body", "more follows"},
			{"", `{"dry_run":true`, "body", fields},
			// Null, unknown, misspelt or mistyped fields.
			{"", `{"dry_run":null}`, "dry_run", "null"},
			{"", `{"source":null,"dry_run":true}`, "source", "null"},
			{"", `{"destination":null,"dry_run":true}`, "destination", "null"},
			{"", `{"sorce":"a","dry_run":true}`, "body", `unknown field "sorce"`},
			{"", `{"sorce":"a","dry_run":true}`, "body", fields},
			{"", `{"DRY_RUN":true}`, "body", `unknown field "DRY_RUN"`},
			{"", `{"Source":"a","dry_run":true}`, "body", `unknown field "Source"`},
			{"", `{"dry_run":"true"}`, "dry_run", "true or false"},
			{"", `{"source":1,"dry_run":true}`, "source", "string"},
			{"", `{"reason":"x","dry_run":true}`, "reason", "not a reason"},
			// A field given twice: never the last one silently (a dry
			// run taken for the real thing, or another source).
			{"", `{"source":"a","dry_run":true,"dry_run":false}`, "dry_run", "given more than once"},
			{"", `{"source":"a","source":"b","dry_run":true}`, "source", "given more than once"},
			{"", `{"source":"a","sour\u0063e":"b","dry_run":true}`, "source", "given more than once"},
		} {
			var body []byte
			if c.body != "" || c.field != "query" {
				body = []byte(c.body)
			}
			a := b.sendRaw(t, http.MethodPost, route+c.query, body)
			what := fmt.Sprintf("%s%s %q", route, c.query, c.body)
			require.Equal(t, http.StatusBadRequest, a.status, what)
			msg, _ := a.body["error"].(string)
			require.True(t, strings.HasPrefix(msg, c.field+": "), "%s: %q names %s", what, msg, c.field)
			require.Contains(t, msg, c.msg, what)
		}

		// Too large: said so, not "unexpected EOF".
		for _, body := range [][]byte{
			[]byte(`{"source":"` + strings.Repeat("a", 70<<10) + `"}`),
			append([]byte(`{"dry_run":true}`), bytes.Repeat([]byte(" "), 64<<10)...),
		} {
			a := b.sendRaw(t, http.MethodPost, route, body)
			require.Equal(t, http.StatusRequestEntityTooLarge, a.status, route)
			require.Equal(t, "body: larger than 64 KiB; a bulk filter is a small JSON object ("+fields+")", a.body["error"])
		}
		require.Equal(t, 8, b.deadCount(t, "true"), "%s: nothing was touched", route)

		// One object, whitespace around it, is fine.
		a := b.sendRaw(t, http.MethodPost, route, []byte(" {\"source\":\"a\",\"dry_run\":true}\n"))
		require.Equal(t, http.StatusOK, a.status, a.body)
		require.Equal(t, map[string]any{"matched": 5.0, "dry_run": true}, a.body)
		a = b.sendRaw(t, http.MethodPost, route, []byte(`{"dry_run":false,"source":"nobody","destination":"default"}`))
		require.Equal(t, http.StatusOK, a.status, a.body)
		require.EqualValues(t, 0, a.body["matched"])
	}

	// {} is the whole dead set, as documented.
	a := b.sendRaw(t, http.MethodPost, "/admin/dead/delete", []byte(`{}`))
	require.Equal(t, http.StatusOK, a.status, a.body)
	require.Equal(t, map[string]any{"matched": 8.0, "deleted": 8.0}, a.body)
	require.Zero(t, b.deadCount(t, "true"))
}

// Text that no stored source, destination, type or event id can hold (a
// NUL byte, invalid UTF-8) is a 400 naming the parameter in dead-set
// filters and a malformed cursor in the events search, and no such event
// exists (404): never a 500 from Postgres refusing to compare it.
func TestAdminTextNoEventHas(t *testing.T) {
	t.Parallel()
	b := adminSetup(t, adminOpts{})
	insertDead(t, b.pool, "s", 3, time.Now())
	b.send(t, "s", "evt_1")

	t.Run("DeadFilters400", func(t *testing.T) {
		for q, param := range map[string]string{
			"source=%00": "source", "source=%FF": "source", "source=a%00b": "source",
			"destination=%00": "destination", "destination=%FE": "destination",
			"event_type=%C3": "event_type", "event_type=%00": "event_type",
		} {
			a := b.sendRaw(t, http.MethodGet, "/admin/dead?"+q, nil)
			require.Equal(t, http.StatusBadRequest, a.status, q)
			require.Equal(t, param+": not valid UTF-8 text", a.body["error"], q)
		}
	})

	t.Run("BulkFilters400", func(t *testing.T) {
		for _, route := range []string{"/admin/dead/retry", "/admin/dead/delete"} {
			for body, param := range map[string]string{
				`{"dry_run":true,"source":"\u0000"}`: "source",
				`{"destination":"a\u0000"}`:          "destination",
				`{"event_type":"\u0000"}`:            "event_type",
				"{\"source\":\"\xff\"}":              "", // JSON decoding makes it U+FFFD: a name no source has
			} {
				a := b.sendRaw(t, http.MethodPost, route, []byte(body))
				if param == "" {
					require.Equal(t, http.StatusOK, a.status, body)
					require.EqualValues(t, 0, a.body["matched"], body)
					continue
				}
				require.Equal(t, http.StatusBadRequest, a.status, body)
				require.Equal(t, param+": not valid UTF-8 text", a.body["error"], body)
			}
		}
		require.Equal(t, 3, b.deadCount(t, "true"))
	})

	t.Run("EventLookup404", func(t *testing.T) {
		for _, path := range []string{"/admin/events/s/%00", "/admin/events/s/%FF", "/admin/events/s/evt_1%00",
			"/admin/events/%FF/evt_1", "/admin/events/%00/evt_1", "/admin/events/s/a%C3"} {
			a := b.sendRaw(t, http.MethodGet, path, nil)
			require.Equal(t, http.StatusNotFound, a.status, path)
			require.Equal(t, "event not found", a.body["error"], path)
		}
		require.Equal(t, "s", b.eventState(t, "s", "evt_1")["source"], "a real event is still found")
	})

	t.Run("EventsCursor400", func(t *testing.T) {
		cursor := func(raw string) string { return base64.RawURLEncoding.EncodeToString([]byte(raw)) }
		for _, c := range []string{
			`["e1",1796226727644590,"s","\u0000"]`,
			`["e1",1796226727644590,"\u0000","evt_1"]`,
			`["e1",1796226727644590,"s","evt_1\u0000"]`,
			// A time no cursor holds: it would overflow on its way to
			// Postgres and page from the newest event.
			`["e1",-9223372036854775808,"s","evt_1"]`,
			`["e1",9223372036854775807,"s","evt_1"]`,
		} {
			a := b.sendRaw(t, http.MethodGet, "/admin/events?cursor="+cursor(c), nil)
			require.Equal(t, http.StatusBadRequest, a.status, c)
			require.Equal(t, "cursor: malformed; pass next_cursor from the previous page unchanged", a.body["error"], c)
		}
		a := b.sendRaw(t, http.MethodGet, "/admin/events?cursor="+cursor(`["e1",1796226727644590,"s","evt_1"]`), nil)
		require.Equal(t, http.StatusOK, a.status, "a well-formed cursor still pages")
	})
}

// A known path asked with a method it does not take is a 405 that lists,
// in Allow, the methods it takes; an unknown path stays a 404, and both are
// a 401 without the token.
func TestAdminWrongMethod405(t *testing.T) {
	t.Parallel()
	b := adminSetup(t, adminOpts{})
	insertDead(t, b.pool, "s", 1, time.Now())
	id := b.deadIDs(t, "true")[0]

	for _, c := range []struct{ method, path, allow string }{
		{http.MethodPut, "/admin/dead/" + id, "GET, DELETE"},
		{http.MethodPatch, "/admin/dead/" + id, "GET, DELETE"},
		{http.MethodPost, "/admin/dead/" + id, "GET, DELETE"},
		{http.MethodPost, "/admin/dead/65", "GET, DELETE"},
		{http.MethodGet, "/admin/dead/" + id + "/retry", "POST"},
		{http.MethodDelete, "/admin/dead/65/retry", "POST"},
		{http.MethodGet, "/admin/dead/retry", "POST"},
		{http.MethodDelete, "/admin/dead/retry", "POST"},
		{http.MethodGet, "/admin/dead/delete", "POST"},
		{http.MethodDelete, "/admin/dead", "GET"},
		{http.MethodPost, "/admin/dead", "GET"},
		{http.MethodOptions, "/admin/dead", "GET"},
		{http.MethodPost, "/admin/events", "GET"},
		{http.MethodDelete, "/admin/events/s/evt_1", "GET"},
		{http.MethodPut, "/admin/overview", "GET"},
		{http.MethodPost, "/admin/destinations", "GET"},
		{http.MethodGet, "/admin/destinations/s/default/pause", "POST"},
		{http.MethodGet, "/admin/destinations/s/default/resume", "POST"},
		{http.MethodGet, "/admin/sources/x/reconcile", "POST"},
		{http.MethodPut, "/admin/sources/x/reconcile", "POST"},
		{"FOO", "/admin/dead/retry", "POST"}, // a method echo does not list
		{"FOO", "/admin/dead/" + id, "GET, DELETE"},
		{"FOO", "/admin/events/s/a%2Fb", "GET"},
	} {
		what := c.method + " " + c.path
		a := b.sendRaw(t, c.method, c.path, nil)
		require.Equal(t, http.StatusMethodNotAllowed, a.status, what)
		require.Equal(t, c.allow, a.header.Get("Allow"), what)
		require.Equal(t, "method not allowed; this route takes "+c.allow, a.body["error"], what)
		a = b.sendRaw(t, c.method, c.path, nil, "")
		require.Equal(t, http.StatusUnauthorized, a.status, "%s: the token first", what)
		require.Equal(t, map[string]any{"error": "unauthorized"}, a.body)
	}
	require.Equal(t, 1, b.deadCount(t, "true"), "nothing was touched")

	a := b.sendRaw(t, http.MethodHead, "/admin/dead", nil)
	require.Equal(t, http.StatusMethodNotAllowed, a.status)
	require.Equal(t, "GET", a.header.Get("Allow"))

	for _, c := range []struct{ method, path string }{
		{http.MethodGet, "/admin/nope"}, {"FOO", "/admin/nope"}, {http.MethodPost, "/admin/nope"},
		{http.MethodGet, "/admin/dead/retry/x"}, {http.MethodGet, "/admin/dead/1/retry/x"},
		{http.MethodGet, "/admin/sources/x"}, {http.MethodPost, "/admin/destinations/s/default"},
	} {
		what := c.method + " " + c.path
		a := b.sendRaw(t, c.method, c.path, nil)
		require.Equal(t, http.StatusNotFound, a.status, what)
		require.Equal(t, map[string]any{"error": "not found"}, a.body, what)
		require.Empty(t, a.header.Get("Allow"), what)
		a = b.sendRaw(t, c.method, c.path, nil, "")
		require.Equal(t, http.StatusUnauthorized, a.status, what)
	}

	// The routes themselves still answer.
	a = b.sendRaw(t, http.MethodGet, "/admin/dead/"+id, nil)
	require.Equal(t, http.StatusOK, a.status)
	a = b.sendRaw(t, http.MethodPost, "/admin/dead/retry", []byte(`{"dry_run":true}`))
	require.Equal(t, http.StatusOK, a.status)
	require.EqualValues(t, 1, a.body["matched"])
	a = b.sendRaw(t, http.MethodDelete, "/admin/dead/"+id, nil)
	require.Equal(t, http.StatusNoContent, a.status)
}

// A reconciliation that cannot reach the database answers like every admin
// route, "database unavailable; try again", and logs pgx's detail (user,
// database, host, port) instead of answering it; a run's own failure keeps
// its text.
func TestAdminReconcileDatabaseDown(t *testing.T) {
	t.Parallel()
	// A Postgres that is not there: what a run meets while the database is down.
	down, err := pgxpool.New(context.Background(), "postgres://hookline_user@127.0.0.1:1/hookline_db?connect_timeout=2")
	require.NoError(t, err)
	t.Cleanup(down.Close)
	runErr := map[string]error{
		"own":   errors.New("reconcile own: the store answered 1 known flags for 2 events"),
		"admin": fmt.Errorf("reconcile admin: take the run lock: %w", &pgconn.PgError{Code: "57P01", Message: "terminating connection due to administrator command"}),
	}
	logs := &proctest.Buffer{}
	b := adminSetup(t, adminOpts{logger: slog.New(slog.NewJSONHandler(logs, nil)),
		reconcile: func(ctx context.Context, source string) (admin.ReconcileResult, error) {
			if err := runErr[source]; err != nil {
				return admin.ReconcileResult{}, err
			}
			conn, err := down.Acquire(ctx)
			if err != nil {
				return admin.ReconcileResult{}, fmt.Errorf("reconcile %s: get a database connection: %w", source, err)
			}
			conn.Release()
			return admin.ReconcileResult{}, nil
		}})

	a := b.sendRaw(t, http.MethodPost, "/admin/sources/down/reconcile", nil)
	require.Equal(t, http.StatusServiceUnavailable, a.status)
	require.Equal(t, map[string]any{"error": "database unavailable; try again"}, a.body)
	require.Contains(t, logs.String(), "reconcile down: get a database connection: failed to connect to")
	require.Contains(t, logs.String(), "hookline_user", "the detail is logged")

	a = b.sendRaw(t, http.MethodPost, "/admin/sources/admin/reconcile", nil)
	require.Equal(t, http.StatusServiceUnavailable, a.status)
	require.Equal(t, map[string]any{"error": "database unavailable; try again"}, a.body)

	a = b.sendRaw(t, http.MethodPost, "/admin/sources/own/reconcile", nil)
	require.Equal(t, http.StatusServiceUnavailable, a.status)
	require.Equal(t, map[string]any{"error": "reconciliation failed: " + runErr["own"].Error()}, a.body)
}
