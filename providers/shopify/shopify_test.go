package shopify_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/providertest"
	"github.com/hookline/hookline/providers/shopify"
)

var (
	_ providers.Provider  = (*shopify.Verifier)(nil)
	_ providers.Signer    = (*shopify.Verifier)(nil)
	_ providers.Describer = (*shopify.Verifier)(nil)
)

const body = `{"id":820982911946154508,"email":"jon@example.com","total_price":"10.00"}`

var triggeredAt = time.Date(2026, 11, 30, 11, 59, 30, 123456789, time.UTC)

func sample(id string) *providers.Request {
	return providertest.Request(body,
		shopify.HeaderEventID, id,
		shopify.HeaderTopic, "orders/create",
		shopify.HeaderTriggeredAt, "2026-11-30T11:59:30.123456789Z",
		shopify.HeaderWebhookID, "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043",
		"X-Shopify-Shop-Domain", "example.myshopify.com")
}

func harness() providertest.Harness {
	return providertest.Harness{
		Provider:  shopify.Name,
		Secrets:   []string{"shpss_hookline_test_secret", "hush"},
		Delivery:  sample,
		WantType:  "orders/create",
		WantTime:  triggeredAt,
		Tolerance: time.Minute, // accepted and ignored
	}
}

func TestConformance(t *testing.T) {
	t.Parallel()
	providertest.Run(t, harness())
}

// TestConformanceEvents runs the suite on deliveries that carry only
// Shopify-Hmac-Sha256 (the new Events deliveries), the adapter's fallback
// header.
func TestConformanceEvents(t *testing.T) {
	t.Parallel()
	h := harness()
	h.SignatureHeaders = []string{shopify.HeaderHMACEvents}
	h.Sign = func(t testing.TB, secret string, req *providers.Request, now time.Time) {
		require.NoError(t, build(t, secret).Sign(req, now))
		req.Header.Set(shopify.HeaderHMACEvents, req.Header.Get(shopify.HeaderHMAC))
		req.Header.Del(shopify.HeaderHMAC)
	}
	providertest.Run(t, h)
}

func build(t testing.TB, secrets ...string) *shopify.Verifier {
	t.Helper()
	v, err := shopify.New(providers.Config{Secrets: secrets})
	require.NoError(t, err)
	return v
}

// TestIndependentHMAC checks against values computed at development time with
//
//	printf '%s' "$body" | openssl dgst -sha256 -hmac "$secret" -binary | base64
//
// (OpenSSL 3.0.19); Shopify publishes no vector and no Go SDK oracle.
func TestIndependentHMAC(t *testing.T) {
	t.Parallel()
	vectors := map[string]string{
		"shpss_hookline_test_secret": "XRb1Pn+D/mYMCU+6AyApGffs1lsxode4caFQAY3qJT4=",
		"hush":                       "m4FFod+h41Veq3iGu9IYC4BB/jVI4MOrGLOk7hjAbKU=",
	}
	for secret, want := range vectors {
		v := build(t, secret)
		req := sample("e1")
		require.NoError(t, v.Sign(req, time.Time{}))
		require.Equal(t, want, req.Header.Get(shopify.HeaderHMAC))

		for _, header := range []string{shopify.HeaderHMAC, shopify.HeaderHMACEvents} {
			req := sample("e1")
			req.Header.Set(header, want)
			require.NoError(t, v.Verify(req), header)
		}
	}
	// Rotation: either secret verifies.
	req := sample("e1")
	req.Header.Set(shopify.HeaderHMAC, vectors["hush"])
	require.NoError(t, build(t, "shpss_hookline_test_secret", "hush").Verify(req))
	require.ErrorIs(t, build(t, "shpss_hookline_test_secret").Verify(req), providers.ErrInvalidSignature)
}

func TestVerifyErrors(t *testing.T) {
	t.Parallel()
	v := build(t, "hush")
	require.ErrorIs(t, v.Verify(sample("e1")), providers.ErrNoSignature)

	for _, bad := range []string{"not base64", "m4FFod+h41Veq3iGu9IYC4BB/jVI4MOrGLOk7hjAbKU", "AAAA", "sha256=m4FFod+h41Veq3iGu9IYC4BB/jVI4MOrGLOk7hjAbKU="} {
		req := sample("e1")
		req.Header.Set(shopify.HeaderHMAC, bad)
		require.ErrorIs(t, v.Verify(req), providers.ErrInvalidSignature, bad)
	}
	// The X- header wins when both are present.
	req := sample("e1")
	req.Header.Set(shopify.HeaderHMAC, "AAAA")
	req.Header.Set(shopify.HeaderHMACEvents, "m4FFod+h41Veq3iGu9IYC4BB/jVI4MOrGLOk7hjAbKU=")
	require.ErrorIs(t, v.Verify(req), providers.ErrInvalidSignature)
}

func TestResolve(t *testing.T) {
	t.Parallel()
	v := build(t, "hush")
	req := sample("98880550-7158-44d4-b7cd-2c97c8a091b5")
	req.Header.Set(shopify.HeaderTriggeredAt, "2023-03-29T18:00:27.877041743Z")
	ev, err := v.Resolve(req)
	require.NoError(t, err)
	require.Equal(t, "98880550-7158-44d4-b7cd-2c97c8a091b5", ev.ID)
	require.Equal(t, "orders/create", ev.Type)
	require.True(t, ev.Time.Equal(time.Date(2023, 3, 29, 18, 0, 27, 877041743, time.UTC)))

	req.Header.Set(shopify.HeaderTriggeredAt, "yesterday")
	ev, err = v.Resolve(req)
	require.NoError(t, err)
	require.True(t, ev.Time.IsZero())

	// An Events delivery (headers as in Shopify's shopify-app-js webhook
	// tests: shopify-event-id, shopify-topic, shopify-triggered-at, no
	// X-Shopify-Event-Id) is read from those names.
	events := &providers.Request{Body: []byte(`{"some":"data"}`), Header: http.Header{}}
	events.Header.Set("shopify-event-id", "evt-123")
	events.Header.Set("shopify-topic", "Product")
	events.Header.Set("shopify-triggered-at", "2023-10-16T15:45:22.437Z")
	events.Header.Set("X-Shopify-Webhook-Id", "evt-123")
	ev, err = v.Resolve(events)
	require.NoError(t, err)
	require.Equal(t, "evt-123", ev.ID)
	require.Equal(t, "Product", ev.Type)
	require.True(t, ev.Time.Equal(time.Date(2023, 10, 16, 15, 45, 22, 437000000, time.UTC)))
	// The X- names win when both are there.
	events.Header.Set(shopify.HeaderEventID, "evt-x")
	ev, err = v.Resolve(events)
	require.NoError(t, err)
	require.Equal(t, "evt-x", ev.ID)
	_, err = v.Resolve(&providers.Request{Body: []byte(`{}`), Header: http.Header{}})
	require.ErrorIs(t, err, providers.ErrNoEventID)
	require.ErrorContains(t, err, "Shopify-Event-Id")

	d := v.Describe()
	require.Equal(t, "header:X-Shopify-Event-Id", d.DefaultEventID)
	require.Equal(t, []string{shopify.HeaderHMAC}, d.Headers)
	require.Equal(t, []string{shopify.HeaderHMACEvents}, d.FallbackHeaders)
	require.Zero(t, d.DefaultTolerance)
}

func TestNew(t *testing.T) {
	t.Parallel()
	_, err := shopify.New(providers.Config{})
	require.Error(t, err)
	_, err = shopify.New(providers.Config{Secrets: []string{"s"}, Settings: providertest.DecodeSettings(map[string]any{"shop": "x"})})
	require.Error(t, err)
}

func FuzzParseSignature(f *testing.F) {
	f.Add("m4FFod+h41Veq3iGu9IYC4BB/jVI4MOrGLOk7hjAbKU=")
	f.Add("")
	f.Add("====")
	f.Fuzz(func(t *testing.T, v string) {
		sig, err := shopify.ParseSignature(v)
		if err == nil && len(sig) != 32 {
			t.Fatalf("signature of %d bytes accepted from %q", len(sig), v)
		}
		if err != nil && sig != nil {
			t.Fatalf("signature returned with error %v", err)
		}
	})
}

// TestContentKey: X-Shopify-Event-Id is not signed; a replay under a fresh
// one has the original's content key, another body another key.
func TestContentKey(t *testing.T) {
	t.Parallel()
	other := sample("evt_other")
	other.Body = []byte(`{"id":820982911946154509}`)
	providertest.ContentKeyReplay(t, harness(), func(r *providers.Request) {
		r.Header.Set(shopify.HeaderEventID, "fresh-event-id")
	}, other)
	require.False(t, build(t, "s").Describe().IDSigned)
}
