// Package coinbase verifies Coinbase Commerce webhooks: the
// X-CC-Webhook-Signature header carries the lowercase hex HMAC-SHA256 of the
// raw body, keyed with the webhook shared secret (the source's secrets).
//
// The scheme signs no timestamp, so tolerance is accepted and ignored. The body
// wraps the event: `{"id": <delivery>, "attempt_number": …, "event": {…}}`.
// The event id is `event.id` (the outer `id` names the delivery attempt, not
// the event), the type `event.type` ("charge:confirmed"), the time
// `event.created_at` (RFC 3339 ⚠). Coinbase retries for up to three days.
package coinbase

import (
	"fmt"
	"time"

	"github.com/hookline/hookline/providers"
)

// Name is the adapter's registered name.
const Name = "coinbase"

// Header is the signature header.
const Header = "X-CC-Webhook-Signature"

func init() {
	providers.Register(Name, func(cfg providers.Config) (providers.Provider, error) { return New(cfg) })
}

// scheme is how Coinbase signs: lowercase hex, which its reference
// implementation compares as text; Strict refuses any other spelling.
var scheme = providers.BodyMAC{Header: Header, Strict: true}

// Verifier is the Coinbase Commerce adapter.
type Verifier struct {
	keys [][]byte
}

// New returns a Coinbase Commerce adapter for cfg.
func New(cfg providers.Config) (*Verifier, error) {
	if len(cfg.Secrets) == 0 {
		return nil, fmt.Errorf("secrets: at least one secret (the webhook shared secret) is required")
	}
	if err := cfg.Decode(&struct{}{}); err != nil {
		return nil, fmt.Errorf("coinbase: %w", err)
	}
	return &Verifier{keys: providers.SecretKeys(cfg.Secrets)}, nil
}

// Verify implements providers.Verifier.
func (v *Verifier) Verify(r *providers.Request) error { return scheme.Verify(r, v.keys) }

// Resolve implements providers.Resolver: event.id, event.type and
// event.created_at.
func (v *Verifier) Resolve(r *providers.Request) (providers.Event, error) {
	f, err := providers.JSONFields(r.Body, "event.id", "event.type", "event.created_at")
	if err != nil {
		return providers.Event{}, err
	}
	if f[0] == "" {
		return providers.Event{}, fmt.Errorf("%w: body has no \"event.id\"", providers.ErrNoEventID)
	}
	ev := providers.Event{ID: f[0], Type: f[1]}
	if t, err := time.Parse(time.RFC3339, f[2]); err == nil {
		ev.Time = t.UTC()
	}
	return ev, nil
}

// Sign implements providers.Signer with the first secret.
func (v *Verifier) Sign(r *providers.Request, _ time.Time) error {
	scheme.Sign(r, v.keys[0])
	return nil
}

// Describe implements providers.Describer.
func (v *Verifier) Describe() providers.Description {
	// The id is the signed body's.
	return providers.Description{Headers: []string{Header}, DefaultEventID: "json:event.id", DefaultEventType: "json:event.type", IDSigned: true}
}
