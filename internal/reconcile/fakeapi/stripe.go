package fakeapi

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// NewStripe serves Stripe's GET /v1/events for apiKey, listing events.
//
// Modelled: Bearer (or Basic, key as user name) auth, 401 with Stripe's
// error body for a missing or wrong key; created[gt|gte|lt|lte] (Unix
// seconds) and created=<exact>; limit 1..100 (default 10, 400 otherwise);
// starting_after / ending_before (400 resource_missing for an unknown id);
// newest first (by created; events of one second in reverse order of
// addition, i.e. of creation); {"object":"list",
// "url":"/v1/events","has_more":..,"data":[...]}.
// Not modelled: type/types/delivery_success filters, expand, the 30-day
// window, Stripe-Version.
func NewStripe(t testing.TB, apiKey string, events []Event) *Server {
	return newServer(t, stripeAPI{}, apiKey, events)
}

type stripeAPI struct{}

func (stripeAPI) path() string { return "/v1/events" }

func (stripeAPI) body(e Event) []byte {
	return mustJSON(map[string]any{
		"id": e.ID, "object": "event", "api_version": "2025-04-30.basil", "created": e.Created.Unix(),
		"data":     map[string]any{"object": map[string]any{"id": "ch_" + e.ID, "object": "charge"}},
		"livemode": false, "pending_webhooks": 0, "request": map[string]any{"id": nil, "idempotency_key": nil},
		"type": e.Type,
	})
}

func stripeError(typ, code, msg, param string) []byte {
	e := map[string]any{"type": typ, "message": msg}
	if code != "" {
		e["code"] = code
	}
	if param != "" {
		e["param"] = param
	}
	return mustJSON(map[string]any{"error": e})
}

func (stripeAPI) authorize(r *http.Request, key string) (int, []byte) {
	got := ""
	h := r.Header.Get("Authorization")
	switch {
	case strings.HasPrefix(h, "Bearer "):
		got = strings.TrimPrefix(h, "Bearer ")
	case strings.HasPrefix(h, "Basic "):
		if b, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(h, "Basic ")); err == nil {
			got, _, _ = strings.Cut(string(b), ":")
		}
	}
	switch {
	case got == "":
		return http.StatusUnauthorized, stripeError("invalid_request_error", "",
			"You did not provide an API key. You need to provide your API key in the Authorization header, using Bearer auth (e.g. 'Authorization: Bearer YOUR_SECRET_KEY').", "")
	case got != key:
		return http.StatusUnauthorized, stripeError("invalid_request_error", "", "Invalid API Key provided: "+maskKey(got), "")
	}
	return 0, nil
}

// maskKey shows a key as Stripe's errors do: its prefix and last four.
func maskKey(k string) string {
	if len(k) <= 12 {
		return "****"
	}
	return k[:8] + strings.Repeat("*", 4) + k[len(k)-4:]
}

func (stripeAPI) plan(events []Event, q url.Values, _ time.Time) (page, int, []byte) {
	bad := func(param, msg string) (page, int, []byte) {
		return page{}, http.StatusBadRequest, stripeError("invalid_request_error", "parameter_invalid_integer", msg, param)
	}
	limit, err := intParam(q, "limit", 10, 1, 100)
	if err != nil {
		return bad("limit", "Invalid limit: "+err.Error())
	}
	var filters []func(int64) bool
	for _, op := range []string{"", "gt", "gte", "lt", "lte"} {
		name := "created"
		if op != "" {
			name += "[" + op + "]"
		}
		v := q.Get(name)
		if v == "" {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return bad(name, fmt.Sprintf("Invalid integer: %s", v))
		}
		filters = append(filters, stripeCompare(op, n))
	}
	list := slices.DeleteFunc(events, func(e Event) bool {
		return slices.ContainsFunc(filters, func(f func(int64) bool) bool { return !f(e.Created.Unix()) })
	})
	// Newest first; events of one second in reverse order of creation (the
	// order they were added), as Stripe lists them: their ids say nothing
	// of it.
	slices.Reverse(list)
	slices.SortStableFunc(list, func(a, b Event) int { return b.Created.Compare(a.Created) })
	p, ok := byPosition(list, q.Get("starting_after"), q.Get("ending_before"), limit)
	if !ok {
		param, id := "starting_after", q.Get("starting_after")
		if id == "" {
			param, id = "ending_before", q.Get("ending_before")
		}
		return page{}, http.StatusBadRequest, stripeError("invalid_request_error", "resource_missing", fmt.Sprintf("No such event: '%s'", id), param)
	}
	return p, 0, nil
}

func stripeCompare(op string, n int64) func(int64) bool {
	switch op {
	case "gt":
		return func(c int64) bool { return c > n }
	case "gte":
		return func(c int64) bool { return c >= n }
	case "lt":
		return func(c int64) bool { return c < n }
	case "lte":
		return func(c int64) bool { return c <= n }
	}
	return func(c int64) bool { return c == n }
}

func (stripeAPI) answer(p page, _ url.Values, _ string) []byte {
	out := []byte(`{"object":"list","url":"/v1/events","has_more":` + strconv.FormatBool(p.hasMore) + `,"data":`)
	out = append(out, joinBodies(p.items)...)
	return append(out, '}')
}

func (stripeAPI) fault(status int) []byte {
	switch {
	case status == http.StatusUnauthorized:
		return stripeError("invalid_request_error", "", "Invalid API Key provided: sk_test_****", "")
	case status == http.StatusForbidden:
		return stripeError("invalid_request_error", "secret_key_required",
			"The provided key 'rk_test_****' does not have the required permissions for this endpoint on account 'acct_fake'. Having the 'rak_event_read' permission would allow this request to continue.", "")
	case status == http.StatusTooManyRequests:
		return stripeError("invalid_request_error", "rate_limit",
			"Too many requests hit the API too quickly. We recommend an exponential backoff of your requests.", "")
	case status == http.StatusNotFound:
		return stripeError("invalid_request_error", "", "Unrecognized request URL.", "")
	case status >= 500:
		return stripeError("api_error", "", "Sorry, something went wrong on Stripe's end.", "")
	}
	return stripeError("invalid_request_error", "", http.StatusText(status), "")
}

func (stripeAPI) faultHeader(h http.Header, f Fault, _ time.Time) {
	if f.RetryAfter != "" {
		h.Set("Retry-After", f.RetryAfter)
	}
}
