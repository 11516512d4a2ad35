package ingest

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"
	"github.com/riverqueue/river"

	"github.com/hookline/hookline/internal/dberr"
	"github.com/hookline/hookline/jobs"
)

// Admin list limits (CONTRACT.md §4, §6 "Admin lists").
const (
	DefaultAdminLimit = 50
	MaxAdminLimit     = 500
)

// AdminConfig configures the admin API (CONTRACT.md §4 "Admin").
type AdminConfig struct {
	// Token is admin_token. Requests must carry "Authorization: Bearer
	// {Token}" (compared in constant time); anything else is answered 401.
	// Empty closes the admin API: every /admin route answers 404.
	Token string
	// Pool is the database; nil means the Server's pool.
	Pool *pgxpool.Pool
	// River inserts the jobs of operator retries and backs the River UI; an
	// insert-only client is enough. nil means the Server's client. Required
	// unless Token is empty.
	River *river.Client[pgx.Tx]
	// MaxAttempts returns a source's destination.max_attempts (the fresh
	// budget of an operator retry), false for a source not configured. nil
	// means the MaxAttempts of the Server's sources.
	MaxAttempts func(source string) (int, bool)
	// Context owns the River UI's background services (a job-count cache):
	// they stop when it is done. Required unless Token is empty or
	// NoRiverUI is set.
	Context context.Context
	// NoRiverUI leaves /admin/river/ unmounted (404).
	NoRiverUI bool
	// BulkBatch is the number of dead items per transaction in bulk retry
	// and delete (default jobs.DefaultBulkBatch, 100).
	BulkBatch int
	// Logger records operator actions; nil means the Server's logger.
	Logger *slog.Logger
}

// MountAdmin mounts the admin API under /admin on e: the dead set, the event
// lookup and the River UI (/admin/river/), all behind the admin token. e is
// the Server's own router (Echo()) when the admin API shares the ingest
// listener, or a router of its own for admin_listen.
//
// Routes (JSON; errors are {"error": "..."}):
//
//	GET    /admin/dead?source=&reason=&event_type=&since=&until=&limit=&cursor=
//	GET    /admin/dead/{id}
//	POST   /admin/dead/{id}/retry     202 {"status":"requeued", ...}
//	DELETE /admin/dead/{id}           204
//	POST   /admin/dead/retry          bulk, body {"source","reason","event_type","since","until","dry_run"}
//	POST   /admin/dead/delete         bulk, same body
//	GET    /admin/events/{source}/{event_id}
//	*      /admin/river/...           River UI
//
// A bulk filter with no fields matches the whole dead set; unknown fields are
// refused (400), so a misspelt filter never widens to everything.
func (s *Server) MountAdmin(e *echo.Echo, cfg AdminConfig) error {
	g := e.Group("/admin")
	g.Use(jsonErrors)
	if cfg.Token == "" {
		closed := func(c echo.Context) error { return c.JSON(http.StatusNotFound, errorBody{Error: "not found"}) }
		g.Any("", closed)
		g.Any("/*", closed)
		return nil
	}
	if cfg.Pool == nil {
		cfg.Pool = s.cfg.Pool
	}
	if cfg.River == nil {
		cfg.River = s.cfg.River
	}
	if cfg.River == nil {
		return errors.New("ingest: AdminConfig.River is required (an insert-only river.Client is enough)")
	}
	if cfg.MaxAttempts == nil {
		cfg.MaxAttempts = func(source string) (int, bool) {
			src, ok := s.sources[source]
			if !ok {
				return 0, false
			}
			return src.MaxAttempts, true
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = s.log
	}
	dead, err := jobs.NewDeadSet(&jobs.DeadSetConfig{Pool: cfg.Pool, River: cfg.River, MaxAttempts: cfg.MaxAttempts, BulkBatch: cfg.BulkBatch})
	if err != nil {
		return err
	}
	a := &admin{dead: dead, log: cfg.Logger}

	g.Use(adminAuth(cfg.Token))
	g.GET("/dead", a.list)
	g.GET("/dead/:id", a.show)
	g.DELETE("/dead/:id", a.delete)
	g.POST("/dead/:id/retry", a.retry)
	g.POST("/dead/retry", a.bulkRetry)
	g.POST("/dead/delete", a.bulkDelete)
	g.GET("/events/:source/:event_id", a.event)
	if !cfg.NoRiverUI {
		if cfg.Context == nil {
			return errors.New("ingest: AdminConfig.Context is required for the River UI (it stops the UI's background services); or set NoRiverUI")
		}
		if err := mountRiverUI(cfg.Context, g, cfg.River, cfg.Logger); err != nil {
			return err
		}
	}
	return nil
}

type admin struct {
	dead *jobs.DeadSet
	log  *slog.Logger
}

// errUnauthorized is the whole answer to a bad or missing token: it never
// says which.
var errUnauthorized = errorBody{Error: "unauthorized"}

// adminAuth checks "Authorization: Bearer {token}". Under /admin/river/ it
// also takes HTTP Basic with the token as password (any user name), since a
// browser cannot send a bearer token when it opens the UI; there a 401
// carries WWW-Authenticate so the browser asks for it.
func adminAuth(token string) echo.MiddlewareFunc {
	want := sha256.Sum256([]byte(token))
	// Hashing first makes the comparison constant-time in the length too.
	ok := func(got string) bool {
		h := sha256.Sum256([]byte(got))
		return subtle.ConstantTimeCompare(h[:], want[:]) == 1
	}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			req := c.Request()
			ui := strings.HasPrefix(req.URL.Path, riverUIPrefix+"/") || req.URL.Path == riverUIPrefix
			scheme, cred, _ := strings.Cut(req.Header.Get(echo.HeaderAuthorization), " ")
			switch {
			case strings.EqualFold(scheme, "Bearer") && ok(strings.TrimSpace(cred)):
				return next(c)
			case ui && strings.EqualFold(scheme, "Basic"):
				if _, pw, found := req.BasicAuth(); found && ok(pw) {
					return next(c)
				}
			}
			if ui {
				c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Basic realm="hookline admin", charset="UTF-8"`)
			}
			return c.JSON(http.StatusUnauthorized, errUnauthorized)
		}
	}
}

// jsonErrors answers echo's own errors (404 of an unknown /admin path, 405)
// as {"error": "..."}, also on a router that is not the Server's.
func jsonErrors(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		err := next(c)
		var he *echo.HTTPError
		if err != nil && errors.As(err, &he) && !c.Response().Committed {
			return c.JSON(he.Code, errorBody{Error: strings.ToLower(fmt.Sprint(he.Message))})
		}
		return err
	}
}

// fail maps the dead set's errors to HTTP answers: the one place that does.
func (a *admin) fail(c echo.Context, err error) error {
	var pe paramError
	switch {
	case errors.As(err, &pe):
		return c.JSON(http.StatusBadRequest, errorBody{Error: pe.Error()})
	case errors.Is(err, jobs.ErrDeadItemNotFound):
		return c.JSON(http.StatusNotFound, errorBody{Error: "dead item not found"})
	case errors.Is(err, jobs.ErrEventNotFound):
		return c.JSON(http.StatusNotFound, errorBody{Error: "event not found"})
	case errors.Is(err, jobs.ErrUnknownSource):
		return c.JSON(http.StatusConflict, errorBody{Error: err.Error() + "; add the source to the config (or delete the item)"})
	}
	a.log.Error("admin request failed", "method", c.Request().Method, "path", c.Path(), "error", err.Error())
	if dberr.Unavailable(err) {
		return c.JSON(http.StatusServiceUnavailable, errorBody{Error: "database unavailable; try again"})
	}
	return c.JSON(http.StatusInternalServerError, errorBody{Error: "internal error"})
}

// paramError is a bad query parameter or body field, named.
type paramError struct{ name, msg string }

func (e paramError) Error() string { return e.name + ": " + e.msg }

// deadItem is a dead item in the admin API (CONTRACT.md §4).
type deadItem struct {
	ID        string    `json:"id"`
	Source    string    `json:"source"`
	EventID   string    `json:"event_id"`
	EventType string    `json:"event_type"`
	Reason    string    `json:"reason"`
	Attempts  int       `json:"attempts"`
	LastError string    `json:"last_error"`
	DeadAt    time.Time `json:"dead_at"`
}

// deadItemDetail is a dead item with its payload: GET /admin/dead/{id}.
type deadItemDetail struct {
	deadItem
	ContentType string          `json:"content_type"`
	Headers     json.RawMessage `json:"headers"`
	// Payload is the raw body as a string; if it is not valid UTF-8 it is
	// base64 (standard, padded) and PayloadEncoding says "base64".
	Payload         string  `json:"payload"`
	PayloadEncoding string  `json:"payload_encoding,omitempty"`
	DeliveryID      *string `json:"delivery_id"`
}

// deadItemList is a page of GET /admin/dead. NextCursor is empty on the last page.
type deadItemList struct {
	Items      []deadItem `json:"items"`
	NextCursor string     `json:"next_cursor,omitempty"`
}

// retryAnswer answers POST /admin/dead/{id}/retry (202).
type retryAnswer struct {
	Status  string `json:"status"` // "requeued"
	Source  string `json:"source"`
	EventID string `json:"event_id"`
	// JobID is the River job that processes the event; Joined says it was
	// already active (no second job is inserted, see jobs.DeadSet.Retry).
	JobID  int64 `json:"job_id"`
	Joined bool  `json:"joined"`
	// Override is always true: the retry is an operator override of a
	// completed claim (CONTRACT.md §4).
	Override bool `json:"override"`
}

// bulkFilter is the body of POST /admin/dead/retry and /admin/dead/delete.
// No fields: the whole dead set.
type bulkFilter struct {
	Source    string `json:"source,omitempty"`
	Reason    string `json:"reason,omitempty"`
	EventType string `json:"event_type,omitempty"`
	Since     string `json:"since,omitempty"` // RFC 3339, dead_at >= since
	Until     string `json:"until,omitempty"` // RFC 3339, dead_at < until
	DryRun    bool   `json:"dry_run,omitempty"`
}

// bulkAnswer answers a bulk retry or delete. Matched counts the items that
// matched when it started; Retried or Deleted those actually handled (fewer
// if items left the dead set meanwhile); Skipped the items a retry left
// because their source is not configured. A dry run sets only Matched.
type bulkAnswer struct {
	Matched int  `json:"matched"`
	Retried *int `json:"retried,omitempty"`
	Deleted *int `json:"deleted,omitempty"`
	Skipped int  `json:"skipped,omitempty"`
	DryRun  bool `json:"dry_run,omitempty"`
}

// eventAnswer answers GET /admin/events/{source}/{event_id}.
type eventAnswer struct {
	Source      string     `json:"source"`
	EventID     string     `json:"event_id"`
	EventType   string     `json:"event_type"`
	State       string     `json:"state"` // queued | processing | completed | dead
	Deliveries  int        `json:"deliveries"`
	Attempts    int        `json:"attempts"`
	ReceivedAt  time.Time  `json:"received_at"`
	CompletedAt *time.Time `json:"completed_at"` // null until completion
	LastError   *string    `json:"last_error"`
	DeadItemID  *string    `json:"dead_item_id"`
}

func itemOf(it *jobs.DeadItem) deadItem {
	return deadItem{ID: strconv.FormatInt(it.ID, 10), Source: it.Source, EventID: it.EventID, EventType: it.EventType,
		Reason: it.Reason, Attempts: it.Attempts, LastError: it.LastError, DeadAt: it.DeadAt.UTC()}
}

func parseTime(name, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, paramError{name, fmt.Sprintf("%q is not an RFC 3339 time (e.g. 2026-01-02T15:04:05Z)", v)}
	}
	return t, nil
}

func filterOf(source, reason, eventType, since, until string) (jobs.DeadFilter, error) {
	f := jobs.DeadFilter{Source: source, Reason: reason, EventType: eventType}
	var err error
	if f.Since, err = parseTime("since", since); err != nil {
		return f, err
	}
	if f.Until, err = parseTime("until", until); err != nil {
		return f, err
	}
	if err := f.Validate(); err != nil {
		name, msg, _ := strings.Cut(err.Error(), ": ")
		return f, paramError{name, msg}
	}
	return f, nil
}

// Cursors are opaque to clients: base64url of "v1.{dead_at unix µs}.{id}",
// the key of the last item of the page (jobs.DeadKey).
func encodeCursor(k jobs.DeadKey) string {
	return base64.RawURLEncoding.EncodeToString([]byte(fmt.Sprintf("v1.%d.%d", k.DeadAt.UnixMicro(), k.ID)))
}

func decodeCursor(s string) (*jobs.DeadKey, error) {
	bad := paramError{"cursor", "malformed; pass next_cursor from the previous page unchanged"}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, bad
	}
	parts := strings.Split(string(raw), ".")
	if len(parts) != 3 || parts[0] != "v1" {
		return nil, bad
	}
	us, err1 := strconv.ParseInt(parts[1], 10, 64)
	id, err2 := strconv.ParseInt(parts[2], 10, 64)
	if err1 != nil || err2 != nil || id <= 0 {
		return nil, bad
	}
	return &jobs.DeadKey{DeadAt: time.UnixMicro(us), ID: id}, nil
}

func (a *admin) list(c echo.Context) error {
	q := c.QueryParams()
	f, err := filterOf(q.Get("source"), q.Get("reason"), q.Get("event_type"), q.Get("since"), q.Get("until"))
	if err != nil {
		return a.fail(c, err)
	}
	limit := DefaultAdminLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return a.fail(c, paramError{"limit", fmt.Sprintf("%q is not a positive integer", v)})
		}
		limit = min(n, MaxAdminLimit)
	}
	var after *jobs.DeadKey
	if v := q.Get("cursor"); v != "" {
		if after, err = decodeCursor(v); err != nil {
			return a.fail(c, err)
		}
	}
	items, more, err := a.dead.List(c.Request().Context(), f, after, limit)
	if err != nil {
		return a.fail(c, err)
	}
	out := deadItemList{Items: make([]deadItem, len(items))}
	for i := range items {
		out.Items[i] = itemOf(&items[i])
	}
	if more {
		last := items[len(items)-1]
		out.NextCursor = encodeCursor(jobs.DeadKey{DeadAt: last.DeadAt, ID: last.ID})
	}
	return c.JSON(http.StatusOK, out)
}

// deadID parses the {id} segment; anything but a positive integer names no
// item, so it is a 404 like an id that does not exist.
func deadID(c echo.Context) (int64, error) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, jobs.ErrDeadItemNotFound
	}
	return id, nil
}

func (a *admin) show(c echo.Context) error {
	id, err := deadID(c)
	if err != nil {
		return a.fail(c, err)
	}
	it, err := a.dead.Get(c.Request().Context(), id)
	if err != nil {
		return a.fail(c, err)
	}
	out := deadItemDetail{deadItem: itemOf(it), ContentType: it.ContentType, Headers: it.Headers, Payload: string(it.Payload)}
	if len(out.Headers) == 0 {
		out.Headers = json.RawMessage("{}")
	}
	if !utf8.Valid(it.Payload) {
		out.Payload, out.PayloadEncoding = base64.StdEncoding.EncodeToString(it.Payload), "base64"
	}
	if it.DeliveryID != nil {
		d := strconv.FormatInt(*it.DeliveryID, 10)
		out.DeliveryID = &d
	}
	return c.JSON(http.StatusOK, out)
}

func (a *admin) delete(c echo.Context) error {
	id, err := deadID(c)
	if err != nil {
		return a.fail(c, err)
	}
	if err := a.dead.Delete(c.Request().Context(), id); err != nil {
		return a.fail(c, err)
	}
	a.log.Info("operator deleted dead item", "dead_id", id)
	return c.NoContent(http.StatusNoContent)
}

func (a *admin) retry(c echo.Context) error {
	id, err := deadID(c)
	if err != nil {
		return a.fail(c, err)
	}
	r, err := a.dead.Retry(c.Request().Context(), id)
	if err != nil {
		return a.fail(c, err)
	}
	a.log.Info("operator retry", "source", r.Source, "event_id", r.EventID, "dead_id", r.DeadID, "reason", r.Reason,
		"job_id", r.JobID, "joined", r.Joined, "override_before", r.OverrideBefore)
	return c.JSON(http.StatusAccepted, retryAnswer{Status: "requeued", Source: r.Source, EventID: r.EventID,
		JobID: r.JobID, Joined: r.Joined, Override: true})
}

// maxBulkBody caps the body of a bulk request: a filter is small.
const maxBulkBody = 64 << 10

func (a *admin) readFilter(c echo.Context) (jobs.DeadFilter, bool, error) {
	var bf bulkFilter
	dec := json.NewDecoder(io.LimitReader(c.Request().Body, maxBulkBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&bf); err != nil && !errors.Is(err, io.EOF) {
		return jobs.DeadFilter{}, false, paramError{"body", "want a JSON object with source, reason, event_type, since, until, dry_run: " + err.Error()}
	}
	f, err := filterOf(bf.Source, bf.Reason, bf.EventType, bf.Since, bf.Until)
	return f, bf.DryRun, err
}

func (a *admin) bulkRetry(c echo.Context) error {
	f, dry, err := a.readFilter(c)
	if err != nil {
		return a.fail(c, err)
	}
	ctx := c.Request().Context()
	if dry {
		n, err := a.dead.Count(ctx, f)
		if err != nil {
			return a.fail(c, err)
		}
		return c.JSON(http.StatusOK, bulkAnswer{Matched: n, DryRun: true})
	}
	res, err := a.dead.RetryAll(ctx, f)
	if err != nil {
		return a.fail(c, err)
	}
	a.log.Info("operator bulk retry", "filter", fmt.Sprintf("%+v", f), "matched", res.Matched, "retried", res.Done, "skipped", res.Skipped)
	return c.JSON(http.StatusOK, bulkAnswer{Matched: res.Matched, Retried: &res.Done, Skipped: res.Skipped})
}

func (a *admin) bulkDelete(c echo.Context) error {
	f, dry, err := a.readFilter(c)
	if err != nil {
		return a.fail(c, err)
	}
	ctx := c.Request().Context()
	if dry {
		n, err := a.dead.Count(ctx, f)
		if err != nil {
			return a.fail(c, err)
		}
		return c.JSON(http.StatusOK, bulkAnswer{Matched: n, DryRun: true})
	}
	res, err := a.dead.DeleteAll(ctx, f)
	if err != nil {
		return a.fail(c, err)
	}
	a.log.Info("operator bulk delete", "filter", fmt.Sprintf("%+v", f), "matched", res.Matched, "deleted", res.Done)
	return c.JSON(http.StatusOK, bulkAnswer{Matched: res.Matched, Deleted: &res.Done})
}

// pathParam returns a path segment unescaped: echo matches on the raw path
// when the URL has escapes (an event id with "/" arrives as %2F).
func pathParam(c echo.Context, name string) string {
	v := c.Param(name)
	if c.Request().URL.RawPath != "" {
		if u, err := url.PathUnescape(v); err == nil {
			return u
		}
	}
	return v
}

func (a *admin) event(c echo.Context) error {
	ev, err := a.dead.Event(c.Request().Context(), pathParam(c, "source"), pathParam(c, "event_id"))
	if err != nil {
		return a.fail(c, err)
	}
	out := eventAnswer{Source: ev.Source, EventID: ev.EventID, EventType: ev.EventType, State: ev.State,
		Deliveries: ev.Deliveries, Attempts: ev.Attempts, ReceivedAt: ev.ReceivedAt.UTC(), LastError: ev.LastError}
	if ev.CompletedAt != nil {
		t := ev.CompletedAt.UTC()
		out.CompletedAt = &t
	}
	if ev.DeadItemID != nil {
		id := strconv.FormatInt(*ev.DeadItemID, 10)
		out.DeadItemID = &id
	}
	return c.JSON(http.StatusOK, out)
}
