package xendit_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/providertest"
	"github.com/hookline/hookline/providers/xendit"
)

var _ providers.Provider = (*xendit.Verifier)(nil)
var _ providers.Signer = (*xendit.Verifier)(nil)
var _ providers.Describer = (*xendit.Verifier)(nil)

// sample is a payment callback; its webhook-id header (and body id) is id.
func sample(id string) *providers.Request {
	req := providertest.Request(`{"id":"` + id + `","event":"payment.succeeded","business_id":"5f27a14a9bf05c73dd040bc8","created":"2026-11-30T11:58:20.123Z","data":{"payment_id":"py-1402feb0-bb79-47ae-9d1e-e69394d3949c","status":"SUCCEEDED","amount":1500,"currency":"IDR"}}`)
	if id != "" {
		req.Header.Set("webhook-id", id)
	}
	return req
}

func TestConformance(t *testing.T) {
	t.Parallel()
	providertest.Run(t, providertest.Harness{
		Provider: xendit.Name,
		Secrets:  []string{"xnd_callback_token_one", "xnd_callback_token_two"},
		Delivery: sample,
		WantType: "payment.succeeded",
		WantTime: time.Date(2026, 11, 30, 11, 58, 20, 123e6, time.UTC),
		Features: providertest.Features{BodyNotSigned: true},
	})
}

func TestToken(t *testing.T) {
	t.Parallel()
	p, err := xendit.New(providers.Config{Secrets: []string{"old-token", "new-token-longer"}, Tolerance: time.Nanosecond})
	require.NoError(t, err)

	for _, tok := range []string{"old-token", "new-token-longer"} {
		require.NoError(t, p.Verify(providertest.Request(`{}`, "x-callback-token", tok)))
	}
	for _, tok := range []string{"old-toke", "old-token-", "OLD-TOKEN", "new-token", "old-tokennew-token-longer"} {
		require.ErrorIs(t, p.Verify(providertest.Request(`{}`, "x-callback-token", tok)), providers.ErrInvalidSignature, tok)
	}
	require.ErrorIs(t, p.Verify(providertest.Request(`{}`)), providers.ErrNoSignature)

	// Sign sets the first token.
	req := providertest.Request(`{}`)
	require.NoError(t, p.Sign(req, time.Time{}))
	require.Equal(t, "old-token", req.Header.Get(xendit.Header))
}

func TestResolve(t *testing.T) {
	t.Parallel()
	p, err := xendit.New(providers.Config{Secrets: []string{"t"}})
	require.NoError(t, err)

	// The webhook-id header wins over the body id.
	ev, err := p.Resolve(providertest.Request(`{"id":"579c8d61f23fa4ca35e52da4","status":"PAID"}`, "webhook-id", "wh_1"))
	require.NoError(t, err)
	require.Equal(t, providers.Event{ID: "wh_1", Type: "PAID"}, ev)

	// An invoice callback without the header: body id and status.
	ev, err = p.Resolve(providertest.Request(`{"id":"579c8d61f23fa4ca35e52da4","external_id":"invoice_123124123","status":"PAID","created":"2016-10-10T08:15:03.404Z"}`))
	require.NoError(t, err)
	require.Equal(t, providers.Event{ID: "579c8d61f23fa4ca35e52da4", Type: "PAID", Time: time.Date(2016, 10, 10, 8, 15, 3, 404e6, time.UTC)}, ev)

	_, err = p.Resolve(providertest.Request(`{"event":"payment.succeeded"}`, "webhook-id", " "))
	require.ErrorIs(t, err, providers.ErrNoEventID)
	_, err = p.Resolve(providertest.Request(`{"id":`, "webhook-id", "wh_1"))
	require.ErrorIs(t, err, providers.ErrMalformed)
}

func TestNew(t *testing.T) {
	t.Parallel()
	_, err := xendit.New(providers.Config{})
	require.Error(t, err)
	_, err = xendit.New(providers.Config{Secrets: []string{"ok", " padded"}})
	require.ErrorContains(t, err, "secrets[1]")
	_, err = xendit.New(providers.Config{Secrets: []string{""}})
	require.ErrorContains(t, err, "secrets[0]")
	_, err = xendit.New(providers.Config{Secrets: []string{"k"}, Settings: providertest.DecodeSettings(map[string]any{"token": "x"})})
	require.Error(t, err, "unknown settings are an error")
}

// FuzzVerify feeds arbitrary x-callback-token values: no panics, only
// signature errors, and only the configured tokens pass.
func FuzzVerify(f *testing.F) {
	f.Add("xnd_callback_token")
	f.Add("XND_CALLBACK_TOKEN")
	f.Add("xnd_callback_toke")
	f.Add("xnd_callback_token\x00")
	f.Add("")
	p, err := xendit.New(providers.Config{Secrets: []string{"xnd_callback_token", "rotated"}})
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, tok string) {
		req := providertest.Request(`{"id":"x"}`)
		req.Header.Set(xendit.Header, tok)
		err := p.Verify(req)
		if err == nil {
			if tok != "xnd_callback_token" && tok != "rotated" {
				t.Fatalf("accepted %q", tok)
			}
			return
		}
		if !providers.IsSignatureError(err) {
			t.Fatalf("not a signature error: %v", err)
		}
	})
}

// TestSecretHeaders: the callback token is a credential, named so that
// ingest never stores it; nothing is signed, so there is no content key.
func TestSecretHeaders(t *testing.T) {
	t.Parallel()
	p, err := providers.New(xendit.Name, providers.Config{Secrets: []string{"t"}})
	require.NoError(t, err)
	sh, ok := p.(providers.SecretHeaderer)
	require.True(t, ok)
	require.Equal(t, []string{"X-Callback-Token"}, sh.SecretHeaders())
	_, ok = p.(providers.ContentKeyer)
	require.False(t, ok, "the token covers nothing: there is no signed content to key replays on")
	require.False(t, p.(providers.Describer).Describe().IDSigned)
}
