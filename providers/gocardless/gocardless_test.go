package gocardless_test

import (
	"bytes"
	"encoding/hex"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/gocardless"
	"github.com/hookline/hookline/providers/providertest"
)

var _ providers.Provider = (*gocardless.Verifier)(nil)
var _ providers.Signer = (*gocardless.Verifier)(nil)
var _ providers.Splitter = (*gocardless.Verifier)(nil)
var _ providers.SignatureStatuser = (*gocardless.Verifier)(nil)

// sample is a two-event batch whose first event id is id.
func sample(id string) *providers.Request {
	return providertest.Request(`{"events":[
  {"id":"` + id + `","created_at":"2026-11-30T11:58:02.292Z","resource_type":"payments","action":"confirmed","links":{"payment":"PM0001"},"details":{"origin":"gocardless","cause":"payment_confirmed","description":"Enough time has passed since the payment was submitted for the banks to return an error, so this payment is now confirmed."},"metadata":{}},
  {"id":"EV0002","created_at":"2026-11-30T11:58:03.000Z","resource_type":"mandates","action":"active","links":{"mandate":"MD0001"},"details":{},"metadata":{}}
],"meta":{"webhook_id":"WB0001"}}`)
}

func harness() providertest.Harness {
	return providertest.Harness{
		Provider: gocardless.Name,
		Secrets:  []string{"gc_endpoint_secret_one", "gc_endpoint_secret_two"},
		Delivery: sample,
		WantType: "payments.confirmed",
		WantTime: time.Date(2026, 11, 30, 11, 58, 2, 292e6, time.UTC),
	}
}

func TestConformance(t *testing.T) {
	t.Parallel()
	providertest.Run(t, harness())
}

// sdkWebhook is testdata/webhook_request.json of gocardless-pro-go (383
// bytes, trailing newline included); the SDK's test signs it with "testing".
// The SDK module is not served here, so the published vector stands in for
// the oracle; it was also recomputed with `openssl dgst -sha256 -hmac testing`.
const sdkWebhook = `{"events":[{"id":"EVTESTNE86TNZS","created_at":"2017-03-20T17:57:02.292Z","resource_type":"payments","action":"failed","links":{"payment":"index_ID_123"},"details":{"origin":"bank","cause":"test_failure","scheme":"sepa_core","reason_code":"TEST","description":"GoCardless has marked this payment as failed in sandbox to enable testing of payment failure webhooks."},"metadata":{}}]}` + "\n"

const sdkSignature = "243f3efa57743c24eec7c5e10edc475b547830d256d5b583745afe319dd90936"

func TestSDKVector(t *testing.T) {
	t.Parallel()
	require.Len(t, sdkWebhook, 383)
	h := harness()
	p := h.Build(t, "testing")

	req := providertest.Request(sdkWebhook, gocardless.Header, sdkSignature)
	require.NoError(t, p.Verify(req))

	items, err := p.(providers.Splitter).Split(req)
	require.NoError(t, err)
	require.Len(t, items, 1)
	require.Equal(t, "EVTESTNE86TNZS", items[0].Event.ID)
	require.Equal(t, "payments.failed", items[0].Event.Type)
	require.True(t, time.Date(2017, 3, 20, 17, 57, 2, 292e6, time.UTC).Equal(items[0].Event.Time))
	require.Equal(t, 11, items[0].Offset)
	require.Equal(t, sdkWebhook[11:len(sdkWebhook)-3], string(items[0].Body))

	ours := providertest.Request(sdkWebhook)
	require.NoError(t, p.(providers.Signer).Sign(ours, time.Time{}))
	require.Equal(t, sdkSignature, ours.Header.Get(gocardless.Header))

	// GoCardless sends lowercase hex; anything else is refused.
	req.Header.Set(gocardless.Header, "243F3EFA57743C24EEC7C5E10EDC475B547830D256D5B583745AFE319DD90936")
	require.ErrorIs(t, p.Verify(req), providers.ErrInvalidSignature)

	require.ErrorIs(t, h.Build(t, "Testing").Verify(providertest.Request(sdkWebhook, gocardless.Header, sdkSignature)), providers.ErrInvalidSignature)
	require.Equal(t, 498, p.(providers.SignatureStatuser).InvalidSignatureStatus())
}

func TestSplit(t *testing.T) {
	t.Parallel()
	h := harness()
	p := h.Build(t, h.Secrets[0])
	req := h.SignedDelivery(t, "EV0001", h.Secrets[0], providertest.Now)
	require.NoError(t, p.Verify(req))
	items, err := p.(providers.Splitter).Split(req)
	require.NoError(t, err)
	require.Len(t, items, 2)
	require.Equal(t, "EV0002", items[1].Event.ID)
	require.Equal(t, "mandates.active", items[1].Event.Type)
	for _, it := range items {
		require.Equal(t, it.Body, req.Body[it.Offset:it.Offset+len(it.Body)])
		require.Equal(t, it.Event.ID, gjson.GetBytes(it.Body, "id").Str)
	}

	ev, err := p.Resolve(req)
	require.NoError(t, err)
	require.Equal(t, items[0].Event, ev)

	for _, body := range []string{`{"events":[]}`, `{"meta":{}}`, `{"events":{}}`, `{"events":[1]}`, `{"events":[`} {
		_, err := p.(providers.Splitter).Split(providertest.Request(body))
		require.ErrorIs(t, err, providers.ErrMalformed, body)
	}
	// The second event has no id: the whole delivery is refused.
	_, err = p.(providers.Splitter).Split(providertest.Request(`{"events":[{"id":"EV1","resource_type":"payments","action":"created"},{"id":""}]}`))
	require.ErrorIs(t, err, providers.ErrNoEventID)
	// An event without its action (or resource type) has no type: refused.
	for _, ev := range []string{`{"id":"EV1","resource_type":"payments"}`, `{"id":"EV1","action":"created"}`, `{"id":"EV1","resource_type":"payments","action":" "}`} {
		_, err = p.(providers.Splitter).Split(providertest.Request(`{"events":[` + ev + `]}`))
		require.ErrorIs(t, err, providers.ErrMalformed, ev)
	}

	// The default id's path is relative to each item.
	require.Equal(t, "json:id", p.(providers.Describer).Describe().DefaultEventID)
}

func TestNew(t *testing.T) {
	t.Parallel()
	_, err := gocardless.New(providers.Config{})
	require.Error(t, err)
	_, err = gocardless.New(providers.Config{Secrets: []string{"s"}, Settings: providertest.DecodeSettings(map[string]any{"nope": 1})})
	require.Error(t, err)
}

func FuzzParseHeader(f *testing.F) {
	f.Add(sdkSignature)
	f.Add("")
	f.Add("zz")
	f.Add(" " + sdkSignature + " ")
	f.Fuzz(func(t *testing.T, v string) {
		sig, err := gocardless.ParseHeader(v)
		if err == nil && hex.EncodeToString(sig) != v {
			t.Fatalf("%q accepted but is not the canonical encoding", v)
		}
		if err == nil && len(sig) != 32 {
			t.Fatalf("signature of %d bytes accepted from %q", len(sig), v)
		}
	})
}

// FuzzSplit: no panics, and items are always slices of the body with an id.
func FuzzSplit(f *testing.F) {
	f.Add(sdkWebhook)
	f.Add(string(sample("EV1").Body))
	f.Add(`{"events":[{"id":1},{"id":"x"},[]]}`)
	v, err := gocardless.New(providers.Config{Secrets: []string{"testing"}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body string) {
		req := providertest.Request(body)
		items, err := v.Split(req)
		if err == nil && len(items) == 0 {
			t.Fatalf("no error but no items for %q", body)
		}
		for _, it := range items {
			if !bytes.Equal(it.Body, req.Body[it.Offset:it.Offset+len(it.Body)]) || it.Event.ID == "" {
				t.Fatalf("bad item %+v in %q", it, body)
			}
		}
	})
}
