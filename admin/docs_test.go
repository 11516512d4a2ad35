package admin_test

import (
	"context"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/admin"
)

// TestDocsListEveryRoute: docs/operations.md's "Admin API" table lists
// every route the admin API serves, as METHOD /admin/path/{param}, and no
// route it does not serve. The console's pages are docs/console.md's.
func TestDocsListEveryRoute(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../docs/operations.md")
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(raw), "\n## Admin API\n")
	require.True(t, ok, `docs/operations.md has no "## Admin API" section`)
	section, _, _ = strings.Cut(section, "\n## ")

	// Nothing connects before it is used.
	pool, err := pgxpool.New(context.Background(), "postgres://nobody@127.0.0.1:1/none")
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	rc, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	e := echo.New()
	require.NoError(t, admin.Mount(e, admin.Config{Token: "t", Pool: pool, River: rc,
		MaxAttempts: func(string, string) (int, bool) { return 10, true }, NoRiverUI: true}))

	param := regexp.MustCompile(`:([a-z_]+)`)
	served := map[string]bool{}
	for _, r := range e.Routes() {
		if !strings.HasPrefix(r.Path, "/admin/") || strings.HasPrefix(r.Path, "/admin/ui") || strings.Contains(r.Path, "*") ||
			strings.Contains(r.Name, "methodNotAllowed") || r.Method == echo.RouteNotFound {
			continue
		}
		route := r.Method + " " + param.ReplaceAllString(r.Path, "{$1}")
		served[route] = true
		if !strings.Contains(section, "`"+route+"`") && !strings.Contains(section, "`"+route+"?") {
			t.Errorf("docs/operations.md: the Admin API table does not list %s", route)
		}
	}
	require.NotEmpty(t, served, "no admin route found")
	route := regexp.MustCompile("`((?:GET|HEAD|POST|PUT|PATCH|DELETE) /admin/[^`?]*)")
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		first, _, _ := strings.Cut(strings.TrimPrefix(line, "| "), " | ")
		for _, m := range route.FindAllStringSubmatch(first, -1) {
			if !served[m[1]] {
				t.Errorf("docs/operations.md: the Admin API table lists %s, which the admin API does not serve", m[1])
			}
		}
	}
}
