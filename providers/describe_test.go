package providers_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/providers"
)

// idSigned is whether each adapter's default event id is covered by its
// signature, and why.
var idSigned = map[string]bool{
	"adyen":            true,  // pspReference, eventCode and success are among each item's signed fields
	"braintree":        true,  // read from bt_payload, which is signed
	"checkout":         true,  // json:id of the signed body
	"coinbase":         true,  // json:event.id of the signed body
	"github":           false, // X-GitHub-Hook-ID and X-GitHub-Delivery are not signed
	"gocardless":       true,  // each item's json:id, within the signed body
	"hmac":             false, // no default id: the source configures it
	"lemonsqueezy":     true,  // composite from the signed body (X-Event-Name only stands in for a missing meta.event_name)
	"mercadopago":      false, // json:id of a body the manifest does not cover
	"mollie":           true,  // signed-only mode: json:id or form:id of the signed body (see below for allow_unsigned)
	"paddle":           true,  // json:event_id of the signed body
	"paypal":           false, // json:id of a body signed only through its CRC-32
	"plaid":            true,  // body:sha256 of a body whose hash the signed JWT carries
	"razorpay":         false, // X-Razorpay-Event-Id is not signed
	"shopify":          false, // X-Shopify-Event-Id is not signed
	"slack":            true,  // json:event_id of the signed body
	"square":           true,  // json:event_id of the signed body
	"standardwebhooks": true,  // webhook-id is part of the signed content
	"svix":             true,  // as standardwebhooks
	"stripe":           true,  // json:id of the signed body
	"twilio":           false, // I-Twilio-Idempotency-Token is not signed
	"xendit":           false, // the static token covers nothing
}

// signsNothing are the adapters whose IDSigned is false and that have no
// signed content to key a replay on: hmac (no default id; what a source
// configures may be signed or not) and xendit (a static token, no signature).
var signsNothing = map[string]bool{"hmac": true, "xendit": true}

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
