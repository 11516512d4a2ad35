package plaid

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"testing"

	"github.com/hookline/hookline/providers"
)

// FuzzParseKeyResponse fuzzes the key endpoint's 2xx answer: no panics; an
// accepted answer is a P-256 key named kid (or unnamed), and its failures are
// signature errors (errFetch), never ErrUnavailable.
func FuzzParseKeyResponse(f *testing.F) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		f.Fatal(err)
	}
	pub, err := priv.PublicKey.Bytes()
	if err != nil {
		f.Fatal(err)
	}
	good, err := json.Marshal(map[string]any{
		"key": map[string]any{
			"alg": "ES256", "created_at": 1560466150, "crv": "P-256", "expired_at": nil,
			"kid": "kid-1", "kty": "EC", "use": "sig",
			"x": base64.RawURLEncoding.EncodeToString(pub[1:33]),
			"y": base64.RawURLEncoding.EncodeToString(pub[33:]),
		},
		"request_id": "RZ6Omi1bzzwDaLo",
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good, "kid-1")
	f.Add(good, "kid-2")
	f.Add(good, "")
	f.Add([]byte(`{"key":{"kty":"EC","crv":"P-256","x":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA","y":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}}`), "k")
	f.Add([]byte(`{"key":{"kty":"EC","crv":"P-256","expired_at":99999999999999999999}}`), "k")
	f.Add([]byte(`{"key":null}`), "k")
	f.Add([]byte(`[]`), "k")
	f.Add([]byte(``), "")
	f.Fuzz(func(t *testing.T, raw []byte, kid string) {
		k, err := parseKeyResponse(raw, kid)
		if err != nil {
			if !errors.Is(err, errFetch) || errors.Is(err, providers.ErrUnavailable) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		if k.key == nil || k.key.Curve != elliptic.P256() {
			t.Fatalf("accepted a key that is not P-256: %+v", k.key)
		}
		if _, err := k.key.ECDH(); err != nil {
			t.Fatalf("accepted a key that is not a P-256 point: %v", err)
		}
		var out struct {
			Key struct {
				Kid string `json:"kid"`
			} `json:"key"`
		}
		if json.Unmarshal(raw, &out) != nil || (out.Key.Kid != "" && out.Key.Kid != kid) {
			t.Fatalf("accepted a key named %q for kid %q", out.Key.Kid, kid)
		}
	})
}
