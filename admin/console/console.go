// Package console is hookline's operator console: server-rendered HTML
// pages under /admin/ui/ over the same Go types the admin API serves as
// JSON (jobs.Events, jobs.DeadSet, jobs.Destinations, jobs.OverviewCache).
//
// Pages (GET and HEAD; what a page shows is in the HTML the server sends,
// and the embedded script only enhances it; every page is Cache-Control:
// no-store, and the script reloads one the browser restores from its
// back/forward cache):
//
//	/admin/ui/                              overview (the login form without a session)
//	/admin/ui/events                        search: source, state, type, id prefix, time; newest first, paged
//	/admin/ui/events/{source}/{event_id}    one event: payload, headers, per destination its attempts
//	/admin/ui/event?source=…&id=…           the same, for an id (or source) that is "." or ".."
//	/admin/ui/dead                          the dead set: filters, selection, bulk retry and delete
//	/admin/ui/dead/{id}                     one dead item: why it died, its own payload and headers
//	/admin/ui/dead/confirm?…                a bulk action's dry run: what it would act on, and the form that acts
//	/admin/ui/destinations                  state, backlog, circuit, pause and resume
//
// Actions (POST, each with the session's CSRF token in its body, from the
// console's own origin; each answers with a redirect, so that Back and
// reload never post again): /login, /logout, /dead/{id}/retry,
// /dead/{id}/delete, /dead/bulk (the dry run, which fixes the window the
// action covers and sends the browser to /dead/confirm; then the act),
// /destinations/{source}/{name}/pause and …/resume.
//
// The admin token is exchanged for a session cookie (HttpOnly,
// SameSite=Strict, Path=/admin/ui/) that is an HMAC of its expiry under a
// key derived from the token: any instance with the same token accepts it,
// and changing the token ends every session. The cookie opens /admin/ui/
// only; the JSON routes keep wanting the bearer token.
package console

import (
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/hookline/hookline/jobs"
)

// Prefix is where the console is served.
const Prefix = "/admin/ui"

// DefaultSessionTTL is how long a login lasts without SessionTTL.
const DefaultSessionTTL = 12 * time.Hour

// Config configures the console. Every field but Logger, SessionTTL and
// RiverUI is required.
type Config struct {
	// Token is admin_token: what the login form takes, and the key of the
	// sessions and CSRF tokens.
	Token        string
	Dead         *jobs.DeadSet
	Events       *jobs.Events
	Destinations *jobs.Destinations
	// Names are the configured destinations (their sources fill the
	// filters' choices and the overview).
	Names    []jobs.DestinationName
	Overview *jobs.OverviewCache
	// Logger records logins and operator actions; nil means slog.Default().
	Logger *slog.Logger
	// SessionTTL is how long a login lasts (default DefaultSessionTTL).
	SessionTTL time.Duration
	// RiverUI links River's UI (/admin/river/) from the menu.
	RiverUI bool
}

// Console serves the pages; Mount adds them to a router.
type Console struct {
	cfg      Config
	log      *slog.Logger
	sessions *sessions
	origin   *http.CrossOriginProtection
	views    *views
	sources  []string
}

// New checks cfg and prepares the console.
func New(cfg Config) (*Console, error) {
	switch {
	case cfg.Token == "":
		return nil, errors.New("console: Config.Token is required")
	case cfg.Dead == nil || cfg.Events == nil || cfg.Destinations == nil || cfg.Overview == nil:
		return nil, errors.New("console: Config.Dead, Events, Destinations and Overview are required")
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = DefaultSessionTTL
	}
	c := &Console{cfg: cfg, log: cfg.Logger, sessions: newSessions(cfg.Token, cfg.SessionTTL),
		origin: http.NewCrossOriginProtection(), views: loadViews()}
	if c.log == nil {
		c.log = slog.Default()
	}
	seen := map[string]bool{}
	for _, n := range cfg.Names {
		if !seen[n.Source] {
			seen[n.Source] = true
			c.sources = append(c.sources, n.Source)
		}
	}
	return c, nil
}

// Mount adds the console's routes to e under Prefix, in a group of their
// own: the admin API's bearer check does not apply to them, and their
// session does not apply to anything else.
func (c *Console) Mount(e *echo.Echo) {
	g := e.Group(Prefix, c.secureHeaders, c.htmlErrors)
	g.GET("", func(ec echo.Context) error { return ec.Redirect(http.StatusMovedPermanently, Prefix+"/") })
	g.Match([]string{http.MethodGet, http.MethodHead}, "/static/:file", c.static)
	g.POST("/login", c.login, c.sameOrigin)
	// HEAD too: uptime probes ask with it (net/http sends no body).
	page := func(path string, h echo.HandlerFunc) {
		g.Match([]string{http.MethodGet, http.MethodHead}, path, h, c.withSession)
	}
	page("/", c.overviewPage)
	page("/events", c.eventsPage)
	page("/events/:source/:event_id", c.eventPage)
	page("/event", c.eventPage)
	page("/dead", c.deadPage)
	page("/dead/confirm", c.confirmPage)
	page("/dead/:id", c.deadItemPage)
	page("/destinations", c.destinationsPage)
	act := func(path string, h echo.HandlerFunc) { g.POST(path, h, c.sameOrigin, c.withSession, c.checkCSRF) }
	act("/logout", c.logout)
	act("/dead/:id/retry", c.retryOne)
	act("/dead/:id/delete", c.deleteOne)
	act("/dead/bulk", c.bulk)
	act("/destinations/:source/:name/pause", c.pause)
	act("/destinations/:source/:name/resume", c.resume)
}
