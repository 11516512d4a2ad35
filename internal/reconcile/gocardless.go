package reconcile

// GoCardless: "List events", as published in GoCardless's API reference
// (https://developer.gocardless.com/api-reference, its "List events"
// entry as mirrored at
// https://developers.qodex.ai/gocardless-api/gocardless/core-endpoints-events/list-events-10;
// cursor pagination:
// https://support.gocardless.com/hc/en-ca/articles/115003823249-Cursor-pagination;
// the version header: https://gocardless.com/blog/api-release-2015-07-06):
//
//   - GET {api_url}/events with "Authorization: Bearer {access token}" and
//     "GoCardless-Version: 2015-07-06" (the current version);
//   - created_at[gte] (a date-time, inclusive) filters by creation time;
//     limit is the page size (default 50, maximum 500); after is the
//     cursor of the next page;
//   - the answer is {"events":[event...],"meta":{"cursors":{"before":..,
//     "after":..},"limit":..}}; meta.cursors.after is null on the last
//     page; an event has "id", "created_at", "resource_type" and "action"
//     (hookline's GoCardless adapter names its type
//     {resource_type}.{action});
//   - an error answer is {"error":{"message","type","code","errors":
//     [{"reason","message"}],"documentation_url","request_id"}}, where
//     code is the HTTP status as a number and type is invalid_api_usage
//     for a missing, invalid or insufficient token and for rate limits;
//     a rate-limited request (1,000 a minute) answers 429 with
//     RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset (an HTTP
//     date), which the client honours like Retry-After.
//
// The reference read does not say in which order events are listed; the
// lister does not depend on it (the time filter is the API's, and the run
// sorts).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"time"
)

// goCardlessVersion is the API version the lister speaks.
const goCardlessVersion = "2015-07-06"

// goCardlessLimit is the page size: the API's maximum.
const goCardlessLimit = 500

// goCardlessLister lists a GoCardless account's events.
type goCardlessLister struct {
	c    *client
	base string // api_url without a trailing slash
}

func (l *goCardlessLister) list(ctx context.Context, since time.Time, page func([]Event) error) error {
	q := url.Values{
		"created_at[gte]": {since.UTC().Format("2006-01-02T15:04:05.000Z")},
		"limit":           {strconv.Itoa(goCardlessLimit)},
	}
	for n := 1; ; n++ {
		body, err := l.c.get(ctx, l.base+"/events?"+q.Encode(), n)
		if err != nil {
			return err
		}
		events, after, err := parseGoCardlessPage(body)
		if err != nil {
			return &ProviderError{Provider: "gocardless", Page: n, Status: 200, Tries: 1, Err: err}
		}
		if err := page(events); err != nil {
			return err
		}
		if after == "" {
			return nil
		}
		if after == q.Get("after") {
			return &ProviderError{Provider: "gocardless", Page: n, Status: 200, Tries: 1, Err: errors.New("the cursor did not move (same meta.cursors.after as the page before)")}
		}
		q.Set("after", after)
	}
}

// parseGoCardlessPage reads one answer of GET /events; after is
// meta.cursors.after ("": last page).
func parseGoCardlessPage(body []byte) (events []Event, after string, err error) {
	var p struct {
		Events []json.RawMessage `json:"events"`
		Meta   struct {
			Cursors struct {
				After *string `json:"after"`
			} `json:"cursors"`
		} `json:"meta"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		return nil, "", fmt.Errorf("invalid JSON: %w", err)
	}
	if p.Events == nil {
		return nil, "", errors.New(`no "events" array`)
	}
	events = make([]Event, 0, len(p.Events))
	for i, raw := range p.Events {
		var e struct {
			ID           string `json:"id"`
			CreatedAt    string `json:"created_at"`
			ResourceType string `json:"resource_type"`
			Action       string `json:"action"`
		}
		if err := json.Unmarshal(raw, &e); err != nil {
			return nil, "", fmt.Errorf("events[%d]: %w", i, err)
		}
		created, err := time.Parse(time.RFC3339Nano, e.CreatedAt)
		if e.ID == "" || err != nil || created.IsZero() {
			return nil, "", fmt.Errorf("events[%d]: an event needs an id and an RFC 3339 created_at", i)
		}
		ev := Event{ID: e.ID, Created: created.UTC(), Body: raw}
		if e.ResourceType != "" || e.Action != "" {
			ev.Type = e.ResourceType + "." + e.Action
		}
		events = append(events, ev)
	}
	if p.Meta.Cursors.After != nil {
		after = *p.Meta.Cursors.After
	}
	if after != "" && len(events) == 0 {
		return nil, "", errors.New("a next cursor with an empty page")
	}
	return events, after, nil
}

// goCardlessErrorMessage is the message of a GoCardless error answer with
// its first reason, or "".
func goCardlessErrorMessage(body []byte) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Errors  []struct {
				Reason  string `json:"reason"`
				Message string `json:"message"`
			} `json:"errors"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil {
		return ""
	}
	reason := ""
	if len(e.Error.Errors) > 0 {
		reason = e.Error.Errors[0].Reason
	}
	return joinNonEmpty(e.Error.Message, e.Error.Type, reason)
}
