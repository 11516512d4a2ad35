package providers_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/providers"
)

// idSigned is whether each adapter's default event id is covered by its
// signature, and why.
var idSigned = map[string]bool{
	"adyen":            true,  // pspReference, eventCode and success are among each item's signed fields
	"appstore":         true,  // notificationUUID, inside the signed JWS payload
	"braintree":        true,  // read from bt_payload, which is signed
	"checkout":         true,  // json:id of the signed body
	"coinbase":         true,  // json:event.id of the signed body
	"github":           false, // X-GitHub-Hook-ID and X-GitHub-Delivery are not signed
	"gocardless":       true,  // each item's json:id, within the signed body
	"googleplay":       false, // json:message.messageId of a body the OIDC token does not cover
	"hmac":             false, // no default id: the source configures it
	"lemonsqueezy":     true,  // composite from the signed body (X-Event-Name only stands in for a missing meta.event_name)
	"mercadopago":      false, // json:id of a body the manifest does not cover
	"mollie":           true,  // signed-only mode: json:id or form:id of the signed body (see below for allow_unsigned)
	"paddle":           true,  // json:event_id of the signed body
	"paypal":           false, // json:id of a body signed only through its CRC-32
	"plaid":            true,  // body:sha256 of a body whose hash the signed JWT carries
	"razorpay":         false, // X-Razorpay-Event-Id is not signed
	"sendgrid":         true,  // each item's json:sg_event_id, within the signed body
	"shopify":          false, // X-Shopify-Event-Id is not signed
	"slack":            true,  // json:event_id of the signed body
	"sns":              true,  // json:MessageId, one of the signed fields
	"square":           true,  // json:event_id of the signed body
	"standardwebhooks": true,  // webhook-id is part of the signed content
	"svix":             true,  // as standardwebhooks
	"stripe":           true,  // json:id of the signed body
	"twilio":           false, // I-Twilio-Idempotency-Token is not signed
	"xendit":           false, // the static token covers nothing
	// Standard Webhooks senders: webhook-id is part of the signed content.
	"brex": true, "clerk": true, "dodopayments": true, "lithic": true, "make": true,
	"openai": true, "polar": true, "replicate": true, "resend": true,
	// Hand-written adapters on the HMAC engine, and Mailgun.
	"mailgun":  false, // event-data.id is outside the signed timestamp and token
	"meta":     true,  // body:sha256 of the signed body
	"whatsapp": true,  // as meta
	"twitch":   true,  // the message id header is signed
	"zoom":     true,  // composite from the signed body
	// The HMAC engine's entries (providers/hmacspec): json:, form: and
	// body: ids read the signed body; header ids are not signed; token and
	// Basic schemes sign nothing.
	"airwallex": true, "alchemy": true, "authorizenet": true, "calcom": true, "calendly": true,
	"cashfree": true, "column": true, "customerio": true, "docusign": true, "dwolla": true,
	"easypost": true, "gusto": true, "hubspot": true, "intercom": true, "maxio": true,
	"monnify": true, "mux": true, "nmi": true, "notion": true, "onfido": true, "orb": true,
	"paymongo": true, "paystack": true, "persona": true, "printify": true, "recurly": true,
	"revolut": true, "segment": true, "teller": true, "typeform": true, "vercel": true,
	"webflow": true, "workos": true, "worldline": true, "zendesk": true,
	"bitbucket": false, "linear": false, "sentry": false, "woocommerce": false, // header ids
	"chargebee": false, "flutterwave": false, "gitlab": false, "postmark": false, "telegram": false, // tokens
}

// signsNothing are the adapters whose IDSigned is false and that have no
// signed content to key a replay on: hmac (no default id; what a source
// configures may be signed or not), xendit (a static token, no signature)
// and googleplay (an ID token that covers nothing of the body).
var signsNothing = map[string]bool{"hmac": true, "xendit": true,
	// The Pub/Sub push's ID token authenticates the sender, not the body.
	"googleplay": true,
	// Static tokens and HTTP Basic credentials (providers/hmacspec).
	"chargebee": true, "flutterwave": true, "gitlab": true, "postmark": true, "telegram": true}

// buildProbe builds the named adapter with the settings benchmarks use
// (benchProbes), or with secrets and settings when settings is not nil.
func buildProbe(t *testing.T, name string, secrets []string, settings map[string]any) providers.Provider {
	t.Helper()
	pr, found := benchProbes[name]
	if !found {
		pr.secrets = []string{"whsec_probe"}
	}
	if settings != nil {
		pr.secrets, pr.settings = secrets, settings
	}
	p, err := providers.New(name, providers.Config{Source: "test", Secrets: pr.secrets, Settings: benchSettings(pr.settings),
		Now: func() time.Time { return time.Unix(1764504000, 0) }})
	require.NoError(t, err, name)
	return p
}

// TestIDSignedOrContentKeyer: every registered adapter describes whether its
// default id is signed, truthfully as far as idSigned records it, and one
// whose id is not signed names what is (providers.ContentKeyer), unless it
// signs nothing at all.
func TestIDSignedOrContentKeyer(t *testing.T) {
	t.Parallel()
	for _, name := range providers.Names() {
		t.Run(name, func(t *testing.T) {
			var secrets []string
			var settings map[string]any
			if name == "mollie" {
				secrets, settings = []string{"s"}, map[string]any{} // signed-only: secrets, no allow_unsigned
			}
			p := buildProbe(t, name, secrets, settings)
			d, ok := p.(providers.Describer)
			require.True(t, ok, "%s does not implement providers.Describer", name)
			desc := d.Describe()
			_, isKeyer := p.(providers.ContentKeyer)
			if want, known := idSigned[name]; known {
				require.Equal(t, want, desc.IDSigned, "IDSigned of %s", name)
			}
			if !desc.IDSigned && !signsNothing[name] {
				require.True(t, isKeyer, "%s: IDSigned is false, so it must implement providers.ContentKeyer", name)
			}
			if signsNothing[name] {
				require.False(t, desc.IDSigned)
				require.False(t, isKeyer, "%s signs nothing: a content key would key unsigned content", name)
			}
		})
	}

	// Mollie with allow_unsigned: a classic delivery is signed by nothing,
	// so neither is its id, and there is no signed content to key.
	t.Run("mollie/allow_unsigned", func(t *testing.T) {
		for _, secrets := range [][]string{nil, {"s"}} {
			p := buildProbe(t, "mollie", secrets, map[string]any{"allow_unsigned": true})
			require.False(t, p.(providers.Describer).Describe().IDSigned)
			_, isKeyer := p.(providers.ContentKeyer)
			require.False(t, isKeyer)
		}
	})
}

// TestContentDigest: the scheme prefix separates equal content of two
// schemes, and the parts are hashed as their concatenation.
func TestContentDigest(t *testing.T) {
	t.Parallel()
	a := providers.ContentDigest("github", []byte("body"))
	require.Len(t, a, 32)
	require.Equal(t, a, providers.ContentDigest("github", []byte("bo"), []byte("dy")))
	require.NotEqual(t, a, providers.ContentDigest("shopify", []byte("body")))
	require.NotEqual(t, a, providers.ContentDigest("githu", []byte("bbody")))
	require.NotEqual(t, a, providers.ContentDigest("github", []byte("body ")))
}

// TestDocsRowPerAdapter: docs/providers.md has a section for every
// registered adapter, and one row in its per-adapter table with every
// column filled: event type, id signed, settings, retry horizon, dedup
// window and source of truth.
func TestDocsRowPerAdapter(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../docs/providers.md")
	require.NoError(t, err)
	doc := string(raw)
	start := strings.Index(doc, "### Per adapter:")
	require.GreaterOrEqual(t, start, 0, "the per-adapter table")
	rows := map[string][]string{}
	table := doc[start:]
	table = table[strings.Index(table, "\n|"):]
	if end := strings.Index(table, "\n\n"); end >= 0 {
		table = table[:end]
	}
	for _, line := range strings.Split(table, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		name := strings.Trim(strings.TrimSpace(cells[0]), "`")
		require.NotContains(t, rows, name, "two rows for %s", name)
		rows[name] = cells
	}
	for _, name := range providers.Names() {
		require.Contains(t, doc, "\n## "+name+"\n", "a section for %s", name)
		cells, ok := rows[name]
		require.True(t, ok, "no row for %s in the per-adapter table", name)
		require.Len(t, cells, 7, "%s: %q", name, cells)
		for i, c := range cells {
			require.NotEmpty(t, strings.TrimSpace(c), "%s: column %d is empty", name, i)
		}
	}
	require.Len(t, rows, len(providers.Names()), "rows for adapters that are not registered")
}

// TestDocsOracleAgreesWithTable: an adapter's section says "Oracle: doc
// formula." only when the per-adapter table's source of truth is the doc
// formula too; a section never claims less than what its tests check.
func TestDocsOracleAgreesWithTable(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../docs/providers.md")
	require.NoError(t, err)
	doc := string(raw)
	start := strings.Index(doc, "### Per adapter:")
	require.GreaterOrEqual(t, start, 0, "the per-adapter table")
	source := map[string]string{}
	for _, line := range strings.Split(doc[start:], "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		source[strings.Trim(strings.TrimSpace(cells[0]), "`")] = strings.TrimSpace(cells[len(cells)-1])
	}
	for _, name := range providers.Names() {
		at := strings.Index(doc, "\n## "+name+"\n")
		require.GreaterOrEqual(t, at, 0, "a section for %s", name)
		section := doc[at+1:]
		if end := strings.Index(section[3:], "\n## "); end >= 0 {
			section = section[:end+3]
		}
		if strings.Contains(section, "\n- **Oracle**: doc formula.\n") {
			require.True(t, strings.HasPrefix(source[name], "doc formula"),
				"%s: the section says its oracle is the doc formula, the per-adapter table says %q", name, source[name])
		}
	}
}
