package admin

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hookline/hookline/jobs"
)

// paramError is a bad query parameter or body field, named: a 400.
type paramError struct{ name, msg string }

func (e paramError) Error() string { return e.name + ": " + e.msg }

// deadItem is a dead item in the admin API. Ids are strings.
type deadItem struct {
	ID          string    `json:"id"`
	Source      string    `json:"source"`
	EventID     string    `json:"event_id"`
	Destination string    `json:"destination"`
	EventType   string    `json:"event_type"`
	Reason      string    `json:"reason"`
	Attempts    int       `json:"attempts"`
	LastError   string    `json:"last_error"`
	DeadAt      time.Time `json:"dead_at"`
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
	// completed claim.
	Override bool `json:"override"`
}

// bulkFilter is the body of POST /admin/dead/retry and /admin/dead/delete.
// No fields: the whole dead set.
type bulkFilter struct {
	Source      string `json:"source,omitempty"`
	Destination string `json:"destination,omitempty"`
	Reason      string `json:"reason,omitempty"`
	EventType   string `json:"event_type,omitempty"`
	Since       string `json:"since,omitempty"` // RFC 3339, dead_at >= since
	Until       string `json:"until,omitempty"` // RFC 3339, dead_at < until
	DryRun      bool   `json:"dry_run,omitempty"`
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
	// Origin is where the event was first received from: webhook, or
	// reconcile (found by a reconciliation run).
	Origin string `json:"origin"`
	// OrderKey is the event's ordering key; omitted when unordered.
	OrderKey string `json:"order_key,omitempty"`
	// TraceID is the W3C trace id the event was received under; omitted
	// when it has none (stored before tracing, or reconciled).
	TraceID string `json:"trace_id,omitempty"`
	// Skipped is "stale" when the event completed without being forwarded
	// to any destination (ordering.stale: skip); omitted otherwise.
	Skipped string `json:"skipped,omitempty"`
	// Destinations are the destinations the event matched ([] for none).
	Destinations []eventDestination `json:"destinations"`
	// AttemptsLog is every attempt, oldest first.
	AttemptsLog []attemptAnswer `json:"attempts_log"`
	// ContentType, Headers and Payload are the event as stored (its first
	// delivery, or its dead item's copy once retention pruned it); all
	// null when nothing is kept. Payload is the raw body as a string, or
	// base64 (standard, padded) with PayloadEncoding "base64" when it is
	// not valid UTF-8.
	ContentType     *string         `json:"content_type"`
	Headers         json.RawMessage `json:"headers"`
	Payload         *string         `json:"payload"`
	PayloadEncoding string          `json:"payload_encoding,omitempty"`
}

// eventSummary is one event of GET /admin/events.
type eventSummary struct {
	Source       string    `json:"source"`
	EventID      string    `json:"event_id"`
	EventType    string    `json:"event_type"`
	State        string    `json:"state"` // queued | processing | completed | dead
	Deliveries   int       `json:"deliveries"`
	Attempts     int       `json:"attempts"`
	Destinations int       `json:"destination_count"` // how many it was routed to; the lookup lists them
	ReceivedAt   time.Time `json:"received_at"`
}

// eventList is a page of GET /admin/events. NextCursor is empty on the last page.
type eventList struct {
	Items      []eventSummary `json:"items"`
	NextCursor string         `json:"next_cursor,omitempty"`
}

func eventSummaryOf(s *jobs.EventSummary) eventSummary {
	return eventSummary{Source: s.Source, EventID: s.EventID, EventType: s.EventType, State: s.State, Deliveries: s.Deliveries,
		Attempts: s.Attempts, Destinations: s.Destinations, ReceivedAt: s.ReceivedAt.UTC()}
}

// overviewAnswer answers GET /admin/overview. Element i of every series
// counts minute Since + i; the last is the current minute. Minutes before
// CountedSince are not counted yet (after a start the hour fills in,
// jobs.OverviewStep per read) and read 0.
type overviewAnswer struct {
	Since        time.Time           `json:"since"`
	CountedSince time.Time           `json:"counted_since"`
	Minutes      int                 `json:"minutes"`
	Sources      []sourceActivity    `json:"sources"`
	Queue        queueAnswer         `json:"queue"`
	Destinations []destinationAnswer `json:"destinations"`
}

// sourceActivity is one source's deliveries per minute: received =
// accepted + duplicate; failed counts destination attempts that failed.
type sourceActivity struct {
	Source    string `json:"source"`
	Received  []int  `json:"received"`
	Accepted  []int  `json:"accepted"`
	Duplicate []int  `json:"duplicate"`
	Failed    []int  `json:"failed"`
}

// queueAnswer is River's queue of event jobs: unfinished jobs by state and
// how long the oldest ready one has waited (the queue's lag).
type queueAnswer struct {
	Jobs                   map[string]int64 `json:"jobs"`
	OldestAvailableSeconds float64          `json:"oldest_available_seconds"`
}

func overviewOf(ov *jobs.Overview) overviewAnswer {
	out := overviewAnswer{Since: ov.Since.UTC(), CountedSince: ov.CountedSince.UTC(), Minutes: jobs.OverviewMinutes, Sources: make([]sourceActivity, len(ov.Sources)),
		Queue:        queueAnswer{Jobs: ov.Queue.ByState, OldestAvailableSeconds: ov.Queue.OldestAvailableSeconds},
		Destinations: make([]destinationAnswer, len(ov.Destinations))}
	for i, s := range ov.Sources {
		out.Sources[i] = sourceActivity{Source: s.Source, Received: s.Received[:], Accepted: s.Accepted[:],
			Duplicate: s.Duplicate[:], Failed: s.Failed[:]}
	}
	for i, d := range ov.Destinations {
		out.Destinations[i] = destinationOf(d)
	}
	return out
}

// eventDestination is one destination of an event in its lookup.
type eventDestination struct {
	Name        string     `json:"name"`
	State       string     `json:"state"` // queued | processing | completed | dead
	Attempts    int        `json:"attempts"`
	LastError   *string    `json:"last_error"`
	CompletedAt *time.Time `json:"completed_at"`
	// Skipped is "stale" when this destination completed without a forward.
	Skipped string `json:"skipped,omitempty"`
}

// attemptAnswer is one attempt in an event's attempts log. Status is the
// destination's HTTP status, 0 when it did not answer (and for Go handlers).
// Error is null for an attempt that succeeded, like the other unset errors
// of the API.
type attemptAnswer struct {
	N           int       `json:"n"`
	Destination string    `json:"destination"`
	At          time.Time `json:"at"`
	Status      int       `json:"status"`
	DurationMS  int       `json:"duration_ms"`
	Error       *string   `json:"error"`
}

// destinationList answers GET /admin/destinations.
type destinationList struct {
	Items []destinationAnswer `json:"items"`
}

// destinationAnswer is one destination's shared state.
type destinationAnswer struct {
	Source        string     `json:"source"`
	Name          string     `json:"name"`
	State         string     `json:"state"` // active | paused | open | half_open
	Queued        int64      `json:"queued"`
	InFlight      int64      `json:"in_flight"`
	FailureStreak int        `json:"failure_streak"`
	LastError     *string    `json:"last_error"`
	PausedAt      *time.Time `json:"paused_at"`
	// Circuit is the breaker's own state (closed | open | half_open), also
	// while paused; OldestQueuedAt when its longest-waiting event was
	// queued (null when none waits).
	Circuit        string     `json:"circuit"`
	OldestQueuedAt *time.Time `json:"oldest_queued_at"`
}

func destinationOf(d jobs.DestinationLag) destinationAnswer {
	return destinationAnswer{Source: d.Source, Name: d.Name, State: d.State, Queued: d.Queued, InFlight: d.InFlight,
		FailureStreak: d.FailureStreak, LastError: d.LastError, PausedAt: utc(d.PausedAt),
		Circuit: d.Circuit, OldestQueuedAt: utc(d.OldestQueuedAt)}
}

func itemOf(it *jobs.DeadItem) deadItem {
	return deadItem{ID: strconv.FormatInt(it.ID, 10), Source: it.Source, EventID: it.EventID, Destination: it.Destination, EventType: it.EventType,
		Reason: it.Reason, Attempts: it.Attempts, LastError: it.LastError, DeadAt: it.DeadAt.UTC()}
}

func eventOf(ev *jobs.EventStatus, p *jobs.StoredPayload) eventAnswer {
	out := eventAnswer{Source: ev.Source, EventID: ev.EventID, EventType: ev.EventType, State: ev.State,
		Deliveries: ev.Deliveries, Attempts: ev.Attempts, ReceivedAt: ev.ReceivedAt.UTC(), LastError: ev.LastError,
		Origin: ev.Origin, OrderKey: ev.OrderKey, TraceID: ev.TraceID, Skipped: ev.Skipped}
	if ev.CompletedAt != nil {
		t := ev.CompletedAt.UTC()
		out.CompletedAt = &t
	}
	if ev.DeadItemID != nil {
		id := strconv.FormatInt(*ev.DeadItemID, 10)
		out.DeadItemID = &id
	}
	out.Destinations = make([]eventDestination, len(ev.Destinations))
	for i, d := range ev.Destinations {
		out.Destinations[i] = eventDestination{Name: d.Name, State: d.State, Attempts: d.Attempts, LastError: d.LastError, CompletedAt: utc(d.CompletedAt),
			Skipped: d.Skipped}
	}
	out.AttemptsLog = make([]attemptAnswer, len(ev.AttemptsLog))
	for i, a := range ev.AttemptsLog {
		out.AttemptsLog[i] = attemptAnswer{N: a.N, Destination: a.Destination, At: a.At.UTC(), Status: a.Status, DurationMS: a.DurationMS}
		if a.Error != "" {
			out.AttemptsLog[i].Error = &a.Error
		}
	}
	out.Headers = json.RawMessage("null")
	if p != nil {
		body := string(p.Body)
		if !utf8.Valid(p.Body) {
			body, out.PayloadEncoding = base64.StdEncoding.EncodeToString(p.Body), "base64"
		}
		out.ContentType, out.Headers, out.Payload = &p.ContentType, p.Headers, &body
		if len(out.Headers) == 0 {
			out.Headers = json.RawMessage("{}")
		}
	}
	return out
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
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

// filterOf is the dead-set filter of a list query or a bulk body.
func filterOf(source, destination, reason, eventType, since, until string) (jobs.DeadFilter, error) {
	f := jobs.DeadFilter{Source: source, Destination: destination, Reason: reason, EventType: eventType}
	var err error
	if f.Since, f.Until, err = timeRange(since, until); err != nil {
		return f, err
	}
	return f, invalidParam(f.Validate())
}

// eventFilterOf is the filter of GET /admin/events.
func eventFilterOf(source, state, typ, idPrefix, since, until string) (jobs.EventFilter, error) {
	f := jobs.EventFilter{Source: source, State: state, Type: typ, IDPrefix: idPrefix}
	var err error
	if f.Since, f.Until, err = timeRange(since, until); err != nil {
		return f, err
	}
	return f, invalidParam(f.Validate())
}

// timeRange parses the since and until parameters of a filter.
func timeRange(since, until string) (from, to time.Time, err error) {
	if from, err = parseTime("since", since); err != nil {
		return from, to, err
	}
	to, err = parseTime("until", until)
	return from, to, err
}

// invalidParam is a filter's Validate error ("field: message") as the
// paramError that names the field; nil stays nil.
func invalidParam(err error) error {
	if err == nil {
		return nil
	}
	name, msg, _ := strings.Cut(err.Error(), ": ")
	return paramError{name, msg}
}

// queryOf checks a list route's query string: each parameter one of
// known and given at most once. A misspelt filter is a 400 naming it, never
// an unfiltered page that looks filtered.
func queryOf(q url.Values, known ...string) error {
	names := make([]string, 0, len(q))
	for name := range q {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if !slices.Contains(known, name) {
			return paramError{name, "unknown query parameter (known: " + strings.Join(known, ", ") + ")"}
		}
		if len(q[name]) > 1 {
			return paramError{name, "given more than once"}
		}
	}
	return nil
}

// limitOf is the page size of ?limit=: DefaultAdminLimit when empty, at
// most MaxAdminLimit (also for a number too large for an int); anything but
// a positive integer is a 400.
func limitOf(v string) (int, error) {
	if v == "" {
		return DefaultAdminLimit, nil
	}
	n, err := strconv.Atoi(v)
	if errors.Is(err, strconv.ErrRange) && !strings.HasPrefix(v, "-") {
		return MaxAdminLimit, nil // a positive integer too large for an int: clamped like any other
	}
	if err != nil || n < 1 {
		return 0, paramError{"limit", fmt.Sprintf("%q is not a positive integer", v)}
	}
	return min(n, MaxAdminLimit), nil
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
	at, inRange := jobs.CursorTime(us)
	if err1 != nil || err2 != nil || id <= 0 || !inRange {
		return nil, bad
	}
	return &jobs.DeadKey{DeadAt: at, ID: id}, nil
}
