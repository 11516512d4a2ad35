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
	"strings"
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
	// *ProviderError; anything else is a 503 ("database unavailable; try
	// again" when the database could not be reached, its detail logged).
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
// A bulk filter with no fields ({}) matches the whole dead set; anything else
// that is not one JSON object of the filter's fields is refused (400): an
// empty body, null, data after the object, a null, unknown or repeated
// field, a query string (the filter is never read from it); a body over
// 64 KiB is a 413.
// So a misspelt or misplaced filter never widens to everything. A known path
// asked with another method is a 405 with an Allow header.
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
	g.Use(noStore, jsonErrors, bearerAuth(cfg.Token))
	a.routes(e, g)
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

// methodHandler is one method of a route and its handler.
type methodHandler struct {
	method string
	h      echo.HandlerFunc
}

// routes adds the JSON routes to g, the /admin group of e. A known path
// asked with a method it does not take is answered 405 with the Allow
// header listing those it takes (so GET /admin/dead/retry is not the item
// "retry"); an unknown path stays a 404.
func (a *api) routes(e *echo.Echo, g *echo.Group) {
	table := []struct {
		path     string
		handlers []methodHandler
	}{
		{"/dead", []methodHandler{{http.MethodGet, a.list}}},
		{"/dead/retry", []methodHandler{{http.MethodPost, a.bulkRetry}}},
		{"/dead/delete", []methodHandler{{http.MethodPost, a.bulkDelete}}},
		{"/dead/:id", []methodHandler{{http.MethodGet, a.show}, {http.MethodDelete, a.delete}}},
		{"/dead/:id/retry", []methodHandler{{http.MethodPost, a.retry}}},
		{"/events", []methodHandler{{http.MethodGet, a.searchEvents}}},
		{"/events/:source/:event_id", []methodHandler{{http.MethodGet, a.event}}},
		{"/overview", []methodHandler{{http.MethodGet, a.overviewRead}}},
		{"/destinations", []methodHandler{{http.MethodGet, a.destinations}}},
		{"/destinations/:source/:name/pause", []methodHandler{{http.MethodPost, a.pause}}},
		{"/destinations/:source/:name/resume", []methodHandler{{http.MethodPost, a.resume}}},
		{"/sources/:source/reconcile", []methodHandler{{http.MethodPost, a.reconcile}}},
	}
	allow := make(map[string]string, len(table)) // by the route's full path, as c.Path() has it
	for _, r := range table {
		methods := make([]string, len(r.handlers))
		for i, mh := range r.handlers {
			methods[i] = mh.method
		}
		allowed := strings.Join(methods, ", ")
		allow["/admin"+r.path] = allowed
		// Every method echo knows takes the path, so the router never
		// falls through to another route; those the route takes replace
		// the 405.
		g.Any(r.path, methodNotAllowed(allowed))
		for _, mh := range r.handlers {
			g.Add(mh.method, r.path, mh.h)
		}
	}
	// A method echo does not list (FOO) reaches the group's catch-all: the
	// path is known if GET finds one of the routes above.
	g.RouteNotFound("/*", func(c echo.Context) error {
		probe := e.NewContext(c.Request(), nil)
		e.Router().Find(http.MethodGet, echo.GetPath(c.Request()), probe)
		if allowed, ok := allow[probe.Path()]; ok {
			return methodNotAllowed(allowed)(c)
		}
		return echo.ErrNotFound
	})
}

// methodNotAllowed answers 405 with the Allow header: the methods the path
// takes.
func methodNotAllowed(allowed string) echo.HandlerFunc {
	return func(c echo.Context) error {
		c.Response().Header().Set(echo.HeaderAllow, allowed)
		return httpjson.Error(c, http.StatusMethodNotAllowed, "method not allowed; this route takes "+allowed)
	}
}
