// Package mercadopago verifies Mercado Pago webhooks ⚠ (the scheme is
// described in Mercado Pago's docs but not confirmed by an SDK or published
// vector). The x-signature header is `ts=<ts>,v1=<hex>`; v1 is the hex
// HMAC-SHA256, keyed with the application's webhook secret (the source's
// secrets), of the manifest
//
//	id:<data.id>;request-id:<x-request-id>;ts:<ts>;
//
// The body itself is NOT signed: only the resource id, the request id and the
// time are authenticated, so the destination handler must fetch the resource
// (payment, order…) by id from the Mercado Pago API and act on what it fetched,
// never on the body's fields. data.id is the `data.id` query parameter of
// the notification URL (Mercado Pago appends `?data.id=…&type=…`), else the
// body's data.id, lowercased as the docs require for alphanumeric ids ⚠. As
// the docs describe, a part whose value is missing is left out of the manifest.
// ts is unix seconds or milliseconds (values above 1e12 are milliseconds);
// signatures older or newer than the tolerance (default 5 minutes) are
// rejected. Every v1 in the header and every configured secret is tried.
//
// The event id is the body's `id` (the notification id), else
// `{data.id}:{type}`; the type is the body's `type` ("payment"), else its
// `action` ("payment.updated": use `event_type: json:action` to route on it);
// the time its `date_created`. Since the body is unsigned, the notification id
// is not authenticated either: a notification replayed within the tolerance
// with another `id` would be a new event. The adapter is therefore a
// providers.ContentKeyer: the content key is the digest of the signed
// manifest, which such a replay must keep as it is, so ingest takes the
// replay for a duplicate. The handler should be idempotent all the same.
//
// The body is never signed, so Verify refuses a body that nests JSON deeper
// than providers.MaxJSONDepth (providers.ErrTooDeep) before anything reads it.
package mercadopago

import (
	"crypto"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hookline/hookline/providers"
)

// Name is the adapter's registered name.
const Name = "mercadopago"

// Header is the signature header.
const Header = "X-Signature"

// RequestIDHeader carries the request id, part of the signed manifest.
const RequestIDHeader = "X-Request-Id"

// DefaultTolerance is the default maximum signature age, both directions.
const DefaultTolerance = 5 * time.Minute

// msThreshold separates seconds from milliseconds: 1e12 seconds is in the
// year 33658, 1e12 milliseconds in 2001.
const msThreshold = 1_000_000_000_000

func init() {
	providers.Register(Name, func(cfg providers.Config) (providers.Provider, error) { return New(cfg) })
}

// Verifier is the Mercado Pago adapter.
type Verifier struct {
	keys      [][]byte
	tolerance time.Duration
	now       func() time.Time
}

// New returns a Mercado Pago adapter for cfg.
func New(cfg providers.Config) (*Verifier, error) {
	if len(cfg.Secrets) == 0 {
		return nil, fmt.Errorf("secrets: at least one secret (the webhook secret) is required")
	}
	if err := cfg.Decode(&struct{}{}); err != nil {
		return nil, fmt.Errorf("mercadopago: %w", err)
	}
	v := &Verifier{keys: providers.SecretKeys(cfg.Secrets), tolerance: cfg.Tolerance, now: cfg.NowFunc()}
	if v.tolerance == 0 {
		v.tolerance = DefaultTolerance
	}
	return v, nil
}

// ParseHeader parses an x-signature value `ts=<ts>,v1=<hex>[,v1=<hex>…]`.
// ts is returned as sent (it is signed as text) together with the time it
// denotes (seconds, or milliseconds above 1e12). Unknown keys and garbled v1
// values are ignored; a missing or non-numeric ts, or no usable v1, is an error
// wrapping providers.ErrInvalidSignature.
func ParseHeader(value string) (ts string, at time.Time, v1 [][]byte, err error) {
	for part := range strings.SplitSeq(value, ",") {
		k, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			continue
		}
		switch k {
		case "ts":
			if ts != "" {
				return "", time.Time{}, nil, fmt.Errorf("%w: more than one ts in %s", providers.ErrInvalidSignature, Header)
			}
			n, perr := strconv.ParseInt(val, 10, 64)
			if perr != nil || n <= 0 || strconv.FormatInt(n, 10) != val {
				// Only canonical digits: the text is signed, "+5" or "05" never match.
				return "", time.Time{}, nil, fmt.Errorf("%w: bad ts in %s", providers.ErrInvalidSignature, Header)
			}
			ts = val
			if n > msThreshold {
				at = time.UnixMilli(n)
			} else {
				at = time.Unix(n, 0)
			}
		case "v1":
			sig, herr := hex.DecodeString(val)
			if herr != nil || len(sig) != sha256.Size {
				continue // a garbled signature never matches; others may
			}
			v1 = append(v1, sig)
		}
	}
	if ts == "" {
		return "", time.Time{}, nil, fmt.Errorf("%w: no ts in %s", providers.ErrInvalidSignature, Header)
	}
	if len(v1) == 0 {
		return "", time.Time{}, nil, fmt.Errorf("%w: no v1 signature in %s", providers.ErrInvalidSignature, Header)
	}
	return ts, at, v1, nil
}

// dataID is the notification's data.id: the URL's query parameter, else the body's.
func dataID(r *providers.Request) string {
	if r.URL != nil {
		if id := r.URL.Query().Get("data.id"); id != "" {
			return id
		}
	}
	id, _ := providers.JSONString(r.Body, "data.id") // an unparseable body has none
	return id
}

// Manifest returns the signed text for a delivery with the given ts,
// leaving out the parts whose value is missing.
func Manifest(r *providers.Request, ts string) string {
	var b strings.Builder
	if id := dataID(r); id != "" {
		b.WriteString("id:" + strings.ToLower(id) + ";") // ⚠ the docs: alphanumeric ids in lowercase
	}
	if rid := r.Header.Get(RequestIDHeader); rid != "" {
		b.WriteString("request-id:" + rid + ";")
	}
	b.WriteString("ts:" + ts + ";")
	return b.String()
}

// Verify implements providers.Verifier. The body, which the signature does
// not cover and which the manifest may read data.id from, is refused with
// providers.ErrTooDeep when it nests deeper than providers.MaxJSONDepth.
func (v *Verifier) Verify(r *providers.Request) error {
	value := r.Header.Get(Header)
	if value == "" {
		return fmt.Errorf("%w: %s header is required", providers.ErrNoSignature, Header)
	}
	ts, at, sigs, err := ParseHeader(value)
	if err != nil {
		return err
	}
	if err := providers.CheckTimestamp(at, v.now(), v.tolerance); err != nil {
		return fmt.Errorf("%w (tolerance %s)", err, v.tolerance)
	}
	if err := providers.CheckJSONDepth(r.Body); err != nil {
		return err
	}
	if !providers.MatchHMAC(crypto.SHA256, v.keys, sigs, []byte(Manifest(r, ts))) {
		return fmt.Errorf("%w: no v1 signature matches", providers.ErrInvalidSignature)
	}
	return nil
}

// ContentKey implements providers.ContentKeyer: the digest of the manifest
// the signature covers (data.id, x-request-id and ts). A replay under another
// body `id` must keep the manifest to verify, hence the key; a new
// notification has a new ts and request id. nil when x-signature cannot be
// read.
func (v *Verifier) ContentKey(r *providers.Request) []byte {
	ts, _, _, err := ParseHeader(r.Header.Get(Header))
	if err != nil {
		return nil
	}
	return providers.ContentDigest(Name, []byte(Manifest(r, ts)))
}

// Resolve implements providers.Resolver: id (else data.id:type), type (else
// action) and date_created.
func (v *Verifier) Resolve(r *providers.Request) (providers.Event, error) {
	f, err := providers.JSONFields(r.Body, "id", "type", "action", "date_created")
	if err != nil {
		return providers.Event{}, err
	}
	ev := providers.Event{ID: f[0], Type: f[1]}
	if ev.Type == "" {
		ev.Type = f[2]
	}
	if ev.ID == "" {
		if did := dataID(r); !providers.Blank(did) {
			ev.ID = did + ":" + ev.Type
		}
	}
	if ev.ID == "" {
		return providers.Event{}, fmt.Errorf("%w: body has no \"id\" and no \"data.id\"", providers.ErrNoEventID)
	}
	if t, err := time.Parse(time.RFC3339, f[3]); err == nil {
		ev.Time = t.UTC()
	}
	return ev, nil
}

// Sign implements providers.Signer with the first secret, with a ts in
// milliseconds. It sets an x-request-id when the request has none.
func (v *Verifier) Sign(r *providers.Request, now time.Time) error {
	if r.Header.Get(RequestIDHeader) == "" {
		r.Header.Set(RequestIDHeader, strings.ToLower(rand.Text()))
	}
	ts := strconv.FormatInt(now.UnixMilli(), 10)
	r.Header.Set(Header, "ts="+ts+",v1="+hex.EncodeToString(providers.HMAC(crypto.SHA256, v.keys[0], []byte(Manifest(r, ts)))))
	return nil
}

// Describe implements providers.Describer. The fallback id's parts are the
// data.id of the manifest (query, else body) and the resolved type.
func (v *Verifier) Describe() providers.Description {
	// The body, hence its id, is not signed (see ContentKey).
	return providers.Description{Headers: []string{Header, RequestIDHeader}, DefaultEventID: "json:id, else {data.id}:{type}", DefaultTolerance: DefaultTolerance, IDSigned: false}
}
