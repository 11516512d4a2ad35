package hmac_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/hmac"
	"github.com/hookline/hookline/providers/providertest"
)

var (
	_ providers.Provider  = (*hmac.Verifier)(nil)
	_ providers.Signer    = (*hmac.Verifier)(nil)
	_ providers.Describer = (*hmac.Verifier)(nil)
)

const body = `{"id":"evt_acme_1","type":"order.paid","amount":4200}`

func sample(id string) *providers.Request {
	return providertest.Request(`{"id":"`+id+`","type":"order.paid","amount":4200}`, "X-Acme-Delivery", "d_1")
}

func harness(settings map[string]any, sep string) providertest.Harness {
	header := http.CanonicalHeaderKey(settings["header"].(string))
	h := providertest.Harness{
		Provider: hmac.Name,
		Settings: settings,
		Secrets:  []string{"acme-shared-secret", "acme-next-secret"},
		Delivery: sample,
		// hmac has no default id: resolve as a source with these resolvers.
		EventID:   "json:id",
		EventType: "json:type",
		WantType:  "order.paid",
		Features:  providertest.Features{MultipleSignatures: true},
		MergeSignatures: func(a, b http.Header) {
			a.Set(header, a.Get(header)+sep+"zzz"+sep+b.Get(header))
		},
	}
	if _, ok := settings["timestamp_header"]; ok {
		h.Timestamp = true
	}
	return h
}

func TestConformance(t *testing.T) {
	t.Parallel()
	// Hex without a prefix would accept an upper-cased copy of a signature
	// (hex is read in either case), which the suite's garbling forbids; every
	// hex case here has a prefix.
	cases := map[string]struct {
		settings map[string]any
		sep      string
	}{
		"SHA256HexPrefix": {map[string]any{"header": "X-Acme-Signature", "prefix": "sha256="}, ","},
		"SHA1HexPrefix":   {map[string]any{"header": "X-Acme-Signature", "algorithm": "sha1", "encoding": "hex", "prefix": "sha1="}, " "},
		"SHA512Base64":    {map[string]any{"header": "x-acme-signature", "algorithm": "sha512", "encoding": "base64"}, ", "},
		"SHA256Base64Timestamp": {map[string]any{"header": "X-Acme-Signature", "encoding": "base64",
			"timestamp_header": "X-Acme-Timestamp"}, " "},
		"Template": {map[string]any{"header": "X-Acme-Signature", "algorithm": "sha512", "prefix": "v1=",
			"timestamp_header": "X-Acme-Timestamp", "template": "v1:{timestamp}:{body}"}, ","},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := harness(c.settings, c.sep)
			if name == "Template" {
				h.Tolerance = 30 * time.Second
			}
			providertest.Run(t, h)
		})
	}
}

func build(t testing.TB, now time.Time, settings map[string]any, secrets ...string) *hmac.Verifier {
	t.Helper()
	v, err := hmac.New(providers.Config{Secrets: secrets, Settings: providertest.DecodeSettings(settings), Now: func() time.Time { return now }})
	require.NoError(t, err)
	return v
}

// TestIndependentVectors checks every algorithm/encoding combination against
// MACs computed at development time with OpenSSL 3.0.19:
//
//	printf '%s' "$content" | openssl dgst -$algo -hmac acme-shared-secret -r           # hex
//	printf '%s' "$content" | openssl dgst -$algo -hmac acme-shared-secret -binary | base64
func TestIndependentVectors(t *testing.T) {
	t.Parallel()
	const secret = "acme-shared-secret"
	ts := time.Unix(1764504000, 0)
	cases := []struct {
		algorithm, encoding, template, want string
	}{
		{"sha1", "hex", "", "2487ac3a7448f45e099990e7ed0751a4e2d0731a"},
		{"sha1", "base64", "", "JIesOnRI9F4JmZDn7QdRpOLQcxo="},
		{"sha256", "hex", "", "d8632588d3ca42e1bd3a11fc0f82fc548ed74d6a68f5dbc6555cbfd147fa2c83"},
		{"sha256", "base64", "", "2GMliNPKQuG9OhH8D4L8VI7XTWpo9dvGVVy/0Uf6LIM="},
		{"sha512", "hex", "", "9c4e27bff9bd5176ce61c2c3be1b7a1a687adab011154210d3fe6e8ee6319bdc5564e922f273f9039e3b91f418e1f93f5796da696a00f46cde38bba59aa98b3c"},
		{"sha512", "base64", "", "nE4nv/m9UXbOYcLDvht6Gmh62rARFUIQ0/5ujuYxm9xVZOki8nP5A547kfQY4fk/V5baaWoA9GzeOLulmqmLPA=="},
		// content "1764504000.<body>" (the default template with a timestamp header)
		{"sha256", "hex", "default-ts", "6a48c9b263858cd9b1b22dd916e34b199e6b7041a8ee6fe69277780b9052f4b2"},
		// content "v1:1764504000:<body>"
		{"sha512", "base64", "v1:{timestamp}:{body}", "qMMtHjca41B+FN8dgnhYI+7F9/f8+0GF8q2pFk0CGiwBiTq61y440Dqe0/xbs/IstXKj1JRdavwuMLh1farGxw=="},
	}
	for _, c := range cases {
		name := c.algorithm + "/" + c.encoding + "/" + c.template
		settings := map[string]any{"header": "X-Acme-Signature", "algorithm": c.algorithm, "encoding": c.encoding}
		switch c.template {
		case "":
		case "default-ts":
			settings["timestamp_header"] = "X-Acme-Timestamp"
		default:
			settings["timestamp_header"] = "X-Acme-Timestamp"
			settings["template"] = c.template
		}
		v := build(t, ts, settings, secret)

		req := providertest.Request(body)
		require.NoError(t, v.Sign(req, ts), name)
		require.Equal(t, c.want, req.Header.Get("X-Acme-Signature"), name)

		in := providertest.Request(body, "X-Acme-Signature", c.want, "X-Acme-Timestamp", "1764504000")
		require.NoError(t, v.Verify(in), name)
		in.Body = append(in.Body, ' ')
		require.ErrorIs(t, v.Verify(in), providers.ErrInvalidSignature, name)

		// With a prefix.
		settings["prefix"] = c.algorithm + "="
		pv := build(t, ts, settings, "other", secret)
		require.NoError(t, pv.Verify(providertest.Request(body, "X-Acme-Signature", c.algorithm+"="+c.want, "X-Acme-Timestamp", "1764504000")), name)
		require.ErrorIs(t, pv.Verify(providertest.Request(body, "X-Acme-Signature", c.want, "X-Acme-Timestamp", "1764504000")), providers.ErrInvalidSignature, name)
	}
}

func TestSeveralSignatures(t *testing.T) {
	t.Parallel()
	const good = "sha256=d8632588d3ca42e1bd3a11fc0f82fc548ed74d6a68f5dbc6555cbfd147fa2c83"
	v := build(t, providertest.Now, map[string]any{"header": "X-Acme-Signature", "prefix": "sha256="}, "acme-shared-secret")
	for _, value := range []string{
		good,
		"sha256=" + strings.Repeat("00", 32) + "," + good,
		"sha1=abcd " + good,
		"  " + good + " , sha256=zz",
		"sha256=D8632588D3CA42E1BD3A11FC0F82FC548ED74D6A68F5DBC6555CBFD147FA2C83", // hex in either case
	} {
		require.NoError(t, v.Verify(providertest.Request(body, "X-Acme-Signature", value)), value)
	}
	for _, value := range []string{
		"d8632588d3ca42e1bd3a11fc0f82fc548ed74d6a68f5dbc6555cbfd147fa2c83", // prefix missing
		"SHA256=d8632588d3ca42e1bd3a11fc0f82fc548ed74d6a68f5dbc6555cbfd147fa2c83",
		"sha256=d8632588d3ca42e1bd3a11fc0f82fc548ed74d6a68f5dbc6555cbfd147fa2c", // truncated
		",,, ",
	} {
		require.ErrorIs(t, v.Verify(providertest.Request(body, "X-Acme-Signature", value)), providers.ErrInvalidSignature, value)
	}
	require.ErrorIs(t, v.Verify(providertest.Request(body)), providers.ErrNoSignature)
}

func TestTimestampHeader(t *testing.T) {
	t.Parallel()
	settings := map[string]any{"header": "X-Acme-Signature", "timestamp_header": "X-Acme-Timestamp"}
	signedAt := time.Unix(1764504000, 0)
	sig := "6a48c9b263858cd9b1b22dd916e34b199e6b7041a8ee6fe69277780b9052f4b2"
	req := providertest.Request(body, "X-Acme-Signature", sig, "X-Acme-Timestamp", "1764504000")
	require.NoError(t, build(t, signedAt.Add(4*time.Minute), settings, "acme-shared-secret").Verify(req))
	require.ErrorIs(t, build(t, signedAt.Add(6*time.Minute), settings, "acme-shared-secret").Verify(req), providers.ErrTimestampTooOld)
	require.ErrorIs(t, build(t, signedAt.Add(-6*time.Minute), settings, "acme-shared-secret").Verify(req), providers.ErrTimestampTooNew)

	v := build(t, signedAt, settings, "acme-shared-secret")
	for _, ts := range []string{"1764504001", "x", "1764504000.0"} {
		bad := providertest.Clone(req)
		bad.Header.Set("X-Acme-Timestamp", ts)
		require.ErrorIs(t, v.Verify(bad), providers.ErrInvalidSignature, ts)
	}
	bad := providertest.Clone(req)
	bad.Header.Del("X-Acme-Timestamp")
	require.ErrorIs(t, v.Verify(bad), providers.ErrNoSignature)

	d := v.Describe()
	require.Equal(t, []string{"X-Acme-Signature", "X-Acme-Timestamp"}, d.Headers)
	require.Equal(t, 5*time.Minute, d.DefaultTolerance)
	require.Empty(t, d.DefaultEventID)
}

// TestResolveNeedsResolver: the generic scheme has no default event id.
func TestResolveNeedsResolver(t *testing.T) {
	t.Parallel()
	v := build(t, providertest.Now, map[string]any{"header": "X-Acme-Signature"}, "s")
	_, err := v.Resolve(sample("evt_1"))
	require.ErrorIs(t, err, providers.ErrNoEventID)
	require.Contains(t, err.Error(), "event_id: header:NAME or json:path")
}

func TestSettingsValidation(t *testing.T) {
	t.Parallel()
	cases := []struct {
		settings map[string]any
		want     string
	}{
		{nil, "hmac.header: required"},
		{map[string]any{"algorithm": "sha256"}, "hmac.header: required"},
		{map[string]any{"header": "X", "algorithm": "md5"}, "hmac.algorithm"},
		{map[string]any{"header": "X", "encoding": "base32"}, "hmac.encoding"},
		{map[string]any{"header": "X", "prefix": "sig, "}, "hmac.prefix"},
		{map[string]any{"header": "X", "template": "{timestamp}"}, "hmac.template"},
		{map[string]any{"header": "X", "template": "{timestamp}.{body}"}, "hmac.template"},
		{map[string]any{"header": "X", "timestamp_header": "x"}, "hmac.timestamp_header"},
		// A timestamp header the template does not sign protects nothing.
		{map[string]any{"header": "X", "timestamp_header": "T", "template": "{body}"}, "hmac.template: must include {timestamp} when hmac.timestamp_header is set"},
		{map[string]any{"header": "X", "timestamp_header": "T", "template": "{{body}}.{timestamp"}, "hmac.template: must include {timestamp}"},
		{map[string]any{"header": "X", "timestamp_header": "T", "template": "{Timestamp}.{body}"}, "hmac.template: must include {timestamp}"},
		{map[string]any{"header": "X", "unknown": "y"}, "unknown"},
	}
	for _, c := range cases {
		_, err := hmac.New(providers.Config{Secrets: []string{"s"}, Settings: providertest.DecodeSettings(c.settings)})
		require.Error(t, err, c.want)
		require.Contains(t, err.Error(), c.want)
	}
	_, err := hmac.New(providers.Config{Settings: providertest.DecodeSettings(map[string]any{"header": "X"})})
	require.Error(t, err)

	// Literal braces in a template are kept.
	v := build(t, providertest.Now, map[string]any{"header": "X", "template": "{{body}}"}, "s")
	req := providertest.Request(body)
	require.NoError(t, v.Sign(req, providertest.Now))
	require.NoError(t, v.Verify(req))
	plain := build(t, providertest.Now, map[string]any{"header": "X"}, "s")
	require.ErrorIs(t, plain.Verify(req), providers.ErrInvalidSignature)
}

func FuzzParseSignatures(f *testing.F) {
	f.Add("sha256=d8632588d3ca42e1bd3a11fc0f82fc548ed74d6a68f5dbc6555cbfd147fa2c83")
	f.Add("sha256=00, sha256=d8632588d3ca42e1bd3a11fc0f82fc548ed74d6a68f5dbc6555cbfd147fa2c83")
	f.Add("nE4nv/m9UXbOYcLDvht6Gmh62rARFUIQ0/5ujuYxm9xVZOki8nP5A547kfQY4fk/V5baaWoA9GzeOLulmqmLPA==")
	f.Add(", ,,")
	verifiers := []struct {
		v    *hmac.Verifier
		size int
	}{
		{build(f, providertest.Now, map[string]any{"header": "X", "prefix": "sha256="}, "s"), 32},
		{build(f, providertest.Now, map[string]any{"header": "X", "algorithm": "sha512", "encoding": "base64"}, "s"), 64},
		{build(f, providertest.Now, map[string]any{"header": "X", "algorithm": "sha1", "encoding": "hex"}, "s"), 20},
	}
	f.Fuzz(func(t *testing.T, value string) {
		for _, c := range verifiers {
			for _, sig := range c.v.ParseSignatures(value) {
				if len(sig) != c.size {
					t.Fatalf("signature of %d bytes accepted from %q", len(sig), value)
				}
			}
		}
	})
}

// TestTimestampTemplate: with timestamp_header, the default template signs
// the timestamp, and any template given must.
func TestTimestampTemplate(t *testing.T) {
	t.Parallel()
	for _, tmpl := range []string{"", "{timestamp}.{body}", "{body}{timestamp}", "v0:{timestamp}:{body}"} {
		settings := map[string]any{"header": "X-Sig", "timestamp_header": "X-Ts", "template": tmpl}
		v := build(t, providertest.Now, settings, "s")
		req := providertest.Request(body)
		require.NoError(t, v.Sign(req, providertest.Now))
		require.NoError(t, v.Verify(req), tmpl)
		// A fresh timestamp on a captured signature does not verify.
		replay := providertest.Clone(req)
		replay.Header.Set("X-Ts", strconv.FormatInt(providertest.Now.Unix()+1, 10))
		require.ErrorIs(t, v.Verify(replay), providers.ErrInvalidSignature, tmpl)
	}
	_, err := hmac.New(providers.Config{Secrets: []string{"s"}, Settings: providertest.DecodeSettings(map[string]any{"header": "X-Sig", "timestamp_header": "X-Ts", "template": "{body}"})})
	require.EqualError(t, err, "hmac.template: must include {timestamp} when hmac.timestamp_header is set (an unsigned timestamp protects nothing)")
}

// FuzzTemplate: whatever template and timestamp header a source configures,
// New accepts it only when the template signs the body, and the timestamp
// exactly when there is a timestamp header; what it accepts signs and
// verifies.
func FuzzTemplate(f *testing.F) {
	f.Add("{timestamp}.{body}", "X-Ts")
	f.Add("{body}", "X-Ts")
	f.Add("{body}", "")
	f.Add("{{body}}{timestamp", "X-Ts")
	f.Add("{timestamp}", "")
	f.Fuzz(func(t *testing.T, tmpl, tsHeader string) {
		// The settings as decoded, without a YAML round trip that could alter them.
		settings := func(v any) error {
			*v.(*hmac.Settings) = hmac.Settings{Header: "X-Sig", TimestampHeader: tsHeader, Template: tmpl}
			return nil
		}
		v, err := hmac.New(providers.Config{Secrets: []string{"s"}, Now: func() time.Time { return providertest.Now }, Settings: settings})
		if err != nil {
			return
		}
		effective := tmpl
		if effective == "" {
			effective = "{body}"
			if strings.TrimSpace(tsHeader) != "" {
				effective = "{timestamp}.{body}"
			}
		}
		if !strings.Contains(effective, "{body}") {
			t.Fatalf("template %q without {body} accepted", tmpl)
		}
		if strings.Contains(effective, "{timestamp}") != (strings.TrimSpace(tsHeader) != "") {
			t.Fatalf("template %q with timestamp_header %q accepted", tmpl, tsHeader)
		}
		req := providertest.Request(body)
		if err := v.Sign(req, providertest.Now); err != nil {
			t.Fatal(err)
		}
		if err := v.Verify(req); err != nil {
			t.Fatalf("own signature rejected for %q / %q: %v", tmpl, tsHeader, err)
		}
	})
}
