// Package providertest is the conformance suite every provider adapter runs,
// in the spirit of River's riverdrivertest.Exercise: one Run call checks the
// sign→verify round trip, tampering, wrong and rotated secrets, missing and
// garbled headers (no panics), stale and future timestamps, several signatures
// in one header, and event extraction. Each adapter adds its published test
// vector or official SDK oracle in its own tests.
package providertest

import (
	"bytes"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/hookline/hookline/providers"
)

// Now is the fixed clock the suite runs at.
var Now = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// Features declares what a scheme can do, so the suite runs only the checks
// that apply (like Watermill's tests.Features).
type Features struct {
	// Timestamp: the scheme signs a timestamp; stale and future deliveries
	// must be rejected with ErrTimestampTooOld / ErrTimestampTooNew.
	Timestamp bool
	// MultipleSignatures: one request may carry several signatures (Stripe,
	// Paddle, Standard Webhooks). MergeSignatures must be set.
	MultipleSignatures bool
	// Unsigned: the scheme carries no signature (Mollie classic); signature
	// checks are skipped.
	Unsigned bool
	// BodyNotSigned: the signature does not cover the body bytes
	// (Xendit's static token); the tampered-body check is skipped.
	BodyNotSigned bool
}

// Harness describes one adapter to the suite.
type Harness struct {
	// Provider is the registered adapter name.
	Provider string
	// Settings is the provider-specific config block (`paypal: {...}`), as it
	// would appear in YAML; nil when the provider has none.
	Settings map[string]any
	// Secrets holds at least two distinct valid secrets in the provider's format.
	Secrets []string
	// Tolerance is passed to the adapter (zero: its default).
	Tolerance time.Duration
	// Delivery builds an unsigned delivery whose event id resolves to id (id
	// may be "", which must make Resolve fail with ErrNoEventID). It sets
	// every non-signature header the provider needs.
	Delivery func(id string) *providers.Request
	// WantType is the event type Delivery's events resolve to ("" to skip).
	WantType string
	// WantTime, when non-zero, is the event time Delivery's events resolve to.
	WantTime time.Time
	// Sign signs req with secret at time now. nil means: build the provider
	// with that one secret and use its providers.Signer.
	Sign func(t testing.TB, secret string, req *providers.Request, now time.Time)
	// MergeSignatures puts the signatures of b into a (Features.MultipleSignatures).
	MergeSignatures func(a, b http.Header)
	// SignatureHeaders are the headers carrying the signature; the suite deletes
	// and garbles each. Defaults to the adapter's Description().Headers.
	SignatureHeaders []string
	Features
}

// Build constructs the adapter named h.Provider with secrets at the suite's clock.
func (h *Harness) Build(t testing.TB, secrets ...string) providers.Provider {
	t.Helper()
	p, err := providers.New(h.Provider, h.config(secrets))
	require.NoError(t, err)
	return p
}

func (h *Harness) config(secrets []string) providers.Config {
	return providers.Config{
		Source:    "test",
		Secrets:   secrets,
		Tolerance: h.Tolerance,
		Settings:  DecodeSettings(h.Settings),
		Now:       func() time.Time { return Now },
	}
}

// DecodeSettings returns a providers.Config.Settings func that decodes m as
// the YAML block would be decoded (unknown fields are errors).
func DecodeSettings(m map[string]any) func(v any) error {
	return func(v any) error {
		if m == nil {
			return nil
		}
		raw, err := yaml.Marshal(m)
		if err != nil {
			return err
		}
		dec := yaml.NewDecoder(bytes.NewReader(raw))
		dec.KnownFields(true)
		return dec.Decode(v)
	}
}

// SignedDelivery returns Delivery(id) signed with secret at now.
func (h *Harness) SignedDelivery(t testing.TB, id, secret string, now time.Time) *providers.Request {
	t.Helper()
	req := h.Delivery(id)
	h.sign(t, secret, req, now)
	return req
}

func (h *Harness) sign(t testing.TB, secret string, req *providers.Request, now time.Time) {
	t.Helper()
	if h.Sign != nil {
		h.Sign(t, secret, req, now)
		return
	}
	p := h.Build(t, secret)
	s, ok := p.(providers.Signer)
	require.True(t, ok, "%s does not implement providers.Signer: set Harness.Sign", h.Provider)
	require.NoError(t, s.Sign(req, now))
}

// Clone copies a request deeply enough to tamper with it.
func Clone(r *providers.Request) *providers.Request {
	c := &providers.Request{Body: bytes.Clone(r.Body), Header: r.Header.Clone()}
	if r.URL != nil {
		u := *r.URL
		c.URL = &u
	}
	return c
}

func requireSignatureError(t *testing.T, err error) {
	t.Helper()
	require.Error(t, err)
	require.True(t, providers.IsSignatureError(err), "want a signature error, got %v", err)
}

// Run runs the conformance suite against the adapter h describes.
func Run(t *testing.T, h Harness) {
	require.GreaterOrEqual(t, len(h.Secrets), 2, "Harness.Secrets needs at least two secrets")
	require.NotNil(t, h.Delivery, "Harness.Delivery is required")

	p := h.Build(t, h.Secrets[0])
	sigHeaders := h.SignatureHeaders
	if sigHeaders == nil {
		if d, ok := p.(providers.Describer); ok {
			sigHeaders = d.Describe().Headers
		}
	}

	t.Run("RoundTrip", func(t *testing.T) {
		req := h.SignedDelivery(t, "evt_round_trip", h.Secrets[0], Now)
		require.NoError(t, p.Verify(req))
	})

	t.Run("Resolve", func(t *testing.T) {
		req := h.SignedDelivery(t, "evt_resolve_1", h.Secrets[0], Now)
		require.NoError(t, p.Verify(req))
		if sp, ok := p.(providers.Splitter); ok {
			items, err := sp.Split(req)
			require.NoError(t, err)
			require.NotEmpty(t, items)
			require.Equal(t, "evt_resolve_1", items[0].Event.ID)
			for _, it := range items {
				require.Equal(t, it.Body, req.Body[it.Offset:it.Offset+len(it.Body)], "item bytes must be a slice of the body")
			}
			if h.WantType != "" {
				require.Equal(t, h.WantType, items[0].Event.Type)
			}
			return
		}
		ev, err := p.Resolve(req)
		require.NoError(t, err)
		require.Equal(t, "evt_resolve_1", ev.ID)
		if h.WantType != "" {
			require.Equal(t, h.WantType, ev.Type)
		}
		if !h.WantTime.IsZero() {
			require.True(t, h.WantTime.Equal(ev.Time), "event time: want %v, got %v", h.WantTime, ev.Time)
		}
	})

	t.Run("EmptyEventID", func(t *testing.T) {
		req := h.SignedDelivery(t, "", h.Secrets[0], Now)
		var err error
		if sp, ok := p.(providers.Splitter); ok {
			if err = p.Verify(req); err == nil {
				_, err = sp.Split(req)
			}
		} else {
			_, err = p.Resolve(req)
		}
		require.ErrorIs(t, err, providers.ErrNoEventID)
	})

	t.Run("GarbledBody", func(t *testing.T) {
		// Resolving must not panic on any body; an error is fine.
		for _, body := range [][]byte{nil, []byte("{"), []byte("null"), []byte("[]"), []byte("\xff\xfe"), []byte(`{"id":{}}`)} {
			req := Clone(h.Delivery("x"))
			req.Body = body
			require.NotPanics(t, func() { _, _ = p.Resolve(req) })
			if sp, ok := p.(providers.Splitter); ok {
				require.NotPanics(t, func() { _, _ = sp.Split(req) })
			}
		}
	})

	if h.Unsigned {
		return
	}

	t.Run("TamperedBody", func(t *testing.T) {
		if h.BodyNotSigned {
			t.Skip("the scheme does not sign the body")
		}
		req := h.SignedDelivery(t, "evt_tampered", h.Secrets[0], Now)
		for _, i := range []int{0, len(req.Body) / 2, len(req.Body) - 1} {
			bad := Clone(req)
			bad.Body[i] ^= 0x01
			requireSignatureError(t, p.Verify(bad))
		}
		bad := Clone(req)
		bad.Body = append(bad.Body, ' ')
		requireSignatureError(t, p.Verify(bad))
	})

	t.Run("WrongSecret", func(t *testing.T) {
		req := h.SignedDelivery(t, "evt_wrong_secret", h.Secrets[1], Now)
		requireSignatureError(t, p.Verify(req))
	})

	t.Run("Rotation", func(t *testing.T) {
		both := h.Build(t, h.Secrets[0], h.Secrets[1])
		for _, s := range h.Secrets[:2] {
			require.NoError(t, both.Verify(h.SignedDelivery(t, "evt_rotation", s, Now)))
		}
	})

	t.Run("MultipleSignatures", func(t *testing.T) {
		if !h.MultipleSignatures {
			t.Skip("the scheme carries one signature per request")
		}
		require.NotNil(t, h.MergeSignatures, "Features.MultipleSignatures needs Harness.MergeSignatures")
		a := h.SignedDelivery(t, "evt_multi", h.Secrets[1], Now)
		b := h.SignedDelivery(t, "evt_multi", h.Secrets[0], Now)
		h.MergeSignatures(a.Header, b.Header)
		require.NoError(t, p.Verify(a), "a valid signature after an unknown one must be accepted")
		only1 := h.Build(t, h.Secrets[1])
		require.NoError(t, only1.Verify(a))
	})

	t.Run("Timestamps", func(t *testing.T) {
		if !h.Timestamp {
			t.Skip("the scheme has no timestamp")
		}
		tol := h.Tolerance
		if tol == 0 {
			d, ok := p.(providers.Describer)
			require.True(t, ok, "set Harness.Tolerance or implement Describer")
			tol = d.Describe().DefaultTolerance
		}
		require.NoError(t, p.Verify(h.SignedDelivery(t, "evt_ts", h.Secrets[0], Now.Add(-tol/2))))
		require.NoError(t, p.Verify(h.SignedDelivery(t, "evt_ts", h.Secrets[0], Now.Add(tol/2))))
		require.ErrorIs(t, p.Verify(h.SignedDelivery(t, "evt_ts", h.Secrets[0], Now.Add(-tol-2*time.Second))), providers.ErrTimestampTooOld)
		require.ErrorIs(t, p.Verify(h.SignedDelivery(t, "evt_ts", h.Secrets[0], Now.Add(tol+2*time.Second))), providers.ErrTimestampTooNew)
	})

	t.Run("MissingHeaders", func(t *testing.T) {
		req := h.SignedDelivery(t, "evt_missing", h.Secrets[0], Now)
		for _, name := range sigHeaders {
			bad := Clone(req)
			bad.Header.Del(name)
			if bad.URL != nil && name == "" {
				continue
			}
			var err error
			require.NotPanics(t, func() { err = p.Verify(bad) }, "header %s", name)
			requireSignatureError(t, err)
		}
		none := Clone(req)
		none.Header = http.Header{}
		requireSignatureError(t, p.Verify(none))
	})

	t.Run("GarbledHeaders", func(t *testing.T) {
		req := h.SignedDelivery(t, "evt_garbled", h.Secrets[0], Now)
		for _, name := range sigHeaders {
			orig := req.Header.Get(name)
			for _, v := range garbage(orig) {
				bad := Clone(req)
				bad.Header.Set(name, v)
				var err error
				require.NotPanics(t, func() { err = p.Verify(bad) }, "header %s = %q", name, v)
				if v != orig {
					require.Error(t, err, "header %s = %q", name, v)
				}
			}
		}
	})
}

// garbage returns hostile variations of a header value.
func garbage(orig string) []string {
	out := []string{"", " ", "=", ",", ";", "t=", "v1=", "t=,v1=", "ts=;h1=", "v1,", "v1,!!!!",
		"sha256=", "sha256=zz", "t=abc,v1=abc", "t=99999999999999999999,v1=00", "\x00\xff",
		strings.Repeat("a", 8192), strings.Repeat("v1=", 1000), "eyJhbGciOiJFUzI1NiJ9..",
		"a.b.c", "....", "|", "key|", "|sig", "&&&"}
	if len(orig) > 2 {
		out = append(out, orig[:len(orig)/2], orig[1:], orig+"x", strings.ToUpper(orig),
			strings.ReplaceAll(orig, "=", ""), strings.ReplaceAll(orig, ",", ";"))
	}
	return out
}

// Request builds a providers.Request with a JSON content type.
func Request(body string, header ...string) *providers.Request {
	h := http.Header{"Content-Type": {"application/json"}}
	for i := 0; i+1 < len(header); i += 2 {
		h.Set(header[i], header[i+1])
	}
	u, _ := url.Parse("https://hooks.example.com/webhooks/test")
	return &providers.Request{Body: []byte(body), Header: h, URL: u}
}

// ErrorIsAny reports whether err matches one of targets.
func ErrorIsAny(err error, targets ...error) bool {
	for _, t := range targets {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}
