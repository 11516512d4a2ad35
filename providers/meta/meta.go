// Package meta verifies webhooks from Meta's Graph API (Facebook pages,
// Instagram, Messenger; registered as "meta") and the WhatsApp Cloud API
// (registered as "whatsapp"), and answers Meta's subscription handshake.
//
// Meta signs the raw body with HMAC-SHA256 under the app secret, hex, in
// X-Hub-Signature-256 as "sha256=<hex>"; there is no timestamp. The scheme
// runs on the HMAC engine (providers/hmacspec). A delivery batches entries
// and carries no id: the default event id is the body's hash, which the
// signature covers.
//
// When a webhook is set up, Meta calls the URL with GET
// ?hub.mode=subscribe&hub.verify_token=…&hub.challenge=… and expects the
// challenge back. With `meta: {verify_token: "…"}` (or `whatsapp:`) the
// adapter answers it (providers.GetResponder) when the token matches,
// compared in constant time; without one, or on a mismatch, the GET is not
// answered (405, or 403 on a wrong token). The challenge is echoed only when
// it is at most MaxChallenge printable ASCII bytes.
package meta

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"strings"

	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/hmacspec"
)

// Registered names.
const (
	Name         = "meta"
	WhatsAppName = "whatsapp"
)

// MaxChallenge bounds the echoed hub.challenge.
const MaxChallenge = 256

func spec(name, title, typ, example, exampleType string) *hmacspec.Spec {
	return &hmacspec.Spec{
		Name: name, Title: title,
		Header: "X-Hub-Signature-256", Prefix: "sha256=",
		EventID: "body:sha256", EventType: typ,
		Example: hmacspec.Example{Type: exampleType, Body: example},
		Docs:    "https://developers.facebook.com/docs/graph-api/webhooks/getting-started#event-notifications",
		Retries: "retried with decreasing frequency for up to 36 hours",
	}
}

// Specs are Meta's schemes on the HMAC engine: the Graph API's and
// WhatsApp's, which differ in their event type.
var Specs = []*hmacspec.Spec{
	spec(Name, "Meta (Facebook, Instagram, Messenger)", "json:object",
		`{"object":"${type}","entry":[{"id":"${id}","time":1764504000,"changes":[{"field":"feed","value":{"item":"status","verb":"add","post_id":"44444444_444444444","message":"Hookline"}}]}]}`, "page"),
	spec(WhatsAppName, "WhatsApp Cloud API", "json:entry.0.changes.0.field",
		`{"object":"whatsapp_business_account","entry":[{"id":"102290129340398","changes":[{"value":{"messaging_product":"whatsapp","metadata":{"display_phone_number":"15550783881","phone_number_id":"106540352242922"},"messages":[{"from":"16505551234","id":"${id}","timestamp":"1764504000","text":{"body":"Hello"},"type":"text"}]},"field":"${type}"}]}]}`, "messages"),
}

// Settings is the optional `meta:` (or `whatsapp:`) block of a source.
type Settings struct {
	// VerifyToken is the token configured at Meta for the subscription
	// handshake; empty: GET handshakes are not answered.
	VerifyToken string `yaml:"verify_token"`
}

func init() {
	for _, s := range Specs {
		hmacspec.RegisterWith(s, func(cfg providers.Config) (providers.Provider, error) { return New(s, cfg) })
	}
}

// Verifier is the Meta (or WhatsApp) adapter.
type Verifier struct {
	*hmacspec.Verifier
	token [sha256.Size]byte // SHA-256 of the verify token
	has   bool
}

// New returns the adapter of s for cfg.
func New(s *hmacspec.Spec, cfg providers.Config) (*Verifier, error) {
	var st Settings
	if err := cfg.Decode(&st); err != nil {
		return nil, fmt.Errorf("%s: %w", s.Name, err)
	}
	cfg.Settings = nil
	v, err := hmacspec.NewVerifier(s, cfg)
	if err != nil {
		return nil, err
	}
	out := &Verifier{Verifier: v}
	if st.VerifyToken != "" {
		out.token, out.has = sha256.Sum256([]byte(st.VerifyToken)), true
	}
	return out, nil
}

// Handshake reads a subscription handshake from a GET's query: ok is false
// unless hub.mode is "subscribe" and the challenge is non-empty, at most
// MaxChallenge printable ASCII bytes.
func Handshake(r *providers.Request) (token, challenge string, ok bool) {
	if r.URL == nil {
		return "", "", false
	}
	q := r.URL.Query()
	token, challenge = q.Get("hub.verify_token"), q.Get("hub.challenge")
	if q.Get("hub.mode") != "subscribe" || challenge == "" || len(challenge) > MaxChallenge {
		return "", "", false
	}
	for i := 0; i < len(challenge); i++ {
		if c := challenge[i]; c < 0x21 || c > 0x7e {
			return "", "", false
		}
	}
	return token, challenge, true
}

// RespondGet implements providers.GetResponder: the challenge, as plain
// text, when the verify token matches the configured one.
func (v *Verifier) RespondGet(r *providers.Request) (status int, contentType string, body []byte, handled bool) {
	if !v.has {
		return 0, "", nil, false
	}
	token, challenge, ok := Handshake(r)
	if !ok {
		return 0, "", nil, false
	}
	got := sha256.Sum256([]byte(token))
	if subtle.ConstantTimeCompare(got[:], v.token[:]) != 1 {
		return http.StatusForbidden, "text/plain; charset=utf-8", []byte("verify token mismatch"), true
	}
	return http.StatusOK, "text/plain; charset=utf-8", []byte(strings.Clone(challenge)), true
}
