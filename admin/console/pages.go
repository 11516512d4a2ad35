package console

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/hookline/hookline/jobs"
)

// pageSize is how many rows the events and dead-set pages show at once.
const pageSize = 50

// overviewPage answers GET /admin/ui/ with a session: per source, the
// last hour's deliveries as charts, and the queue's lag.
func (c *Console) overviewPage(ec echo.Context) error {
	ov, err := c.cfg.Overview.Read(ec.Request().Context())
	d := struct {
		Charts       []chart
		Overview     *jobs.Overview
		Lag          string
		Error        string
		Destinations []destinationRow
		Counting     bool
		// Paused are the paused destinations with jobs waiting: the lag
		// leaves their jobs out, which do not run until resumed.
		Paused []destinationRow
		// ActiveWait is the longest wait of an event at a destination
		// that is not paused ("" when none waits).
		ActiveWait string
	}{Overview: ov}
	switch {
	case errors.Is(err, jobs.ErrQueryTimeout):
		d.Error = "The overview took longer than " + jobs.QueryTimeout.String() + " to count; the metrics on /metrics have the same numbers."
	case err != nil:
		return c.fail(ec, err)
	default:
		for _, a := range ov.Sources {
			d.Charts = append(d.Charts, chartOf(a, ov.Since, ov.CountedSince))
		}
		d.Lag = seconds(ov.Queue.OldestAvailableSeconds)
		d.Counting = ov.CountedSince.After(ov.Since)
		d.Destinations = destinationRows(ov.Destinations)
		var oldest *time.Time
		for _, r := range d.Destinations {
			switch {
			case r.State == jobs.DestinationPaused && r.Queued > 0:
				d.Paused = append(d.Paused, r)
			case r.State != jobs.DestinationPaused && r.OldestQueuedAt != nil && (oldest == nil || r.OldestQueuedAt.Before(*oldest)):
				oldest = r.OldestQueuedAt
			}
		}
		if oldest != nil {
			d.ActiveWait = ago(oldest)
		}
	}
	return c.render(ec, http.StatusOK, "overview", page{Title: "Overview", Nav: "overview", Data: d})
}

// eventsForm is the events page's filter as typed.
type eventsForm struct{ Source, State, Type, IDPrefix, Since, Until string }

func (f eventsForm) values() url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"source": f.Source, "state": f.State, "type": f.Type, "id_prefix": f.IDPrefix, "since": f.Since, "until": f.Until} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v
}

func (f eventsForm) filter(now time.Time) (jobs.EventFilter, error) {
	ef := jobs.EventFilter{Source: f.Source, State: f.State, Type: f.Type, IDPrefix: f.IDPrefix}
	var err error
	if ef.Since, err = parseWhen("since", f.Since, now); err != nil {
		return ef, err
	}
	if ef.Until, err = parseWhen("until", f.Until, now); err != nil {
		return ef, err
	}
	return ef, ef.Validate()
}

// eventsPage answers GET /admin/ui/events: a page of the search, newest first.
func (c *Console) eventsPage(ec echo.Context) error {
	q := ec.QueryParams()
	form := eventsForm{Source: q.Get("source"), State: q.Get("state"), Type: strings.TrimSpace(q.Get("type")),
		IDPrefix: strings.TrimSpace(q.Get("id_prefix")), Since: strings.TrimSpace(q.Get("since")), Until: strings.TrimSpace(q.Get("until"))}
	d := struct {
		Form    eventsForm
		Sources []string
		States  []string
		Items   []jobs.EventSummary
		Next    string
		First   string
		Error   string
	}{Form: form, Sources: c.sources, States: []string{jobs.EventQueued, jobs.EventProcessing, jobs.EventCompleted, jobs.EventDead}}
	d.First = Prefix + "/events?" + form.values().Encode()
	p := page{Title: "Events", Nav: "events", Data: &d}
	f, err := form.filter(time.Now())
	var after *jobs.EventKey
	if err == nil && q.Get("cursor") != "" {
		after, err = jobs.ParseEventCursor(q.Get("cursor"))
	}
	if err != nil {
		d.Error = err.Error()
		return c.render(ec, http.StatusBadRequest, "events", p)
	}
	items, more, err := c.cfg.Events.Search(ec.Request().Context(), f, after, pageSize)
	if errors.Is(err, jobs.ErrQueryTimeout) {
		d.Error = "The search took longer than " + jobs.QueryTimeout.String() + "; narrow it with a source, a time range or an id prefix."
		return c.render(ec, http.StatusServiceUnavailable, "events", p)
	}
	if err != nil {
		return c.fail(ec, err)
	}
	d.Items = items
	if more {
		v := form.values()
		v.Set("cursor", items[len(items)-1].Key().Cursor())
		d.Next = Prefix + "/events?" + v.Encode()
	}
	return c.render(ec, http.StatusOK, "events", p)
}

// destinationView is one destination of an event with its attempts.
type destinationView struct {
	jobs.DestinationStatus
	Log []jobs.AttemptRecord
	// Dead is the destination's dead item (without its payload), nil when
	// it has none.
	Dead *jobs.DeadItem
}

// refreshHeader is what the script's refresh sends, with the id of the
// element it swaps: the event page then leaves out the payload, which the
// refresh does not show.
const refreshHeader = "X-Console-Refresh"

// eventPage answers GET /admin/ui/events/{source}/{event_id}, and GET
// /admin/ui/event?source=…&id=… (see eventURL).
func (c *Console) eventPage(ec echo.Context) error {
	ctx := ec.Request().Context()
	source, eventID := pathParam(ec, "source"), pathParam(ec, "event_id")
	if ec.Path() == Prefix+"/event" {
		source, eventID = ec.QueryParam("source"), ec.QueryParam("id")
	}
	if !isText(source) || !isText(eventID) {
		// No event has such a source or id (ingest refuses them), and
		// Postgres could not compare them: a 404, as in the JSON API.
		return c.fail(ec, jobs.ErrEventNotFound)
	}
	ev, err := c.cfg.Events.Lookup(ctx, source, eventID)
	if err != nil {
		return c.fail(ec, err)
	}
	refresh := ec.Request().Header.Get(refreshHeader) != ""
	var pv *payloadView
	if !refresh {
		p, err := c.cfg.Events.Payload(ctx, ev.Source, ev.EventID)
		if err != nil {
			return c.fail(ec, err)
		}
		pv = viewPayload(p)
	}
	d := struct {
		Ev      *jobs.EventStatus
		Dests   []destinationView
		Payload *payloadView
		Refresh bool // the payload is left out
		Final   bool
		Here    string
		Done    string
	}{Ev: ev, Payload: pv, Refresh: refresh, Final: ev.State == jobs.EventCompleted || ev.State == jobs.EventDead,
		Here: eventURL(ev.Source, ev.EventID), Done: doneMessage(ec.QueryParams())}
	for _, dst := range ev.Destinations {
		v := destinationView{DestinationStatus: dst}
		for _, a := range ev.AttemptsLog {
			if a.Destination == dst.Name {
				v.Log = append(v.Log, a)
			}
		}
		if dst.DeadItemID != nil {
			// Its reason: a rejected duplicate's payload is its own, not
			// the one this page shows, and its retry forwards that one.
			it, err := c.cfg.Dead.Get(ctx, *dst.DeadItemID)
			switch {
			case err == nil:
				it.Payload, it.Headers = nil, nil
				v.Dead = it
			case !errors.Is(err, jobs.ErrDeadItemNotFound): // gone meanwhile: no buttons
				return c.fail(ec, err)
			}
		}
		d.Dests = append(d.Dests, v)
	}
	return c.render(ec, http.StatusOK, "event", page{Title: ev.Source + " / " + ev.EventID, Nav: "events", Data: d})
}

// deadItemPage answers GET /admin/ui/dead/{id}: one dead item, why it died,
// and its own payload and headers (a rejected duplicate's can differ from
// its event's), with what its retry does.
func (c *Console) deadItemPage(ec echo.Context) error {
	id, err := deadIDOf(ec.Param("id"))
	if err != nil {
		return c.fail(ec, err)
	}
	it, err := c.cfg.Dead.Get(ec.Request().Context(), id)
	if err != nil {
		return c.fail(ec, err)
	}
	d := struct {
		It      *jobs.DeadItem
		Payload *payloadView
		Event   string
	}{It: it, Event: eventURL(it.Source, it.EventID),
		Payload: viewPayload(&jobs.StoredPayload{ContentType: it.ContentType, Headers: it.Headers, Body: it.Payload})}
	return c.render(ec, http.StatusOK, "deaditem", page{Title: "Dead item " + strconv.FormatInt(id, 10), Nav: "dead", Data: d})
}

// payloadView is a stored payload as the pages show it.
type payloadView struct {
	ContentType string
	// Pretty is the body as indented JSON ("" when it is not JSON), with
	// invisible and bidirectional control characters written as \u
	// escapes: the same JSON, shown as it is.
	Pretty string
	Raw    string // the body as text, or base64 when it is not UTF-8
	Base64 bool
	// Invisible counts the invisible and bidirectional control characters
	// in Raw, which shows them as they are (they can reorder or hide text).
	Invisible    int
	Size         int
	Headers      []header
	FromDeadItem bool
}

// invisible reports whether r is a character that changes how the text
// around it shows without showing itself: zero-width characters, the
// bidirectional embeddings, overrides and isolates, the line and paragraph
// separators, the byte order mark.
func invisible(r rune) bool {
	return r >= 0x200B && r <= 0x200F || r >= 0x202A && r <= 0x202E || r >= 0x2060 && r <= 0x2069 ||
		r == 0x2028 || r == 0x2029 || r == 0xFEFF || r == 0x061C || r == 0x00AD
}

// escapeInvisible writes every invisible character of indented JSON as a
// \u escape. Outside strings JSON has none of them, so the result is the
// same JSON.
func escapeInvisible(s string) string {
	if !strings.ContainsFunc(s, invisible) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if invisible(r) {
			fmt.Fprintf(&b, "\\u%04x", r)
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

type header struct {
	Name   string
	Values []string
}

func viewPayload(p *jobs.StoredPayload) *payloadView {
	if p == nil {
		return nil
	}
	v := &payloadView{ContentType: p.ContentType, Size: len(p.Body), FromDeadItem: p.FromDeadItem}
	if utf8.Valid(p.Body) {
		v.Raw = string(p.Body)
	} else {
		v.Raw, v.Base64 = base64.StdEncoding.EncodeToString(p.Body), true
	}
	var pretty bytes.Buffer
	if json.Valid(p.Body) && json.Indent(&pretty, p.Body, "", "  ") == nil {
		v.Pretty = escapeInvisible(pretty.String())
	}
	if !v.Base64 {
		for _, r := range v.Raw {
			if invisible(r) {
				v.Invisible++
			}
		}
	}
	var hs map[string][]string
	_ = json.Unmarshal(p.Headers, &hs)
	for name, vals := range hs {
		v.Headers = append(v.Headers, header{name, vals})
	}
	sort.Slice(v.Headers, func(i, j int) bool { return v.Headers[i].Name < v.Headers[j].Name })
	return v
}

// deadForm is the dead-set page's filter as typed.
type deadForm struct{ Source, Destination, Reason, EventType, Since, Until string }

func deadFormOf(get func(string) string) deadForm {
	return deadForm{Source: get("source"), Destination: strings.TrimSpace(get("destination")), Reason: get("reason"),
		EventType: strings.TrimSpace(get("event_type")), Since: strings.TrimSpace(get("since")), Until: strings.TrimSpace(get("until"))}
}

func (f deadForm) values() url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"source": f.Source, "destination": f.Destination, "reason": f.Reason,
		"event_type": f.EventType, "since": f.Since, "until": f.Until} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v
}

func (f deadForm) filter(now time.Time) (jobs.DeadFilter, error) {
	df := jobs.DeadFilter{Source: f.Source, Destination: f.Destination, Reason: f.Reason, EventType: f.EventType}
	var err error
	if df.Since, err = parseWhen("since", f.Since, now); err != nil {
		return df, err
	}
	if df.Until, err = parseWhen("until", f.Until, now); err != nil {
		return df, err
	}
	return df, df.Validate()
}

// deadPage answers GET /admin/ui/dead: a page of the dead set, newest first.
func (c *Console) deadPage(ec echo.Context) error {
	q := ec.QueryParams()
	form := deadFormOf(q.Get)
	d := struct {
		Form    deadForm
		Sources []string
		Items   []jobs.DeadItem
		Next    string
		Here    string
		Error   string
		Done    string
	}{Form: form, Sources: c.sources, Here: Prefix + "/dead?" + form.values().Encode(), Done: doneMessage(q)}
	p := page{Title: "Dead set", Nav: "dead", Data: &d}
	f, err := form.filter(time.Now())
	var after *jobs.DeadKey
	if err == nil && q.Get("cursor") != "" {
		after, err = parseDeadCursor(q.Get("cursor"))
	}
	if err != nil {
		d.Error = err.Error()
		return c.render(ec, http.StatusBadRequest, "dead", p)
	}
	items, more, err := c.cfg.Dead.List(ec.Request().Context(), f, after, pageSize)
	if err != nil {
		return c.fail(ec, err)
	}
	d.Items = items
	if more {
		v := form.values()
		last := items[len(items)-1]
		v.Set("cursor", deadCursor(jobs.DeadKey{DeadAt: last.DeadAt, ID: last.ID}))
		d.Next = Prefix + "/dead?" + v.Encode()
	}
	return c.render(ec, http.StatusOK, "dead", p)
}

// destinationRow is a destination as the pages show it.
type destinationRow struct {
	jobs.DestinationLag
	Waiting string // how long its oldest waiting event has waited
}

func destinationRows(list []jobs.DestinationLag) []destinationRow {
	rows := make([]destinationRow, len(list))
	for i, d := range list {
		rows[i] = destinationRow{DestinationLag: d, Waiting: ago(d.OldestQueuedAt)}
	}
	return rows
}

// destinationsPage answers GET /admin/ui/destinations.
func (c *Console) destinationsPage(ec echo.Context) error {
	list, err := c.cfg.Events.DestinationLags(ec.Request().Context(), c.cfg.Names)
	if err != nil {
		return c.fail(ec, err)
	}
	return c.render(ec, http.StatusOK, "destinations", page{Title: "Destinations", Nav: "destinations",
		Data: struct{ Items []destinationRow }{destinationRows(list)}})
}

// isText reports whether v is valid UTF-8 without a NUL byte: text that
// Postgres can compare, as every stored source and event id is.
func isText(v string) bool {
	return utf8.ValidString(v) && !strings.ContainsRune(v, 0)
}

// pathParam returns a path segment unescaped: echo matches on the raw path
// when the URL has escapes (an event id with "/" arrives as %2F).
func pathParam(ec echo.Context, name string) string {
	v := ec.Param(name)
	if ec.Request().URL.RawPath != "" {
		if u, err := url.PathUnescape(v); err == nil {
			return u
		}
	}
	return v
}

// parseWhen reads a time of a filter: RFC 3339, a UTC date and time
// ("2026-01-02 15:04", seconds optional, or just the date; a trailing
// " UTC", as the pages' hover titles write it, is allowed), or a duration
// before now ("15m", "1h", "7d"). (The script turns a time typed in the
// browser's zone into RFC 3339 before the form is sent.)
func parseWhen(name, v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if len(v) > 4 && strings.EqualFold(v[len(v)-4:], " UTC") {
		v = strings.TrimSpace(v[:len(v)-4])
	}
	if days, ok := strings.CutSuffix(v, "d"); ok {
		// At most the longest Duration (about 292 years): a float beyond
		// it has no defined conversion.
		if n, err := strconv.ParseFloat(days, 64); err == nil && n >= 0 && n*24*float64(time.Hour) < math.MaxInt64 {
			return now.Add(-time.Duration(n * 24 * float64(time.Hour))), nil
		}
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02 15:04:05", "2006-01-02 15:04", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, v, time.UTC); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%s: %q is not a time (try 2026-01-02 15:04 in UTC, RFC 3339, or 15m, 1h, 7d ago)", name, v)
}

// The dead-set page's cursor: base64url of "d1.{dead_at unix µs}.{id}".
func deadCursor(k jobs.DeadKey) string {
	return base64.RawURLEncoding.EncodeToString([]byte(fmt.Sprintf("d1.%d.%d", k.DeadAt.UnixMicro(), k.ID)))
}

func parseDeadCursor(s string) (*jobs.DeadKey, error) {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	parts := strings.Split(string(raw), ".")
	if err != nil || len(parts) != 3 || parts[0] != "d1" {
		return nil, jobs.ErrBadCursor
	}
	us, err1 := strconv.ParseInt(parts[1], 10, 64)
	id, err2 := strconv.ParseInt(parts[2], 10, 64)
	at, inRange := jobs.CursorTime(us)
	if err1 != nil || err2 != nil || id <= 0 || !inRange {
		return nil, jobs.ErrBadCursor
	}
	return &jobs.DeadKey{DeadAt: at, ID: id}, nil
}
