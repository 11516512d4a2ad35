package standardwebhooks_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	swlib "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/providertest"
	"github.com/hookline/hookline/providers/standardwebhooks"
)

var (
	_ providers.Provider  = (*standardwebhooks.Verifier)(nil)
	_ providers.Signer    = (*standardwebhooks.Verifier)(nil)
	_ providers.Describer = (*standardwebhooks.Verifier)(nil)
)

const body = `{"type":"invoice.paid","timestamp":"2026-11-30T11:58:00.5Z","data":{"id":"in_1","amount":2000}}`

var eventTime = time.Date(2026, 11, 30, 11, 58, 0, 500_000_000, time.UTC)

// Two distinct whsec_ secrets (base64 of 24 bytes each).
var secrets = []string{"whsec_" + base64.StdEncoding.EncodeToString([]byte("hookline-test-secret-one")),
	"whsec_" + base64.StdEncoding.EncodeToString([]byte("hookline-test-secret-two"))}

// sample sets the webhook-id header even when id is "" (present but empty),
// so that Sign keeps it and Resolve reports ErrNoEventID.
func sample(idHeader string) func(id string) *providers.Request {
	return func(id string) *providers.Request {
		return providertest.Request(body, idHeader, id)
	}
}

func mergeSignatures(name string) func(a, b http.Header) {
	return func(a, b http.Header) {
		a.Set(name, a.Get(name)+" v2,c29tZXRoaW5nIGVsc2U= v1,!!! "+b.Get(name))
	}
}

func harness() providertest.Harness {
	return providertest.Harness{
		Provider:        standardwebhooks.Name,
		Secrets:         secrets,
		Delivery:        sample(standardwebhooks.HeaderID),
		WantType:        "invoice.paid",
		WantTime:        eventTime,
		MergeSignatures: mergeSignatures(standardwebhooks.HeaderSignature),
		Features:        providertest.Features{Timestamp: true, MultipleSignatures: true},
	}
}

func TestConformance(t *testing.T) {
	t.Parallel()
	providertest.Run(t, harness())
}

// TestConformanceSvix runs the suite on the svix alias with svix-* headers,
// signed by the reference library.
func TestConformanceSvix(t *testing.T) {
	t.Parallel()
	h := harness()
	h.Provider = standardwebhooks.SvixName
	h.Delivery = sample(standardwebhooks.SvixHeaderID)
	// These deliveries carry the svix-* trio (the adapter's fallback
	// headers): the suite deletes and garbles those, and checks hostile
	// webhook-* values in their absence.
	h.SignatureHeaders = []string{standardwebhooks.SvixHeaderID, standardwebhooks.SvixHeaderTimestamp, standardwebhooks.SvixHeaderSignature}
	h.MergeSignatures = mergeSignatures(standardwebhooks.SvixHeaderSignature)
	h.Sign = func(t testing.TB, secret string, req *providers.Request, now time.Time) {
		wh, err := swlib.NewWebhook(secret)
		require.NoError(t, err)
		id := req.Header.Get(standardwebhooks.SvixHeaderID)
		sig, err := wh.Sign(id, now, req.Body)
		require.NoError(t, err)
		req.Header.Set(standardwebhooks.SvixHeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
		req.Header.Set(standardwebhooks.SvixHeaderSignature, sig)
	}
	providertest.Run(t, h)
}

func ed25519Secret(t testing.TB) (priv, pub string) {
	t.Helper()
	pk, sk, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	return standardwebhooks.PrivateKeyPrefix + base64.StdEncoding.EncodeToString(sk.Seed()),
		standardwebhooks.PublicKeyPrefix + base64.StdEncoding.EncodeToString(pk)
}

// TestConformanceEd25519 runs the suite with v1a (ed25519) whsk_ secrets.
func TestConformanceEd25519(t *testing.T) {
	t.Parallel()
	h := harness()
	a, _ := ed25519Secret(t)
	b, _ := ed25519Secret(t)
	h.Secrets = []string{a, b}
	providertest.Run(t, h)
}

func build(t *testing.T, now time.Time, secrets ...string) *standardwebhooks.Verifier {
	t.Helper()
	v, err := standardwebhooks.New(providers.Config{Secrets: secrets, Now: func() time.Time { return now }})
	require.NoError(t, err)
	return v
}

// TestPublishedVector checks the reference library's published test vector.
func TestPublishedVector(t *testing.T) {
	t.Parallel()
	const (
		secret  = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
		id      = "msg_p5jXN8AQM9LWM0D4loKWxJek"
		ts      = 1614265330
		payload = `{"test": 2432232314}`
		want    = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
	)
	key, err := standardwebhooks.DecodeSecret(secret)
	require.NoError(t, err)
	require.Equal(t, want, standardwebhooks.SignHeaders(key, id, time.Unix(ts, 0), []byte(payload)))

	for _, prefix := range []string{"webhook", "svix"} {
		req := providertest.Request(payload, prefix+"-id", id, prefix+"-timestamp", strconv.Itoa(ts), prefix+"-signature", want)
		require.NoError(t, build(t, time.Unix(ts, 0), secret).Verify(req), prefix)
		// The same key without the prefix is accepted as bare base64.
		require.NoError(t, build(t, time.Unix(ts, 0), strings.TrimPrefix(secret, "whsec_")).Verify(req), prefix)
		require.ErrorIs(t, build(t, time.Unix(ts, 0), secret).Verify(withBody(req, payload+" ")), providers.ErrInvalidSignature)
	}
}

func withBody(r *providers.Request, b string) *providers.Request {
	c := providertest.Clone(r)
	c.Body = []byte(b)
	return c
}

// TestReferenceLibraryOracle checks both directions against
// github.com/standard-webhooks/standard-webhooks/libraries/go.
func TestReferenceLibraryOracle(t *testing.T) {
	t.Parallel()
	wh, err := swlib.NewWebhook(secrets[0])
	require.NoError(t, err)

	// The library signs, we verify.
	now := providertest.Now
	sig, err := wh.Sign("msg_oracle", now, []byte(body))
	require.NoError(t, err)
	req := providertest.Request(body, "webhook-id", "msg_oracle", "webhook-timestamp", strconv.FormatInt(now.Unix(), 10), "webhook-signature", sig)
	require.NoError(t, build(t, now, secrets[0]).Verify(req))
	require.ErrorIs(t, build(t, now, secrets[1]).Verify(req), providers.ErrInvalidSignature)

	// We sign (at the real clock, as the library checks it), the library verifies.
	ours := providertest.Request(body)
	require.NoError(t, build(t, time.Now(), secrets[0]).Sign(ours, time.Now()))
	require.True(t, strings.HasPrefix(ours.Header.Get(standardwebhooks.HeaderID), "msg_"))
	require.NoError(t, wh.Verify(ours.Body, ours.Header))

	// SetHeaders, the helper used to sign forwards, agrees with the library.
	key, err := standardwebhooks.DecodeSecret(secrets[1])
	require.NoError(t, err)
	h := http.Header{}
	standardwebhooks.SetHeaders(h, key, "source:evt_1", time.Now(), []byte(body))
	wh2, err := swlib.NewWebhook(secrets[1])
	require.NoError(t, err)
	require.NoError(t, wh2.Verify([]byte(body), h))
	require.Error(t, wh.Verify([]byte(body), h))
}

func TestSignKeepsRequestID(t *testing.T) {
	t.Parallel()
	v := build(t, providertest.Now, secrets[0])
	req := providertest.Request(body, "webhook-id", "msg_given")
	require.NoError(t, v.Sign(req, providertest.Now))
	require.Equal(t, "msg_given", req.Header.Get(standardwebhooks.HeaderID))

	// A svix-id is carried over to the webhook-* headers and the svix ones dropped.
	req = providertest.Request(body, "svix-id", "msg_svix", "svix-signature", "v1,stale")
	require.NoError(t, v.Sign(req, providertest.Now))
	require.Equal(t, "msg_svix", req.Header.Get(standardwebhooks.HeaderID))
	require.Empty(t, req.Header.Get(standardwebhooks.SvixHeaderSignature))
	require.NoError(t, v.Verify(req))

	// Fresh ids differ.
	a, b := providertest.Request(body), providertest.Request(body)
	require.NoError(t, v.Sign(a, providertest.Now))
	require.NoError(t, v.Sign(b, providertest.Now))
	require.NotEqual(t, a.Header.Get(standardwebhooks.HeaderID), b.Header.Get(standardwebhooks.HeaderID))
}

func TestEd25519PublicKey(t *testing.T) {
	t.Parallel()
	priv, pub := ed25519Secret(t)
	signer := build(t, providertest.Now, priv)
	req := providertest.Request(body, "webhook-id", "msg_ed")
	require.NoError(t, signer.Sign(req, providertest.Now))
	require.True(t, strings.HasPrefix(req.Header.Get(standardwebhooks.HeaderSignature), "v1a,"))

	verifier := build(t, providertest.Now, secrets[0], pub)
	require.NoError(t, verifier.Verify(req))
	require.ErrorIs(t, verifier.Verify(withBody(req, body+" ")), providers.ErrInvalidSignature)

	// A v1a signature is never checked as v1 or against an HMAC key.
	require.ErrorIs(t, build(t, providertest.Now, secrets[0]).Verify(req), providers.ErrInvalidSignature)

	// A public key cannot sign.
	require.Error(t, build(t, providertest.Now, pub).Sign(providertest.Request(body), providertest.Now))
}

func TestUnknownVersionIgnored(t *testing.T) {
	t.Parallel()
	v := build(t, providertest.Now, secrets[0])
	req := providertest.Request(body, "webhook-id", "msg_v")
	require.NoError(t, v.Sign(req, providertest.Now))
	_, b64, ok := strings.Cut(req.Header.Get(standardwebhooks.HeaderSignature), ",")
	require.True(t, ok)
	for _, version := range []string{"v2", "V1", "v0", "v1a", ""} {
		bad := providertest.Clone(req)
		bad.Header.Set(standardwebhooks.HeaderSignature, version+","+b64)
		require.ErrorIs(t, v.Verify(bad), providers.ErrInvalidSignature, version)
	}
	// Extra spaces between entries are fine.
	ok2 := providertest.Clone(req)
	ok2.Header.Set(standardwebhooks.HeaderSignature, "  v2,xyz   v1,"+b64+"  ")
	require.NoError(t, v.Verify(ok2))
}

func TestMissingHeaderErrors(t *testing.T) {
	t.Parallel()
	v := build(t, providertest.Now, secrets[0])
	req := providertest.Request(body, "webhook-id", "msg_m")
	require.NoError(t, v.Sign(req, providertest.Now))
	for _, h := range []string{standardwebhooks.HeaderID, standardwebhooks.HeaderTimestamp, standardwebhooks.HeaderSignature} {
		bad := providertest.Clone(req)
		bad.Header.Del(h)
		require.ErrorIs(t, v.Verify(bad), providers.ErrNoSignature, h)
	}
	bad := providertest.Clone(req)
	bad.Header.Set(standardwebhooks.HeaderTimestamp, "soon")
	require.ErrorIs(t, v.Verify(bad), providers.ErrInvalidSignature)
}

func TestNewRejectsBadSecrets(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"whsec_not base64!", "whsec_", "", "whpk_AAAA", "whsk_AAAA", "whpk_!!"} {
		_, err := standardwebhooks.New(providers.Config{Secrets: []string{secrets[0], bad}})
		require.Error(t, err, bad)
		require.Contains(t, err.Error(), "secrets[1]")
		if _, rest, _ := strings.Cut(bad, "_"); rest != "" {
			require.NotContains(t, err.Error(), rest, "the error must not print the secret")
		}
	}
	_, err := standardwebhooks.New(providers.Config{})
	require.Error(t, err)
	_, err = standardwebhooks.New(providers.Config{Secrets: secrets[:1], Settings: providertest.DecodeSettings(map[string]any{"x": 1})})
	require.Error(t, err)
}

func TestResolve(t *testing.T) {
	t.Parallel()
	v := build(t, providertest.Now, secrets[0])

	// Svix headers win when complete; time falls back to the timestamp header.
	req := providertest.Request(`{"type":"user.created"}`, "svix-id", "msg_svix", "svix-timestamp", "1764504000", "svix-signature", "v1,x",
		"webhook-id", "msg_other")
	ev, err := v.Resolve(req)
	require.NoError(t, err)
	require.Equal(t, providers.Event{ID: "msg_svix", Type: "user.created", Time: time.Unix(1764504000, 0).UTC()}, ev)

	_, err = v.Resolve(providertest.Request(`not json`, "webhook-id", "msg_1"))
	require.ErrorIs(t, err, providers.ErrMalformed)
	_, err = v.Resolve(providertest.Request(`{}`))
	require.ErrorIs(t, err, providers.ErrNoEventID)
}

func TestDescribe(t *testing.T) {
	t.Parallel()
	d := build(t, providertest.Now, secrets[0]).Describe()
	require.Equal(t, "header:webhook-id", d.DefaultEventID)
	require.Equal(t, 5*time.Minute, d.DefaultTolerance)
	require.Equal(t, []string{standardwebhooks.HeaderID, standardwebhooks.HeaderTimestamp, standardwebhooks.HeaderSignature}, d.Headers)
	require.Equal(t, []string{standardwebhooks.SvixHeaderID, standardwebhooks.SvixHeaderTimestamp, standardwebhooks.SvixHeaderSignature}, d.FallbackHeaders)
	for _, name := range []string{standardwebhooks.Name, standardwebhooks.SvixName} {
		_, ok := providers.Lookup(name)
		require.True(t, ok, name)
	}
}

func FuzzParseSignatures(f *testing.F) {
	f.Add("v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
	f.Add("v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE= v1a,hnO3f9T8Ytu9HwrXslvumlUpqtNVqkhqw/enGzPCXe5BdqzCInXqYXFymVJaA7AZdpXwVLPo3mNl8EM+m7TBAg==")
	f.Add("v2,abc v1,")
	f.Add("   ,,, v1a,=")
	f.Add(strings.Repeat("v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE= ", standardwebhooks.MaxSignatures))
	f.Add(strings.Repeat("v2,x ", standardwebhooks.MaxSignatures) + "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
	f.Fuzz(func(t *testing.T, header string) {
		sigs, err := standardwebhooks.ParseSignatures(header)
		if (err == nil) != (len(sigs) > 0) {
			t.Fatalf("err=%v with %d signatures for %q", err, len(sigs), header)
		}
		if n := len(strings.Fields(header)); n > standardwebhooks.MaxSignatures && err == nil {
			t.Fatalf("%d entries accepted from %q", n, header)
		}
		for _, s := range sigs {
			switch {
			case s.Version == standardwebhooks.VersionHMAC && len(s.Value) == 32:
			case s.Version == standardwebhooks.VersionEd25519 && len(s.Value) == 64:
			default:
				t.Fatalf("accepted %s signature of %d bytes from %q", s.Version, len(s.Value), header)
			}
		}
	})
}

// FuzzVerify feeds arbitrary signature headers around the published vector's
// signature to a verifier holding its secret and an ed25519 public key: no
// panics, only signature errors, and a header verifies only if it carries
// the vector's signature within the entry cap.
func FuzzVerify(f *testing.F) {
	const (
		secret  = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
		id      = "msg_p5jXN8AQM9LWM0D4loKWxJek"
		ts      = 1614265330
		payload = `{"test": 2432232314}`
		good    = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
	)
	f.Add("", "")
	f.Add("v1a,hnO3f9T8Ytu9HwrXslvumlUpqtNVqkhqw/enGzPCXe5BdqzCInXqYXFymVJaA7AZdpXwVLPo3mNl8EM+m7TBAg==", "")
	f.Add(strings.Repeat("v1,AAAA ", 15), "")
	f.Add(strings.Repeat("v2,x ", 16), "v1,x")
	_, pub := ed25519Secret(f)
	v, err := standardwebhooks.New(providers.Config{Secrets: []string{secret, pub}, Now: func() time.Time { return time.Unix(ts, 0) }})
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, before, after string) {
		header := before + " " + good + " " + after
		req := providertest.Request(payload, "webhook-id", id, "webhook-timestamp", strconv.Itoa(ts), "webhook-signature", header)
		err := v.Verify(req)
		entries := strings.Fields(header)
		if err == nil {
			if len(entries) > standardwebhooks.MaxSignatures {
				t.Fatalf("%d entries verified: %q", len(entries), header)
			}
			return
		}
		if !providers.IsSignatureError(err) {
			t.Fatalf("not a signature error: %v", err)
		}
		if len(entries) <= standardwebhooks.MaxSignatures {
			t.Fatalf("the vector's signature among %d entries refused: %q: %v", len(entries), header, err)
		}
	})
}
