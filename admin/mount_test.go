package admin_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/admin"
	"github.com/hookline/hookline/internal/pgtest"
)

func TestMountConfig(t *testing.T) {
	t.Parallel()
	// Neither connects before it is used.
	pool, err := pgxpool.New(context.Background(), "postgres://nobody@127.0.0.1:1/none")
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	rc, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	budget := func(string, string) (int, bool) { return 10, true }

	for want, cfg := range map[string]admin.Config{
		"admin: Config.Pool is required":                                                                               {Token: "t", River: rc, MaxAttempts: budget, NoRiverUI: true},
		"admin: Config.River is required (an insert-only river.Client is enough)":                                      {Token: "t", Pool: pool, MaxAttempts: budget, NoRiverUI: true},
		"admin: Config.MaxAttempts is required (the sources' destination.max_attempts)":                                {Token: "t", Pool: pool, River: rc, NoRiverUI: true},
		"admin: Config.Context is required for the River UI (it stops the UI's background services); or set NoRiverUI": {Token: "t", Pool: pool, River: rc, MaxAttempts: budget},
	} {
		e := echo.New()
		require.EqualError(t, admin.Mount(e, cfg), want)
		require.Empty(t, e.Routes(), "%s: nothing mounted", want)
	}

	// Closed: nothing else is needed, and every /admin route is a 404.
	e := echo.New()
	require.NoError(t, admin.Mount(e, admin.Config{}))
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/admin/dead", nil))
	require.Equal(t, http.StatusNotFound, rec.Code)
	require.Equal(t, `{"error":"not found"}`+"\n", rec.Body.String())

	// Open without the River UI: no Context needed.
	e = echo.New()
	require.NoError(t, admin.Mount(e, admin.Config{Token: "t", Pool: pool, River: rc, MaxAttempts: budget, NoRiverUI: true}))
	rec = httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/admin/river/", nil)
	req.Header.Set("Authorization", "Bearer t")
	e.ServeHTTP(rec, req)
	require.Equal(t, http.StatusNotFound, rec.Code)
}

// On a router of its own (admin_listen), with echo's default error handler,
// the admin API still answers echo's errors in JSON; paths outside /admin
// keep the router's own answers.
func TestAdminOwnRouter(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	logger := slog.New(slog.DiscardHandler)
	rc, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Logger: logger})
	require.NoError(t, err)
	e := echo.New()
	require.NoError(t, admin.Mount(e, admin.Config{Token: adminToken, Pool: pool, River: rc, Logger: logger, Context: t.Context(),
		MaxAttempts: func(string, string) (int, bool) { return 0, false }}))
	hs := httptest.NewServer(e)
	t.Cleanup(hs.Close)

	get := func(path string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, hs.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(raw)
	}
	status, body := get("/admin/dead")
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, `{"items":[]}`+"\n", body)
	status, body = get("/admin/nope")
	require.Equal(t, http.StatusNotFound, status)
	require.Equal(t, `{"error":"not found"}`+"\n", body)
	status, _ = get("/admin/river/")
	require.Equal(t, http.StatusOK, status)
	status, body = get("/elsewhere")
	require.Equal(t, http.StatusNotFound, status)
	require.Equal(t, `{"message":"Not Found"}`+"\n", body, "echo's own answer outside /admin")
}
