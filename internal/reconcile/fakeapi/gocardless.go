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

// NewGoCardless serves GoCardless's GET /events for accessToken, listing
// events.
//
// Modelled: Bearer auth (401 access_token_not_found / missing
// authorization header), the GoCardless-Version header (400 without it);
// created_at[gt|gte|lt|lte] (RFC 3339); limit 1..500 (default 50, 400
// otherwise); after / before cursors (400 for an unknown id); newest
// first (created_at, then id, descending: the reference read does not say,
// the fake picks this); {"events":[...],"meta":{"cursors":{"before":..,
// "after":..},"limit":..}} with after null on the last page; 429 faults
// carry RateLimit-Limit/-Remaining/-Reset (an HTTP date).
// Not modelled: the resource filters (payment, mandate...), include.
func NewGoCardless(t testing.TB, accessToken string, events []Event) *Server {
	return newServer(t, goCardlessAPI{}, accessToken, events)
}

type goCardlessAPI struct{}

func (goCardlessAPI) path() string { return "/events" }

func (goCardlessAPI) body(e Event) []byte {
	resource, action, _ := strings.Cut(e.Type, ".")
	return mustJSON(map[string]any{
		"id": e.ID, "created_at": e.Created.UTC().Format("2006-01-02T15:04:05.000Z"),
		"resource_type": resource, "action": action,
		"links":    map[string]any{strings.TrimSuffix(resource, "s"): "PM" + e.ID},
		"details":  map[string]any{"origin": "api", "cause": resource + "_" + action, "description": "Fake event."},
		"metadata": map[string]any{},
	})
}

// goCardlessError is GoCardless's error body.
func goCardlessError(status int, typ, reason, msg string) []byte {
	return mustJSON(map[string]any{"error": map[string]any{
		"message": msg, "type": typ, "code": status,
		"errors":            []any{map[string]any{"reason": reason, "message": msg}},
		"documentation_url": "https://developer.gocardless.com/api-reference#" + reason,
		"request_id":        "fake-request",
	}})
}

func (goCardlessAPI) authorize(r *http.Request, key string) (int, []byte) {
	h := r.Header.Get("Authorization")
	switch {
	case h == "":
		return http.StatusUnauthorized, goCardlessError(401, "invalid_api_usage", "missing_authorization_header", "Authorization header must be provided")
	case h != "Bearer "+key:
		return http.StatusUnauthorized, goCardlessError(401, "invalid_api_usage", "access_token_not_found", "Access token not found")
	case r.Header.Get("GoCardless-Version") == "":
		return http.StatusBadRequest, goCardlessError(400, "invalid_api_usage", "missing_version_header", "GoCardless-Version header must be provided")
	}
	return 0, nil
}

func (goCardlessAPI) plan(events []Event, q url.Values, _ time.Time) (page, int, []byte) {
	bad := func(reason, msg string) (page, int, []byte) {
		return page{}, http.StatusBadRequest, goCardlessError(400, "invalid_api_usage", reason, msg)
	}
	limit, err := intParam(q, "limit", 50, 1, 500)
	if err != nil {
		return bad("invalid_query_parameter", err.Error())
	}
	var filters []func(time.Time) bool
	for _, op := range []string{"gt", "gte", "lt", "lte"} {
		name := "created_at[" + op + "]"
		v := q.Get(name)
		if v == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return bad("invalid_query_parameter", fmt.Sprintf("%s must be an ISO 8601 date-time", name))
		}
		filters = append(filters, timeCompare(op, t))
	}
	list := slices.DeleteFunc(events, func(e Event) bool {
		return slices.ContainsFunc(filters, func(f func(time.Time) bool) bool { return !f(e.Created) })
	})
	slices.SortFunc(list, func(a, b Event) int {
		return cmp.Or(b.Created.Compare(a.Created), cmp.Compare(b.ID, a.ID))
	})
	p, ok := byPosition(list, q.Get("after"), q.Get("before"), limit)
	if !ok {
		return bad("invalid_query_parameter", "after/before is not a valid cursor")
	}
	return p, 0, nil
}

// timeCompare is the created_at filter op (gt, gte, lt, lte) against t;
// GoCardless times have millisecond precision.
func timeCompare(op string, t time.Time) func(time.Time) bool {
	return func(c time.Time) bool {
		c = c.Truncate(time.Millisecond)
		switch op {
		case "gt":
			return c.After(t)
		case "gte":
			return !c.Before(t)
		case "lt":
			return c.Before(t)
		default:
			return !c.After(t)
		}
	}
}

func (goCardlessAPI) answer(p page, _ url.Values, _ string) []byte {
	cursor := func(id string) string {
		if id == "" {
			return "null"
		}
		return strconv.Quote(id)
	}
	after := ""
	if p.hasMore {
		after = p.items[len(p.items)-1].ID
	}
	out := []byte(`{"events":`)
	out = append(out, joinBodies(p.items)...)
	out = fmt.Appendf(out, `,"meta":{"cursors":{"before":%s,"after":%s},"limit":%d}}`, cursor(p.before), cursor(after), p.limit)
	return out
}

func (goCardlessAPI) fault(status int) []byte {
	switch {
	case status == http.StatusUnauthorized:
		return goCardlessError(status, "invalid_api_usage", "access_token_not_found", "Access token not found")
	case status == http.StatusForbidden:
		return goCardlessError(status, "invalid_api_usage", "insufficient_permissions", "The access token you are using has insufficient permissions")
	case status == http.StatusTooManyRequests:
		return goCardlessError(status, "invalid_api_usage", "rate_limit_exceeded", "You have exceeded your rate limit")
	case status == http.StatusNotFound:
		return goCardlessError(status, "invalid_api_usage", "path_not_found", "Path not found")
	case status >= 500:
		return goCardlessError(status, "gocardless", "internal_server_error", "Uh-oh! Something went wrong on our end.")
	}
	return goCardlessError(status, "invalid_api_usage", "bad_request", http.StatusText(status))
}

func (goCardlessAPI) faultHeader(h http.Header, f Fault, now time.Time) {
	if f.Status != http.StatusTooManyRequests {
		return
	}
	h.Set("RateLimit-Limit", "1000")
	h.Set("RateLimit-Remaining", "0")
	if s, err := strconv.Atoi(f.RetryAfter); err == nil {
		h.Set("RateLimit-Reset", now.Add(time.Duration(s)*time.Second).UTC().Format(http.TimeFormat))
	}
}
