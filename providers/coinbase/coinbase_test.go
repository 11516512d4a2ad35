package coinbase_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/coinbase"
	"github.com/hookline/hookline/providers/providertest"
)

var _ providers.Provider = (*coinbase.Verifier)(nil)
var _ providers.Signer = (*coinbase.Verifier)(nil)
var _ providers.Describer = (*coinbase.Verifier)(nil)

func sample(id string) *providers.Request {
	return providertest.Request(`{"id":7,"scheduled_for":"2026-11-30T11:58:10Z","attempt_number":1,"event":{"id":"` + id + `","resource":"event","type":"charge:confirmed","api_version":"2018-03-22","created_at":"2026-11-30T11:58:02Z","data":{"code":"66BEOV2A","pricing_type":"fixed_price"}}}`)
}

func TestConformance(t *testing.T) {
	t.Parallel()
	providertest.Run(t, providertest.Harness{
		Provider: coinbase.Name,
		Secrets:  []string{"cc_shared_secret_one", "cc_shared_secret_two"},
		Delivery: sample,
		WantType: "charge:confirmed",
		WantTime: time.Date(2026, 11, 30, 11, 58, 2, 0, time.UTC),
	})
}

// The vector was computed independently of this package with
//
//	printf %s "$vectorBody" | openssl dgst -sha256 -hmac 'cc_shared_secret'
//
// on the example event of the Coinbase Commerce docs.
const (
	vectorSecret = "cc_shared_secret"
	vectorBody   = `{"id":1,"scheduled_for":"2017-01-31T20:50:02Z","event":{"id":"24934862-d980-46cb-9402-43c81b0cdba6","resource":"event","type":"charge:created","api_version":"2018-03-22","created_at":"2017-01-31T20:49:02Z","data":{"code":"66BEOV2A","name":"The Sovereign Individual","pricing_type":"no_price"}}}`
	vectorSig    = "2fc90605b5f5317c42e6f5e855cabb7f6b8edacd1d427760906d9f375150235e"
)

func TestOpenSSLVector(t *testing.T) {
	t.Parallel()
	p, err := coinbase.New(providers.Config{Secrets: []string{"old", vectorSecret}, Tolerance: time.Nanosecond})
	require.NoError(t, err)
	req := providertest.Request(vectorBody, "x-cc-webhook-signature", vectorSig)
	require.NoError(t, p.Verify(req))
	ev, err := p.Resolve(req)
	require.NoError(t, err)
	require.Equal(t, providers.Event{ID: "24934862-d980-46cb-9402-43c81b0cdba6", Type: "charge:created", Time: time.Date(2017, 1, 31, 20, 49, 2, 0, time.UTC)}, ev)

	signer, err := coinbase.New(providers.Config{Secrets: []string{vectorSecret}})
	require.NoError(t, err)
	ours := providertest.Request(vectorBody)
	require.NoError(t, signer.Sign(ours, time.Time{}))
	require.Equal(t, vectorSig, ours.Header.Get(coinbase.Header))
}

func TestResolve(t *testing.T) {
	t.Parallel()
	p, err := coinbase.New(providers.Config{Secrets: []string{vectorSecret}})
	require.NoError(t, err)
	// The outer id is the delivery, not the event.
	_, err = p.Resolve(providertest.Request(`{"id":1,"event":{"type":"charge:created"}}`))
	require.ErrorIs(t, err, providers.ErrNoEventID)
	_, err = p.Resolve(providertest.Request(`{"id":"evt_outer"}`))
	require.ErrorIs(t, err, providers.ErrNoEventID)
	_, err = p.Resolve(providertest.Request(`{"event":`))
	require.ErrorIs(t, err, providers.ErrMalformed)
}

func TestNew(t *testing.T) {
	t.Parallel()
	_, err := coinbase.New(providers.Config{})
	require.Error(t, err)
	_, err = coinbase.New(providers.Config{Secrets: []string{"k"}, Settings: providertest.DecodeSettings(map[string]any{"api_key": "x"})})
	require.Error(t, err, "unknown settings are an error")
}

// FuzzVerify feeds arbitrary X-CC-Webhook-Signature values: no panics, only
// signature errors, and only the exact signature passes.
func FuzzVerify(f *testing.F) {
	f.Add(vectorSig)
	f.Add("2FC90605B5F5317C42E6F5E855CABB7F6B8EDACD1D427760906D9F375150235E")
	f.Add("sha256=" + vectorSig)
	f.Add(vectorSig + " ")
	f.Add("")
	p, err := coinbase.New(providers.Config{Secrets: []string{vectorSecret}})
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, sig string) {
		req := providertest.Request(vectorBody)
		req.Header.Set(coinbase.Header, sig)
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
