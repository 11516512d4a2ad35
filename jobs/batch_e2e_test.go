package jobs_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/ingest"
	"github.com/hookline/hookline/internal/pgtest"
	"github.com/hookline/hookline/jobs"
	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/adyen"
	"github.com/hookline/hookline/providers/gocardless"
)

// forward is one request the destination received.
type forward struct {
	header http.Header
	body   []byte
}

// batchCase is a batch delivery whose items must each be forwarded on their own.
type batchCase struct {
	provider providers.Provider
	// items are the exact bytes of each item as they stand in body.
	items []string
	ids   []string
	types []string
	body  string
}

func gocardlessBatch(t *testing.T) batchCase {
	p, err := gocardless.New(providers.Config{Secrets: []string{"gocardless_batch_secret"}})
	require.NoError(t, err)
	ev := func(id, resource, action string) string {
		return `{"id": "` + id + `", "created_at": "2026-11-30T12:00:00.123Z", "resource_type": "` + resource + `", "action": "` + action +
			`", "links": {"payment": "PM0001"}, "details": {"origin": "bank", "cause": "payment_` + action + `", "description": "The payment was ` + action + `."},` +
			"\n      \"metadata\": {}}"
	}
	items := []string{ev("EV0001", "payments", "confirmed"), ev("EV0002", "payments", "paid_out"), ev("EV0003", "payments", "failed")}
	return batchCase{
		provider: p, items: items,
		ids:   []string{"EV0001", "EV0002", "EV0003"},
		types: []string{"payments.confirmed", "payments.paid_out", "payments.failed"},
		body:  "{\n  \"events\": [\n    " + strings.Join(items, ",\n    ") + "\n  ],\n  \"meta\": {\"webhook_id\": \"WB0001\"}\n}\n",
	}
}

func adyenBatch(t *testing.T) batchCase {
	const keyHex = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056"
	p, err := adyen.New(providers.Config{Secrets: []string{keyHex}})
	require.NoError(t, err)
	key, _ := hex.DecodeString(keyHex)
	item := func(psp, code string, value int) string {
		m := hmac.New(sha256.New, key)
		m.Write([]byte(strings.Join([]string{psp, "", "HooklineECOM", "ref-" + psp, fmt.Sprint(value), "EUR", code, "true"}, ":")))
		return `{ "additionalData": { "hmacSignature": "` + base64.StdEncoding.EncodeToString(m.Sum(nil)) + `" }, "amount": { "currency": "EUR", "value": ` +
			fmt.Sprint(value) + ` }, "eventCode": "` + code + `", "eventDate": "2026-11-30T12:00:00+01:00", "merchantAccountCode": "HooklineECOM", "merchantReference": "ref-` +
			psp + `", "pspReference": "` + psp + `", "success": "true" }`
	}
	items := []string{item("8800000000000001", "AUTHORISATION", 2000), item("8800000000000002", "AUTHORISATION", 1500), item("8800000000000001", "CAPTURE", 2000)}
	var parts []string
	for _, it := range items {
		parts = append(parts, `{ "NotificationRequestItem": `+it+` }`)
	}
	return batchCase{
		provider: p, items: items,
		ids:   []string{"8800000000000001:AUTHORISATION:true", "8800000000000002:AUTHORISATION:true", "8800000000000001:CAPTURE:true"},
		types: []string{"AUTHORISATION", "AUTHORISATION", "CAPTURE"},
		body:  "{\n  \"live\": \"false\",\n  \"notificationItems\": [\n    " + strings.Join(parts, ",\n    ") + "\n  ]\n}\n",
	}
}

// TestBatchItemsForwardedSeparately: a batch delivery of three items goes
// through ingest and the River workers to a loopback destination as three
// forwards, each the item's exact bytes (as they stand in the original body),
// all naming the one delivery they came in with.
func TestBatchItemsForwardedSeparately(t *testing.T) {
	t.Parallel()
	for name, mk := range map[string]func(*testing.T) batchCase{"gocardless": gocardlessBatch, "adyen": adyenBatch} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			bc := mk(t)
			var mu sync.Mutex
			got := map[string]forward{}
			calls := 0
			dest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				mu.Lock()
				defer mu.Unlock()
				calls++
				got[r.Header.Get("Hookline-Event-Id")] = forward{header: r.Header.Clone(), body: body}
			}))
			t.Cleanup(dest.Close)

			pool := pgtest.NewPool(t)
			src := &jobs.Source{Name: name, MaxAttempts: 3, Destination: &jobs.Destination{URL: dest.URL}}
			client, err := jobs.NewClient(jobs.ClientConfig{Pool: pool, Sources: []*jobs.Source{src}, Workers: 10, Logger: quiet()})
			require.NoError(t, err)
			require.NoError(t, client.Start(context.Background()))
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_ = client.Stop(ctx)
			})
			srv, err := ingest.New(ingest.Config{Pool: pool, River: client, IngestRoutes: true, Batch: true, Logger: quiet(),
				Sources: []*ingest.Source{{Name: name, Provider: bc.provider, MaxAttempts: 3}}})
			require.NoError(t, err)
			hs := httptest.NewServer(srv)
			t.Cleanup(func() { hs.Close(); srv.Close() })

			// Every item stands in the body as written.
			for _, it := range bc.items {
				require.Equal(t, 1, strings.Count(bc.body, it))
			}
			const contentType = "application/json; charset=utf-8"
			req := &providers.Request{Body: []byte(bc.body), Header: http.Header{"Content-Type": {contentType}}}
			require.NoError(t, bc.provider.(providers.Signer).Sign(req, time.Now()))
			require.Equal(t, bc.body, string(req.Body), "the test's body is already signed as the adapter signs it")
			hreq, err := http.NewRequest(http.MethodPost, hs.URL+"/webhooks/"+name, bytes.NewReader(req.Body))
			require.NoError(t, err)
			hreq.Header = req.Header
			resp, err := http.DefaultClient.Do(hreq)
			require.NoError(t, err)
			var answer struct {
				Status string `json:"status"`
				Events []struct {
					EventID string `json:"event_id"`
					Status  string `json:"status"`
				} `json:"events"`
			}
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&answer))
			resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.Equal(t, "accepted", answer.Status)
			require.Len(t, answer.Events, 3)
			for i, ev := range answer.Events {
				require.Equal(t, bc.ids[i], ev.EventID)
				require.Equal(t, "accepted", ev.Status)
			}

			for _, id := range bc.ids {
				require.Eventually(t, func() bool {
					var state string
					_ = pool.QueryRow(context.Background(), `SELECT state FROM hookline_event_states WHERE source=$1 AND event_id=$2`, name, id).Scan(&state)
					return state == "completed"
				}, 30*time.Second, 20*time.Millisecond, "event %s never completed", id)
			}

			var deliveryIDs []int64
			require.NoError(t, pool.QueryRow(context.Background(),
				`SELECT array_agg(DISTINCT delivery_id) FROM hookline_events WHERE source=$1`, name).Scan(&deliveryIDs))
			require.Len(t, deliveryIDs, 1, "the three items came in with one delivery")

			mu.Lock()
			defer mu.Unlock()
			require.Equal(t, 3, calls, "one forward per item, no more")
			for i, id := range bc.ids {
				f, ok := got[id]
				require.True(t, ok, "item %s was not forwarded", id)
				require.Equal(t, bc.items[i], string(f.body), "item %s is forwarded as its exact bytes", id)
				require.Equal(t, contentType, f.header.Get("Content-Type"))
				require.Equal(t, name+":"+id, f.header.Get("Idempotency-Key"))
				require.Equal(t, name, f.header.Get("Hookline-Source"))
				require.Equal(t, bc.types[i], f.header.Get("Hookline-Event-Type"))
				require.Equal(t, "1", f.header.Get("Hookline-Attempt"))
				require.Equal(t, fmt.Sprint(deliveryIDs[0]), f.header.Get("Hookline-Delivery-Id"), "Hookline-Delivery-Id names the batch")
			}
		})
	}
}
