// Package mailgun verifies Mailgun webhooks, whose signature lives in the
// body.
//
// A delivery carries {"signature": {"timestamp", "token", "signature"},
// "event-data": {…}} (legacy webhooks: the form fields timestamp, token and
// signature). signature is the hex HMAC-SHA256, under the webhook signing
// key, of timestamp followed by token. Only those two are signed, not the
// event data: the body can be changed by whoever can change a delivery in
// transit (TLS protects it), and the event id is not signed. The adapter is
// a providers.ContentKeyer on the signed timestamp and token, which Mailgun
// makes unique per delivery, so a replay under another event id is a
// duplicate. The timestamp (unix seconds) is checked only when the source
// sets a tolerance: Mailgun does not say whether retries carry a new one.
//
// The event id is event-data.id, the type event-data.event, the time
// event-data.timestamp (seconds with a fraction).
package mailgun

import (
	"crypto"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/hookline/hookline/providers"
)

// Name is the adapter's registered name.
const Name = "mailgun"

func init() {
	providers.Register(Name, func(cfg providers.Config) (providers.Provider, error) { return New(cfg) })
}

// Verifier is the Mailgun adapter.
type Verifier struct {
	keys      [][]byte
	tolerance time.Duration
	now       func() time.Time
}

// New returns a Mailgun adapter for cfg: secrets are webhook signing keys.
func New(cfg providers.Config) (*Verifier, error) {
	if len(cfg.Secrets) == 0 {
		return nil, fmt.Errorf("secrets: at least one secret is required")
	}
	if err := cfg.Decode(&struct{}{}); err != nil {
		return nil, fmt.Errorf("mailgun: %w", err)
	}
	return &Verifier{keys: providers.SecretKeys(cfg.Secrets), tolerance: cfg.Tolerance, now: cfg.NowFunc()}, nil
}

// Signature is the signed part of a delivery.
type Signature struct {
	Timestamp, Token string
	// MAC is the decoded signature (32 bytes).
	MAC []byte
}

// ParseSignature reads the signature of a delivery: the "signature" object
// of a JSON body, or the form fields of a legacy one. A body without one is
// an error wrapping providers.ErrNoSignature; one that cannot be read (a
// MAC that is not 64 lowercase hex digits, a timestamp that is not unix
// seconds, JSON nested too deep) wraps providers.ErrInvalidSignature or is
// providers.ErrTooDeep.
func ParseSignature(r *providers.Request) (Signature, error) {
	var ts, token, sig string
	if r.ContentType() == "application/x-www-form-urlencoded" {
		form, err := providers.ParseForm(r)
		if err != nil {
			return Signature{}, fmt.Errorf("%w: %v", providers.ErrInvalidSignature, err)
		}
		ts, token, sig = form.Get("timestamp"), form.Get("token"), form.Get("signature")
	} else {
		if err := providers.CheckJSONDepth(r.Body); err != nil {
			return Signature{}, err
		}
		if !gjson.ValidBytes(r.Body) {
			return Signature{}, fmt.Errorf("%w: body is not JSON", providers.ErrNoSignature)
		}
		f := gjson.GetManyBytes(r.Body, "signature.timestamp", "signature.token", "signature.signature")
		ts, token, sig = f[0].String(), f[1].String(), f[2].String()
	}
	if sig == "" || token == "" || ts == "" {
		return Signature{}, fmt.Errorf("%w: the body carries no signature, token and timestamp", providers.ErrNoSignature)
	}
	mac, err := hex.DecodeString(sig)
	if err != nil || len(mac) != sha256.Size || hex.EncodeToString(mac) != sig {
		return Signature{}, fmt.Errorf("%w: signature is not a hex HMAC-SHA256", providers.ErrInvalidSignature)
	}
	if _, err := strconv.ParseInt(ts, 10, 64); err != nil {
		return Signature{}, fmt.Errorf("%w: bad timestamp", providers.ErrInvalidSignature)
	}
	return Signature{Timestamp: ts, Token: token, MAC: mac}, nil
}

// Verify implements providers.Verifier.
func (v *Verifier) Verify(r *providers.Request) error {
	s, err := ParseSignature(r)
	if err != nil {
		return err
	}
	n, _ := strconv.ParseInt(s.Timestamp, 10, 64)
	if err := providers.CheckTimestamp(time.Unix(n, 0), v.now(), v.tolerance); err != nil {
		return fmt.Errorf("%w (tolerance %s)", err, v.tolerance)
	}
	if !providers.MatchHMAC(crypto.SHA256, v.keys, [][]byte{s.MAC}, []byte(s.Timestamp), []byte(s.Token)) {
		return fmt.Errorf("%w: signature does not match", providers.ErrInvalidSignature)
	}
	return nil
}

// Resolve implements providers.Resolver for JSON deliveries.
func (v *Verifier) Resolve(r *providers.Request) (providers.Event, error) {
	f, err := providers.JSONFields(r.Body, "event-data.id", "event-data.event", "event-data.timestamp")
	if err != nil {
		return providers.Event{}, err
	}
	if strings.TrimSpace(f[0]) == "" {
		return providers.Event{}, fmt.Errorf("%w: body has no event-data.id", providers.ErrNoEventID)
	}
	ev := providers.Event{ID: f[0], Type: f[1]}
	if secs, err := strconv.ParseFloat(f[2], 64); err == nil && secs > 0 && secs < 1e11 {
		ev.Time = time.UnixMilli(int64(secs * 1000)).UTC()
	}
	return ev, nil
}

// ContentKey implements providers.ContentKeyer: the digest of the signed
// timestamp and token.
func (v *Verifier) ContentKey(r *providers.Request) []byte {
	s, err := ParseSignature(r)
	if err != nil {
		return nil
	}
	return providers.ContentDigest(Name, []byte(s.Timestamp), []byte{0}, []byte(s.Token))
}

// Sign implements providers.Signer with the first secret: it sets the
// body's "signature" object (a JSON body is required), with a token
// derived from the body and now.
func (v *Verifier) Sign(r *providers.Request, now time.Time) error {
	ts := strconv.FormatInt(now.Unix(), 10)
	sum := sha256.Sum256(append([]byte(ts), r.Body...))
	token := hex.EncodeToString(sum[:25])
	mac := hex.EncodeToString(providers.HMAC(crypto.SHA256, v.keys[0], []byte(ts), []byte(token)))
	body, err := sjson.SetBytes(r.Body, "signature", map[string]string{"timestamp": ts, "token": token, "signature": mac})
	if err != nil {
		return fmt.Errorf("mailgun: sign: %w", err)
	}
	r.Body = body
	return nil
}

// Describe implements providers.Describer: the signature is in the body,
// and the event id is not signed (see ContentKey).
func (v *Verifier) Describe() providers.Description {
	return providers.Description{DefaultEventID: "json:event-data.id", DefaultEventType: "json:event-data.event", IDSigned: false}
}
