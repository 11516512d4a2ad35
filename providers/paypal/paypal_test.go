package paypal_test

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/paypal"
	"github.com/hookline/hookline/providers/providertest"
)

var _ providers.Provider = (*paypal.Verifier)(nil)

func rsaKey() *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return k
}

// signingKey is the test's stand-in for PayPal's key, and wrongKey one that no
// certificate holds; each made once (RSA key generation is slow under -race).
var (
	signingKey = sync.OnceValue(rsaKey)
	wrongKey   = sync.OnceValue(rsaKey)
)

func certPEM(t testing.TB, key *rsa.PrivateKey, notBefore, notAfter time.Time) []byte {
	t.Helper()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "messageverificationcerts.paypal.com"},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// certServer serves certificates on loopback and counts fetches. While down
// is set it answers 503.
type certServer struct {
	*httptest.Server
	fetches atomic.Int64
	down    atomic.Bool
	mu      sync.Mutex
	certs   map[string][]byte
}

func newCertServer(t testing.TB, tls bool) *certServer {
	cs := &certServer{certs: map[string][]byte{}}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cs.fetches.Add(1)
		if cs.down.Load() {
			http.Error(w, "upstream connect error", http.StatusServiceUnavailable)
			return
		}
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, "/certs/CERT-1", http.StatusFound)
			return
		}
		cs.mu.Lock()
		c, ok := cs.certs[r.URL.Path]
		cs.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(c)
	})
	if tls {
		cs.Server = httptest.NewTLSServer(h)
	} else {
		cs.Server = httptest.NewServer(h)
	}
	t.Cleanup(cs.Close)
	cs.put("/certs/CERT-1", certPEM(t, signingKey(), providertest.Now.Add(-24*time.Hour), providertest.Now.Add(365*24*time.Hour)))
	return cs
}

func (cs *certServer) put(path string, pemBytes []byte) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.certs[path] = pemBytes
}

func (cs *certServer) host() string {
	u, _ := url.Parse(cs.URL)
	return u.Host
}

// sign sets PayPal's headers on req: signed for webhookID with key, cert at certURL.
func sign(t testing.TB, key *rsa.PrivateKey, certURL, webhookID string, req *providers.Request, now time.Time) {
	t.Helper()
	id := "b2384410-f8d2-11ec-b5e8-" + strings.ToLower(now.Format("150405"))
	ts := now.UTC().Format(time.RFC3339)
	digest := sha256.Sum256([]byte(paypal.SignedString(id, ts, webhookID, req.Body)))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, digest[:])
	require.NoError(t, err)
	req.Header.Set(paypal.HeaderTransmissionID, id)
	req.Header.Set(paypal.HeaderTransmissionTime, ts)
	req.Header.Set(paypal.HeaderTransmissionSig, base64.StdEncoding.EncodeToString(sig))
	req.Header.Set(paypal.HeaderCertURL, certURL)
	req.Header.Set(paypal.HeaderAuthAlgo, paypal.AuthAlgo)
}

func sample(id string) *providers.Request {
	return providertest.Request(`{"id":"` + id + `","event_version":"1.0","create_time":"2026-11-30T11:59:58.123Z","resource_type":"capture","event_type":"PAYMENT.CAPTURE.COMPLETED","summary":"Payment completed for $ 21.0 USD","resource":{"id":"80F85758S3080410K","status":"COMPLETED","amount":{"value":"21.00","currency_code":"USD"}}}`)
}

// webhookID is the webhook the suite's deliveries are signed for.
const webhookID = "1JE4291016473214C"

func TestConformance(t *testing.T) {
	t.Parallel()
	cs := newCertServer(t, false)
	certURL := cs.URL + "/certs/CERT-1"
	providertest.Run(t, providertest.Harness{
		Provider: paypal.Name,
		Settings: map[string]any{"webhook_id": webhookID, "cert_hosts": []string{cs.host()}},
		Delivery: sample,
		WantType: "PAYMENT.CAPTURE.COMPLETED",
		WantTime: time.Date(2026, 11, 30, 11, 59, 58, 123e6, time.UTC),
		// PayPal signs with the key of the certificate it serves; there is
		// no shared secret.
		Sign: func(t testing.TB, _ string, req *providers.Request, now time.Time) {
			sign(t, signingKey(), certURL, webhookID, req, now)
		},
		// Right webhook id and certificate URL, another key.
		WrongSigner: func(t testing.TB, req *providers.Request) {
			sign(t, wrongKey(), certURL, webhookID, req, providertest.Now)
		},
		Features: providertest.Features{Timestamp: true, NoSharedSecret: true},
	})
}

type bundle struct {
	cs      *certServer
	certURL string
	now     time.Time
	mu      sync.Mutex
}

func (b *bundle) clock() time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.now
}

func (b *bundle) setClock(t time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.now = t
}

func setup(t *testing.T) *bundle {
	t.Helper()
	cs := newCertServer(t, false)
	return &bundle{cs: cs, certURL: cs.URL + "/certs/CERT-1", now: providertest.Now}
}

func (b *bundle) build(t *testing.T, settings map[string]any) *paypal.Verifier {
	t.Helper()
	if settings == nil {
		settings = map[string]any{"webhook_id": "WH1", "cert_hosts": []string{b.cs.host()}}
	}
	v, err := paypal.New(providers.Config{Source: "test", Settings: providertest.DecodeSettings(settings), Now: b.clock})
	require.NoError(t, err)
	return v
}

func TestVerify(t *testing.T) {
	t.Parallel()
	b := setup(t)
	v := b.build(t, nil)

	req := sample("WH-1")
	sign(t, signingKey(), b.certURL, "WH1", req, providertest.Now)
	require.NoError(t, v.Verify(req))
	ev, err := v.Resolve(req)
	require.NoError(t, err)
	require.Equal(t, "WH-1", ev.ID)

	// Another webhook's delivery.
	other := sample("WH-1")
	sign(t, signingKey(), b.certURL, "WH2", other, providertest.Now)
	require.ErrorIs(t, v.Verify(other), providers.ErrInvalidSignature)

	// Signed with another key than the certificate's.
	forged := sample("WH-1")
	sign(t, wrongKey(), b.certURL, "WH1", forged, providertest.Now)
	require.ErrorIs(t, v.Verify(forged), providers.ErrInvalidSignature)

	// Only SHA256withRSA.
	bad := providertest.Clone(req)
	bad.Header.Set(paypal.HeaderAuthAlgo, "SHA1withRSA")
	require.ErrorIs(t, v.Verify(bad), providers.ErrInvalidSignature)

	// A changed transmission id or time breaks the signature.
	bad = providertest.Clone(req)
	bad.Header.Set(paypal.HeaderTransmissionID, "b2384410-f8d2-11ec-b5e8-000000")
	require.ErrorIs(t, v.Verify(bad), providers.ErrInvalidSignature)
	bad = providertest.Clone(req)
	bad.Header.Set(paypal.HeaderTransmissionTime, providertest.Now.Add(time.Second).Format(time.RFC3339))
	require.ErrorIs(t, v.Verify(bad), providers.ErrInvalidSignature)

	// The certificate was fetched once.
	require.Equal(t, int64(1), b.cs.fetches.Load())
}

func TestCertURLRules(t *testing.T) {
	t.Parallel()
	b := setup(t)
	v := b.build(t, map[string]any{"webhook_id": "WH1", "cert_hosts": []string{b.cs.host(), "api.paypal.com", "certs.example.com:8443"}})
	for raw, ok := range map[string]bool{
		b.certURL: true,
		"https://api.paypal.com/v1/notifications/certs/CERT-360caa42":     true,
		"https://API.PayPal.com:443/v1/notifications/certs/CERT-360caa42": true,
		"https://certs.example.com:8443/c":                                true,
		"http://api.paypal.com/v1/notifications/certs/CERT-360caa42":      false, // not loopback: https only
		"https://api.paypal.com:8443/c":                                   false,
		"https://certs.example.com/c":                                     false,
		"https://api.paypal.com.evil.example/c":                           false,
		"https://evil.example/api.paypal.com":                             false,
		"https://user@api.paypal.com/c":                                   false,
		"ftp://api.paypal.com/c":                                          false,
		"//api.paypal.com/c":                                              false,
		"https:api.paypal.com":                                            false,
		"http://127.0.0.1:1/c":                                            false, // loopback but not listed
		"":                                                                false,
	} {
		_, got := v.CertURLAllowed(raw)
		require.Equal(t, ok, got, raw)
	}

	// Defaults: PayPal's hosts only.
	def, err := paypal.New(providers.Config{Settings: providertest.DecodeSettings(map[string]any{"webhook_id": "WH1"})})
	require.NoError(t, err)
	for _, h := range paypal.DefaultCertHosts {
		_, ok := def.CertURLAllowed("https://" + h + "/v1/notifications/certs/CERT-1")
		require.True(t, ok, h)
	}
	_, ok := def.CertURLAllowed(b.certURL)
	require.False(t, ok)

	// A delivery pointing at a host not allowed is refused without a fetch.
	req := sample("WH-1")
	sign(t, signingKey(), b.certURL, "WH1", req, providertest.Now)
	def2, err := paypal.New(providers.Config{Settings: providertest.DecodeSettings(map[string]any{"webhook_id": "WH1"}), Now: b.clock})
	require.NoError(t, err)
	require.ErrorIs(t, def2.Verify(req), providers.ErrInvalidSignature)
	require.Equal(t, int64(0), b.cs.fetches.Load())

	// Redirects are not followed.
	req.Header.Set(paypal.HeaderCertURL, b.cs.URL+"/redirect")
	require.ErrorIs(t, v.Verify(req), providers.ErrInvalidSignature)
	// Unknown certificate path.
	req.Header.Set(paypal.HeaderCertURL, b.cs.URL+"/certs/CERT-404")
	err = v.Verify(req)
	require.ErrorIs(t, err, providers.ErrInvalidSignature)
	require.NotErrorIs(t, err, providers.ErrUnavailable)
}

// TestCertUnavailable: a certificate that cannot be fetched for network
// reasons (a 5xx, a refused connection, a timeout) leaves the delivery's
// authenticity unknown: ErrUnavailable, not a signature error, and nothing
// is cached.
func TestCertUnavailable(t *testing.T) {
	t.Parallel()
	requireUnavailable := func(t *testing.T, err error) {
		t.Helper()
		require.ErrorIs(t, err, providers.ErrUnavailable)
		require.False(t, providers.IsSignatureError(err), "%v", err)
	}

	t.Run("ServerError", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		v := b.build(t, nil)
		req := sample("WH-1")
		sign(t, signingKey(), b.certURL, "WH1", req, providertest.Now)
		b.cs.down.Store(true)
		requireUnavailable(t, v.Verify(req))
		b.cs.down.Store(false)
		require.NoError(t, v.Verify(req))
		require.Equal(t, int64(2), b.cs.fetches.Load())
	})

	t.Run("ConnectionRefused", func(t *testing.T) {
		t.Parallel()
		gone := httptest.NewServer(http.NotFoundHandler())
		certURL := gone.URL + "/certs/CERT-1"
		host := gone.Listener.Addr().String()
		gone.Close()
		v, err := paypal.New(providers.Config{
			Settings: providertest.DecodeSettings(map[string]any{"webhook_id": "WH1", "cert_hosts": []string{host}}),
			Now:      func() time.Time { return providertest.Now },
		})
		require.NoError(t, err)
		req := sample("WH-1")
		sign(t, signingKey(), certURL, "WH1", req, providertest.Now)
		requireUnavailable(t, v.Verify(req))
	})

	t.Run("Timeout", func(t *testing.T) {
		t.Parallel()
		hang := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
		t.Cleanup(hang.Close)
		v, err := paypal.New(providers.Config{
			Settings:   providertest.DecodeSettings(map[string]any{"webhook_id": "WH1", "cert_hosts": []string{hang.Listener.Addr().String()}}),
			Now:        func() time.Time { return providertest.Now },
			HTTPClient: &http.Client{Timeout: 50 * time.Millisecond},
		})
		require.NoError(t, err)
		req := sample("WH-1")
		sign(t, signingKey(), hang.URL+"/certs/CERT-1", "WH1", req, providertest.Now)
		requireUnavailable(t, v.Verify(req))
	})

	t.Run("NotAllowedStaysSignatureError", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.cs.down.Store(true)
		// The certificate host is not allowed: refused before any fetch,
		// however the host is doing.
		v, err := paypal.New(providers.Config{Settings: providertest.DecodeSettings(map[string]any{"webhook_id": "WH1"}), Now: b.clock})
		require.NoError(t, err)
		req := sample("WH-1")
		sign(t, signingKey(), b.certURL, "WH1", req, providertest.Now)
		err = v.Verify(req)
		require.ErrorIs(t, err, providers.ErrInvalidSignature)
		require.NotErrorIs(t, err, providers.ErrUnavailable)
		require.Equal(t, int64(0), b.cs.fetches.Load())
	})
}

func TestHTTPSCertServer(t *testing.T) {
	t.Parallel()
	cs := newCertServer(t, true)
	v, err := paypal.New(providers.Config{
		Settings:   providertest.DecodeSettings(map[string]any{"webhook_id": "WH1", "cert_hosts": []string{cs.host()}}),
		Now:        func() time.Time { return providertest.Now },
		HTTPClient: cs.Client(),
	})
	require.NoError(t, err)
	req := sample("WH-1")
	sign(t, signingKey(), cs.URL+"/certs/CERT-1", "WH1", req, providertest.Now)
	require.NoError(t, v.Verify(req))
}

func TestCertExpiry(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// A certificate valid for one more hour.
	b.cs.put("/certs/CERT-short", certPEM(t, signingKey(), providertest.Now.Add(-time.Hour), providertest.Now.Add(time.Hour)))
	v := b.build(t, nil)
	certURL := b.cs.URL + "/certs/CERT-short"

	req := sample("WH-1")
	sign(t, signingKey(), certURL, "WH1", req, providertest.Now)
	require.NoError(t, v.Verify(req))
	require.NoError(t, v.Verify(req))
	require.Equal(t, int64(1), b.cs.fetches.Load(), "cached")

	// Two hours later the cached certificate has expired: it is fetched
	// again, and the (still expired) certificate is refused.
	later := providertest.Now.Add(2 * time.Hour)
	b.setClock(later)
	req = sample("WH-2")
	sign(t, signingKey(), certURL, "WH1", req, later)
	require.ErrorIs(t, v.Verify(req), providers.ErrInvalidSignature)
	require.Equal(t, int64(2), b.cs.fetches.Load())

	// PayPal publishes a renewed certificate at the same URL.
	b.cs.put("/certs/CERT-short", certPEM(t, signingKey(), later.Add(-time.Minute), later.Add(time.Hour)))
	require.NoError(t, v.Verify(req))

	// A certificate not yet valid is refused.
	b.cs.put("/certs/CERT-future", certPEM(t, signingKey(), later.Add(time.Hour), later.Add(2*time.Hour)))
	req.Header.Set(paypal.HeaderCertURL, b.cs.URL+"/certs/CERT-future")
	require.ErrorIs(t, v.Verify(req), providers.ErrInvalidSignature)
}

func TestCertCacheBounded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	v := b.build(t, nil)
	pemBytes := certPEM(t, signingKey(), providertest.Now.Add(-time.Hour), providertest.Now.Add(time.Hour))
	for i := range 70 {
		path := "/certs/CERT-" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		b.cs.put(path, pemBytes)
		req := sample("WH-1")
		sign(t, signingKey(), b.cs.URL+path, "WH1", req, providertest.Now)
		require.NoError(t, v.Verify(req))
	}
	require.Equal(t, int64(70), b.cs.fetches.Load())
}

// TestSignedString checks the CRC-32 part against a known value:
// crc32("hello") = 0x3610a686 = 907060870 (IEEE), printed unsigned.
func TestSignedString(t *testing.T) {
	t.Parallel()
	require.Equal(t, "id|2026-11-30T12:00:00Z|WH1|907060870", paypal.SignedString("id", "2026-11-30T12:00:00Z", "WH1", []byte("hello")))
	// A CRC above 2^31 stays positive: the CRC-32 check value of
	// "123456789" is 0xCBF43926 (python3 zlib.crc32 agrees).
	require.Equal(t, "a|b|c|3421780262", paypal.SignedString("a", "b", "c", []byte("123456789")))
}

func TestSettings(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		settings map[string]any
		field    string
	}{
		{nil, "paypal.webhook_id: required"},
		{map[string]any{"webhook_id": " "}, "paypal.webhook_id: required"},
		{map[string]any{"webhook_id": "a|b"}, "paypal.webhook_id"},
		{map[string]any{"webhook_id": "WH1", "cert_hosts": []string{}}, "paypal.cert_hosts"},
		{map[string]any{"webhook_id": "WH1", "cert_hosts": []string{"https://api.paypal.com/"}}, "paypal.cert_hosts[0]"},
		{map[string]any{"webhook_id": "WH1", "unknown": true}, "paypal"},
	} {
		_, err := paypal.New(providers.Config{Settings: providertest.DecodeSettings(c.settings)})
		require.ErrorContains(t, err, c.field, "%v", c.settings)
	}
	// No secrets needed, and none taken: given, they are an error naming
	// the field rather than silently ignored.
	_, err := paypal.New(providers.Config{Settings: providertest.DecodeSettings(map[string]any{"webhook_id": "WH1"})})
	require.NoError(t, err)
	_, err = paypal.New(providers.Config{Secrets: []string{"whsec"}, Settings: providertest.DecodeSettings(map[string]any{"webhook_id": "WH1"})})
	require.ErrorContains(t, err, "secrets: paypal takes none")
}

func FuzzCertURLAllowed(f *testing.F) {
	f.Add("https://api.paypal.com/v1/notifications/certs/CERT-1")
	f.Add("http://127.0.0.1:8080/c")
	f.Add("https://[::1]:443/x")
	f.Add("https://api.paypal.com:443@evil/x")
	v, err := paypal.New(providers.Config{Settings: providertest.DecodeSettings(map[string]any{"webhook_id": "WH1", "cert_hosts": []string{"api.paypal.com", "127.0.0.1:8080"}})})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, ok := v.CertURLAllowed(raw)
		if !ok {
			return
		}
		h := strings.ToLower(u.Hostname())
		switch {
		case u.Scheme == "https" && h == "api.paypal.com" && (u.Port() == "" || u.Port() == "443"):
		case (u.Scheme == "https" || u.Scheme == "http") && h == "127.0.0.1" && u.Port() == "8080":
		default:
			t.Fatalf("%q allowed (%s)", raw, u)
		}
	})
}

// FuzzVerifyHeaders fuzzes the header values Verify parses (time, id,
// signature, algorithm): no panics, nothing forged verifies.
func FuzzVerifyHeaders(f *testing.F) {
	cs := newCertServer(f, false)
	v, err := paypal.New(providers.Config{
		Settings: providertest.DecodeSettings(map[string]any{"webhook_id": "WH1", "cert_hosts": []string{cs.host()}}),
		Now:      func() time.Time { return providertest.Now },
	})
	if err != nil {
		f.Fatal(err)
	}
	req := sample("WH-1")
	sign(f, signingKey(), cs.URL+"/certs/CERT-1", "WH1", req, providertest.Now)
	f.Add(req.Header.Get(paypal.HeaderTransmissionID), req.Header.Get(paypal.HeaderTransmissionTime), req.Header.Get(paypal.HeaderTransmissionSig), paypal.AuthAlgo)
	f.Add("x|y", "2026-11-30T12:00:00+00:00", "AAAA", "SHA256withRSA")
	f.Add("", "", "", "")
	f.Fuzz(func(t *testing.T, id, ts, sig, algo string) {
		r := providertest.Clone(req)
		r.Header.Set(paypal.HeaderTransmissionID, id)
		r.Header.Set(paypal.HeaderTransmissionTime, ts)
		r.Header.Set(paypal.HeaderTransmissionSig, sig)
		r.Header.Set(paypal.HeaderAuthAlgo, algo)
		err := v.Verify(r)
		if err == nil && (id != req.Header.Get(paypal.HeaderTransmissionID) || ts != req.Header.Get(paypal.HeaderTransmissionTime)) {
			t.Fatalf("forged headers verified: %q %q %q %q", id, ts, sig, algo)
		}
		if err != nil && !providers.IsSignatureError(err) && !errors.Is(err, providers.ErrMalformed) {
			t.Fatalf("unexpected error kind: %v", err)
		}
	})
}
