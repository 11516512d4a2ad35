package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func runDestinations(t testing.TB, env map[string]string, args ...string) deadResult {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := &destinationsCommand{Getenv: func(k string) string { return env[k] }}
	code := cmd.Run(context.Background(), args, &out, &errb)
	return deadResult{code, out.String(), errb.String()}
}

// listLines runs `hookline destinations list` and returns its table's lines.
func listLines(t *testing.T, env map[string]string) []string {
	t.Helper()
	r := runDestinations(t, env, "list")
	require.Equal(t, 0, r.code, r.stderr)
	require.Empty(t, r.stderr)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 2, r.stdout)
	require.Regexp(t, `^SOURCE\s+NAME\s+STATE\s+QUEUED\s+IN_FLIGHT\s+FAILURES\s+PAUSED_AT\s+LAST_ERROR$`, lines[0])
	return lines
}

func TestDestinationsPauseResume(t *testing.T) {
	t.Parallel()
	b := deadSetup(t, deadToken, 0)
	_, err := b.pool.Exec(context.Background(), `WITH d AS (INSERT INTO hookline_deliveries (source, body) VALUES ('s', '{}') RETURNING id)
		INSERT INTO hookline_event_destinations (source, event_id, destination, delivery_id) SELECT 's', 'evt_' || i, 'default', id FROM d, generate_series(1, 3) i`)
	require.NoError(t, err)

	require.Regexp(t, `^s\s+default\s+active\s+3\s+0\s+0\s+-\s+-$`, listLines(t, b.env())[1])

	r := runDestinations(t, b.env(), "pause", "s", "default")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "paused destination s/default\n"+
		"its events are accepted and wait; deliver them with: hookline destinations resume s default\n", r.stdout)
	require.Regexp(t, `^s\s+default\s+paused\s+3\s+0\s+0\s+\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\s+-$`, listLines(t, b.env())[1])

	r = runDestinations(t, b.env(), "list", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var page struct {
		Items []map[string]any `json:"items"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &page))
	require.Len(t, page.Items, 1)
	it := page.Items[0]
	for _, k := range []string{"source", "name", "state", "queued", "in_flight", "failure_streak", "last_error", "paused_at"} {
		require.Contains(t, it, k)
	}
	require.Equal(t, "paused", it["state"])
	require.IsType(t, "", it["paused_at"])
	require.Nil(t, it["last_error"])

	r = runDestinations(t, b.env(), "resume", "s", "default", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	require.JSONEq(t, `{"status":"resumed","source":"s","name":"default"}`, r.stdout)
	require.Regexp(t, `^s\s+default\s+active\s+3\s+0\s+0\s+-\s+-$`, listLines(t, b.env())[1])

	r = runDestinations(t, b.env(), "resume", "--url", b.url, "s", "default")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "resumed destination s/default\n", r.stdout, "resuming an active destination is no error")

	_, err = b.pool.Exec(context.Background(), `UPDATE hookline_destinations SET circuit = 'open', failure_streak = 6,
		last_error = 'destination answered 502:' || chr(10) || 'bad gateway'`)
	require.NoError(t, err)
	require.Regexp(t, `^s\s+default\s+open\s+3\s+0\s+6\s+-\s+destination answered 502: bad gateway$`, listLines(t, b.env())[1])
}

func TestDestinationsErrorsSayWhatToDo(t *testing.T) {
	t.Parallel()
	b := deadSetup(t, deadToken, 0)
	closed := deadSetup(t, "", 0)

	for name, c := range map[string]struct {
		env  map[string]string
		args []string
		code int
		want string
	}{
		"unknown destination":  {b.env(), []string{"pause", "s", "nope"}, 1, "404: destination s/nope not found (not configured on the server"},
		"unknown source":       {b.env(), []string{"resume", "x", "default"}, 1, "404: destination x/default not found"},
		"wrong token":          {map[string]string{"HOOKLINE_ADMIN_TOKEN": "nope", "HOOKLINE_URL": b.url}, []string{"pause", "s", "default"}, 1, "401 unauthorized: set HOOKLINE_ADMIN_TOKEN to the server's admin_token"},
		"no token":             {map[string]string{"HOOKLINE_URL": b.url}, []string{"list"}, 2, "HOOKLINE_ADMIN_TOKEN is not set: export it with the server's admin_token"},
		"no token pause":       {map[string]string{"HOOKLINE_URL": b.url}, []string{"pause", "s", "default"}, 2, "HOOKLINE_ADMIN_TOKEN is not set"},
		"admin off":            {map[string]string{"HOOKLINE_ADMIN_TOKEN": deadToken, "HOOKLINE_URL": closed.url}, []string{"list"}, 1, "404 not found: the admin API is off"},
		"admin off pause":      {map[string]string{"HOOKLINE_ADMIN_TOKEN": deadToken, "HOOKLINE_URL": closed.url}, []string{"pause", "s", "default"}, 1, "404 not found: the admin API is off"},
		"unreachable":          {map[string]string{"HOOKLINE_ADMIN_TOKEN": deadToken, "HOOKLINE_URL": "http://127.0.0.1:1"}, []string{"list"}, 1, "cannot reach the admin API at http://127.0.0.1:1"},
		"missing name":         {b.env(), []string{"pause", "s"}, 2, "pause takes SOURCE NAME"},
		"extra argument":       {b.env(), []string{"resume", "s", "default", "x"}, 2, "resume takes SOURCE NAME"},
		"list with argument":   {b.env(), []string{"list", "s"}, 2, "list takes no arguments"},
		"unknown flag":         {b.env(), []string{"list", "--nope"}, 2, "flag provided but not defined"},
		"unknown verb":         {b.env(), []string{"delete"}, 2, `unknown command "delete"`},
		"dead's flags are not": {b.env(), []string{"list", "--source", "s"}, 2, "flag provided but not defined: -source"},
		"url scheme":           {b.env(), []string{"list", "--url", "ftp://x"}, 2, `--url "ftp://x": want an http:// or https:// URL`},
		"url not a url":        {b.env(), []string{"pause", "s", "default", "--url", "not-a-url"}, 2, `--url "not-a-url": want an http:// or https:// URL`},
		"env url unparsable":   {map[string]string{"HOOKLINE_ADMIN_TOKEN": deadToken, "HOOKLINE_URL": "http://[::1"}, []string{"list"}, 2, `HOOKLINE_URL "http://[::1": not a URL`},
	} {
		r := runDestinations(t, c.env, c.args...)
		require.Equal(t, c.code, r.code, "%s: %s", name, r.stderr)
		require.Contains(t, r.stderr, "hookline destinations: "+c.want, name)
		if c.code == 2 {
			require.Contains(t, r.stderr, "run 'hookline destinations --help' for usage", name)
		}
		require.Empty(t, r.stdout, name)
	}
	require.Regexp(t, `^s\s+default\s+active\s`, listLines(t, b.env())[1], "nothing was paused")

	// Without a token both commands answer alike.
	noToken := map[string]string{"HOOKLINE_URL": b.url}
	dead, dests := runDead(t, noToken, "list"), runDestinations(t, noToken, "list")
	require.Equal(t, dead.code, dests.code)
	require.Equal(t, strings.ReplaceAll(dead.stderr, "hookline dead", "hookline destinations"), dests.stderr)

	r := runDestinations(t, b.env(), "--help")
	require.Equal(t, 0, r.code)
	require.Contains(t, r.stdout, "usage: hookline destinations")
	r = runDestinations(t, b.env())
	require.Equal(t, 2, r.code)
	require.Contains(t, r.stderr, "usage: hookline destinations")
	for _, args := range [][]string{{"list", "-h"}, {"pause", "--help"}} {
		r = runDestinations(t, map[string]string{}, args...)
		require.Equal(t, 0, r.code, "%v: %s", args, r.stderr)
		require.Empty(t, r.stderr, args)
		require.Contains(t, r.stdout, "usage: hookline destinations", args)
		require.Contains(t, r.stdout, "flags of hookline destinations "+args[0]+":\n  -json", args)
	}
}

// TestDestinationsListEscapesText: a destination's last error (its answer's
// body) reaches the terminal escaped, and exactly with --json.
func TestDestinationsListEscapesText(t *testing.T) {
	t.Parallel()
	b := deadSetup(t, deadToken, 0)
	const lastError = "destination answered 500: \x1b]0;title\x07\x1b[31mdown\u009b\r\nfake line"
	_, err := b.pool.Exec(context.Background(), `INSERT INTO hookline_destinations (source, name, circuit, failure_streak, last_error) VALUES ('s', 'default', 'open', 6, $1)
		ON CONFLICT (source, name) DO UPDATE SET circuit = 'open', failure_streak = 6, last_error = $1`, lastError)
	require.NoError(t, err)
	lines := listLines(t, b.env())
	requireNoControls(t, strings.Join(lines, "\n"))
	require.Regexp(t, `^s\s+default\s+open\s+0\s+0\s+6\s+-\s+destination answered 500: \\x1b\]0;title\\x07\\x1b\[31mdown…$`, lines[1],
		"escaped, white space folded, cut to the column but not inside an escape")

	r := runDestinations(t, b.env(), "list", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var page struct {
		Items []struct {
			LastError string `json:"last_error"`
		} `json:"items"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &page))
	require.Equal(t, lastError, page.Items[0].LastError)
}

func TestDestinationsInUsage(t *testing.T) {
	t.Parallel()
	var out, errb bytes.Buffer
	require.Equal(t, 0, run([]string{"help"}, &out, &errb))
	require.Regexp(t, `(?m)^  destinations\s+list \| pause \| resume `, out.String())

	out.Reset()
	require.Equal(t, 0, run([]string{"destinations", "--help"}, &out, &errb), errb.String())
	require.Equal(t, destinationsUsage, out.String())
}
