package checkout_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/checkout"
	"github.com/hookline/hookline/providers/providertest"
)

var _ providers.Provider = (*checkout.Verifier)(nil)
var _ providers.Signer = (*checkout.Verifier)(nil)
var _ providers.Describer = (*checkout.Verifier)(nil)

func sample(id string) *providers.Request {
	return providertest.Request(`{"id":"` + id + `","type":"payment_approved","version":"1.0.33","created_on":"2026-11-30T11:58:00Z","data":{"id":"pay_3o5gbfyrupnuloyqpgdqq4bmv4","amount":6540,"currency":"GBP"}}`)
}

func harness() providertest.Harness {
	return providertest.Harness{
		Provider: checkout.Name,
		Secrets:  []string{"sk_sbox_signature_key_one", "sk_sbox_signature_key_two"},
		Delivery: sample,
		WantType: "payment_approved",
		WantTime: time.Date(2026, 11, 30, 11, 58, 0, 0, time.UTC),
	}
}

func TestConformance(t *testing.T) {
	t.Parallel()
	providertest.Run(t, harness())
}

// TestConformanceAuthorizationKey runs the suite again with the optional static
// Authorization key: deleting or garbling it must fail verification too.
func TestConformanceAuthorizationKey(t *testing.T) {
	t.Parallel()
	h := harness()
	h.Settings = map[string]any{"authorization_key": "hookline-test-authorization-key"}
	providertest.Run(t, h)
}

// vectorBody and vectorSig were computed independently of this package with
//
//	printf %s "$vectorBody" | openssl dgst -sha256 -hmac 'sk_sbox_m73dzbpy7cf3gfd46xr4yj5xo4e'
const (
	vectorKey  = "sk_sbox_m73dzbpy7cf3gfd46xr4yj5xo4e"
	vectorBody = `{"id":"evt_az5sblvku4ge3dwpztvyizgcau","type":"payment_approved","version":"1.0.33","created_on":"2019-08-23T12:32:42Z","data":{"id":"pay_3o5gbfyrupnuloyqpgdqq4bmv4","amount":6540,"currency":"GBP"}}`
	vectorSig  = "955aa0e851a004ecdc73126a6fa2f64d229a1aba7593105cea610e49358d74b1"
)

func TestOpenSSLVector(t *testing.T) {
	t.Parallel()
	p, err := checkout.New(providers.Config{Secrets: []string{"sk_other", vectorKey}})
	require.NoError(t, err)

	req := providertest.Request(vectorBody, checkout.Header, vectorSig)
	require.NoError(t, p.Verify(req))

	ev, err := p.Resolve(req)
	require.NoError(t, err)
	require.Equal(t, providers.Event{ID: "evt_az5sblvku4ge3dwpztvyizgcau", Type: "payment_approved", Time: time.Date(2019, 8, 23, 12, 32, 42, 0, time.UTC)}, ev)

	// Sign produces the same value.
	signer, err := checkout.New(providers.Config{Secrets: []string{vectorKey}})
	require.NoError(t, err)
	ours := providertest.Request(vectorBody)
	require.NoError(t, signer.Sign(ours, time.Time{}))
	require.Equal(t, vectorSig, ours.Header.Get(checkout.Header))
}

func TestAuthorizationKey(t *testing.T) {
	t.Parallel()
	cfg := providers.Config{
		Secrets:  []string{vectorKey},
		Settings: providertest.DecodeSettings(map[string]any{"authorization_key": "static-key"}),
	}
	p, err := checkout.New(cfg)
	require.NoError(t, err)

	req := providertest.Request(vectorBody, checkout.Header, vectorSig)
	require.ErrorIs(t, p.Verify(req), providers.ErrNoSignature)
	req.Header.Set(checkout.AuthorizationHeader, "static-kez")
	require.ErrorIs(t, p.Verify(req), providers.ErrInvalidSignature)
	req.Header.Set(checkout.AuthorizationHeader, "Bearer static-key")
	require.ErrorIs(t, p.Verify(req), providers.ErrInvalidSignature)
	req.Header.Set(checkout.AuthorizationHeader, "static-key")
	require.NoError(t, p.Verify(req))

	// The right key does not excuse a bad signature.
	req.Header.Set(checkout.Header, vectorSig[:63]+"0")
	require.ErrorIs(t, p.Verify(req), providers.ErrInvalidSignature)

	require.Equal(t, []string{checkout.Header, checkout.AuthorizationHeader}, p.Describe().Headers)
}

func TestNew(t *testing.T) {
	t.Parallel()
	_, err := checkout.New(providers.Config{})
	require.Error(t, err)

	_, err = checkout.New(providers.Config{Secrets: []string{"k"}, Settings: providertest.DecodeSettings(map[string]any{"webhook_id": "x"})})
	require.Error(t, err, "unknown settings are an error")

	_, err = checkout.New(providers.Config{Secrets: []string{"k"}, Settings: providertest.DecodeSettings(map[string]any{"authorization_key": " padded "})})
	require.ErrorContains(t, err, "checkout.authorization_key")

	// A tolerance is accepted and ignored: the scheme has no timestamp.
	p, err := checkout.New(providers.Config{Secrets: []string{vectorKey}, Tolerance: time.Nanosecond})
	require.NoError(t, err)
	require.NoError(t, p.Verify(providertest.Request(vectorBody, checkout.Header, vectorSig)))
	require.Zero(t, p.Describe().DefaultTolerance)
}

func TestResolve(t *testing.T) {
	t.Parallel()
	p, err := checkout.New(providers.Config{Secrets: []string{vectorKey}})
	require.NoError(t, err)

	_, err = p.Resolve(providertest.Request(`{"type":"payment_approved"}`))
	require.ErrorIs(t, err, providers.ErrNoEventID)
	_, err = p.Resolve(providertest.Request(`{"id":`))
	require.ErrorIs(t, err, providers.ErrMalformed)

	ev, err := p.Resolve(providertest.Request(`{"id":"evt_1","created_on":"2023-03-21T10:16:09.7617017Z"}`))
	require.NoError(t, err)
	require.Equal(t, time.Date(2023, 3, 21, 10, 16, 9, 761701700, time.UTC), ev.Time)
	ev, err = p.Resolve(providertest.Request(`{"id":"evt_1","created_on":"yesterday"}`))
	require.NoError(t, err)
	require.True(t, ev.Time.IsZero())
}

// FuzzVerify feeds arbitrary Cko-Signature and Authorization values: no
// panics, only signature errors, and only the exact values pass.
func FuzzVerify(f *testing.F) {
	f.Add(vectorSig, "static-key")
	f.Add(vectorSig[:32], "")
	f.Add("", "static-key ")
	f.Add("955AA0E851A004ECDC73126A6FA2F64D229A1ABA7593105CEA610E49358D74B1", "static-kez")
	f.Add("sha256="+vectorSig, "Bearer static-key")
	p, err := checkout.New(providers.Config{
		Secrets:  []string{vectorKey},
		Settings: providertest.DecodeSettings(map[string]any{"authorization_key": "static-key"}),
	})
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, sig, auth string) {
		req := providertest.Request(vectorBody)
		req.Header[checkout.Header] = []string{sig}
		req.Header[checkout.AuthorizationHeader] = []string{auth}
		err := p.Verify(req)
		if err == nil {
			if sig != vectorSig || auth != "static-key" {
				t.Fatalf("accepted sig %q auth %q", sig, auth)
			}
			return
		}
		if !providers.IsSignatureError(err) {
			t.Fatalf("not a signature error: %v", err)
		}
	})
}

// TestSecretHeaders: the Authorization header carries the static
// authorization key, a credential, whether or not the source checks it.
func TestSecretHeaders(t *testing.T) {
	t.Parallel()
	for _, settings := range []map[string]any{nil, {"authorization_key": "hookline-test-authorization-key"}} {
		p, err := providers.New(checkout.Name, providers.Config{Secrets: []string{"k"}, Settings: providertest.DecodeSettings(settings)})
		require.NoError(t, err)
		sh, ok := p.(providers.SecretHeaderer)
		require.True(t, ok)
		require.Equal(t, []string{"Authorization"}, sh.SecretHeaders())
		require.True(t, p.(providers.Describer).Describe().IDSigned)
	}
}
