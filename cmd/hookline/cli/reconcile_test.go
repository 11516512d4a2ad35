package cli

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/internal/config"
	"github.com/hookline/hookline/internal/pgtest"
	"github.com/hookline/hookline/internal/reconcile/fakeapi"
)

// `hookline reconcile` against a running server whose source reconciles
// from a fake Stripe events API.
func TestReconcileCommand(t *testing.T) {
	t.Parallel()
	var events []fakeapi.Event
	for i := range 3 {
		events = append(events, fakeapi.Event{ID: fmt.Sprintf("evt_cli_%d", i), Type: "charge.succeeded", Created: time.Now().Add(-time.Hour)})
	}
	api := fakeapi.NewStripe(t, "rk_test_cli", events)
	dest := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(dest.Close)
	cfg, err := config.Parse(fmt.Appendf(nil, `listen: 127.0.0.1:0
database_url: %q
admin_token: %s
sources:
  - name: s
    provider: stripe
    secrets: [whsec_cli]
    reconcile: {api_key: rk_test_cli, api_url: %q}
    destination: {url: %q}
  - name: plain
    provider: stripe
    secrets: [whsec_cli]
    destination: {url: %q}
`, pgtest.NewURL(t), deadToken, api.URL, dest.URL, dest.URL), os.Getenv)
	require.NoError(t, err)
	env := map[string]string{"HOOKLINE_ADMIN_TOKEN": deadToken, "HOOKLINE_URL": "http://" + startApp(t, cfg).Addrs()[0].String()}
	run := func(args ...string) deadResult { return runReconcile(env, args...) }

	r := run("--source", "s")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "reconciled s: the provider listed 3 events, 3 were missing and are now stored\n", r.stdout)
	r = run("--source", "s", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	require.JSONEq(t, `{"checked":3,"missing":0}`, r.stdout)

	r = run("--source", "plain")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "400 bad request: the source has no reconcile block")
	r = run("--source", "nope")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "source nope is not configured")
	r = run()
	require.Equal(t, 2, r.code)
	require.Contains(t, r.stderr, "--source is required")
	r = run("--help")
	require.Equal(t, 0, r.code)
	require.Contains(t, r.stdout, "usage: hookline reconcile")
	api.FailNext(http.StatusServiceUnavailable, 10)
	r = run("--source", "s")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "502: the provider's API failed")
	require.Equal(t, 1, strings.Count(r.stderr, "again later"), "the server's advice, not repeated: %s", r.stderr)
}
