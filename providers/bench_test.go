package providers_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/hookline/hookline/providers"
	_ "github.com/hookline/hookline/providers/all"
	"github.com/hookline/hookline/providers/hmacspec"
	"github.com/hookline/hookline/providers/meta"
	"github.com/hookline/hookline/providers/swsenders"
	"github.com/hookline/hookline/providers/twitch"
	"github.com/hookline/hookline/providers/zoom"
)

// benchProbes are the settings each adapter needs to be built (the table of
// cmd/hookline/check.go); adapters not listed take one "whsec_probe" secret.
var benchProbes = map[string]struct {
	secrets  []string
	settings map[string]any
}{
	"adyen":            {secrets: []string{"44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056"}},
	"appstore":         {settings: map[string]any{"bundle_id": "com.example.app", "app_apple_id": 1234567890}},
	"braintree":        {secrets: []string{"public_key:private_key"}},
	"googleplay":       {settings: map[string]any{"audience": "https://hooks.example.com/webhooks/googleplay", "service_account": "rtdn-push@example-project.iam.gserviceaccount.com"}},
	"hmac":             {secrets: []string{"s"}, settings: map[string]any{"header": "X-Signature"}},
	"mollie":           {settings: map[string]any{"allow_unsigned": true}},
	"paypal":           {settings: map[string]any{"webhook_id": "WH-1"}},
	"plaid":            {secrets: []string{"s"}, settings: map[string]any{"client_id": "c"}},
	"sendgrid":         {secrets: []string{"MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE83T4O/n84iotIvIW4mdBgQ/7dAfSmpqIM8kF9mN1flpVKS3GRqe62gw+2fNNRaINXvVpiglSI8eNEc6wEA3F+g=="}}, // a verification key (SendGrid's SDK test key)
	"sns":              {secrets: []string{"arn:aws:sns:us-east-1:123456789012:hookline-bench"}},
	"square":           {secrets: []string{"s"}, settings: map[string]any{"notification_url": "https://example.com/webhooks/square"}},
	"standardwebhooks": {secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}},
	"svix":             {secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}},
	"chargebee":        {secrets: []string{"hookline:probe"}},
	"postmark":         {secrets: []string{"hookline:probe"}},
}

func init() {
	// The Standard Webhooks senders take whsec_ secrets (Polar: any text).
	for _, s := range swsenders.Senders {
		if _, set := benchProbes[s.Name]; !set {
			benchProbes[s.Name] = struct {
				secrets  []string
				settings map[string]any
			}{secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}}
		}
	}
}

func benchSettings(m map[string]any) func(v any) error {
	return func(v any) error {
		if m == nil {
			return nil
		}
		raw, err := yaml.Marshal(m)
		if err != nil {
			return err
		}
		dec := yaml.NewDecoder(bytes.NewReader(raw))
		dec.KnownFields(true)
		return dec.Decode(v)
	}
}

func benchRequest(body string, header ...string) *providers.Request {
	h := http.Header{"Content-Type": {"application/json"}}
	for i := 0; i+1 < len(header); i += 2 {
		h.Set(header[i], header[i+1])
	}
	u, _ := url.Parse("https://hooks.example.com/webhooks/bench")
	return &providers.Request{Body: []byte(body), Header: h, URL: u}
}

func benchForm(rawURL string, vals url.Values, header ...string) *providers.Request {
	r := benchRequest(vals.Encode(), header...)
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.URL, _ = url.Parse(rawURL)
	return r
}

// benchJSON is a ~600-byte JSON event carrying the fields most JSON
// providers read their id and type from.
const benchJSON = `{"id":"evt_1QbenchAbCdEf","event_id":"evt_1QbenchAbCdEf","object":"event","type":"payment_intent.succeeded","event_type":"payment_intent.succeeded","created":1764504000,"occurred_at":"2026-11-30T12:00:00Z","livemode":false,"data":{"id":"pi_3Qbench","object":{"id":"pi_3Qbench","object":"payment_intent","amount":2000,"currency":"usd","status":"succeeded","customer":"cus_bench","description":"Order 8841","metadata":{"order_id":"8841"}}},"request":{"id":"req_bench","idempotency_key":"b0e2d6c4-3f4e-4a8e-9a1d-7c2f1e8b9a60"}}`

// benchDeliveries builds a typical unsigned delivery per provider.
var benchDeliveries = map[string]func() *providers.Request{
	"adyen": func() *providers.Request {
		return benchRequest(`{"live":"false","notificationItems":[{"NotificationRequestItem":{"additionalData":{"authCode":"058705","cardSummary":"0010"},"amount":{"currency":"EUR","value":1130},"eventCode":"AUTHORISATION","eventDate":"2026-11-30T12:59:00+01:00","merchantAccountCode":"TestMerchant","merchantReference":"order-42","paymentMethod":"visa","pspReference":"7914073381342284","reason":"058705:0010:03/2030","success":"true"}}]}`)
	},
	"appstore": func() *providers.Request {
		// Apple's body: the JWS's payload is what Resolve reads (its header
		// and signature are not checked there).
		enc := base64.RawURLEncoding.EncodeToString
		payload := `{"notificationType":"DID_CHANGE_RENEWAL_STATUS","subtype":"AUTO_RENEW_DISABLED","notificationUUID":"6b1a3f0c-95bb-4a5e-9d0a-1f0e8a1d2c11",` +
			`"data":{"appAppleId":1234567890,"bundleId":"com.example.app","bundleVersion":"42","environment":"Production","status":1},"version":"2.0","signedDate":1764503998123}`
		return benchRequest(`{"signedPayload":"` + enc([]byte(`{"alg":"ES256","x5c":["AA==","AA==","AA=="]}`)) + "." + enc([]byte(payload)) + "." + enc(make([]byte, 64)) + `"}`)
	},
	"braintree": func() *providers.Request {
		xml := `<?xml version="1.0" encoding="UTF-8"?>
<notification>
  <timestamp type="datetime">2026-11-30T11:59:00Z</timestamp>
  <kind>subscription_charged_successfully</kind>
  <subject><subscription><id>sub_bench</id><status>Active</status></subscription></subject>
</notification>
`
		return benchForm("https://hooks.example.com/webhooks/braintree", url.Values{"bt_payload": {base64.StdEncoding.EncodeToString([]byte(xml)) + "\n"}})
	},
	"checkout": func() *providers.Request { return benchRequest(benchJSON) },
	"coinbase": func() *providers.Request {
		return benchRequest(`{"id":7,"attempt_number":1,"event":` + benchJSON + `}`)
	},
	"github": func() *providers.Request {
		return benchRequest(benchJSON, "X-GitHub-Delivery", "d1b2", "X-GitHub-Event", "push", "X-GitHub-Hook-ID", "292430182")
	},
	"gocardless": func() *providers.Request {
		return benchRequest(`{"events":[{"id":"EV0001","created_at":"2026-11-30T11:58:02.292Z","resource_type":"payments","action":"confirmed","links":{"payment":"PM0001"},"details":{"origin":"gocardless","cause":"payment_confirmed"},"metadata":{}}],"meta":{"webhook_id":"WB0001"}}`)
	},
	"googleplay": func() *providers.Request {
		// data: a subscription notification (SUBSCRIPTION_RENEWED) of com.example.hookline.
		return benchRequest(`{"message":{"data":"eyJ2ZXJzaW9uIjoiMS4wIiwicGFja2FnZU5hbWUiOiJjb20uZXhhbXBsZS5ob29rbGluZSIsImV2ZW50VGltZU1pbGxpcyI6IjE3NjQ1MDM5OTgwMDAiLCJzdWJzY3JpcHRpb25Ob3RpZmljYXRpb24iOnsidmVyc2lvbiI6IjEuMCIsIm5vdGlmaWNhdGlvblR5cGUiOjIsInB1cmNoYXNlVG9rZW4iOiJQVVJDSEFTRV9UT0tFTiIsInN1YnNjcmlwdGlvbklkIjoicHJlbWl1bS5tb250aGx5In19","messageId":"136969346945","message_id":"136969346945","publishTime":"2026-11-30T11:59:59.123Z","publish_time":"2026-11-30T11:59:59.123Z"},"subscription":"projects/hookline-example/subscriptions/play-rtdn"}`)
	},
	"hmac": func() *providers.Request { return benchRequest(benchJSON) },
	"lemonsqueezy": func() *providers.Request {
		return benchRequest(`{"meta":{"event_name":"subscription_updated"},"data":{"type":"subscriptions","id":"1","attributes":{"status":"active","updated_at":"2026-11-30T11:59:00.000000Z"}}}`, "X-Event-Name", "subscription_updated")
	},
	"mercadopago": func() *providers.Request {
		return benchRequest(`{"id":"12345","live_mode":true,"type":"payment","date_created":"2026-11-30T08:58:00.000-03:00","action":"payment.updated","data":{"id":"12345"}}`, "X-Request-Id", "bb56a2f1-6aae-46ac-982e-9dcd3581d08e")
	},
	"mollie": func() *providers.Request {
		return benchForm("https://hooks.example.com/webhooks/mollie", url.Values{"id": {"tr_WDqYK6vllg"}})
	},
	"paddle": func() *providers.Request { return benchRequest(benchJSON) },
	"paypal": func() *providers.Request { return benchRequest(benchJSON) },
	"plaid": func() *providers.Request {
		return benchRequest(`{"environment":"sandbox","item_id":"it_1","webhook_code":"SYNC_UPDATES_AVAILABLE","webhook_type":"TRANSACTIONS"}`)
	},
	"razorpay": func() *providers.Request { return benchRequest(benchJSON, "X-Razorpay-Event-Id", "evt_rzp_1") },
	"sendgrid": func() *providers.Request {
		return benchRequest(`[{"email":"jon@example.com","event":"delivered","sg_event_id":"ZGVsaXZlcmVkLTAtMTIzNDU2Nzg5","sg_message_id":"14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.0","timestamp":1764503990}]` + "\r\n")
	},
	"shopify": func() *providers.Request {
		return benchRequest(benchJSON, "X-Shopify-Event-Id", "98880550-7158-44d4-b7cd-2c97c8a091b5", "X-Shopify-Topic", "orders/create")
	},
	"slack": func() *providers.Request {
		return benchRequest(`{"type":"event_callback","event_id":"Ev1","event_time":1764503900,"event":{"type":"app_mention","text":"hi"}}`)
	},
	"sns": func() *providers.Request {
		return benchRequest(`{"Type":"Notification","MessageId":"22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324","TopicArn":"arn:aws:sns:us-east-1:123456789012:hookline-bench","Subject":"Order 8841 paid","Message":"{\"order_id\":\"8841\",\"status\":\"paid\"}","Timestamp":"2026-11-30T11:59:58.123Z","SignatureVersion":"2","Signature":"AAAA","SigningCertURL":"https://sns.us-east-1.amazonaws.com/SimpleNotificationService-9c6465fa7f48f5cacd23014631ec1136.pem"}`)
	},
	"square": func() *providers.Request {
		r := benchRequest(benchJSON)
		r.URL, _ = url.Parse("https://example.com/webhooks/square")
		return r
	},
	"stripe": func() *providers.Request { return benchRequest(benchJSON) },
	"twilio": func() *providers.Request {
		return benchForm("https://hooks.example.com/webhooks/twilio", url.Values{"MessageSid": {"SM0123"}, "MessageStatus": {"delivered"}, "AccountSid": {"AC0123"}, "From": {"+15017122661"}, "To": {"+15558675310"}},
			"I-Twilio-Idempotency-Token", "tok_1")
	},
	"xendit": func() *providers.Request { return benchRequest(benchJSON, "Webhook-Id", "wh_1") },
}

func benchDelivery(name string) *providers.Request {
	if f, ok := benchDeliveries[name]; ok {
		return f()
	}
	// The adapters that carry their own example delivery.
	if s, ok := hmacspec.Lookup(name); ok {
		return s.Sample("evt_1QbenchAbCdEf", "")
	}
	if s, ok := swsenders.Lookup(name); ok {
		return s.Sample("msg_2KWPBgLlAfxdpx2AI54pPJ85f4W", "")
	}
	for _, s := range append([]*hmacspec.Spec{zoom.Spec, twitch.Spec}, meta.Specs...) {
		if s.Name == name {
			return s.Sample("evt_1QbenchAbCdEf", "")
		}
	}
	if name == "mailgun" {
		return benchRequest(`{"event-data":{"id":"CPgfbmQMTCKtHW6uIWtuVe","event":"delivered","timestamp":1764504000.123456,"recipient":"jon@example.com"}}`)
	}
	// standardwebhooks, svix and any adapter added later.
	return benchRequest(benchJSON, "Webhook-Id", "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W")
}

// signed builds the named adapter and a delivery it accepts, signed at at;
// ok is false when the adapter cannot sign (PayPal, Plaid: the sender signs
// with its own private key).
func benchSigned(b *testing.B, name string, at time.Time) (p providers.Provider, req *providers.Request, ok bool) {
	b.Helper()
	pr, found := benchProbes[name]
	if !found {
		pr.secrets = []string{"whsec_probe"}
	}
	p, err := providers.New(name, providers.Config{Source: "bench", Secrets: pr.secrets, Settings: benchSettings(pr.settings),
		Now: func() time.Time { return at }})
	if err != nil {
		b.Fatalf("%s: %v", name, err)
	}
	req = benchDelivery(name)
	s, canSign := p.(providers.Signer)
	if !canSign {
		return p, req, false
	}
	if len(pr.secrets) > 0 {
		if err := s.Sign(req, at); err != nil {
			b.Fatalf("%s: sign: %v", name, err)
		}
	}
	return p, req, true
}

// BenchmarkVerify is signature verification per provider, through the
// registry, on a typical delivery.
func BenchmarkVerify(b *testing.B) {
	at := time.Now()
	for _, name := range providers.Names() {
		b.Run(name, func(b *testing.B) {
			p, req, ok := benchSigned(b, name, at)
			if !ok {
				b.Skip("cannot sign: the sender signs with its own private key")
			}
			if err := p.Verify(req); err != nil {
				b.Fatalf("the signed delivery does not verify: %v", err)
			}
			b.SetBytes(int64(len(req.Body)))
			b.ReportAllocs()
			for b.Loop() {
				if err := p.Verify(req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkResolve is event-id (and type) extraction per provider: Resolve,
// or Split for batch benchDeliveries; hmac resolves with json:id as a source
// would configure it.
func BenchmarkResolve(b *testing.B) {
	at := time.Now()
	for _, name := range providers.Names() {
		b.Run(name, func(b *testing.B) {
			p, req, _ := benchSigned(b, name, at)
			resolve := func() (string, error) {
				if sp, ok := p.(providers.Splitter); ok {
					items, err := sp.Split(req)
					if err != nil || len(items) == 0 {
						return "", errors.Join(err, errors.New("no items"))
					}
					return items[0].Event.ID, nil
				}
				var r providers.Resolver = p
				if name == "hmac" {
					id, _ := providers.ParseKeyResolver("json:id")
					r = providers.EventResolver{ID: id}
				}
				ev, err := r.Resolve(req)
				return ev.ID, err
			}
			id, err := resolve()
			if err != nil || strings.TrimSpace(id) == "" {
				b.Fatalf("no event id (%q): %v", id, err)
			}
			b.SetBytes(int64(len(req.Body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := resolve(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// engineTwins are engine entries that reproduce a hand-written adapter's
// scheme exactly (Stripe's t=/v1= pairs over "<t>.<body>", GitHub's
// "sha256=" hex over the body), to compare the cost of a declarative
// adapter with a hand-written one of the same scheme. They are not
// registered.
var engineTwins = map[string]*hmacspec.Spec{
	"stripe": {Name: "stripe_engine", Title: "Stripe (engine twin)", Header: "Stripe-Signature", Layout: hmacspec.Pairs,
		TimestampKey: "t", SignatureKeys: []string{"v1"}, Template: hmacspec.PTimestamp + "." + hmacspec.PBody,
		Tolerance: 5 * time.Minute, EventID: "json:id", EventType: "json:type"},
	"github": {Name: "github_engine", Title: "GitHub (engine twin)", Header: "X-Hub-Signature-256", Prefix: "sha256=",
		EventID: "header:X-GitHub-Delivery"},
}

// BenchmarkEngineVsHandwritten verifies one delivery through a hand-written
// adapter and through its engine twin; the two must cost the same within
// noise (docs/providers.md reports the figures).
func BenchmarkEngineVsHandwritten(b *testing.B) {
	at := time.Now()
	for _, name := range []string{"stripe", "github"} {
		spec := engineTwins[name]
		require := func(err error) {
			if err != nil {
				b.Fatal(err)
			}
		}
		cfg := providers.Config{Source: "bench", Secrets: []string{"whsec_probe"}, Now: func() time.Time { return at }}
		hand, err := providers.New(name, cfg)
		require(err)
		engine, err := hmacspec.New(spec, cfg)
		require(err)
		req := benchDelivery(name)
		require(hand.(providers.Signer).Sign(req, at))
		require(engine.Verify(req)) // the same scheme: each accepts the other's signature
		for _, c := range []struct {
			kind string
			p    providers.Provider
		}{{"handwritten", hand}, {"engine", engine}} {
			b.Run(name+"/"+c.kind, func(b *testing.B) {
				b.SetBytes(int64(len(req.Body)))
				b.ReportAllocs()
				for b.Loop() {
					if err := c.p.Verify(req); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		b.Run(name+"/interleaved", func(b *testing.B) {
			benchInterleaved(b, func() error { return hand.Verify(req) }, func() error { return engine.Verify(req) })
		})
		resolve := func(p providers.Provider) func() error {
			return func() error { _, err := p.Resolve(req); return err }
		}
		b.Run(name+"/interleaved-resolve", func(b *testing.B) { benchInterleaved(b, resolve(hand), resolve(engine)) })
	}
}

// benchInterleaved runs the hand-written adapter's call and the engine's
// alternately, in batches of 64, and reports the fastest batch of each (ns
// per call) and their ratio: on a loaded machine the fastest batch is the
// one least disturbed, and alternating exposes both to the same load.
func benchInterleaved(b *testing.B, hand, engine func() error) {
	const batch = 64
	best := [2]time.Duration{1<<63 - 1, 1<<63 - 1}
	for b.Loop() {
		for i, call := range [2]func() error{hand, engine} {
			start := time.Now()
			for range batch {
				if err := call(); err != nil {
					b.Fatal(err)
				}
			}
			best[i] = min(best[i], time.Since(start))
		}
	}
	hns, ens := float64(best[0].Nanoseconds())/batch, float64(best[1].Nanoseconds())/batch
	b.ReportMetric(hns, "handwritten-ns/call")
	b.ReportMetric(ens, "engine-ns/call")
	b.ReportMetric(ens/hns, "engine/handwritten")
}
