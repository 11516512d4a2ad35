// SDK vectors: deliveries recorded with each provider's official Node.js SDK
// (published on npm by the provider itself), replayed against hookline's
// adapters. They are a stronger oracle than the doc formulas of
// providers/hmacspec: the SDK either produced the signature itself (direction
// "sdk-signs": a signing or test helper such as Braintree's
// webhookTesting.sampleNotification) or accepted a signature computed by the
// provider's scheme (direction "sdk-verifies"). Every genuine vector has a
// tampered twin, one byte of its signed content changed, that the SDK
// rejected, so an SDK call that checks nothing could not have produced them.
//
// The vectors live in providers/testdata/sdkvectors/vectors.json and are
// committed: this test needs neither node nor npm nor the network. They are
// regenerated with `make sdk-vectors` (npm ci and node gen.mjs in that
// directory, whose package.json pins the SDK versions); the generator fails
// rather than write a vector its SDK disagrees with. Each vector carries the
// Unix second it was signed at, and the adapter runs at that time.
package all_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/providers"
	_ "github.com/hookline/hookline/providers/all"
	"github.com/hookline/hookline/providers/providertest"
)

// sdkVectorFile is vectors.json as gen.mjs writes it.
type sdkVectorFile struct {
	Comment     string      `json:"comment"`
	GeneratedAt string      `json:"generated_at"`
	Node        string      `json:"node"`
	Vectors     []sdkVector `json:"vectors"`
}

// sdkVector is one recorded delivery and the SDK's verdict on it.
type sdkVector struct {
	// Provider is hookline's adapter name.
	Provider string `json:"provider"`
	// Variant tells a provider's vectors apart ("genuine", "events", …;
	// "<variant>-tampered" for the rejected twin).
	Variant string `json:"variant"`
	// SDK is the package@version, Function the SDK call(s) used and
	// Direction "sdk-signs" or "sdk-verifies".
	SDK       string `json:"sdk"`
	Function  string `json:"function"`
	Direction string `json:"direction"`
	// Secret is the secret as configured in hookline.
	Secret  string            `json:"secret"`
	Method  string            `json:"method"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"`
	// Time is the Unix second the delivery was signed at.
	Time int64 `json:"time"`
	// SDKAccepts is the SDK's verdict; hookline must agree.
	SDKAccepts bool `json:"sdk_accepts"`
	// SignatureHeaders are the headers hookline's Signer must reproduce
	// (with the body) from the delivery without them.
	SignatureHeaders []string `json:"signature_headers"`
	// SignSkip says why the Signer is not compared; empty: it is.
	SignSkip string `json:"sign_skip"`
	// OtherSecret is a secret under which the SDK refused the genuine
	// delivery, for schemes whose secret is a public key (SendGrid): such
	// a key with its last character changed is no key, or the same key.
	// Empty: the secret with its last letter or digit changed stands in.
	OtherSecret string `json:"other_secret"`
	// Note is for the reader.
	Note string `json:"note"`
	// SDKResponse is the SDK's answer to a handshake (Zoom's URL
	// validation); hookline's Respond must answer the same JSON.
	SDKResponse json.RawMessage `json:"sdk_response"`
}

func loadSDKVectors(t *testing.T) []sdkVector {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "testdata", "sdkvectors", "vectors.json"))
	require.NoError(t, err)
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var f sdkVectorFile
	require.NoError(t, dec.Decode(&f))
	require.NotEmpty(t, f.Vectors)
	return f.Vectors
}

// request builds the delivery as ingest does: the body read from an
// *http.Request, its headers, and the URL it was received on.
func (v *sdkVector) request(t *testing.T) *providers.Request {
	t.Helper()
	hr := httptest.NewRequest(v.Method, v.URL, strings.NewReader(v.Body))
	for k, val := range v.Headers {
		hr.Header.Set(k, val)
	}
	body, err := io.ReadAll(hr.Body)
	require.NoError(t, err)
	u := *hr.URL
	u.Host, u.Scheme = hr.Host, "http"
	if hr.TLS != nil {
		u.Scheme = "https"
	}
	return &providers.Request{Body: body, Header: hr.Header, URL: &u}
}

// TestSDKVectors replays every vector: Verify succeeds if and only if the
// SDK accepted the delivery; an accepted one resolves to an event (or is
// answered as the SDK answers it, for a handshake), and hookline's Signer
// reproduces its signature where the scheme is deterministic.
func TestSDKVectors(t *testing.T) {
	t.Parallel()
	byProvider := map[string][]sdkVector{}
	var order []string
	for _, v := range loadSDKVectors(t) {
		if _, ok := byProvider[v.Provider]; !ok {
			order = append(order, v.Provider)
		}
		byProvider[v.Provider] = append(byProvider[v.Provider], v)
	}
	for _, name := range order {
		vs := byProvider[name]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var accepted, rejected int
			for _, v := range vs {
				if v.SDKAccepts {
					accepted++
				} else {
					rejected++
				}
				t.Run(v.Variant, func(t *testing.T) { replaySDKVector(t, v) })
			}
			// A provider's vectors always come as a genuine delivery and
			// its tampered twin: a file missing either is truncated.
			require.Positive(t, accepted, "no vector the SDK accepts")
			require.Positive(t, rejected, "no vector the SDK rejects")
		})
	}
}

func replaySDKVector(t *testing.T, v sdkVector) {
	require.NotEmpty(t, v.Secret)
	require.NotZero(t, v.Time)
	now := time.Unix(v.Time, 0)
	p, err := providers.New(v.Provider, providers.Config{
		Source:  "sdk-" + v.Provider,
		Secrets: []string{v.Secret},
		Now:     func() time.Time { return now },
	})
	require.NoError(t, err)
	req := v.request(t)

	err = p.Verify(providertest.Clone(req))
	if !v.SDKAccepts {
		require.Error(t, err, "%s rejects this delivery (%s) but hookline accepts it", v.SDK, v.Function)
		require.True(t, providers.IsSignatureError(err), "want a signature error, got %v", err)
		return
	}
	require.NoError(t, err, "%s accepts this delivery (%s) but hookline does not", v.SDK, v.Function)

	t.Run("resolve", func(t *testing.T) {
		if len(v.SDKResponse) > 0 {
			rp, ok := p.(providers.Responder)
			require.True(t, ok, "the SDK answered a handshake; %s has no Responder", v.Provider)
			status, body, handled := rp.Respond(providertest.Clone(req))
			require.True(t, handled)
			require.Equal(t, http.StatusOK, status)
			require.JSONEq(t, string(v.SDKResponse), string(body))
			return
		}
		ev, err := p.Resolve(providertest.Clone(req))
		require.NoError(t, err)
		require.NotEmpty(t, ev.ID)
	})

	t.Run("sign", func(t *testing.T) {
		if v.SignSkip != "" {
			t.Skip("Sign not compared: " + v.SignSkip)
		}
		s, ok := p.(providers.Signer)
		require.True(t, ok, "%s has no Signer", v.Provider)
		ours := providertest.Clone(req)
		for _, h := range v.SignatureHeaders {
			ours.Header.Del(h)
		}
		require.NoError(t, s.Sign(ours, now))
		for _, h := range v.SignatureHeaders {
			require.Equal(t, v.Headers[h], ours.Header.Get(h), "header %s", h)
		}
		require.Equal(t, v.Body, string(ours.Body))
	})
}

// TestSDKVectorsCatchMutation checks that the replay can fail: a genuine
// vector with another body (Mercado Pago signs none), verified under
// another secret, or a day late (schemes with a default tolerance) is
// refused, so a passing TestSDKVectors means agreement with the SDK.
func TestSDKVectorsCatchMutation(t *testing.T) {
	t.Parallel()
	for _, v := range loadSDKVectors(t) {
		if !v.SDKAccepts {
			continue
		}
		t.Run(v.Provider+"/"+v.Variant, func(t *testing.T) {
			now := time.Unix(v.Time, 0)
			p, err := providers.New(v.Provider, providers.Config{Secrets: []string{v.Secret}, Now: func() time.Time { return now }})
			require.NoError(t, err)

			if v.Provider != "mercadopago" { // Mercado Pago signs no body
				body := v
				body.Body = mutateLastByte(v.Body)
				require.Error(t, p.Verify(body.request(t)), "a changed body")
			}

			if d, ok := p.(providers.Describer); ok && d.Describe().DefaultTolerance > 0 {
				// A signed time checked against a default tolerance: the
				// same delivery a day later is refused.
				late := now.Add(24 * time.Hour)
				lp, err := providers.New(v.Provider, providers.Config{Secrets: []string{v.Secret}, Now: func() time.Time { return late }})
				require.NoError(t, err)
				require.Error(t, lp.Verify(v.request(t)), "a day late")
			}

			otherSecret := mutateLastByte(v.Secret)
			if v.OtherSecret != "" {
				otherSecret = v.OtherSecret
			}
			other, err := providers.New(v.Provider, providers.Config{Secrets: []string{otherSecret}, Now: func() time.Time { return now }})
			require.NoError(t, err)
			require.Error(t, other.Verify(v.request(t)), "another secret")
		})
	}
}

// mutateLastByte changes the last letter or digit of s, keeping JSON, form
// and secret formats intact.
func mutateLastByte(s string) string {
	b := []byte(s)
	for i := len(b) - 1; i >= 0; i-- {
		switch c := b[i]; {
		case c >= '0' && c <= '8', c >= 'a' && c <= 'y', c >= 'A' && c <= 'Y':
			b[i] = c + 1
			return string(b)
		case c == '9' || c == 'z' || c == 'Z':
			b[i] = c - 1
			return string(b)
		}
	}
	return s + "x"
}
