package sendgrid_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/asn1"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"math/big"
	"strconv"
	"strings"
	"testing"

	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/providertest"
	"github.com/hookline/hookline/providers/sendgrid"
)

// FuzzParseSignature: no panics; an accepted value is the canonical base64
// of exactly the DER of two positive integers of at most 256 bits, which Go's
// ECDSA verifier reads too; a refused one is an invalid signature.
func FuzzParseSignature(f *testing.F) {
	f.Add(publishedSig)
	f.Add(publishedMultiSig)
	f.Add(publishedBadSig)
	f.Add("")
	f.Add("MAYCAQECAQI=")     // SEQUENCE { 1, 2 }
	f.Add("MAkCAQECAQICAQM=") // SEQUENCE { 1, 2, 3 }
	f.Add("MAcCAgABAgEC")     // a non-minimal integer
	f.Add("MAYCAf8CAQI=")     // a negative r
	f.Add(publishedSig[:len(publishedSig)-1])
	f.Fuzz(func(t *testing.T, v string) {
		der, err := sendgrid.ParseSignature(v)
		if err != nil {
			if !errors.Is(err, providers.ErrInvalidSignature) {
				t.Fatalf("%q: want an invalid signature, got %v", v, err)
			}
			return
		}
		if base64.StdEncoding.EncodeToString(der) != v {
			t.Fatalf("%q accepted but is not the canonical encoding", v)
		}
		var sig struct{ R, S *big.Int }
		rest, err := asn1.Unmarshal(der, &sig)
		if err != nil || len(rest) != 0 || sig.R.Sign() <= 0 || sig.S.Sign() <= 0 || sig.R.BitLen() > 256 || sig.S.BitLen() > 256 {
			t.Fatalf("%q accepted but is not (r, s): %v", v, err)
		}
		if canon, _ := asn1.Marshal(sig); !bytes.Equal(canon, der) {
			t.Fatalf("%q accepted but is not exactly the DER of (r, s)", v)
		}
	})
}

// FuzzParseTimestamp: no panics; an accepted value is decimal digits that
// spell the number returned (no sign, no space), and a refused one is an
// invalid signature.
func FuzzParseTimestamp(f *testing.F) {
	f.Add(publishedTS)
	f.Add("0")
	f.Add("")
	f.Add("-1")
	f.Add("+1")
	f.Add(" 1")
	f.Add("9223372036854775807")
	f.Add("9223372036854775808")
	f.Add("00000000000000000001")
	f.Fuzz(func(t *testing.T, v string) {
		n, err := sendgrid.ParseTimestamp(v)
		if err != nil {
			if !errors.Is(err, providers.ErrInvalidSignature) {
				t.Fatalf("%q: want an invalid signature, got %v", v, err)
			}
			return
		}
		if n < 0 || len(v) > 19 {
			t.Fatalf("%q accepted as %d", v, n)
		}
		for _, c := range v {
			if c < '0' || c > '9' {
				t.Fatalf("%q accepted but holds %q", v, c)
			}
		}
		if m, perr := strconv.ParseInt(v, 10, 64); perr != nil || m != n {
			t.Fatalf("%q read as %d", v, n)
		}
	})
}

// FuzzParsePublicKey: no panics; an accepted key is a P-256 point on the
// curve, and the key it came from (base64 or PEM) encodes back to it.
func FuzzParsePublicKey(f *testing.F) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		f.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&priv.PublicKey)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(publishedKey)
	f.Add(publishedMultiKey)
	f.Add(string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})))
	f.Add(base64.StdEncoding.EncodeToString(der[:len(der)-1]))
	f.Add("-----BEGIN PUBLIC KEY-----\n-----END PUBLIC KEY-----\n")
	f.Add("")
	f.Add("MA==")
	f.Fuzz(func(t *testing.T, s string) {
		pub, err := sendgrid.ParsePublicKey(s)
		if err != nil {
			return
		}
		if pub.Curve != elliptic.P256() {
			t.Fatalf("accepted a key that is not P-256 from %q", s)
		}
		if _, err := pub.ECDH(); err != nil {
			t.Fatalf("accepted a key that is not a P-256 point from %q: %v", s, err)
		}
		enc, err := sendgrid.EncodePublicKey(pub)
		if err != nil {
			t.Fatal(err)
		}
		again, err := sendgrid.ParsePublicKey(enc)
		if err != nil || !again.Equal(pub) {
			t.Fatalf("the key of %q does not survive its encoding %q: %v", s, enc, err)
		}
	})
}

// FuzzSplit: no panics; without an error there are items, each a slice of
// the body at its offset, a JSON object whose sg_event_id is the item's
// (non-blank) id; errors are malformed bodies or missing ids.
func FuzzSplit(f *testing.F) {
	f.Add(publishedBody)
	f.Add(publishedMultiBody)
	f.Add(string(sample("EV1").Body))
	f.Add(`[{"sg_event_id":1},{"sg_event_id":"x"},[]]`)
	f.Add(`[{"sg_event_id":"a","sg_event_id":"b"}]`)
	f.Add(` [ {"sg_event_id":"a"} ] `)
	v, err := sendgrid.New(providers.Config{Secrets: []string{publishedKey}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body string) {
		req := providertest.Request(body)
		items, err := v.Split(req)
		if err != nil {
			if !providertest.ErrorIsAny(err, providers.ErrMalformed, providers.ErrNoEventID) {
				t.Fatalf("unexpected error kind for %q: %v", body, err)
			}
			return
		}
		if len(items) == 0 {
			t.Fatalf("no error but no items for %q", body)
		}
		for _, it := range items {
			if it.Offset < 0 || it.Offset+len(it.Body) > len(req.Body) || !bytes.Equal(it.Body, req.Body[it.Offset:it.Offset+len(it.Body)]) {
				t.Fatalf("item %+v is not a slice of %q", it, body)
			}
			if len(it.Body) < 2 || it.Body[0] != '{' || it.Body[len(it.Body)-1] != '}' || bytes.TrimSpace([]byte(it.Event.ID)) == nil {
				t.Fatalf("bad item %+v in %q", it, body)
			}
		}
	})
}

// FuzzVerify: no panics whatever the headers, and nothing verifies against
// the published key but the published delivery (signed by SendGrid).
func FuzzVerify(f *testing.F) {
	f.Add(publishedSig, publishedTS, publishedBody)
	f.Add(publishedBadSig, publishedTS, publishedBody)
	f.Add("", "", "")
	f.Add(publishedSig, "0"+publishedTS, publishedBody)
	// A tolerance of about 146 years: only the signature is under test.
	v, err := sendgrid.New(providers.Config{Secrets: []string{publishedKey}, Tolerance: 1 << 62})
	if err != nil {
		f.Fatal(err)
	}
	digest := sha256.Sum256([]byte(publishedTS + publishedBody))
	f.Fuzz(func(t *testing.T, sig, ts, body string) {
		req := providertest.Request(body, sendgrid.HeaderSignature, sig, sendgrid.HeaderTimestamp, ts)
		err := v.Verify(req)
		if err == nil {
			// The timestamp and the body are not delimited: any split of the
			// signed bytes verifies (Split then refuses a body that is no
			// array, and the tolerance a timestamp cut short).
			d := sha256.Sum256([]byte(strings.TrimSpace(ts) + body))
			if d != digest {
				t.Fatalf("verified a delivery SendGrid did not sign: %q %q %q", sig, ts, body)
			}
			return
		}
		if !providers.IsSignatureError(err) {
			t.Fatalf("want a signature error, got %v", err)
		}
	})
}
