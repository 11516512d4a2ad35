// Package gocardless verifies GoCardless webhooks: the Webhook-Signature
// header is the lowercase hex HMAC-SHA256 of the raw body, keyed with the
// endpoint secret as UTF-8 bytes. There is no signed timestamp, so the
// tolerance is ignored. GoCardless expects 498 Token Invalid for a bad
// signature (providers.SignatureStatuser).
//
// A delivery `{"events":[…],"meta":{"webhook_id":…}}` is a batch: the adapter
// is a providers.Splitter and each element of `events` is its own event, id
// `events[].id`, type `{resource_type}.{action}`, time `created_at`.
package gocardless

import (
	"fmt"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/hookline/hookline/providers"
)

// Name is the adapter's registered name.
const Name = "gocardless"

// Header is the signature header.
const Header = "Webhook-Signature"

// StatusTokenInvalid is the status GoCardless expects for a bad signature.
const StatusTokenInvalid = 498

func init() {
	providers.Register(Name, func(cfg providers.Config) (providers.Provider, error) { return New(cfg) })
}

// scheme is how GoCardless signs: lowercase hex; Strict refuses any other
// spelling.
var scheme = providers.BodyMAC{Header: Header, Strict: true}

// Verifier is the GoCardless adapter.
type Verifier struct {
	keys [][]byte
}

// New returns a GoCardless adapter for cfg.
func New(cfg providers.Config) (*Verifier, error) {
	if len(cfg.Secrets) == 0 {
		return nil, fmt.Errorf("secrets: at least one secret is required")
	}
	if err := cfg.Decode(&struct{}{}); err != nil {
		return nil, fmt.Errorf("gocardless: %w", err)
	}
	return &Verifier{keys: providers.SecretKeys(cfg.Secrets)}, nil
}

// ParseHeader decodes a Webhook-Signature value: one lowercase hex
// HMAC-SHA256, as GoCardless sends it.
func ParseHeader(value string) ([]byte, error) {
	sigs, err := scheme.Parse(value)
	if err != nil {
		return nil, err
	}
	return sigs[0], nil
}

// Verify implements providers.Verifier.
func (v *Verifier) Verify(r *providers.Request) error { return scheme.Verify(r, v.keys) }

// InvalidSignatureStatus implements providers.SignatureStatuser: 498 Token Invalid.
func (v *Verifier) InvalidSignatureStatus() int { return StatusTokenInvalid }

func event(el gjson.Result) (providers.Event, error) {
	f := []gjson.Result{el.Get("id"), el.Get("resource_type"), el.Get("action"), el.Get("created_at")}
	if f[0].Type != gjson.String || f[0].Str == "" {
		return providers.Event{}, fmt.Errorf("%w: event has no \"id\"", providers.ErrNoEventID)
	}
	ev := providers.Event{ID: f[0].Str}
	// Every GoCardless event has both: a type missing either half would
	// match filters it does not belong to ("payments." under payments.*).
	if strings.TrimSpace(f[1].Str) == "" || strings.TrimSpace(f[2].Str) == "" {
		return providers.Event{}, fmt.Errorf("%w: event %s has no \"resource_type\" or no \"action\" (its type is {resource_type}.{action})",
			providers.ErrMalformed, f[0].Str)
	}
	ev.Type = f[1].Str + "." + f[2].Str
	if t, err := time.Parse(time.RFC3339Nano, f[3].Str); err == nil {
		ev.Time = t
	}
	return ev, nil
}

// Split implements providers.Splitter: one item per element of `events`,
// its bytes a slice of the body.
func (v *Verifier) Split(r *providers.Request) ([]providers.Item, error) {
	if !gjson.ValidBytes(r.Body) {
		return nil, fmt.Errorf("%w: body is not valid JSON", providers.ErrMalformed)
	}
	list := gjson.GetBytes(r.Body, "events")
	if !list.IsArray() {
		return nil, fmt.Errorf("%w: body has no \"events\" array", providers.ErrMalformed)
	}
	return providers.ArrayItems(r.Body, list, "events", event)
}

// Resolve implements providers.Resolver with the first event (ingest splits
// GoCardless deliveries instead; Resolve serves callers that want one event).
func (v *Verifier) Resolve(r *providers.Request) (providers.Event, error) {
	items, err := v.Split(r)
	if err != nil {
		return providers.Event{}, err
	}
	return items[0].Event, nil
}

// Sign implements providers.Signer with the first secret. now is unused: the
// scheme has no timestamp.
func (v *Verifier) Sign(r *providers.Request, _ time.Time) error {
	scheme.Sign(r, v.keys[0])
	return nil
}

// Describe implements providers.Describer. The id's json path is relative to
// each item (an element of events), within the signed body.
func (v *Verifier) Describe() providers.Description {
	return providers.Description{Headers: []string{Header}, DefaultEventID: "json:id", IDSigned: true}
}
