package hmacspec

import (
	"crypto/sha512"
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/hookline/hookline/providers"
)

// strictBase64 reads base64 as senders write it: standard, padded, the
// unused bits of the last character zero.
var strictBase64 = base64.StdEncoding.Strict()

// strictBase64URL reads URL-safe, unpadded base64 (Sanity), the unused
// bits of the last character zero.
var strictBase64URL = base64.RawURLEncoding.Strict()

// sigSet holds the decoded signatures of one delivery, at most
// MaxSignatures, in fixed storage: parsing a header into a pooled sigSet
// allocates nothing.
type sigSet struct {
	n    int
	over bool // an add was refused: more than MaxSignatures signatures
	sigs [MaxSignatures][sha512.Size]byte
	tmp  []byte // scratch for base64's []byte input
}

// get returns the i-th signature, size bytes long.
func (set *sigSet) get(i, size int) []byte { return set.sigs[i][:size] }

// add decodes field (prefix included) as s writes a MAC and keeps it;
// a field that does not decode is skipped. It reports false only when the
// set is already full.
func (set *sigSet) add(s *Spec, field string) bool {
	enc, ok := strings.CutPrefix(field, s.Prefix)
	if !ok {
		return true
	}
	if set.n == MaxSignatures {
		if s.decodeInto(nil, enc, &set.tmp) {
			set.over = true
			return false
		}
		return true
	}
	if s.decodeInto(set.sigs[set.n][:s.hash().Size()], enc, &set.tmp) {
		set.n++
	}
	return true
}

// decodeInto decodes enc, one encoded MAC without its prefix, into dst
// (len(dst) is the MAC's size; nil: only check that it decodes). Hex is
// read in lower case only, as senders write it, unless the provider writes
// upper case (AnyCase); base64 only in its canonical form (padded, or for
// Base64URL unpadded), without line breaks. tmp is scratch space.
func (s *Spec) decodeInto(dst []byte, enc string, tmp *[]byte) bool {
	size := s.hash().Size()
	var out [sha512.Size + 3]byte
	if dst == nil {
		dst = out[:size]
	}
	if s.Encoding == providers.Base64 || s.Encoding == providers.Base64URL {
		b64 := strictBase64
		if s.Encoding == providers.Base64URL {
			b64 = strictBase64URL
		}
		if len(enc) != b64.EncodedLen(size) || strings.ContainsAny(enc, "\r\n") {
			return false
		}
		*tmp = append((*tmp)[:0], enc...)
		n, err := b64.Decode(out[:], *tmp)
		if err != nil || n != size {
			return false
		}
		copy(dst, out[:size])
		return true
	}
	if len(enc) != 2*size {
		return false
	}
	for i := range size {
		hi, ok1 := unhex(enc[2*i], s.AnyCase)
		lo, ok2 := unhex(enc[2*i+1], s.AnyCase)
		if !ok1 || !ok2 {
			return false
		}
		dst[i] = hi<<4 | lo
	}
	return true
}

// unhex reads one hex digit: 0-9, a-f, and A-F when upper is set.
func unhex(c byte, upper bool) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case upper && 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// ParseHeader reads a signature header value as s's Layout writes it: the
// timestamp it carries (Pairs, Leading; "" otherwise) and the signatures,
// each decoded and of the MAC's size. Signatures without the prefix, of
// other keys, or that do not decode are skipped; a value without any, with
// two timestamps, or with more than MaxSignatures entries or signatures is
// an error wrapping providers.ErrInvalidSignature.
func (s *Spec) ParseHeader(value string) (ts string, sigs [][]byte, err error) {
	var set sigSet
	if ts, err = s.parseInto(value, &set); err != nil {
		return "", nil, err
	}
	size := s.hash().Size()
	for i := range set.n {
		sigs = append(sigs, append([]byte(nil), set.get(i, size)...))
	}
	return ts, sigs, nil
}

// parseInto is ParseHeader adding the signatures to set, which it leaves
// as it found it on error.
func (s *Spec) parseInto(value string, set *sigSet) (ts string, err error) {
	before := set.n
	switch s.Layout {
	case Single:
		set.add(s, strings.TrimSpace(value))
	case List:
		err = s.parseList(value, set)
	case Leading:
		first, rest, _ := strings.Cut(value, ",")
		ts = strings.TrimSpace(first)
		err = s.parseLeading(rest, set)
	case Pairs:
		ts, err = s.parsePairs(value, set)
	}
	switch {
	case err != nil:
	case set.over:
		err = fmt.Errorf("%w: more than %d signatures", providers.ErrInvalidSignature, MaxSignatures)
	case s.hasStamp() && !s.stampHeader() && ts == "":
		err = fmt.Errorf("%w: no timestamp in %s", providers.ErrInvalidSignature, s.Header)
	case set.n == before:
		err = fmt.Errorf("%w: no usable signature in %s", providers.ErrInvalidSignature, s.Header)
	}
	if err != nil {
		set.n = before
		return "", err
	}
	return ts, nil
}

func (s *Spec) tooMany() error {
	return fmt.Errorf("%w: more than %d signatures in %s", providers.ErrInvalidSignature, MaxSignatures, s.Header)
}

// parseList reads signatures separated by commas, spaces or tabs.
func (s *Spec) parseList(value string, set *sigSet) error {
	n := 0
	for f, rest := nextField(value); f != ""; f, rest = nextField(rest) {
		if n++; n > MaxSignatures {
			return s.tooMany()
		}
		set.add(s, f)
	}
	return nil
}

// parseLeading reads the comma-separated signatures after the timestamp.
func (s *Spec) parseLeading(rest string, set *sigSet) error {
	for n := 1; ; n++ {
		if n > MaxSignatures {
			return s.tooMany()
		}
		f, more, found := strings.Cut(rest, ",")
		set.add(s, strings.TrimSpace(f))
		if !found {
			return nil
		}
		rest = more
	}
}

// parsePairs reads key=value pairs: the timestamp under TimestampKey, the
// signatures under SignatureKeys.
func (s *Spec) parsePairs(value string, set *sigSet) (ts string, err error) {
	n, haveTS := 0, false
	for f, rest := nextField(value); f != ""; f, rest = nextField(rest) {
		if n++; n > MaxSignatures+1 {
			return "", fmt.Errorf("%w: more than %d entries in %s", providers.ErrInvalidSignature, MaxSignatures, s.Header)
		}
		k, val, ok := strings.Cut(f, "=")
		if !ok {
			continue
		}
		if s.TimestampKey != "" && k == s.TimestampKey {
			// Persona repeats "t=…,v1=…" per secret: the same
			// timestamp may come twice, two different ones never.
			if haveTS && val != ts {
				return "", fmt.Errorf("%w: two timestamps in %s", providers.ErrInvalidSignature, s.Header)
			}
			ts, haveTS = val, true
			continue
		}
		if containsString(s.SignatureKeys, k) {
			set.add(s, val)
		}
	}
	if s.TimestampKey != "" && !haveTS {
		return "", fmt.Errorf("%w: no %s= in %s", providers.ErrInvalidSignature, s.TimestampKey, s.Header)
	}
	return ts, nil
}
