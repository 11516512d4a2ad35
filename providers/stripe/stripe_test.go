package stripe_test

import (
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	stripewebhook "github.com/stripe/stripe-go/v82/webhook"

	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/providertest"
	"github.com/hookline/hookline/providers/stripe"
)

var _ providers.Provider = (*stripe.Verifier)(nil)
var _ providers.Signer = (*stripe.Verifier)(nil)

func sample(id string) *providers.Request {
	return providertest.Request(`{"id":"` + id + `","object":"event","type":"payment_intent.succeeded","created":1764504000,"data":{"object":{"id":"pi_1","amount":2000}}}`)
}

func harness() providertest.Harness {
	return providertest.Harness{
		Provider: stripe.Name,
		Secrets:  []string{"whsec_test_secret_one", "whsec_test_secret_two"},
		Delivery: sample,
		WantType: "payment_intent.succeeded",
		WantTime: time.Unix(1764504000, 0),
		Features: providertest.Features{Timestamp: true, MultipleSignatures: true},
		MergeSignatures: func(a, b http.Header) {
			_, v1, ok := strings.Cut(b.Get(stripe.Header), ",v1=")
			if !ok {
				panic("no v1 in " + b.Get(stripe.Header))
			}
			a.Set(stripe.Header, a.Get(stripe.Header)+",v0=deadbeef,v1="+v1)
		},
	}
}

func TestConformance(t *testing.T) {
	t.Parallel()
	providertest.Run(t, harness())
}

// TestStripeGoOracle checks our verifier against payloads signed by stripe-go.
func TestStripeGoOracle(t *testing.T) {
	t.Parallel()
	h := harness()
	p := h.Build(t, "whsec_oracle")
	body := sample("evt_oracle").Body

	signed := stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{
		Payload: body, Secret: "whsec_oracle", Timestamp: providertest.Now,
	})
	req := sample("evt_oracle")
	req.Header.Set(stripe.Header, signed.Header)
	require.NoError(t, p.Verify(req))

	// And the other way: stripe-go accepts what we sign.
	ours := sample("evt_oracle")
	require.NoError(t, p.(providers.Signer).Sign(ours, time.Now()))
	require.NoError(t, stripewebhook.ValidatePayload(ours.Body, ours.Header.Get(stripe.Header), "whsec_oracle"))

	// A v0 (test-mode) signature alone is not enough.
	sig := stripewebhook.ComputeSignature(providertest.Now, body, "whsec_oracle")
	req.Header.Set(stripe.Header, "t="+strconv.FormatInt(providertest.Now.Unix(), 10)+",v0="+hex.EncodeToString(sig))
	require.ErrorIs(t, p.Verify(req), providers.ErrInvalidSignature)
}

func FuzzParseHeader(f *testing.F) {
	f.Add("t=1614265330,v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd,v0=6ffbb59b2300aae63f272406069a9788598b792a944a07aba816edb039989a39")
	f.Add("t=,v1=")
	f.Add(",,,=")
	f.Fuzz(func(t *testing.T, v string) {
		_, sigs, err := stripe.ParseHeader(v)
		if err == nil && len(sigs) == 0 {
			t.Fatalf("no error but no signatures for %q", v)
		}
		for _, s := range sigs {
			if len(s) != 32 {
				t.Fatalf("signature of %d bytes accepted from %q", len(s), v)
			}
		}
	})
}
