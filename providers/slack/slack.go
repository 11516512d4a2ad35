// Package slack verifies Slack requests (Events API, slash commands,
// interactivity): X-Slack-Signature `v0=<hex>` is an HMAC-SHA256 over
// "v0:<X-Slack-Request-Timestamp>:<raw body>" keyed with the app's signing
// secret as UTF-8 bytes. Timestamps older or newer than the tolerance
// (default 5 minutes) are rejected.
//
// Events API deliveries resolve to `event_id`, the type `event.type` (the
// outer `type` when there is no `event`) and the time `event_time`. A
// verified url_verification handshake is answered by Respond with
// 200 {"challenge": …} and is neither stored nor forwarded. Form-encoded
// deliveries (slash commands, interactivity) carry no event id: such sources
// configure an event_id resolver (for example form:trigger_id).
package slack

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/tidwall/gjson"

	"github.com/hookline/hookline/providers"
)

// Name is the adapter's registered name.
const Name = "slack"

// Headers read by the adapter.
const (
	HeaderSignature = "X-Slack-Signature"
	HeaderTimestamp = "X-Slack-Request-Timestamp"
)

// Version is the only signature version Slack defines.
const Version = "v0"

// DefaultTolerance is Slack's documented 5 minutes.
const DefaultTolerance = 5 * time.Minute

func init() {
	providers.Register(Name, func(cfg providers.Config) (providers.Provider, error) { return New(cfg) })
}

// scheme is how Slack writes X-Slack-Signature: "v0=" and hex (read in either
// case). What it signs is signed(timestamp) followed by the body.
var scheme = providers.BodyMAC{Header: HeaderSignature, Prefix: Version + "="}

// Verifier is the Slack adapter.
type Verifier struct {
	keys      [][]byte
	tolerance time.Duration
	now       func() time.Time
}

// New returns a Slack adapter for cfg; the secrets are signing secrets.
func New(cfg providers.Config) (*Verifier, error) {
	if len(cfg.Secrets) == 0 {
		return nil, fmt.Errorf("secrets: at least one secret is required")
	}
	if err := cfg.Decode(&struct{}{}); err != nil {
		return nil, fmt.Errorf("slack: %w", err)
	}
	v := &Verifier{keys: providers.SecretKeys(cfg.Secrets), tolerance: cfg.Tolerance, now: cfg.NowFunc()}
	if v.tolerance == 0 {
		v.tolerance = DefaultTolerance
	}
	return v, nil
}

// ParseSignature decodes an X-Slack-Signature value `v0=<hex>` (lowercase
// version, 32 bytes). Anything else is an error wrapping
// providers.ErrInvalidSignature.
func ParseSignature(value string) ([]byte, error) {
	sigs, err := scheme.Parse(value)
	if err != nil {
		return nil, err
	}
	return sigs[0], nil
}

// signed is what the signature covers before the body: the version and the
// timestamp as sent (slack-go signs it as sent too).
func signed(ts string) []byte { return []byte(Version + ":" + ts + ":") }

// Verify implements providers.Verifier.
func (v *Verifier) Verify(r *providers.Request) error {
	value := r.Header.Get(HeaderSignature)
	if value == "" {
		return fmt.Errorf("%w: %s header is required", providers.ErrNoSignature, HeaderSignature)
	}
	tsValue := r.Header.Get(HeaderTimestamp)
	if tsValue == "" {
		return fmt.Errorf("%w: %s header is required", providers.ErrNoSignature, HeaderTimestamp)
	}
	ts, err := strconv.ParseInt(tsValue, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: bad %s", providers.ErrInvalidSignature, HeaderTimestamp)
	}
	sigs, err := scheme.Parse(value)
	if err != nil {
		return err
	}
	if err := providers.CheckTimestamp(time.Unix(ts, 0), v.now(), v.tolerance); err != nil {
		return fmt.Errorf("%w (tolerance %s)", err, v.tolerance)
	}
	if !scheme.Match(v.keys, sigs, signed(tsValue), r.Body) {
		return fmt.Errorf("%w: %s does not match", providers.ErrInvalidSignature, HeaderSignature)
	}
	return nil
}

// Resolve implements providers.Resolver for Events API deliveries.
func (v *Verifier) Resolve(r *providers.Request) (providers.Event, error) {
	if r.ContentType() == "application/x-www-form-urlencoded" {
		return providers.Event{}, fmt.Errorf("%w: slack form deliveries (slash commands, interactivity) carry no event_id: configure event_id (for example form:trigger_id)", providers.ErrNoEventID)
	}
	f, err := providers.JSONFields(r.Body, "event_id", "event.type", "type", "event_time", "event")
	if err != nil {
		return providers.Event{}, err
	}
	if f[0] == "" {
		return providers.Event{}, fmt.Errorf("%w: body has no \"event_id\"", providers.ErrNoEventID)
	}
	ev := providers.Event{ID: f[0], Type: f[1]}
	if f[4] == "" {
		ev.Type = f[2]
	}
	if n, err := strconv.ParseInt(f[3], 10, 64); err == nil {
		ev.Time = time.Unix(n, 0).UTC()
	}
	return ev, nil
}

// Respond implements providers.Responder: a verified url_verification
// handshake is answered 200 {"challenge": …}; everything else is processed
// normally.
func (v *Verifier) Respond(r *providers.Request) (status int, body []byte, handled bool) {
	if !gjson.ValidBytes(r.Body) {
		return 0, nil, false
	}
	f := gjson.GetManyBytes(r.Body, "type", "challenge")
	if f[0].Type != gjson.String || f[0].Str != "url_verification" {
		return 0, nil, false
	}
	out, err := json.Marshal(struct {
		Challenge string `json:"challenge"`
	}{f[1].String()})
	if err != nil {
		return 0, nil, false
	}
	return http.StatusOK, out, true
}

// Sign implements providers.Signer with the first secret.
func (v *Verifier) Sign(r *providers.Request, now time.Time) error {
	ts := strconv.FormatInt(now.Unix(), 10)
	r.Header.Set(HeaderTimestamp, ts)
	r.Header.Set(HeaderSignature, scheme.Signature(v.keys[0], signed(ts), r.Body))
	return nil
}

// Describe implements providers.Describer.
func (v *Verifier) Describe() providers.Description {
	return providers.Description{
		Headers:          []string{HeaderSignature, HeaderTimestamp},
		DefaultEventID:   "json:event_id",
		DefaultTolerance: DefaultTolerance,
		IDSigned:         true, // the signed body's
	}
}
