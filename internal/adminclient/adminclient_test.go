package adminclient_test

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
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/ingest"
	"github.com/hookline/hookline/internal/adminclient"
	"github.com/hookline/hookline/internal/pgtest"
	"github.com/hookline/hookline/jobs"
	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/stripe"
)

const token = "cli-test-token"

type testBundle struct {
	pool *pgxpool.Pool
	url  string
}

// setup runs a real admin API (token "" closes it) with source "s"
// configured, and dead items evt_1..evt_n of source "s" (reason failed,
// except evt_2: duplicate).
func setup(t *testing.T, adminToken string, n int) *testBundle {
	t.Helper()
	pool := pgtest.NewPool(t)
	logger := slog.New(slog.DiscardHandler)
	rc, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Logger: logger})
	require.NoError(t, err)
	prov, err := stripe.New(providers.Config{Secrets: []string{"whsec_cli"}})
	require.NoError(t, err)
	srv, err := ingest.New(ingest.Config{Pool: pool, River: rc, Logger: logger,
		Sources: []*ingest.Source{{Name: "s", Provider: prov, MaxAttempts: 4}}})
	require.NoError(t, err)
	require.NoError(t, srv.MountAdmin(srv.Echo(), ingest.AdminConfig{Token: adminToken, NoRiverUI: true}))
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	_, err = pool.Exec(context.Background(), `INSERT INTO hookline_dead (source, event_id, event_type, reason, attempts, last_error, content_type, headers, payload)
		SELECT 's', 'evt_' || i, 'charge.failed', CASE WHEN i = 2 THEN 'duplicate' ELSE 'failed' END, 4,
			'destination answered 502:' || chr(10) || 'bad gateway', 'application/json', '{"Content-Type":["application/json"],"Stripe-Signature":["t=1,v1=ab"]}',
			convert_to('{"id":"evt_' || i || '"}', 'UTF8')
		FROM generate_series(1, $1) i`, n)
	require.NoError(t, err)
	return &testBundle{pool: pool, url: hs.URL}
}

type result struct {
	code           int
	stdout, stderr string
}

func run(t testing.TB, env map[string]string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := &adminclient.Command{Getenv: func(k string) string { return env[k] }}
	code := cmd.Run(context.Background(), args, &out, &errb)
	return result{code, out.String(), errb.String()}
}

func (b *testBundle) env() map[string]string {
	return map[string]string{"HOOKLINE_ADMIN_TOKEN": token, "HOOKLINE_URL": b.url}
}

func (b *testBundle) ids(t testing.TB) []string {
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

func TestList(t *testing.T) {
	t.Parallel()
	b := setup(t, token, 5)

	t.Run("Table", func(t *testing.T) {
		r := run(t, b.env(), "list")
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
		r := run(t, b.env(), "list", "--reason", "failed", "--limit", "2")
		require.Equal(t, 0, r.code, r.stderr)
		require.NotContains(t, r.stdout, "evt_2")
		m := regexp.MustCompile(`add --cursor (\S+)`).FindStringSubmatch(r.stdout)
		require.Len(t, m, 2, r.stdout)
		r = run(t, b.env(), "list", "--reason", "failed", "--limit", "2", "--cursor", m[1])
		require.Equal(t, 0, r.code, r.stderr)
		require.Contains(t, r.stdout, "evt_3")
		require.Contains(t, r.stdout, "evt_1")

		r = run(t, b.env(), "list", "--source", "nobody")
		require.Equal(t, 0, r.code, r.stderr)
		require.Equal(t, "no dead items\n", r.stdout)
	})

	t.Run("JSON", func(t *testing.T) {
		r := run(t, b.env(), "list", "--json", "--limit", "3")
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
		r := run(t, env, "list", "--url", b.url)
		require.Equal(t, 0, r.code, r.stderr)
	})
}

func TestShowRetryDelete(t *testing.T) {
	t.Parallel()
	b := setup(t, token, 3)
	ids := b.ids(t)

	r := run(t, b.env(), "show", ids[0])
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `(?m)^id:\s+`+ids[0]+`$`, r.stdout)
	require.Regexp(t, `(?m)^event_id:\s+evt_1$`, r.stdout)
	require.Regexp(t, `(?m)^content_type:\s+application/json$`, r.stdout)
	require.Contains(t, r.stdout, "headers:\n  Content-Type: application/json\n  Stripe-Signature: t=1,v1=ab\n")
	require.True(t, strings.HasSuffix(r.stdout, "payload:\n{\"id\":\"evt_1\"}\n"), r.stdout)

	r = run(t, b.env(), "show", ids[0], "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var detail map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &detail))
	require.Equal(t, `{"id":"evt_1"}`, detail["payload"])
	require.Equal(t, ids[0], detail["id"])

	r = run(t, b.env(), "retry", ids[0])
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `^requeued dead item `+ids[0]+` \(s/evt_1\), as job \d+\n$`, r.stdout)
	require.NotContains(t, b.ids(t), ids[0])
	var max int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT max_attempts FROM river_job WHERE args->>'event_id' = 'evt_1'`).Scan(&max))
	require.Equal(t, jobs.RiverMaxAttempts, max, "a new job: hookline counts its fresh budget itself")

	r = run(t, b.env(), "retry", ids[0])
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "dead item "+ids[0]+" not found")

	r = run(t, b.env(), "delete", ids[1])
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "deleted dead item "+ids[1]+"\n", r.stdout)
	r = run(t, b.env(), "delete", ids[1])
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "not found")
	r = run(t, b.env(), "show", "nope")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "not found")
	require.Equal(t, []string{ids[2]}, b.ids(t))
}

func TestBulk(t *testing.T) {
	t.Parallel()
	b := setup(t, token, 6)

	r := run(t, b.env(), "retry", "--all", "--source", "s", "--reason", "failed", "--dry-run")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "would retry 5 dead items (dry run)\n", r.stdout)
	require.Len(t, b.ids(t), 6)

	r = run(t, b.env(), "delete", "--all")
	require.Equal(t, 2, r.code)
	require.Contains(t, r.stderr, "--yes")
	require.Len(t, b.ids(t), 6)

	r = run(t, b.env(), "retry", "--all", "--reason", "duplicate", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	require.JSONEq(t, `{"matched":1,"retried":1}`, r.stdout)

	r = run(t, b.env(), "retry", "--all", "--source", "s")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "matched 5, retried 5\n", r.stdout)

	_, err := b.pool.Exec(context.Background(), `INSERT INTO hookline_dead (source, event_id, reason, payload) SELECT 'x', 'e' || i, 'failed', 'p' FROM generate_series(1, 4) i`)
	require.NoError(t, err)
	r = run(t, b.env(), "retry", "--all", "--yes")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "matched 4, retried 0, skipped 4 (their source is not configured on the server)\n", r.stdout)
	r = run(t, b.env(), "delete", "--all", "--yes")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "matched 4, deleted 4\n", r.stdout)
	require.Empty(t, b.ids(t))
}

func TestErrorsSayWhatToDo(t *testing.T) {
	t.Parallel()
	b := setup(t, token, 1)
	closed := setup(t, "", 1)

	for name, c := range map[string]struct {
		env  map[string]string
		args []string
		code int
		want string
	}{
		"wrong token":   {map[string]string{"HOOKLINE_ADMIN_TOKEN": "nope", "HOOKLINE_URL": b.url}, []string{"list"}, 1, "401 unauthorized: set HOOKLINE_ADMIN_TOKEN to the server's admin_token"},
		"no token":      {map[string]string{"HOOKLINE_URL": b.url}, []string{"list"}, 2, "HOOKLINE_ADMIN_TOKEN is not set"},
		"admin off":     {map[string]string{"HOOKLINE_ADMIN_TOKEN": token, "HOOKLINE_URL": closed.url}, []string{"list"}, 1, "admin API is off"},
		"admin off id":  {map[string]string{"HOOKLINE_ADMIN_TOKEN": token, "HOOKLINE_URL": closed.url}, []string{"show", "1"}, 1, "admin API is off"},
		"unreachable":   {map[string]string{"HOOKLINE_ADMIN_TOKEN": token, "HOOKLINE_URL": "http://127.0.0.1:1"}, []string{"list"}, 1, "cannot reach the admin API at http://127.0.0.1:1"},
		"bad reason":    {b.env(), []string{"list", "--reason", "oops"}, 2, "--reason"},
		"bad since":     {b.env(), []string{"list", "--since", "monday"}, 2, "--since"},
		"server 400":    {b.env(), []string{"retry", "--all", "--since", "monday"}, 1, "400 bad request: since"},
		"unknown flag":  {b.env(), []string{"list", "--nope"}, 2, "flag provided but not defined"},
		"unknown verb":  {b.env(), []string{"purge"}, 2, `unknown command "purge"`},
		"missing id":    {b.env(), []string{"show"}, 2, "one dead item ID"},
		"id and filter": {b.env(), []string{"retry", "1", "--source", "s"}, 2, "go with --all"},
		"all and id":    {b.env(), []string{"delete", "--all", "1", "--yes"}, 2, "takes no id"},
	} {
		r := run(t, c.env, c.args...)
		require.Equal(t, c.code, r.code, "%s: %s", name, r.stderr)
		require.Contains(t, r.stderr, c.want, name)
		require.Empty(t, r.stdout, name)
	}

	r := run(t, b.env(), "--help")
	require.Equal(t, 0, r.code)
	require.Contains(t, r.stdout, "usage: hookline dead")
	r = run(t, b.env())
	require.Equal(t, 2, r.code)
	require.Contains(t, r.stderr, "usage: hookline dead")
}
