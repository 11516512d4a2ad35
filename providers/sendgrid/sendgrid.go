// Package sendgrid verifies Twilio SendGrid's Signed Event Webhook. SendGrid
// signs with its own ECDSA key pair, not a shared secret:
//
//	X-Twilio-Email-Event-Webhook-Timestamp  Unix seconds, decimal
//	X-Twilio-Email-Event-Webhook-Signature  base64 of an ECDSA P-256 signature, ASN.1 DER
//
// The signed bytes are the timestamp header's value followed by the raw body,
// hashed with SHA-256 (the official SDK, @sendgrid/eventwebhook, verifies
// `timestamp + payload`). The source's `secrets` are SendGrid's Verification
// Keys: the base64 of the DER SubjectPublicKeyInfo of a P-256 public key, as
// SendGrid shows it (a PEM PUBLIC KEY block is accepted too). Every key is
// tried (rotation). No key is fetched: verification needs no network.
//
// The adapter cannot sign (only SendGrid holds the private key), so it is no
// providers.Signer and `hookline send` cannot sign for it; SignWithKey signs a
// delivery with a private key, for tests and for anything emulating SendGrid.
//
// With a tolerance configured (none by default: see DefaultTolerance), the
// timestamp must be within it, both directions; it is checked before the
// signature. A signature must be
// canonical base64 (padded) of strict DER with positive integers, at most 256
// characters: anything else is an invalid signature. The scheme does not
// delimit the timestamp from the body, but the signed bytes cannot be split
// otherwise: the body must be a JSON array, so it starts with "[", never a
// digit, and the timestamp is every digit before it.
//
// The body is a JSON array of events and the adapter is a providers.Splitter:
// each element is its own event, id `sg_event_id`, type `event`, time
// `timestamp` (Unix seconds). An event without a `sg_event_id` makes the whole
// delivery a providers.ErrNoEventID.
package sendgrid

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/asn1"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/hookline/hookline/providers"
)

// Name is the adapter's registered name.
const Name = "sendgrid"

// The signature headers (canonical form).
const (
	HeaderSignature = "X-Twilio-Email-Event-Webhook-Signature"
	HeaderTimestamp = "X-Twilio-Email-Event-Webhook-Timestamp"
)

// DefaultTolerance bounds the age of the signed timestamp: none. SendGrid
// documents no window, its SDK checks none, and whether a retry (SendGrid
// retries for 24 hours) is signed afresh is not documented: a window would
// risk refusing every retry after an outage. A replayed delivery is still a
// duplicate: its events' ids are signed. A source's `tolerance` sets one.
const DefaultTolerance time.Duration = 0

const (
	// maxSignature bounds the signature header: a DER P-256 signature is at
	// most 72 bytes, 96 base64 characters.
	maxSignature = 256
	// maxTimestamp bounds the timestamp header (an int64 has 19 digits).
	maxTimestamp = 19
)

func init() {
	providers.Register(Name, func(cfg providers.Config) (providers.Provider, error) { return New(cfg) })
}

// Verifier is the SendGrid adapter.
type Verifier struct {
	keys      []*ecdsa.PublicKey
	tolerance time.Duration
	now       func() time.Time
}

// New returns a SendGrid adapter for cfg. Each secret is a Verification Key.
func New(cfg providers.Config) (*Verifier, error) {
	if len(cfg.Secrets) == 0 {
		return nil, fmt.Errorf("secrets: at least one SendGrid verification key is required")
	}
	if err := cfg.Decode(&struct{}{}); err != nil {
		return nil, fmt.Errorf("sendgrid: %w", err)
	}
	v := &Verifier{tolerance: cfg.Tolerance, now: cfg.NowFunc()}
	for i, s := range cfg.Secrets {
		k, err := ParsePublicKey(s)
		if err != nil {
			// Never echo the key or the parser's message (it may quote bytes).
			return nil, fmt.Errorf("secrets[%d]: %w", i, err)
		}
		v.keys = append(v.keys, k)
	}
	return v, nil
}

// errKey is what ParsePublicKey says of anything that is not a verification key.
var errKey = errors.New("want a SendGrid verification key: the base64 of a DER P-256 public key (SubjectPublicKeyInfo), or a PEM PUBLIC KEY block")

// ParsePublicKey reads a Verification Key as SendGrid shows it: the base64
// (standard alphabet; whitespace and line breaks ignored) of the DER
// SubjectPublicKeyInfo of a P-256 public key, or the same in a PEM PUBLIC KEY
// block. Any other key type or curve, trailing data and a point not on the
// curve are refused.
func ParsePublicKey(s string) (*ecdsa.PublicKey, error) {
	s = strings.TrimSpace(s)
	var der []byte
	if strings.HasPrefix(s, "-----BEGIN") {
		block, rest := pem.Decode([]byte(s))
		if block == nil || block.Type != "PUBLIC KEY" || len(bytes.TrimSpace(rest)) != 0 {
			return nil, errKey
		}
		der = block.Bytes
	} else {
		b, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(s), ""))
		if err != nil {
			return nil, errKey
		}
		der = b
	}
	k, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, errKey
	}
	pub, ok := k.(*ecdsa.PublicKey)
	if !ok || pub.Curve != elliptic.P256() {
		return nil, errKey
	}
	return pub, nil
}

// EncodePublicKey returns pub as SendGrid shows a Verification Key: the base64
// of its DER SubjectPublicKeyInfo.
func EncodePublicKey(pub *ecdsa.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(der), nil
}

// ParseSignature decodes an X-Twilio-Email-Event-Webhook-Signature value: the
// canonical, padded base64 of an ASN.1 DER SEQUENCE of two positive INTEGERs
// (r, s) of at most 256 bits, nothing after it. It returns the DER bytes.
// Errors wrap providers.ErrInvalidSignature.
func ParseSignature(value string) ([]byte, error) {
	bad := func(what string) ([]byte, error) {
		return nil, fmt.Errorf("%w: %s %s", providers.ErrInvalidSignature, HeaderSignature, what)
	}
	if len(value) > maxSignature {
		return bad("is too long")
	}
	// Go's decoder skips line breaks; a header value never carries any.
	if strings.ContainsAny(value, "\r\n") {
		return bad("is not base64")
	}
	der, err := base64.StdEncoding.Strict().DecodeString(value)
	if err != nil {
		return bad("is not base64")
	}
	var sig struct{ R, S *big.Int }
	rest, err := asn1.Unmarshal(der, &sig)
	if err != nil || len(rest) != 0 || sig.R == nil || sig.S == nil ||
		sig.R.Sign() <= 0 || sig.S.Sign() <= 0 || sig.R.BitLen() > 256 || sig.S.BitLen() > 256 {
		return bad("is not a DER ECDSA P-256 signature")
	}
	// encoding/asn1 reads a SEQUENCE with more elements too: the signature
	// must be exactly the DER of (r, s).
	if canon, err := asn1.Marshal(sig); err != nil || !bytes.Equal(canon, der) {
		return bad("is not a DER ECDSA P-256 signature")
	}
	return der, nil
}

// ParseTimestamp reads an X-Twilio-Email-Event-Webhook-Timestamp value: Unix
// seconds, 1 to 19 decimal digits and nothing else. Errors wrap
// providers.ErrInvalidSignature.
func ParseTimestamp(value string) (int64, error) {
	if value == "" || len(value) > maxTimestamp || strings.TrimLeft(value, "0123456789") != "" {
		return 0, fmt.Errorf("%w: %s is not Unix seconds", providers.ErrInvalidSignature, HeaderTimestamp)
	}
	n, err := strconv.ParseInt(value, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %s is not Unix seconds", providers.ErrInvalidSignature, HeaderTimestamp)
	}
	return n, nil
}

// digest is the SHA-256 of what SendGrid signs: the timestamp header's value
// followed by the raw body.
func digest(timestamp string, body []byte) []byte {
	h := sha256.New()
	h.Write([]byte(timestamp))
	h.Write(body)
	return h.Sum(nil)
}

// Verify implements providers.Verifier: the timestamp within the tolerance,
// then the signature against every configured key.
func (v *Verifier) Verify(r *providers.Request) error {
	sigValue := strings.TrimSpace(r.Header.Get(HeaderSignature))
	tsValue := strings.TrimSpace(r.Header.Get(HeaderTimestamp))
	if sigValue == "" || tsValue == "" {
		return fmt.Errorf("%w: %s and %s headers are required", providers.ErrNoSignature, HeaderSignature, HeaderTimestamp)
	}
	ts, err := ParseTimestamp(tsValue)
	if err != nil {
		return err
	}
	sig, err := ParseSignature(sigValue)
	if err != nil {
		return err
	}
	if err := providers.CheckTimestamp(time.Unix(ts, 0), v.now(), v.tolerance); err != nil {
		return fmt.Errorf("%w (tolerance %s)", err, v.tolerance)
	}
	d := digest(tsValue, r.Body)
	for _, k := range v.keys { // every key: rotation
		if ecdsa.VerifyASN1(k, d, sig) {
			return nil
		}
	}
	return fmt.Errorf("%w: %s does not match", providers.ErrInvalidSignature, HeaderSignature)
}

// event resolves one element of the array.
func event(el gjson.Result) (providers.Event, error) {
	id := el.Get("sg_event_id")
	if id.Type != gjson.String || strings.TrimSpace(id.Str) == "" {
		return providers.Event{}, fmt.Errorf("%w: event has no \"sg_event_id\"", providers.ErrNoEventID)
	}
	ev := providers.Event{ID: strings.Clone(id.Str)} // el aliases the body (providers.ParseJSON)
	if t := el.Get("event"); t.Type == gjson.String {
		ev.Type = strings.Clone(t.Str)
	}
	if ts := el.Get("timestamp"); ts.Type == gjson.Number {
		if n, err := strconv.ParseInt(ts.Raw, 10, 64); err == nil {
			ev.Time = time.Unix(n, 0).UTC()
		}
	}
	return ev, nil
}

// Split implements providers.Splitter: one item per element of the body's
// array, its bytes a slice of the body.
func (v *Verifier) Split(r *providers.Request) ([]providers.Item, error) {
	if err := providers.CheckJSONDepth(r.Body); err != nil {
		return nil, err
	}
	if !gjson.ValidBytes(r.Body) {
		return nil, fmt.Errorf("%w: body is not valid JSON", providers.ErrMalformed)
	}
	list := providers.ParseJSON(r.Body)
	if !list.IsArray() {
		return nil, fmt.Errorf("%w: body is not a JSON array of events", providers.ErrMalformed)
	}
	return providers.ArrayItems(r.Body, list, "body", event)
}

// Resolve implements providers.Resolver with the first event (ingest splits
// SendGrid deliveries instead; Resolve serves callers that want one event).
func (v *Verifier) Resolve(r *providers.Request) (providers.Event, error) {
	items, err := v.Split(r)
	if err != nil {
		return providers.Event{}, err
	}
	return items[0].Event, nil
}

// Describe implements providers.Describer. The id's json path is relative to
// each item (an element of the array), within the signed body. The adapter
// cannot sign: only SendGrid holds the private key.
func (v *Verifier) Describe() providers.Description {
	return providers.Description{
		Headers:          []string{HeaderSignature, HeaderTimestamp},
		DefaultEventID:   "json:sg_event_id",
		DefaultTolerance: DefaultTolerance,
		IDSigned:         true,
	}
}

// SignWithKey signs r as SendGrid does, with priv at now: it sets
// X-Twilio-Email-Event-Webhook-Timestamp to now in Unix seconds and
// X-Twilio-Email-Event-Webhook-Signature to the base64 DER ECDSA signature
// of the timestamp followed by the body. ECDSA signatures are randomised:
// two calls sign alike but not byte for byte. It is for tests and for
// anything that emulates SendGrid; the adapter itself holds public keys
// only and cannot sign.
func SignWithKey(r *providers.Request, priv *ecdsa.PrivateKey, now time.Time) error {
	if priv == nil || priv.Curve != elliptic.P256() {
		return errors.New("sendgrid: SignWithKey needs a P-256 private key")
	}
	ts := strconv.FormatInt(now.Unix(), 10)
	sig, err := ecdsa.SignASN1(rand.Reader, priv, digest(ts, r.Body))
	if err != nil {
		return fmt.Errorf("sendgrid: sign: %w", err)
	}
	if r.Header == nil {
		r.Header = http.Header{}
	}
	r.Header.Set(HeaderTimestamp, ts)
	r.Header.Set(HeaderSignature, base64.StdEncoding.EncodeToString(sig))
	return nil
}
