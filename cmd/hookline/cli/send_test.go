package cli_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/internal/pgtest"
	"github.com/hookline/hookline/providers"
	_ "github.com/hookline/hookline/providers/all"
	"github.com/hookline/hookline/providers/hmacspec"
	"github.com/hookline/hookline/providers/meta"
	"github.com/hookline/hookline/providers/swsenders"
	"github.com/hookline/hookline/providers/twitch"
	"github.com/hookline/hookline/providers/zoom"
)

// exampleSpecs are the engine-run schemes whose sample is their Example.
func exampleSpecs() []*hmacspec.Spec {
	return append(append([]*hmacspec.Spec{zoom.Spec, twitch.Spec}, meta.Specs...), hmacspec.Specs...)
}

func init() {
	for _, spec := range exampleSpecs() {
		secret := `["` + spec.Name + `_send_secret"]`
		if spec.Mode == hmacspec.Basic {
			secret = `["hookline:` + spec.Name + `-send"]`
		}
		sendSources = append(sendSources, sendSource{name: spec.Name, provider: spec.Name, yaml: "secrets: " + secret})
	}
	for _, sender := range swsenders.Senders {
		sendSources = append(sendSources, sendSource{name: sender.Name, provider: sender.Name, yaml: `secrets: ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]`})
	}
	sendSources = append(sendSources, sendSource{name: "mailgun", provider: "mailgun", yaml: `secrets: ["key-mailgun-send"]`})
}

// sendSource is one source of the `hookline send` test server: its YAML
// (after name and provider) and whether `hookline send` can sign for it.
type sendSource struct {
	name, provider string
	yaml           string
	cannotSign     bool
}

// sendSources has a source for every registered provider (the settings
// each needs are those of check.go's probes, with secrets in each scheme's
// format) and a few with key-resolver overrides.
var sendSources = []sendSource{
	{name: "adyen", provider: "adyen", yaml: `secrets: ["44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056"]`},
	{name: "appstore", provider: "appstore", yaml: `appstore: {bundle_id: com.example.app, app_apple_id: 1234567890}`, cannotSign: true},
	{name: "braintree", provider: "braintree", yaml: `secrets: ["hk7zqxwp4v2bs5jc:4e7f0a1b9c2d8e3f6a5b4c7d0e9f8a1b"]`},
	{name: "checkout", provider: "checkout", yaml: `secrets: ["0a4c7b2e-checkout-send"]
    checkout: {authorization_key: "cko-auth-send"}`},
	{name: "coinbase", provider: "coinbase", yaml: `secrets: ["coinbase_send_secret"]`},
	{name: "github", provider: "github", yaml: `secrets: ["It's a Secret to Everybody"]`},
	{name: "gocardless", provider: "gocardless", yaml: `secrets: ["gocardless_send_secret"]`},
	{name: "googleplay", provider: "googleplay", yaml: `googleplay: {audience: "https://hooks.example.com/webhooks/googleplay", service_account: "rtdn-push@example-project.iam.gserviceaccount.com"}`, cannotSign: true},
	{name: "hmac", provider: "hmac", yaml: `secrets: ["acme_send_secret"]
    hmac: {header: X-Acme-Signature, algorithm: sha256, encoding: hex, prefix: "sha256=", timestamp_header: X-Acme-Timestamp}
    event_id: "header:X-Acme-Delivery"
    event_type: "json:type"`},
	{name: "lemonsqueezy", provider: "lemonsqueezy", yaml: `secrets: ["lemon_send_secret"]`},
	{name: "mercadopago", provider: "mercadopago", yaml: `secrets: ["mp_send_webhook_secret"]`},
	{name: "mollie", provider: "mollie", yaml: `secrets: ["mollie_send_signing_secret"]`},
	{name: "mollie_classic", provider: "mollie", yaml: `mollie: {allow_unsigned: true}`},
	{name: "paddle", provider: "paddle", yaml: `secrets: ["pdl_ntfset_01hsdn8d43dt7mezr1ef2jtbaw_hKkRiCGyyRhbFwIUuqiTBgI7gnWoV0Gr"]`},
	{name: "paypal", provider: "paypal", yaml: `paypal: {webhook_id: WH-1}`, cannotSign: true},
	{name: "plaid", provider: "plaid", yaml: `secrets: ["plaid_secret"]
    plaid: {client_id: c}`, cannotSign: true},
	{name: "razorpay", provider: "razorpay", yaml: `secrets: ["razorpay_send_secret"]`},
	{name: "sendgrid", provider: "sendgrid", yaml: `secrets: ["MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE83T4O/n84iotIvIW4mdBgQ/7dAfSmpqIM8kF9mN1flpVKS3GRqe62gw+2fNNRaINXvVpiglSI8eNEc6wEA3F+g=="]`, cannotSign: true},
	{name: "shopify", provider: "shopify", yaml: `secrets: ["shpss_send_client_secret"]`},
	{name: "slack", provider: "slack", yaml: `secrets: ["8f742231b10e8888abcd99yyyzzz85a5"]`},
	{name: "sns", provider: "sns", yaml: `secrets: ["arn:aws:sns:us-east-1:123456789012:hookline-orders"]`, cannotSign: true},
	{name: "square", provider: "square", yaml: `secrets: ["Ibxx_5AKakO-3qeNVR61Dw"]
    square: {notification_url: "https://example.com/webhooks/square"}`},
	{name: "standardwebhooks", provider: "standardwebhooks", yaml: `secrets: ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]`},
	{name: "stripe", provider: "stripe", yaml: `secrets: ["whsec_send_stripe"]`},
	{name: "svix", provider: "svix", yaml: `secrets: ["whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"]`},
	{name: "twilio", provider: "twilio", yaml: `secrets: ["12345"]`},
	{name: "xendit", provider: "xendit", yaml: `secrets: ["xnd_callback_token_send"]`},
	// Key-resolver overrides: the sample carries the id where the source reads it.
	{name: "stripe_json", provider: "stripe", yaml: `secrets: ["whsec_send_stripe"]
    event_id: "json:data.object.id"`},
	{name: "slack_form", provider: "slack", yaml: `secrets: ["8f742231b10e8888abcd99yyyzzz85a5"]
    event_id: "form:trigger_id"`},
	{name: "twilio_form", provider: "twilio", yaml: `secrets: ["12345"]
    event_id: "form:MessageSid"
    event_type: "form:SmsStatus"`},
	{name: "github_body", provider: "github", yaml: `secrets: ["It's a Secret to Everybody"]
    event_id: "body:sha256"`},
	{name: "square_header", provider: "square", yaml: `secrets: ["Ibxx_5AKakO-3qeNVR61Dw"]
    square: {notification_url: "https://example.com/webhooks/square"}
    event_id: "header:X-Request-Id"`},
}

// sendCase is one `hookline send` and the event id the server must answer.
type sendCase struct {
	source, eventID string
	wantIDs         []string // nil: not checked (body hashes)
	// once: send once, without the second send that must be a duplicate.
	once bool
}

// sendTwice are the adapters carrying their own example whose send is
// repeated to see the duplicate: one of each shape (a handshake scheme, a
// signed id header, an unsigned id header, a body-hash id, a form body, a
// token, Basic credentials, a Standard Webhooks sender, a body signature).
// The others are sent once: repeating them re-tests ingest's deduplication,
// which the end-to-end test in ingest checks for every provider, at the
// cost of a subprocess each.
var sendTwice = map[string]bool{"zoom": true, "twitch": true, "meta": true, "bitbucket": true, "maxio": true,
	"gitlab": true, "postmark": true, "stripe": true, "clerk": true, "polar": true, "mailgun": true, "recurly": true}

// exampleAdapter reports whether the provider samples its own example
// (the engine's entries, the Standard Webhooks senders, Mailgun).
func exampleAdapter(provider string) bool {
	for _, spec := range exampleSpecs() {
		if spec.Name == provider {
			return true
		}
	}
	_, sender := swsenders.Lookup(provider)
	return sender || provider == "mailgun"
}

func sendCases() []sendCase {
	var out []sendCase
	for _, s := range sendSources {
		if s.cannotSign {
			continue
		}
		id := "evt_send_" + s.name
		c := sendCase{source: s.name, eventID: id, wantIDs: []string{id}}
		switch s.provider {
		case "adyen":
			c.wantIDs = []string{id + ":AUTHORISATION:true", id + "-2:AUTHORISATION:true", id + "-3:AUTHORISATION:true"}
		case "gocardless":
			c.wantIDs = []string{id, id + "-2", id + "-3"}
		case "braintree":
			c.wantIDs = []string{"subscription_charged_successfully:" + id + ":2026-01-01T12:00:00Z"}
		case "lemonsqueezy":
			c.wantIDs = []string{"order_created:orders:" + id + ":2026-01-01T12:00:00.000000Z"}
		case "github":
			c.wantIDs = []string{"292430182:" + id} // the sample's hook id
		}
		if s.name == "github_body" {
			c.wantIDs = nil
		}
		c.once = exampleAdapter(s.provider) && !sendTwice[s.provider]
		for _, spec := range exampleSpecs() {
			if spec.Name == s.provider {
				c.wantIDs = []string{spec.SampleID(id, "")}
				if spec.EventID == "body:sha256" {
					c.wantIDs = nil // the body's hash
				}
			}
		}
		out = append(out, c)
	}
	// Composite ids given in full set each of their parts.
	return append(out,
		sendCase{source: "github", eventID: "292430182:72d3162e-cc78-11e3-81ab-4c9367dc0958", wantIDs: []string{"292430182:72d3162e-cc78-11e3-81ab-4c9367dc0958"}},
		sendCase{source: "adyen", eventID: "8816178914079738:CAPTURE:false", wantIDs: []string{"8816178914079738:CAPTURE:false", "8816178914079738-2:CAPTURE:false", "8816178914079738-3:CAPTURE:false"}},
		sendCase{source: "braintree", eventID: "dispute_opened:dp_1x2y3z:2026-11-30T12:00:00Z", wantIDs: []string{"dispute_opened:dp_1x2y3z:2026-11-30T12:00:00Z"}},
		sendCase{source: "lemonsqueezy", eventID: "subscription_updated:subscriptions:8:2026-11-30T12:00:00.000000Z", wantIDs: []string{"subscription_updated:subscriptions:8:2026-11-30T12:00:00.000000Z"}},
		sendCase{source: "twilio", eventID: "SM1f0e8ae6ade43cb3c0ce4525424e404f:undelivered", wantIDs: []string{"SM1f0e8ae6ade43cb3c0ce4525424e404f:undelivered"}},
		sendCase{source: "mercadopago", eventID: "12345678901", wantIDs: []string{"12345678901"}},
	)
}

// buildSendBinary builds cmd/hookline without the race detector into a
// directory of t's. `hookline send` is a one-goroutine client, and each of
// the hundred-odd sends of TestSendEveryProvider starts a process: a race
// build starts about 2.5 times slower. The server the sends talk to
// (proctest's) keeps -race.
func buildSendBinary(t *testing.T) string {
	bin := filepath.Join(t.TempDir(), "hookline")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/hookline/hookline/cmd/hookline").CombinedOutput()
	require.NoError(t, err, "build hookline: %s", out)
	return bin
}

// sendRun runs the hookline binary bin with args.
func sendRun(t *testing.T, bin string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	out, _ := cmd.CombinedOutput()
	return cmd.ProcessState.ExitCode(), string(out)
}

func sendConfig(dbURL, addr, dest string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "listen: %q\ndatabase_url: %q\nworkers: 8\nshutdown_timeout: 5s\nsources:\n", addr, dbURL)
	for _, s := range sendSources {
		fmt.Fprintf(&b, "  - name: %s\n    provider: %s\n    %s\n    destination: {url: %q, timeout: 2s, max_attempts: 3, backoff: {min: 100ms, max: 1s}}\n",
			s.name, s.provider, s.yaml, dest+"/"+s.name)
	}
	return b.String()
}

// TestCheckEveryProvider: `hookline check` accepts a configuration with a
// source for every registered provider (the send test's, each with the
// secrets and settings it needs), and `hookline providers` describes every
// registered provider without an error.
func TestCheckEveryProvider(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, sendConfig("postgres://hookline@127.0.0.1:1/hookline", "127.0.0.1:1", "http://127.0.0.1:1"))
	code, out := run(t, "check", "--config", cfg)
	require.Equal(t, 0, code, out)
	for _, s := range sendSources {
		require.Regexp(t, `(?m)^`+regexp.QuoteMeta(s.name)+` +`+regexp.QuoteMeta(s.provider)+` `, out, "check lists source %s", s.name)
	}

	code, out = run(t, "providers")
	require.Equal(t, 0, code, out)
	lines := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		name, rest, _ := strings.Cut(line, " ")
		lines[name] = strings.TrimSpace(rest)
	}
	for _, name := range providers.Names() {
		rest, ok := lines[name]
		require.True(t, ok, "hookline providers does not list %s", name)
		require.False(t, strings.HasPrefix(rest, "(") && !strings.HasPrefix(rest, "(in the body)"), "%s cannot be described: %s", name, rest)
	}
	require.GreaterOrEqual(t, len(providers.Names())-1, 75, "at least 75 adapters besides hmac")
}

// TestSendEveryProvider: `hookline send` builds, signs and posts a sample
// that a real `hookline serve` accepts for every provider whose adapter can
// sign, then the same again is a duplicate.
func TestSendEveryProvider(t *testing.T) {
	t.Parallel()
	covered := map[string]bool{}
	for _, s := range sendSources {
		covered[s.provider] = true
	}
	for _, name := range providers.Names() {
		require.True(t, covered[name], "provider %s has no source in the send test", name)
	}

	var mu sync.Mutex
	forwarded := map[string]int{}
	dest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		forwarded[r.Header.Get("Hookline-Source")]++
	}))
	t.Cleanup(dest.Close)
	dbURL := pgtest.NewURL(t)
	addr := freeAddr(t)
	cfg := writeConfig(t, sendConfig(dbURL, addr, dest.URL))
	startServe(t, cfg, addr)
	bin := buildSendBinary(t)

	// The sends run in parallel inside this group, which returns once they
	// have all finished; only then is forwarding checked.
	want := map[string]int{}
	t.Run("Send", func(t *testing.T) {
		t.Run("CannotSign", func(t *testing.T) {
			t.Parallel()
			checkCannotSign(t, bin, cfg)
		})

		for _, c := range sendCases() {
			want[c.source] += max(len(c.wantIDs), 1)
			t.Run(c.source+"/"+c.eventID, func(t *testing.T) {
				t.Parallel()
				checkSend(t, bin, cfg, c)
			})
		}

		t.Run("GithubBodyHashIsTheID", func(t *testing.T) {
			// The body is a function of --event-id, so body:sha256 is stable
			// (checked above through the duplicate); here: it is the hash.
			t.Parallel()
			code, out := sendRun(t, bin, "send", "--config", cfg, "--source", "github_body", "--event-id", "evt_send_body_hash")
			require.Equal(t, 0, code, out)
			start := strings.Index(out, `"event_id":"`)
			require.GreaterOrEqual(t, start, 0, out)
			id := out[start+len(`"event_id":"`):]
			id = id[:strings.IndexByte(id, '"')]
			_, err := hex.DecodeString(id)
			require.NoError(t, err, out)
			require.Len(t, id, 2*sha256.Size)
		})

		t.Run("DefaultIDIsFresh", func(t *testing.T) {
			t.Parallel()
			for range 2 {
				code, out := sendRun(t, bin, "send", "--config", cfg, "--source", "stripe")
				require.Equal(t, 0, code, out)
				require.Contains(t, out, `"status":"accepted"`, out)
			}
		})

	})

	t.Run("EveryEventForwarded", func(t *testing.T) {
		missing := func() []string {
			mu.Lock()
			defer mu.Unlock()
			var out []string
			for src, n := range want {
				if forwarded[src] < n {
					out = append(out, fmt.Sprintf("%s: %d of %d", src, forwarded[src], n))
				}
			}
			return out
		}
		require.Eventually(t, func() bool { return len(missing()) == 0 }, 60*time.Second, 100*time.Millisecond)
		require.Empty(t, missing(), "events not forwarded")
	})
}

// checkSend sends c through `hookline send`: accepted with the ids it must
// resolve to; then, unless c.once, the same send again is a duplicate.
func checkSend(t *testing.T, bin, cfg string, c sendCase) {
	code, out := sendRun(t, bin, "send", "--config", cfg, "--source", c.source, "--event-id", c.eventID)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "200 OK", out)
	require.Contains(t, out, `"status":"accepted"`, out)
	for _, id := range c.wantIDs {
		require.Contains(t, out, `"event_id":`+strconv.Quote(id), out)
	}
	if c.wantIDs != nil && len(c.wantIDs) > 1 {
		require.Equal(t, len(c.wantIDs), strings.Count(out, `"status":"accepted"`)-1, "every item accepted: %s", out)
	}
	if c.once {
		return
	}

	code, out = sendRun(t, bin, "send", "--config", cfg, "--source", c.source, "--event-id", c.eventID)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, `"status":"duplicate"`, out)
	require.NotContains(t, out, `"accepted"`, out)
}

// checkCannotSign: `hookline send` to a provider that signs with its own
// private key says it cannot sign, and exits 1.
func checkCannotSign(t *testing.T, bin, cfg string) {
	for _, s := range sendSources {
		if !s.cannotSign {
			continue
		}
		code, out := sendRun(t, bin, "send", "--config", cfg, "--source", s.name, "--event-id", "evt_unsignable")
		require.Equal(t, 1, code, out)
		require.Contains(t, out, "cannot sign", s.name)
	}
}
