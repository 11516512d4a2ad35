package admin

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

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
	// Destinations are the destinations the event matched ([] for none).
	Destinations []eventDestination `json:"destinations"`
	// AttemptsLog is every attempt, oldest first.
	AttemptsLog []attemptAnswer `json:"attempts_log"`
}

// eventDestination is one destination of an event in its lookup.
type eventDestination struct {
	Name        string     `json:"name"`
	State       string     `json:"state"` // queued | processing | completed | dead
	Attempts    int        `json:"attempts"`
	LastError   *string    `json:"last_error"`
	CompletedAt *time.Time `json:"completed_at"`
}

// attemptAnswer is one attempt in an event's attempts log. Status is the
// destination's HTTP status, 0 when it did not answer (and for Go handlers).
type attemptAnswer struct {
	N           int       `json:"n"`
	Destination string    `json:"destination"`
	At          time.Time `json:"at"`
	Status      int       `json:"status"`
	DurationMS  int       `json:"duration_ms"`
	Error       string    `json:"error"`
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
}

func destinationOf(d jobs.DestinationInfo) destinationAnswer {
	out := destinationAnswer{Source: d.Source, Name: d.Name, State: d.State, Queued: d.Queued, InFlight: d.InFlight,
		FailureStreak: d.FailureStreak, LastError: d.LastError}
	if d.PausedAt != nil {
		t := d.PausedAt.UTC()
		out.PausedAt = &t
	}
	return out
}

func itemOf(it *jobs.DeadItem) deadItem {
	return deadItem{ID: strconv.FormatInt(it.ID, 10), Source: it.Source, EventID: it.EventID, Destination: it.Destination, EventType: it.EventType,
		Reason: it.Reason, Attempts: it.Attempts, LastError: it.LastError, DeadAt: it.DeadAt.UTC()}
}

func eventOf(ev *jobs.EventStatus) eventAnswer {
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
	out.Destinations = make([]eventDestination, len(ev.Destinations))
	for i, d := range ev.Destinations {
		out.Destinations[i] = eventDestination{Name: d.Name, State: d.State, Attempts: d.Attempts, LastError: d.LastError, CompletedAt: utc(d.CompletedAt)}
	}
	out.AttemptsLog = make([]attemptAnswer, len(ev.AttemptsLog))
	for i, a := range ev.AttemptsLog {
		out.AttemptsLog[i] = attemptAnswer{N: a.N, Destination: a.Destination, At: a.At.UTC(), Status: a.Status, DurationMS: a.DurationMS, Error: a.Error}
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

// limitOf is the page size of ?limit=: DefaultAdminLimit when empty, at
// most MaxAdminLimit.
func limitOf(v string) (int, error) {
	if v == "" {
		return DefaultAdminLimit, nil
	}
	n, err := strconv.Atoi(v)
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
	if err1 != nil || err2 != nil || id <= 0 {
		return nil, bad
	}
	return &jobs.DeadKey{DeadAt: time.UnixMicro(us), ID: id}, nil
}
