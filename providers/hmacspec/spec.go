package hmacspec

import (
	"crypto"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/hookline/hookline/providers"
)

// Mode is how a delivery proves where it comes from.
type Mode uint8

const (
	// MAC: an HMAC of the signed content (Template) under a shared secret.
	MAC Mode = iota
	// Token: the header carries the shared secret itself (GitLab's
	// X-Gitlab-Token, Telegram's secret token), compared in constant time.
	// It covers nothing of the body: the header is a credential, never
	// stored (providers.SecretHeaderer), and there is no content key.
	Token
	// Basic: HTTP Basic authentication with the secret as "user:password"
	// (Chargebee, Postmark); a Token in the Authorization header.
	Basic
)

// Layout is how the signature header is written.
type Layout uint8

const (
	// Single: the header is one signature, Prefix followed by the encoded MAC.
	Single Layout = iota
	// List: one or more signatures, each Prefix followed by the encoded MAC,
	// separated by commas or spaces (rotation).
	List
	// Pairs: key=value pairs separated by commas or spaces, as
	// in "t=1700000000,v1=<mac>,v1=<mac>": TimestampKey carries the
	// timestamp, every key of SignatureKeys a signature. Unknown keys are
	// ignored.
	Pairs
	// Leading: "<timestamp>,<mac>[,<mac>…]": the first comma-separated field
	// is the timestamp, the others signatures (Recurly).
	Leading
)

// Unit is how a timestamp is written.
type Unit uint8

const (
	// Seconds: unix seconds.
	Seconds Unit = iota
	// Millis: unix milliseconds.
	Millis
	// RFC3339: an RFC 3339 date and time (fractional seconds allowed).
	RFC3339
	// Opaque: a value that is signed but is no time (NMI's nonce); no
	// tolerance applies.
	Opaque
	// Zoneless: an RFC 3339 date and time without its zone, in UTC
	// (fractional seconds allowed), as Orb writes X-Orb-Timestamp.
	Zoneless
)

// Template placeholders. The signed content is the template with each
// placeholder replaced, byte for byte, by what it names.
const (
	// PBody is the raw request body.
	PBody = "{body}"
	// PTimestamp is the timestamp as sent (header text, or the pair's value).
	PTimestamp = "{timestamp}"
	// PID is the value of IDHeader as sent.
	PID = "{id}"
	// PMethod is the request method: always POST (ingest verifies POSTs only).
	PMethod = "{method}"
	// PURL is the URL the sender called: the source's <name>.url setting,
	// else the URL the request was received on.
	PURL = "{url}"
)

// Spec describes one provider of the HMAC family as data. The engine (New)
// runs every Spec the same way; Specs lists those hookline registers.
type Spec struct {
	// Name is the registered provider name (lowercase, no spaces).
	Name string
	// Title is the provider's name as written in prose ("Paystack").
	Title string
	// Mode is MAC (default), Token or Basic.
	Mode Mode
	// Header is the header carrying the signature (or token).
	Header string
	// ExtraHeaders also carry signatures, read with Header (DocuSign's
	// X-DocuSign-Signature-2…); described as fallback headers.
	ExtraHeaders []string
	// Hash is the HMAC's hash: crypto.SHA1, SHA256 (zero means SHA256) or SHA512.
	Hash crypto.Hash
	// Encoding is how a MAC is written: providers.Hex (lower case; see
	// AnyCase), providers.Base64 (standard, padded) or providers.Base64URL
	// (URL-safe, unpadded).
	Encoding providers.Encoding
	// AnyCase: hex is read in either case (Authorize.net writes upper
	// case); otherwise only as written by the sender, in lower case.
	AnyCase bool
	// NFKDSecret: the secret is Unicode NFKD-normalised before it keys the
	// MAC (EasyPost's client libraries do); ASCII secrets are unchanged.
	NFKDSecret bool
	// Prefix precedes each encoded MAC ("sha256=", "v0="); for Pairs it
	// precedes the value after the key's "=". A signature without it is
	// not read.
	Prefix string
	// Layout is how Header is written.
	Layout Layout
	// TimestampKey (Pairs) names the pair that carries the timestamp.
	TimestampKey string
	// SignatureKeys (Pairs) name the pairs that carry signatures ("v1";
	// PayMongo's "te" and "li"). Sign writes the first.
	SignatureKeys []string
	// Template is the signed content, over the placeholders above; empty
	// means "{body}". MAC specs must sign the body.
	Template string
	// TimestampHeader is the header carrying the timestamp, when it is not
	// inside Header (Pairs, Leading).
	TimestampHeader string
	// Unit is how the timestamp is written.
	Unit Unit
	// Tolerance is the default maximum age of the timestamp, both ways.
	// Zero where the provider documents none or may retry with the
	// original timestamp: the timestamp is signed but its age is checked
	// only when the source sets a tolerance.
	Tolerance time.Duration
	// IDHeader is the header whose value {id} stands for.
	IDHeader string
	// EventID is the default event id in key-resolver notation
	// (providers.Description.DefaultEventID): a resolver ("json:id"), or
	// parts in braces joined by literal text ("{json:event}:{json:data.id}"),
	// alternatives separated by ", else ". Whether it is signed is derived:
	// json:, form: and body: parts are (the body is signed), a header: part
	// only when it is IDHeader and the template signs {id}.
	EventID string
	// EventType is the default event type, one resolver; empty: none.
	EventType string
	// EventTime is the event time, one resolver; empty: none.
	EventTime string
	// TimeUnit is how EventTime is written.
	TimeUnit Unit
	// Example is a realistic delivery, for tests, `hookline send` and the docs.
	Example Example
	// Docs is where the scheme is documented (the provider's page).
	Docs string
	// Retries is the provider's retry horizon as documented, for the docs
	// ("3 days"); "⚠" marks what could not be confirmed.
	Retries string
	// Unconfirmed says what of the scheme could not be checked against the
	// provider's documentation or SDK; empty when all of it was.
	Unconfirmed string
}

// Example is a realistic delivery of a Spec's provider, unsigned. In Body
// and header values, ${id} stands for the event id (the part of it the
// sender controls) and ${type} for the event type, escaped for the body's
// format (JSON string contents, or form values).
type Example struct {
	// Body is the request body.
	Body string
	// Form: the body is application/x-www-form-urlencoded, else JSON.
	Form bool
	// Headers are name, value pairs.
	Headers []string
	// Type is the default event type (${type}).
	Type string
	// ID is what the event id resolves to, over ${id} and ${type}; empty
	// means "${id}". A delivery whose ${id} is empty must not resolve.
	ID string
}

func (s *Spec) hash() crypto.Hash {
	if s.Hash == 0 {
		return crypto.SHA256
	}
	return s.Hash
}

func (s *Spec) template() string {
	if s.Template == "" {
		return PBody
	}
	return s.Template
}

// stampHeader reports whether the timestamp is read from its own header.
func (s *Spec) stampHeader() bool { return s.TimestampHeader != "" }

// hasStamp reports whether the scheme carries a timestamp.
func (s *Spec) hasStamp() bool {
	return s.stampHeader() || s.Layout == Leading || (s.Layout == Pairs && s.TimestampKey != "")
}

// timed reports whether the timestamp is a time checked against a tolerance.
func (s *Spec) timed() bool { return s.hasStamp() && s.Unit != Opaque }

// Validate checks that s is a complete, consistent description. Every Spec
// hookline registers passes it (a test runs it over Specs).
func (s *Spec) Validate() error {
	if s.Name == "" || strings.ToLower(s.Name) != s.Name || strings.ContainsAny(s.Name, " \t:") {
		return fmt.Errorf("name %q: want a lowercase name without spaces", s.Name)
	}
	if s.Header == "" || s.Header != http.CanonicalHeaderKey(s.Header) {
		return fmt.Errorf("%s: header %q must be set and canonical", s.Name, s.Header)
	}
	if s.EventID == "" {
		return fmt.Errorf("%s: EventID is required", s.Name)
	}
	if _, err := parseID(s.EventID); err != nil {
		return fmt.Errorf("%s: EventID: %w", s.Name, err)
	}
	for _, r := range []string{s.EventType, s.EventTime} {
		if _, err := parseField(r); r != "" && err != nil {
			return fmt.Errorf("%s: %w", s.Name, err)
		}
	}
	if s.Mode != MAC {
		if s.Template != "" || s.hasStamp() || s.Layout != Single || s.Prefix != "" {
			return fmt.Errorf("%s: a token scheme signs nothing: no template, timestamp, layout or prefix", s.Name)
		}
		return nil
	}
	return s.validateMAC()
}

func (s *Spec) validateMAC() error {
	switch s.hash() {
	case crypto.SHA1, crypto.SHA256, crypto.SHA512:
	default:
		return fmt.Errorf("%s: hash must be SHA-1, SHA-256 or SHA-512", s.Name)
	}
	segs := parseTemplate(s.template())
	if len(segs) > maxSegments {
		return fmt.Errorf("%s: the template has more than %d parts", s.Name, maxSegments)
	}
	var body, stamp, id bool
	for _, g := range segs {
		body = body || g.kind == segBody
		stamp = stamp || g.kind == segStamp
		id = id || g.kind == segID
	}
	switch {
	case !body:
		return fmt.Errorf("%s: the template must sign %s", s.Name, PBody)
	case stamp != s.hasStamp():
		return fmt.Errorf("%s: the template signs %s if and only if the scheme carries a timestamp", s.Name, PTimestamp)
	case id != (s.IDHeader != ""):
		return fmt.Errorf("%s: the template signs %s if and only if IDHeader is set", s.Name, PID)
	case s.Tolerance > 0 && !s.timed():
		return fmt.Errorf("%s: a Tolerance needs a signed time", s.Name)
	case s.Layout == Pairs && len(s.SignatureKeys) == 0:
		return fmt.Errorf("%s: Pairs needs SignatureKeys", s.Name)
	case s.Layout != Pairs && (s.TimestampKey != "" || len(s.SignatureKeys) > 0):
		return fmt.Errorf("%s: TimestampKey and SignatureKeys are for Pairs", s.Name)
	case s.stampHeader() && (s.Layout == Leading || s.TimestampKey != ""):
		return fmt.Errorf("%s: the timestamp is in one place: TimestampHeader, or inside the signature header", s.Name)
	case s.AnyCase && s.Encoding != providers.Hex:
		return fmt.Errorf("%s: AnyCase is for hex", s.Name)
	case strings.ContainsAny(s.Prefix, ", \t"):
		return fmt.Errorf("%s: the prefix may not contain separators", s.Name)
	}
	return nil
}
