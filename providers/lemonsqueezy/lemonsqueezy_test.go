package lemonsqueezy_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/lemonsqueezy"
	"github.com/hookline/hookline/providers/providertest"
)

var _ providers.Provider = (*lemonsqueezy.Verifier)(nil)
var _ providers.Signer = (*lemonsqueezy.Verifier)(nil)
var _ providers.Describer = (*lemonsqueezy.Verifier)(nil)

const sampleUpdated = "2026-11-30T11:59:00.000000Z"

// sample is a delivery whose data.id is id.
func sample(id string) *providers.Request {
	return providertest.Request(`{"meta":{"event_name":"subscription_updated","custom_data":{"customer_id":25}},"data":{"type":"subscriptions","id":"`+id+`","attributes":{"store_id":1,"status":"active","created_at":"2026-11-01T09:00:00.000000Z","updated_at":"`+sampleUpdated+`"}}}`,
		lemonsqueezy.EventNameHeader, "subscription_updated")
}

func TestConformance(t *testing.T) {
	t.Parallel()
	providertest.Run(t, providertest.Harness{
		Provider: lemonsqueezy.Name,
		Secrets:  []string{"lemon_signing_secret_one", "lemon_signing_secret_two"},
		Delivery: sample,
		// {meta.event_name}:{data.type}:{data.id}:{data.attributes.updated_at};
		// without data.id there is no id.
		WantID: func(id string) string {
			if id == "" {
				return ""
			}
			return "subscription_updated:subscriptions:" + id + ":" + sampleUpdated
		},
		WantType: "subscription_updated",
		WantTime: time.Date(2026, 11, 30, 11, 59, 0, 0, time.UTC),
	})
}

// TestCompositeID checks the composite id beyond the suite's sample.
func TestCompositeID(t *testing.T) {
	t.Parallel()
	p, err := lemonsqueezy.New(providers.Config{Secrets: []string{"s"}})
	require.NoError(t, err)

	ev, err := p.Resolve(sample("sub_42"))
	require.NoError(t, err)
	require.Equal(t, "subscription_updated:subscriptions:sub_42:"+sampleUpdated, ev.ID)

	// The next change of the same subscription is a new event.
	later := sample("sub_42")
	later.Body = []byte(strings.Replace(string(later.Body), sampleUpdated, "2026-11-30T12:10:00.000000Z", 1))
	ev2, err := p.Resolve(later)
	require.NoError(t, err)
	require.NotEqual(t, ev.ID, ev2.ID)

	// A numeric data.id is used as its JSON text.
	ev, err = p.Resolve(providertest.Request(`{"meta":{"event_name":"order_created"},"data":{"type":"orders","id":7,"attributes":{"updated_at":"not a time"}}}`))
	require.NoError(t, err)
	require.Equal(t, "order_created:orders:7:not a time", ev.ID)
	require.True(t, ev.Time.IsZero())

	// The type falls back to X-Event-Name.
	ev, err = p.Resolve(providertest.Request(`{"data":{"type":"orders","id":"7","attributes":{"updated_at":"2021-08-17T09:45:53.000000Z"}}}`, lemonsqueezy.EventNameHeader, "order_refunded"))
	require.NoError(t, err)
	require.Equal(t, providers.Event{ID: "order_refunded:orders:7:2021-08-17T09:45:53.000000Z", Type: "order_refunded", Time: time.Date(2021, 8, 17, 9, 45, 53, 0, time.UTC)}, ev)

	for _, body := range []string{`{}`, `{"meta":{"event_name":"order_created"},"data":{"type":"orders"}}`, `{"data":{"id":null}}`, `{"data":{"id":""}}`,
		// A blank part is no part: white space, invisible characters.
		`{"meta":{"event_name":"order_created"},"data":{"type":"orders","id":"   "}}`,
		`{"meta":{"event_name":"order_created"},"data":{"type":"orders","id":"\u2003"}}`,
		`{"meta":{"event_name":"order_created"},"data":{"type":"orders","id":"\u200b"}}`,
		// No event name in the body or the header: the id would have no type.
		`{"data":{"type":"orders","id":"7"}}`,
		`{"meta":{"event_name":" "},"data":{"type":"orders","id":"7"}}`,
		// Every part is required: without data.type or updated_at, two
		// updates of one object would share an id.
		`{"meta":{"event_name":"subscription_updated"},"data":{"id":"7","attributes":{"updated_at":"2021-08-17T09:45:53.000000Z"}}}`,
		`{"meta":{"event_name":"subscription_updated"},"data":{"type":" ","id":"7","attributes":{"updated_at":"2021-08-17T09:45:53.000000Z"}}}`,
		`{"meta":{"event_name":"subscription_updated"},"data":{"type":"subscriptions","id":"7","attributes":{"status":"active"}}}`,
		`{"meta":{"event_name":"subscription_updated"},"data":{"type":"subscriptions","id":"7","attributes":{"updated_at":"\u200b"}}}`,
	} {
		_, err = p.Resolve(providertest.Request(body))
		require.ErrorIs(t, err, providers.ErrNoEventID, body)
	}
	_, err = p.Resolve(providertest.Request(`{"data":`))
	require.ErrorIs(t, err, providers.ErrMalformed)

	require.Equal(t, "{json:meta.event_name}:{json:data.type}:{json:data.id}:{json:data.attributes.updated_at}", p.Describe().DefaultEventID)
}

// The vector was computed independently of this package with
//
//	printf %s "$vectorBody" | openssl dgst -sha256 -hmac 'lemon_signing_secret'
const (
	vectorSecret = "lemon_signing_secret"
	vectorBody   = `{"meta":{"event_name":"order_created","custom_data":{"customer_id":25}},"data":{"type":"orders","id":"1","attributes":{"store_id":1,"identifier":"104e18a2-d755-4d4b-80c4-a6c1dcbe1c10","status":"paid","total":999,"created_at":"2021-08-17T09:45:53.000000Z","updated_at":"2021-08-17T09:45:53.000000Z"}}}`
	vectorSig    = "504472c3afcbb4229195cee3614c1632c05c3cea13a7411deb819d803d41e252"
)

func TestOpenSSLVector(t *testing.T) {
	t.Parallel()
	p, err := lemonsqueezy.New(providers.Config{Secrets: []string{"old", vectorSecret}, Tolerance: time.Nanosecond})
	require.NoError(t, err)
	req := providertest.Request(vectorBody, lemonsqueezy.Header, vectorSig)
	require.NoError(t, p.Verify(req))
	ev, err := p.Resolve(req)
	require.NoError(t, err)
	require.Equal(t, "order_created:orders:1:2021-08-17T09:45:53.000000Z", ev.ID)

	signer, err := lemonsqueezy.New(providers.Config{Secrets: []string{vectorSecret}})
	require.NoError(t, err)
	ours := providertest.Request(vectorBody)
	require.NoError(t, signer.Sign(ours, time.Time{}))
	require.Equal(t, vectorSig, ours.Header.Get(lemonsqueezy.Header))
}

func TestNew(t *testing.T) {
	t.Parallel()
	_, err := lemonsqueezy.New(providers.Config{})
	require.Error(t, err)
	_, err = lemonsqueezy.New(providers.Config{Secrets: []string{"k"}, Settings: providertest.DecodeSettings(map[string]any{"store_id": 1})})
	require.Error(t, err, "unknown settings are an error")
}

// FuzzVerify feeds arbitrary X-Signature values: no panics, only signature
// errors, and only the exact signature passes.
func FuzzVerify(f *testing.F) {
	f.Add(vectorSig)
	f.Add(strings.ToUpper(vectorSig))
	f.Add("sha256=" + vectorSig)
	f.Add(vectorSig[1:])
	f.Add("")
	p, err := lemonsqueezy.New(providers.Config{Secrets: []string{vectorSecret}})
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, sig string) {
		req := providertest.Request(vectorBody)
		req.Header[lemonsqueezy.Header] = []string{sig}
		err := p.Verify(req)
		if err == nil {
			if sig != vectorSig {
				t.Fatalf("accepted %q", sig)
			}
			return
		}
		if !providers.IsSignatureError(err) {
			t.Fatalf("not a signature error: %v", err)
		}
	})
}

// TestContentKey: a body with meta.event_name carries its whole id, signed
// (no content key); a body without it takes the name from the unsigned
// X-Event-Name, and a replay under another name keys to the original.
func TestContentKey(t *testing.T) {
	t.Parallel()
	h := providertest.Harness{
		Provider: lemonsqueezy.Name,
		Secrets:  []string{"lemon_signing_secret_one"},
		Delivery: func(id string) *providers.Request {
			return providertest.Request(`{"data":{"type":"orders","id":"7","attributes":{"updated_at":"2021-08-17T09:45:53.000000Z"}}}`,
				lemonsqueezy.EventNameHeader, "order_"+id)
		},
	}
	other := providertest.Request(`{"data":{"type":"orders","id":"8"}}`, lemonsqueezy.EventNameHeader, "order_created")
	providertest.ContentKeyReplay(t, h, func(r *providers.Request) {
		r.Header.Set(lemonsqueezy.EventNameHeader, "order_refunded")
	}, other)

	p, err := lemonsqueezy.New(providers.Config{Secrets: []string{"s"}})
	require.NoError(t, err)
	require.Nil(t, p.ContentKey(sample("sub_42")), "the id is the signed body's")
	require.True(t, p.Describe().IDSigned)
}
