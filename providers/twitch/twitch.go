// Package twitch verifies Twitch EventSub webhooks and answers their
// callback verification.
//
// Twitch signs "<message id><message timestamp><raw body>" with
// HMAC-SHA256 under the subscription's secret, hex, in
// Twitch-Eventsub-Message-Signature as "sha256=<hex>"; the timestamp is
// RFC 3339 with nanoseconds, and Twitch asks receivers to refuse messages
// older than 10 minutes (the default tolerance). The scheme runs on the
// HMAC engine (providers/hmacspec); this package adds the handshake: a
// verified webhook_callback_verification message is answered 200 with
// the raw challenge and neither stored nor forwarded.
//
// The event id is the message id header, which the signature covers and
// which Twitch keeps when it resends a message.
package twitch

import (
	"net/http"
	"time"

	"github.com/tidwall/gjson"

	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/hmacspec"
)

// Name is the adapter's registered name.
const Name = "twitch"

// Headers read by the adapter.
const (
	HeaderID        = "Twitch-Eventsub-Message-Id"
	HeaderTimestamp = "Twitch-Eventsub-Message-Timestamp"
	HeaderSignature = "Twitch-Eventsub-Message-Signature"
	HeaderType      = "Twitch-Eventsub-Message-Type"
)

// Spec is Twitch's scheme on the HMAC engine.
var Spec = &hmacspec.Spec{
	Name: Name, Title: "Twitch EventSub",
	Header: HeaderSignature, Prefix: "sha256=", IDHeader: HeaderID,
	TimestampHeader: HeaderTimestamp, Unit: hmacspec.RFC3339, Tolerance: 10 * time.Minute,
	Template: hmacspec.PID + hmacspec.PTimestamp + hmacspec.PBody,
	EventID:  "header:" + HeaderID, EventType: "json:subscription.type",
	EventTime: "header:" + HeaderTimestamp, TimeUnit: hmacspec.RFC3339,
	Example: hmacspec.Example{Type: "channel.follow",
		Body:    `{"subscription":{"id":"f1c2a387-161a-49f9-a165-0f21d7a4e1c4","type":"${type}","version":"2","status":"enabled","cost":0,"condition":{"broadcaster_user_id":"1337","moderator_user_id":"1337"},"transport":{"method":"webhook","callback":"https://example.com/webhooks/callback"},"created_at":"2026-11-30T11:59:00.634234626Z"},"event":{"user_id":"1234","user_login":"cool_user","broadcaster_user_id":"1337","followed_at":"2026-11-30T12:00:00.634234626Z"}}`,
		Headers: []string{HeaderID, "${id}", HeaderType, "notification", "Twitch-Eventsub-Subscription-Type", "${type}", "Twitch-Eventsub-Subscription-Version", "2"}},
	Docs:    "https://dev.twitch.tv/docs/eventsub/handling-webhook-events/#verifying-the-event-message",
	Retries: "⚠ retried for a short while; a subscription failing repeatedly is revoked",
}

func init() {
	hmacspec.RegisterWith(Spec, func(cfg providers.Config) (providers.Provider, error) { return New(cfg) })
}

// Verifier is the Twitch EventSub adapter.
type Verifier struct {
	*hmacspec.Verifier
}

// New returns a Twitch adapter for cfg.
func New(cfg providers.Config) (*Verifier, error) {
	v, err := hmacspec.NewVerifier(Spec, cfg)
	if err != nil {
		return nil, err
	}
	return &Verifier{v}, nil
}

// Challenge returns the challenge of a callback verification message; ok
// is false for any other message.
func Challenge(r *providers.Request) (challenge string, ok bool) {
	if r.Header.Get(HeaderType) != "webhook_callback_verification" || !gjson.ValidBytes(r.Body) {
		return "", false
	}
	c := gjson.GetBytes(r.Body, "challenge")
	if c.Type != gjson.String || c.Str == "" {
		return "", false
	}
	return c.Str, true
}

// Respond implements providers.Responder: a verified callback verification
// is answered 200 with the raw challenge, as text (ResponseContentType).
func (v *Verifier) Respond(r *providers.Request) (status int, body []byte, handled bool) {
	c, ok := Challenge(r)
	if !ok {
		return 0, nil, false
	}
	return http.StatusOK, []byte(c), true
}

// ResponseContentType implements providers.ResponseContentTyper: Twitch
// reads the challenge as the raw response body, sent as text/plain.
func (v *Verifier) ResponseContentType() string { return "text/plain" }
