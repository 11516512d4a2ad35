package mollie_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/mollie"
	"github.com/hookline/hookline/providers/providertest"
)

var _ providers.Provider = (*mollie.Verifier)(nil)
var _ providers.Signer = (*mollie.Verifier)(nil)
var _ providers.Describer = (*mollie.Verifier)(nil)

var allowUnsigned = map[string]any{"allow_unsigned": true}

// classic is a classic Mollie delivery: a form POST of the resource id.
func classic(id string) *providers.Request {
	req := providertest.Request("id=" + id)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return req
}

// nextGen is a next-gen (JSON, signed ⚠) delivery.
func nextGen(id string) *providers.Request {
	return providertest.Request(`{"resource":"event","id":"` + id + `","type":"payment-link.paid","entityId":"pl_qng5gbbv8NAZ5gpM5ZYgx","createdAt":"2026-11-30T11:59:30.0Z","_embedded":{"entity":{"resource":"payment-link","id":"pl_qng5gbbv8NAZ5gpM5ZYgx"}}}`)
}

// TestConformanceClassic runs the suite on classic, unsigned deliveries with
// allow_unsigned: the signature checks are skipped (Features.Unsigned).
func TestConformanceClassic(t *testing.T) {
	t.Parallel()
	providertest.Run(t, providertest.Harness{
		Provider: mollie.Name,
		Settings: allowUnsigned,
		Secrets:  []string{"unused_one", "unused_two"},
		Delivery: classic,
		Sign:     func(testing.TB, string, *providers.Request, time.Time) {}, // classic deliveries carry no signature
		Features: providertest.Features{Unsigned: true},
	})
}

// TestConformanceSigned runs the suite on next-gen signed deliveries with
// secrets and without allow_unsigned (signed-only mode).
func TestConformanceSigned(t *testing.T) {
	t.Parallel()
	providertest.Run(t, providertest.Harness{
		Provider: mollie.Name,
		Secrets:  []string{"mollie_signing_secret_one", "mollie_signing_secret_two"},
		Delivery: nextGen,
		WantType: "payment-link.paid",
		WantTime: time.Date(2026, 11, 30, 11, 59, 30, 0, time.UTC),
	})
}

// The vectors were computed independently of this package with
//
//	printf %s 'id=tr_WDqYK6vllg' | openssl dgst -sha256 -hmac 'mollie_signing_secret_test'
//	printf %s "$vectorJSON" | openssl dgst -sha256 -hmac 'mollie_signing_secret_test'
const (
	vectorSecret  = "mollie_signing_secret_test"
	vectorForm    = "id=tr_WDqYK6vllg"
	vectorFormSig = "9d9cfb916d0a8c8a601ed4c10f3b86b5aa70fb82e6950b887a65bb948c49f827"
	vectorJSON    = `{"resource":"event","id":"event_GvJ8WHrp5isUdRub9CJyH","type":"payment-link.paid","entityId":"pl_qng5gbbv8NAZ5gpM5ZYgx","createdAt":"2024-12-16T15:57:04.0Z"}`
	vectorJSONSig = "327bb0ec2db05c393b1eba21fd628f7d272162e08c869a0cfdf3083dfbaabfa4"
)

func TestOpenSSLVector(t *testing.T) {
	t.Parallel()
	p, err := mollie.New(providers.Config{Secrets: []string{"other", vectorSecret}})
	require.NoError(t, err)

	req := providertest.Request(vectorJSON, mollie.Header, vectorJSONSig)
	require.NoError(t, p.Verify(req))
	ev, err := p.Resolve(req)
	require.NoError(t, err)
	require.Equal(t, providers.Event{ID: "event_GvJ8WHrp5isUdRub9CJyH", Type: "payment-link.paid", Time: time.Date(2024, 12, 16, 15, 57, 4, 0, time.UTC)}, ev)

	// ⚠ prefix form.
	req.Header.Set(mollie.Header, "sha256="+vectorJSONSig)
	require.NoError(t, p.Verify(req))

	form := classic("tr_WDqYK6vllg")
	require.Equal(t, vectorForm, string(form.Body))
	form.Header.Set(mollie.Header, vectorFormSig)
	require.NoError(t, p.Verify(form))

	signer, err := mollie.New(providers.Config{Secrets: []string{vectorSecret}})
	require.NoError(t, err)
	ours := providertest.Request(vectorJSON)
	require.NoError(t, signer.Sign(ours, time.Time{}))
	require.Equal(t, vectorJSONSig, ours.Header.Get(mollie.Header))
}

func TestNewRequiresOptIn(t *testing.T) {
	t.Parallel()
	_, err := mollie.New(providers.Config{Source: "mollie"})
	require.ErrorIs(t, err, mollie.ErrUnsignedNotAllowed)
	require.EqualError(t, err, "mollie.allow_unsigned: classic Mollie webhooks are unsigned; set allow_unsigned: true to accept them, and have your handler fetch the resource by id from the Mollie API before acting")

	_, err = mollie.New(providers.Config{Settings: providertest.DecodeSettings(map[string]any{"allow_unsigned": false})})
	require.ErrorIs(t, err, mollie.ErrUnsignedNotAllowed)

	_, err = mollie.New(providers.Config{Settings: providertest.DecodeSettings(map[string]any{"allow_unsigend": true})})
	require.Error(t, err, "unknown settings are an error")
	require.NotErrorIs(t, err, mollie.ErrUnsignedNotAllowed)
}

func TestClassicWithoutSecrets(t *testing.T) {
	t.Parallel()
	p, err := mollie.New(providers.Config{Settings: providertest.DecodeSettings(allowUnsigned), Tolerance: time.Nanosecond})
	require.NoError(t, err)

	req := classic("tr_WDqYK6vllg")
	require.NoError(t, p.Verify(req))
	ev, err := p.Resolve(req)
	require.NoError(t, err)
	require.Equal(t, providers.Event{ID: "tr_WDqYK6vllg"}, ev)

	// With nothing to check it against, a signature header changes nothing.
	req.Header.Set(mollie.Header, "whatever")
	require.NoError(t, p.Verify(req))

	require.Error(t, p.Sign(classic("tr_1"), time.Time{}), "no secret to sign with")
	require.Equal(t, "form:id, else json:id", p.Describe().DefaultEventID)
}

// TestAllowUnsignedWithSecrets: unsigned deliveries pass, but a signature that
// is present must be right.
func TestAllowUnsignedWithSecrets(t *testing.T) {
	t.Parallel()
	p, err := mollie.New(providers.Config{Secrets: []string{vectorSecret}, Settings: providertest.DecodeSettings(allowUnsigned)})
	require.NoError(t, err)

	require.NoError(t, p.Verify(classic("tr_WDqYK6vllg")))
	req := classic("tr_WDqYK6vllg")
	req.Header.Set(mollie.Header, vectorFormSig)
	require.NoError(t, p.Verify(req))
	req.Header.Set(mollie.Header, vectorJSONSig)
	require.ErrorIs(t, p.Verify(req), providers.ErrInvalidSignature)
}

func TestSignedOnlyRejectsUnsigned(t *testing.T) {
	t.Parallel()
	p, err := mollie.New(providers.Config{Secrets: []string{vectorSecret}})
	require.NoError(t, err)
	require.ErrorIs(t, p.Verify(classic("tr_WDqYK6vllg")), providers.ErrNoSignature)
}

func TestResolve(t *testing.T) {
	t.Parallel()
	p, err := mollie.New(providers.Config{Settings: providertest.DecodeSettings(allowUnsigned)})
	require.NoError(t, err)

	for _, body := range []string{"", "id=", "id=%20", "foo=bar"} {
		req := classic("")
		req.Body = []byte(body)
		_, err := p.Resolve(req)
		require.ErrorIs(t, err, providers.ErrNoEventID, "body %q", body)
	}
	req := classic("")
	req.Body = []byte("id=%zz")
	_, err = p.Resolve(req)
	require.ErrorIs(t, err, providers.ErrMalformed)

	// Without a Content-Type the body is read as a form, as Mollie sends it.
	req = &providers.Request{Body: []byte("id=re_4qqhO89gsT"), Header: http.Header{}}
	ev, err := p.Resolve(req)
	require.NoError(t, err)
	require.Equal(t, "re_4qqhO89gsT", ev.ID)

	_, err = p.Resolve(providertest.Request(`{"type":"payment-link.paid"}`))
	require.ErrorIs(t, err, providers.ErrNoEventID)
	_, err = p.Resolve(providertest.Request(`{"id":`))
	require.ErrorIs(t, err, providers.ErrMalformed)
}

// FuzzVerify feeds arbitrary X-Mollie-Signature values in signed-only mode:
// no panics, only signature errors, and only the exact signature passes.
func FuzzVerify(f *testing.F) {
	f.Add(vectorJSONSig)
	f.Add("sha256=" + vectorJSONSig)
	f.Add("sha256=sha256=" + vectorJSONSig)
	f.Add("327BB0EC2DB05C393B1EBA21FD628F7D272162E08C869A0CFDF3083DFBAABFA4")
	f.Add("")
	p, err := mollie.New(providers.Config{Secrets: []string{vectorSecret}})
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, sig string) {
		req := providertest.Request(vectorJSON)
		req.Header[mollie.Header] = []string{sig}
		err := p.Verify(req)
		if err == nil {
			if sig != vectorJSONSig && sig != "sha256="+vectorJSONSig {
				t.Fatalf("accepted %q", sig)
			}
			return
		}
		if !providers.IsSignatureError(err) {
			t.Fatalf("not a signature error: %v", err)
		}
	})
}

// TestAllowUnsignedCoversOnlyClassic: allow_unsigned accepts a classic form
// body without a signature, never a next-gen (JSON) or any other body, with
// or without secrets.
func TestAllowUnsignedCoversOnlyClassic(t *testing.T) {
	t.Parallel()
	withSecrets, err := mollie.New(providers.Config{Secrets: []string{vectorSecret}, Settings: providertest.DecodeSettings(allowUnsigned)})
	require.NoError(t, err)
	withoutSecrets, err := mollie.New(providers.Config{Settings: providertest.DecodeSettings(allowUnsigned)})
	require.NoError(t, err)

	formType := "application/x-www-form-urlencoded"
	for _, c := range []struct {
		body, contentType string
		classic           bool
	}{
		{"id=tr_WDqYK6vllg", formType, true},
		{"id=tr_WDqYK6vllg", formType + "; charset=utf-8", true},
		{"id=tr_WDqYK6vllg", "", true}, // no Content-Type: read as a form
		{"id=tr_WDqYK6vllg&", formType, true},
		{vectorJSON, "application/json", false},
		{vectorJSON, formType, false},
		{vectorJSON, "", false},
		{"id=tr_WDqYK6vllg", "application/json", false},
		{"id=tr_WDqYK6vllg", "text/plain", false},
		{"id=tr_WDqYK6vllg", "Application/JSON;0", false}, // a parameter that does not parse: still JSON to Resolve
		{"id=tr_WDqYK6vllg", "application/x-www-form-urlencoded;0", true},
		{"id=tr_1&id=tr_2", formType, false},
		{"id=tr_1&type=payment-link.paid", formType, false},
		{"id=", formType, false},
		{"id=%20", formType, false},
		{"id=%zz", formType, false},
		{"", formType, false},
		{"foo=bar", formType, false},
	} {
		req := providertest.Request(c.body, "Content-Type", c.contentType)
		if c.contentType == "" {
			req.Header.Del("Content-Type")
		}
		require.Equal(t, c.classic, mollie.IsClassic(req), "%q as %q", c.body, c.contentType)
		for name, p := range map[string]*mollie.Verifier{"with secrets": withSecrets, "without secrets": withoutSecrets} {
			err := p.Verify(req)
			if c.classic {
				require.NoError(t, err, "%s: %q as %q", name, c.body, c.contentType)
				ev, err := p.Resolve(req)
				require.NoError(t, err)
				require.NotEmpty(t, ev.ID)
				continue
			}
			require.ErrorIs(t, err, providers.ErrNoSignature, "%s: %q as %q", name, c.body, c.contentType)
		}
	}

	// A next-gen delivery with secrets: only a valid signature passes.
	req := providertest.Request(vectorJSON, mollie.Header, vectorJSONSig)
	require.NoError(t, withSecrets.Verify(req))
	req.Header.Set(mollie.Header, vectorFormSig)
	require.ErrorIs(t, withSecrets.Verify(req), providers.ErrInvalidSignature)

	// Without secrets a signature cannot be checked: a next-gen delivery is
	// refused whatever it carries, a classic one is still unsigned.
	req = providertest.Request(vectorJSON, mollie.Header, vectorJSONSig)
	require.ErrorIs(t, withoutSecrets.Verify(req), providers.ErrInvalidSignature)
	form := classic("tr_WDqYK6vllg")
	form.Header.Set(mollie.Header, "anything")
	require.NoError(t, withoutSecrets.Verify(form))

	// With secrets, a classic delivery that carries a signature must match.
	form.Header.Set(mollie.Header, vectorJSONSig)
	require.ErrorIs(t, withSecrets.Verify(form), providers.ErrInvalidSignature)
}

// FuzzVerifyUnsigned feeds arbitrary unsigned bodies and Content-Types to a
// source with allow_unsigned: what verifies is a classic delivery, whose id
// Resolve reads from the form, never a JSON body.
func FuzzVerifyUnsigned(f *testing.F) {
	f.Add("id=tr_WDqYK6vllg", "application/x-www-form-urlencoded")
	f.Add("id=tr_WDqYK6vllg", "")
	f.Add(vectorJSON, "application/json")
	f.Add(vectorJSON, "")
	f.Add("id=tr_1&id=tr_2", "application/x-www-form-urlencoded; charset=utf-8")
	f.Add(`id={"resource":"event"}`, "Application/X-WWW-Form-Urlencoded")
	f.Add("id=x", "application/json; charset=utf-8")
	withSecrets, err := mollie.New(providers.Config{Secrets: []string{vectorSecret}, Settings: providertest.DecodeSettings(allowUnsigned)})
	require.NoError(f, err)
	withoutSecrets, err := mollie.New(providers.Config{Settings: providertest.DecodeSettings(allowUnsigned)})
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, body, contentType string) {
		req := &providers.Request{Body: []byte(body), Header: http.Header{}}
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		for _, p := range []*mollie.Verifier{withSecrets, withoutSecrets} {
			err := p.Verify(req)
			if err != nil {
				if !providers.IsSignatureError(err) {
					t.Fatalf("not a signature error: %v", err)
				}
				continue
			}
			if !mollie.IsClassic(req) || req.ContentType() == "application/json" {
				t.Fatalf("unsigned non-classic delivery accepted: %q as %q", body, contentType)
			}
			ev, err := p.Resolve(req)
			if err != nil || ev.ID == "" || ev.Type != "" {
				t.Fatalf("accepted delivery does not resolve as classic: %+v, %v", ev, err)
			}
		}
	})
}
