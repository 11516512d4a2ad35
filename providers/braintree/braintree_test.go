package braintree_test

import (
	"encoding/base64"
	"encoding/hex"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/braintree"
	"github.com/hookline/hookline/providers/providertest"
)

var _ providers.Provider = (*braintree.Verifier)(nil)
var _ providers.Signer = (*braintree.Verifier)(nil)

const (
	keyA = "integration_public_key:integration_private_key"
	keyB = "rotated_public_key:rotated_private_key"
)

func notificationXML(kind, subject, ts string) string {
	return `<?xml version="1.0" encoding="UTF-8"?>
<notification>
  <timestamp type="datetime">` + ts + `</timestamp>
  <kind>` + kind + `</kind>
  <subject>` + subject + `</subject>
</notification>
`
}

// payload base64-encodes s the way Braintree's Ruby SDK does (60-column
// lines, each ending in "\n").
func payload(s string) string {
	enc := base64.StdEncoding.EncodeToString([]byte(s))
	var b strings.Builder
	for len(enc) > 60 {
		b.WriteString(enc[:60] + "\n")
		enc = enc[60:]
	}
	b.WriteString(enc + "\n")
	return b.String()
}

func formRequest(vals url.Values) *providers.Request {
	req := providertest.Request(vals.Encode())
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return req
}

// sample is an unsigned delivery whose subject id is id. An empty id builds a
// notification without kind and timestamp, the one case without an event id
// (kinds without a subject id fall back to a payload hash).
func sample(id string) *providers.Request {
	xml := notificationXML("subscription_charged_successfully",
		`<subscription><id>`+id+`</id><status>Active</status><transactions type="array"><transaction><id>txn_1</id></transaction></transactions></subscription>`,
		"2026-11-30T11:59:00Z")
	if id == "" {
		xml = notificationXML("", `<subscription><id></id></subscription>`, "")
	}
	return formRequest(url.Values{braintree.PayloadField: {payload(xml)}})
}

func TestConformance(t *testing.T) {
	t.Parallel()
	providertest.Run(t, providertest.Harness{
		Provider: braintree.Name,
		Secrets:  []string{keyA, keyB},
		Delivery: sample,
		// The composite {kind}:{subject id}:{timestamp}; Delivery("") has
		// neither kind nor timestamp, hence no id.
		WantID: func(subject string) string {
			if subject == "" {
				return ""
			}
			return "subscription_charged_successfully:" + subject + ":2026-11-30T11:59:00Z"
		},
		WantType: "subscription_charged_successfully",
		WantTime: time.Date(2026, 11, 30, 11, 59, 0, 0, time.UTC),
		// bt_signature is a form field.
		Features: providertest.Features{SignatureInBody: true},
	})
}

func build(t *testing.T, secrets ...string) *braintree.Verifier {
	t.Helper()
	v, err := braintree.New(providers.Config{Source: "test", Secrets: secrets})
	require.NoError(t, err)
	return v
}

// Independent vectors: computed at development time with
//
//	K=$(printf '%s' integration_private_key | sha1sum | cut -c1-40)
//	openssl dgst -sha1 -mac HMAC -macopt hexkey:$K payload.txt   # payload with its final "\n"
//
// and the same without the final newline (python3 hmac agreed on both).
const (
	vectorXML       = `<notification><timestamp type="datetime">2026-11-30T11:59:00Z</timestamp><kind>subscription_charged_successfully</kind><subject><subscription><id>sub_123</id><status>Active</status></subscription></subject></notification>`
	vectorPayload   = "PG5vdGlmaWNhdGlvbj48dGltZXN0YW1wIHR5cGU9ImRhdGV0aW1lIj4yMDI2\nLTExLTMwVDExOjU5OjAwWjwvdGltZXN0YW1wPjxraW5kPnN1YnNjcmlwdGlv\nbl9jaGFyZ2VkX3N1Y2Nlc3NmdWxseTwva2luZD48c3ViamVjdD48c3Vic2Ny\naXB0aW9uPjxpZD5zdWJfMTIzPC9pZD48c3RhdHVzPkFjdGl2ZTwvc3RhdHVz\nPjwvc3Vic2NyaXB0aW9uPjwvc3ViamVjdD48L25vdGlmaWNhdGlvbj4=\n"
	vectorSig       = "8dbf4d28bd4d65a504f5d2510bb7f279bd659cb7" // over vectorPayload
	vectorSigNoNL   = "05da2cd0a36f19f349d2b90f5eca0a90c094ed28" // over vectorPayload without its final "\n"
	vectorPublicKey = "integration_public_key"
)

func TestOpenSSLVector(t *testing.T) {
	t.Parallel()
	require.Equal(t, payload(vectorXML), vectorPayload)
	v := build(t, keyA)

	req := formRequest(url.Values{braintree.PayloadField: {vectorPayload}, braintree.SignatureField: {vectorPublicKey + "|" + vectorSig}})
	require.NoError(t, v.Verify(req))

	// A framework that strips the final newline: Braintree's MAC is then over
	// payload+"\n", which the SDKs accept.
	stripped := strings.TrimSuffix(vectorPayload, "\n")
	req = formRequest(url.Values{braintree.PayloadField: {stripped}, braintree.SignatureField: {vectorPublicKey + "|" + vectorSig}})
	require.NoError(t, v.Verify(req))
	req = formRequest(url.Values{braintree.PayloadField: {stripped}, braintree.SignatureField: {vectorPublicKey + "|" + vectorSigNoNL}})
	require.NoError(t, v.Verify(req))

	// Our Sign produces the same signature.
	ours := formRequest(url.Values{braintree.PayloadField: {vectorPayload}})
	require.NoError(t, v.Sign(ours, time.Time{}))
	vals, err := url.ParseQuery(string(ours.Body))
	require.NoError(t, err)
	require.Equal(t, vectorPublicKey+"|"+vectorSig, vals.Get(braintree.SignatureField))
	require.Equal(t, vectorPayload, vals.Get(braintree.PayloadField))

	ev, err := v.Resolve(req)
	require.NoError(t, err)
	require.Equal(t, providers.Event{ID: "subscription_charged_successfully:sub_123:2026-11-30T11:59:00Z", Type: "subscription_charged_successfully", Time: time.Date(2026, 11, 30, 11, 59, 0, 0, time.UTC)}, ev)

	// The right public key with another private key fails.
	require.ErrorIs(t, build(t, vectorPublicKey+":other_private_key").Verify(req), providers.ErrInvalidSignature)
}

func TestSignatureEntries(t *testing.T) {
	t.Parallel()
	v := build(t, keyA, keyB)
	good := vectorPublicKey + "|" + vectorSig
	for _, sig := range []string{
		"other_public_key|0000000000000000000000000000000000000000&" + good,
		good + "&rotated_public_key|" + strings.Repeat("ab", 20),
		"garbage&|&" + good + "&x|zz",
		"rotated_public_key|" + strings.Repeat("ab", 20) + "&" + good,
	} {
		req := formRequest(url.Values{braintree.PayloadField: {vectorPayload}, braintree.SignatureField: {sig}})
		require.NoError(t, v.Verify(req), sig)
	}
	for _, sig := range []string{
		"other_public_key|" + vectorSig, // right MAC, unknown public key
		vectorPublicKey + "|" + strings.ToUpper(vectorSig[:39]),
		vectorPublicKey + vectorSig,
		"|" + vectorSig,
		"&&&",
		strings.Repeat("&", braintree.MaxSignaturePairs) + good, // beyond the cap, even with the right pair
	} {
		req := formRequest(url.Values{braintree.PayloadField: {vectorPayload}, braintree.SignatureField: {sig}})
		require.ErrorIs(t, v.Verify(req), providers.ErrInvalidSignature, sig)
	}
}

func TestPayloadCharacters(t *testing.T) {
	t.Parallel()
	v := build(t, keyA)
	for _, p := range []string{vectorPayload + " ", strings.ReplaceAll(vectorPayload, "\n", "\r\n"), vectorPayload + "-", "<notification/>"} {
		req := formRequest(url.Values{braintree.PayloadField: {p}, braintree.SignatureField: {vectorPublicKey + "|" + vectorSig}})
		require.ErrorIs(t, v.Verify(req), providers.ErrInvalidSignature, p)
	}
	require.True(t, braintree.ValidPayload(vectorPayload))
	require.False(t, braintree.ValidPayload("a_b"))
}

func TestMissingFields(t *testing.T) {
	t.Parallel()
	v := build(t, keyA)
	for _, vals := range []url.Values{
		{braintree.PayloadField: {vectorPayload}},
		{braintree.SignatureField: {vectorPublicKey + "|" + vectorSig}},
		{},
	} {
		require.ErrorIs(t, v.Verify(formRequest(vals)), providers.ErrNoSignature)
	}
	// The signature is in the form fields, which Verify reads whatever the
	// Content-Type says; Resolve refuses a body declared as something else.
	req := formRequest(url.Values{braintree.PayloadField: {vectorPayload}, braintree.SignatureField: {vectorPublicKey + "|" + vectorSig}})
	for _, ct := range []string{"application/x-www-form-urlencoded; charset=utf-8", ""} {
		req.Header.Set("Content-Type", ct)
		require.NoError(t, v.Verify(req), ct)
		_, err := v.Resolve(req)
		require.NoError(t, err, ct)
	}
	req.Header.Set("Content-Type", "application/json")
	require.NoError(t, v.Verify(req))
	_, err := v.Resolve(req)
	require.ErrorIs(t, err, providers.ErrMalformed)
}

func TestCompositeID(t *testing.T) {
	t.Parallel()
	v := build(t, keyA)
	resolve := func(xml string) (providers.Event, error) {
		req := formRequest(url.Values{braintree.PayloadField: {payload(xml)}})
		require.NoError(t, v.Sign(req, time.Time{}))
		require.NoError(t, v.Verify(req))
		return v.Resolve(req)
	}

	ev, err := resolve(notificationXML("dispute_opened", `<dispute><amount>250.00</amount><id>dp_9</id><transaction><id>txn_2</id></transaction></dispute>`, "2026-11-30T10:00:00Z"))
	require.NoError(t, err)
	require.Equal(t, "dispute_opened:dp_9:2026-11-30T10:00:00Z", ev.ID)
	require.Equal(t, "dispute_opened", ev.Type)

	// No subject id: the payload hash stands in, distinct per payload.
	check := notificationXML("check", `<check type="boolean">true</check>`, "2026-11-30T10:00:00Z")
	ev, err = resolve(check)
	require.NoError(t, err)
	require.Regexp(t, `^check:[0-9a-f]{64}:2026-11-30T10:00:00Z$`, ev.ID)
	ev2, err := resolve(notificationXML("check", `<check type="boolean">false</check>`, "2026-11-30T10:00:00Z"))
	require.NoError(t, err)
	require.NotEqual(t, ev.ID, ev2.ID)
	again, err := resolve(check)
	require.NoError(t, err)
	require.Equal(t, ev.ID, again.ID)

	_, err = resolve(notificationXML("check", `<check type="boolean">true</check>`, ""))
	require.ErrorIs(t, err, providers.ErrNoEventID)

	// Sign also accepts the bare XML as the body.
	req := providertest.Request(vectorXML)
	require.NoError(t, v.Sign(req, time.Time{}))
	require.NoError(t, v.Verify(req))
	ev, err = v.Resolve(req)
	require.NoError(t, err)
	require.Equal(t, "subscription_charged_successfully:sub_123:2026-11-30T11:59:00Z", ev.ID)
	require.Equal(t, "{kind}:{subject id}:{timestamp} (the <notification> XML in form:bt_payload)", v.Describe().DefaultEventID)

	for _, body := range []string{"bt_payload=%%%", "bt_payload=!!!!", "bt_payload=" + base64.StdEncoding.EncodeToString([]byte("<html/>")), "x=1"} {
		req := providertest.Request(body)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		_, err := v.Resolve(req)
		require.ErrorIs(t, err, providers.ErrMalformed, body)
	}
}

func TestNewRejectsBadSecrets(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "no-colon-here", ":hiddenpriv", "hiddenpub:", "hid|den:hiddenpriv"} {
		_, err := braintree.New(providers.Config{Secrets: []string{keyA, s}})
		require.Error(t, err, s)
		require.Contains(t, err.Error(), "secrets[1]")
		if s != "" {
			require.NotContains(t, err.Error(), s)
		}
	}
	_, err := braintree.New(providers.Config{})
	require.Error(t, err)
	_, err = braintree.New(providers.Config{Secrets: []string{keyA}, Settings: providertest.DecodeSettings(map[string]any{"x": 1})})
	require.Error(t, err)
}

func FuzzParseSignature(f *testing.F) {
	f.Add(vectorPublicKey + "|" + vectorSig)
	f.Add("a|" + vectorSig + "&b|" + vectorSig)
	f.Add("&&|&|")
	f.Add("k|zz")
	f.Add(strings.Repeat("a|"+vectorSig+"&", braintree.MaxSignaturePairs-1) + "b|" + vectorSig)
	f.Add(strings.Repeat("a|"+vectorSig+"&", braintree.MaxSignaturePairs) + "b|" + vectorSig)
	f.Fuzz(func(t *testing.T, v string) {
		pairs, err := braintree.ParseSignature(v)
		if err == nil && len(pairs) == 0 {
			t.Fatalf("no error but no pairs for %q", v)
		}
		if strings.Count(v, "&") >= braintree.MaxSignaturePairs && err == nil {
			t.Fatalf("more than %d entries accepted: %q", braintree.MaxSignaturePairs, v)
		}
		if len(pairs) > braintree.MaxSignaturePairs {
			t.Fatalf("%d pairs from %q", len(pairs), v)
		}
		for _, p := range pairs {
			if len(p.Signature) != 20 || p.PublicKey == "" || !strings.Contains(v, p.PublicKey+"|"+hex.EncodeToString(p.Signature)) && !strings.Contains(strings.ToLower(v), strings.ToLower(p.PublicKey+"|"+hex.EncodeToString(p.Signature))) {
				t.Fatalf("bad pair %+v from %q", p, v)
			}
		}
	})
}

// FuzzVerifyResolve feeds arbitrary form bodies: no panics, nothing unsigned verifies.
func FuzzVerifyResolve(f *testing.F) {
	f.Add(string(sample("sub_1").Body))
	f.Add("bt_payload=" + url.QueryEscape(vectorPayload) + "&bt_signature=" + url.QueryEscape("x|"+vectorSig))
	f.Add("bt_payload=PG5vdGlmaWNhdGlvbj4=&bt_signature=a%7Cb")
	v, err := braintree.New(providers.Config{Secrets: []string{keyA}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body string) {
		req := providertest.Request(body)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if v.Verify(req) == nil {
			t.Fatalf("forged body verified: %q", body)
		}
		_, _ = v.Resolve(req)
	})
}

func TestRepeatedFieldsRefused(t *testing.T) {
	t.Parallel()
	v := build(t, keyA)
	sig := vectorPublicKey + "|" + vectorSig
	forgedXML := payload(notificationXML("dispute_won", "<dispute><id>dp_forged</id></dispute>", "2026-11-30T11:59:00Z"))
	for _, vals := range []url.Values{
		{braintree.PayloadField: {vectorPayload, forgedXML}, braintree.SignatureField: {sig}},
		{braintree.PayloadField: {vectorPayload}, braintree.SignatureField: {sig, sig}},
	} {
		require.ErrorIs(t, v.Verify(formRequest(vals)), providers.ErrInvalidSignature)
	}
}
