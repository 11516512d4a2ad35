package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
	"gopkg.in/yaml.v3"

	"github.com/hookline/hookline/internal/config"
	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/hmacspec"
	"github.com/hookline/hookline/providers/meta"
	"github.com/hookline/hookline/providers/swsenders"
	"github.com/hookline/hookline/providers/twitch"
	"github.com/hookline/hookline/providers/zoom"
)

func settingsFunc(m map[string]any) func(v any) error {
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

// sendUsage is the help of `hookline send`.
const sendUsage = `usage: hookline send --config FILE --source NAME [--file F] [--event-id ID] [--type T] [--url URL]

Sign a sample event (or the given file) with the source's first secret in
its provider's scheme, POST it, and print the answer's status and body.
`

func cmdSend(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("send", flag.ContinueOnError)
	cfgPath := fs.String("config", "", "config file (default $HOOKLINE_CONFIG, then ./hookline.yaml)")
	source := fs.String("source", "", "source name to send to (required)")
	file := fs.String("file", "", "payload file (default: a sample event shaped like the provider's)")
	eventID := fs.String("event-id", "", "event id for the sample (default: a new one); composite ids (github hook:delivery, adyen psp:code:success, …) set each part")
	typ := fs.String("type", "", "event type for the sample (default: a typical one for the provider)")
	target := fs.String("url", "", "URL to POST to (default: http://<listen>/webhooks/<source>)")
	if err := parseFlags(fs, args, stdout, sendUsage); err != nil {
		return err
	}
	if *source == "" {
		return &exitError{2, fmt.Errorf("send: --source is required")}
	}
	if *target != "" {
		if err := checkSendURL(*target); err != nil {
			return &exitError{2, fmt.Errorf("send: --url %q: %w", *target, err)}
		}
	}
	cfg, err := config.Load(configPath(*cfgPath))
	if err != nil {
		return err
	}
	var src *config.Source
	for _, s := range cfg.Sources {
		if s.Name == *source {
			src = s
		}
	}
	if src == nil {
		return &exitError{2, fmt.Errorf("send: --source %q is not in the config", *source)}
	}
	signer, ok := src.Adapter().(providers.Signer)
	if !ok {
		return fmt.Errorf("send: provider %s cannot sign (its deliveries are signed with the provider's private key)", src.Provider)
	}
	// A given id always yields the same body (body-hash ids stay stable, a
	// second send is a duplicate); without one, a fresh event happens now.
	at := sampleEpoch
	givenID := *eventID != ""
	if *eventID == "" {
		*eventID = fmt.Sprintf("evt_%d", time.Now().UnixNano())
		at = time.Now().UTC().Truncate(time.Second)
	}
	u := *target
	if u == "" {
		host := cfg.Listen
		if strings.HasPrefix(host, ":") {
			host = "127.0.0.1" + host
		}
		scheme := "http"
		if cfg.TLSCert != "" {
			scheme = "https"
		}
		u = scheme + "://" + host + "/webhooks/" + src.Name
	}
	parsed, err := url.Parse(u)
	if err != nil {
		return &exitError{2, fmt.Errorf("send: --url: %w", err)}
	}

	var req *providers.Request
	if *file != "" {
		req = &providers.Request{Header: http.Header{"Content-Type": {"application/json"}}}
		if req.Body, err = os.ReadFile(*file); err != nil {
			// A file that cannot be read is bad usage, named: nothing was sent.
			return &exitError{2, fmt.Errorf("send: --file %q: %w", *file, unwrapPathError(err))}
		}
		if !json.Valid(req.Body) {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		// The file is sent as it is; only header resolvers can carry the id.
		applied := false
		if h, ok := strings.CutPrefix(src.EventID, "header:"); ok {
			req.Header.Set(h, *eventID)
			applied = true
		} else if src.EventID == "" {
			applied = setDefaultHeader(src, req, *eventID)
		}
		if givenID && !applied {
			return &exitError{2, fmt.Errorf("send: --event-id cannot apply to --file: the source's event id is read from the body, which is sent as it is; edit the file's id instead")}
		}
	} else {
		req, err = buildSample(src, *eventID, *typ, at)
		if err != nil {
			return err
		}
	}
	// The sample may carry a query (Mercado Pago's ?data.id=…&type=…).
	if req.URL != nil && req.URL.RawQuery != "" {
		if parsed.RawQuery != "" {
			parsed.RawQuery += "&"
		}
		parsed.RawQuery += req.URL.RawQuery
	}
	req.URL = parsed

	// Classic Mollie webhooks are unsigned (mollie.allow_unsigned, no secrets).
	if unsigned := src.Provider == "mollie" && len(src.Secrets) == 0; !unsigned {
		if err := signer.Sign(req, time.Now()); err != nil {
			return fmt.Errorf("send: sign: %w", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Schemes that sign the URL (Twilio's bodySHA256) may have changed it.
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, req.URL.String(), bytes.NewReader(req.Body))
	if err != nil {
		return err
	}
	hreq.Header = req.Header
	resp, err := http.DefaultClient.Do(hreq)
	if err != nil {
		return fmt.Errorf("send: %w (is hookline running? try `make run`)", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	// Whatever answers at --url chose the status text and the body.
	fmt.Fprintf(stdout, "%s\n%s\n", safe(resp.Status), safeLines(strings.TrimSpace(string(body)), ""))
	if resp.StatusCode/100 != 2 {
		return &exitError{1, fmt.Errorf("send: %s answered %s", req.URL, resp.Status)}
	}
	return nil
}

// checkSendURL says why u cannot be send's --url, or nil: an absolute
// http:// or https:// URL with a host.
func checkSendURL(u string) error {
	p, err := url.Parse(u)
	switch {
	case err != nil:
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("not a URL: %w", err)
	case p.Scheme != "http" && p.Scheme != "https":
		return errors.New("want an http:// or https:// URL, e.g. http://127.0.0.1:8080/webhooks/SOURCE")
	case p.Host == "":
		return errors.New("no host")
	}
	return nil
}

// sampleGitHubHook is the X-GitHub-Hook-ID of a GitHub sample whose
// --event-id names the delivery alone (GitHub's documented example hook).
const sampleGitHubHook = "292430182"

// sampleEpoch is the event time of samples sent with an explicit --event-id.
var sampleEpoch = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// sampleArgs is what a sample is built from.
type sampleArgs struct {
	id, typ string
	at      time.Time
	// formField is the source's form:FIELD event_id resolver, if any.
	formField string
}

// providerSample builds one provider's sample delivery, unsigned.
type providerSample struct {
	// typ is the default --type.
	typ   string
	build func(a sampleArgs) *providers.Request
}

// buildSample returns src's sample delivery for id and typ: the provider's
// shape (sampleTable), then the source's own event_id and event_type
// resolvers pointed at id and typ (header:, json: and form:), so that the
// delivery resolves to id whatever the source configures.
func buildSample(src *config.Source, id, typ string, at time.Time) (*providers.Request, error) {
	a := sampleArgs{id: id, typ: typ, at: at}
	if f, ok := strings.CutPrefix(src.EventID, "form:"); ok {
		a.formField = f
	}
	s, known := sampleTable[src.Provider]
	if !known {
		// An adapter hookline does not ship: a generic JSON event, and the
		// id in the header its default resolver names.
		s = providerSample{typ: "payment_intent.succeeded", build: func(a sampleArgs) *providers.Request {
			return jsonSample(genericSample(a))
		}}
	}
	if a.typ == "" {
		a.typ = s.typ
	}
	req := s.build(a)
	if !known && src.EventID == "" {
		setDefaultHeader(src, req, id)
	}
	// Batches are split by the adapter (the source's resolvers do not apply),
	// and Braintree's form is rebuilt by its Signer.
	_, batch := src.Adapter().(providers.Splitter)
	if batch || src.Provider == "braintree" {
		return req, nil
	}
	if err := applyResolver(req, "event_id", src.EventID, id); err != nil {
		return nil, err
	}
	if err := applyResolver(req, "event_type", src.EventType, a.typ); err != nil {
		return nil, err
	}
	return req, nil
}

// setDefaultHeader puts id in the header the adapter's default resolver names.
func setDefaultHeader(src *config.Source, req *providers.Request, id string) bool {
	ds, ok := src.Adapter().(providers.Describer)
	if !ok {
		return false
	}
	if h, ok := strings.CutPrefix(ds.Describe().DefaultEventID, "header:"); ok && !strings.ContainsAny(h, ":{}, ") {
		req.Header.Set(h, id)
		return true
	}
	return false
}

// applyResolver makes the key resolver spec yield value on req.
func applyResolver(req *providers.Request, field, spec, value string) error {
	kind, arg, _ := strings.Cut(spec, ":")
	switch kind {
	case "header":
		req.Header.Set(arg, value)
	case "json":
		if !gjson.ValidBytes(req.Body) {
			return fmt.Errorf("send: the source's %s (%s) reads JSON, but the %s sample is not JSON: use --file", field, spec, req.ContentType())
		}
		body, err := sjson.SetBytes(req.Body, arg, value)
		if err != nil {
			return fmt.Errorf("send: cannot set %s path %q in the sample: %w", field, arg, err)
		}
		req.Body = body
	case "form":
		if req.ContentType() != "application/x-www-form-urlencoded" {
			return fmt.Errorf("send: the source's %s (%s) reads a form, but the sample is %s: use --file", field, spec, req.ContentType())
		}
		vals, err := url.ParseQuery(string(req.Body))
		if err != nil {
			return fmt.Errorf("send: sample form: %w", err)
		}
		vals.Set(arg, value)
		req.Body = []byte(vals.Encode())
	}
	// "" (the provider's default) and body:sha256 need nothing.
	return nil
}

// ---- sample helpers ----

// jsonString is s as a JSON string literal.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// sampleRef is a deterministic reference derived from id: prefix + n hex digits.
func sampleRef(prefix, id string, n int) string {
	sum := sha256.Sum256([]byte(id))
	return prefix + hex.EncodeToString(sum[:])[:n]
}

// sampleDigits is a deterministic decimal reference derived from id.
func sampleDigits(id string, n int) string {
	sum := sha256.Sum256([]byte(id))
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		b.WriteByte('1' + sum[i%len(sum)]%9)
	}
	return b.String()
}

func sampleTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func jsonSample(body string, header ...string) *providers.Request {
	h := http.Header{"Content-Type": {"application/json"}}
	for i := 0; i+1 < len(header); i += 2 {
		h.Set(header[i], header[i+1])
	}
	return &providers.Request{Body: []byte(body), Header: h}
}

func formSample(vals url.Values, header ...string) *providers.Request {
	r := jsonSample(vals.Encode(), header...)
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return r
}

// genericSample is a Stripe-like event that also carries the fields other
// JSON schemes read their id and type from.
func genericSample(a sampleArgs) string {
	return `{"id":` + jsonString(a.id) + `,"object":"event","type":` + jsonString(a.typ) + `,"created":` + fmt.Sprint(a.at.Unix()) +
		`,"event_id":` + jsonString(a.id) + `,"event_type":` + jsonString(a.typ) + `,"occurred_at":` + jsonString(sampleTime(a.at)) +
		`,"data":{"object":{"id":` + jsonString(sampleRef("pi_", a.id, 24)) + `,"amount":2000,"currency":"usd","status":"succeeded"}}}`
}

// sampleTable holds a realistic sample delivery per provider: the body and
// headers the provider sends, with the fields its default event id is made
// of taken from --event-id (a composite id sets each part when given in
// full, see the comments) and the type from --type.
var sampleTable = map[string]providerSample{
	"stripe": {typ: "payment_intent.succeeded", build: func(a sampleArgs) *providers.Request {
		return jsonSample(`{"id":` + jsonString(a.id) + `,"object":"event","api_version":"2025-08-27.basil","created":` + fmt.Sprint(a.at.Unix()) +
			`,"data":{"object":{"id":` + jsonString(sampleRef("pi_", a.id, 24)) + `,"object":"payment_intent","amount":2000,"amount_received":2000,"currency":"usd","status":"succeeded"}}` +
			`,"livemode":false,"pending_webhooks":1,"request":{"id":null,"idempotency_key":null},"type":` + jsonString(a.typ) + `}`)
	}},
	"paypal": {typ: "PAYMENT.CAPTURE.COMPLETED", build: func(a sampleArgs) *providers.Request {
		return jsonSample(`{"id":` + jsonString(a.id) + `,"event_version":"1.0","create_time":` + jsonString(a.at.UTC().Format("2006-01-02T15:04:05.000Z")) +
			`,"resource_type":"capture","resource_version":"2.0","event_type":` + jsonString(a.typ) + `,"summary":"Payment completed for $ 20.0 USD"` +
			`,"resource":{"id":` + jsonString(strings.ToUpper(sampleRef("", a.id, 17))) + `,"status":"COMPLETED","amount":{"value":"20.00","currency_code":"USD"},"final_capture":true}}`)
	}},
	// A batch of three NotificationRequestItems. --event-id is the first
	// item's pspReference, or its whole id psp:eventCode:success.
	"adyen": {typ: "AUTHORISATION", build: func(a sampleArgs) *providers.Request {
		psp, code, success := a.id, a.typ, "true"
		if p := strings.Split(a.id, ":"); len(p) == 3 && (p[2] == "true" || p[2] == "false") {
			psp, code, success = p[0], p[1], p[2]
		}
		item := func(psp string) string {
			return `{"NotificationRequestItem":{"additionalData":{"authCode":"065696","cardSummary":"0004","hmacSignature":""},` +
				`"amount":{"currency":"EUR","value":2000},"eventCode":` + jsonString(code) + `,"eventDate":` + jsonString(a.at.Format("2006-01-02T15:04:05-07:00")) +
				`,"merchantAccountCode":"HooklineDemoECOM","merchantReference":` + jsonString("order-"+psp) + `,"operations":["CANCEL","CAPTURE","REFUND"],` +
				`"paymentMethod":"visa","pspReference":` + jsonString(psp) + `,"reason":"065696:0004:03/2030","success":` + jsonString(success) + `}}`
		}
		return jsonSample(`{"live":"false","notificationItems":[` + item(psp) + `,` + item(psp+"-2") + `,` + item(psp+"-3") + `]}`)
	}},
	"square": {typ: "payment.updated", build: func(a sampleArgs) *providers.Request {
		pay := sampleRef("", a.id, 29)
		return jsonSample(`{"merchant_id":"MLEFBHHSJGVHD","type":` + jsonString(a.typ) + `,"event_id":` + jsonString(a.id) + `,"created_at":` + jsonString(sampleTime(a.at)) +
			`,"data":{"type":"payment","id":` + jsonString(pay) + `,"object":{"payment":{"id":` + jsonString(pay) + `,"amount_money":{"amount":2000,"currency":"USD"},"status":"COMPLETED"}}}}`)
	}},
	// The <notification> XML; the Signer base64-encodes it into the
	// bt_payload/bt_signature form. --event-id is the subject id, or the
	// whole id kind:subject id:timestamp.
	"braintree": {typ: "subscription_charged_successfully", build: func(a sampleArgs) *providers.Request {
		kind, subject, ts := a.typ, a.id, sampleTime(a.at)
		if p := strings.SplitN(a.id, ":", 3); len(p) == 3 {
			if _, err := time.Parse(time.RFC3339, p[2]); err == nil {
				kind, subject, ts = p[0], p[1], p[2]
			}
		}
		elem := "subscription"
		for _, e := range []string{"transaction", "dispute", "disbursement", "subscription"} {
			if strings.HasPrefix(kind, e) {
				elem = e
			}
		}
		doc := `<?xml version="1.0" encoding="UTF-8"?>
<notification>
  <kind>` + xmlEscape(kind) + `</kind>
  <timestamp type="datetime">` + xmlEscape(ts) + `</timestamp>
  <subject>
    <` + elem + `>
      <id>` + xmlEscape(subject) + `</id>
      <status>Active</status>
      <price>20.00</price>
    </` + elem + `>
  </subject>
</notification>
`
		r := jsonSample(doc)
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		return r
	}},
	"paddle": {typ: "transaction.completed", build: func(a sampleArgs) *providers.Request {
		return jsonSample(`{"event_id":` + jsonString(a.id) + `,"event_type":` + jsonString(a.typ) + `,"occurred_at":` + jsonString(a.at.UTC().Format("2006-01-02T15:04:05.000000Z")) +
			`,"notification_id":` + jsonString(sampleRef("ntf_01", a.id, 26)) + `,"data":{"id":` + jsonString(sampleRef("txn_01", a.id, 26)) + `,"status":"completed","currency_code":"USD",` +
			`"details":{"totals":{"subtotal":"2000","tax":"0","total":"2000"}}}}`)
	}},
	// A batch of three events: --event-id is the first one's id, the type
	// is {resource_type}.{action}.
	"gocardless": {typ: "payments.confirmed", build: func(a sampleArgs) *providers.Request {
		resource, action, _ := strings.Cut(a.typ, ".")
		ev := func(id string) string {
			return `{"id":` + jsonString(id) + `,"created_at":` + jsonString(a.at.UTC().Format("2006-01-02T15:04:05.000Z")) + `,"resource_type":` + jsonString(resource) +
				`,"action":` + jsonString(action) + `,"links":{"payment":` + jsonString(strings.ToUpper(sampleRef("PM", id, 12))) + `},"details":{"origin":"gocardless",` +
				`"cause":"payment_confirmed","description":"Enough time has passed since the payment was submitted for the banks to return an error, so this payment is now confirmed."},"metadata":{}}`
		}
		return jsonSample(`{"events":[`+ev(a.id)+`,`+ev(a.id+"-2")+`,`+ev(a.id+"-3")+`],"meta":{"webhook_id":`+jsonString(strings.ToUpper(sampleRef("WB", a.id, 12)))+`}}`,
			"Origin", "https://api.gocardless.com", "User-Agent", "gocardless-webhook-service/1.1")
	}},
	"checkout": {typ: "payment_captured", build: func(a sampleArgs) *providers.Request {
		return jsonSample(`{"id":` + jsonString(a.id) + `,"type":` + jsonString(a.typ) + `,"version":"1.0.33","created_on":` + jsonString(a.at.UTC().Format("2006-01-02T15:04:05.000Z")) +
			`,"data":{"id":` + jsonString(sampleRef("pay_", a.id, 26)) + `,"action_id":` + jsonString(sampleRef("act_", a.id, 26)) + `,"amount":2000,"currency":"USD","response_code":"10000","response_summary":"Approved"}}`)
	}},
	"razorpay": {typ: "payment.captured", build: func(a sampleArgs) *providers.Request {
		return jsonSample(`{"entity":"event","account_id":"acc_BFQ7uQEaa7j2z7","event":`+jsonString(a.typ)+`,"contains":["payment"],`+
			`"payload":{"payment":{"entity":{"id":`+jsonString(sampleRef("pay_", a.id, 14))+`,"entity":"payment","amount":2000,"currency":"INR","status":"captured","method":"card","captured":true}}},`+
			`"created_at":`+fmt.Sprint(a.at.Unix())+`}`,
			"X-Razorpay-Event-Id", a.id)
	}},
	// Classic Mollie: a form with the resource id only.
	"mollie": {typ: "", build: func(a sampleArgs) *providers.Request {
		return formSample(url.Values{"id": {a.id}})
	}},
	// --event-id is data.id, or the whole id event_name:type:id:updated_at.
	"lemonsqueezy": {typ: "order_created", build: func(a sampleArgs) *providers.Request {
		name, dtype, did, updated := a.typ, "orders", a.id, a.at.UTC().Format("2006-01-02T15:04:05.000000Z")
		if p := strings.SplitN(a.id, ":", 4); len(p) == 4 {
			if _, err := time.Parse(time.RFC3339, p[3]); err == nil {
				name, dtype, did, updated = p[0], p[1], p[2], p[3]
			}
		} else if res, _, ok := strings.Cut(a.typ, "_"); ok {
			dtype = res + "s"
		}
		return jsonSample(`{"meta":{"event_name":`+jsonString(name)+`,"custom_data":{"customer_id":25}},"data":{"type":`+jsonString(dtype)+`,"id":`+jsonString(did)+
			`,"attributes":{"store_id":1,"customer_id":1,"identifier":`+jsonString(sampleRef("", a.id, 32))+`,"currency":"USD","subtotal":2000,"total":2000,"status":"paid",`+
			`"created_at":`+jsonString(updated)+`,"updated_at":`+jsonString(updated)+`}}}`,
			"X-Event-Name", name)
	}},
	"shopify": {typ: "orders/create", build: func(a sampleArgs) *providers.Request {
		order := sampleDigits(a.id, 18)
		return jsonSample(`{"id":`+order+`,"admin_graphql_api_id":"gid://shopify/Order/`+order+`","email":"jon@example.com","created_at":`+jsonString(sampleTime(a.at))+
			`,"currency":"USD","total_price":"20.00","financial_status":"paid","line_items":[{"id":866550311766439020,"title":"IPod Nano - 8GB","quantity":1,"price":"20.00"}]}`,
			"X-Shopify-Topic", a.typ, "X-Shopify-Event-Id", a.id, "X-Shopify-Webhook-Id", sampleRef("", a.id, 32),
			"X-Shopify-Shop-Domain", "example.myshopify.com", "X-Shopify-API-Version", "2026-01", "X-Shopify-Triggered-At", sampleTime(a.at))
	}},
	// --event-id is X-GitHub-Delivery (the hook id is then the one of
	// GitHub's documentation, sampleGitHubHook), or hook id:delivery.
	"github": {typ: "push", build: func(a sampleArgs) *providers.Request {
		r := jsonSample(`{"ref":"refs/heads/main","before":"6113728f27ae82c7b1a177c8d03f9e96e0adf246","after":`+jsonString(sampleRef("", a.id, 40))+
			`,"repository":{"id":1296269,"full_name":"octocat/Hello-World"},"pusher":{"name":"octocat"},"commits":[]}`,
			"X-GitHub-Event", a.typ, "X-GitHub-Delivery", a.id, "X-GitHub-Hook-Installation-Target-Type", "repository",
			"X-GitHub-Hook-Installation-Target-ID", "1296269", "User-Agent", "GitHub-Hookshot/044aadd", "X-GitHub-Hook-ID", sampleGitHubHook)
		if hook, delivery, ok := strings.Cut(a.id, ":"); ok {
			r.Header.Set("X-GitHub-Hook-ID", hook)
			r.Header.Set("X-GitHub-Delivery", delivery)
		}
		return r
	}},
	"standardwebhooks": {typ: "invoice.paid", build: standardSample},
	"svix":             {typ: "invoice.paid", build: standardSample},
	// An Events API callback; a source resolving its id with form:FIELD
	// (slash commands, interactivity) gets a slash-command form instead.
	"slack": {typ: "app_mention", build: func(a sampleArgs) *providers.Request {
		if a.formField != "" {
			return formSample(url.Values{"token": {"gIkuvaNzQIHg97ATvDxqgjtO"}, "team_id": {"T0001"}, "team_domain": {"example"},
				"channel_id": {"C2147483705"}, "channel_name": {"test"}, "user_id": {"U2147483697"}, "user_name": {"Steve"},
				"command": {"/weather"}, "text": {"94070"}, "response_url": {"https://hooks.slack.com/commands/1234/5678"},
				"trigger_id": {a.id}, "api_app_id": {"A123456"}})
		}
		return jsonSample(`{"token":"XXYYZZ","team_id":"T123ABC456","api_app_id":"A123ABC456","event":{"type":` + jsonString(a.typ) +
			`,"user":"U123ABC456","text":"<@U0LAN0Z89> is it everything a river should be?","ts":"1515449522.000016","channel":"C123ABC456","event_ts":"1515449522.000016"}` +
			`,"type":"event_callback","authed_users":["U123ABC456"],"event_id":` + jsonString(a.id) + `,"event_time":` + fmt.Sprint(a.at.Unix()) + `}`)
	}},
	// A message status callback. --event-id is I-Twilio-Idempotency-Token,
	// or MessageSid:MessageStatus (then no token is sent).
	"twilio": {typ: "delivered", build: func(a sampleArgs) *providers.Request {
		sid, status, composite := strings.Cut(a.id, ":")
		if !composite {
			sid, status = sampleRef("SM", a.id, 32), a.typ
		}
		r := formSample(url.Values{"AccountSid": {"AC" + sampleRef("", "account", 32)}, "ApiVersion": {"2010-04-01"}, "From": {"+15017122661"},
			"MessageSid": {sid}, "MessageStatus": {status}, "SmsSid": {sid}, "SmsStatus": {status}, "To": {"+15558675310"}})
		if !composite {
			r.Header.Set("I-Twilio-Idempotency-Token", a.id)
		}
		return r
	}},
	"plaid": {typ: "TRANSACTIONS.SYNC_UPDATES_AVAILABLE", build: func(a sampleArgs) *providers.Request {
		wt, wc, _ := strings.Cut(a.typ, ".")
		return jsonSample(`{"environment":"sandbox","error":null,"item_id":` + jsonString(a.id) + `,"new_transactions":2,"webhook_code":` + jsonString(wc) +
			`,"webhook_type":` + jsonString(wt) + `,"initial_update_complete":true,"historical_update_complete":false}`)
	}},
	"coinbase": {typ: "charge:confirmed", build: func(a sampleArgs) *providers.Request {
		return jsonSample(`{"attempt_number":1,"event":{"api_version":"2018-03-22","created_at":` + jsonString(sampleTime(a.at)) +
			`,"data":{"code":` + jsonString(strings.ToUpper(sampleRef("", a.id, 8))) + `,"name":"The Sovereign Individual","pricing":{"local":{"amount":"20.00","currency":"USD"}}}` +
			`,"id":` + jsonString(a.id) + `,"resource":"event","type":` + jsonString(a.typ) + `},"id":` + jsonString(sampleRef("", "attempt"+a.id, 32)) + `,"scheduled_for":` + jsonString(sampleTime(a.at)) + `}`)
	}},
	"xendit": {typ: "payment.succeeded", build: func(a sampleArgs) *providers.Request {
		return jsonSample(`{"event":`+jsonString(a.typ)+`,"business_id":"5f27a14a9bf05c73dd040bc8","created":`+jsonString(a.at.UTC().Format("2006-01-02T15:04:05.000Z"))+
			`,"data":{"id":`+jsonString(sampleRef("py-", a.id, 32))+`,"amount":2000,"currency":"IDR","status":"SUCCEEDED"}}`,
			"Webhook-Id", a.id)
	}},
	// The notification id is the body's id (a number when --event-id is
	// one); data.id also goes in the query, as Mercado Pago sends it.
	"mercadopago": {typ: "payment", build: func(a sampleArgs) *providers.Request {
		id := jsonString(a.id)
		if isJSONInteger(a.id) {
			id = a.id
		}
		data := sampleDigits(a.id, 10)
		r := jsonSample(`{"id":` + id + `,"live_mode":false,"type":` + jsonString(a.typ) + `,"date_created":` + jsonString(sampleTime(a.at)) +
			`,"user_id":44444,"api_version":"v1","action":` + jsonString(a.typ+".created") + `,"data":{"id":` + jsonString(data) + `}}`)
		r.URL = &url.URL{RawQuery: url.Values{"data.id": {data}, "type": {a.typ}}.Encode()}
		return r
	}},
	// The generic scheme: a JSON event, or a form when the source reads its
	// id from one.
	"hmac": {typ: "order.paid", build: func(a sampleArgs) *providers.Request {
		if a.formField != "" {
			return formSample(url.Values{"id": {a.id}, "type": {a.typ}, "amount": {"2000"}, "currency": {"usd"}})
		}
		return jsonSample(genericSample(a))
	}},
}

// The adapters that carry their own example delivery (the HMAC engine's
// table, the Standard Webhooks senders, Zoom, Twitch, Meta) sample it:
// --event-id is the part of the id the sender controls (a composite id is
// built around it), --type the event type.
func init() {
	specs := append(append([]*hmacspec.Spec{zoom.Spec, twitch.Spec}, meta.Specs...), hmacspec.Specs...)
	for _, spec := range specs {
		sampleTable[spec.Name] = providerSample{typ: spec.Example.Type, build: func(a sampleArgs) *providers.Request {
			return spec.Sample(a.id, a.typ)
		}}
	}
	for _, sender := range swsenders.Senders {
		sampleTable[sender.Name] = providerSample{typ: sender.ExampleType, build: func(a sampleArgs) *providers.Request {
			return sender.Sample(a.id, a.typ)
		}}
	}
	// Mailgun: the Signer writes the body's signature object.
	sampleTable["mailgun"] = providerSample{typ: "delivered", build: func(a sampleArgs) *providers.Request {
		return jsonSample(`{"event-data":{"id":` + jsonString(a.id) + `,"event":` + jsonString(a.typ) + `,"timestamp":` + fmt.Sprint(a.at.Unix()) +
			`.123456,"recipient":"jon@example.com","message":{"headers":{"message-id":` + jsonString(sampleRef("", a.id, 16)+"@example.com") + `}}}}`)
	}}
}

func standardSample(a sampleArgs) *providers.Request {
	return jsonSample(`{"type":`+jsonString(a.typ)+`,"timestamp":`+jsonString(a.at.UTC().Format("2006-01-02T15:04:05.000Z"))+
		`,"data":{"invoice_id":`+jsonString(sampleRef("inv_", a.id, 12))+`,"amount":2000,"currency":"USD"}}`,
		"Webhook-Id", a.id)
}

// isJSONInteger reports whether s can stand in JSON as an integer that
// parsers keep exact (Mercado Pago's notification ids are numbers).
func isJSONInteger(s string) bool {
	if s == "" || len(s) > 15 || (s[0] == '0' && len(s) > 1) {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func xmlEscape(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

// unwrapPathError drops the path os.ReadFile repeats ("open F: no such
// file or directory" becomes "no such file or directory"): the message
// already names the file.
func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
