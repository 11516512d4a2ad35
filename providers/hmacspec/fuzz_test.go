package hmacspec_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/hmacspec"
	"github.com/hookline/hookline/providers/providertest"
)

// FuzzParseHeader runs the engine's header parser over every entry: no
// panics, no more than MaxSignatures signatures, each of the MAC's size,
// and a nil error always with at least one.
func FuzzParseHeader(f *testing.F) {
	f.Add(uint8(0), "t=1764504000,v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd")
	f.Add(uint8(1), "1764504000000,5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd,zz")
	f.Add(uint8(2), "sha256=XSFmp8q/3ZNeW9c+JwLl2PoQJ2iQMnrshVZpz60Pz8w=")
	f.Add(uint8(3), "t=1,te=,li=00 t=2")
	f.Fuzz(func(t *testing.T, which uint8, value string) {
		s := hmacspec.Specs[int(which)%len(hmacspec.Specs)]
		_, sigs, err := s.ParseHeader(value)
		if err == nil && len(sigs) == 0 {
			t.Fatalf("%s: no error but no signature for %q", s.Name, value)
		}
		if len(sigs) > hmacspec.MaxSignatures {
			t.Fatalf("%s: %d signatures from %q", s.Name, len(sigs), value)
		}
		for _, sig := range sigs {
			if n := hashSize(s); len(sig) != n {
				t.Fatalf("%s: signature of %d bytes (want %d) from %q", s.Name, len(sig), n, value)
			}
		}
	})
}

func hashSize(s *hmacspec.Spec) int {
	if s.Hash == 0 {
		return 32
	}
	return s.Hash.Size()
}

// FuzzVerify runs whole deliveries with hostile headers through every
// entry: Verify never panics, and a delivery it accepts carries a
// signature made with the secret.
func FuzzVerify(f *testing.F) {
	f.Add(uint8(0), "t=1796040000,v1=00", "1796040000", []byte(`{"id":"evt_1"}`))
	f.Add(uint8(5), "", "", []byte(`{`))
	f.Add(uint8(9), "sha256=", "2026-11-30T12:00:00Z", []byte(``))
	f.Fuzz(func(t *testing.T, which uint8, sig, stamp string, body []byte) {
		s := hmacspec.Specs[int(which)%len(hmacspec.Specs)]
		p, err := hmacspec.New(s, providers.Config{Secrets: []string{"hookline:fuzz"}, Now: func() time.Time { return providertest.Now }})
		if err != nil {
			t.Fatal(err)
		}
		r := &providers.Request{Body: body, Header: http.Header{}}
		r.Header.Set(s.Header, sig)
		if s.TimestampHeader != "" {
			r.Header.Set(s.TimestampHeader, stamp)
		}
		if s.IDHeader != "" {
			r.Header.Set(s.IDHeader, stamp)
		}
		if p.Verify(r) == nil && s.Mode == hmacspec.MAC {
			t.Fatalf("%s: forged delivery verified: %q %q", s.Name, sig, stamp)
		}
		_, _ = p.Resolve(r)
	})
}

// FuzzSignVerify: for every entry, any body (and id, where the template
// signs one) signed by the engine verifies, under the first secret and
// with the second configured too, and a MAC entry refuses it once a byte
// of the body changes.
func FuzzSignVerify(f *testing.F) {
	f.Add(uint8(0), []byte(`{"id":"evt_1"}`), "msg_1")
	f.Add(uint8(7), []byte{}, "")
	f.Add(uint8(20), []byte("\xff\xfe{\x00"), "\xe2\x80\xa8")
	f.Fuzz(func(t *testing.T, which uint8, body []byte, id string) {
		s := hmacspec.Specs[int(which)%len(hmacspec.Specs)]
		secrets := []string{"hookline:fuzz-one", "hookline:fuzz-two"}
		now := providertest.Now
		p, err := hmacspec.New(s, providers.Config{Secrets: secrets, Now: func() time.Time { return now }})
		if err != nil {
			t.Fatal(err)
		}
		r := &providers.Request{Body: body, Header: http.Header{}}
		if s.IDHeader != "" {
			if id == "" || strings.TrimSpace(id) != id || strings.ContainsAny(id, "\r\n\x00") {
				return // not a header value a sender writes
			}
			r.Header.Set(s.IDHeader, id)
		}
		if err := p.(providers.Signer).Sign(r, now); err != nil {
			t.Fatal(err)
		}
		if err := p.Verify(r); err != nil {
			t.Fatalf("%s: the engine refuses its own signature: %v", s.Name, err)
		}
		if s.Mode != hmacspec.MAC || len(body) == 0 {
			return
		}
		bad := providertest.Clone(r)
		bad.Body[len(bad.Body)/2] ^= 0x01
		if p.Verify(bad) == nil {
			t.Fatalf("%s: a changed body verifies", s.Name)
		}
	})
}
