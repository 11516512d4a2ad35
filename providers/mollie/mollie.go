// Package mollie receives Mollie webhooks.
//
// # Classic webhooks are unsigned
//
// A classic Mollie webhook (the webhookUrl of a payment, order, refund…) is a
// form POST carrying only the resource id, `id=tr_…`, and no signature: anyone
// who knows the URL can post it. Mollie's documented pattern is to treat the
// delivery as a hint only: fetch the resource by id from the Mollie API (with
// your API key) and act on the status you fetched, never on the delivery. So a
// source must opt in explicitly with `mollie: {allow_unsigned: true}`, and its
// destination handler must do that fetch before acting.
//
// # Dedup: use a short dedup_window
//
// The event id defaults to the form field `id`, which is the resource id, not
// an event id: a payment that goes open → paid → refunded is posted three
// times with the same id. With the default dedup_window the later deliveries
// would be answered as duplicates and never forwarded. Because the handler
// fetches the current status anyway, set a short dedup_window on Mollie
// sources (minutes: long enough to absorb Mollie's retries of one delivery,
// short enough to let the next status change through), and make the handler
// idempotent on (id, fetched status).
//
// # Next-gen webhooks ⚠
//
// Mollie's next-gen (beta) webhooks carry an X-Mollie-Signature header, the hex
// HMAC-SHA256 of the raw body keyed with the webhook's signing secret. The
// format is not confirmed beyond Mollie's best-practice page; an optional
// "sha256=" prefix is tolerated. When secrets are configured, a delivery that
// carries the header must match one of them (rotation). Without allow_unsigned,
// configured secrets put the source in signed-only mode: a delivery without the
// header is rejected. Next-gen bodies are JSON: their event id is `id`, type
// `type` and time `createdAt` ⚠.
//
// # What allow_unsigned accepts
//
// allow_unsigned covers classic deliveries only: a form body (declared
// application/x-www-form-urlencoded, or with no Content-Type) whose one field
// is a non-empty `id`, given once. Any other body, a next-gen JSON one above
// all, needs a valid X-Mollie-Signature under a configured secret, with or
// without allow_unsigned: an unsigned one is refused with ErrNoSignature, a
// signed one on a source without secrets (nothing to check it against) with
// ErrInvalidSignature. So allow_unsigned never lets a forged next-gen event
// through. A classic delivery that carries X-Mollie-Signature is checked
// against the secrets when there are some, and treated as unsigned when there
// are none.
//
// Neither kind signs a timestamp, so tolerance is accepted and ignored.
package mollie

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hookline/hookline/providers"
)

// Name is the adapter's registered name.
const Name = "mollie"

// Header is the next-gen signature header.
const Header = "X-Mollie-Signature"

// Settings is the `mollie:` block of a source.
type Settings struct {
	// AllowUnsigned accepts classic, unsigned deliveries. Required unless
	// secrets are configured (next-gen signed-only mode).
	AllowUnsigned bool `yaml:"allow_unsigned"`
}

func init() {
	providers.Register(Name, func(cfg providers.Config) (providers.Provider, error) { return New(cfg) })
}

// ErrUnsignedNotAllowed is returned by New for a source with neither
// allow_unsigned nor secrets.
var ErrUnsignedNotAllowed = errors.New("mollie.allow_unsigned: classic Mollie webhooks are unsigned; set allow_unsigned: true to accept them, and have your handler fetch the resource by id from the Mollie API before acting")

// scheme and prefixedScheme are how Mollie writes X-Mollie-Signature:
// lowercase hex, bare as Mollie documents it, or ⚠ (not confirmed) after the
// "sha256=" common to such headers. Strict refuses any other spelling.
var (
	scheme         = providers.BodyMAC{Header: Header, Strict: true}
	prefixedScheme = providers.BodyMAC{Header: Header, Strict: true, Prefix: "sha256="}
)

// Verifier is the Mollie adapter.
type Verifier struct {
	keys          [][]byte
	allowUnsigned bool
}

// New returns a Mollie adapter for cfg.
func New(cfg providers.Config) (*Verifier, error) {
	var s Settings
	if err := cfg.Decode(&s); err != nil {
		return nil, fmt.Errorf("mollie: %w", err)
	}
	if !s.AllowUnsigned && len(cfg.Secrets) == 0 {
		return nil, ErrUnsignedNotAllowed
	}
	return &Verifier{keys: providers.SecretKeys(cfg.Secrets), allowUnsigned: s.AllowUnsigned}, nil
}

// IsClassic reports whether r is a classic Mollie delivery: a form body
// (declared application/x-www-form-urlencoded, or with no Content-Type) whose
// only field is `id`, given once with a non-empty value. It is what
// allow_unsigned accepts without a signature; Resolve reads its id from the
// form.
func IsClassic(r *providers.Request) bool {
	// The media type as Resolve reads it (a Content-Type that does not parse
	// is still application/json to Resolve), then the form as ParseForm does.
	switch r.ContentType() {
	case "", "application/x-www-form-urlencoded":
	default:
		return false
	}
	vals, err := providers.ParseForm(r)
	if err != nil || len(vals) != 1 {
		return false
	}
	ids := vals["id"]
	return len(ids) == 1 && strings.TrimSpace(ids[0]) != ""
}

// Verify implements providers.Verifier. With allow_unsigned, a classic
// delivery (see IsClassic) without X-Mollie-Signature is accepted: authenticity
// then rests on the handler fetching the resource from the Mollie API. Every
// other delivery must carry a signature that one of the secrets produced.
func (v *Verifier) Verify(r *providers.Request) error {
	sig := r.Header.Get(Header)
	if sig == "" || len(v.keys) == 0 {
		// Unsigned, or signed with nothing to check it against (then
		// allow_unsigned is set: New requires it without secrets): as good
		// as unsigned, which only a classic delivery may be.
		if v.allowUnsigned && IsClassic(r) {
			return nil
		}
		switch {
		case sig != "":
			return fmt.Errorf("%w: %s cannot be checked without secrets, and only classic deliveries (a form body id=…) are accepted unsigned", providers.ErrInvalidSignature, Header)
		case v.allowUnsigned:
			return fmt.Errorf("%w: %s header is required (mollie.allow_unsigned accepts only classic deliveries: a form body id=…)", providers.ErrNoSignature, Header)
		}
		return fmt.Errorf("%w: %s header is required (classic Mollie webhooks are unsigned: set mollie.allow_unsigned: true to accept them)", providers.ErrNoSignature, Header)
	}
	if strings.HasPrefix(sig, prefixedScheme.Prefix) {
		return prefixedScheme.Verify(r, v.keys)
	}
	return scheme.Verify(r, v.keys)
}

// Resolve implements providers.Resolver. A form body (classic) yields the
// resource id and no type or time; a JSON body (next-gen ⚠) yields id, type
// and createdAt.
func (v *Verifier) Resolve(r *providers.Request) (providers.Event, error) {
	if r.ContentType() == "application/json" {
		f, err := providers.JSONFields(r.Body, "id", "type", "createdAt")
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
	id, err := providers.FormValue(r, "id")
	if err != nil {
		return providers.Event{}, err
	}
	id = strings.TrimSpace(id)
	if id == "" {
		return providers.Event{}, fmt.Errorf("%w: form has no \"id\"", providers.ErrNoEventID)
	}
	return providers.Event{ID: id}, nil
}

// Sign implements providers.Signer: it sets a next-gen X-Mollie-Signature
// with the first secret. A source without secrets cannot sign (classic
// deliveries need no signature: send them as they are).
func (v *Verifier) Sign(r *providers.Request, _ time.Time) error {
	if len(v.keys) == 0 {
		return fmt.Errorf("mollie: no secret to sign with (classic Mollie webhooks are unsigned)")
	}
	scheme.Sign(r, v.keys[0])
	return nil
}

// Describe implements providers.Describer. Without allow_unsigned every
// accepted delivery is signed over its body, its id included; with it, the id
// of a classic delivery is covered by nothing (and, nothing being signed,
// there is no content to key a replay on: the adapter is no
// providers.ContentKeyer).
func (v *Verifier) Describe() providers.Description {
	return providers.Description{Headers: []string{Header}, DefaultEventID: "form:id, else json:id", IDSigned: !v.allowUnsigned}
}
