package keyfetch

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/providers"
)

// testCert is a self-signed PEM certificate with an RSA key, valid from
// notBefore to notAfter.
func testCert(t *testing.T, notBefore, notAfter time.Time) ([]byte, *rsa.PublicKey) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "certs.example.com"},
		NotBefore: notBefore, NotAfter: notAfter}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), &key.PublicKey
}

func TestCertsPublicKey(t *testing.T) {
	clk := &clock{now: t0}
	current, currentKey := testCert(t, t0.Add(-time.Hour), t0.Add(time.Hour))
	future, _ := testCert(t, t0.Add(time.Hour), t0.Add(2*time.Hour))
	var fetches atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		switch r.URL.Path {
		case "/current.pem":
			_, _ = w.Write(current)
		case "/future.pem":
			_, _ = w.Write(future)
		case "/busy.pem":
			w.WriteHeader(http.StatusServiceUnavailable)
		case "/moved.pem":
			http.Redirect(w, r, "/current.pem", http.StatusFound)
		case "/big.pem":
			_, _ = w.Write(make([]byte, 4<<10))
		case "/ec.pem":
			_, _ = w.Write([]byte("not a certificate"))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	certs := NewCerts(CertsOptions{Name: "the test's", Client: srv.Client(), Now: clk.Now, MaxBytes: 2048})
	at := func(path string) *url.URL {
		u, err := url.Parse(srv.URL + path)
		require.NoError(t, err)
		return u
	}

	// A current certificate: fetched once, then from the cache.
	for range 3 {
		key, err := certs.PublicKey(at("/current.pem"))
		require.NoError(t, err)
		require.True(t, key.Equal(currentKey))
	}
	require.Equal(t, int32(1), fetches.Load())

	// Not valid yet: refused, kept, and usable once it is.
	_, err := certs.PublicKey(at("/future.pem"))
	require.ErrorIs(t, err, ErrCertificate)
	require.NotErrorIs(t, err, providers.ErrUnavailable)
	clk.Advance(90 * time.Minute)
	_, err = certs.PublicKey(at("/future.pem"))
	require.NoError(t, err)
	require.Equal(t, int32(2), fetches.Load())

	// Answers about the URL are ErrCertificate (and remembered); the
	// provider not answering is providers.ErrUnavailable (and not).
	for _, path := range []string{"/missing.pem", "/moved.pem", "/big.pem", "/ec.pem"} {
		_, err := certs.PublicKey(at(path))
		require.ErrorIs(t, err, ErrCertificate, path)
		require.NotErrorIs(t, err, providers.ErrUnavailable, path)
	}
	n := fetches.Load()
	_, err = certs.PublicKey(at("/missing.pem"))
	require.ErrorIs(t, err, ErrCertificate)
	require.Equal(t, n, fetches.Load(), "a negative answer is remembered")
	for range 2 {
		_, err = certs.PublicKey(at("/busy.pem"))
		require.ErrorIs(t, err, providers.ErrUnavailable)
		require.True(t, errors.Is(err, ErrCertificate))
	}
	require.Equal(t, n+2, fetches.Load(), "an unavailable answer is not remembered")
}
