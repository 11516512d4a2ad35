// Package razorpay verifies Razorpay webhooks: the X-Razorpay-Signature header
// carries the lowercase hex HMAC-SHA256 of the raw body, keyed with the
// webhook secret (the source's secrets). Razorpay retries an event with the
// signature of the secret it was first sent with, so keep the old secret
// configured next to the new one while rotating.
//
// The scheme signs no timestamp, so tolerance is accepted and ignored. The event
// id is the X-Razorpay-Event-Id header (Razorpay's documented dedup key), the
// type the body's `event` ("payment.captured"), the time its `created_at`
// (unix seconds).
package razorpay

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
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

// Verifier is the Razorpay adapter.
type Verifier struct {
	secrets [][]byte
}

// New returns a Razorpay adapter for cfg.
func New(cfg providers.Config) (*Verifier, error) {
	if len(cfg.Secrets) == 0 {
		return nil, fmt.Errorf("secrets: at least one secret (the webhook secret) is required")
	}
	if err := cfg.Decode(&struct{}{}); err != nil {
		return nil, fmt.Errorf("razorpay: %w", err)
	}
	v := &Verifier{}
	for _, s := range cfg.Secrets {
		v.secrets = append(v.secrets, []byte(s))
	}
	return v, nil
}

func mac(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// Verify implements providers.Verifier.
func (v *Verifier) Verify(r *providers.Request) error {
	sig := r.Header.Get(Header)
	if sig == "" {
		return fmt.Errorf("%w: %s header is required", providers.ErrNoSignature, Header)
	}
	// Razorpay sends lowercase hex and its SDKs compare the hex text; so do we
	// (in constant time), which rejects any other spelling.
	for _, secret := range v.secrets {
		if hmac.Equal([]byte(mac(secret, r.Body)), []byte(sig)) {
			return nil
		}
	}
	return fmt.Errorf("%w: %s does not match", providers.ErrInvalidSignature, Header)
}

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
	r.Header.Set(Header, mac(v.secrets[0], r.Body))
	return nil
}

// Describe implements providers.Describer.
func (v *Verifier) Describe() providers.Description {
	return providers.Description{Headers: []string{Header}, DefaultEventID: "header:" + EventIDHeader}
}
