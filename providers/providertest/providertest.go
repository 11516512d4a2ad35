// Package providertest is the conformance suite every provider adapter runs,
// in the spirit of River's riverdrivertest.Exercise: one Run call checks the
// sign→verify round trip, unsigned deliveries, tampering, wrong and rotated
// secrets (or a wrong key, for schemes without a shared secret), missing and
// garbled headers (no panics), fallback headers, stale and future timestamps,
// several signatures in one header, and event extraction, composite ids
// included. Adapters run it under their real registered name; each adds its
// published test vector or official SDK oracle in its own tests.
package providertest

import (
	"bytes"
	"errors"
	"net/http"
	"net/url"
	"slices"
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
	// SignatureInBody: the signature lives in the body or its form fields
	// (Adyen's items, Braintree's bt_signature), so a request stripped of all
	// its headers still carries it and may verify: the "no headers at all"
	// part of MissingHeaders only checks for panics. UnsignedDelivery,
	// TamperedBody and WrongSecret still run.
	SignatureInBody bool
	// NoSharedSecret: the sender signs with its own private key and the
	// adapter takes no secrets (PayPal). Harness.Secrets must be empty and
	// Sign receives ""; WrongSecret and Rotation do not apply, and a wrong
	// key is checked with Harness.WrongSigner instead.
	NoSharedSecret bool
}

// Harness describes one adapter to the suite.
type Harness struct {
	// Provider is the registered adapter name.
	Provider string
	// Settings is the provider-specific config block (`paypal: {...}`), as it
	// would appear in YAML; nil when the provider has none.
	Settings map[string]any
	// Secrets holds at least two distinct valid secrets in the provider's
	// format; empty under Features.NoSharedSecret.
	Secrets []string
	// Tolerance is passed to the adapter (zero: its default).
	Tolerance time.Duration
	// Delivery builds an unsigned delivery whose event id resolves to
	// WantID(id) (id may be "": see WantID). It sets every non-signature
	// header the provider needs.
	Delivery func(id string) *providers.Request
	// WantID is the event id Resolve (or Split, for the first item) must
	// return for Delivery(id): composite ids such as Adyen's
	// "{pspReference}:{eventCode}:{success}" or GitHub's "{hook}:{delivery}",
	// or Plaid's body hash. nil means the identity. Where WantID("") is "",
	// Delivery("") must fail to resolve with ErrNoEventID; a scheme whose id
	// is never empty (Plaid's body hash) returns the id Delivery("") has.
	WantID func(id string) string
	// EventID and EventType are the source's event_id and event_type key
	// resolvers (ParseKeyResolver notation) for adapters without a default
	// id (hmac): the suite then resolves events as ingest does for such a
	// source, with providers.EventResolver, instead of the adapter's Resolve.
	EventID, EventType string
	// WantType is the event type Delivery's events resolve to ("" to skip).
	WantType string
	// WantTime, when non-zero, is the event time Delivery's events resolve to.
	WantTime time.Time
	// Sign signs req with secret at time now (secret is "" under
	// Features.NoSharedSecret). nil means: build the provider with that one
	// secret (none under NoSharedSecret) and use its providers.Signer.
	Sign func(t testing.TB, secret string, req *providers.Request, now time.Time)
	// WrongSigner signs req at Now as the sender would, but with a key the
	// adapter must refuse (another private key than the sender's). Optional;
	// when set, WrongSecret checks that such a delivery does not verify. It is
	// the wrong-key check of schemes without a shared secret.
	WrongSigner func(t testing.TB, req *providers.Request)
	// MergeSignatures puts the signatures of b into a (Features.MultipleSignatures).
	MergeSignatures func(a, b http.Header)
	// SignatureHeaders are the headers carrying the signature; the suite
	// deletes and garbles each, and checks that without them hostile values
	// in the adapter's other signature headers never verify. Defaults to the
	// adapter's Description().Headers, never its FallbackHeaders: without
	// the primary headers, a fallback may legitimately carry a valid
	// signature. To run the suite through the fallbacks (the svix-* trio,
	// GitHub's legacy X-Hub-Signature), name them here and set a Sign that
	// writes them.
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
	var secrets []string
	if !h.NoSharedSecret {
		secrets = []string{secret}
	}
	p := h.Build(t, secrets...)
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

// wantID is the event id Delivery(id) must resolve to.
func (h *Harness) wantID(id string) string {
	if h.WantID == nil {
		return id
	}
	return h.WantID(id)
}

// resolver is what resolves events of a source using p, as ingest does: the
// source's key resolvers when the harness sets EventID, else p itself.
func (h *Harness) resolver(t *testing.T, p providers.Provider) providers.Resolver {
	t.Helper()
	if h.EventID == "" {
		require.Empty(t, h.EventType, "Harness.EventType needs Harness.EventID")
		return p
	}
	_, isSplitter := p.(providers.Splitter)
	require.False(t, isSplitter, "Harness.EventID: batch deliveries are split by the adapter")
	id, err := providers.ParseKeyResolver(h.EventID)
	require.NoError(t, err, "Harness.EventID")
	er := providers.EventResolver{ID: id}
	if h.EventType != "" {
		er.Type, err = providers.ParseKeyResolver(h.EventType)
		require.NoError(t, err, "Harness.EventType")
	}
	return er
}

// resolveFirst resolves req (verified) to its event, or its first item's for
// a Splitter, and checks that items are slices of the body.
func resolveFirst(t *testing.T, p providers.Provider, r providers.Resolver, req *providers.Request) (providers.Event, error) {
	t.Helper()
	sp, ok := p.(providers.Splitter)
	if !ok {
		return r.Resolve(req)
	}
	items, err := sp.Split(req)
	if err != nil {
		return providers.Event{}, err
	}
	require.NotEmpty(t, items, "Split returned no items and no error")
	for _, it := range items {
		require.Equal(t, it.Body, req.Body[it.Offset:it.Offset+len(it.Body)], "item bytes must be a slice of the body")
	}
	return items[0].Event, nil
}

// Run runs the conformance suite against the adapter h describes.
func Run(t *testing.T, h Harness) {
	require.NotNil(t, h.Delivery, "Harness.Delivery is required")
	var secret0 string // what the delivery under test is signed with
	if h.NoSharedSecret {
		require.Empty(t, h.Secrets, "Features.NoSharedSecret: the adapter takes no secrets; leave Harness.Secrets empty")
		require.False(t, h.MultipleSignatures, "Features.NoSharedSecret and MultipleSignatures exclude each other")
	} else {
		require.GreaterOrEqual(t, len(h.Secrets), 2, "Harness.Secrets needs at least two secrets")
		secret0 = h.Secrets[0]
	}

	p := h.Build(t, h.Secrets[:min(len(h.Secrets), 1)]...)
	resolver := h.resolver(t, p)
	var desc providers.Description
	if d, ok := p.(providers.Describer); ok {
		desc = d.Describe()
	}
	sigHeaders := h.SignatureHeaders
	if sigHeaders == nil {
		sigHeaders = desc.Headers
	}
	// otherHeaders are the signature headers the adapter also reads that the
	// suite does not sign: its fallbacks (or, when SignatureHeaders names the
	// fallbacks, its primary headers).
	var otherHeaders []string
	for _, name := range slices.Concat(desc.Headers, desc.FallbackHeaders) {
		if !slices.ContainsFunc(sigHeaders, func(s string) bool { return http.CanonicalHeaderKey(s) == http.CanonicalHeaderKey(name) }) {
			otherHeaders = append(otherHeaders, name)
		}
	}

	t.Run("RoundTrip", func(t *testing.T) {
		req := h.SignedDelivery(t, "evt_round_trip", secret0, Now)
		require.NoError(t, p.Verify(req))
	})

	t.Run("Resolve", func(t *testing.T) {
		req := h.SignedDelivery(t, "evt_resolve_1", secret0, Now)
		require.NoError(t, p.Verify(req))
		ev, err := resolveFirst(t, p, resolver, req)
		require.NoError(t, err)
		require.NotEmpty(t, h.wantID("evt_resolve_1"), "Harness.WantID maps a non-empty id to \"\"")
		require.Equal(t, h.wantID("evt_resolve_1"), ev.ID)
		if h.WantType != "" {
			require.Equal(t, h.WantType, ev.Type)
		}
		if !h.WantTime.IsZero() {
			require.True(t, h.WantTime.Equal(ev.Time), "event time: want %v, got %v", h.WantTime, ev.Time)
		}

		// Another id is another event (and WantID does depend on its id).
		req2 := h.SignedDelivery(t, "evt_resolve_2", secret0, Now)
		require.NoError(t, p.Verify(req2))
		ev2, err := resolveFirst(t, p, resolver, req2)
		require.NoError(t, err)
		require.Equal(t, h.wantID("evt_resolve_2"), ev2.ID)
		require.NotEqual(t, ev.ID, ev2.ID, "two deliveries built from different ids resolved to one event id")
	})

	t.Run("EmptyEventID", func(t *testing.T) {
		req := h.SignedDelivery(t, "", secret0, Now)
		if _, ok := p.(providers.Splitter); ok {
			// Split runs on verified deliveries only.
			require.NoError(t, p.Verify(req))
		}
		ev, err := resolveFirst(t, p, resolver, req)
		if want := h.wantID(""); want != "" {
			// The scheme always has an id (a body hash).
			require.NoError(t, err)
			require.Equal(t, want, ev.ID)
			return
		}
		require.ErrorIs(t, err, providers.ErrNoEventID)
	})

	t.Run("GarbledBody", func(t *testing.T) {
		// Resolving must not panic on any body; an error is fine.
		for _, body := range [][]byte{nil, []byte("{"), []byte("null"), []byte("[]"), []byte("\xff\xfe"), []byte(`{"id":{}}`)} {
			req := Clone(h.Delivery("x"))
			req.Body = body
			require.NotPanics(t, func() { _, _ = p.Resolve(req) })
			require.NotPanics(t, func() { _, _ = resolver.Resolve(req) })
			if sp, ok := p.(providers.Splitter); ok {
				require.NotPanics(t, func() { _, _ = sp.Split(req) })
			}
		}
	})

	if h.Unsigned {
		return
	}

	t.Run("UnsignedDelivery", func(t *testing.T) {
		var err error
		require.NotPanics(t, func() { err = p.Verify(h.Delivery("evt_unsigned")) })
		require.ErrorIs(t, err, providers.ErrNoSignature)
	})

	t.Run("TamperedBody", func(t *testing.T) {
		if h.BodyNotSigned {
			t.Skip("the scheme does not sign the body")
		}
		req := h.SignedDelivery(t, "evt_tampered", secret0, Now)
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
		if h.WrongSigner != nil {
			req := h.Delivery("evt_wrong_key")
			h.WrongSigner(t, req)
			requireSignatureError(t, p.Verify(req))
		}
		if h.NoSharedSecret {
			if h.WrongSigner == nil {
				t.Skip("no shared secret, and no Harness.WrongSigner to sign with a wrong key")
			}
			return
		}
		req := h.SignedDelivery(t, "evt_wrong_secret", h.Secrets[1], Now)
		requireSignatureError(t, p.Verify(req))
	})

	t.Run("Rotation", func(t *testing.T) {
		if h.NoSharedSecret {
			t.Skip("the scheme has no shared secret to rotate")
		}
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
			tol = desc.DefaultTolerance
			require.NotZero(t, tol, "set Harness.Tolerance or describe a DefaultTolerance")
		}
		require.NoError(t, p.Verify(h.SignedDelivery(t, "evt_ts", secret0, Now.Add(-tol/2))))
		require.NoError(t, p.Verify(h.SignedDelivery(t, "evt_ts", secret0, Now.Add(tol/2))))
		require.ErrorIs(t, p.Verify(h.SignedDelivery(t, "evt_ts", secret0, Now.Add(-tol-2*time.Second))), providers.ErrTimestampTooOld)
		require.ErrorIs(t, p.Verify(h.SignedDelivery(t, "evt_ts", secret0, Now.Add(tol+2*time.Second))), providers.ErrTimestampTooNew)
	})

	t.Run("MissingHeaders", func(t *testing.T) {
		req := h.SignedDelivery(t, "evt_missing", secret0, Now)
		for _, name := range sigHeaders {
			bad := Clone(req)
			bad.Header.Del(name)
			var err error
			require.NotPanics(t, func() { err = p.Verify(bad) }, "header %s", name)
			requireSignatureError(t, err)
		}
		none := Clone(req)
		none.Header = http.Header{}
		var err error
		require.NotPanics(t, func() { err = p.Verify(none) })
		if h.SignatureInBody {
			// The signature is still in the body; UnsignedDelivery covers
			// its absence.
			return
		}
		requireSignatureError(t, err)
	})

	t.Run("FallbackHeaders", func(t *testing.T) {
		if len(otherHeaders) == 0 {
			t.Skip("the scheme reads no fallback signature headers")
		}
		// Without the signed headers, hostile values in the others (read
		// as fallbacks) never verify and never panic.
		req := h.SignedDelivery(t, "evt_fallback", secret0, Now)
		for _, name := range sigHeaders {
			req.Header.Del(name)
		}
		for _, name := range otherHeaders {
			for _, v := range garbage("") {
				bad := Clone(req)
				bad.Header.Set(name, v)
				var err error
				require.NotPanics(t, func() { err = p.Verify(bad) }, "header %s = %q", name, v)
				requireSignatureError(t, err)
			}
		}
		for _, v := range garbage("") {
			bad := Clone(req)
			for _, name := range otherHeaders {
				bad.Header.Set(name, v)
			}
			var err error
			require.NotPanics(t, func() { err = p.Verify(bad) }, "all of %v = %q", otherHeaders, v)
			requireSignatureError(t, err)
		}
	})

	t.Run("GarbledHeaders", func(t *testing.T) {
		req := h.SignedDelivery(t, "evt_garbled", secret0, Now)
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

// ContentKeyReplay checks the providers.ContentKeyer of h's adapter, whose
// event id comes from a header the signature does not cover. A delivery
// signed by h is replayed with its unsigned id changed by refresh: the replay
// still verifies and resolves to another event id, yet has the same content
// key, so ingest takes it for a duplicate. other is an unsigned delivery
// whose signed content differs (another body); signed by h, it verifies and
// has another key.
func ContentKeyReplay(t *testing.T, h Harness, refresh func(*providers.Request), other *providers.Request) {
	t.Helper()
	var secret0 string
	if !h.NoSharedSecret {
		require.NotEmpty(t, h.Secrets, "Harness.Secrets")
		secret0 = h.Secrets[0]
	}
	p := h.Build(t, h.Secrets[:min(len(h.Secrets), 1)]...)
	ck, ok := p.(providers.ContentKeyer)
	require.True(t, ok, "%s does not implement providers.ContentKeyer", h.Provider)
	resolver := h.resolver(t, p)

	orig := h.SignedDelivery(t, "evt_content_key", secret0, Now)
	require.NoError(t, p.Verify(orig))
	key := ck.ContentKey(orig)
	require.NotEmpty(t, key, "a verified delivery has a content key")
	require.Equal(t, key, ck.ContentKey(Clone(orig)), "the content key is a function of the request")
	ev, err := resolveFirst(t, p, resolver, orig)
	require.NoError(t, err)

	replay := Clone(orig)
	refresh(replay)
	require.NoError(t, p.Verify(replay), "the replay under a fresh id must still verify (else the check is moot)")
	replayed, err := resolveFirst(t, p, resolver, replay)
	require.NoError(t, err)
	require.NotEqual(t, ev.ID, replayed.ID, "refresh must change the event id")
	require.Equal(t, key, ck.ContentKey(replay), "a replay under a fresh id must have the original's content key")

	h.sign(t, secret0, other, Now)
	require.NoError(t, p.Verify(other))
	require.NotEqual(t, key, ck.ContentKey(other), "other signed content must have another content key")
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
