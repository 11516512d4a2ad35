// Package zoom verifies Zoom webhooks and answers Zoom's URL validation.
//
// Zoom signs "v0:<x-zm-request-timestamp>:<raw body>" with HMAC-SHA256
// under the app's secret token, hex, in x-zm-signature as "v0=<hex>"; the
// timestamp is unix seconds (default tolerance 5 minutes). The scheme runs
// on the HMAC engine (providers/hmacspec); this package adds the
// handshake: a verified endpoint.url_validation delivery is answered 200
// {"plainToken": …, "encryptedToken": hex(HMAC-SHA256(secret token,
// plainToken))} and neither stored nor forwarded.
//
// Zoom sends no event id: the default is "{event}:{payload.object.id}:
// {event_ts}" (event_ts in milliseconds), else "{event}:{payload.user_id}:
// {event_ts}" for events about a user (app_deauthorized); all of it is in
// the signed body. Other events need event_id configured.
package zoom

import (
	"crypto"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"time"

	"github.com/tidwall/gjson"

	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/hmacspec"
)

// Name is the adapter's registered name.
const Name = "zoom"

// Spec is Zoom's scheme on the HMAC engine.
var Spec = &hmacspec.Spec{
	Name: Name, Title: "Zoom",
	Header: "X-Zm-Signature", Prefix: "v0=", TimestampHeader: "X-Zm-Request-Timestamp",
	Template: "v0:" + hmacspec.PTimestamp + ":" + hmacspec.PBody, Tolerance: 5 * time.Minute,
	EventID:   "{json:event}:{json:payload.object.id}:{json:event_ts}, else {json:event}:{json:payload.user_id}:{json:event_ts}",
	EventType: "json:event", EventTime: "json:event_ts", TimeUnit: hmacspec.Millis,
	Example: hmacspec.Example{Type: "meeting.started", ID: "${type}:${id}:1764504000000",
		Body: `{"event":"${type}","event_ts":1764504000000,"payload":{"account_id":"D8cJuqWVQ623CI4Q8yQK0Q","object":{"id":"${id}","uuid":"4444AAAiAAAAAiAiAiiAii==","host_id":"x1yCzABCDEfg23HiJKl4mN","topic":"My Meeting","type":2,"start_time":"2026-11-30T12:00:00Z","duration":60,"timezone":"America/Los_Angeles"}}}`},
	Docs:    "https://developers.zoom.us/docs/api/webhooks/#verify-webhook-events",
	Retries: "3 retries: after 5 minutes, 30 minutes and 90 minutes",
}

// ValidationEvent is the event of Zoom's URL validation handshake.
const ValidationEvent = "endpoint.url_validation"

func init() {
	hmacspec.RegisterWith(Spec, func(cfg providers.Config) (providers.Provider, error) { return New(cfg) })
}

// Verifier is the Zoom adapter.
type Verifier struct {
	*hmacspec.Verifier
}

// New returns a Zoom adapter for cfg.
func New(cfg providers.Config) (*Verifier, error) {
	v, err := hmacspec.NewVerifier(Spec, cfg)
	if err != nil {
		return nil, err
	}
	return &Verifier{v}, nil
}

// ParseValidation returns the plainToken of a URL validation body; ok is
// false for any other body.
func ParseValidation(body []byte) (plainToken string, ok bool) {
	if !gjson.ValidBytes(body) {
		return "", false
	}
	f := gjson.GetManyBytes(body, "event", "payload.plainToken")
	if f[0].Type != gjson.String || f[0].Str != ValidationEvent || f[1].Type != gjson.String || f[1].Str == "" {
		return "", false
	}
	return f[1].Str, true
}

// Respond implements providers.Responder: a verified URL validation is
// answered with the plainToken and its HMAC under the first secret.
func (v *Verifier) Respond(r *providers.Request) (status int, body []byte, handled bool) {
	plain, ok := ParseValidation(r.Body)
	if !ok {
		return 0, nil, false
	}
	out, err := json.Marshal(struct {
		PlainToken     string `json:"plainToken"`
		EncryptedToken string `json:"encryptedToken"`
	}{plain, hex.EncodeToString(providers.HMAC(crypto.SHA256, v.SigningKey(), []byte(plain)))})
	if err != nil {
		return 0, nil, false
	}
	return http.StatusOK, out, true
}
