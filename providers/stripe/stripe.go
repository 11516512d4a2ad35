// Package stripe verifies Stripe webhooks: the Stripe-Signature header
// `t=<unix>,v1=<hex>[,v1=<hex>…]`, an HMAC-SHA256 over "<t>.<raw body>" keyed
// with the whole `whsec_…` secret as UTF-8 bytes. Only v1 signatures count
// (test mode's v0 is ignored); timestamps older or newer than the tolerance
// (default 5 minutes) are rejected. The event id is the body's `id`.
package stripe

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
const Name = "stripe"

// Header is the signature header.
const Header = "Stripe-Signature"

// DefaultTolerance is stripe-go's DefaultTolerance.
const DefaultTolerance = 300 * time.Second

func init() {
	providers.Register(Name, func(cfg providers.Config) (providers.Provider, error) { return New(cfg) })
}

// Verifier is the Stripe adapter.
type Verifier struct {
	keys      [][]byte
	tolerance time.Duration
	now       func() time.Time
}

// New returns a Stripe adapter for cfg.
func New(cfg providers.Config) (*Verifier, error) {
	if len(cfg.Secrets) == 0 {
		return nil, fmt.Errorf("secrets: at least one secret is required")
	}
	if err := cfg.Decode(&struct{}{}); err != nil {
		return nil, fmt.Errorf("stripe: %w", err)
	}
	v := &Verifier{keys: providers.SecretKeys(cfg.Secrets), tolerance: cfg.Tolerance, now: cfg.NowFunc()}
	if v.tolerance == 0 {
		v.tolerance = DefaultTolerance
	}
	return v, nil
}

// ParseHeader parses a Stripe-Signature value into its timestamp and v1
// signatures. Unknown schemes are ignored; a missing t or no v1 is an error.
func ParseHeader(value string) (ts int64, v1 [][]byte, err error) {
	haveTS := false
	for part := range strings.SplitSeq(value, ",") {
		k, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			continue
		}
		switch k {
		case "t":
			n, perr := strconv.ParseInt(val, 10, 64)
			if perr != nil {
				return 0, nil, fmt.Errorf("%w: bad timestamp", providers.ErrInvalidSignature)
			}
			ts, haveTS = n, true
		case "v1":
			sig, herr := hex.DecodeString(val)
			if herr != nil || len(sig) != sha256.Size {
				continue // a garbled signature never matches; others may
			}
			v1 = append(v1, sig)
		}
	}
	if !haveTS {
		return 0, nil, fmt.Errorf("%w: no timestamp in %s", providers.ErrInvalidSignature, Header)
	}
	if len(v1) == 0 {
		return 0, nil, fmt.Errorf("%w: no v1 signature in %s", providers.ErrInvalidSignature, Header)
	}
	return ts, v1, nil
}

// signed is what the signature covers before the body: "<t>.".
func signed(ts int64) []byte { return append(strconv.AppendInt(nil, ts, 10), '.') }

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
	if err := providers.CheckTimestamp(time.Unix(ts, 0), v.now(), v.tolerance); err != nil {
		return fmt.Errorf("%w (tolerance %s)", err, v.tolerance)
	}
	if !providers.MatchHMAC(crypto.SHA256, v.keys, sigs, signed(ts), r.Body) {
		return fmt.Errorf("%w: no v1 signature matches", providers.ErrInvalidSignature)
	}
	return nil
}

// Resolve implements providers.Resolver: id, type and created.
func (v *Verifier) Resolve(r *providers.Request) (providers.Event, error) {
	f, err := providers.JSONFields(r.Body, "id", "type", "created")
	if err != nil {
		return providers.Event{}, err
	}
	if f[0] == "" {
		return providers.Event{}, fmt.Errorf("%w: body has no \"id\"", providers.ErrNoEventID)
	}
	ev := providers.Event{ID: f[0], Type: f[1]}
	if n, err := strconv.ParseInt(f[2], 10, 64); err == nil {
		ev.Time = time.Unix(n, 0).UTC()
	}
	return ev, nil
}

// Sign implements providers.Signer with the first secret.
func (v *Verifier) Sign(r *providers.Request, now time.Time) error {
	ts := now.Unix()
	r.Header.Set(Header, "t="+strconv.FormatInt(ts, 10)+",v1="+hex.EncodeToString(providers.HMAC(crypto.SHA256, v.keys[0], signed(ts), r.Body)))
	return nil
}

// Describe implements providers.Describer.
func (v *Verifier) Describe() providers.Description {
	// The id is the signed body's.
	return providers.Description{Headers: []string{Header}, DefaultEventID: "json:id", DefaultEventType: "json:type",
		DefaultTolerance: DefaultTolerance, IDSigned: true}
}
