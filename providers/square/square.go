// Package square verifies Square webhooks: the x-square-hmacsha256-signature
// header is the base64 HMAC-SHA256 of the notification URL (exactly as
// configured in Square's Developer Console) followed by the raw body, no
// separator, keyed with the subscription's signature key as UTF-8 bytes.
// Because hookline may sit behind a proxy, the URL is not taken from the
// request: `square: {notification_url: "https://…"}` is required. There is no
// signed timestamp, so the tolerance is ignored. The legacy SHA-1
// x-square-signature header is not supported.
//
// The event id is the body's `event_id`, the type `type`, the time `created_at`.
package square

import (
	"fmt"
	"net/url"
	"time"

	"github.com/hookline/hookline/providers"
)

// Name is the adapter's registered name.
const Name = "square"

// Header is the signature header.
const Header = "X-Square-Hmacsha256-Signature"

func init() {
	providers.Register(Name, func(cfg providers.Config) (providers.Provider, error) { return New(cfg) })
}

// Settings is the `square:` block of a source.
type Settings struct {
	// NotificationURL is the webhook subscription's notification URL, exactly
	// as configured at Square (it is part of the signed message). Required.
	NotificationURL string `yaml:"notification_url"`
}

// scheme is how Square writes its signature: canonical base64 (Strict). What
// it signs is the notification URL followed by the body.
var scheme = providers.BodyMAC{Header: Header, Encoding: providers.Base64, Strict: true}

// Verifier is the Square adapter.
type Verifier struct {
	keys [][]byte
	url  []byte
}

// New returns a Square adapter for cfg.
func New(cfg providers.Config) (*Verifier, error) {
	if len(cfg.Secrets) == 0 {
		return nil, fmt.Errorf("secrets: at least one secret is required")
	}
	var s Settings
	if err := cfg.Decode(&s); err != nil {
		return nil, fmt.Errorf("square: %w", err)
	}
	if s.NotificationURL == "" {
		return nil, fmt.Errorf("square.notification_url: required (the URL configured for the subscription at Square)")
	}
	u, err := url.Parse(s.NotificationURL)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("square.notification_url: want an absolute https URL, as configured at Square")
	}
	return &Verifier{keys: providers.SecretKeys(cfg.Secrets), url: []byte(s.NotificationURL)}, nil
}

// ParseHeader decodes a signature header value: one base64 HMAC-SHA256 in
// canonical (padded, standard-alphabet) form.
func ParseHeader(value string) ([]byte, error) {
	sigs, err := scheme.Parse(value)
	if err != nil {
		return nil, err
	}
	return sigs[0], nil
}

// Verify implements providers.Verifier.
func (v *Verifier) Verify(r *providers.Request) error {
	value := r.Header.Get(Header)
	if value == "" {
		return fmt.Errorf("%w: %s header is required", providers.ErrNoSignature, Header)
	}
	sigs, err := scheme.Parse(value)
	if err != nil {
		return err
	}
	if scheme.Match(v.keys, sigs, v.url, r.Body) {
		return nil
	}
	return fmt.Errorf("%w: %s does not match (is square.notification_url exactly the subscription's URL?)", providers.ErrInvalidSignature, Header)
}

// Resolve implements providers.Resolver: event_id, type and created_at.
func (v *Verifier) Resolve(r *providers.Request) (providers.Event, error) {
	f, err := providers.JSONFields(r.Body, "event_id", "type", "created_at")
	if err != nil {
		return providers.Event{}, err
	}
	if f[0] == "" {
		return providers.Event{}, fmt.Errorf("%w: body has no \"event_id\"", providers.ErrNoEventID)
	}
	ev := providers.Event{ID: f[0], Type: f[1]}
	if t, err := time.Parse(time.RFC3339Nano, f[2]); err == nil {
		ev.Time = t
	}
	return ev, nil
}

// Sign implements providers.Signer with the first secret. now is unused: the
// scheme has no timestamp.
func (v *Verifier) Sign(r *providers.Request, _ time.Time) error {
	r.Header.Set(Header, scheme.Signature(v.keys[0], v.url, r.Body))
	return nil
}

// Describe implements providers.Describer.
func (v *Verifier) Describe() providers.Description {
	// The id is the signed body's.
	return providers.Description{Headers: []string{Header}, DefaultEventID: "json:event_id", DefaultEventType: "json:type", IDSigned: true}
}
