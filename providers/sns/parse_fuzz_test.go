package sns

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"testing"
	"time"

	"github.com/hookline/hookline/providers"
)

// FuzzParseMessage fuzzes the body parser: no panics; its errors wrap
// ErrMalformed; an accepted body is one JSON object whose known keys it
// reports exactly as encoding/json reads them (strings; null is absent),
// with no key twice.
func FuzzParseMessage(f *testing.F) {
	f.Add([]byte(`{
  "Type" : "Notification",
  "MessageId" : "22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324",
  "TopicArn" : "arn:aws:sns:us-west-2:123456789012:MyTopic",
  "Subject" : "My First Message",
  "Message" : "Hello world!",
  "Timestamp" : "2012-05-02T00:54:06.655Z",
  "SignatureVersion" : "1",
  "Signature" : "EXAMPLEw6JRN...",
  "SigningCertURL" : "https://sns.us-west-2.amazonaws.com/SimpleNotificationService-f3ecfb7224c7233fe7bb5f59f96de52f.pem",
  "UnsubscribeURL" : "https://sns.us-west-2.amazonaws.com/?Action=Unsubscribe&SubscriptionArn=arn:aws:sns:us-west-2:123456789012:MyTopic:c9135db0-26c4-47ec-8998-413945fb5a96"
}`))
	f.Add([]byte(`{"Type":"SubscriptionConfirmation","Token":"t","SubscribeURL":null,"Subject":"\u00e9\ud800","x":[{"y":{}}]}`))
	f.Add([]byte(`{"Message":"a","Mess\u0061ge":"b"}`))
	f.Add([]byte(`{"Message":1} `))
	f.Add([]byte(`[]`))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, body []byte) {
		m, err := ParseMessage(body)
		if err != nil {
			if !errors.Is(err, providers.ErrMalformed) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		var all map[string]any
		if err := json.Unmarshal(body, &all); err != nil {
			t.Fatalf("accepted what encoding/json refuses: %v", err)
		}
		for k, v := range m {
			if !known(k) || all[k] != v {
				t.Fatalf("key %q: parsed %q, encoding/json %v", k, v, all[k])
			}
		}
		for k, v := range all {
			if _, isString := v.(string); known(k) && isString {
				if _, ok := m[k]; !ok {
					t.Fatalf("key %q dropped", k)
				}
			}
		}
		_ = m.StringToSign()
	})
}

func fuzzCertDER(f *testing.F, pub, priv any) []byte {
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "sns.amazonaws.com"},
		NotBefore:    time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		NotAfter:     time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, priv)
	if err != nil {
		f.Fatal(err)
	}
	return der
}

// FuzzParseCert fuzzes what is read from a certificate URL's answer: no
// panics; an accepted answer holds a certificate with an RSA key, fits in
// maxCertBytes, and its failures are signature errors (errFetch), never
// ErrUnavailable.
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
	f.Fuzz(func(t *testing.T, raw []byte) {
		c, err := parseCert(raw)
		if err != nil {
			if !errors.Is(err, errFetch) || errors.Is(err, providers.ErrUnavailable) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		if len(raw) > maxCertBytes || c.key == nil || c.key.N == nil || c.key.N.Sign() <= 0 {
			t.Fatalf("accepted %d bytes with key %+v", len(raw), c.key)
		}
		cert, err := ParseCertificate(raw)
		if err != nil {
			t.Fatalf("parseCert accepted what ParseCertificate refuses: %v", err)
		}
		if !cert.NotBefore.Equal(c.notBefore) || !cert.NotAfter.Equal(c.notAfter) {
			t.Fatalf("validity %v–%v, want %v–%v", c.notBefore, c.notAfter, cert.NotBefore, cert.NotAfter)
		}
	})
}
