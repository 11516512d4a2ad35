// Package standardwebhooks verifies Standard Webhooks 1.0 deliveries, the
// scheme Svix sends (registered as "standardwebhooks" and as "svix").
//
// A delivery carries three headers: an id, a unix timestamp and a signature
// header of SPACE-separated `<version>,<base64>` entries. The signed content
// is "<id>.<timestamp>.<raw body>". Version v1 is an HMAC-SHA256 keyed with
// the secret's decoded bytes (`whsec_` + base64: the prefix is stripped and
// the rest base64-decoded, never used as text); v1a is an ed25519 signature
// checked against `whpk_` + base64 public keys (or the public half of a
// `whsk_` secret key). Unknown versions are ignored, never downgraded to.
//
// The svix-id / svix-timestamp / svix-signature trio is read when all three
// are present, else webhook-id / webhook-timestamp / webhook-signature.
// Timestamps older or newer than the tolerance (default 5 minutes) are
// rejected. The event id is the id header, which the signature covers; the
// type is the body's `type`.
//
// A signature header of more than MaxSignatures entries is refused before any
// signature is checked. Verify computes one HMAC per `whsec_` secret, compared
// with every v1 entry, and one ed25519 verification per (public key, v1a
// entry): its cost is bounded by the secrets and the cap, whatever the header
// lists.
//
// The package also signs forwards: DecodeSecret, SignHeaders and SetHeaders
// produce the webhook-* headers a destination verifies with any Standard
// Webhooks library.
package standardwebhooks

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hookline/hookline/providers"
)

// Name is the adapter's registered name.
const Name = "standardwebhooks"

// SvixName is the alias the same adapter is registered under.
const SvixName = "svix"

// The Standard Webhooks headers (canonical form).
const (
	HeaderID        = "Webhook-Id"
	HeaderTimestamp = "Webhook-Timestamp"
	HeaderSignature = "Webhook-Signature"
)

// The Svix headers, read first when all three are present.
const (
	SvixHeaderID        = "Svix-Id"
	SvixHeaderTimestamp = "Svix-Timestamp"
	SvixHeaderSignature = "Svix-Signature"
)

// Secret prefixes.
const (
	SecretPrefix     = "whsec_" // symmetric key, base64 (v1, HMAC-SHA256)
	PublicKeyPrefix  = "whpk_"  // ed25519 public key, base64 (v1a, verify only)
	PrivateKeyPrefix = "whsk_"  // ed25519 private key or seed, base64 (v1a, signs)
)

// Signature versions.
const (
	VersionHMAC    = "v1"
	VersionEd25519 = "v1a"
)

// DefaultTolerance is the spec's ±5 minutes.
const DefaultTolerance = 5 * time.Minute

func init() {
	factory := func(cfg providers.Config) (providers.Provider, error) { return New(cfg) }
	providers.Register(Name, factory)
	providers.Register(SvixName, factory)
}

// key is one configured secret: an HMAC key, or an ed25519 key pair half.
type key struct {
	hmac []byte
	pub  ed25519.PublicKey
	priv ed25519.PrivateKey // nil unless the secret is a whsk_ key
}

// Verifier is the Standard Webhooks / Svix adapter.
type Verifier struct {
	keys      []key
	tolerance time.Duration
	now       func() time.Time
}

// New returns a Standard Webhooks adapter for cfg. Each secret is `whsec_` +
// base64 (a secret without a prefix is base64-decoded too), `whpk_` + base64
// of an ed25519 public key, or `whsk_` + base64 of an ed25519 private key.
func New(cfg providers.Config) (*Verifier, error) {
	if len(cfg.Secrets) == 0 {
		return nil, fmt.Errorf("secrets: at least one secret is required")
	}
	if err := cfg.Decode(&struct{}{}); err != nil {
		return nil, fmt.Errorf("standardwebhooks: %w", err)
	}
	v := &Verifier{tolerance: cfg.Tolerance, now: cfg.NowFunc()}
	if v.tolerance == 0 {
		v.tolerance = DefaultTolerance
	}
	for i, s := range cfg.Secrets {
		k, err := parseKey(s)
		if err != nil {
			// Never print the secret itself.
			return nil, fmt.Errorf("secrets[%d]: %w", i, err)
		}
		v.keys = append(v.keys, k)
	}
	return v, nil
}

func parseKey(s string) (key, error) {
	switch {
	case strings.HasPrefix(s, PublicKeyPrefix):
		b, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, PublicKeyPrefix))
		if err != nil || len(b) != ed25519.PublicKeySize {
			return key{}, fmt.Errorf("want %s followed by the base64 of a %d-byte ed25519 public key", PublicKeyPrefix, ed25519.PublicKeySize)
		}
		return key{pub: ed25519.PublicKey(b)}, nil
	case strings.HasPrefix(s, PrivateKeyPrefix):
		b, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, PrivateKeyPrefix))
		if err != nil {
			return key{}, fmt.Errorf("want %s followed by base64", PrivateKeyPrefix)
		}
		var priv ed25519.PrivateKey
		switch len(b) {
		case ed25519.SeedSize:
			priv = ed25519.NewKeyFromSeed(b)
		case ed25519.PrivateKeySize:
			priv = ed25519.PrivateKey(b)
		default:
			return key{}, fmt.Errorf("want %s followed by the base64 of a %d-byte ed25519 seed or %d-byte private key",
				PrivateKeyPrefix, ed25519.SeedSize, ed25519.PrivateKeySize)
		}
		return key{pub: priv.Public().(ed25519.PublicKey), priv: priv}, nil
	}
	b, err := DecodeSecret(s)
	if err != nil {
		return key{}, err
	}
	return key{hmac: b}, nil
}

// ErrBadSecret is returned by DecodeSecret for a secret that is not
// `whsec_` + base64 (or bare base64) of at least one byte.
var ErrBadSecret = errors.New("want whsec_ followed by base64 (a bare base64 secret is accepted too)")

// DecodeSecret returns the HMAC key bytes of a `whsec_` + base64 secret: the
// prefix is stripped and the rest base64-decoded (standard alphabet, padded).
// A secret without the prefix is decoded as base64 too. The error never
// contains the secret.
func DecodeSecret(secret string) ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, SecretPrefix))
	if err != nil || len(b) == 0 {
		return nil, ErrBadSecret
	}
	return b, nil
}

// MaxSignatures caps the entries of a signature header, of any version. A
// sender writes one per active secret (two while rotating); a header with
// more is refused as a whole (ErrInvalidSignature).
const MaxSignatures = 16

// Signature is one entry of a signature header.
type Signature struct {
	// Version is VersionHMAC or VersionEd25519.
	Version string
	// Value is the decoded signature: 32 bytes for v1, 64 bytes for v1a.
	Value []byte
}

// ParseSignatures parses a webhook-signature value: space-separated
// `<version>,<base64>` entries. Entries of unknown versions, and v1/v1a
// entries whose value does not decode to the right length, are skipped (a
// garbled entry never matches; others may). No usable entry, or more than
// MaxSignatures entries of any kind, is an error wrapping
// providers.ErrInvalidSignature.
func ParseSignatures(header string) ([]Signature, error) {
	var sigs []Signature
	entries := 0
	for entry := range strings.FieldsSeq(header) {
		if entries++; entries > MaxSignatures {
			return nil, fmt.Errorf("%w: more than %d entries in the signature header", providers.ErrInvalidSignature, MaxSignatures)
		}
		version, value, ok := strings.Cut(entry, ",")
		if !ok {
			continue
		}
		var size int
		switch version {
		case VersionHMAC:
			size = sha256.Size
		case VersionEd25519:
			size = ed25519.SignatureSize
		default:
			continue
		}
		b, err := base64.StdEncoding.DecodeString(value)
		if err != nil || len(b) != size {
			continue
		}
		sigs = append(sigs, Signature{Version: version, Value: b})
	}
	if len(sigs) == 0 {
		return nil, fmt.Errorf("%w: no v1 or v1a signature in the signature header", providers.ErrInvalidSignature)
	}
	return sigs, nil
}

// headers returns the id, timestamp and signature of a delivery: the Svix
// trio when all three are set, else the webhook-* trio.
func headers(h http.Header) (id, ts, sig string) {
	id, ts, sig = h.Get(SvixHeaderID), h.Get(SvixHeaderTimestamp), h.Get(SvixHeaderSignature)
	if id != "" && ts != "" && sig != "" {
		return id, ts, sig
	}
	return h.Get(HeaderID), h.Get(HeaderTimestamp), h.Get(HeaderSignature)
}

// content returns "<id>.<ts>.<body>", the signed content.
func content(id, ts string, body []byte) []byte {
	b := make([]byte, 0, len(id)+len(ts)+2+len(body))
	b = append(b, id...)
	b = append(b, '.')
	b = append(b, ts...)
	b = append(b, '.')
	return append(b, body...)
}

// newMAC and verifyEd25519 compute every HMAC and check every ed25519
// signature of the package (tests count them).
var (
	newMAC        = func(key []byte) hash.Hash { return hmac.New(sha256.New, key) }
	verifyEd25519 = ed25519.Verify
)

// mac returns the HMAC-SHA256 under secret of msg's parts written in order.
func mac(secret []byte, msg ...[]byte) []byte {
	m := newMAC(secret)
	for _, p := range msg {
		m.Write(p)
	}
	return m.Sum(nil)
}

// Verify implements providers.Verifier.
func (v *Verifier) Verify(r *providers.Request) error {
	id, tsValue, sigValue := headers(r.Header)
	switch {
	case sigValue == "":
		return fmt.Errorf("%w: %s header is required", providers.ErrNoSignature, HeaderSignature)
	case id == "":
		return fmt.Errorf("%w: %s header is required", providers.ErrNoSignature, HeaderID)
	case tsValue == "":
		return fmt.Errorf("%w: %s header is required", providers.ErrNoSignature, HeaderTimestamp)
	}
	ts, err := strconv.ParseInt(tsValue, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: bad %s", providers.ErrInvalidSignature, HeaderTimestamp)
	}
	sigs, err := ParseSignatures(sigValue)
	if err != nil {
		return err
	}
	if err := providers.CheckTimestamp(time.Unix(ts, 0), v.now(), v.tolerance); err != nil {
		return fmt.Errorf("%w (tolerance %s)", err, v.tolerance)
	}
	// Like the reference libraries, sign the timestamp as the decimal integer
	// it parses to (a sender signs what it sends: the two agree).
	tsText := strconv.FormatInt(ts, 10)
	var hasV1, hasV1a bool
	for _, s := range sigs {
		hasV1 = hasV1 || s.Version == VersionHMAC
		hasV1a = hasV1a || s.Version == VersionEd25519
	}
	// v1: one HMAC per secret, over "<id>.<ts>." then the body (never
	// copied), compared with every v1 entry.
	if hasV1 {
		prefix := content(id, tsText, nil)
		for _, k := range v.keys {
			if k.hmac == nil {
				continue
			}
			want := mac(k.hmac, prefix, r.Body)
			for _, s := range sigs {
				if s.Version == VersionHMAC && hmac.Equal(want, s.Value) {
					return nil
				}
			}
		}
	}
	// v1a: each entry against each public key; ParseSignatures capped the
	// entries.
	if hasV1a {
		var msg []byte
		for _, k := range v.keys {
			if k.pub == nil {
				continue
			}
			if msg == nil {
				msg = content(id, tsText, r.Body)
			}
			for _, s := range sigs {
				if s.Version == VersionEd25519 && verifyEd25519(k.pub, msg, s.Value) {
					return nil
				}
			}
		}
	}
	return fmt.Errorf("%w: no signature matches", providers.ErrInvalidSignature)
}

// Resolve implements providers.Resolver: the id header, the body's `type`,
// and the body's `timestamp` (RFC 3339), else the timestamp header.
func (v *Verifier) Resolve(r *providers.Request) (providers.Event, error) {
	id, tsValue, _ := headers(r.Header)
	f, err := providers.JSONFields(r.Body, "type", "timestamp")
	if err != nil {
		return providers.Event{}, err
	}
	if id == "" {
		return providers.Event{}, fmt.Errorf("%w: %s header is empty", providers.ErrNoEventID, HeaderID)
	}
	ev := providers.Event{ID: id, Type: f[0]}
	if t, err := time.Parse(time.RFC3339Nano, f[1]); err == nil {
		ev.Time = t
	} else if n, err := strconv.ParseInt(tsValue, 10, 64); err == nil {
		ev.Time = time.Unix(n, 0).UTC()
	}
	return ev, nil
}

// SignHeaders returns the webhook-signature value ("v1,<base64>") of body
// sent as message id at ts, keyed with secret: the decoded key bytes (see
// DecodeSecret), not the `whsec_` text. Destinations verify it with any
// Standard Webhooks library given the `whsec_` secret.
func SignHeaders(secret []byte, id string, ts time.Time, body []byte) string {
	sig := mac(secret, content(id, strconv.FormatInt(ts.Unix(), 10), body))
	return VersionHMAC + "," + base64.StdEncoding.EncodeToString(sig)
}

// SetHeaders sets webhook-id, webhook-timestamp and webhook-signature on h
// for body, signed with the decoded key secret (see DecodeSecret).
func SetHeaders(h http.Header, secret []byte, id string, ts time.Time, body []byte) {
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	h.Set(HeaderSignature, SignHeaders(secret, id, ts, body))
}

// NewMessageID returns a fresh random message id, "msg_" + 26 base32 characters.
func NewMessageID() string {
	return "msg_" + rand.Text()
}

// Sign implements providers.Signer with the first secret: v1 for a `whsec_`
// secret, v1a for a `whsk_` one (a `whpk_` public key cannot sign). The
// message id is the request's webhook-id header when it is set (even to ""),
// else its svix-id, else a new one; any svix-* headers are removed so that the
// webhook-* headers are the ones verified.
func (v *Verifier) Sign(r *providers.Request, now time.Time) error {
	k := v.keys[0]
	if k.hmac == nil && k.priv == nil {
		return fmt.Errorf("standardwebhooks: the first secret is a %s public key, which cannot sign", PublicKeyPrefix)
	}
	id, set := headerValue(r.Header, HeaderID)
	if !set {
		id, set = headerValue(r.Header, SvixHeaderID)
	}
	if !set {
		id = NewMessageID()
	}
	for _, h := range []string{SvixHeaderID, SvixHeaderTimestamp, SvixHeaderSignature} {
		r.Header.Del(h)
	}
	if k.hmac != nil {
		SetHeaders(r.Header, k.hmac, id, now, r.Body)
		return nil
	}
	ts := strconv.FormatInt(now.Unix(), 10)
	sig := ed25519.Sign(k.priv, content(id, ts, r.Body))
	r.Header.Set(HeaderID, id)
	r.Header.Set(HeaderTimestamp, ts)
	r.Header.Set(HeaderSignature, VersionEd25519+","+base64.StdEncoding.EncodeToString(sig))
	return nil
}

// headerValue reports h's first value for name and whether name is present at all.
func headerValue(h http.Header, name string) (string, bool) {
	vals, ok := h[http.CanonicalHeaderKey(name)]
	if !ok {
		return "", false
	}
	if len(vals) == 0 {
		return "", true
	}
	return vals[0], true
}

// Describe implements providers.Describer. The svix-* trio is listed as the
// fallback: Standard Webhooks names webhook-*, and Svix's own headers are
// read in their place (when all three are present). The id header is part
// of the signed content.
func (v *Verifier) Describe() providers.Description {
	return providers.Description{
		Headers:          []string{HeaderID, HeaderTimestamp, HeaderSignature},
		FallbackHeaders:  []string{SvixHeaderID, SvixHeaderTimestamp, SvixHeaderSignature},
		DefaultEventID:   "header:webhook-id",
		DefaultTolerance: DefaultTolerance,
		IDSigned:         true,
	}
}
