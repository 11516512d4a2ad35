package hmacspec

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"hash"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hookline/hookline/providers"
	"golang.org/x/text/unicode/norm"
)

// MaxSignatures caps the signatures of a delivery, over all its signature
// headers. A sender writes one per active secret; a delivery with more is
// refused as a whole (ErrInvalidSignature) before any MAC is computed.
const MaxSignatures = 16

// Settings is the optional provider block of a source (`<name>: {url: …}`),
// accepted only by specs whose template signs {url}.
type Settings struct {
	// URL is the URL the provider calls, exactly as configured there, for
	// a source behind a proxy; empty: the URL the request was received on.
	URL string `yaml:"url"`
}

// Verifier runs one Spec for one source.
//
// Invariants: keys is not empty; segs has at most maxSegments segments and,
// for MAC specs, signs the body.
type Verifier struct {
	spec      *Spec
	keys      [][]byte
	tokens    [][sha256.Size]byte // Token, Basic: the SHA-256 of each secret
	segs      []segment
	tolerance time.Duration
	now       func() time.Time
	url       string
	res       *resolver
	idSigned  bool
	// The headers the spec names, canonical, read without canonicalising
	// them again on every request.
	header, stampHeader, idHeader string
	extraHeaders                  []string
	// scratch pools *scratch values: one keyed HMAC per secret and room
	// for the signatures, so that Verify allocates nothing.
	scratch sync.Pool
}

// scratch is the per-call state of Verify, reused through Verifier.scratch.
type scratch struct {
	macs []hash.Hash // keyed with each secret, in order
	sum  [sha512.Size]byte
	set  sigSet
	tmp  []byte // the text of the timestamp, id or URL, as bytes
}

// getScratch returns a scratch whose set is empty.
func (v *Verifier) getScratch() *scratch {
	sc := v.scratch.Get().(*scratch)
	sc.set.n, sc.set.over = 0, false
	return sc
}

// putScratch returns sc to the pool, without a text buffer grown past
// maxScratchText by a long header or URL.
func (v *Verifier) putScratch(sc *scratch) {
	if cap(sc.tmp) > maxScratchText {
		sc.tmp = nil
	}
	v.scratch.Put(sc)
}

// maxScratchText bounds the text buffer a pooled scratch keeps.
const maxScratchText = 4 << 10

func (v *Verifier) newScratch() any {
	sc := &scratch{macs: make([]hash.Hash, len(v.keys))}
	newHash := v.spec.hash().New
	for i, key := range v.keys {
		sc.macs[i] = hmac.New(newHash, key)
	}
	return sc
}

// headerValue is http.Header.Get for a canonical name.
func headerValue(h http.Header, canonical string) string {
	if vs := h[canonical]; len(vs) > 0 {
		return vs[0]
	}
	return ""
}

// keyed is a Verifier whose default id is not signed: it names what is
// (providers.ContentKeyer).
type keyed struct{ *Verifier }

// ContentKey implements providers.ContentKeyer: the digest of the signed
// content (the template's parts: the body, and the timestamp, id, method
// or URL the template signs).
func (k keyed) ContentKey(r *providers.Request) []byte {
	var buf [maxSegments][]byte
	return providers.ContentDigest(k.spec.Name, k.message(buf[:0], r, k.stampOf(r), headerValue(r.Header, k.idHeader))...)
}

// stampOf returns the timestamp text of a verified request ("" when none).
func (v *Verifier) stampOf(r *providers.Request) string {
	if !v.spec.hasStamp() {
		return ""
	}
	if v.spec.stampHeader() {
		return headerValue(r.Header, v.stampHeader)
	}
	sc := v.getScratch()
	defer v.putScratch(sc)
	ts, _ := v.spec.parseInto(headerValue(r.Header, v.header), &sc.set)
	return ts
}

// New returns the adapter s describes for cfg: NewVerifier's, which is also
// a providers.ContentKeyer when its default id is not signed.
func New(s *Spec, cfg providers.Config) (providers.Provider, error) {
	v, err := NewVerifier(s, cfg)
	if err != nil {
		return nil, err
	}
	if !v.idSigned && s.Mode == MAC {
		return keyed{v}, nil
	}
	return v, nil
}

// NewVerifier returns the Verifier of s for cfg, for adapters that add to
// an engine scheme (handshakes). The provider block accepts `url` when the
// template signs {url}, and nothing otherwise; an adapter with settings of
// its own decodes them and passes a cfg without Settings.
func NewVerifier(s *Spec, cfg providers.Config) (*Verifier, error) {
	if len(cfg.Secrets) == 0 {
		return nil, fmt.Errorf("secrets: at least one secret is required")
	}
	v := &Verifier{spec: s, keys: providers.SecretKeys(cfg.Secrets), tolerance: cfg.Tolerance, now: cfg.NowFunc(),
		header: http.CanonicalHeaderKey(s.Header), stampHeader: http.CanonicalHeaderKey(s.TimestampHeader),
		idHeader: http.CanonicalHeaderKey(s.IDHeader)}
	if s.NFKDSecret {
		for i, k := range v.keys {
			v.keys[i] = norm.NFKD.Bytes(k)
		}
	}
	for _, h := range s.ExtraHeaders {
		v.extraHeaders = append(v.extraHeaders, http.CanonicalHeaderKey(h))
	}
	v.scratch.New = v.newScratch
	v.segs = parseTemplate(s.template())
	signsURL := false
	for _, g := range v.segs {
		signsURL = signsURL || g.kind == segURL
	}
	if signsURL {
		var st Settings
		if err := cfg.Decode(&st); err != nil {
			return nil, fmt.Errorf("%s: %w", s.Name, err)
		}
		v.url = strings.TrimSpace(st.URL)
	} else if err := cfg.Decode(&struct{}{}); err != nil {
		return nil, fmt.Errorf("%s: %w", s.Name, err)
	}
	if s.Mode == Basic {
		for i, sec := range cfg.Secrets {
			if !strings.Contains(sec, ":") {
				return nil, fmt.Errorf("secrets[%d]: want user:password (HTTP Basic credentials)", i)
			}
		}
	}
	for _, sec := range cfg.Secrets {
		v.tokens = append(v.tokens, sha256.Sum256([]byte(sec)))
	}
	if v.tolerance == 0 {
		v.tolerance = s.Tolerance
	}
	res, err := newResolver(s)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.Name, err)
	}
	v.res = res
	v.idSigned = signedID(s, res.id)
	return v, nil
}

// isSep reports whether c separates the entries of a List or Pairs
// header: a comma, a space or a tab.
func isSep(c byte) bool { return c == ',' || c == ' ' || c == '\t' }

// nextField returns the first entry of value (its first run of bytes that
// are not separators; "" when it has none) and what follows the entry.
// Looping over it yields the fields strings.FieldsFunc yields with the
// same separators, without decoding runes: the separators are ASCII, and
// no byte of a multi-byte (or invalid) UTF-8 sequence is.
func nextField(value string) (field, rest string) {
	i := 0
	for i < len(value) && isSep(value[i]) {
		i++
	}
	j := i
	for j < len(value) && !isSep(value[j]) {
		j++
	}
	return value[i:j], value[j:]
}

// encode writes a MAC with the prefix.
func (s *Spec) encode(mac []byte) string {
	switch s.Encoding {
	case providers.Base64:
		return s.Prefix + base64.StdEncoding.EncodeToString(mac)
	case providers.Base64URL:
		return s.Prefix + base64.RawURLEncoding.EncodeToString(mac)
	}
	return s.Prefix + hex.EncodeToString(mac)
}

// parseStamp reads a timestamp written in s's Unit.
func (s *Spec) parseStamp(ts string) (time.Time, error) {
	switch s.Unit {
	case Seconds, Millis:
		n, err := strconv.ParseInt(ts, 10, 64)
		if err != nil {
			break
		}
		if s.Unit == Millis {
			return time.UnixMilli(n), nil
		}
		return time.Unix(n, 0), nil
	case RFC3339:
		t, err := time.Parse(time.RFC3339Nano, ts)
		if err == nil {
			return t, nil
		}
	case Zoneless:
		t, err := time.Parse(zonelessLayout, ts)
		if err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%w: bad timestamp", providers.ErrInvalidSignature)
}

// zonelessLayout is an RFC 3339 date and time without its zone (fractional
// seconds allowed), which time.Parse reads as UTC.
const zonelessLayout = "2006-01-02T15:04:05.999999999"

// formatStamp writes now in s's Unit, as Sign sends it.
func (s *Spec) formatStamp(now time.Time) string {
	switch s.Unit {
	case Millis:
		return strconv.FormatInt(now.UnixMilli(), 10)
	case RFC3339:
		return now.UTC().Format(time.RFC3339)
	case Zoneless:
		return now.UTC().Format(zonelessLayout)
	case Opaque:
		return strconv.FormatInt(now.UnixNano(), 36)
	}
	return strconv.FormatInt(now.Unix(), 10)
}
