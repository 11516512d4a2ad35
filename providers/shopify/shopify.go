// Package shopify verifies Shopify webhooks: the X-Shopify-Hmac-Sha256 header
// (Shopify-Hmac-Sha256 for the new Events deliveries) holds the base64
// HMAC-SHA256 of the raw body, keyed with the app's client secret as UTF-8
// bytes. There is no timestamp, so the tolerance is ignored.
//
// The event id is X-Shopify-Event-Id (the same for every subscription to an
// event, unlike X-Shopify-Webhook-Id which names one delivery), the type
// X-Shopify-Topic and the time X-Shopify-Triggered-At.
package shopify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strings"
	"time"

	"github.com/hookline/hookline/providers"
)

// Name is the adapter's registered name.
const Name = "shopify"

// Headers read by the adapter.
const (
	HeaderHMAC         = "X-Shopify-Hmac-Sha256"
	HeaderHMACEvents   = "Shopify-Hmac-Sha256" // read when HeaderHMAC is absent
	HeaderEventID      = "X-Shopify-Event-Id"
	HeaderTopic        = "X-Shopify-Topic"
	HeaderTriggeredAt  = "X-Shopify-Triggered-At"
	HeaderWebhookID    = "X-Shopify-Webhook-Id" // one delivery; not the dedup key
	defaultEventIDSpec = "header:" + HeaderEventID
)

func init() {
	providers.Register(Name, func(cfg providers.Config) (providers.Provider, error) { return New(cfg) })
}

// Verifier is the Shopify adapter.
type Verifier struct {
	secrets [][]byte
}

// New returns a Shopify adapter for cfg. cfg.Tolerance is accepted and
// ignored: the scheme has no timestamp.
func New(cfg providers.Config) (*Verifier, error) {
	if len(cfg.Secrets) == 0 {
		return nil, fmt.Errorf("secrets: at least one secret is required")
	}
	if err := cfg.Decode(&struct{}{}); err != nil {
		return nil, fmt.Errorf("shopify: %w", err)
	}
	v := &Verifier{}
	for _, s := range cfg.Secrets {
		v.secrets = append(v.secrets, []byte(s))
	}
	return v, nil
}

// ParseSignature decodes a signature header value: the standard (padded)
// base64 of 32 bytes. Anything else is an error wrapping
// providers.ErrInvalidSignature.
func ParseSignature(value string) ([]byte, error) {
	sig, err := base64.StdEncoding.DecodeString(strings.TrimSpace(value))
	if err != nil || len(sig) != sha256.Size {
		return nil, fmt.Errorf("%w: want the base64 of an HMAC-SHA256", providers.ErrInvalidSignature)
	}
	return sig, nil
}

func mac(secret, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return m.Sum(nil)
}

// Verify implements providers.Verifier.
func (v *Verifier) Verify(r *providers.Request) error {
	value := r.Header.Get(HeaderHMAC)
	if value == "" {
		value = r.Header.Get(HeaderHMACEvents)
	}
	if value == "" {
		return fmt.Errorf("%w: %s header is required", providers.ErrNoSignature, HeaderHMAC)
	}
	sig, err := ParseSignature(value)
	if err != nil {
		return err
	}
	for _, secret := range v.secrets {
		if hmac.Equal(mac(secret, r.Body), sig) {
			return nil
		}
	}
	return fmt.Errorf("%w: %s does not match", providers.ErrInvalidSignature, HeaderHMAC)
}

// Resolve implements providers.Resolver from the headers only: the body is not
// read. An unparseable X-Shopify-Triggered-At leaves the time zero.
func (v *Verifier) Resolve(r *providers.Request) (providers.Event, error) {
	id := strings.TrimSpace(r.Header.Get(HeaderEventID))
	if id == "" {
		return providers.Event{}, fmt.Errorf("%w: %s header is empty", providers.ErrNoEventID, HeaderEventID)
	}
	ev := providers.Event{ID: id, Type: strings.TrimSpace(r.Header.Get(HeaderTopic))}
	if t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(r.Header.Get(HeaderTriggeredAt))); err == nil {
		ev.Time = t
	}
	return ev, nil
}

// Sign implements providers.Signer with the first secret (X-Shopify-Hmac-Sha256).
func (v *Verifier) Sign(r *providers.Request, _ time.Time) error {
	r.Header.Set(HeaderHMAC, base64.StdEncoding.EncodeToString(mac(v.secrets[0], r.Body)))
	return nil
}

// Describe implements providers.Describer. Shopify-Hmac-Sha256 is a
// fallback, read only without X-Shopify-Hmac-Sha256.
func (v *Verifier) Describe() providers.Description {
	return providers.Description{Headers: []string{HeaderHMAC}, FallbackHeaders: []string{HeaderHMACEvents}, DefaultEventID: defaultEventIDSpec}
}
