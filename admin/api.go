package admin

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/hookline/hookline/internal/dberr"
	"github.com/hookline/hookline/internal/httpjson"
	"github.com/hookline/hookline/jobs"
)

// api serves the JSON routes.
type api struct {
	dead     *jobs.DeadSet
	events   *jobs.Events
	dests    *jobs.Destinations
	names    []jobs.DestinationName
	overview *jobs.OverviewCache
	log      *slog.Logger
	// reconcileFn is Config.Reconcile.
	reconcileFn func(ctx context.Context, source string) (ReconcileResult, error)
}

// fail maps the dead set's errors to HTTP answers: the one place that does.
func (a *api) fail(c echo.Context, err error) error {
	var pe paramError
	switch {
	case errors.As(err, &pe):
		return httpjson.Error(c, http.StatusBadRequest, pe.Error())
	case errors.Is(err, errBulkBodyTooLarge):
		return httpjson.Error(c, http.StatusRequestEntityTooLarge, err.Error())
	case errors.Is(err, jobs.ErrDeadItemNotFound):
		return httpjson.Error(c, http.StatusNotFound, "dead item not found")
	case errors.Is(err, jobs.ErrEventNotFound):
		return httpjson.Error(c, http.StatusNotFound, "event not found")
	case errors.Is(err, jobs.ErrUnknownDestination):
		return httpjson.Error(c, http.StatusNotFound, err.Error())
	case errors.Is(err, jobs.ErrUnknownSource):
		return httpjson.Error(c, http.StatusConflict, err.Error()+"; add the source to the config (or delete the item)")
	case errors.Is(err, jobs.ErrQueryTimeout):
		return httpjson.Error(c, http.StatusServiceUnavailable, err.Error()+"; narrow the search (source, since and until, id_prefix)")
	}
	a.log.Error("admin request failed", "method", c.Request().Method, "path", c.Path(), "error", err.Error())
	if dberr.Unavailable(err) {
		return httpjson.Error(c, http.StatusServiceUnavailable, "database unavailable; try again")
	}
	return httpjson.Error(c, http.StatusInternalServerError, "internal error")
}

// list answers GET /admin/dead: a page of dead items, newest first.
func (a *api) list(c echo.Context) error {
	q := c.QueryParams()
	if err := queryOf(q, "source", "destination", "reason", "event_type", "since", "until", "limit", "cursor"); err != nil {
		return a.fail(c, err)
	}
	f, err := filterOf(q.Get("source"), q.Get("destination"), q.Get("reason"), q.Get("event_type"), q.Get("since"), q.Get("until"))
	if err != nil {
		return a.fail(c, err)
	}
	limit, err := limitOf(q.Get("limit"))
	if err != nil {
		return a.fail(c, err)
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

// show answers GET /admin/dead/{id}: the item with its headers and payload.
func (a *api) show(c echo.Context) error {
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

// delete answers DELETE /admin/dead/{id}: 204.
func (a *api) delete(c echo.Context) error {
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

// retry answers POST /admin/dead/{id}/retry: 202, the event requeued.
func (a *api) retry(c echo.Context) error {
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

// bulkFields are the fields of a bulk filter, as the errors list them.
const bulkFields = "source, destination, reason, event_type, since, until, dry_run"

// errBulkBodyTooLarge is a bulk body over maxBulkBody: a 413.
var errBulkBodyTooLarge = errors.New("body: larger than 64 KiB; a bulk filter is a small JSON object (" + bulkFields + ")")

// readFilter reads the filter of a bulk request, strictly, since a filter
// that is not read acts on more than was meant (on the whole dead set, and
// not as a dry run): the body must be exactly one JSON object ({} is the
// whole dead set) with only the filter's fields, spelt exactly, none of them
// null; a query string is refused, since the filter (and dry_run) is never
// read from it.
func readFilter(c echo.Context) (jobs.DeadFilter, bool, error) {
	req := c.Request()
	if req.URL.RawQuery != "" {
		return jobs.DeadFilter{}, false, paramError{"query", "the bulk routes take no query parameters; " +
			`send the filter and dry_run in the JSON body, e.g. {"source":"stripe","dry_run":true}`}
	}
	raw, err := io.ReadAll(io.LimitReader(req.Body, maxBulkBody+1))
	if err != nil {
		return jobs.DeadFilter{}, false, paramError{"body", "could not be read: " + err.Error()}
	}
	if len(raw) > maxBulkBody {
		return jobs.DeadFilter{}, false, errBulkBodyTooLarge
	}
	bad := func(msg string) error {
		return paramError{"body", "want one JSON object with " + bulkFields + " ({} for the whole dead set); " + msg}
	}
	switch v := bytes.TrimLeft(raw, " \t\r\n"); {
	case len(v) == 0:
		return jobs.DeadFilter{}, false, bad("the body is empty")
	case bytes.HasPrefix(v, []byte("null")):
		return jobs.DeadFilter{}, false, bad("got null")
	case v[0] != '{':
		return jobs.DeadFilter{}, false, bad("got another JSON value, or no JSON")
	}
	fields, err := objectFields(raw)
	if err != nil {
		var pe paramError
		if errors.As(err, &pe) {
			return jobs.DeadFilter{}, false, pe
		}
		return jobs.DeadFilter{}, false, bad(err.Error())
	}
	var bf bulkFilter
	text := map[string]*string{"source": &bf.Source, "destination": &bf.Destination, "reason": &bf.Reason,
		"event_type": &bf.EventType, "since": &bf.Since, "until": &bf.Until}
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		v := fields[name]
		s, isText := text[name]
		switch {
		case !isText && name != "dry_run":
			return jobs.DeadFilter{}, false, bad(fmt.Sprintf("unknown field %q", name))
		case string(v) == "null":
			return jobs.DeadFilter{}, false, paramError{name, "null; leave the field out instead"}
		case isText && json.Unmarshal(v, s) != nil:
			return jobs.DeadFilter{}, false, paramError{name, "want a string"}
		case !isText && json.Unmarshal(v, &bf.DryRun) != nil:
			return jobs.DeadFilter{}, false, paramError{name, "want true or false"}
		}
	}
	f, err := filterOf(bf.Source, bf.Destination, bf.Reason, bf.EventType, bf.Since, bf.Until)
	return f, bf.DryRun, err
}

// objectFields reads raw, one JSON object and nothing after it, into its
// fields. A field given twice is a paramError naming it: decoding into a
// map would keep the last silently, so {"dry_run":true,"dry_run":false}
// would act for real.
func objectFields(raw []byte) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, errors.New("want a JSON object")
	}
	fields := map[string]json.RawMessage{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		name, _ := t.(string) // an object's keys are strings
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		if _, dup := fields[name]; dup {
			return nil, paramError{name, "given more than once"}
		}
		fields[name] = v
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("more follows the object")
	}
	return fields, nil
}

// bulkRetry answers POST /admin/dead/retry.
func (a *api) bulkRetry(c echo.Context) error {
	f, dry, err := readFilter(c)
	if err != nil {
		return a.fail(c, err)
	}
	if dry {
		return a.dryRun(c, f)
	}
	res, err := a.dead.RetryAll(c.Request().Context(), f)
	if err != nil {
		return a.fail(c, err)
	}
	a.log.Info("operator bulk retry", "filter", fmt.Sprintf("%+v", f), "matched", res.Matched, "retried", res.Done, "skipped", res.Skipped)
	return c.JSON(http.StatusOK, bulkAnswer{Matched: res.Matched, Retried: &res.Done, Skipped: res.Skipped})
}

// bulkDelete answers POST /admin/dead/delete.
func (a *api) bulkDelete(c echo.Context) error {
	f, dry, err := readFilter(c)
	if err != nil {
		return a.fail(c, err)
	}
	if dry {
		return a.dryRun(c, f)
	}
	res, err := a.dead.DeleteAll(c.Request().Context(), f)
	if err != nil {
		return a.fail(c, err)
	}
	a.log.Info("operator bulk delete", "filter", fmt.Sprintf("%+v", f), "matched", res.Matched, "deleted", res.Done)
	return c.JSON(http.StatusOK, bulkAnswer{Matched: res.Matched, Deleted: &res.Done})
}

// dryRun answers a bulk request with dry_run: the count of matching items,
// nothing changed.
func (a *api) dryRun(c echo.Context, f jobs.DeadFilter) error {
	n, err := a.dead.Count(c.Request().Context(), f)
	if err != nil {
		return a.fail(c, err)
	}
	return c.JSON(http.StatusOK, bulkAnswer{Matched: n, DryRun: true})
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

// isText reports whether v is valid UTF-8 without a NUL byte: text that
// Postgres can compare, as every stored source and event id is.
func isText(v string) bool {
	return utf8.ValidString(v) && !strings.ContainsRune(v, 0)
}

// event answers GET /admin/events/{source}/{event_id}: its state,
// destinations, attempts log and stored payload.
func (a *api) event(c echo.Context) error {
	ctx := c.Request().Context()
	source, id := pathParam(c, "source"), pathParam(c, "event_id")
	if !isText(source) || !isText(id) {
		// No event has such a source or id (ingest refuses them), and
		// Postgres could not compare them.
		return a.fail(c, jobs.ErrEventNotFound)
	}
	ev, err := a.events.Lookup(ctx, source, id)
	if err != nil {
		return a.fail(c, err)
	}
	p, err := a.events.Payload(ctx, ev.Source, ev.EventID)
	if err != nil {
		return a.fail(c, err)
	}
	return c.JSON(http.StatusOK, eventOf(ev, p))
}

// searchEvents answers GET /admin/events: a page of events, newest first.
func (a *api) searchEvents(c echo.Context) error {
	q := c.QueryParams()
	if err := queryOf(q, "source", "state", "type", "id_prefix", "since", "until", "limit", "cursor"); err != nil {
		return a.fail(c, err)
	}
	f, err := eventFilterOf(q.Get("source"), q.Get("state"), q.Get("type"), q.Get("id_prefix"), q.Get("since"), q.Get("until"))
	if err != nil {
		return a.fail(c, err)
	}
	limit, err := limitOf(q.Get("limit"))
	if err != nil {
		return a.fail(c, err)
	}
	var after *jobs.EventKey
	if v := q.Get("cursor"); v != "" {
		if after, err = jobs.ParseEventCursor(v); err != nil {
			return a.fail(c, paramError{"cursor", "malformed; pass next_cursor from the previous page unchanged"})
		}
	}
	items, more, err := a.events.Search(c.Request().Context(), f, after, limit)
	if err != nil {
		return a.fail(c, err)
	}
	out := eventList{Items: make([]eventSummary, len(items))}
	for i := range items {
		out.Items[i] = eventSummaryOf(&items[i])
	}
	if more {
		out.NextCursor = items[len(items)-1].Key().Cursor()
	}
	return c.JSON(http.StatusOK, out)
}

// overviewRead answers GET /admin/overview: per source, deliveries and
// failed attempts per minute over the last hour, and the queue's lag.
func (a *api) overviewRead(c echo.Context) error {
	ov, err := a.overview.Read(c.Request().Context())
	if err != nil {
		return a.fail(c, err)
	}
	return c.JSON(http.StatusOK, overviewOf(ov))
}

// destinations answers GET /admin/destinations.
func (a *api) destinations(c echo.Context) error {
	list, err := a.events.DestinationLags(c.Request().Context(), a.names)
	if err != nil {
		return a.fail(c, err)
	}
	items := make([]destinationAnswer, len(list))
	for i, d := range list {
		items[i] = destinationOf(d)
	}
	return c.JSON(http.StatusOK, destinationList{Items: items})
}

// pause answers POST /admin/destinations/{source}/{name}/pause.
func (a *api) pause(c echo.Context) error { return a.setPaused(c, true) }

// resume answers POST /admin/destinations/{source}/{name}/resume.
func (a *api) resume(c echo.Context) error { return a.setPaused(c, false) }

func (a *api) setPaused(c echo.Context, pause bool) error {
	source, name := pathParam(c, "source"), pathParam(c, "name")
	set, status := a.dests.Resume, "resumed"
	if pause {
		set, status = a.dests.Pause, "paused"
	}
	if err := set(c.Request().Context(), source, name); err != nil {
		return a.fail(c, err)
	}
	a.log.Info("destination "+status+" by an operator", "source", source, "destination", name)
	return c.JSON(http.StatusAccepted, pauseAnswer{Status: status, Source: source, Name: name})
}

// pauseAnswer answers pause and resume, its fields in this order.
type pauseAnswer struct {
	Status string `json:"status"` // paused | resumed
	Source string `json:"source"`
	Name   string `json:"name"`
}
