// Package swsenders registers the senders that sign with Standard Webhooks
// (the scheme of providers/standardwebhooks, often through Svix) under
// their own names, each with its own default event type, event time and
// secret format: Clerk, Resend, Brex, Lithic, Polar, OpenAI, Replicate,
// Dodo Payments, Make, Increase and Liveblocks. Verification is standardwebhooks.Verifier's,
// unchanged: webhook-id / webhook-timestamp / webhook-signature (or the
// svix-* trio), "<id>.<timestamp>.<raw body>" under HMAC-SHA256, ±5
// minutes. The event id is the webhook-id header, which the signature
// covers and which stays the same when a message is retried.
package swsenders

import (
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/standardwebhooks"
)

// Sender is one sender of Standard Webhooks.
type Sender struct {
	// Name is the registered provider name.
	Name string
	// Title is the sender's name in prose.
	Title string
	// EventType and EventTime are resolvers (providers.ParseKeyResolver
	// notation) of the type and time; the time is RFC 3339.
	EventType, EventTime string
	// RawSecret: the sender hands out a secret that is not `whsec_` +
	// base64 and signs with its text as the key (Polar): each secret is
	// used as its UTF-8 bytes, whatever it looks like.
	RawSecret bool
	// ExampleType and ExampleBody are a realistic delivery (${id} in the
	// webhook-id header, ${type} in the body), for tests and `hookline send`.
	ExampleType, ExampleBody string
	// Docs is the page that says the sender signs with Standard Webhooks.
	Docs string
	// Retries is the sender's retry horizon as documented.
	Retries string
}

// Senders are the registered senders, sorted by name.
var Senders = []*Sender{
	{Name: "brex", Title: "Brex", EventType: "json:event_type",
		ExampleType: "TRANSFER_PROCESSED", ExampleBody: `{"event_type":"${type}","transfer_id":"dptx_clhx3vxo30001ml0mwvkg1c2k","payment_type":"ACH","company_id":"cuacc_ckgqbnqju0001k90s8u1o4n3q"}`,
		Docs: "https://developer.brex.com/docs/webhooks", Retries: "⚠ retried with backoff (Svix schedule: about 28 hours)"},
	{Name: "clerk", Title: "Clerk", EventType: "json:type",
		ExampleType: "user.created", ExampleBody: `{"data":{"id":"user_29w83sxmDNGwOuEthce5gg56FcC","object":"user","first_name":"Jon","email_addresses":[{"email_address":"jon@example.com"}]},"object":"event","timestamp":1764504000000,"type":"${type}","instance_id":"ins_123"}`,
		Docs: "https://clerk.com/docs/webhooks/verify-webhooks", Retries: "Svix schedule: up to about 28 hours"},
	{Name: "dodopayments", Title: "Dodo Payments", EventType: "json:type", EventTime: "json:timestamp",
		ExampleType: "payment.succeeded", ExampleBody: `{"business_id":"bus_hookline","type":"${type}","timestamp":"2026-11-30T12:00:00Z","data":{"payload_type":"Payment","payment_id":"pay_2IjeQm4hqU6RA4Z4kwDee","total_amount":2000,"currency":"USD","status":"succeeded"}}`,
		Docs: "https://docs.dodopayments.com/developer-resources/webhooks", Retries: "⚠ retried with exponential backoff"},
	{Name: "increase", Title: "Increase", EventType: "json:category", EventTime: "json:created_at", RawSecret: true,
		ExampleType: "transaction.created", ExampleBody: `{"id":"event_001dzz0r20rzr4zrhrr1364hy80","associated_object_id":"transaction_uyrp7fld2ium70oa7oi","associated_object_type":"transaction","category":"${type}","created_at":"2026-11-30T12:00:00Z","type":"event"}`,
		Docs: "https://increase.com/documentation/webhooks", Retries: "⚠ retried with backoff"},
	{Name: "liveblocks", Title: "Liveblocks", EventType: "json:type",
		ExampleType: "storageUpdated", ExampleBody: `{"type":"${type}","data":{"roomId":"hookline-room","projectId":"605a50b01a36d5ea7a2e9104","updatedAt":"2026-11-30T12:00:00.000Z"}}`,
		Docs: "https://liveblocks.io/docs/platform/webhooks", Retries: "⚠ retried with backoff (Svix schedule: about 28 hours)"},
	{Name: "lithic", Title: "Lithic", EventType: "json:event_type", EventTime: "json:created",
		ExampleType: "card_transaction.updated", ExampleBody: `{"token":"e07a3a82-0d0c-4d3f-9f6e-4b5d6c7e8f90","event_type":"${type}","created":"2026-11-30T12:00:00Z","payload":{"token":"764fa5a3-2371-40f0-8cbb-9a2e1230d955","status":"SETTLED","amount":2000}}`,
		Docs: "https://docs.lithic.com/docs/events-api", Retries: "Svix schedule: up to about 28 hours"},
	{Name: "make", Title: "Make (event subscriptions)", EventType: "header:Webhook-Topic",
		ExampleType: "scenario.run.completed", ExampleBody: `{"type":"${type}","timestamp":"2026-11-30T12:00:00Z","data":{"scenarioId":42,"status":"success"}}`,
		Docs: "https://developers.make.com/event-subscription/implementation/verify-signatures", Retries: "⚠ retried with backoff"},
	{Name: "openai", Title: "OpenAI", EventType: "json:type", EventTime: "",
		ExampleType: "response.completed", ExampleBody: `{"object":"event","id":"evt_685343a1381c819085d44c354e1b330e","type":"${type}","created_at":1764504000,"data":{"id":"resp_abc123"}}`,
		Docs: "https://platform.openai.com/docs/guides/webhooks", Retries: "retried with backoff for up to 72 hours"},
	{Name: "polar", Title: "Polar", EventType: "json:type", EventTime: "json:timestamp", RawSecret: true,
		ExampleType: "order.paid", ExampleBody: `{"type":"${type}","timestamp":"2026-11-30T12:00:00Z","data":{"id":"b0e2d6c4-3f4e-4a8e-9a1d-7c2f1e8b9a60","status":"paid","total_amount":2000,"currency":"usd"}}`,
		Docs: "https://docs.polar.sh/integrate/webhooks/delivery", Retries: "⚠ up to 10 retries with backoff"},
	{Name: "replicate", Title: "Replicate", EventType: "json:status", EventTime: "json:created_at",
		ExampleType: "succeeded", ExampleBody: `{"id":"ufawqhfynnddngldkgtslldrkq","model":"replicate/hello-world","version":"5c7d5dc6dd8bf75c1acaa8565735e7986bc5b66206b55cca93cb72c9bf15ccaa","input":{"text":"Alice"},"output":"hello Alice","status":"${type}","created_at":"2026-11-30T12:00:00.000000Z"}`,
		Docs: "https://replicate.com/docs/topics/webhooks/verify-webhook", Retries: "⚠ retried for terminal events (completed) only"},
	{Name: "resend", Title: "Resend", EventType: "json:type", EventTime: "json:created_at",
		ExampleType: "email.delivered", ExampleBody: `{"type":"${type}","created_at":"2026-11-30T12:00:00.000Z","data":{"email_id":"56761188-7520-42d8-8898-ff6fc54ce618","from":"Acme <onboarding@resend.dev>","to":["jon@example.com"],"subject":"Sending this example"}}`,
		Docs: "https://resend.com/docs/dashboard/webhooks/verify-webhooks-requests", Retries: "Svix schedule: up to about 28 hours"},
}

// Verifier is a Standard Webhooks verifier resolving its sender's type and time.
type Verifier struct {
	*standardwebhooks.Verifier
	sender    *Sender
	typ, time providers.KeyResolver
}

// New returns the adapter of sender for cfg.
func New(sender *Sender, cfg providers.Config) (*Verifier, error) {
	if sender.RawSecret {
		cfg.Secrets = rawSecrets(cfg.Secrets)
	}
	sw, err := standardwebhooks.New(cfg)
	if err != nil {
		return nil, strip(err, sender.Name)
	}
	v := &Verifier{Verifier: sw, sender: sender}
	if v.typ, err = providers.ParseKeyResolver(sender.EventType); err != nil {
		return nil, err
	}
	if sender.EventTime != "" {
		if v.time, err = providers.ParseKeyResolver(sender.EventTime); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// rawSecrets turns secrets used as text into `whsec_` + base64 of that text.
func rawSecrets(secrets []string) []string {
	out := make([]string, len(secrets))
	for i, s := range secrets {
		out[i] = standardwebhooks.SecretPrefix + base64.StdEncoding.EncodeToString([]byte(s))
	}
	return out
}

// strip renames the standardwebhooks block in a configuration error.
func strip(err error, name string) error {
	msg := strings.Replace(err.Error(), standardwebhooks.Name+":", name+":", 1)
	return fmt.Errorf("%s", msg)
}

// Resolve implements providers.Resolver: the webhook-id header, the
// sender's type and, when it has one, its time.
func (v *Verifier) Resolve(r *providers.Request) (providers.Event, error) {
	ev, err := v.Verifier.Resolve(r)
	if err != nil {
		return ev, err
	}
	if ev.Type, err = v.typ(r); err != nil {
		return ev, err
	}
	if v.time != nil {
		t, err := v.time(r)
		if err != nil {
			return ev, err
		}
		ev.Time = parseTime(t)
	}
	return ev, nil
}

// Describe implements providers.Describer: standardwebhooks', the id
// (webhook-id) signed.
func (v *Verifier) Describe() providers.Description { return v.Verifier.Describe() }

// Sender returns the sender v verifies.
func (v *Verifier) Sender() *Sender { return v.sender }

func init() {
	for _, s := range Senders {
		providers.Register(s.Name, func(cfg providers.Config) (providers.Provider, error) { return New(s, cfg) })
	}
}
