// Package razorpay verifies Razorpay webhooks: the X-Razorpay-Signature header
// carries the lowercase hex HMAC-SHA256 of the raw body, keyed with the
// webhook secret (the source's secrets). Razorpay retries an event with the
// signature of the secret it was first sent with, so keep the old secret
// configured next to the new one while rotating.
//
// The scheme signs no timestamp, so tolerance is accepted and ignored. The event
// id is the X-Razorpay-Event-Id header (Razorpay's documented dedup key), the
// type the body's `event` ("payment.captured"), the time its `created_at`
// (unix seconds). The id header is not signed, so the adapter is a
// providers.ContentKeyer: a captured delivery replayed under a fresh
// X-Razorpay-Event-Id has the same content key, the digest of its body, and
// is a duplicate of the original.
package razorpay

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hookline/hookline/providers"
)

// Name is the adapter's registered name.
const Name = "razorpay"

// Header is the signature header.
const Header = "X-Razorpay-Signature"

// EventIDHeader carries the event id, the same on every retry of an event.
const EventIDHeader = "X-Razorpay-Event-Id"

func init() {
	providers.Register(Name, func(cfg providers.Config) (providers.Provider, error) { return New(cfg) })
}

// scheme is how Razorpay signs: lowercase hex, which its SDKs compare as
// text; Strict refuses any other spelling too.
var scheme = providers.BodyMAC{Header: Header, Strict: true}

// Verifier is the Razorpay adapter.
type Verifier struct {
	keys [][]byte
}

// New returns a Razorpay adapter for cfg.
func New(cfg providers.Config) (*Verifier, error) {
	if len(cfg.Secrets) == 0 {
		return nil, fmt.Errorf("secrets: at least one secret (the webhook secret) is required")
	}
	if err := cfg.Decode(&struct{}{}); err != nil {
		return nil, fmt.Errorf("razorpay: %w", err)
	}
	return &Verifier{keys: providers.SecretKeys(cfg.Secrets)}, nil
}

// Verify implements providers.Verifier.
func (v *Verifier) Verify(r *providers.Request) error { return scheme.Verify(r, v.keys) }

// Resolve implements providers.Resolver: the X-Razorpay-Event-Id header, and
// the body's event and created_at.
func (v *Verifier) Resolve(r *providers.Request) (providers.Event, error) {
	f, err := providers.JSONFields(r.Body, "event", "created_at")
	if err != nil {
		return providers.Event{}, err
	}
	id := strings.TrimSpace(r.Header.Get(EventIDHeader))
	if id == "" {
		return providers.Event{}, fmt.Errorf("%w: %s header is missing", providers.ErrNoEventID, EventIDHeader)
	}
	ev := providers.Event{ID: id, Type: f[0]}
	if n, err := strconv.ParseInt(f[1], 10, 64); err == nil {
		ev.Time = time.Unix(n, 0).UTC()
	}
	return ev, nil
}

// Sign implements providers.Signer with the first secret.
func (v *Verifier) Sign(r *providers.Request, _ time.Time) error {
	scheme.Sign(r, v.keys[0])
	return nil
}

// ContentKey implements providers.ContentKeyer: the digest of the raw body,
// all that the signature covers (X-Razorpay-Event-Id is not signed).
func (v *Verifier) ContentKey(r *providers.Request) []byte {
	return providers.ContentDigest(Name, r.Body)
}

// Describe implements providers.Describer. The id header is not signed
// (IDSigned false; see ContentKey).
func (v *Verifier) Describe() providers.Description {
	return providers.Description{Headers: []string{Header}, DefaultEventID: "header:" + EventIDHeader, DefaultEventType: "json:event", IDSigned: false}
}
