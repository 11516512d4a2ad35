package keyfetch

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"testing"
	"time"

	"github.com/hookline/hookline/providers"
)

func fuzzCertDER(f *testing.F, pub, priv any) []byte {
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "certs.example.com"},
		NotBefore:    time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		NotAfter:     time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, priv)
	if err != nil {
		f.Fatal(err)
	}
	return der
}

// FuzzParseCert fuzzes what Certs reads from a certificate URL's answer: no
// panics; an accepted answer holds a certificate with an RSA key and fits in
// MaxBytes, and its failures are answers about the URL (ErrCertificate),
// never providers.ErrUnavailable.
func FuzzParseCert(f *testing.F) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		f.Fatal(err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		f.Fatal(err)
	}
	rsaDER := fuzzCertDER(f, &rsaKey.PublicKey, rsaKey)
	ecDER := fuzzCertDER(f, &ecKey.PublicKey, ecKey)
	rsaPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: rsaDER})
	f.Add(rsaPEM)
	f.Add(rsaDER)
	f.Add(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ecDER}))
	f.Add(append(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1, 2, 3}}), rsaPEM...))
	f.Add(append(rsaPEM, rsaPEM...))
	f.Add(rsaPEM[:len(rsaPEM)/2])
	f.Add([]byte("-----BEGIN CERTIFICATE-----\n\n-----END CERTIFICATE-----\n"))
	f.Add([]byte{})
	certs := NewCerts(CertsOptions{Name: "fuzzed"})
	f.Fuzz(func(t *testing.T, raw []byte) {
		c, err := certs.parse(raw)
		if err != nil {
			if !errors.Is(err, ErrCertificate) || errors.Is(err, providers.ErrUnavailable) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		if len(raw) > DefaultMaxCertBytes || c.Key == nil || c.Key.N == nil || c.Key.N.Sign() <= 0 {
			t.Fatalf("accepted %d bytes with key %+v", len(raw), c.Key)
		}
		cert, err := ParseCertificate(raw)
		if err != nil {
			t.Fatalf("parse accepted what ParseCertificate refuses: %v", err)
		}
		if !cert.NotBefore.Equal(c.NotBefore) || !cert.NotAfter.Equal(c.NotAfter) {
			t.Fatalf("validity %v–%v, want %v–%v", c.NotBefore, c.NotAfter, cert.NotBefore, cert.NotAfter)
		}
	})
}
