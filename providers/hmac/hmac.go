// Package hmac is the generic HMAC scheme for senders without an adapter,
// configured per source:
//
//	provider: hmac
//	secrets: ["${ACME_SECRET}"]
//	hmac:
//	  header: X-Acme-Signature      # required: the signature header
//	  algorithm: sha256             # sha1 | sha256 (default) | sha512
//	  encoding: hex                 # hex (default, either case) | base64 (standard, padded)
//	  prefix: "sha256="             # optional, stripped from each signature
//	  timestamp_header: ""          # optional: unix seconds, checked against the tolerance (default 5m)
//	  template: ""                  # optional signed content, placeholders {timestamp} and {body};
//	                                # default "{body}", or "{timestamp}.{body}" with timestamp_header
//	event_id: "header:X-Acme-Delivery" # required: the scheme has no default event id
//
// The MAC is keyed with each secret as UTF-8 bytes and computed over the raw
// body (inside the template). The header may carry several signatures
// separated by commas or spaces; any match from any secret verifies.
// Signatures without the configured prefix are ignored. The timestamp is
// signed as the header text sent.
package hmac

import (
	"crypto/hmac"
	"crypto/sha1" //nolint:gosec // HMAC-SHA1 is still sound; some senders only offer it
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"hash"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hookline/hookline/providers"
)

// Name is the adapter's registered name.
const Name = "hmac"

// DefaultTolerance applies when a timestamp header is configured.
const DefaultTolerance = 5 * time.Minute

// Template placeholders.
const (
	PlaceholderTimestamp = "{timestamp}"
	PlaceholderBody      = "{body}"
)

func init() {
	providers.Register(Name, func(cfg providers.Config) (providers.Provider, error) { return New(cfg) })
}

// Settings is the `hmac:` block of a source. The zero values of Algorithm,
// Encoding and Template select their defaults.
type Settings struct {
	// Header is the signature header (required).
	Header string `yaml:"header"`
	// Algorithm is sha1, sha256 or sha512; "" means sha256.
	Algorithm string `yaml:"algorithm"`
	// Encoding is hex or base64; "" means hex.
	Encoding string `yaml:"encoding"`
	// Prefix is stripped from each signature ("sha256="); signatures without
	// it are ignored. It may not contain commas or spaces (the separators).
	Prefix string `yaml:"prefix"`
	// TimestampHeader, when set, holds the signing time in unix seconds; it
	// must be present and within the tolerance.
	TimestampHeader string `yaml:"timestamp_header"`
	// Template is the signed content with {timestamp} and {body}; "" means
	// "{body}", or "{timestamp}.{body}" when TimestampHeader is set.
	Template string `yaml:"template"`
}

// segment is a template part: a literal, or a placeholder.
type segment struct {
	literal     string
	body, stamp bool
}

// Verifier is the generic HMAC adapter.
type Verifier struct {
	secrets   [][]byte
	header    string
	tsHeader  string
	prefix    string
	newHash   func() hash.Hash
	size      int
	base64    bool
	template  []segment
	tolerance time.Duration
	now       func() time.Time
}

// New returns a generic HMAC adapter for cfg, validating its `hmac:` settings.
func New(cfg providers.Config) (*Verifier, error) {
	if len(cfg.Secrets) == 0 {
		return nil, fmt.Errorf("secrets: at least one secret is required")
	}
	var s Settings
	if err := cfg.Decode(&s); err != nil {
		return nil, fmt.Errorf("hmac: %w", err)
	}
	v := &Verifier{
		header:    http.CanonicalHeaderKey(strings.TrimSpace(s.Header)),
		tsHeader:  http.CanonicalHeaderKey(strings.TrimSpace(s.TimestampHeader)),
		prefix:    s.Prefix,
		tolerance: cfg.Tolerance,
		now:       cfg.NowFunc(),
	}
	if v.header == "" {
		return nil, fmt.Errorf("hmac.header: required")
	}
	if v.tsHeader != "" && v.tsHeader == v.header {
		return nil, fmt.Errorf("hmac.timestamp_header: must differ from hmac.header")
	}
	switch strings.ToLower(s.Algorithm) {
	case "sha256", "":
		v.newHash, v.size = sha256.New, sha256.Size
	case "sha1":
		v.newHash, v.size = sha1.New, sha1.Size
	case "sha512":
		v.newHash, v.size = sha512.New, sha512.Size
	default:
		return nil, fmt.Errorf("hmac.algorithm: %q is not one of sha1, sha256, sha512", s.Algorithm)
	}
	switch strings.ToLower(s.Encoding) {
	case "hex", "":
	case "base64":
		v.base64 = true
	default:
		return nil, fmt.Errorf("hmac.encoding: %q is not one of hex, base64", s.Encoding)
	}
	if strings.ContainsAny(v.prefix, ", \t") {
		return nil, fmt.Errorf("hmac.prefix: must not contain commas or spaces (they separate signatures)")
	}
	tmpl := s.Template
	if tmpl == "" {
		tmpl = PlaceholderBody
		if v.tsHeader != "" {
			tmpl = PlaceholderTimestamp + "." + PlaceholderBody
		}
	}
	v.template = parseTemplate(tmpl)
	var hasBody, hasStamp bool
	for _, seg := range v.template {
		hasBody = hasBody || seg.body
		hasStamp = hasStamp || seg.stamp
	}
	if !hasBody {
		return nil, fmt.Errorf("hmac.template: must contain %s (the signature must cover the body)", PlaceholderBody)
	}
	if hasStamp && v.tsHeader == "" {
		return nil, fmt.Errorf("hmac.template: %s needs hmac.timestamp_header", PlaceholderTimestamp)
	}
	if v.tsHeader != "" && v.tolerance == 0 {
		v.tolerance = DefaultTolerance
	}
	for _, secret := range cfg.Secrets {
		v.secrets = append(v.secrets, []byte(secret))
	}
	return v, nil
}

// parseTemplate splits tmpl into literals and placeholders.
func parseTemplate(tmpl string) []segment {
	var segs []segment
	for tmpl != "" {
		i := strings.IndexByte(tmpl, '{')
		if i < 0 {
			segs = append(segs, segment{literal: tmpl})
			break
		}
		rest := tmpl[i:]
		var seg segment
		var n int
		switch {
		case strings.HasPrefix(rest, PlaceholderBody):
			seg, n = segment{body: true}, len(PlaceholderBody)
		case strings.HasPrefix(rest, PlaceholderTimestamp):
			seg, n = segment{stamp: true}, len(PlaceholderTimestamp)
		default: // a literal brace
			segs = append(segs, segment{literal: tmpl[:i+1]})
			tmpl = tmpl[i+1:]
			continue
		}
		if i > 0 {
			segs = append(segs, segment{literal: tmpl[:i]})
		}
		segs = append(segs, seg)
		tmpl = tmpl[i+n:]
	}
	return segs
}

func (v *Verifier) mac(secret []byte, ts string, body []byte) []byte {
	m := hmac.New(v.newHash, secret)
	for _, seg := range v.template {
		switch {
		case seg.body:
			m.Write(body)
		case seg.stamp:
			m.Write([]byte(ts))
		default:
			m.Write([]byte(seg.literal))
		}
	}
	return m.Sum(nil)
}

// ParseSignatures returns the decoded signatures in a signature header value:
// comma- or space-separated entries, each the configured prefix followed by
// the encoded MAC. Entries without the prefix, that do not decode, or that
// are not the algorithm's size are skipped.
func (v *Verifier) ParseSignatures(value string) [][]byte {
	var sigs [][]byte
	fields := strings.FieldsFunc(value, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' })
	for _, f := range fields {
		enc, ok := strings.CutPrefix(f, v.prefix)
		if !ok {
			continue
		}
		var sig []byte
		var err error
		if v.base64 {
			sig, err = base64.StdEncoding.DecodeString(enc)
		} else {
			sig, err = hex.DecodeString(enc)
		}
		if err != nil || len(sig) != v.size {
			continue
		}
		sigs = append(sigs, sig)
	}
	return sigs
}

// Verify implements providers.Verifier.
func (v *Verifier) Verify(r *providers.Request) error {
	value := r.Header.Get(v.header)
	if value == "" {
		return fmt.Errorf("%w: %s header is required", providers.ErrNoSignature, v.header)
	}
	var ts string
	if v.tsHeader != "" {
		ts = r.Header.Get(v.tsHeader)
		if ts == "" {
			return fmt.Errorf("%w: %s header is required", providers.ErrNoSignature, v.tsHeader)
		}
		n, err := strconv.ParseInt(ts, 10, 64)
		if err != nil {
			return fmt.Errorf("%w: bad %s (want unix seconds)", providers.ErrInvalidSignature, v.tsHeader)
		}
		if err := providers.CheckTimestamp(time.Unix(n, 0), v.now(), v.tolerance); err != nil {
			return fmt.Errorf("%w (tolerance %s)", err, v.tolerance)
		}
	}
	sigs := v.ParseSignatures(value)
	if len(sigs) == 0 {
		return fmt.Errorf("%w: no usable signature in %s", providers.ErrInvalidSignature, v.header)
	}
	for _, secret := range v.secrets {
		want := v.mac(secret, ts, r.Body)
		for _, sig := range sigs {
			if hmac.Equal(want, sig) {
				return nil
			}
		}
	}
	return fmt.Errorf("%w: %s does not match", providers.ErrInvalidSignature, v.header)
}

// Resolve implements providers.Resolver. The generic scheme has no default
// event id: it always fails with an error wrapping providers.ErrNoEventID, and
// the source's configured event_id resolver takes its place.
func (v *Verifier) Resolve(*providers.Request) (providers.Event, error) {
	return providers.Event{}, fmt.Errorf("%w: provider hmac needs an event_id resolver (event_id: header:NAME or json:path)", providers.ErrNoEventID)
}

// Sign implements providers.Signer with the first secret; with a timestamp
// header it is set to now.
func (v *Verifier) Sign(r *providers.Request, now time.Time) error {
	var ts string
	if v.tsHeader != "" {
		ts = strconv.FormatInt(now.Unix(), 10)
		r.Header.Set(v.tsHeader, ts)
	}
	sig := v.mac(v.secrets[0], ts, r.Body)
	enc := hex.EncodeToString(sig)
	if v.base64 {
		enc = base64.StdEncoding.EncodeToString(sig)
	}
	r.Header.Set(v.header, v.prefix+enc)
	return nil
}

// Describe implements providers.Describer. DefaultEventID is empty: sources
// must configure event_id.
func (v *Verifier) Describe() providers.Description {
	d := providers.Description{Headers: []string{v.header}}
	if v.tsHeader != "" {
		d.Headers = append(d.Headers, v.tsHeader)
		d.DefaultTolerance = DefaultTolerance
	}
	return d
}
