package fakeapi_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/internal/reconcile/fakeapi"
)

const key = "sk_test_fakeapi_0123456789"

// get GETs u with a Bearer key (and GoCardless's version header).
func get(t *testing.T, u, bearer string) (int, http.Header, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	require.NoError(t, err)
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	req.Header.Set("GoCardless-Version", "2015-07-06")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var out map[string]any
	require.NoError(t, json.Unmarshal(b, &out), string(b))
	return resp.StatusCode, resp.Header, out
}

// events makes n events, one a minute back from an hour ago; ids sort in
// creation order.
func events(n int) []fakeapi.Event {
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	out := make([]fakeapi.Event, n)
	for i := range n {
		out[i] = fakeapi.Event{ID: fmt.Sprintf("evt_%04d", n-i), Type: "payments.created", Created: base.Add(-time.Duration(i) * time.Minute)}
	}
	return out
}

func ids(list []any, field string) []string {
	out := make([]string, len(list))
	for i, e := range list {
		out[i] = e.(map[string]any)[field].(string)
	}
	return out
}

func TestStripe(t *testing.T) {
	s := fakeapi.NewStripe(t, key, events(5))
	since := strconv.FormatInt(time.Now().Add(-time.Hour-150*time.Second).Unix(), 10)
	status, _, body := get(t, s.URL+"/v1/events?limit=2&created[gte]="+since, key)
	require.Equal(t, 200, status)
	assert.Equal(t, "list", body["object"])
	assert.Equal(t, true, body["has_more"])
	assert.Equal(t, []string{"evt_0005", "evt_0004"}, ids(body["data"].([]any), "id"), "newest first")
	_, _, body = get(t, s.URL+"/v1/events?limit=2&created[gte]="+since+"&starting_after=evt_0004", key)
	assert.Equal(t, false, body["has_more"])
	assert.Equal(t, []string{"evt_0003"}, ids(body["data"].([]any), "id"), "the time filter")

	status, _, body = get(t, s.URL+"/v1/events", "sk_test_wrong_key_000")
	assert.Equal(t, 401, status)
	assert.Contains(t, body["error"].(map[string]any)["message"], "Invalid API Key provided")
	status, _, _ = get(t, s.URL+"/v1/events?limit=101", key)
	assert.Equal(t, 400, status)
	status, _, _ = get(t, s.URL+"/v1/events?starting_after=evt_nope", key)
	assert.Equal(t, 400, status)
	assert.Equal(t, 5, s.Requests())
	assert.Equal(t, "2", s.Queries()[0].Get("limit"))
}

func TestFaults(t *testing.T) {
	s := fakeapi.NewStripe(t, key, events(5))
	s.Inject(fakeapi.Fault{Status: 500, Page: 2, Times: 2})
	s.Inject(fakeapi.Fault{Status: 429, Request: 4, RetryAfter: "3"})
	status, _, _ := get(t, s.URL+"/v1/events?limit=2", key) // page 1
	assert.Equal(t, 200, status)
	for range 2 {
		status, _, body := get(t, s.URL+"/v1/events?limit=2&starting_after=evt_0004", key) // page 2
		assert.Equal(t, 500, status)
		assert.Equal(t, "api_error", body["error"].(map[string]any)["type"])
	}
	status, h, _ := get(t, s.URL+"/v1/events?limit=2&starting_after=evt_0004", key) // request 4
	assert.Equal(t, 429, status)
	assert.Equal(t, "3", h.Get("Retry-After"))
	status, _, _ = get(t, s.URL+"/v1/events?limit=2&starting_after=evt_0004", key)
	assert.Equal(t, 200, status, "faults used up")
	s.FailNext(503, 1)
	status, _, _ = get(t, s.URL+"/v1/events", key)
	assert.Equal(t, 503, status)
}

func TestGoCardless(t *testing.T) {
	s := fakeapi.NewGoCardless(t, key, events(5))
	status, _, body := get(t, s.URL+"/events?limit=3", key)
	require.Equal(t, 200, status)
	assert.Equal(t, []string{"evt_0005", "evt_0004", "evt_0003"}, ids(body["events"].([]any), "id"))
	cursors := body["meta"].(map[string]any)["cursors"].(map[string]any)
	assert.Nil(t, cursors["before"])
	assert.Equal(t, "evt_0003", cursors["after"])
	_, _, body = get(t, s.URL+"/events?limit=3&after=evt_0003", key)
	cursors = body["meta"].(map[string]any)["cursors"].(map[string]any)
	assert.Nil(t, cursors["after"], "last page")
	assert.Equal(t, "evt_0002", cursors["before"])
	gte := url.QueryEscape(time.Now().Add(-time.Hour - 90*time.Second).UTC().Format(time.RFC3339))
	_, _, body = get(t, s.URL+"/events?created_at[gte]="+gte, key)
	assert.Len(t, body["events"], 2)

	status, _, body = get(t, s.URL+"/events", "wrong")
	assert.Equal(t, 401, status)
	e := body["error"].(map[string]any)
	assert.Equal(t, "invalid_api_usage", e["type"])
	assert.InDelta(t, 401, e["code"], 0)
	s.FailNext(429, 1)
	status, h, _ := get(t, s.URL+"/events", key)
	assert.Equal(t, 429, status)
	_, err := http.ParseTime(h.Get("RateLimit-Reset"))
	assert.NoError(t, err)
	assert.Empty(t, h.Get("Retry-After"))
}

func TestPaddle(t *testing.T) {
	s := fakeapi.NewPaddle(t, key, events(5))
	status, _, body := get(t, s.URL+"/events?per_page=2&order_by=id[DESC]", key)
	require.Equal(t, 200, status)
	assert.Equal(t, []string{"evt_0005", "evt_0004"}, ids(body["data"].([]any), "event_id"))
	p := body["meta"].(map[string]any)["pagination"].(map[string]any)
	assert.Equal(t, true, p["has_more"])
	assert.InDelta(t, 5, p["estimated_total"], 0)
	next := p["next"].(string)
	_, _, body = get(t, next, key)
	assert.Equal(t, []string{"evt_0003", "evt_0002"}, ids(body["data"].([]any), "event_id"))
	_, _, body = get(t, s.URL+"/events", key)
	assert.Equal(t, []string{"evt_0001", "evt_0002", "evt_0003", "evt_0004", "evt_0005"}, ids(body["data"].([]any), "event_id"), "id[ASC] by default")

	status, _, body = get(t, s.URL+"/events", "wrong")
	assert.Equal(t, 403, status)
	assert.Equal(t, "invalid_token", body["error"].(map[string]any)["code"])
	status, _, _ = get(t, s.URL+"/events?order_by=occurred_at[ASC]", key)
	assert.Equal(t, 400, status)
}

func TestBodiesVerbatim(t *testing.T) {
	raw := `{"id":"evt_1",   "created":1, "type":"a.b"}`
	s := fakeapi.NewStripe(t, key, []fakeapi.Event{{ID: "evt_1", Type: "a.b", Created: time.Unix(1, 0), Body: []byte(raw)}})
	req, _ := http.NewRequest(http.MethodGet, s.URL+"/v1/events", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	assert.Contains(t, string(b), raw)
}
