package googleplay

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"errors"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/providers"
)

func fuzzKey(f *testing.F) *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		f.Fatal(err)
	}
	return k
}

// FuzzParseToken: no panics; what it accepts is a three-part token whose
// signing input it kept, with a kid, non-zero finite times and a signature
// of an RSA key's size; what it refuses is an invalid signature.
func FuzzParseToken(f *testing.F) {
	key := fuzzKey(f)
	now := time.Unix(1796287766, 0)
	good, err := SignToken(key, "kid-1", Claims{Issuer: "https://accounts.google.com", Audience: "https://hooks.example.com/x",
		Email: "a@b.iam.gserviceaccount.com", EmailVerified: true, IssuedAt: now, Expiry: now.Add(time.Hour)})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add("eyJhbGciOiJSUzI1NiJ9..")
	f.Add("a.b.c")
	f.Add("....")
	f.Add(base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"RS256","kid":"k"}`)) + "." +
		base64.RawURLEncoding.EncodeToString([]byte(`{"iat":1e308,"exp":-1e-300,"aud":["x"]}`)) + "." + strings.Repeat("A", 342))
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := ParseToken(s)
		if err != nil {
			if !errors.Is(err, providers.ErrInvalidSignature) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		switch {
		case tok.Kid == "" || len(tok.Kid) > maxKidBytes:
			t.Fatalf("kid %q", tok.Kid)
		case len(tok.Signature) < 256 || len(tok.Signature) > 1024:
			t.Fatalf("signature of %d bytes", len(tok.Signature))
		case !strings.HasPrefix(s, tok.SigningInput+".") || strings.Count(s, ".") != 2:
			t.Fatalf("signing input %q of %q", tok.SigningInput, s)
		case tok.IssuedAt == 0 || tok.Expiry == 0 || math.IsInf(tok.IssuedAt, 0) || math.IsInf(tok.Expiry, 0) || math.IsNaN(tok.IssuedAt) || math.IsNaN(tok.Expiry):
			t.Fatalf("times %v %v", tok.IssuedAt, tok.Expiry)
		}
	})
}

// FuzzBearer: no panics; a token it returns is non-empty and trimmed.
func FuzzBearer(f *testing.F) {
	for _, s := range []string{"Bearer a.b.c", "bearer  x ", "Bearer", "Bearer ", "Basic x", "", " ", "\x00Bearer x", "Bearer\u00a0x"} {
		f.Add(s, "")
	}
	f.Add("Bearer a", "Bearer b")
	f.Fuzz(func(t *testing.T, a, b string) {
		h := http.Header{}
		h.Add(Header, a)
		if b != "" {
			h.Add(Header, b)
		}
		tok, err := bearer(&providers.Request{Header: h})
		if err != nil {
			if !providers.IsSignatureError(err) {
				t.Fatalf("not a signature error: %v", err)
			}
			return
		}
		if tok == "" || tok != strings.TrimSpace(tok) || b != "" {
			t.Fatalf("token %q from %q, %q", tok, a, b)
		}
	})
}

// FuzzParsePush: no panics; errors are malformed bodies; a notification's
// type is one of NotificationTypes (or ""), its time within range.
func FuzzParsePush(f *testing.F) {
	data := base64.StdEncoding.EncodeToString([]byte(`{"version":"1.0","packageName":"com.example","eventTimeMillis":"1764504000000","subscriptionNotification":{"version":"1.0","notificationType":4}}`))
	f.Add([]byte(`{"message":{"data":"` + data + `","messageId":"1","message_id":"1","publishTime":"2026-11-30T12:00:00Z"},"subscription":"projects/p/subscriptions/s"}`))
	f.Add([]byte(`{"message":{"data":"e30=","messageId":"1"}}`))
	f.Add([]byte(`{"message":{"data":"eyJ0ZXN0Tm90aWZpY2F0aW9uIjp7fX0","messageId":null,"message_id":"2"}}`))
	f.Add([]byte(`{"message":{"data":"!!","messageId":"1","publish_time":"x"}}`))
	f.Add([]byte(`{"message":[]}`))
	f.Add([]byte(`[{"message":{}}]`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := ParsePush(body)
		if err != nil {
			if !errors.Is(err, providers.ErrMalformed) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		if p.DataTooLarge && p.Data != nil {
			t.Fatal("data too large, yet decoded")
		}
		n := p.Notification()
		if n == nil {
			return
		}
		if n.Type != "" && !slices.Contains(NotificationTypes, n.Type) {
			t.Fatalf("type %q", n.Type)
		}
		if !n.EventTime.IsZero() && (n.EventTime.UnixMilli() <= 0 || n.EventTime.UnixMilli() > maxEventMillis) {
			t.Fatalf("event time %v", n.EventTime)
		}
	})
}

// FuzzParseKeySet: no panics; what it accepts are RSA keys of 2048 to 8192
// bits with an odd exponent of at least 3, at most 64, each named by a kid
// of at most 256 bytes.
func FuzzParseKeySet(f *testing.F) {
	key := fuzzKey(f)
	good, err := JWKS(map[string]*rsa.PublicKey{"kid-1": &key.PublicKey, "kid-2": &key.PublicKey})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(`{"keys":[{"kty":"RSA","kid":"k","n":"AQAB","e":"AQAB"}]}`))
	f.Add([]byte(`{"keys":[{"kty":"EC","kid":"k"}],"extra":1}`))
	f.Add([]byte(`{"keys":null}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		keys, err := ParseKeySet(raw)
		if err != nil {
			return
		}
		if len(keys) == 0 || len(keys) > maxKeys {
			t.Fatalf("%d keys", len(keys))
		}
		for kid, k := range keys {
			if kid == "" || len(kid) > maxKidBytes {
				t.Fatalf("kid %q", kid)
			}
			if bits := k.N.BitLen(); bits < 2048 || bits > 8192 || k.E < 3 || k.E%2 == 0 {
				t.Fatalf("key of %d bits, e %d", bits, k.E)
			}
		}
	})
}

// FuzzCacheTTL: whatever the Cache-Control, the set is kept between a
// minute and a day.
func FuzzCacheTTL(f *testing.F) {
	for _, s := range []string{"public, max-age=21600, must-revalidate, no-transform", "max-age=0", "MAX-AGE = \"60\"", "max-age=-1", "max-age=99999999999999999999", "no-store", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, cc string) {
		if d := cacheTTL(cc); d < minKeysTTL || d > maxKeysTTL {
			t.Fatalf("%q: %v", cc, d)
		}
	})
}
