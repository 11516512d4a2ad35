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
//	                                # (with timestamp_header, a template must contain {timestamp})
//	event_id: "header:X-Acme-Delivery" # required: the scheme has no default event id
//
// The MAC is keyed with each secret as UTF-8 bytes and computed over the raw
// body (inside the template). With timestamp_header, the template must sign
// the timestamp: a tolerance on an unsigned timestamp would let a captured
// delivery be replayed at any time with a fresh one. The header may carry
// several signatures separated by commas or spaces; any match from any secret
// verifies. Signatures without the configured prefix are ignored. The
// timestamp is signed as the header text sent.
package hmac

import (
	"crypto"
	"fmt"
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
	// scheme is the header, algorithm, encoding and prefix of the settings;
	// the header may carry several signatures.
	scheme    providers.BodyMAC
	keys      [][]byte
	tsHeader  string
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
		keys:      providers.SecretKeys(cfg.Secrets),
		scheme:    providers.BodyMAC{Header: http.CanonicalHeaderKey(strings.TrimSpace(s.Header)), Prefix: s.Prefix, Several: true},
		tsHeader:  http.CanonicalHeaderKey(strings.TrimSpace(s.TimestampHeader)),
		tolerance: cfg.Tolerance,
		now:       cfg.NowFunc(),
	}
	if v.scheme.Header == "" {
		return nil, fmt.Errorf("hmac.header: required")
	}
	for _, h := range []struct{ path, name string }{{"hmac.header", v.scheme.Header}, {"hmac.timestamp_header", v.tsHeader}} {
		if h.name == "" {
			continue
		}
		if err := providers.CheckHeaderName(h.name); err != nil {
			return nil, fmt.Errorf("%s: %w", h.path, err)
		}
	}
	if v.tsHeader != "" && v.tsHeader == v.scheme.Header {
		return nil, fmt.Errorf("hmac.timestamp_header: must differ from hmac.header")
	}
	switch strings.ToLower(s.Algorithm) {
	case "sha256", "":
		v.scheme.Hash = crypto.SHA256
	case "sha1":
		v.scheme.Hash = crypto.SHA1
	case "sha512":
		v.scheme.Hash = crypto.SHA512
	default:
		return nil, fmt.Errorf("hmac.algorithm: %q is not one of sha1, sha256, sha512", s.Algorithm)
	}
	switch strings.ToLower(s.Encoding) {
	case "hex", "":
	case "base64":
		v.scheme.Encoding = providers.Base64
	default:
		return nil, fmt.Errorf("hmac.encoding: %q is not one of hex, base64", s.Encoding)
	}
	if strings.ContainsAny(v.scheme.Prefix, ", \t") {
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
	if !hasStamp && v.tsHeader != "" {
		return nil, fmt.Errorf("hmac.template: must include %s when hmac.timestamp_header is set (an unsigned timestamp protects nothing)", PlaceholderTimestamp)
	}
	if v.tsHeader != "" && v.tolerance == 0 {
		v.tolerance = DefaultTolerance
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

// message returns the signed content for ts and body: the template's parts.
func (v *Verifier) message(ts string, body []byte) [][]byte {
	parts := make([][]byte, len(v.template))
	for i, seg := range v.template {
		switch {
		case seg.body:
			parts[i] = body
		case seg.stamp:
			parts[i] = []byte(ts)
		default:
			parts[i] = []byte(seg.literal)
		}
	}
	return parts
}

// ParseSignatures returns the decoded signatures in a signature header value:
// comma- or space-separated entries, each the configured prefix followed by
// the encoded MAC. Entries without the prefix, that do not decode, or that
// are not the algorithm's size are skipped.
func (v *Verifier) ParseSignatures(value string) [][]byte {
	sigs, _ := v.scheme.Parse(value)
	return sigs
}

// Verify implements providers.Verifier.
func (v *Verifier) Verify(r *providers.Request) error {
	value := r.Header.Get(v.scheme.Header)
	if value == "" {
		return fmt.Errorf("%w: %s header is required", providers.ErrNoSignature, v.scheme.Header)
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
	sigs, err := v.scheme.Parse(value)
	if err != nil {
		return err
	}
	if !v.scheme.Match(v.keys, sigs, v.message(ts, r.Body)...) {
		return fmt.Errorf("%w: %s does not match", providers.ErrInvalidSignature, v.scheme.Header)
	}
	return nil
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
	r.Header.Set(v.scheme.Header, v.scheme.Signature(v.keys[0], v.message(ts, r.Body)...))
	return nil
}

// Describe implements providers.Describer. DefaultEventID is empty: sources
// must configure event_id, so whether it is signed is unknown here (IDSigned
// false).
func (v *Verifier) Describe() providers.Description {
	d := providers.Description{Headers: []string{v.scheme.Header}, IDSigned: false}
	if v.tsHeader != "" {
		d.Headers = append(d.Headers, v.tsHeader)
		d.DefaultTolerance = DefaultTolerance
	}
	return d
}
