package reconcile

// Stripe: "List all events", as published in Stripe's API reference
// (https://docs.stripe.com/api/events/list, pagination:
// https://docs.stripe.com/api/pagination):
//
//   - GET {api_url}/v1/events, authenticated with the secret (or
//     restricted) key as a Bearer token;
//   - created[gte] (Unix seconds, inclusive) filters by creation time;
//     limit is 1..100 (default 10); starting_after is the id of the last
//     event of the previous page;
//   - the answer is {"object":"list","url":"/v1/events","has_more":bool,
//     "data":[event...]}, newest first (Stripe lists in reverse
//     chronological order); an event has "id", "type" and "created" (Unix
//     seconds);
//   - events are listed going back up to 30 days only: a lookback beyond
//     30 days lists 30 days;
//   - an error answer is Stripe's error object {"error":{"type","code",
//     "message","param",...}}; a wrong key answers 401, a restricted key
//     without read access to events 403 (Stripe's usual statuses; the
//     pages read do not list them for this endpoint).
//
// Each element of data is kept as the exact bytes of the answer
// (json.RawMessage), never re-serialised.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"time"
)

// stripeLister lists a Stripe account's events.
type stripeLister struct {
	c    *client
	base string // api_url without a trailing slash
}

func (l *stripeLister) list(ctx context.Context, since time.Time, page func([]Event) error) error {
	q := url.Values{"created[gte]": {strconv.FormatInt(since.Unix(), 10)}, "limit": {"100"}}
	for n := 1; ; n++ {
		body, err := l.c.get(ctx, l.base+"/v1/events?"+q.Encode(), n)
		if err != nil {
			return err
		}
		events, hasMore, err := parseStripePage(body)
		if err != nil {
			return &ProviderError{Provider: "stripe", Page: n, Status: 200, Tries: 1, Err: err}
		}
		if err := page(events); err != nil {
			return err
		}
		if !hasMore {
			return nil
		}
		last := events[len(events)-1].ID
		if last == q.Get("starting_after") {
			return &ProviderError{Provider: "stripe", Page: n, Status: 200, Tries: 1, Err: errors.New("the cursor did not move (same last event as the page before)")}
		}
		q.Set("starting_after", last)
	}
}

// newestFirst: Stripe lists in reverse chronological order, and its
// created is in whole seconds, so the list order alone tells which of the
// events of one second came first.
func (l *stripeLister) newestFirst() bool { return true }

// parseStripePage reads one answer of GET /v1/events. With hasMore, events
// is not empty.
func parseStripePage(body []byte) (events []Event, hasMore bool, err error) {
	var p struct {
		Object  string            `json:"object"`
		HasMore bool              `json:"has_more"`
		Data    []json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		return nil, false, fmt.Errorf("invalid JSON: %w", err)
	}
	if p.Object != "list" || p.Data == nil {
		return nil, false, errors.New(`not a list (want {"object":"list","data":[...]})`)
	}
	events = make([]Event, 0, len(p.Data))
	for i, raw := range p.Data {
		var e struct {
			ID      string `json:"id"`
			Type    string `json:"type"`
			Created int64  `json:"created"`
		}
		if err := json.Unmarshal(raw, &e); err != nil {
			return nil, false, fmt.Errorf("data[%d]: %w", i, err)
		}
		if e.ID == "" || e.Created <= 0 {
			return nil, false, fmt.Errorf("data[%d]: an event needs an id and a created time", i)
		}
		events = append(events, Event{ID: e.ID, Type: e.Type, Created: time.Unix(e.Created, 0).UTC(), Body: raw})
	}
	if p.HasMore && len(events) == 0 {
		return nil, false, errors.New("has_more with an empty page")
	}
	return events, p.HasMore, nil
}

// stripeErrorMessage is error.message of a Stripe error answer, or "".
func stripeErrorMessage(body []byte) string {
	var e struct {
		Error struct {
			Type    string `json:"type"`
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil {
		return ""
	}
	return joinNonEmpty(e.Error.Message, e.Error.Type, e.Error.Code)
}

// joinNonEmpty is msg, followed by the non-empty of kinds in brackets:
// "Invalid API Key provided [invalid_request_error]".
func joinNonEmpty(msg string, kinds ...string) string {
	out := msg
	for _, k := range kinds {
		if k == "" {
			continue
		}
		if out == "" {
			out = k
			continue
		}
		out += " [" + k + "]"
	}
	return out
}
