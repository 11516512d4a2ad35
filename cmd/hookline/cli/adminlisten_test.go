package cli

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/internal/app"
	"github.com/hookline/hookline/internal/config"
	"github.com/hookline/hookline/internal/pgtest"
)

// With admin_listen set, the admin commands pointed at listen are told
// that the admin API is not there, not that the dead item, destination or
// source they named does not exist; on admin_listen they work.
func TestAdminCommandsOnListenWithAdminListen(t *testing.T) {
	t.Parallel()
	cfg, err := config.Parse(fmt.Appendf(nil, `listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
database_url: %q
admin_token: %s
sources:
  - name: s
    provider: stripe
    secrets: [whsec_cli]
    destination: {url: "http://127.0.0.1:1/hook"}
`, pgtest.NewURL(t), deadToken), os.Getenv)
	require.NoError(t, err)
	addrs := startApp(t, cfg).Addrs()
	require.Len(t, addrs, 2)
	public := map[string]string{"HOOKLINE_ADMIN_TOKEN": deadToken, "HOOKLINE_URL": "http://" + addrs[0].String()}
	admin := map[string]string{"HOOKLINE_ADMIN_TOKEN": deadToken, "HOOKLINE_URL": "http://" + addrs[1].String()}

	const wrongListener = "404 not found: the admin API is off on " // ... or points at the wrong listener (admin_listen?)
	for name, r := range map[string]deadResult{
		"dead list":          runDead(t, public, "list"),
		"dead show":          runDead(t, public, "show", "1"),
		"dead retry":         runDead(t, public, "retry", "1"),
		"dead delete":        runDead(t, public, "delete", "1"),
		"destinations list":  runDestinations(t, public, "list"),
		"destinations pause": runDestinations(t, public, "pause", "s", "default"),
		"reconcile":          runReconcile(public, "--source", "s"),
	} {
		require.Equal(t, 1, r.code, "%s: %s", name, r.stderr)
		require.Contains(t, r.stderr, wrongListener, name)
		require.Contains(t, r.stderr, "admin_listen?", name)
		require.Empty(t, r.stdout, name)
	}

	// The same commands on admin_listen reach the admin API.
	r := runDead(t, admin, "show", "1")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "dead item 1 not found")
	r = runDestinations(t, admin, "pause", "s", "default")
	require.Equal(t, 0, r.code, r.stderr)
	r = runDestinations(t, admin, "resume", "s", "default")
	require.Equal(t, 0, r.code, r.stderr)
	r = runReconcile(admin, "--source", "s")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "400 bad request: the source has no reconcile block")
}

// serve's error for an address it cannot listen on names the field that
// gave it.
func TestServeNamesTheListenerItCannotOpen(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { taken.Close() })
	cfg, err := config.Parse(fmt.Appendf(nil, `listen: 127.0.0.1:0
admin_listen: %s
database_url: %q
admin_token: %s
sources:
  - name: s
    provider: stripe
    secrets: [whsec_cli]
    destination: {url: "http://127.0.0.1:1/hook"}
`, taken.Addr(), pgtest.NewURL(t), deadToken), os.Getenv)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, err := app.New(ctx, cfg, app.Options{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	err = a.Run(ctx, nil)
	require.Error(t, err)
	require.True(t, strings.HasPrefix(err.Error(), "admin_listen "+taken.Addr().String()+": "), err.Error())
}

// startApp runs cfg's app until the test ends, and returns it once it
// serves.
func startApp(t *testing.T, cfg *config.Config) *app.App {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	a, err := app.New(ctx, cfg, app.Options{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() { done <- a.Run(ctx, func() { close(ready) }) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-ready:
	case err := <-done:
		done <- err // for the cleanup
		t.Fatalf("the app stopped before it served: %v", err)
	}
	return a
}

// runReconcile runs `hookline reconcile args...` with env as its
// environment.
func runReconcile(env map[string]string, args ...string) deadResult {
	var out, errb bytes.Buffer
	code := (&reconcileCommand{Getenv: func(k string) string { return env[k] }}).Run(context.Background(), args, &out, &errb)
	return deadResult{code, out.String(), errb.String()}
}
