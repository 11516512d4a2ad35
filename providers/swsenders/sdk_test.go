package swsenders_test

import (
	"testing"
	"time"

	"github.com/openai/openai-go/option"
	openaiwebhooks "github.com/openai/openai-go/webhooks"
	"github.com/resend/resend-go/v3"
	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/providertest"
	"github.com/hookline/hookline/providers/standardwebhooks"
	"github.com/hookline/hookline/providers/swsenders"
)

// OpenAI's own test vector: the delivery its official Go SDK tests
// verification with (github.com/openai/openai-go v1.12.0,
// webhooks/webhook_test.go, "Standardized test constants (matches
// TypeScript implementation)"; read 2026-12-01 from the module proxy's
// copy).
const (
	openaiPayload   = `{"id": "evt_685c059ae3a481909bdc86819b066fb6", "object": "event", "created_at": 1750861210, "type": "response.completed", "data": {"id": "resp_123"}}`
	openaiSecret    = "whsec_RdvaYFYUXuIFuEbvZHwMfYFhUf7aMYjYcmM24+Aj40c="
	openaiTimestamp = 1750861210
	openaiID        = "wh_685c059ae39c8190af8c71ed1022a24d"
	openaiSignature = "v1,gUAg4R2hWouRZqRQG4uJypNS8YK885G838+EHb4nKBY="
)

// TestOpenAIPublishedVector: the openai adapter accepts OpenAI's vector,
// resolves it, and signs the same delivery to the same signature.
func TestOpenAIPublishedVector(t *testing.T) {
	t.Parallel()
	at := time.Unix(openaiTimestamp, 0)
	p, err := providers.New("openai", providers.Config{Secrets: []string{openaiSecret}, Now: func() time.Time { return at }})
	require.NoError(t, err)
	req := providertest.Request(openaiPayload, standardwebhooks.HeaderID, openaiID,
		standardwebhooks.HeaderTimestamp, "1750861210", standardwebhooks.HeaderSignature, openaiSignature)
	require.NoError(t, p.Verify(req))
	ev, err := p.Resolve(req)
	require.NoError(t, err)
	require.Equal(t, openaiID, ev.ID)
	require.Equal(t, "response.completed", ev.Type)

	ours := providertest.Request(openaiPayload, standardwebhooks.HeaderID, openaiID)
	require.NoError(t, p.(providers.Signer).Sign(ours, at))
	require.Equal(t, openaiSignature, ours.Header.Get(standardwebhooks.HeaderSignature))
}

// TestOpenAISDKOracle: OpenAI's official Go SDK (a test-only dependency)
// and the adapter agree on the adapter's own deliveries and on tampered
// ones: what the adapter signs, the SDK accepts, and each refuses a
// changed body, id, timestamp or secret.
func TestOpenAISDKOracle(t *testing.T) {
	t.Parallel()
	s, _ := swsenders.Lookup("openai")
	at := providertest.Now
	p, err := providers.New("openai", providers.Config{Secrets: []string{openaiSecret}, Now: func() time.Time { return at }})
	require.NoError(t, err)
	sdk := openaiwebhooks.NewWebhookService(option.WithWebhookSecret(openaiSecret))
	sdkVerify := func(r *providers.Request) error {
		return sdk.VerifySignatureWithToleranceAndTime(r.Body, r.Header, 5*time.Minute, at)
	}
	agree(t, p, s.Sample("msg_2xXoracle", ""), at, sdkVerify)
}

// TestResendSDKOracle: Resend's official Go SDK (a test-only dependency,
// whose Verify reads the svix-* headers and checks the time against the
// clock) and the adapter agree on the adapter's deliveries and on
// tampered ones.
func TestResendSDKOracle(t *testing.T) {
	t.Parallel()
	s, _ := swsenders.Lookup("resend")
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	at := time.Now()
	p, err := providers.New("resend", providers.Config{Secrets: []string{secret}, Now: func() time.Time { return at }})
	require.NoError(t, err)
	client := resend.NewClient("re_test")
	sdkVerify := func(r *providers.Request) error {
		return client.Webhooks.Verify(&resend.VerifyWebhookOptions{Payload: string(r.Body), WebhookSecret: secret,
			Headers: resend.WebhookHeaders{Id: r.Header.Get(standardwebhooks.HeaderID),
				Timestamp: r.Header.Get(standardwebhooks.HeaderTimestamp), Signature: r.Header.Get(standardwebhooks.HeaderSignature)}})
	}
	agree(t, p, s.Sample("msg_2xXoracle", ""), at, sdkVerify)
}

// agree signs req with p at at and checks that sdk and p accept it, and
// both refuse each tampered variant.
func agree(t *testing.T, p providers.Provider, req *providers.Request, at time.Time, sdk func(*providers.Request) error) {
	t.Helper()
	require.NoError(t, p.(providers.Signer).Sign(req, at))
	require.NoError(t, sdk(req), "the SDK refuses what the adapter signs")
	require.NoError(t, p.Verify(req))
	for name, tamper := range map[string]func(r *providers.Request){
		"body":      func(r *providers.Request) { r.Body[len(r.Body)/2] ^= 1 },
		"id":        func(r *providers.Request) { r.Header.Set(standardwebhooks.HeaderID, "msg_other") },
		"timestamp": func(r *providers.Request) { r.Header.Set(standardwebhooks.HeaderTimestamp, "1764504001") },
		"signature": func(r *providers.Request) {
			r.Header.Set(standardwebhooks.HeaderSignature, "v1,gUAg4R2hWouRZqRQG4uJypNS8YK885G838+EHb4nKBY=")
		},
	} {
		bad := providertest.Clone(req)
		tamper(bad)
		require.Error(t, sdk(bad), "the SDK accepts a changed %s", name)
		require.Error(t, p.Verify(bad), "the adapter accepts a changed %s", name)
	}
}
