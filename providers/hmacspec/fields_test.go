package hmacspec

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/hookline/hookline/providers"
)

// fieldsOf collects what looping over nextField yields.
func fieldsOf(value string) []string {
	var out []string
	for f, rest := nextField(value); f != ""; f, rest = nextField(rest) {
		out = append(out, f)
	}
	return out
}

// FuzzNextField: the byte-wise splitter of the Pairs layout yields exactly
// the fields strings.FieldsFunc yields with the same separators, for any
// input, valid UTF-8 or not.
func FuzzNextField(f *testing.F) {
	for _, seed := range []string{
		"", ",", " \t,", "t=1764504000,v1=abc", " t=1 , v1=a\tv1=b,,", "t=1,v1=ä,v0=\xff\xfe",
		"v1=\xe2\x80\xa8x", "\x80,\xc0 \xf4\x90\x80\x80", "日本=語,t=2",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, value string) {
		want := strings.FieldsFunc(value, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' })
		if got := fieldsOf(value); !slices.Equal(got, want) {
			t.Fatalf("%q: nextField yields %q, strings.FieldsFunc %q", value, got, want)
		}
	})
}

// decodeReference is how a signature was decoded before decodeInto: with
// encoding/hex and encoding/base64, allocating.
func decodeReference(s *Spec, enc string) []byte {
	var sig []byte
	var err error
	switch s.Encoding {
	case providers.Base64:
		if strings.ContainsAny(enc, "\r\n") {
			return nil
		}
		sig, err = base64.StdEncoding.Strict().DecodeString(enc)
	case providers.Base64URL:
		if strings.ContainsAny(enc, "\r\n") {
			return nil
		}
		sig, err = base64.RawURLEncoding.Strict().DecodeString(enc)
	default:
		if !s.AnyCase && strings.ContainsAny(enc, "ABCDEF") {
			return nil
		}
		sig, err = hex.DecodeString(enc)
	}
	if err != nil || len(sig) != s.hash().Size() {
		return nil
	}
	return sig
}

// FuzzDecodeInto: the allocation-free decoder accepts exactly what
// encoding/hex and encoding/base64 (strict) accept at the MAC's size, and
// decodes it to the same bytes, for every hash, encoding and case rule of
// the table.
func FuzzDecodeInto(f *testing.F) {
	for _, seed := range []string{
		"", "00", strings.Repeat("ab", 32), strings.Repeat("AB", 32), strings.Repeat("ab", 20), strings.Repeat("ab", 64),
		"XSFmp8q/3ZNeW9c+JwLl2PoQJ2iQMnrshVZpz60Pz8w=", "XSFmp8q/3ZNeW9c+JwLl2PoQJ2iQMnrshVZpz60Pz8x=",
		"XSFmp8q/3ZNeW9c+JwLl2PoQJ2iQ\nMnrshVZpz60Pz8w=", strings.Repeat("\xff", 44),
		"XSFmp8q_3ZNeW9c-JwLl2PoQJ2iQMnrshVZpz60Pz8w", "XSFmp8q_3ZNeW9c-JwLl2PoQJ2iQMnrshVZpz60Pz8x",
	} {
		f.Add(uint8(0), seed)
		for i, s := range Specs {
			if s.Encoding != providers.Hex && i < 256 {
				f.Add(uint8(i), seed) // the base64 readers too
			}
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, enc string) {
		s := Specs[int(which)%len(Specs)]
		want := decodeReference(s, enc)
		var tmp []byte
		got := make([]byte, s.hash().Size())
		ok := s.decodeInto(got, enc, &tmp)
		if ok != (want != nil) || ok && !slices.Equal(got, want) {
			t.Fatalf("%s: %q: decodeInto %v %x, reference %x", s.Name, enc, ok, got, want)
		}
		if s.decodeInto(nil, enc, &tmp) != ok {
			t.Fatalf("%s: %q: decodeInto(nil) disagrees", s.Name, enc)
		}
	})
}

// TestSignatureCap: a header of a Pairs scheme without a timestamp key may
// carry MaxSignatures signatures, not one more (17 entries are allowed
// when one of them is a timestamp).
func TestSignatureCap(t *testing.T) {
	revolut, _ := Lookup("revolut") // Pairs without a timestamp key
	sig := "v1=" + strings.Repeat("ab", 32)
	_, sigs, err := revolut.ParseHeader(strings.Repeat(sig+",", MaxSignatures))
	if err != nil || len(sigs) != MaxSignatures {
		t.Fatalf("%d signatures: %v, %d", MaxSignatures, err, len(sigs))
	}
	if _, _, err := revolut.ParseHeader(strings.Repeat(sig+",", MaxSignatures+1)); !errors.Is(err, providers.ErrInvalidSignature) {
		t.Fatalf("%d signatures: %v", MaxSignatures+1, err)
	}
}

// TestBase64URL: a Base64URL entry (Sanity) reads and writes URL-safe
// base64 without padding, and does not read the standard alphabet or the
// padded form of the same MAC.
func TestBase64URL(t *testing.T) {
	s, _ := Lookup("sanity")
	if s.Encoding != providers.Base64URL {
		t.Fatal("sanity: want Base64URL")
	}
	mac := bytes.Repeat([]byte{0xfb, 0xff, 0xbf}, 11)[:sha256.Size] // '-' and '_' in base64url
	enc := base64.RawURLEncoding.EncodeToString(mac)
	var tmp []byte
	got := make([]byte, sha256.Size)
	if !s.decodeInto(got, enc, &tmp) || !bytes.Equal(got, mac) {
		t.Fatalf("%q: not read as %x", enc, mac)
	}
	if s.encode(mac) != s.Prefix+enc {
		t.Fatalf("encode: %q, want %q", s.encode(mac), s.Prefix+enc)
	}
	for _, other := range []string{base64.URLEncoding.EncodeToString(mac), base64.RawStdEncoding.EncodeToString(mac), base64.StdEncoding.EncodeToString(mac)} {
		if s.decodeInto(got, other, &tmp) {
			t.Fatalf("%q is read", other)
		}
	}
}
