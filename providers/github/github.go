// Package github verifies GitHub webhooks: the X-Hub-Signature-256 header
// `sha256=<hex>`, an HMAC-SHA256 of the raw body (JSON or form) keyed with the
// webhook secret as UTF-8 bytes. The legacy X-Hub-Signature `sha1=<hex>` is
// read only when X-Hub-Signature-256 is absent (GitHub Enterprise Server
// before 3.0 sends only it). There is no timestamp, so the tolerance is
// ignored.
//
// X-GitHub-Delivery is shared by every webhook subscribed to the same event,
// so the default event id is "{X-GitHub-Hook-ID}:{X-GitHub-Delivery}" (the
// delivery alone when the hook id header is absent); the type is X-GitHub-Event.
package github

import (
	"crypto/hmac"
	"crypto/sha1" //nolint:gosec // legacy X-Hub-Signature, read only when the SHA-256 header is absent
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
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

// Verifier is the GitHub adapter.
type Verifier struct {
	secrets [][]byte
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
	v := &Verifier{}
	for _, s := range cfg.Secrets {
		v.secrets = append(v.secrets, []byte(s))
	}
	return v, nil
}

// ParseSignature parses a signature header value `<algo>=<hex>` where algo is
// the one expected ("sha256" or "sha1", lowercase). Anything else is an error
// wrapping providers.ErrInvalidSignature.
func ParseSignature(value, algo string) ([]byte, error) {
	var size int
	switch algo {
	case "sha256":
		size = sha256.Size
	case "sha1":
		size = sha1.Size
	default:
		return nil, fmt.Errorf("%w: unsupported algorithm", providers.ErrInvalidSignature)
	}
	prefix, hexSig, ok := strings.Cut(strings.TrimSpace(value), "=")
	if !ok || prefix != algo {
		return nil, fmt.Errorf("%w: want %s=<hex>", providers.ErrInvalidSignature, algo)
	}
	sig, err := hex.DecodeString(hexSig)
	if err != nil || len(sig) != size {
		return nil, fmt.Errorf("%w: want %s=<hex>", providers.ErrInvalidSignature, algo)
	}
	return sig, nil
}

// Verify implements providers.Verifier.
func (v *Verifier) Verify(r *providers.Request) error {
	header, algo, newHash := HeaderSignature256, "sha256", sha256.New
	value := r.Header.Get(HeaderSignature256)
	if value == "" {
		// Fall back to the legacy SHA-1 signature only when the SHA-256 one
		// is absent; when both are sent, SHA-1 is never consulted.
		header, algo, newHash = HeaderSignature, "sha1", sha1.New
		value = r.Header.Get(HeaderSignature)
	}
	if value == "" {
		return fmt.Errorf("%w: %s header is required", providers.ErrNoSignature, HeaderSignature256)
	}
	sig, err := ParseSignature(value, algo)
	if err != nil {
		return fmt.Errorf("%s: %w", header, err)
	}
	for _, secret := range v.secrets {
		if hmac.Equal(mac(newHash, secret, r.Body), sig) {
			return nil
		}
	}
	return fmt.Errorf("%w: %s does not match", providers.ErrInvalidSignature, header)
}

func mac(newHash func() hash.Hash, secret, body []byte) []byte {
	m := hmac.New(newHash, secret)
	m.Write(body)
	return m.Sum(nil)
}

// Resolve implements providers.Resolver: id "{hook id}:{delivery}" (or the
// delivery alone), type X-GitHub-Event, no time. The body is not read.
func (v *Verifier) Resolve(r *providers.Request) (providers.Event, error) {
	delivery := strings.TrimSpace(r.Header.Get(HeaderDelivery))
	if delivery == "" {
		return providers.Event{}, fmt.Errorf("%w: %s header is empty", providers.ErrNoEventID, HeaderDelivery)
	}
	id := delivery
	if hook := strings.TrimSpace(r.Header.Get(HeaderHookID)); hook != "" {
		id = hook + ":" + delivery
	}
	return providers.Event{ID: id, Type: strings.TrimSpace(r.Header.Get(HeaderEvent))}, nil
}

// Sign implements providers.Signer with the first secret. It sets
// X-Hub-Signature-256 only (GitHub also sends the legacy SHA-1 header, which
// Verify never needs when the SHA-256 one is there).
func (v *Verifier) Sign(r *providers.Request, _ time.Time) error {
	r.Header.Set(HeaderSignature256, "sha256="+hex.EncodeToString(mac(sha256.New, v.secrets[0], r.Body)))
	return nil
}

// Describe implements providers.Describer. The legacy X-Hub-Signature is a
// fallback, read only without X-Hub-Signature-256.
func (v *Verifier) Describe() providers.Description {
	return providers.Description{
		Headers:         []string{HeaderSignature256},
		FallbackHeaders: []string{HeaderSignature},
		DefaultEventID:  "{header:" + HeaderHookID + "}:{header:" + HeaderDelivery + "}",
	}
}
