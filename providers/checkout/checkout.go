// Package checkout verifies Checkout.com webhooks: the Cko-Signature header
// carries the lowercase hex HMAC-SHA256 of the raw body, keyed with the
// webhook's signature key (the source's secrets). When the webhook is also
// configured with an authorization header key, set it as
// `checkout: {authorization_key: …}` and the Authorization header must carry
// exactly that value as well (compared in constant time).
//
// The scheme signs no timestamp, so tolerance is accepted and ignored. The event
// id is the body's `id` (evt_…), the type its `type`, the time its `created_on`
// (RFC 3339 ⚠: from the docs' examples, not a published schema).
package checkout

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"strings"
	"time"

	"github.com/hookline/hookline/providers"
)

// Name is the adapter's registered name.
const Name = "checkout"

// Header is the signature header.
const Header = "Cko-Signature"

// AuthorizationHeader carries the optional static authorization key.
const AuthorizationHeader = "Authorization"

func init() {
	providers.Register(Name, func(cfg providers.Config) (providers.Provider, error) { return New(cfg) })
}

// Settings is the `checkout:` block of a source.
type Settings struct {
	// AuthorizationKey, when set, must equal the Authorization header of every
	// delivery (the "authorization header key" of the Checkout.com webhook).
	// Empty: the Authorization header is not checked.
	AuthorizationKey string `yaml:"authorization_key"`
}

// scheme is how Checkout.com signs: lowercase hex; Strict refuses any other
// spelling, as a string comparison in its SDKs would.
var scheme = providers.BodyMAC{Header: Header, Strict: true}

// Verifier is the Checkout.com adapter.
type Verifier struct {
	keys [][]byte
	// authKey is the SHA-256 of Settings.AuthorizationKey, nil when unset;
	// comparing digests keeps the comparison constant-time whatever the lengths.
	authKey []byte
	// authValue is the key itself, for Sign.
	authValue string
}

// New returns a Checkout.com adapter for cfg.
func New(cfg providers.Config) (*Verifier, error) {
	if len(cfg.Secrets) == 0 {
		return nil, fmt.Errorf("secrets: at least one secret (the webhook signature key) is required")
	}
	var s Settings
	if err := cfg.Decode(&s); err != nil {
		return nil, fmt.Errorf("checkout: %w", err)
	}
	v := &Verifier{keys: providers.SecretKeys(cfg.Secrets)}
	if s.AuthorizationKey != "" {
		if strings.TrimSpace(s.AuthorizationKey) != s.AuthorizationKey {
			return nil, fmt.Errorf("checkout.authorization_key: must not start or end with whitespace")
		}
		sum := sha256.Sum256([]byte(s.AuthorizationKey))
		v.authKey, v.authValue = sum[:], s.AuthorizationKey
	}
	return v, nil
}

// Verify implements providers.Verifier.
func (v *Verifier) Verify(r *providers.Request) error {
	if v.authKey != nil {
		got := r.Header.Get(AuthorizationHeader)
		if got == "" {
			return fmt.Errorf("%w: %s header is required (checkout.authorization_key is set)", providers.ErrNoSignature, AuthorizationHeader)
		}
		sum := sha256.Sum256([]byte(got))
		if subtle.ConstantTimeCompare(sum[:], v.authKey) != 1 {
			return fmt.Errorf("%w: %s header does not match checkout.authorization_key", providers.ErrInvalidSignature, AuthorizationHeader)
		}
	}
	return scheme.Verify(r, v.keys)
}

// Resolve implements providers.Resolver: id, type and created_on.
func (v *Verifier) Resolve(r *providers.Request) (providers.Event, error) {
	f, err := providers.JSONFields(r.Body, "id", "type", "created_on")
	if err != nil {
		return providers.Event{}, err
	}
	if f[0] == "" {
		return providers.Event{}, fmt.Errorf("%w: body has no \"id\"", providers.ErrNoEventID)
	}
	ev := providers.Event{ID: f[0], Type: f[1]}
	if t, err := time.Parse(time.RFC3339, f[2]); err == nil {
		ev.Time = t.UTC()
	}
	return ev, nil
}

// Sign implements providers.Signer with the first secret, and sets the
// Authorization header when checkout.authorization_key is configured.
func (v *Verifier) Sign(r *providers.Request, _ time.Time) error {
	scheme.Sign(r, v.keys[0])
	if v.authKey != nil {
		r.Header.Set(AuthorizationHeader, v.authValue)
	}
	return nil
}

// SecretHeaders implements providers.SecretHeaderer: the Authorization
// header carries the static authorization key (checked when
// checkout.authorization_key is set), a credential rather than a signature,
// so it is never stored whether or not the source checks it.
func (v *Verifier) SecretHeaders() []string { return []string{AuthorizationHeader} }

// Describe implements providers.Describer. The id is the body's, which the
// signature covers.
func (v *Verifier) Describe() providers.Description {
	h := []string{Header}
	if v.authKey != nil {
		h = append(h, AuthorizationHeader)
	}
	return providers.Description{Headers: h, DefaultEventID: "json:id", DefaultEventType: "json:type", IDSigned: true}
}
