package meta_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/meta"
	"github.com/hookline/hookline/providers/providertest"
)

var _ providers.GetResponder = (*meta.Verifier)(nil)

func harness(s int) providertest.Harness {
	spec := meta.Specs[s]
	return providertest.Harness{
		Provider: spec.Name,
		Secrets:  []string{"app_secret_one", "app_secret_two"},
		Settings: map[string]any{"verify_token": "hookline-verify"},
		Delivery: func(id string) *providers.Request { return spec.Sample(id, "") },
		WantID:   func(id string) string { return spec.SampleID(id, "") },
		WantType: spec.Example.Type,
	}
}

func TestConformance(t *testing.T) {
	t.Parallel()
	for i, s := range meta.Specs {
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			providertest.Run(t, harness(i))
		})
	}
}

// TestDocFormula recomputes the signature as Meta's "Validating payloads"
// describes it (https://developers.facebook.com/docs/graph-api/webhooks/getting-started#validate-payloads,
// ⚠ not re-checked for this change: the formula as documented there): "sha256=" + hex HMAC-SHA256 of the raw payload under
// the app secret. Meta publishes no test vector; the formula is recomputed
// independently.
func TestDocFormula(t *testing.T) {
	t.Parallel()
	for i, s := range meta.Specs {
		h := harness(i)
		p := h.Build(t, "app_secret")
		req := s.Sample("1234567890", "")
		m := hmac.New(sha256.New, []byte("app_secret"))
		m.Write(req.Body)
		req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(m.Sum(nil)))
		require.NoError(t, p.Verify(req), s.Name)
	}
}

func get(query string) *providers.Request {
	u, _ := url.Parse("https://hooks.example.com/webhooks/meta?" + query)
	return &providers.Request{Header: http.Header{}, URL: u}
}

// TestHandshake: the challenge is echoed only for the configured token.
func TestHandshake(t *testing.T) {
	t.Parallel()
	h := harness(0)
	p := h.Build(t, "s").(*meta.Verifier)
	status, ct, body, handled := p.RespondGet(get("hub.mode=subscribe&hub.verify_token=hookline-verify&hub.challenge=1158201444"))
	require.True(t, handled)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "text/plain; charset=utf-8", ct)
	require.Equal(t, "1158201444", string(body))

	status, _, _, handled = p.RespondGet(get("hub.mode=subscribe&hub.verify_token=wrong&hub.challenge=1158201444"))
	require.True(t, handled)
	require.Equal(t, http.StatusForbidden, status)

	for _, q := range []string{"", "hub.mode=unsubscribe&hub.verify_token=hookline-verify&hub.challenge=1", "hub.mode=subscribe&hub.verify_token=hookline-verify&hub.challenge=a%0Ab"} {
		_, _, _, handled = p.RespondGet(get(q))
		require.False(t, handled, q)
	}

	// Without a verify_token, no GET is answered.
	bare, err := meta.New(meta.Specs[0], providers.Config{Secrets: []string{"s"}})
	require.NoError(t, err)
	_, _, _, handled = bare.RespondGet(get("hub.mode=subscribe&hub.verify_token=&hub.challenge=1"))
	require.False(t, handled)
}

func FuzzHandshake(f *testing.F) {
	f.Add("hub.mode=subscribe&hub.verify_token=t&hub.challenge=1158201444")
	f.Add("hub.mode=subscribe&hub.challenge=%00")
	f.Add("%zz")
	f.Fuzz(func(t *testing.T, query string) {
		r := &providers.Request{Header: http.Header{}, URL: &url.URL{RawQuery: query}}
		_, challenge, ok := meta.Handshake(r)
		if ok && (challenge == "" || len(challenge) > meta.MaxChallenge) {
			t.Fatalf("challenge %q accepted", challenge)
		}
	})
}
