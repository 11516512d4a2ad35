// Package github verifies GitHub webhooks: the X-Hub-Signature-256 header
// `sha256=<hex>`, an HMAC-SHA256 of the raw body (JSON or form) keyed with the
// webhook secret as UTF-8 bytes. The legacy X-Hub-Signature `sha1=<hex>` is
// read only when X-Hub-Signature-256 is absent (GitHub Enterprise Server
// before 3.0 sends only it). There is no timestamp, so the tolerance is
// ignored.
//
// X-GitHub-Delivery is shared by every webhook subscribed to the same event,
// so the default event id is "{X-GitHub-Hook-ID}:{X-GitHub-Delivery}", and a
// delivery missing either header has no id (a 400): keyed on the delivery
// alone, two hooks' copies of one event would be taken for duplicates of
// each other. The type is X-GitHub-Event.
// Neither header is signed, so the adapter is a providers.ContentKeyer: a
// captured delivery replayed under fresh ids has the same content key, the
// digest of its body, and is a duplicate of the original.
package github

import (
	"crypto"
	"fmt"
	"strings"
	"time"

	"github.com/hookline/hookline/providers"
)

// Name is the adapter's registered name.
const Name = "github"

// Headers read by the adapter.
const (
	HeaderSignature256 = "X-Hub-Signature-256"
	HeaderSignature    = "X-Hub-Signature" // legacy sha1=
	HeaderDelivery     = "X-GitHub-Delivery"
	HeaderHookID       = "X-GitHub-Hook-ID"
	HeaderEvent        = "X-GitHub-Event"
)

func init() {
	providers.Register(Name, func(cfg providers.Config) (providers.Provider, error) { return New(cfg) })
}

// scheme and legacyScheme are how GitHub writes its two headers: the
// algorithm's name, "=" and hex (read in either case), white space around it
// ignored. The legacy SHA-1 header is read only without the SHA-256 one.
var (
	scheme       = providers.BodyMAC{Header: HeaderSignature256, Prefix: "sha256="}
	legacyScheme = providers.BodyMAC{Header: HeaderSignature, Hash: crypto.SHA1, Prefix: "sha1="}
)

// Verifier is the GitHub adapter.
type Verifier struct {
	keys [][]byte
}

// New returns a GitHub adapter for cfg. cfg.Tolerance is accepted and ignored:
// the scheme has no timestamp.
func New(cfg providers.Config) (*Verifier, error) {
	if len(cfg.Secrets) == 0 {
		return nil, fmt.Errorf("secrets: at least one secret is required")
	}
	if err := cfg.Decode(&struct{}{}); err != nil {
		return nil, fmt.Errorf("github: %w", err)
	}
	return &Verifier{keys: providers.SecretKeys(cfg.Secrets)}, nil
}

// ParseSignature parses a signature header value `<algo>=<hex>` where algo is
// the one expected ("sha256" or "sha1", lowercase). Anything else is an error
// wrapping providers.ErrInvalidSignature.
func ParseSignature(value, algo string) ([]byte, error) {
	var m *providers.BodyMAC
	switch algo {
	case "sha256":
		m = &scheme
	case "sha1":
		m = &legacyScheme
	default:
		return nil, fmt.Errorf("%w: unsupported algorithm", providers.ErrInvalidSignature)
	}
	sigs, err := m.Parse(value)
	if err != nil {
		return nil, err
	}
	return sigs[0], nil
}

// Verify implements providers.Verifier.
func (v *Verifier) Verify(r *providers.Request) error {
	// Fall back to the legacy SHA-1 signature only when the SHA-256 one is
	// absent; when both are sent, SHA-1 is never consulted.
	if r.Header.Get(HeaderSignature256) == "" && r.Header.Get(HeaderSignature) != "" {
		return legacyScheme.Verify(r, v.keys)
	}
	return scheme.Verify(r, v.keys)
}

// Resolve implements providers.Resolver: id "{hook id}:{delivery}", type
// X-GitHub-Event, no time. Both id headers are required. The body is not
// read.
func (v *Verifier) Resolve(r *providers.Request) (providers.Event, error) {
	delivery := strings.TrimSpace(r.Header.Get(HeaderDelivery))
	hook := strings.TrimSpace(r.Header.Get(HeaderHookID))
	for _, h := range []struct{ name, value string }{{HeaderHookID, hook}, {HeaderDelivery, delivery}} {
		if h.value == "" {
			return providers.Event{}, fmt.Errorf("%w: %s header is empty (the event id is {%s}:{%s})",
				providers.ErrNoEventID, h.name, HeaderHookID, HeaderDelivery)
		}
	}
	return providers.Event{ID: hook + ":" + delivery, Type: strings.TrimSpace(r.Header.Get(HeaderEvent))}, nil
}

// Sign implements providers.Signer with the first secret. It sets
// X-Hub-Signature-256 only (GitHub also sends the legacy SHA-1 header, which
// Verify never needs when the SHA-256 one is there).
func (v *Verifier) Sign(r *providers.Request, _ time.Time) error {
	scheme.Sign(r, v.keys[0])
	return nil
}

// ContentKey implements providers.ContentKeyer: the digest of the raw body,
// all that the signature covers (the id headers are not signed).
func (v *Verifier) ContentKey(r *providers.Request) []byte {
	return providers.ContentDigest(Name, r.Body)
}

// Describe implements providers.Describer. The legacy X-Hub-Signature is a
// fallback, read only without X-Hub-Signature-256. The id headers are not
// signed (IDSigned false; see ContentKey).
func (v *Verifier) Describe() providers.Description {
	return providers.Description{
		Headers:          []string{HeaderSignature256},
		FallbackHeaders:  []string{HeaderSignature},
		DefaultEventID:   "{header:" + HeaderHookID + "}:{header:" + HeaderDelivery + "}",
		DefaultEventType: "header:" + HeaderEvent,
		IDSigned:         false,
	}
}
