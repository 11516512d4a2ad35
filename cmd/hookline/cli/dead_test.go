package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/admin"
	"github.com/hookline/hookline/internal/httpjson"
	"github.com/hookline/hookline/internal/pgtest"
	"github.com/hookline/hookline/jobs"
)

const deadToken = "cli-test-token"

type deadBundle struct {
	pool *pgxpool.Pool
	url  string
}

// deadSetup runs a real admin API (adminToken "" closes it) with source "s"
// and its destination "default" configured, and dead items evt_1..evt_n of source "s" (reason failed,
// except evt_2: duplicate).
func deadSetup(t *testing.T, adminToken string, n int) *deadBundle {
	t.Helper()
	pool := pgtest.NewPool(t)
	logger := slog.New(slog.DiscardHandler)
	rc, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Logger: logger})
	require.NoError(t, err)
	// Like the ingest router, it answers echo's own errors in JSON.
	e := echo.New()
	e.HTTPErrorHandler = httpjson.ErrorHandler
	require.NoError(t, admin.Mount(e, admin.Config{Token: adminToken, Pool: pool, River: rc, Logger: logger, NoRiverUI: true,
		MaxAttempts:  func(source, _ string) (int, bool) { return 4, source == "s" },
		Destinations: []jobs.DestinationName{{Source: "s", Name: "default"}}}))
	hs := httptest.NewServer(e)
	t.Cleanup(hs.Close)
	_, err = pool.Exec(context.Background(), `INSERT INTO hookline_dead (source, event_id, event_type, reason, attempts, last_error, content_type, headers, payload)
		SELECT 's', 'evt_' || i, 'charge.failed', CASE WHEN i = 2 THEN 'duplicate' ELSE 'failed' END, 4,
			'destination answered 502:' || chr(10) || 'bad gateway', 'application/json', '{"Content-Type":["application/json"],"Stripe-Signature":["t=1,v1=ab"]}',
			convert_to('{"id":"evt_' || i || '"}', 'UTF8')
		FROM generate_series(1, $1) i`, n)
	require.NoError(t, err)
	return &deadBundle{pool: pool, url: hs.URL}
}

type deadResult struct {
	code           int
	stdout, stderr string
}

func runDead(t testing.TB, env map[string]string, args ...string) deadResult {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := &deadCommand{Getenv: func(k string) string { return env[k] }}
	code := cmd.Run(context.Background(), args, &out, &errb)
	return deadResult{code, out.String(), errb.String()}
}

func (b *deadBundle) env() map[string]string {
	return map[string]string{"HOOKLINE_ADMIN_TOKEN": deadToken, "HOOKLINE_URL": b.url}
}

func (b *deadBundle) ids(t testing.TB) []string {
	rows, err := b.pool.Query(context.Background(), `SELECT id::text FROM hookline_dead ORDER BY id`)
	require.NoError(t, err)
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		ids = append(ids, id)
	}
	return ids
}

func TestDeadList(t *testing.T) {
	t.Parallel()
	b := deadSetup(t, deadToken, 5)

	t.Run("Table", func(t *testing.T) {
		r := runDead(t, b.env(), "list")
		require.Equal(t, 0, r.code, r.stderr)
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		require.Len(t, lines, 6)
		require.Regexp(t, `^ID\s+SOURCE\s+DESTINATION\s+EVENT_ID\s+EVENT_TYPE\s+REASON\s+ATTEMPTS\s+DEAD_AT\s+LAST_ERROR$`, lines[0])
		// Newest first: equal dead_at (one statement), so the highest id.
		require.Regexp(t, `^\d+\s+s\s+default\s+evt_5\s+charge\.failed\s+failed\s+4\s+\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\s+destination answered 502: bad gateway$`, lines[1])
		require.Regexp(t, `\sdefault\s+evt_2\s+charge\.failed\s+duplicate\s`, lines[4])
		require.NotContains(t, r.stdout, "--cursor")
	})

	t.Run("FiltersAndPages", func(t *testing.T) {
		r := runDead(t, b.env(), "list", "--reason", "failed", "--limit", "2")
		require.Equal(t, 0, r.code, r.stderr)
		require.NotContains(t, r.stdout, "evt_2")
		m := regexp.MustCompile(`add --cursor (\S+)`).FindStringSubmatch(r.stdout)
		require.Len(t, m, 2, r.stdout)
		r = runDead(t, b.env(), "list", "--reason", "failed", "--limit", "2", "--cursor", m[1])
		require.Equal(t, 0, r.code, r.stderr)
		require.Contains(t, r.stdout, "evt_3")
		require.Contains(t, r.stdout, "evt_1")

		r = runDead(t, b.env(), "list", "--source", "nobody")
		require.Equal(t, 0, r.code, r.stderr)
		require.Equal(t, "no dead items\n", r.stdout)
	})

	t.Run("JSON", func(t *testing.T) {
		r := runDead(t, b.env(), "list", "--json", "--limit", "3")
		require.Equal(t, 0, r.code, r.stderr)
		var page struct {
			Items []map[string]any `json:"items"`
			Next  string           `json:"next_cursor"`
		}
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &page))
		require.Len(t, page.Items, 3)
		require.NotEmpty(t, page.Next)
		it := page.Items[0]
		for _, k := range []string{"id", "source", "destination", "event_id", "event_type", "reason", "attempts", "last_error", "dead_at"} {
			require.Contains(t, it, k)
		}
		require.IsType(t, "", it["id"], "ids are strings")
	})

	t.Run("URLFlagOverridesEnv", func(t *testing.T) {
		env := b.env()
		env["HOOKLINE_URL"] = "http://127.0.0.1:1"
		r := runDead(t, env, "list", "--url", b.url)
		require.Equal(t, 0, r.code, r.stderr)
	})
}

func TestDeadShowRetryDelete(t *testing.T) {
	t.Parallel()
	b := deadSetup(t, deadToken, 3)
	ids := b.ids(t)

	r := runDead(t, b.env(), "show", ids[0])
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `(?m)^id:\s+`+ids[0]+`$`, r.stdout)
	require.Regexp(t, `(?m)^destination:\s+default$`, r.stdout)
	require.Regexp(t, `(?m)^event_id:\s+evt_1$`, r.stdout)
	require.Regexp(t, `(?m)^last_error:\s+destination answered 502:\\nbad gateway$`, r.stdout, "one row: the line break is shown escaped")
	require.Regexp(t, `(?m)^content_type:\s+application/json$`, r.stdout)
	require.Contains(t, r.stdout, "headers:\n  Content-Type: application/json\n  Stripe-Signature: t=1,v1=ab\n")
	require.True(t, strings.HasSuffix(r.stdout, "payload:\n  {\"id\":\"evt_1\"}\n"), r.stdout)

	r = runDead(t, b.env(), "show", ids[0], "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var detail map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &detail))
	require.Equal(t, `{"id":"evt_1"}`, detail["payload"])
	require.Equal(t, ids[0], detail["id"])

	r = runDead(t, b.env(), "retry", ids[0])
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `^requeued dead item `+ids[0]+` \(s/evt_1\), as job \d+\n$`, r.stdout)
	require.NotContains(t, b.ids(t), ids[0])
	var max int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT max_attempts FROM river_job WHERE args->>'event_id' = 'evt_1'`).Scan(&max))
	require.Equal(t, jobs.RiverMaxAttempts, max, "a new job: hookline counts its fresh budget itself")

	r = runDead(t, b.env(), "retry", ids[0])
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "dead item "+ids[0]+" not found")

	r = runDead(t, b.env(), "delete", ids[1])
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "deleted dead item "+ids[1]+"\n", r.stdout)
	r = runDead(t, b.env(), "delete", ids[1])
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "not found")
	r = runDead(t, b.env(), "show", "nope")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "not found")
	require.Equal(t, []string{ids[2]}, b.ids(t))
}

func TestDeadBulk(t *testing.T) {
	t.Parallel()
	b := deadSetup(t, deadToken, 6)

	r := runDead(t, b.env(), "retry", "--all", "--source", "s", "--reason", "failed", "--dry-run")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "would retry 5 dead items (dry run)\n", r.stdout)
	require.Len(t, b.ids(t), 6)

	r = runDead(t, b.env(), "delete", "--all")
	require.Equal(t, 2, r.code)
	require.Contains(t, r.stderr, "--yes")
	require.Len(t, b.ids(t), 6)

	r = runDead(t, b.env(), "retry", "--all", "--reason", "duplicate", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	require.JSONEq(t, `{"matched":1,"retried":1}`, r.stdout)

	r = runDead(t, b.env(), "retry", "--all", "--source", "s")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "matched 5, retried 5\n", r.stdout)

	_, err := b.pool.Exec(context.Background(), `INSERT INTO hookline_dead (source, event_id, reason, payload) SELECT 'x', 'e' || i, 'failed', 'p' FROM generate_series(1, 4) i`)
	require.NoError(t, err)
	r = runDead(t, b.env(), "retry", "--all", "--yes")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "matched 4, retried 0, skipped 4 (their source is not configured on the server)\n", r.stdout)
	r = runDead(t, b.env(), "delete", "--all", "--yes")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "matched 4, deleted 4\n", r.stdout)
	require.Empty(t, b.ids(t))
}

func TestDeadErrorsSayWhatToDo(t *testing.T) {
	t.Parallel()
	b := deadSetup(t, deadToken, 1)
	closed := deadSetup(t, "", 1)

	for name, c := range map[string]struct {
		env  map[string]string
		args []string
		code int
		want string
	}{
		"wrong token":        {map[string]string{"HOOKLINE_ADMIN_TOKEN": "nope", "HOOKLINE_URL": b.url}, []string{"list"}, 1, "401 unauthorized: set HOOKLINE_ADMIN_TOKEN to the server's admin_token"},
		"no token":           {map[string]string{"HOOKLINE_URL": b.url}, []string{"list"}, 2, "HOOKLINE_ADMIN_TOKEN is not set"},
		"admin off":          {map[string]string{"HOOKLINE_ADMIN_TOKEN": deadToken, "HOOKLINE_URL": closed.url}, []string{"list"}, 1, "admin API is off"},
		"admin off id":       {map[string]string{"HOOKLINE_ADMIN_TOKEN": deadToken, "HOOKLINE_URL": closed.url}, []string{"show", "1"}, 1, "admin API is off"},
		"unreachable":        {map[string]string{"HOOKLINE_ADMIN_TOKEN": deadToken, "HOOKLINE_URL": "http://127.0.0.1:1"}, []string{"list"}, 1, "cannot reach the admin API at http://127.0.0.1:1"},
		"bad reason":         {b.env(), []string{"list", "--reason", "oops"}, 2, "--reason"},
		"bad since":          {b.env(), []string{"list", "--since", "monday"}, 2, "--since"},
		"server 400":         {b.env(), []string{"retry", "--all", "--since", "monday"}, 1, "400 bad request: since"},
		"unknown flag":       {b.env(), []string{"list", "--nope"}, 2, "flag provided but not defined"},
		"unknown verb":       {b.env(), []string{"purge"}, 2, `unknown command "purge"`},
		"missing id":         {b.env(), []string{"show"}, 2, "one dead item ID"},
		"id and filter":      {b.env(), []string{"retry", "1", "--source", "s"}, 2, "go with --all"},
		"all and id":         {b.env(), []string{"delete", "--all", "1", "--yes"}, 2, "takes no id"},
		"id and destination": {b.env(), []string{"retry", "1", "--destination", "default"}, 2, "go with --all"},
		"limit zero":         {b.env(), []string{"list", "--limit", "0"}, 2, "--limit 0: want a number of items per page from 1 to 500"},
		"limit negative":     {b.env(), []string{"list", "--limit=-1"}, 2, "--limit -1: want"},
		"limit not a number": {b.env(), []string{"list", "--limit", "ten"}, 2, "-limit"},
		"url scheme":         {b.env(), []string{"list", "--url", "ftp://x"}, 2, `--url "ftp://x": want an http:// or https:// URL`},
		"url not a url":      {b.env(), []string{"show", "1", "--url", "not-a-url"}, 2, `--url "not-a-url": want an http:// or https:// URL`},
		"url unparsable":     {b.env(), []string{"retry", "--all", "--yes", "--url", "http://[::1"}, 2, `--url "http://[::1": not a URL`},
		"url with a query":   {b.env(), []string{"delete", "1", "--url", b.url + "/?x=1"}, 2, "without a query"},
		"url empty":          {b.env(), []string{"list", "--url", ""}, 2, `--url "": want an http:// or https:// URL`},
		"env url scheme":     {map[string]string{"HOOKLINE_ADMIN_TOKEN": deadToken, "HOOKLINE_URL": "ftp://x"}, []string{"list"}, 2, `HOOKLINE_URL "ftp://x": want an http:// or https:// URL; set it (or --url)`},
	} {
		r := runDead(t, c.env, c.args...)
		require.Equal(t, c.code, r.code, "%s: %s", name, r.stderr)
		require.Contains(t, r.stderr, c.want, name)
		require.Empty(t, r.stdout, name)
	}

	r := runDead(t, b.env(), "--help")
	require.Equal(t, 0, r.code)
	require.Contains(t, r.stdout, "usage: hookline dead")
	r = runDead(t, b.env())
	require.Equal(t, 2, r.code)
	require.Contains(t, r.stderr, "usage: hookline dead")

	// -h after a subcommand lists the usage and that subcommand's flags.
	for _, args := range [][]string{{"list", "-h"}, {"retry", "--help"}, {"delete", "--all", "-h"}, {"show", "1", "-h"}} {
		r = runDead(t, map[string]string{}, args...)
		require.Equal(t, 0, r.code, "%v: %s", args, r.stderr)
		require.Empty(t, r.stderr, args)
		require.Contains(t, r.stdout, "usage: hookline dead", args)
		require.Contains(t, r.stdout, "flags of hookline dead "+args[0]+":", args)
		require.Contains(t, r.stdout, "-url", args)
		if args[0] != "show" {
			require.Contains(t, r.stdout, "-destination", args)
		}
	}
}

// TestDeadDestination: --destination filters list and the bulk routes, and
// list and show print each item's destination.
func TestDeadDestination(t *testing.T) {
	t.Parallel()
	b := deadSetup(t, deadToken, 3)
	_, err := b.pool.Exec(context.Background(), `INSERT INTO hookline_dead (source, event_id, destination, event_type, reason, attempts, last_error, payload)
		SELECT 's', 'bill_' || i, 'billing', 'charge.failed', 'failed', 4, 'destination answered 500', 'p' FROM generate_series(1, 2) i`)
	require.NoError(t, err)

	r := runDead(t, b.env(), "list", "--destination", "billing")
	require.Equal(t, 0, r.code, r.stderr)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 3, r.stdout)
	for _, l := range lines[1:] {
		require.Regexp(t, `^\d+\s+s\s+billing\s+bill_\d\s+charge\.failed\s+failed\s`, l)
	}
	r = runDead(t, b.env(), "list", "--destination", "default", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var page struct {
		Items []struct{ ID, EventID, Destination string } `json:"items"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &page))
	require.Len(t, page.Items, 3)
	for _, it := range page.Items {
		require.Equal(t, "default", it.Destination)
	}

	r = runDead(t, b.env(), "list", "--destination", "billing", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &page))
	billing := page.Items[0].ID
	r = runDead(t, b.env(), "show", billing)
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `(?m)^source:\s+s\ndestination:\s+billing\nevent_id:\s+bill_\d$`, r.stdout)

	r = runDead(t, b.env(), "retry", "--all", "--destination", "billing", "--dry-run")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "would retry 2 dead items (dry run)\n", r.stdout)
	r = runDead(t, b.env(), "retry", "--all", "--destination", "billing", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	require.JSONEq(t, `{"matched":2,"retried":2}`, r.stdout)
	var jobs int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM river_job WHERE args->>'destination' = 'billing'`).Scan(&jobs))
	require.Equal(t, 2, jobs, "the retried items re-run their destination")
	require.Len(t, b.ids(t), 3, "the default destination's items stay")

	r = runDead(t, b.env(), "delete", "--all", "--destination", "nope")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "matched 0, deleted 0\n", r.stdout, "a destination is a filter: no --yes needed")
	r = runDead(t, b.env(), "delete", "--all", "--destination", "default")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "matched 3, deleted 3\n", r.stdout)
	require.Empty(t, b.ids(t))
}

// requireNoControls fails if s holds a character that acts on a terminal
// (escape sequences, carriage returns, ...) other than the line feeds of the
// output's own lines.
func requireNoControls(t *testing.T, s string) {
	t.Helper()
	for i, r := range s {
		if r != '\n' && unsafeRune(r) {
			t.Fatalf("output holds %U at byte %d: %q", r, i, s)
		}
	}
}

// TestDeadHostileTextIsEscaped: what providers and destinations chose (ids,
// types, error bodies, payloads, headers) reaches the terminal escaped in
// list, show and the error messages, and exactly with --json.
func TestDeadHostileTextIsEscaped(t *testing.T) {
	t.Parallel()
	b := deadSetup(t, deadToken, 0)
	const (
		eventID   = "evt_\x1b[31mRED\x1b[0m_\x1b]0;pwned\x07"
		eventType = "esc.\x1b[1mtype\u009b2J\u202e"
		dest      = "bad\x1b[8m"
		lastError = "destination answered 500: upstream \x1b[31mdown\x1b[0m \x1b]0;title\x07 \r\nfake line\x7f"
		payload   = "{\"id\":\"x\",\n\"note\":\"\x1b]52;c;cGF5bG9hZA==\x07\"}\r\nforged: line"
	)
	var id string
	require.NoError(t, b.pool.QueryRow(context.Background(), `INSERT INTO hookline_dead (source, event_id, destination, event_type, reason, attempts, last_error, content_type, headers, payload)
		VALUES ('s', $1, $2, $3, 'failed', 4, $4, 'application/json', '{"X-Note":["a\u001b[2Jb\u0085c"]}', convert_to($5, 'UTF8')) RETURNING id::text`,
		eventID, dest, eventType, lastError, payload).Scan(&id))

	r := runDead(t, b.env(), "list")
	require.Equal(t, 0, r.code, r.stderr)
	requireNoControls(t, r.stdout)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 2, r.stdout)
	require.Contains(t, lines[1], `bad\x1b[8m`)
	require.Contains(t, lines[1], `evt_\x1b[31mRED\x1b[0m_`)
	require.Contains(t, lines[1], `esc.\x1b[1mtype\u009b2J\u202e`)
	require.Contains(t, lines[1], `destination answered 500: upstream \x1b[31mdown\x1b[0m \x1b…`, "escaped, then cut to the column")

	r = runDead(t, b.env(), "show", id)
	require.Equal(t, 0, r.code, r.stderr)
	requireNoControls(t, r.stdout)
	require.Contains(t, r.stdout, "\nevent_id:     evt_\\x1b[31mRED\\x1b[0m_\\x1b]0;pwned\\x07\n")
	require.Contains(t, r.stdout, "\nlast_error:   destination answered 500: upstream \\x1b[31mdown\\x1b[0m \\x1b]0;title\\x07 \\r\\nfake line\\x7f\n")
	require.Contains(t, r.stdout, "\nheaders:\n  X-Note: a\\x1b[2Jb\\u0085c\n")
	require.True(t, strings.HasSuffix(r.stdout, "\npayload:\n  {\"id\":\"x\",\n  \"note\":\"\\x1b]52;c;cGF5bG9hZA==\\x07\"}\\r\n  forged: line\n"), r.stdout)
	// No line of the output is the server's: each is a field, a section or
	// an indented line of one.
	for _, l := range strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n") {
		require.Regexp(t, `^([a-z_]+:( +\S.*)?|  \S.*)$`, l)
	}

	r = runDead(t, b.env(), "show", id, "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var detail map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &detail))
	require.Equal(t, eventID, detail["event_id"], "--json is exact")
	require.Equal(t, eventType, detail["event_type"])
	require.Equal(t, dest, detail["destination"])
	require.Equal(t, lastError, detail["last_error"])
	require.Equal(t, payload, detail["payload"])

	// A server's error message is escaped too, on one line.
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusTeapot)
		_, _ = io.WriteString(w, `{"error":"boom \u001b]0;x\u0007\r\nhookline dead: forged"}`)
	}))
	t.Cleanup(hs.Close)
	r = runDead(t, map[string]string{"HOOKLINE_ADMIN_TOKEN": deadToken, "HOOKLINE_URL": hs.URL}, "list")
	require.Equal(t, 1, r.code)
	require.Equal(t, "hookline dead: 418 boom \\x1b]0;x\\x07\\r\\nhookline dead: forged\n", r.stderr)
}
