package admin_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"

	"github.com/labstack/echo/v4"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/hookline/hookline/admin"
	"github.com/hookline/hookline/internal/pgtest"
)

// A Go program that serves the admin API on a router of its own (hookline's
// admin_listen), next to an ingest server elsewhere.
func ExampleMount() {
	ctx, stop := context.WithCancel(context.Background())
	defer stop() // stops the River UI's background services
	tb, done := pgtest.ExampleTB()
	defer done()
	pool := pgtest.NewPool(tb) // in production: pgxpool.New(ctx, databaseURL), then migrations.Up

	// An insert-only River client is enough: retries only insert jobs.
	rc, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	// The attempt budget of each configured source (destination.max_attempts).
	budgets := map[string]int{"stripe": 10}

	e := echo.New()
	err = admin.Mount(e, admin.Config{
		Token:       "s3cret", // in production: admin_token
		Pool:        pool,
		River:       rc,
		MaxAttempts: func(source, _ string) (int, bool) { n, ok := budgets[source]; return n, ok },
		Logger:      slog.New(slog.DiscardHandler),
		Context:     ctx,
	})
	if err != nil {
		panic(err)
	}
	hs := httptest.NewServer(e) // in production: http.Server{Addr: adminListen, Handler: e}
	defer hs.Close()

	for _, token := range []string{"s3cret", "guess"} {
		req, _ := http.NewRequest(http.MethodGet, hs.URL+"/admin/dead?source=stripe", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := hs.Client().Do(req)
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("%d %s", resp.StatusCode, body)
	}

	// Output:
	// 200 {"items":[]}
	// 401 {"error":"unauthorized"}
}
