package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/hookline/hookline/internal/dberr"
	"github.com/hookline/hookline/jobs"
)

// maxSelect caps how many dead items one bulk action over a selection
// names (a page shows pageSize).
const maxSelect = 500

// classify maps an error of the jobs package to a status and a message for
// the operator: the one place that does.
func classify(err error) (int, string) {
	switch {
	case errors.Is(err, jobs.ErrEventNotFound):
		return http.StatusNotFound, "No such event."
	case errors.Is(err, jobs.ErrDeadItemNotFound):
		return http.StatusNotFound, "That dead item is gone: retried or deleted meanwhile, or its event completed."
	case errors.Is(err, jobs.ErrUnknownDestination):
		return http.StatusNotFound, "No such destination is configured: " + err.Error() + "."
	case errors.Is(err, jobs.ErrUnknownSource):
		return http.StatusConflict, err.Error() + "; add the source to the config (or delete the item)."
	case errors.Is(err, jobs.ErrQueryTimeout):
		return http.StatusServiceUnavailable, "The query took longer than " + jobs.QueryTimeout.String() + "; narrow it."
	case dberr.Unavailable(err):
		return http.StatusServiceUnavailable, "The database is unavailable; try again."
	}
	return http.StatusInternalServerError, "Internal error; the server's log has the details."
}

// doneMessage is the note a page shows after an action sent the browser
// back to it (?done=…): built from known words and numbers only.
func doneMessage(q url.Values) string {
	n, of, skipped := q.Get("n"), q.Get("of"), q.Get("skipped")
	for _, v := range []string{n, of, skipped} {
		if _, err := strconv.Atoi(v); v != "" && err != nil {
			return ""
		}
	}
	msg := ""
	switch q.Get("done") {
	case "retried-one":
		return "Retry queued: the destination processes the event again."
	case "deleted-one":
		return "Dead item deleted."
	case "retried":
		msg = fmt.Sprintf("Retried %s of %s items.", n, of)
	case "deleted":
		msg = fmt.Sprintf("Deleted %s of %s items.", n, of)
	default:
		return ""
	}
	if skipped != "" && skipped != "0" {
		msg += fmt.Sprintf(" %s skipped: their source or destination is not configured here.", skipped)
	}
	return msg
}

// withDone is back (a console path) with ?done=… set from kv pairs.
func withDone(back string, kv ...string) string {
	u, _ := url.Parse(back)
	q := u.Query()
	for _, k := range []string{"done", "n", "of", "skipped", "cursor"} {
		q.Del(k)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		q.Set(kv[i], kv[i+1])
	}
	u.RawQuery = q.Encode()
	return u.RequestURI()
}

// backOr is the form's back path if it is a console path, else def.
func backOr(ec echo.Context, def string) string {
	if b := localPath(ec.FormValue("back")); b != "" {
		return b
	}
	return def
}

func deadIDOf(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, jobs.ErrDeadItemNotFound
	}
	return id, nil
}

// retryOne answers POST /admin/ui/dead/{id}/retry: the item's destination
// is processed again, and the browser goes back where it came from.
func (c *Console) retryOne(ec echo.Context) error {
	id, err := deadIDOf(ec.Param("id"))
	if err != nil {
		return c.fail(ec, err)
	}
	r, err := c.cfg.Dead.Retry(ec.Request().Context(), id)
	if err != nil {
		return c.fail(ec, err)
	}
	c.log.Info("operator retry", "via", "console", "source", r.Source, "event_id", r.EventID, "destination", r.Destination,
		"dead_id", r.DeadID, "job_id", r.JobID, "joined", r.Joined)
	return ec.Redirect(http.StatusSeeOther, withDone(backOr(ec, eventURL(r.Source, r.EventID)), "done", "retried-one"))
}

// deleteOne answers POST /admin/ui/dead/{id}/delete.
func (c *Console) deleteOne(ec echo.Context) error {
	id, err := deadIDOf(ec.Param("id"))
	if err != nil {
		return c.fail(ec, err)
	}
	if err := c.cfg.Dead.Delete(ec.Request().Context(), id); err != nil {
		return c.fail(ec, err)
	}
	c.log.Info("operator deleted dead item", "via", "console", "dead_id", id)
	return ec.Redirect(http.StatusSeeOther, withDone(backOr(ec, Prefix+"/dead"), "done", "deleted-one"))
}

// bulkRequest is a bulk action: retry or delete, over the selected items or
// over every item the filter matches in the window its dry run fixed.
type bulkRequest struct {
	Action   string // "retry" or "delete"
	Selected bool   // over IDs, else over the filter
	IDs      []int64
	// Form is the filter as the request says it; once the window is fixed
	// its since and until are instants (RFC 3339, UTC).
	Form   deadForm
	Filter jobs.DeadFilter // Form with its times resolved
	// Back is the dead-set page the action was started from.
	Back string
	// Counted is what the dry run counted, carried by the confirmation
	// (-1 without).
	Counted int
}

// bulkRequestOf reads a bulk action from a form (the dead-set page's, or
// the confirmation's) or from the confirmation page's query.
func bulkRequestOf(v url.Values, now time.Time) (*bulkRequest, string) {
	action, scope := v.Get("action"), v.Get("scope")
	if op := v.Get("op"); op != "" { // the dead-set page's buttons: "retry-selected", "delete-filter", …
		action, scope, _ = strings.Cut(op, "-")
	}
	b := &bulkRequest{Action: action, Selected: scope == "selected", Form: deadFormOf(v.Get), Counted: -1}
	b.Back = deadBack(v.Get("back"), Prefix+"/dead?"+b.Form.values().Encode())
	if b.Action != "retry" && b.Action != "delete" {
		return nil, "Unknown action; want retry or delete."
	}
	var err error
	if b.Filter, err = b.Form.filter(now); err != nil {
		return nil, err.Error()
	}
	if n := v.Get("n"); n != "" {
		if b.Counted, err = strconv.Atoi(n); err != nil || b.Counted < 0 {
			return nil, fmt.Sprintf("%q is not a count.", n)
		}
	}
	if !b.Selected {
		return b, ""
	}
	seen := map[int64]bool{}
	for _, v := range v["id"] {
		id, err := deadIDOf(v)
		if err != nil {
			return nil, fmt.Sprintf("%q is not a dead item's id.", v)
		}
		if !seen[id] { // an id given twice is one item: counted once, acted on once
			seen[id] = true
			b.IDs = append(b.IDs, id)
		}
	}
	switch {
	case len(b.IDs) == 0:
		return nil, "Select at least one item (or act on every item the filter matches)."
	case len(b.IDs) > maxSelect:
		return nil, fmt.Sprintf("At most %d items at once.", maxSelect)
	}
	return b, ""
}

// deadBack is v if it is the dead-set page (with any filter), else def.
func deadBack(v, def string) string {
	if p := localPath(v); p != "" {
		if u, err := url.Parse(p); err == nil && u.Path == Prefix+"/dead" {
			return p
		}
	}
	return def
}

// stamp writes an instant of a filter as the console reads it back
// exactly: RFC 3339 in UTC, to the microsecond Postgres keeps ("" for the
// zero time).
func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// query is the confirmation page's query for b: its filter with the times
// resolved (a relative "1h" becomes the instant it meant at the dry run).
func (b *bulkRequest) query() url.Values {
	v := b.Form.values()
	v.Del("since")
	v.Del("until")
	if s := stamp(b.Filter.Since); s != "" {
		v.Set("since", s)
	}
	if s := stamp(b.Filter.Until); s != "" {
		v.Set("until", s)
	}
	v.Set("action", b.Action)
	v.Set("scope", map[bool]string{true: "selected", false: "filter"}[b.Selected])
	for _, id := range b.IDs {
		v.Add("id", strconv.FormatInt(id, 10))
	}
	v.Set("back", b.Back)
	return v
}

// fixWindow closes the window of a bulk action over a filter at the newest
// item it matches now: until becomes just past that item's dead_at (or
// stays the filter's own until when that is earlier), so an item that dies
// after the dry run is outside it, whatever it is. Since and until are then
// written as instants.
func (c *Console) fixWindow(ctx context.Context, b *bulkRequest) error {
	newest, _, err := c.cfg.Dead.List(ctx, b.Filter, nil, 1)
	if err != nil {
		return err
	}
	if len(newest) == 1 {
		// dead_at has microseconds: nothing sits between it and this.
		if u := newest[0].DeadAt.Add(time.Microsecond); b.Filter.Until.IsZero() || u.Before(b.Filter.Until) {
			b.Filter.Until = u
		}
	}
	b.Form.Since, b.Form.Until = stamp(b.Filter.Since), stamp(b.Filter.Until)
	return nil
}

// bulk answers POST /admin/ui/dead/bulk. Without confirm=yes it is the dry
// run: it changes nothing, fixes the window (fixWindow: relative times
// become instants, until closes just after the newest item that matches),
// and sends the browser to the confirmation page, which counts in that
// window and asks ("N items match; retry them?"). With confirm=yes it acts
// on the window and the count the confirmation carries, and sends the
// browser back to the dead set with the outcome.
func (c *Console) bulk(ec echo.Context) error {
	params, err := ec.FormParams()
	if err != nil {
		return c.errorPage(ec, http.StatusBadRequest, "The form could not be read.")
	}
	b, msg := bulkRequestOf(params, time.Now())
	if b == nil {
		return c.errorPage(ec, http.StatusBadRequest, msg)
	}
	if params.Get("confirm") != "yes" {
		if !b.Selected {
			if err := c.fixWindow(ec.Request().Context(), b); err != nil {
				return c.fail(ec, err)
			}
		}
		// Post/Redirect/Get: Back and reload show the confirmation of the
		// same window again (counted afresh), never "Confirm Form
		// Resubmission".
		return ec.Redirect(http.StatusSeeOther, Prefix+"/dead/confirm?"+b.query().Encode())
	}
	if b.Selected {
		return c.actOnSelected(ec, b)
	}
	ctx := ec.Request().Context()
	if b.Filter.Until.IsZero() || b.Counted < 0 {
		return c.errorPageBack(ec, http.StatusBadRequest, "This confirmation does not say what its dry run counted; nothing was changed. Start again from the dead set.", b.Back)
	}
	// The window is closed, so nothing that died after the dry run is in
	// it; an item committed late with an earlier dead_at could still be:
	// then the count is above the confirmed one, and nothing happens.
	n, err := c.cfg.Dead.Count(ctx, b.Filter)
	if err != nil {
		return c.fail(ec, err)
	}
	if n > b.Counted {
		return c.errorPageBack(ec, http.StatusConflict, fmt.Sprintf("The dead set changed since the dry run: it counted %d, and %d match now. Nothing was changed; run it again.", b.Counted, n), b.Back)
	}
	act, word := c.cfg.Dead.RetryAll, "retried"
	if b.Action == "delete" {
		act, word = c.cfg.Dead.DeleteAll, "deleted"
	}
	res, err := act(ctx, b.Filter)
	if err != nil {
		return c.fail(ec, err)
	}
	c.log.Info("operator bulk "+b.Action, "via", "console", "filter", fmt.Sprintf("%+v", b.Filter), "counted", b.Counted,
		"matched", res.Matched, "done", res.Done, "skipped", res.Skipped)
	return ec.Redirect(http.StatusSeeOther, withDone(b.Back, "done", word, "n", strconv.Itoa(res.Done),
		"of", strconv.Itoa(res.Matched), "skipped", strconv.Itoa(res.Skipped)))
}

// confirmPage answers GET /admin/ui/dead/confirm, the dry run's page: it
// counts what the action would act on in the window (fixing it first when
// the URL has none, as a typed one may not), restates the filter, and
// offers the form that acts on exactly that window, carrying the count.
func (c *Console) confirmPage(ec echo.Context) error {
	b, msg := bulkRequestOf(ec.QueryParams(), time.Now())
	if b == nil {
		return c.errorPageBack(ec, http.StatusBadRequest, msg, Prefix+"/dead")
	}
	ctx := ec.Request().Context()
	n := 0
	if b.Selected {
		for _, id := range b.IDs {
			if _, err := c.cfg.Dead.Get(ctx, id); err == nil {
				n++
			} else if !errors.Is(err, jobs.ErrDeadItemNotFound) {
				return c.fail(ec, err)
			}
		}
	} else {
		if err := c.fixWindow(ctx, b); err != nil {
			return c.fail(ec, err)
		}
		var err error
		if n, err = c.cfg.Dead.Count(ctx, b.Filter); err != nil {
			return c.fail(ec, err)
		}
	}
	ids := make([]string, len(b.IDs))
	for i, id := range b.IDs {
		ids[i] = strconv.FormatInt(id, 10)
	}
	f := b.Form
	whole := !b.Selected && f.Source == "" && f.Destination == "" && f.Reason == "" && f.EventType == "" && f.Since == ""
	return c.render(ec, http.StatusOK, "confirm", page{Title: "Confirm", Nav: "dead", Data: struct {
		*bulkRequest
		N      int
		Whole  bool
		IDText []string
	}{b, n, whole, ids}})
}

// actOnSelected retries or deletes the selected items one by one; items
// gone meanwhile are not counted, items of an unconfigured source are
// skipped.
func (c *Console) actOnSelected(ec echo.Context, b *bulkRequest) error {
	ctx := ec.Request().Context()
	done, skipped := 0, 0
	for _, id := range b.IDs {
		var err error
		if b.Action == "retry" {
			_, err = c.cfg.Dead.Retry(ctx, id)
		} else {
			err = c.cfg.Dead.Delete(ctx, id)
		}
		switch {
		case err == nil:
			done++
		case errors.Is(err, jobs.ErrUnknownSource):
			skipped++
		case !errors.Is(err, jobs.ErrDeadItemNotFound):
			return c.fail(ec, err)
		}
	}
	word := map[string]string{"retry": "retried", "delete": "deleted"}[b.Action]
	c.log.Info("operator bulk "+b.Action, "via", "console", "selected", len(b.IDs), "done", done, "skipped", skipped)
	return ec.Redirect(http.StatusSeeOther, withDone(b.Back, "done", word, "n", strconv.Itoa(done),
		"of", strconv.Itoa(len(b.IDs)), "skipped", strconv.Itoa(skipped)))
}

// pause answers POST /admin/ui/destinations/{source}/{name}/pause.
func (c *Console) pause(ec echo.Context) error { return c.setPaused(ec, true) }

// resume answers POST /admin/ui/destinations/{source}/{name}/resume.
func (c *Console) resume(ec echo.Context) error { return c.setPaused(ec, false) }

func (c *Console) setPaused(ec echo.Context, pause bool) error {
	source, name := pathParam(ec, "source"), pathParam(ec, "name")
	set, word := c.cfg.Destinations.Resume, "resumed"
	if pause {
		set, word = c.cfg.Destinations.Pause, "paused"
	}
	if err := set(ec.Request().Context(), source, name); err != nil {
		return c.fail(ec, err)
	}
	c.log.Info("destination "+word+" by an operator", "via", "console", "source", source, "destination", name)
	return ec.Redirect(http.StatusSeeOther, backOr(ec, Prefix+"/destinations"))
}
