package providers_test

import (
	"crypto"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/providers"
)

// GitHub's published example ("Validating webhook deliveries").
const (
	vectorKey  = "It's a Secret to Everybody"
	vectorBody = "Hello, World!"
	vectorHex  = "757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
)

func request(body string, header ...string) *providers.Request {
	r := &providers.Request{Body: []byte(body), Header: http.Header{}}
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	return r
}

func TestBodyMACVector(t *testing.T) {
	t.Parallel()
	m := providers.BodyMAC{Header: "X-Sig", Prefix: "sha256="}
	r := request(vectorBody)
	m.Sign(r, []byte(vectorKey))
	require.Equal(t, "sha256="+vectorHex, r.Header.Get("X-Sig"))
	require.Equal(t, "sha256="+vectorHex, m.Signature([]byte(vectorKey), []byte("Hello, "), []byte("World!")), "parts are written in order")

	keys := providers.SecretKeys([]string{"old", vectorKey})
	require.NoError(t, m.Verify(r, keys), "every key is tried")
	err := m.Verify(r, providers.SecretKeys([]string{"old"}))
	require.ErrorIs(t, err, providers.ErrInvalidSignature)
	require.EqualError(t, err, "invalid signature: X-Sig does not match")
	err = m.Verify(request(vectorBody), keys)
	require.ErrorIs(t, err, providers.ErrNoSignature)
	require.EqualError(t, err, "missing signature: X-Sig header is required")
	tampered := request(vectorBody+" ", "X-Sig", "sha256="+vectorHex)
	require.ErrorIs(t, m.Verify(tampered, keys), providers.ErrInvalidSignature)
}

func TestBodyMACSpelling(t *testing.T) {
	t.Parallel()
	keys := providers.SecretKeys([]string{vectorKey})
	b64 := base64.StdEncoding.EncodeToString(must(hex.DecodeString(vectorHex)))
	// b64 ends in "=" after a character whose low bits are unused: flip them
	// for a spelling that encoding/base64 reads but does not write.
	nonCanonical := b64[:len(b64)-2] + string(b64[len(b64)-2]+1) + "="
	cases := []struct {
		m      providers.BodyMAC
		accept []string
		refuse []string
	}{
		{
			m:      providers.BodyMAC{Header: "X-Sig", Strict: true},
			accept: []string{vectorHex},
			refuse: []string{strings.ToUpper(vectorHex), " " + vectorHex, vectorHex + " ", "sha256=" + vectorHex, vectorHex[2:], vectorHex + "00"},
		},
		{
			m:      providers.BodyMAC{Header: "X-Sig"},
			accept: []string{vectorHex, strings.ToUpper(vectorHex), " " + vectorHex + "\t"},
			refuse: []string{"sha256=" + vectorHex, vectorHex[2:], vectorHex + "," + vectorHex},
		},
		{
			m:      providers.BodyMAC{Header: "X-Sig", Prefix: "sha256="},
			accept: []string{"sha256=" + vectorHex, " sha256=" + strings.ToUpper(vectorHex)},
			refuse: []string{vectorHex, "SHA256=" + vectorHex, "sha256= " + vectorHex, "sha1=" + vectorHex},
		},
		{
			m:      providers.BodyMAC{Header: "X-Sig", Encoding: providers.Base64},
			accept: []string{b64, " " + b64, nonCanonical},
			refuse: []string{vectorHex, strings.TrimRight(b64, "=")},
		},
		{
			m:      providers.BodyMAC{Header: "X-Sig", Encoding: providers.Base64, Strict: true},
			accept: []string{b64},
			refuse: []string{" " + b64, nonCanonical, strings.TrimRight(b64, "=")},
		},
		{
			m:      providers.BodyMAC{Header: "X-Sig", Prefix: "v1=", Several: true},
			accept: []string{"v1=" + vectorHex, "v1=00, v1=" + vectorHex, "v0=abc v1=zz\tv1=" + vectorHex + ",,"},
			refuse: []string{vectorHex, "v1=" + vectorHex[2:] + " v1=00"},
		},
	}
	for _, c := range cases {
		for _, v := range c.accept {
			require.NoError(t, c.m.Verify(request(vectorBody, "X-Sig", v), keys), "%+v %q", c.m, v)
		}
		for _, v := range c.refuse {
			require.ErrorIs(t, c.m.Verify(request(vectorBody, "X-Sig", v), keys), providers.ErrInvalidSignature, "%+v %q", c.m, v)
		}
	}
}

func TestBodyMACParse(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		m    providers.BodyMAC
		want string
	}{
		{providers.BodyMAC{Header: "X-Sig", Strict: true}, `invalid signature: X-Sig is not a hex HMAC-SHA256`},
		{providers.BodyMAC{Header: "X-Sig", Encoding: providers.Base64, Hash: crypto.SHA512}, `invalid signature: X-Sig is not a base64 HMAC-SHA512`},
		{providers.BodyMAC{Header: "X-Sig", Hash: crypto.SHA1, Prefix: "sha1="}, `invalid signature: X-Sig is not "sha1=" followed by a hex HMAC-SHA1`},
		{providers.BodyMAC{Header: "X-Sig", Several: true}, `invalid signature: no usable signature in X-Sig`},
	} {
		sigs, err := c.m.Parse("zz")
		require.Nil(t, sigs)
		require.ErrorIs(t, err, providers.ErrInvalidSignature)
		require.EqualError(t, err, c.want)
	}

	// Each hash is available and checked for its size.
	for _, h := range []crypto.Hash{crypto.SHA1, crypto.SHA256, crypto.SHA512} {
		m := providers.BodyMAC{Header: "X-Sig", Hash: h, Several: true}
		sig := m.Signature([]byte("k"), []byte(vectorBody))
		require.Len(t, sig, 2*h.Size())
		sigs, err := m.Parse("00 " + sig + " " + sig[2:])
		require.NoError(t, err)
		require.Len(t, sigs, 1)
		require.True(t, m.Match([][]byte{[]byte("x"), []byte("k")}, sigs, []byte(vectorBody)))
		require.False(t, m.Match([][]byte{[]byte("x")}, sigs, []byte(vectorBody)))
	}
}

func TestMatchHMAC(t *testing.T) {
	t.Parallel()
	sig := must(hex.DecodeString(vectorHex))
	keys := providers.SecretKeys([]string{"a", vectorKey})
	require.Equal(t, sig, providers.HMAC(crypto.SHA256, keys[1], []byte(vectorBody)))
	require.True(t, providers.MatchHMAC(crypto.SHA256, keys, [][]byte{{0}, sig}, []byte(vectorBody)))
	require.False(t, providers.MatchHMAC(crypto.SHA256, keys[:1], [][]byte{sig}, []byte(vectorBody)))
	require.False(t, providers.MatchHMAC(crypto.SHA256, keys, nil, []byte(vectorBody)))
	require.False(t, providers.MatchHMAC(crypto.SHA256, nil, [][]byte{sig}, []byte(vectorBody)))
	require.Empty(t, providers.SecretKeys(nil))
}

// FuzzBodyMACParse: no panics; every signature read has the hash's size, and
// Strict reads only the exact text Sign writes.
func FuzzBodyMACParse(f *testing.F) {
	f.Add("sha256=" + vectorHex)
	f.Add(vectorHex)
	f.Add(" " + strings.ToUpper(vectorHex))
	f.Add("v1=00, v1=" + vectorHex + "\tzz")
	f.Add("i7jm1dmiIqGhCBJIhxHn/jBP6s7Ht4WIA9m9yZ13dzw=")
	f.Add("i7jm1dmiIqGhCBJIhxHn_jBP6s7Ht4WIA9m9yZ13dzw")
	schemes := []providers.BodyMAC{
		{Header: "X", Strict: true},
		{Header: "X", Prefix: "sha256="},
		{Header: "X", Encoding: providers.Base64, Strict: true},
		{Header: "X", Encoding: providers.Base64, Hash: crypto.SHA512},
		{Header: "X", Encoding: providers.Base64URL, Strict: true},
		{Header: "X", Prefix: "v1=", Hash: crypto.SHA1, Several: true},
	}
	f.Fuzz(func(t *testing.T, value string) {
		for _, m := range schemes {
			sigs, err := m.Parse(value)
			if (err == nil) != (len(sigs) > 0) {
				t.Fatalf("%+v: %q gave %d signatures and error %v", m, value, len(sigs), err)
			}
			size := crypto.SHA256.Size()
			if m.Hash != 0 {
				size = m.Hash.Size()
			}
			for _, sig := range sigs {
				if len(sig) != size {
					t.Fatalf("%+v: signature of %d bytes read from %q", m, len(sig), value)
				}
			}
			if err == nil && m.Strict {
				enc := hex.EncodeToString(sigs[0])
				switch m.Encoding {
				case providers.Base64:
					enc = base64.StdEncoding.EncodeToString(sigs[0])
				case providers.Base64URL:
					enc = base64.RawURLEncoding.EncodeToString(sigs[0])
				}
				if m.Prefix+enc != value {
					t.Fatalf("%+v: read %q, which Sign would not write", m, value)
				}
			}
		}
	})
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
