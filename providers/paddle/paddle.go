// Package paddle verifies Paddle Billing webhooks: the Paddle-Signature header
// `ts=<unix>;h1=<hex>[;h1=<hex>…]`, an HMAC-SHA256 over "<ts>:<raw body>"
// keyed with the whole `pdl_ntfset_…` secret as UTF-8 bytes. Every h1 is
// tried (Paddle sends several while a secret is rotated); other keys are
// ignored. Timestamps older or newer than the tolerance (default 5 seconds,
// as in Paddle's SDKs) are rejected.
//
// The event id is the body's `event_id` (the same across notification
// destinations, unlike `notification_id`), the type `event_type` and the time
// `occurred_at`.
package paddle

import (
	"crypto"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hookline/hookline/providers"
)

// Name is the adapter's registered name.
const Name = "paddle"

// Header is the signature header.
const Header = "Paddle-Signature"

// DefaultTolerance is the Paddle SDKs' default.
const DefaultTolerance = 5 * time.Second

func init() {
	providers.Register(Name, func(cfg providers.Config) (providers.Provider, error) { return New(cfg) })
}

// Verifier is the Paddle adapter.
type Verifier struct {
	keys      [][]byte
	tolerance time.Duration
	now       func() time.Time
}

// New returns a Paddle adapter for cfg.
func New(cfg providers.Config) (*Verifier, error) {
	if len(cfg.Secrets) == 0 {
		return nil, fmt.Errorf("secrets: at least one secret is required")
	}
	if err := cfg.Decode(&struct{}{}); err != nil {
		return nil, fmt.Errorf("paddle: %w", err)
	}
	v := &Verifier{keys: providers.SecretKeys(cfg.Secrets), tolerance: cfg.Tolerance, now: cfg.NowFunc()}
	if v.tolerance == 0 {
		v.tolerance = DefaultTolerance
	}
	return v, nil
}

// ParseHeader parses a Paddle-Signature value into its timestamp (the digits
// as sent, which are what is signed) and h1 signatures. Unknown keys and
// garbled h1 values are skipped; a missing or non-numeric ts, or no usable
// h1, is an error wrapping providers.ErrInvalidSignature.
func ParseHeader(value string) (ts string, h1 [][]byte, err error) {
	for part := range strings.SplitSeq(value, ";") {
		k, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			continue
		}
		switch k {
		case "ts":
			if !isDigits(val) || ts != "" {
				return "", nil, fmt.Errorf("%w: bad ts in %s", providers.ErrInvalidSignature, Header)
			}
			ts = val
		case "h1":
			sig, herr := hex.DecodeString(val)
			if herr != nil || len(sig) != sha256.Size {
				continue // a garbled signature never matches; others may
			}
			h1 = append(h1, sig)
		}
	}
	if ts == "" {
		return "", nil, fmt.Errorf("%w: no ts in %s", providers.ErrInvalidSignature, Header)
	}
	if len(h1) == 0 {
		return "", nil, fmt.Errorf("%w: no h1 signature in %s", providers.ErrInvalidSignature, Header)
	}
	return ts, h1, nil
}

// isDigits reports whether s is 1 to 18 ASCII digits (fits an int64).
func isDigits(s string) bool {
	if s == "" || len(s) > 18 {
		return false
	}
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// signed is what the signature covers before the body: "<ts>:".
func signed(ts string) []byte { return []byte(ts + ":") }

// Verify implements providers.Verifier.
func (v *Verifier) Verify(r *providers.Request) error {
	value := r.Header.Get(Header)
	if value == "" {
		return fmt.Errorf("%w: %s header is required", providers.ErrNoSignature, Header)
	}
	ts, sigs, err := ParseHeader(value)
	if err != nil {
		return err
	}
	n, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: bad ts in %s", providers.ErrInvalidSignature, Header)
	}
	if err := providers.CheckTimestamp(time.Unix(n, 0), v.now(), v.tolerance); err != nil {
		return fmt.Errorf("%w (tolerance %s)", err, v.tolerance)
	}
	if !providers.MatchHMAC(crypto.SHA256, v.keys, sigs, signed(ts), r.Body) {
		return fmt.Errorf("%w: no h1 signature matches", providers.ErrInvalidSignature)
	}
	return nil
}

// Resolve implements providers.Resolver: event_id, event_type, occurred_at.
func (v *Verifier) Resolve(r *providers.Request) (providers.Event, error) {
	f, err := providers.JSONFields(r.Body, "event_id", "event_type", "occurred_at")
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

// Sign implements providers.Signer with the first secret.
func (v *Verifier) Sign(r *providers.Request, now time.Time) error {
	ts := strconv.FormatInt(now.Unix(), 10)
	r.Header.Set(Header, "ts="+ts+";h1="+hex.EncodeToString(providers.HMAC(crypto.SHA256, v.keys[0], signed(ts), r.Body)))
	return nil
}

// Describe implements providers.Describer.
func (v *Verifier) Describe() providers.Description {
	// The id is the signed body's.
	return providers.Description{Headers: []string{Header}, DefaultEventID: "json:event_id", DefaultEventType: "json:event_type", DefaultTolerance: DefaultTolerance, IDSigned: true}
}
