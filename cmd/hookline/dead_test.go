package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
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
		require.Regexp(t, `^ID\s+SOURCE\s+EVENT_ID\s+EVENT_TYPE\s+REASON\s+ATTEMPTS\s+DEAD_AT\s+LAST_ERROR$`, lines[0])
		// Newest first: equal dead_at (one statement), so the highest id.
		require.Regexp(t, `^\d+\s+s\s+evt_5\s+charge\.failed\s+failed\s+4\s+\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\s+destination answered 502: bad gateway$`, lines[1])
		require.Regexp(t, `\sevt_2\s+charge\.failed\s+duplicate\s`, lines[4])
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
		for _, k := range []string{"id", "source", "event_id", "event_type", "reason", "attempts", "last_error", "dead_at"} {
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
	require.Regexp(t, `(?m)^event_id:\s+evt_1$`, r.stdout)
	require.Regexp(t, `(?m)^content_type:\s+application/json$`, r.stdout)
	require.Contains(t, r.stdout, "headers:\n  Content-Type: application/json\n  Stripe-Signature: t=1,v1=ab\n")
	require.True(t, strings.HasSuffix(r.stdout, "payload:\n{\"id\":\"evt_1\"}\n"), r.stdout)

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
		"wrong token":   {map[string]string{"HOOKLINE_ADMIN_TOKEN": "nope", "HOOKLINE_URL": b.url}, []string{"list"}, 1, "401 unauthorized: set HOOKLINE_ADMIN_TOKEN to the server's admin_token"},
		"no token":      {map[string]string{"HOOKLINE_URL": b.url}, []string{"list"}, 2, "HOOKLINE_ADMIN_TOKEN is not set"},
		"admin off":     {map[string]string{"HOOKLINE_ADMIN_TOKEN": deadToken, "HOOKLINE_URL": closed.url}, []string{"list"}, 1, "admin API is off"},
		"admin off id":  {map[string]string{"HOOKLINE_ADMIN_TOKEN": deadToken, "HOOKLINE_URL": closed.url}, []string{"show", "1"}, 1, "admin API is off"},
		"unreachable":   {map[string]string{"HOOKLINE_ADMIN_TOKEN": deadToken, "HOOKLINE_URL": "http://127.0.0.1:1"}, []string{"list"}, 1, "cannot reach the admin API at http://127.0.0.1:1"},
		"bad reason":    {b.env(), []string{"list", "--reason", "oops"}, 2, "--reason"},
		"bad since":     {b.env(), []string{"list", "--since", "monday"}, 2, "--since"},
		"server 400":    {b.env(), []string{"retry", "--all", "--since", "monday"}, 1, "400 bad request: since"},
		"unknown flag":  {b.env(), []string{"list", "--nope"}, 2, "flag provided but not defined"},
		"unknown verb":  {b.env(), []string{"purge"}, 2, `unknown command "purge"`},
		"missing id":    {b.env(), []string{"show"}, 2, "one dead item ID"},
		"id and filter": {b.env(), []string{"retry", "1", "--source", "s"}, 2, "go with --all"},
		"all and id":    {b.env(), []string{"delete", "--all", "1", "--yes"}, 2, "takes no id"},
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
}
