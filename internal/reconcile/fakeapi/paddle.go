package fakeapi

import (
	"cmp"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// NewPaddle serves Paddle Billing's GET /events for apiKey, listing events.
// Paddle orders by event id, so give events ids that sort in creation order
// (real ones are evt_ + a ULID).
//
// Modelled: Bearer auth (403 authentication_missing / invalid_token, as
// Paddle answers, not 401); no time filter; the 90-day retention;
// order_by id[ASC] (the fake's default: the reference does not state one)
// or id[DESC] (400 invalid_field otherwise); per_page (default 50, more
// than 200 gives 200, below 1 is 400); after (a Paddle ID: entities after
// it in the order, whether or not it exists); {"data":[...],"meta":
// {"request_id":..,"pagination":{"per_page":..,"next":..,"has_more":..,
// "estimated_total":..}}} where next (always present) is this server's URL
// with the request's query and after set to the page's last id; 429
// faults carry Retry-After.
// Not modelled: Skip-Count, estimated_total's cap.
func NewPaddle(t testing.TB, apiKey string, events []Event) *Server {
	return newServer(t, paddleAPI{}, apiKey, events)
}

// paddleRetention is how long Paddle keeps events.
const paddleRetention = 90 * 24 * time.Hour

type paddleAPI struct{}

func (paddleAPI) path() string { return "/events" }

func (paddleAPI) body(e Event) []byte {
	return mustJSON(map[string]any{
		"event_id": e.ID, "event_type": e.Type, "occurred_at": e.Created.UTC().Format(time.RFC3339Nano),
		"notification_id": "ntf_" + strings.TrimPrefix(e.ID, "evt_"),
		"data":            map[string]any{"id": "txn_" + strings.TrimPrefix(e.ID, "evt_"), "status": "completed"},
	})
}

// paddleError is Paddle's error body.
func paddleError(typ, code, detail string) []byte {
	return mustJSON(map[string]any{
		"error": map[string]any{"type": typ, "code": code, "detail": detail,
			"documentation_url": "https://developer.paddle.com/errors/shared/" + code},
		"meta": map[string]any{"request_id": "00000000-0000-0000-0000-000000000000"},
	})
}

func (paddleAPI) authorize(r *http.Request, key string) (int, []byte) {
	h := r.Header.Get("Authorization")
	switch {
	case h == "":
		return http.StatusForbidden, paddleError("request_error", "authentication_missing", "Authentication header missing.")
	case !strings.HasPrefix(h, "Bearer "):
		return http.StatusForbidden, paddleError("request_error", "authentication_malformed", "Authentication header included, but incorrectly formatted.")
	case h != "Bearer "+key:
		return http.StatusForbidden, paddleError("request_error", "invalid_token", "Invalid or revoked API key.")
	}
	return 0, nil
}

func (paddleAPI) plan(events []Event, q url.Values, now time.Time) (page, int, []byte) {
	bad := func(detail string) (page, int, []byte) {
		return page{}, http.StatusBadRequest, paddleError("request_error", "invalid_field", detail)
	}
	perPage, err := intParam(q, "per_page", 50, 1, int(^uint(0)>>1))
	if err != nil {
		return bad(err.Error())
	}
	perPage = min(perPage, 200)
	desc := false
	switch q.Get("order_by") {
	case "", "id[ASC]":
	case "id[DESC]":
		desc = true
	default:
		return bad(fmt.Sprintf("order_by %q: valid fields for ordering: id, as id[ASC] or id[DESC]", q.Get("order_by")))
	}
	list := slices.DeleteFunc(events, func(e Event) bool { return e.Created.Before(now.Add(-paddleRetention)) })
	slices.SortFunc(list, func(a, b Event) int {
		if desc {
			return cmp.Compare(b.ID, a.ID)
		}
		return cmp.Compare(a.ID, b.ID)
	})
	start := 0
	if after := q.Get("after"); after != "" {
		start = len(list)
		if i := slices.IndexFunc(list, func(e Event) bool { return desc && e.ID < after || !desc && e.ID > after }); i >= 0 {
			start = i
		}
	}
	end := min(start+perPage, len(list))
	return page{number: start/perPage + 1, items: list[start:end], hasMore: end < len(list), limit: perPage, total: len(list)}, 0, nil
}

func (paddleAPI) answer(p page, q url.Values, baseURL string) []byte {
	next := cloneValues(q)
	if len(p.items) > 0 {
		next.Set("after", p.items[len(p.items)-1].ID)
	}
	out := []byte(`{"data":`)
	out = append(out, joinBodies(p.items)...)
	out = fmt.Appendf(out, `,"meta":{"request_id":"00000000-0000-0000-0000-000000000000","pagination":{"per_page":%d,"next":%s,"has_more":%t,"estimated_total":%d}}}`,
		p.limit, strconv.Quote(baseURL+"/events?"+next.Encode()), p.hasMore, p.total)
	return out
}

func (paddleAPI) fault(status int) []byte {
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return paddleError("request_error", "forbidden", "You aren't permitted to perform this request.")
	case status == http.StatusTooManyRequests:
		return paddleError("api_error", "too_many_requests", "IP address exceeded the allowed rate limit. Retry after the number of seconds in the Retry-After header.")
	case status == http.StatusNotFound:
		return paddleError("request_error", "not_found", "Entity not found.")
	case status >= 500:
		return paddleError("api_error", "internal_error", "An internal error has occurred, our team has been notified.")
	}
	return paddleError("request_error", "bad_request", http.StatusText(status))
}

func (paddleAPI) faultHeader(h http.Header, f Fault, _ time.Time) {
	if f.RetryAfter != "" {
		h.Set("Retry-After", f.RetryAfter)
	}
}
