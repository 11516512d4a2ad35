// Package shopify verifies Shopify webhooks: the X-Shopify-Hmac-Sha256 header
// (Shopify-Hmac-Sha256 for the new Events deliveries) holds the base64
// HMAC-SHA256 of the raw body, keyed with the app's client secret as UTF-8
// bytes. There is no timestamp, so the tolerance is ignored.
//
// The event id is X-Shopify-Event-Id (the same for every subscription to an
// event, unlike X-Shopify-Webhook-Id which names one delivery), the type
// X-Shopify-Topic and the time X-Shopify-Triggered-At; an Events delivery,
// which names them without the X- (Shopify-Event-Id, Shopify-Topic,
// Shopify-Triggered-At), is read from those when the X- header is absent.
// The headers are not
// signed, so the adapter is a providers.ContentKeyer: a captured delivery
// replayed under a fresh X-Shopify-Event-Id has the same content key, the
// digest of its body, and is a duplicate of the original.
package shopify

import (
	"fmt"
	"strings"
	"time"

	"github.com/hookline/hookline/providers"
)

// Name is the adapter's registered name.
const Name = "shopify"

// Headers read by the adapter.
const (
	HeaderHMAC        = "X-Shopify-Hmac-Sha256"
	HeaderHMACEvents  = "Shopify-Hmac-Sha256" // read when HeaderHMAC is absent
	HeaderEventID     = "X-Shopify-Event-Id"
	HeaderTopic       = "X-Shopify-Topic"
	HeaderTriggeredAt = "X-Shopify-Triggered-At"
	HeaderWebhookID   = "X-Shopify-Webhook-Id" // one delivery; not the dedup key
	// An Events delivery's names, read when the X- header is absent.
	HeaderEventIDEvents     = "Shopify-Event-Id"
	HeaderTopicEvents       = "Shopify-Topic"
	HeaderTriggeredAtEvents = "Shopify-Triggered-At"
	defaultEventIDSpec      = "header:" + HeaderEventID
)

func init() {
	providers.Register(Name, func(cfg providers.Config) (providers.Provider, error) { return New(cfg) })
}

// scheme and eventsScheme are how Shopify writes its two headers: standard
// base64, white space around it ignored.
var (
	scheme       = providers.BodyMAC{Header: HeaderHMAC, Encoding: providers.Base64}
	eventsScheme = providers.BodyMAC{Header: HeaderHMACEvents, Encoding: providers.Base64}
)

// Verifier is the Shopify adapter.
type Verifier struct {
	keys [][]byte
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
	return &Verifier{keys: providers.SecretKeys(cfg.Secrets)}, nil
}

// ParseSignature decodes a signature header value: the standard (padded)
// base64 of 32 bytes. Anything else is an error wrapping
// providers.ErrInvalidSignature.
func ParseSignature(value string) ([]byte, error) {
	sigs, err := scheme.Parse(value)
	if err != nil {
		return nil, err
	}
	return sigs[0], nil
}

// Verify implements providers.Verifier. Shopify-Hmac-Sha256 is read only
// without X-Shopify-Hmac-Sha256.
func (v *Verifier) Verify(r *providers.Request) error {
	if r.Header.Get(HeaderHMAC) == "" && r.Header.Get(HeaderHMACEvents) != "" {
		return eventsScheme.Verify(r, v.keys)
	}
	return scheme.Verify(r, v.keys)
}

// Resolve implements providers.Resolver from the headers only: the body is not
// read. Each header is read under its Events name when its X- name is
// absent. An unparseable triggered-at time leaves the time zero.
func (v *Verifier) Resolve(r *providers.Request) (providers.Event, error) {
	id := header(r, HeaderEventID, HeaderEventIDEvents)
	if id == "" {
		return providers.Event{}, fmt.Errorf("%w: %s header is empty (and so is %s)", providers.ErrNoEventID, HeaderEventID, HeaderEventIDEvents)
	}
	ev := providers.Event{ID: id, Type: header(r, HeaderTopic, HeaderTopicEvents)}
	if t, err := time.Parse(time.RFC3339Nano, header(r, HeaderTriggeredAt, HeaderTriggeredAtEvents)); err == nil {
		ev.Time = t
	}
	return ev, nil
}

// header is name's value, or eventsName's when name is absent, trimmed.
func header(r *providers.Request, name, eventsName string) string {
	if vs := r.Header.Values(name); len(vs) > 0 {
		return strings.TrimSpace(vs[0])
	}
	return strings.TrimSpace(r.Header.Get(eventsName))
}

// Sign implements providers.Signer with the first secret (X-Shopify-Hmac-Sha256).
func (v *Verifier) Sign(r *providers.Request, _ time.Time) error {
	scheme.Sign(r, v.keys[0])
	return nil
}

// ContentKey implements providers.ContentKeyer: the digest of the raw body,
// all that the signature covers (X-Shopify-Event-Id is not signed).
func (v *Verifier) ContentKey(r *providers.Request) []byte {
	return providers.ContentDigest(Name, r.Body)
}

// Describe implements providers.Describer. Shopify-Hmac-Sha256 is a
// fallback, read only without X-Shopify-Hmac-Sha256. The id header is not
// signed (IDSigned false; see ContentKey).
func (v *Verifier) Describe() providers.Description {
	return providers.Description{Headers: []string{HeaderHMAC}, FallbackHeaders: []string{HeaderHMACEvents}, DefaultEventID: defaultEventIDSpec,
		DefaultEventType: "header:" + HeaderTopic, IDSigned: false}
}
