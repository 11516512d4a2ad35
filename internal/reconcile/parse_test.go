package reconcile

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	stripeSeed = `{"object":"list","url":"/v1/events","has_more":true,"data":[` +
		`{"id":"evt_2","object":"event","created":1686089970,"type":"setup_intent.created","data":{"object":{}}},` +
		`{ "id" : "evt_1", "created": 1686089960, "type": "charge.succeeded" }]}`
	goCardlessSeed = `{"events":[{"id":"EV2","created_at":"2014-04-08T17:01:06.000Z","resource_type":"payments",` +
		`"action":"created","links":{"payment":"PM1"},"details":{"origin":"api"},"metadata":{}}],` +
		`"meta":{"cursors":{"before":null,"after":"EV2"},"limit":50}}`
	paddleSeed = `{"data":[{"event_id":"evt_01hv97725sakkxq0yqdqef4m6p","event_type":"transaction.completed",` +
		`"occurred_at":"2024-04-12T13:16:10.809640Z","notification_id":"ntf_1","data":{"id":"txn_1"}}],` +
		`"meta":{"request_id":"r","pagination":{"per_page":50,"next":"https://api.paddle.com/events?after=evt_01hv97725sakkxq0yqdqef4m6p","has_more":true,"estimated_total":4}}}`
)

func TestParseStripePage(t *testing.T) {
	events, more, err := parseStripePage([]byte(stripeSeed))
	require.NoError(t, err)
	assert.True(t, more)
	require.Len(t, events, 2)
	assert.Equal(t, Event{ID: "evt_1", Type: "charge.succeeded", Created: time.Unix(1686089960, 0).UTC(),
		Body: []byte(`{ "id" : "evt_1", "created": 1686089960, "type": "charge.succeeded" }`)}, events[1])
	for _, bad := range []string{`{}`, `{"object":"list","data":null}`, `{"object":"list","data":[{"id":"e"}]}`,
		`{"object":"list","has_more":true,"data":[]}`, `[`, `{"object":"list","data":[1]}`} {
		_, _, err := parseStripePage([]byte(bad))
		assert.Error(t, err, bad)
	}
}

func TestParseGoCardlessPage(t *testing.T) {
	events, after, err := parseGoCardlessPage([]byte(goCardlessSeed))
	require.NoError(t, err)
	assert.Equal(t, "EV2", after)
	require.Len(t, events, 1)
	assert.Equal(t, "payments.created", events[0].Type)
	assert.Equal(t, time.Date(2014, 4, 8, 17, 1, 6, 0, time.UTC), events[0].Created)
	_, after, err = parseGoCardlessPage([]byte(`{"events":[],"meta":{"cursors":{"before":null,"after":null}}}`))
	require.NoError(t, err)
	assert.Empty(t, after)
	for _, bad := range []string{`{}`, `{"events":[{"id":"EV1"}]}`, `{"events":[],"meta":{"cursors":{"after":"EV1"}}}`} {
		_, _, err := parseGoCardlessPage([]byte(bad))
		assert.Error(t, err, bad)
	}
}

func TestParsePaddlePage(t *testing.T) {
	events, next, more, err := parsePaddlePage([]byte(paddleSeed))
	require.NoError(t, err)
	assert.True(t, more)
	assert.Contains(t, next, "after=evt_01hv97725sakkxq0yqdqef4m6p")
	require.Len(t, events, 1)
	assert.Equal(t, "transaction.completed", events[0].Type)
	for _, bad := range []string{`{}`, `{"data":[{"event_id":"e","occurred_at":"yesterday"}]}`,
		`{"data":[{"event_id":"e","occurred_at":"2024-04-12T13:16:10Z"}],"meta":{"pagination":{"has_more":true}}}`} {
		_, _, _, err := parsePaddlePage([]byte(bad))
		assert.Error(t, err, bad)
	}
}

func TestErrorMessages(t *testing.T) {
	assert.Equal(t, "Invalid API Key provided: sk_test_****1234 [invalid_request_error]",
		stripeErrorMessage([]byte(`{"error":{"message":"Invalid API Key provided: sk_test_****1234","type":"invalid_request_error"}}`)))
	assert.Equal(t, "Access token not found [invalid_api_usage] [access_token_not_found]",
		goCardlessErrorMessage([]byte(`{"error":{"message":"Access token not found","type":"invalid_api_usage","code":401,"errors":[{"reason":"access_token_not_found","message":"Access token not found"}]}}`)))
	assert.Equal(t, "Invalid or revoked API key. [request_error] [invalid_token]",
		paddleErrorMessage([]byte(`{"error":{"type":"request_error","code":"invalid_token","detail":"Invalid or revoked API key."}}`)))
	assert.Empty(t, stripeErrorMessage([]byte(`<html>bad gateway</html>`)))
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"0": 0, "7": 7 * time.Second, "3600": MaxWait,
		now.Add(5 * time.Second).Format(http.TimeFormat): 5 * time.Second,
		now.Add(-time.Minute).Format(http.TimeFormat):    0,
	} {
		d, ok := parseRetryAfter(v, now)
		assert.True(t, ok, v)
		assert.Equal(t, want, min(d, MaxWait), v)
	}
	for _, v := range []string{"", "soon", "-3"} {
		_, ok := parseRetryAfter(v, now)
		assert.False(t, ok, v)
	}
}

func TestBackoffCapped(t *testing.T) {
	c := &client{backoff: time.Second}
	for try := 1; try <= 40; try++ {
		d := c.wait(try, nil)
		assert.Greater(t, d, time.Duration(0))
		assert.LessOrEqual(t, d, MaxWait)
	}
	c = &client{backoff: 100 * time.Hour}
	assert.LessOrEqual(t, c.wait(3, nil), MaxWait)
	resp := &http.Response{Header: http.Header{"Retry-After": {"120"}}}
	assert.Equal(t, MaxWait, c.wait(1, resp))
}

func TestProviderErrorText(t *testing.T) {
	e := &ProviderError{Source: "billing", Provider: "stripe", Page: 3, Status: 429, Tries: 5, Message: "Too many requests", periodic: true}
	assert.Equal(t, `reconcile billing: stripe events API answered 429 on all 5 tries for page 3 ("Too many requests"); will retry at the next run`, e.Error())
	e = &ProviderError{Provider: "paddle", Page: 1, Status: 403, Tries: 1}
	assert.True(t, strings.HasSuffix(e.Error(), "the API key needs read access to events: check reconcile.api_key"), e.Error())
	e = &ProviderError{Provider: "gocardless", Page: 2, Tries: 5, Err: errors.New("connection refused")}
	assert.Equal(t, "gocardless events API unreachable for page 2 after 5 tries: connection refused; run the reconciliation again later", e.Error())
}

func TestLockKeyStable(t *testing.T) {
	assert.Equal(t, lockKey("stripe"), lockKey("stripe"))
	assert.NotEqual(t, lockKey("stripe"), lockKey("stripe2"))
}

func FuzzStripePage(f *testing.F) {
	for _, s := range []string{stripeSeed, `{"object":"list","data":[]}`, `{"error":{"message":"x"}}`, `null`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		events, more, err := parseStripePage(b)
		checkParsed(t, events, err)
		if more && len(events) == 0 {
			t.Fatal("has_more with no events")
		}
		_ = stripeErrorMessage(b)
	})
}

func FuzzGoCardlessPage(f *testing.F) {
	for _, s := range []string{goCardlessSeed, `{"events":[],"meta":{"cursors":{"after":null}}}`, `{"error":{"code":401}}`, `[]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		events, after, err := parseGoCardlessPage(b)
		checkParsed(t, events, err)
		if after != "" && len(events) == 0 {
			t.Fatal("a cursor with no events")
		}
		_ = goCardlessErrorMessage(b)
	})
}

func FuzzPaddlePage(f *testing.F) {
	for _, s := range []string{paddleSeed, `{"data":[],"meta":{"pagination":{"has_more":false}}}`, `{"error":{"detail":"x"}}`, `{"data":{}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		events, next, more, err := parsePaddlePage(b)
		checkParsed(t, events, err)
		if more && (len(events) == 0 || next == "") {
			t.Fatal("has_more without events or next")
		}
		_ = paddleErrorMessage(b)
	})
}

// checkParsed: a parse either fails with no events, or gives events with
// an id, a time and a body.
func checkParsed(t *testing.T, events []Event, err error) {
	t.Helper()
	if err != nil {
		if events != nil {
			t.Fatal("events with an error")
		}
		return
	}
	for _, e := range events {
		if e.ID == "" || e.Created.IsZero() || len(e.Body) == 0 {
			t.Fatalf("incomplete event %+v", e)
		}
	}
}

func TestPaddleRebase(t *testing.T) {
	l := &paddleLister{base: "http://proxy.internal/paddle"}
	q := map[string][]string{"order_by": {"id[DESC]"}, "per_page": {"200"}}
	u, err := l.rebase(q, "https://api.paddle.com/events?after=evt_x&per_page=200")
	require.NoError(t, err)
	assert.Equal(t, "http://proxy.internal/paddle/events?after=evt_x&order_by=id%5BDESC%5D&per_page=200", u)
	_, err = l.rebase(q, "https://api.paddle.com/events")
	assert.Error(t, err)
}
