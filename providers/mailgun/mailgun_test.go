package mailgun_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	mailgunsdk "github.com/mailgun/mailgun-go/v4"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/sjson"

	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/mailgun"
	"github.com/hookline/hookline/providers/providertest"
)

var (
	_ providers.ContentKeyer = (*mailgun.Verifier)(nil)
	_ providers.Signer       = (*mailgun.Verifier)(nil)
)

func sample(id string) *providers.Request {
	return providertest.Request(`{"event-data":{"id":"` + id + `","event":"delivered","timestamp":1764504000.123456,"recipient":"jon@example.com","message":{"headers":{"message-id":"20261130120000.1.A@example.com"}}}}`)
}

func harness() providertest.Harness {
	return providertest.Harness{
		Provider:  mailgun.Name,
		Secrets:   []string{"key-mailgun-signing-one", "key-mailgun-signing-two"},
		Delivery:  sample,
		WantType:  "delivered",
		WantTime:  time.UnixMilli(1764504000123),
		Tolerance: 5 * time.Minute,
		Features:  providertest.Features{SignatureInBody: true, BodyNotSigned: true, Timestamp: true},
	}
}

func TestConformance(t *testing.T) {
	t.Parallel()
	providertest.Run(t, harness())
}

func mac(key, ts, token string) string {
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte(ts + token))
	return hex.EncodeToString(m.Sum(nil))
}

// TestDocFormula recomputes the signature as Mailgun's "Securing webhooks"
// describes it (https://documentation.mailgun.com/docs/mailgun/user-manual/events/webhooks/#securing-webhooks,
// ⚠ not re-checked for this change: the formula as documented there): hex HMAC-SHA256, under the webhook signing key, of
// timestamp followed by token, in the body's signature object (legacy
// webhooks: form fields). Mailgun publishes no test vector; the formula is
// recomputed independently.
func TestDocFormula(t *testing.T) {
	t.Parallel()
	h := harness()
	p := h.Build(t, "key-signing")
	ts := strconv.FormatInt(providertest.Now.Unix(), 10)
	token := "b5751a49a024483da8d41c3684f98b8f2e4f9da1a6c56e9a3a"
	body, err := sjson.SetBytes(sample("evt_1").Body, "signature", map[string]string{"timestamp": ts, "token": token, "signature": mac("key-signing", ts, token)})
	require.NoError(t, err)
	req := providertest.Request(string(body))
	require.NoError(t, p.Verify(req))

	form := url.Values{"timestamp": {ts}, "token": {token}, "signature": {mac("key-signing", ts, token)}, "event": {"delivered"}}
	legacy := providertest.Request(form.Encode(), "Content-Type", "application/x-www-form-urlencoded")
	require.NoError(t, p.Verify(legacy))
	form.Set("token", token+"x")
	legacy.Body = []byte(form.Encode())
	require.ErrorIs(t, p.Verify(legacy), providers.ErrInvalidSignature)
}

// TestSDKOracle: Mailgun's official Go SDK (github.com/mailgun/mailgun-go/v4,
// a test-only dependency) and the adapter agree: the SDK verifies what the
// adapter signs, decoding the body as its own webhook handler example does
// (mailgun.WebhookPayload, then VerifyWebhookSignature), and both refuse a
// changed token, timestamp, signature or key. The legacy form body goes
// through the SDK's VerifyWebhookRequest. The SDK also reads upper-case
// hex, which the adapter refuses (Mailgun writes lower case).
func TestSDKOracle(t *testing.T) {
	t.Parallel()
	const key = "key-mailgun-sdk-oracle"
	sdk := mailgunsdk.NewMailgun("mg.example.com", "key-api")
	sdk.SetWebhookSigningKey(key)
	h := harness()
	p := h.Build(t, key)
	req := sample("evt_sdk")
	require.NoError(t, p.(providers.Signer).Sign(req, providertest.Now))
	sdkVerifies := func(r *providers.Request) bool {
		var payload mailgunsdk.WebhookPayload
		require.NoError(t, json.Unmarshal(r.Body, &payload))
		ok, _ := sdk.VerifyWebhookSignature(payload.Signature)
		return ok
	}
	require.True(t, sdkVerifies(req), "the SDK refuses what the adapter signs")
	require.NoError(t, p.Verify(req))

	for _, field := range []string{"token", "timestamp", "signature"} {
		bad := providertest.Clone(req)
		value := signatureField(t, bad.Body, field)
		last := "0"
		if strings.HasSuffix(value, "0") {
			last = "1"
		}
		bad.Body, _ = sjson.SetBytes(bad.Body, "signature."+field, value[:len(value)-1]+last)
		require.False(t, sdkVerifies(bad), "the SDK accepts a changed %s", field)
		require.Error(t, p.Verify(bad), "the adapter accepts a changed %s", field)
	}
	other := h.Build(t, "key-another")
	require.Error(t, other.Verify(req))

	// Legacy webhooks: form fields, through the SDK's request verifier.
	ts := strconv.FormatInt(providertest.Now.Unix(), 10)
	form := url.Values{"timestamp": {ts}, "token": {"c7a8b4e2f0d94f6a8b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f"}, "event": {"delivered"}}
	form.Set("signature", mac(key, ts, form.Get("token")))
	hreq, err := http.NewRequest(http.MethodPost, "https://hooks.example.com/webhooks/mailgun", strings.NewReader(form.Encode()))
	require.NoError(t, err)
	hreq.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	ok, err := sdk.VerifyWebhookRequest(hreq)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, p.Verify(providertest.Request(form.Encode(), "Content-Type", "application/x-www-form-urlencoded")))
}

// signatureField returns the named field of the body's signature object.
func signatureField(t *testing.T, body []byte, field string) string {
	t.Helper()
	var v struct {
		Signature map[string]string `json:"signature"`
	}
	require.NoError(t, json.Unmarshal(body, &v))
	return v.Signature[field]
}

// TestContentKey: the event id is not signed; a replay under another id has
// the original's key (the signed timestamp and token).
func TestContentKey(t *testing.T) {
	t.Parallel()
	providertest.ContentKeyReplay(t, harness(), func(r *providers.Request) {
		r.Body, _ = sjson.SetBytes(r.Body, "event-data.id", "fresh-id")
	}, sample("evt_other"))
}

func FuzzParseSignature(f *testing.F) {
	f.Add([]byte(`{"signature":{"timestamp":"1764504000","token":"t","signature":"`+mac("k", "1764504000", "t")+`"}}`), false)
	f.Add([]byte(`timestamp=1&token=t&signature=zz`), true)
	f.Add([]byte(`{"signature":{"timestamp":{},"token":[],"signature":1}}`), false)
	f.Fuzz(func(t *testing.T, body []byte, form bool) {
		r := providertest.Request(string(body))
		if form {
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		s, err := mailgun.ParseSignature(r)
		if err == nil && (len(s.MAC) != sha256.Size || s.Token == "" || s.Timestamp == "") {
			t.Fatalf("accepted %+v", s)
		}
	})
}
