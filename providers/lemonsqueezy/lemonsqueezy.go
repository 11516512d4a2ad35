// Package lemonsqueezy verifies Lemon Squeezy webhooks: the X-Signature header
// carries the lowercase hex HMAC-SHA256 of the raw body, keyed with the
// webhook's signing secret (the source's secrets).
//
// Lemon Squeezy sends no event id. The default id is the composite
// `{meta.event_name}:{data.type}:{data.id}:{data.attributes.updated_at}`, so
// retries of one delivery share an id while a later change of the same object
// (a new updated_at) is a new event. A body without data.id has no id. The
// type is meta.event_name (else the X-Event-Name header), the time
// data.attributes.updated_at (RFC 3339).
//
// Every part of the id is read from the signed body, except in a body without
// meta.event_name, whose name part comes from the unsigned X-Event-Name: for
// such a body only, the adapter's providers.ContentKeyer keys a replay under
// another X-Event-Name to the original.
//
// The scheme signs no timestamp, so tolerance is accepted and ignored. Lemon
// Squeezy counts only HTTP 200 as success and retries three times within a few
// minutes.
package lemonsqueezy

import (
	"fmt"
	"strings"
	"time"

	"github.com/hookline/hookline/providers"
)

// Name is the adapter's registered name.
const Name = "lemonsqueezy"

// Header is the signature header.
const Header = "X-Signature"

// EventNameHeader repeats meta.event_name.
const EventNameHeader = "X-Event-Name"

// DefaultEventID is the composite default id, in resolver notation
// (meta.event_name falls back to the X-Event-Name header).
const DefaultEventID = "{json:meta.event_name}:{json:data.type}:{json:data.id}:{json:data.attributes.updated_at}"

func init() {
	providers.Register(Name, func(cfg providers.Config) (providers.Provider, error) { return New(cfg) })
}

// scheme is how Lemon Squeezy signs: lowercase hex; Strict refuses any other
// spelling, as comparing the hex text would.
var scheme = providers.BodyMAC{Header: Header, Strict: true}

// Verifier is the Lemon Squeezy adapter.
type Verifier struct {
	keys [][]byte
}

// New returns a Lemon Squeezy adapter for cfg.
func New(cfg providers.Config) (*Verifier, error) {
	if len(cfg.Secrets) == 0 {
		return nil, fmt.Errorf("secrets: at least one secret (the webhook signing secret) is required")
	}
	if err := cfg.Decode(&struct{}{}); err != nil {
		return nil, fmt.Errorf("lemonsqueezy: %w", err)
	}
	return &Verifier{keys: providers.SecretKeys(cfg.Secrets)}, nil
}

// Verify implements providers.Verifier.
func (v *Verifier) Verify(r *providers.Request) error { return scheme.Verify(r, v.keys) }

// Resolve implements providers.Resolver with the composite id.
func (v *Verifier) Resolve(r *providers.Request) (providers.Event, error) {
	f, err := providers.JSONFields(r.Body, "meta.event_name", "data.type", "data.id", "data.attributes.updated_at")
	if err != nil {
		return providers.Event{}, err
	}
	name, typ, id, updated := f[0], f[1], f[2], f[3]
	if providers.Blank(name) {
		name = strings.TrimSpace(r.Header.Get(EventNameHeader))
	}
	if providers.Blank(id) {
		return providers.Event{}, fmt.Errorf("%w: body has no \"data.id\" (or a blank one)", providers.ErrNoEventID)
	}
	if providers.Blank(name) {
		return providers.Event{}, fmt.Errorf("%w: body has no \"meta.event_name\" (or a blank one) and no %s header", providers.ErrNoEventID, EventNameHeader)
	}
	// Every part of the composite id is required: without data.type or
	// updated_at, two different updates of one object would share an id and
	// the second would be dropped as a duplicate.
	if providers.Blank(typ) {
		return providers.Event{}, fmt.Errorf("%w: body has no \"data.type\" (or a blank one)", providers.ErrNoEventID)
	}
	if providers.Blank(updated) {
		return providers.Event{}, fmt.Errorf("%w: body has no \"data.attributes.updated_at\" (or a blank one)", providers.ErrNoEventID)
	}
	ev := providers.Event{ID: strings.Join([]string{name, typ, id, updated}, ":"), Type: name}
	if t, err := time.Parse(time.RFC3339, updated); err == nil {
		ev.Time = t.UTC()
	}
	return ev, nil
}

// Sign implements providers.Signer with the first secret.
func (v *Verifier) Sign(r *providers.Request, _ time.Time) error {
	scheme.Sign(r, v.keys[0])
	return nil
}

// ContentKey implements providers.ContentKeyer: the digest of the raw body
// when the body has no meta.event_name (the id's name part then comes from
// the unsigned X-Event-Name header), nil when the whole id is read from the
// signed body.
func (v *Verifier) ContentKey(r *providers.Request) []byte {
	if name, err := providers.JSONString(r.Body, "meta.event_name"); err == nil && name != "" {
		return nil
	}
	return providers.ContentDigest(Name, r.Body)
}

// Describe implements providers.Describer. The id is read from the signed
// body (Lemon Squeezy always sends meta.event_name; see ContentKey for a body
// without it).
func (v *Verifier) Describe() providers.Description {
	return providers.Description{Headers: []string{Header}, DefaultEventID: DefaultEventID, IDSigned: true}
}
