package reconcile

// Paddle Billing: "List events", as published in Paddle's API reference
// (https://developer.paddle.com/api-reference/events/list-events,
// pagination: https://developer.paddle.com/api-reference/about/pagination,
// errors: https://developer.paddle.com/api-reference/about/errors, rate
// limits: https://developer.paddle.com/api-reference/about/rate-limiting,
// https://developer.paddle.com/errors/shared/too_many_requests and
// https://developer.paddle.com/errors/shared/invalid_token):
//
//   - GET {api_url}/events with "Authorization: Bearer {api key}";
//   - the only parameters are after (a Paddle ID: the page starts after
//     it), order_by (field id only: id[ASC] or id[DESC]) and per_page
//     (default 50, maximum 200). There is NO time filter. Events are kept
//     90 days;
//   - the answer is {"data":[event...],"meta":{"request_id":..,
//     "pagination":{"per_page":..,"next":..,"has_more":..,
//     "estimated_total":..}}}; next is the URL of the next page (the
//     original query plus after), present even when has_more is false; an
//     event has "event_id" (evt_ + a time-ordered ULID), "event_type",
//     "occurred_at" (RFC 3339) and "data";
//   - an error answer is {"error":{"type","code","detail",
//     "documentation_url"},"meta":{"request_id"}}; a wrong or revoked key
//     answers 403 invalid_token (not 401), a key without the permission
//     403 forbidden; a rate-limited IP (240 requests a minute) answers 429
//     too_many_requests with Retry-After (seconds).
//
// Without a time filter the lister asks for order_by=id[DESC] (newest
// first, event ids being time-ordered) and stops after the first page
// holding an event that occurred more than paddleSlack before since; the
// run drops the events older than since. The cost: a run lists every
// event within the lookback plus at most one page (200 events) of older
// ones, where Stripe and GoCardless list only the lookback. The slack
// covers an event whose occurred_at is a little earlier than its id's
// time.
//
// next is followed by its query only, applied to {api_url}/events over the
// first page's query: the API key goes to api_url's host alone (also
// behind a proxy whose answers name api.paddle.com), and order_by stays
// id[DESC] even if next left it out.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"time"
)

// paddlePerPage is the page size: the API's maximum.
const paddlePerPage = 200

// paddleSlack is how much older than since an event must be for the
// lister to stop paging (see above).
const paddleSlack = 10 * time.Minute

// paddleLister lists a Paddle Billing account's events.
type paddleLister struct {
	c    *client
	base string // api_url without a trailing slash
}

func (l *paddleLister) list(ctx context.Context, since time.Time, page func([]Event) error) error {
	q := url.Values{"order_by": {"id[DESC]"}, "per_page": {strconv.Itoa(paddlePerPage)}}
	u := l.base + "/events?" + q.Encode()
	for n := 1; ; n++ {
		body, err := l.c.get(ctx, u, n)
		if err != nil {
			return err
		}
		events, next, hasMore, err := parsePaddlePage(body)
		if err != nil {
			return &ProviderError{Provider: "paddle", Page: n, Status: 200, Tries: 1, Err: err}
		}
		if err := page(events); err != nil {
			return err
		}
		if !hasMore || oldest(events).Before(since.Add(-paddleSlack)) {
			return nil
		}
		nu, err := l.rebase(q, next)
		if err == nil && nu == u {
			err = errors.New("the cursor did not move (same next URL as the page before)")
		}
		if err != nil {
			return &ProviderError{Provider: "paddle", Page: n, Status: 200, Tries: 1, Err: err}
		}
		u = nu
	}
}

// rebase is the next page's URL: {api_url}/events with the first page's
// query q updated by next's (after, and anything else next sets).
func (l *paddleLister) rebase(q url.Values, next string) (string, error) {
	p, err := url.Parse(next)
	if err != nil || p.RawQuery == "" {
		return "", fmt.Errorf("meta.pagination.next %q is not a URL with a query", next)
	}
	merged := cloneQuery(q)
	for k, v := range p.Query() {
		merged[k] = v
	}
	return l.base + "/events?" + merged.Encode(), nil
}

// cloneQuery copies q.
func cloneQuery(q url.Values) url.Values {
	out := make(url.Values, len(q))
	for k, v := range q {
		out[k] = append([]string(nil), v...)
	}
	return out
}

// oldest is the earliest creation time of events (not empty).
func oldest(events []Event) time.Time {
	t := events[0].Created
	for _, e := range events[1:] {
		if e.Created.Before(t) {
			t = e.Created
		}
	}
	return t
}

// parsePaddlePage reads one answer of GET /events. With hasMore, events
// is not empty and next is set.
func parsePaddlePage(body []byte) (events []Event, next string, hasMore bool, err error) {
	var p struct {
		Data []json.RawMessage `json:"data"`
		Meta struct {
			Pagination struct {
				Next    string `json:"next"`
				HasMore bool   `json:"has_more"`
			} `json:"pagination"`
		} `json:"meta"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		return nil, "", false, fmt.Errorf("invalid JSON: %w", err)
	}
	if p.Data == nil {
		return nil, "", false, errors.New(`no "data" array`)
	}
	events = make([]Event, 0, len(p.Data))
	for i, raw := range p.Data {
		var e struct {
			ID         string `json:"event_id"`
			Type       string `json:"event_type"`
			OccurredAt string `json:"occurred_at"`
		}
		if err := json.Unmarshal(raw, &e); err != nil {
			return nil, "", false, fmt.Errorf("data[%d]: %w", i, err)
		}
		occurred, err := time.Parse(time.RFC3339Nano, e.OccurredAt)
		if e.ID == "" || err != nil || occurred.IsZero() {
			return nil, "", false, fmt.Errorf("data[%d]: an event needs an event_id and an RFC 3339 occurred_at", i)
		}
		events = append(events, Event{ID: e.ID, Type: e.Type, Created: occurred.UTC(), Body: raw})
	}
	pg := p.Meta.Pagination
	if pg.HasMore && (len(events) == 0 || pg.Next == "") {
		return nil, "", false, errors.New("has_more without events or without meta.pagination.next")
	}
	return events, pg.Next, pg.HasMore, nil
}

// paddleErrorMessage is error.detail of a Paddle error answer with its type
// and code, or "".
func paddleErrorMessage(body []byte) string {
	var e struct {
		Error struct {
			Type   string `json:"type"`
			Code   string `json:"code"`
			Detail string `json:"detail"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil {
		return ""
	}
	return joinNonEmpty(e.Error.Detail, e.Error.Type, e.Error.Code)
}
