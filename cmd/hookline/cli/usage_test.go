package cli

import (
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// usageDir makes a temporary directory the working directory, with a valid
// ./hookline.yaml (the default config) whose database and listener refuse
// connections, and no HOOKLINE_CONFIG: a command that fell back to the
// default config would read that file. Not parallel (t.Chdir, t.Setenv).
func usageDir(t *testing.T) {
	t.Helper()
	t.Chdir(t.TempDir())
	t.Setenv("HOOKLINE_CONFIG", "")
	t.Setenv("DATABASE_URL", "postgres://hookline@127.0.0.1:1/hookline?connect_timeout=1")
	const good = `listen: 127.0.0.1:1
database_url: postgres://hookline@127.0.0.1:1/hookline?connect_timeout=1
sources:
  - {name: s, provider: stripe, secrets: [whsec_usage], destination: {url: "http://127.0.0.1:1/x"}}
`
	require.NoError(t, os.WriteFile("hookline.yaml", []byte(good), 0o600))
	require.NoError(t, os.WriteFile("other.yaml", []byte(good), 0o600))
	require.NoError(t, os.WriteFile("bad.yaml", []byte("listen: \":x\"\nsources: []\n"), 0o600))
}

// run runs the command with no Go handlers, as cmd/hookline does.
func run(args []string, stdout, stderr io.Writer) int {
	return (&command{}).run(args, stdout, stderr)
}

func runMain(args ...string) deadResult {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return deadResult{code, out.String(), errb.String()}
}

// TestStrayArgumentsRefused: a command that takes no arguments refuses one
// (exit 2, named) before it reads a config, instead of ignoring it and every
// flag after it and running against ./hookline.yaml.
func TestStrayArgumentsRefused(t *testing.T) {
	usageDir(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"check", "bad.yaml"}, `check: unexpected argument "bad.yaml" (check takes no arguments; to check that file: hookline check --config bad.yaml)`},
		{[]string{"check", "bad.yaml", "--db"}, `check: unexpected argument "bad.yaml"`},
		{[]string{"check", "--db", "x"}, `check: unexpected argument "x" (check takes no arguments; to check that file: hookline check --config x)`},
		{[]string{"migrate", "status", "x", "--config", "other.yaml"}, `migrate status: unexpected argument "x" (migrate status takes only flags; hookline migrate status -h lists them)`},
		{[]string{"migrate", "down", "oops", "--config", "other.yaml"}, `migrate down: unexpected argument "oops"`},
		{[]string{"migrate", "up", "--config", "other.yaml", "now"}, `migrate up: unexpected argument "now"`},
		{[]string{"migrate", "--config", "other.yaml", "up"}, `migrate: the direction comes first, then the flags: hookline migrate up|down|status [--config FILE] [--all]`},
		{[]string{"migrate", "up", "--all", "--config", "other.yaml"}, `migrate up: --all applies only to migrate down`},
		{[]string{"serve", "prod.yaml"}, `serve: unexpected argument "prod.yaml" (serve takes no arguments; to use that file as the config: hookline serve --config prod.yaml)`},
		{[]string{"serve", "worker", "--role", "worker"}, `serve: unexpected argument "worker" (serve takes only flags; hookline serve -h lists them)`},
		{[]string{"dev", "x"}, `dev: unexpected argument "x" (dev takes only flags; hookline dev -h lists them)`},
		{[]string{"send", "--source", "s", "extra-arg"}, `send: unexpected argument "extra-arg"`},
		{[]string{"send", "extra-arg", "--source", "s"}, `send: unexpected argument "extra-arg"`},
		{[]string{"providers", "stripe"}, `providers: unexpected argument "stripe" (providers takes no arguments)`},
	} {
		r := runMain(c.args...)
		require.Equal(t, 2, r.code, "%v: %s%s", c.args, r.stdout, r.stderr)
		require.True(t, strings.HasPrefix(r.stderr, "hookline: "+c.want), "%v: %s", c.args, r.stderr)
		require.Equal(t, 1, strings.Count(r.stderr, "\n"), "%v: one line", c.args)
		require.Empty(t, r.stdout, "%v: nothing ran", c.args)
	}
	_, err := os.Stat(".hookline")
	require.ErrorIs(t, err, os.ErrNotExist, "dev started nothing")

	// What they say is right: the file goes in --config.
	r := runMain("check", "--config", "bad.yaml")
	require.Equal(t, 2, r.code)
	require.Equal(t, "hookline: sources: at least one source is required\n", r.stderr, "bad.yaml was read")
}

// TestHelpListsFlags: -h and --help print a command's usage and flags on
// stdout and exit 0, for every command.
func TestHelpListsFlags(t *testing.T) {
	usageDir(t)
	for _, c := range []struct {
		args  []string
		usage string
		flags []string
	}{
		{[]string{"serve", "-h"}, "usage: hookline serve [--config FILE]", []string{"-config", "-role", "-no-migrate"}},
		{[]string{"serve", "--role", "worker", "--help"}, "usage: hookline serve", []string{"-role"}},
		{[]string{"dev", "-h"}, "usage: hookline dev [--listen ADDR]", []string{"-listen", "-otlp-endpoint"}},
		{[]string{"send", "--help"}, "usage: hookline send --config FILE --source NAME", []string{"-config", "-source", "-file", "-event-id", "-type", "-url"}},
		{[]string{"check", "-h"}, "usage: hookline check [--config FILE] [--db]", []string{"-config", "-db"}},
		{[]string{"providers", "-h"}, "usage: hookline providers", nil},
		{[]string{"providers", "--help"}, "usage: hookline providers", nil},
		{[]string{"migrate", "-h"}, "usage: hookline migrate up|down|status", []string{"-config", "-all"}},
		{[]string{"migrate", "down", "-h"}, "usage: hookline migrate up|down|status", []string{"-config", "-all"}},
		{[]string{"dead", "list", "-h"}, "usage: hookline dead", []string{"-destination", "-limit", "-url"}},
		{[]string{"destinations", "list", "--help"}, "usage: hookline destinations", []string{"-json", "-url"}},
		{[]string{"reconcile", "-h"}, "usage: hookline reconcile --source NAME", []string{"--url"}},
	} {
		r := runMain(c.args...)
		require.Equal(t, 0, r.code, "%v: %s", c.args, r.stderr)
		require.Empty(t, r.stderr, c.args)
		require.True(t, strings.HasPrefix(r.stdout, c.usage), "%v: %s", c.args, r.stdout)
		for _, f := range c.flags {
			require.Contains(t, r.stdout, f, c.args)
		}
		require.NotContains(t, r.stdout, "PROVIDER", "%v: help, not the command's output", c.args)
	}

	r := runMain("serve", "--nope")
	require.Equal(t, 2, r.code)
	require.Equal(t, "hookline: serve: flag provided but not defined: -nope (hookline serve -h lists its flags)\n", r.stderr)
}

// TestBadURLIsBadUsage: a --url (or $HOOKLINE_URL) that is not an http://
// or https:// URL is bad usage (exit 2, naming it), not a network failure.
func TestBadURLIsBadUsage(t *testing.T) {
	usageDir(t)
	for _, u := range []string{"ftp://x", "not-a-url", "http://[::1", "http://"} {
		r := runMain("send", "--source", "s", "--url", u)
		require.Equal(t, 2, r.code, "%s: %s", u, r.stderr)
		require.Contains(t, r.stderr, `hookline: send: --url "`+u+`": `, u)
		require.Empty(t, r.stdout, u)

		var out, errb bytes.Buffer
		env := map[string]string{"HOOKLINE_ADMIN_TOKEN": "t"}
		code := (&reconcileCommand{Getenv: func(k string) string { return env[k] }}).Run(context.Background(), []string{"--source", "s", "--url", u}, &out, &errb)
		require.Equal(t, 2, code, "%s: %s", u, errb.String())
		require.Contains(t, errb.String(), `hookline reconcile: --url "`+u+`": `, u)

		env["HOOKLINE_URL"] = u
		r = runDead(t, env, "list")
		require.Equal(t, 2, r.code, "%s: %s", u, r.stderr)
		require.Contains(t, r.stderr, `hookline dead: HOOKLINE_URL "`+u+`": `, u)
	}
}

// TestHelpCommand: `hookline help COMMAND` prints that command's usage and
// flags (as `hookline COMMAND --help` does), not the list of commands; an
// unknown command is bad usage.
func TestHelpCommand(t *testing.T) {
	usageDir(t)
	for _, c := range []struct {
		cmd, usage string
	}{
		{"serve", "usage: hookline serve [--config FILE]"},
		{"migrate", "usage: hookline migrate up|down|status"},
		{"send", "usage: hookline send --config FILE --source NAME"},
		{"check", "usage: hookline check [--config FILE] [--db]"},
		{"dead", "usage: hookline dead"},
	} {
		r := runMain("help", c.cmd)
		require.Equal(t, 0, r.code, "%s: %s", c.cmd, r.stderr)
		require.True(t, strings.HasPrefix(r.stdout, c.usage), "help %s: %s", c.cmd, r.stdout)
		require.Empty(t, r.stderr, c.cmd)
	}
	r := runMain("help")
	require.Equal(t, 0, r.code)
	require.True(t, strings.HasPrefix(r.stdout, "hookline — "), r.stdout)

	r = runMain("help", "nope")
	require.Equal(t, 2, r.code)
	require.Contains(t, r.stderr, `unknown command "nope"`)
}

// TestSendUnreadableFileIsBadUsage: a --file that cannot be read is bad
// usage (exit 2) naming --file, not a refusal by the server (exit 1).
func TestSendUnreadableFileIsBadUsage(t *testing.T) {
	usageDir(t)
	require.NoError(t, os.Mkdir("adir", 0o755))
	for _, f := range []string{"missing.json", "adir"} {
		r := runMain("send", "--source", "s", "--file", f)
		require.Equal(t, 2, r.code, "%s: %s", f, r.stderr)
		require.Contains(t, r.stderr, `send: --file "`+f+`": `, f)
		require.Empty(t, r.stdout, "nothing was sent")
	}
}

// TestDevFlagsCheckedFirst: hookline dev checks --listen and
// --otlp-endpoint before it starts or reaches a database, and names the
// flag (exit 2); it writes nothing under ./.hookline.
func TestDevFlagsCheckedFirst(t *testing.T) {
	usageDir(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"dev", "--listen", "bogus"}, `dev: --listen: "bogus": want host:port`},
		{[]string{"dev", "--listen", ":x"}, `dev: --listen: ":x": the port must be a number`},
		{[]string{"dev", "--otlp-endpoint", "ftp://x"}, `dev: --otlp-endpoint: "ftp://x": want an http or https URL`},
	} {
		r := runMain(c.args...)
		require.Equal(t, 2, r.code, "%v: %s", c.args, r.stderr)
		require.Contains(t, r.stderr, c.want, c.args)
		require.NotContains(t, r.stdout, "DATABASE_URL", "%v: checked before the database", c.args)
		_, err := os.Stat(".hookline")
		require.True(t, os.IsNotExist(err), "%v: wrote .hookline", c.args)
	}
}
