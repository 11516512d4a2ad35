// Package xendit verifies Xendit callbacks: Xendit signs nothing, it sends the
// account's static callback verification token in the x-callback-token header.
// The token (the source's secrets; several while rotating) is compared in
// constant time. It does not cover the body, so TLS is what protects the body
// in transit, and the token must be kept as secret as an API key.
//
// There is no timestamp, so tolerance is accepted and ignored. The event id is
// the webhook-id header ⚠ (the same on every retry of a callback) when present,
// else the body's `id`. Beware that for older callbacks without webhook-id the
// body `id` is the resource's id (an invoice), shared by its later status
// changes: give such sources a short dedup_window or an event_id resolver. The
// type is the body's `event` ("payment.succeeded"), else its `status`
// ("PAID"); the time its `created` (RFC 3339 ⚠).
package xendit

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"strings"
	"time"

	"github.com/hookline/hookline/providers"
)

// Name is the adapter's registered name.
const Name = "xendit"

// Header carries the callback verification token.
const Header = "X-Callback-Token"

// EventIDHeader carries the callback's id ⚠.
const EventIDHeader = "Webhook-Id"

func init() {
	providers.Register(Name, func(cfg providers.Config) (providers.Provider, error) { return New(cfg) })
}

// Verifier is the Xendit adapter.
type Verifier struct {
	// digests are the SHA-256 of each token: comparing fixed-size digests
	// keeps the comparison constant-time whatever the token lengths.
	digests [][sha256.Size]byte
	first   string
}

// New returns a Xendit adapter for cfg.
func New(cfg providers.Config) (*Verifier, error) {
	if len(cfg.Secrets) == 0 {
		return nil, fmt.Errorf("secrets: at least one secret (the callback verification token) is required")
	}
	if err := cfg.Decode(&struct{}{}); err != nil {
		return nil, fmt.Errorf("xendit: %w", err)
	}
	v := &Verifier{first: cfg.Secrets[0]}
	for i, s := range cfg.Secrets {
		if s == "" || strings.TrimSpace(s) != s {
			return nil, fmt.Errorf("secrets[%d]: a callback token must be non-empty without surrounding whitespace", i)
		}
		v.digests = append(v.digests, sha256.Sum256([]byte(s)))
	}
	return v, nil
}

// Verify implements providers.Verifier.
func (v *Verifier) Verify(r *providers.Request) error {
	token := r.Header.Get(Header)
	if token == "" {
		return fmt.Errorf("%w: %s header is required", providers.ErrNoSignature, Header)
	}
	got := sha256.Sum256([]byte(token))
	match := 0
	for i := range v.digests {
		match |= subtle.ConstantTimeCompare(got[:], v.digests[i][:])
	}
	if match != 1 {
		return fmt.Errorf("%w: %s does not match", providers.ErrInvalidSignature, Header)
	}
	return nil
}

// Resolve implements providers.Resolver: the webhook-id header, else the
// body's id; event (else status); created.
func (v *Verifier) Resolve(r *providers.Request) (providers.Event, error) {
	f, err := providers.JSONFields(r.Body, "id", "event", "status", "created")
	if err != nil {
		return providers.Event{}, err
	}
	id := strings.TrimSpace(r.Header.Get(EventIDHeader))
	if id == "" {
		id = f[0]
	}
	if id == "" {
		return providers.Event{}, fmt.Errorf("%w: no %s header and no \"id\" in the body", providers.ErrNoEventID, EventIDHeader)
	}
	ev := providers.Event{ID: id, Type: f[1]}
	if ev.Type == "" {
		ev.Type = f[2]
	}
	if t, err := time.Parse(time.RFC3339, f[3]); err == nil {
		ev.Time = t.UTC()
	}
	return ev, nil
}

// Sign implements providers.Signer: it sets the first token.
func (v *Verifier) Sign(r *providers.Request, _ time.Time) error {
	r.Header.Set(Header, v.first)
	return nil
}

// SecretHeaders implements providers.SecretHeaderer: X-Callback-Token is the
// account's credential itself, never a per-delivery signature, so it is
// never stored.
func (v *Verifier) SecretHeaders() []string { return []string{Header} }

// Describe implements providers.Describer. The token covers neither the id
// nor the body: the id is not signed, and since nothing is, there is no
// signed content to key a replay on either (no providers.ContentKeyer).
func (v *Verifier) Describe() providers.Description {
	return providers.Description{Headers: []string{Header}, DefaultEventID: "header:webhook-id, else json:id", IDSigned: false}
}
