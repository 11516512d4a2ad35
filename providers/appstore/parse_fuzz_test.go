package appstore

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/providers"
)

// fuzzJWS is a well-formed (unverifiable) notification JWS for the seeds.
func fuzzJWS(f *testing.F) string {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		f.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "fuzz"},
		NotBefore: time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC), NotAfter: time.Date(2045, 1, 1, 0, 0, 0, 0, time.UTC), BasicConstraintsValid: true, IsCA: true,
		ExtraExtensions: []pkix.Extension{{Id: OIDLeaf, Value: []byte{5, 0}}, {Id: OIDIntermediate, Value: []byte{5, 0}}}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		f.Fatal(err)
	}
	c := base64.StdEncoding.EncodeToString(der)
	hdr, _ := json.Marshal(map[string]any{"alg": "ES256", "x5c": []string{c, c, c}})
	payload := `{"notificationType":"SUBSCRIBED","subtype":"INITIAL_BUY","notificationUUID":"6b1a3f0c","version":"2.0","signedDate":1764504000000,` +
		`"data":{"appAppleId":1234567890,"bundleId":"com.example","environment":"Production","signedTransactionInfo":"a.b.c"}}`
	return base64.RawURLEncoding.EncodeToString(hdr) + "." + base64.RawURLEncoding.EncodeToString([]byte(payload)) + "." +
		base64.RawURLEncoding.EncodeToString(make([]byte, 64))
}

// FuzzSignedPayload fuzzes the body parser: no panics; a body it reads a
// signedPayload from is one JSON object whose signedPayload encoding/json
// reads as the same non-empty string; its errors are ErrTooDeep or errParse.
func FuzzSignedPayload(f *testing.F) {
	jws := fuzzJWS(f)
	f.Add([]byte(`{"signedPayload":"` + jws + `"}`))
	f.Add([]byte("{\n  \"signedPayload\" : \"a.b.c\"\n}\n"))
	f.Add([]byte(`{"signedPayload":null}`))
	f.Add([]byte(`{"signedPayload":1,"x":[{}]}`))
	f.Add([]byte(`{"signedPayload":"a","signedPayload":"b"}`))
	f.Add([]byte(`{"signedPayl\u006fad":"\u00e9\ud800"}`))
	f.Add([]byte(`[` + strings.Repeat("[", 70)))
	f.Add([]byte(`{"signedPayload":"a.b.c","p":1e3001}`))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, body []byte) {
		s, ok, err := SignedPayload(body)
		if err != nil {
			if !errors.Is(err, providers.ErrTooDeep) && !errors.Is(err, errParse) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		if !ok {
			if s != "" {
				t.Fatalf("no signedPayload, yet %q", s)
			}
			return
		}
		var m map[string]any
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber() // JavaScript reads 1e3001 (Infinity) where a float64 overflows
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("accepted what encoding/json refuses: %v", err)
		}
		if s == "" || m["signedPayload"] != s {
			t.Fatalf("signedPayload %q, encoding/json %v", s, m["signedPayload"])
		}
	})
}

// FuzzParseJWS fuzzes the JWS parser: no panics; what it accepts is within
// the bounds (MaxJWSBytes, ChainLength certificates of at most
// MaxCertBytes in base64, a 64-byte signature, the payload PayloadOf
// reads), and its errors are ErrTooDeep or errParse.
func FuzzParseJWS(f *testing.F) {
	jws := fuzzJWS(f)
	f.Add(jws)
	p := strings.Split(jws, ".")
	f.Add(p[0] + "." + p[1] + ".")
	f.Add(p[0] + "." + p[1])
	f.Add("eyJhbGciOiJub25lIn0." + p[1] + "." + p[2])
	f.Add(base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"ES256","x5c":["a","b","c"],"alg":"ES256"}`)) + "." + p[1] + "." + p[2])
	f.Add(base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"ES256","x5c":[`+strings.Repeat("[", 70)+`]}`)) + "." + p[1] + "." + p[2])
	f.Add("a.b.c")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		j, err := ParseJWS(s)
		pl, perr := PayloadOf(s)
		if err != nil {
			if !errors.Is(err, providers.ErrTooDeep) && !errors.Is(err, errParse) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		if len(s) > MaxJWSBytes || len(j.X5C) != ChainLength || len(j.Signature) != 64 {
			t.Fatalf("accepted out of bounds: %d bytes, %d certificates, %d-byte signature", len(s), len(j.X5C), len(j.Signature))
		}
		for _, c := range j.X5C {
			if len(c) > maxCertBase64 {
				t.Fatalf("a certificate of %d base64 bytes", len(c))
			}
		}
		if perr != nil || string(pl) != string(j.Payload) || !strings.HasPrefix(s, j.SigningInput+".") {
			t.Fatalf("PayloadOf and ParseJWS disagree: %v", perr)
		}
	})
}

// FuzzParseNotification fuzzes the payload parser: no panics; a payload it
// accepts is one JSON object encoding/json reads, whose members it reports
// as encoding/json reads them; its errors are ErrTooDeep or errParse.
func FuzzParseNotification(f *testing.F) {
	f.Add([]byte(`{"notificationType":"SUBSCRIBED","subtype":"INITIAL_BUY","notificationUUID":"6b1a3f0c","version":"2.0","signedDate":1764504000000,` +
		`"data":{"appAppleId":1234567890,"bundleId":"com.example","environment":"Production","signedTransactionInfo":"a.b.c","status":1}}`))
	f.Add([]byte(`{"notificationType":"RENEWAL_EXTENSION","summary":{"bundleId":"b","appAppleId":1.0e3,"environment":"Sandbox"},"exp":1e300,"nbf":-1}`))
	f.Add([]byte(`{"externalPurchaseToken":{"externalPurchaseId":"SANDBOX_1","bundleId":"b"},"appData":{"bundleId":"c"}}`))
	f.Add([]byte(`{"signedDate":1.5}`))
	f.Add([]byte(`{"signedDate":8640000000000001}`))
	f.Add([]byte(`{"data":null}`))
	f.Add([]byte(`{"data":{"bundleId":"a","bundleId":"b"}}`))
	f.Add([]byte(`{"notificationUUID":"\ud800"} `))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, payload []byte) {
		n, err := ParseNotification(payload)
		if err != nil {
			if !errors.Is(err, providers.ErrTooDeep) && !errors.Is(err, errParse) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		// Numbers as text: JavaScript reads 1e3001 (Infinity) where a
		// float64 overflows.
		var m map[string]any
		dec := json.NewDecoder(bytes.NewReader(payload))
		dec.UseNumber()
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("accepted what encoding/json refuses: %v", err)
		}
		for k, got := range map[string]string{"notificationType": n.NotificationType, "subtype": n.Subtype, "notificationUUID": n.NotificationUUID} {
			if want, _ := m[k].(string); want != got {
				t.Fatalf("%s: parsed %q, encoding/json %q", k, got, want)
			}
		}
		sd, ok := m["signedDate"].(json.Number)
		if ok != n.HasSignedDate {
			t.Fatalf("signedDate: parsed %d (%v), encoding/json %v", n.SignedDate, n.HasSignedDate, m["signedDate"])
		}
		if f, err := sd.Float64(); ok && (err != nil || f != float64(n.SignedDate)) {
			t.Fatalf("signedDate: parsed %d, encoding/json %v", n.SignedDate, sd)
		}
		if n.App.From != "" {
			obj, _ := m[n.App.From].(map[string]any)
			if b, _ := obj["bundleId"].(string); obj == nil || b != n.App.BundleID {
				t.Fatalf("%s.bundleId: parsed %q, encoding/json %v", n.App.From, n.App.BundleID, obj["bundleId"])
			}
		}
		_ = n.Type()
	})
}

// FuzzParseCert fuzzes the x5c certificate decoder: no panics; a
// certificate it accepts came from at most MaxCertBytes of DER; its
// errors are errChain.
func FuzzParseCert(f *testing.F) {
	jws := fuzzJWS(f)
	hdr, _ := base64.RawURLEncoding.DecodeString(strings.Split(jws, ".")[0])
	var h struct{ X5C []string }
	_ = json.Unmarshal(hdr, &h)
	f.Add(h.X5C[0])
	f.Add(h.X5C[0][:len(h.X5C[0])/2])
	f.Add(strings.TrimRight(h.X5C[0], "="))
	f.Add(base64.StdEncoding.EncodeToString([]byte("not a certificate")))
	f.Add("")
	f.Fuzz(func(t *testing.T, b64 string) {
		c, err := ParseCert(b64, 0)
		if err != nil {
			if !errors.Is(err, errChain) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		if len(c.Raw) > MaxCertBytes {
			t.Fatalf("accepted a %d-byte certificate", len(c.Raw))
		}
	})
}

// FuzzVerify fuzzes the whole of Verify and Resolve on hostile bodies: no
// panics; Verify's errors are signature errors or ErrTooDeep (nothing the
// fuzzer makes is signed by a trusted chain), Resolve's ErrMalformed,
// ErrTooDeep or ErrNoEventID.
func FuzzVerify(f *testing.F) {
	v, err := New(providers.Config{Source: "fuzz", Settings: func(v any) error {
		s := v.(*Settings)
		s.BundleID, s.AppAppleID = "com.example", 1234567890
		return nil
	}})
	if err != nil {
		f.Fatal(err)
	}
	jws := fuzzJWS(f)
	f.Add([]byte(`{"signedPayload":"` + jws + `"}`))
	f.Add([]byte(`{"signedPayload":"a.b.c"}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req := &providers.Request{Body: body}
		if err := v.Verify(req); err == nil {
			t.Fatalf("verified a fuzzed body")
		} else if !providers.IsSignatureError(err) && !errors.Is(err, providers.ErrTooDeep) {
			t.Fatalf("unexpected error kind: %v", err)
		}
		if _, err := v.Resolve(req); err != nil && !errors.Is(err, providers.ErrMalformed) && !errors.Is(err, providers.ErrNoEventID) {
			t.Fatalf("unexpected Resolve error kind: %v", err)
		}
	})
}
