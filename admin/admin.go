// Package admin is hookline's admin API: the JSON routes under /admin that
// list, show, retry and delete dead items (one by one or in bulk by filter),
// search events and look one up, pause and resume destinations, and the
// overview; the operator console under /admin/ui/ (package admin/console)
// and River's own UI under /admin/river/; all behind the admin token.
//
// It does not depend on package ingest: Mount takes everything it needs (the
// pool, a River client, the sources' attempt budgets) in Config, so the admin
// API can share the ingest router or have a listener of its own.
package admin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"
	"github.com/riverqueue/river"

	"github.com/hookline/hookline/admin/console"
	"github.com/hookline/hookline/internal/httpjson"
	"github.com/hookline/hookline/jobs"
)

// Limits of GET /admin/dead and GET /admin/events: the page size without
// ?limit=, and the most a ?limit= gets (a larger one is clamped to it).
const (
	DefaultAdminLimit = 50
	MaxAdminLimit     = 500
)

// Config configures the admin API.
type Config struct {
	// Token is admin_token. Requests must carry "Authorization: Bearer
	// {Token}" (compared in constant time); anything else is answered 401.
	// Empty closes the admin API: every /admin route answers 404, and the
	// other fields are not needed.
	Token string
	// Pool is the database. Required unless Token is empty.
	Pool *pgxpool.Pool
	// River inserts the jobs of operator retries and backs the River UI; an
	// insert-only client is enough. Required unless Token is empty.
	River *river.Client[pgx.Tx]
	// MaxAttempts returns a destination's max_attempts (the fresh budget of
	// an operator retry), false for a destination not configured: its items
	// are not retried (409 for one, skipped in bulk). Required unless Token
	// is empty.
	MaxAttempts func(source, destination string) (int, bool)
	// Destinations are the configured destinations, for GET
	// /admin/destinations and pause and resume (a destination not listed is
	// a 404 there).
	Destinations []jobs.DestinationName
	// Logger records operator actions and failed requests; nil means
	// slog.Default().
	Logger *slog.Logger
	// Context owns the River UI's background services (a job-count cache):
	// they stop when it is done. Required unless Token is empty or
	// NoRiverUI is set.
	Context context.Context
	// NoRiverUI leaves /admin/river/ unmounted (404).
	NoRiverUI bool
	// BulkBatch is the number of dead items per transaction in bulk retry
	// and delete (default jobs.DefaultBulkBatch, 100).
	BulkBatch int
	// NoConsole leaves the operator console (/admin/ui/) unmounted: its paths
	// are then the JSON API's (401 without the bearer token, else 404).
	NoConsole bool
	// Reconcile runs one reconciliation of a source now, for POST
	// /admin/sources/{source}/reconcile (nil: every source answers 400).
	// Its errors: ErrNoSuchSource, ErrNotReconciled, ErrReconcileRunning,
	// *ProviderError; anything else is a 503.
	Reconcile func(ctx context.Context, source string) (ReconcileResult, error)
}

// OverviewTTL is how long one overview (GET /admin/overview and the
// console's first page) is shared between requests.
const OverviewTTL = 5 * time.Second

// Mount mounts the admin API under /admin on e: the dead set, the event
// lookup and the River UI (/admin/river/), all behind cfg.Token. e is the
// ingest router when the admin API shares the ingest listener, or a router
// of its own for admin_listen.
//
// Routes (JSON; errors are {"error": "..."}):
//
//	GET    /admin/dead?source=&destination=&reason=&event_type=&since=&until=&limit=&cursor=
//	GET    /admin/dead/{id}
//	POST   /admin/dead/{id}/retry     202 {"status":"requeued", ...}
//	DELETE /admin/dead/{id}           204
//	POST   /admin/dead/retry          bulk, body {"source","destination","reason","event_type","since","until","dry_run"}
//	POST   /admin/dead/delete         bulk, same body
//	GET    /admin/events?source=&state=&type=&id_prefix=&since=&until=&limit=&cursor=
//	GET    /admin/events/{source}/{event_id}
//	GET    /admin/overview
//	GET    /admin/destinations
//	POST   /admin/destinations/{source}/{name}/pause    202
//	POST   /admin/destinations/{source}/{name}/resume   202
//	POST   /admin/sources/{source}/reconcile            200 {"checked","missing"}
//	*      /admin/river/...           River UI
//	*      /admin/ui/...              the operator console (HTML; see package console)
//
// A bulk filter with no fields matches the whole dead set; unknown fields are
// refused (400), so a misspelt filter never widens to everything.
//
// Mount checks cfg before it adds any route: on an error, e is unchanged.
func Mount(e *echo.Echo, cfg Config) error {
	if cfg.Token == "" {
		mountClosed(e.Group("/admin"))
		return nil
	}
	if err := cfg.check(); err != nil {
		return err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	dead, err := jobs.NewDeadSet(&jobs.DeadSetConfig{Pool: cfg.Pool, River: cfg.River, MaxAttempts: cfg.MaxAttempts, BulkBatch: cfg.BulkBatch})
	if err != nil {
		return fmt.Errorf("admin: %w", err)
	}
	events := jobs.NewEvents(cfg.Pool)
	a := &api{dead: dead, events: events, log: cfg.Logger, names: cfg.Destinations, reconcileFn: cfg.Reconcile,
		dests:    jobs.NewDestinations(cfg.Pool, cfg.River, cfg.Destinations),
		overview: jobs.NewOverviewCache(events, cfg.Destinations, OverviewTTL)}
	var ops *console.Console
	if !cfg.NoConsole {
		ops, err = console.New(console.Config{Token: cfg.Token, Dead: dead, Events: events, Destinations: a.dests,
			Names: cfg.Destinations, Overview: a.overview, Logger: cfg.Logger, RiverUI: !cfg.NoRiverUI})
		if err != nil {
			return fmt.Errorf("admin: %w", err)
		}
	}
	var ui http.Handler
	if !cfg.NoRiverUI {
		if ui, err = riverUI(cfg.Context, cfg.River, cfg.Logger); err != nil {
			return err
		}
	}
	g := e.Group("/admin")
	g.Use(jsonErrors, bearerAuth(cfg.Token))
	a.routes(g)
	if ui != nil {
		mountRiverUI(g, ui)
	}
	if ops != nil {
		// Its own group: the console's session cookie opens /admin/ui/ and
		// nothing else; the routes above keep wanting the bearer token.
		ops.Mount(e)
	}
	return nil
}

// check reports the first required field of an open admin API that is unset.
func (cfg *Config) check() error {
	switch {
	case cfg.Pool == nil:
		return errors.New("admin: Config.Pool is required")
	case cfg.River == nil:
		return errors.New("admin: Config.River is required (an insert-only river.Client is enough)")
	case cfg.MaxAttempts == nil:
		return errors.New("admin: Config.MaxAttempts is required (the sources' destination.max_attempts)")
	case cfg.Context == nil && !cfg.NoRiverUI:
		return errors.New("admin: Config.Context is required for the River UI (it stops the UI's background services); or set NoRiverUI")
	}
	return nil
}

// mountClosed answers every /admin route 404, whatever the credentials.
func mountClosed(g *echo.Group) {
	g.Use(jsonErrors)
	closed := func(c echo.Context) error { return httpjson.Error(c, http.StatusNotFound, "not found") }
	g.Any("", closed)
	g.Any("/*", closed)
}

// routes adds the JSON routes to g, the /admin group.
func (a *api) routes(g *echo.Group) {
	g.GET("/dead", a.list)
	g.GET("/dead/:id", a.show)
	g.DELETE("/dead/:id", a.delete)
	g.POST("/dead/:id/retry", a.retry)
	g.POST("/dead/retry", a.bulkRetry)
	g.POST("/dead/delete", a.bulkDelete)
	g.GET("/events", a.searchEvents)
	g.GET("/events/:source/:event_id", a.event)
	g.GET("/overview", a.overviewRead)
	g.GET("/destinations", a.destinations)
	g.POST("/destinations/:source/:name/pause", a.pause)
	g.POST("/destinations/:source/:name/resume", a.resume)
	g.POST("/sources/:source/reconcile", a.reconcile)
}
