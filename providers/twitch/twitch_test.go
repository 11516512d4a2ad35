package twitch_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/providertest"
	"github.com/hookline/hookline/providers/twitch"
)

var _ providers.Responder = (*twitch.Verifier)(nil)

func harness() providertest.Harness {
	return providertest.Harness{
		Provider: twitch.Name,
		Secrets:  []string{"twitch_secret_one", "twitch_secret_two"},
		Delivery: func(id string) *providers.Request { return twitch.Spec.Sample(id, "") },
		WantType: "channel.follow",
		Features: providertest.Features{Timestamp: true},
	}
}

func TestConformance(t *testing.T) {
	t.Parallel()
	providertest.Run(t, harness())
}

// TestDocFormula recomputes the signature as Twitch's "Verifying the event
// message" describes it (https://dev.twitch.tv/docs/eventsub/handling-webhook-events/#verifying-the-event-message,
// ⚠ not re-checked for this change: the formula as documented there): HMAC-SHA256 under the subscription secret of message
// id + timestamp + raw body, header "sha256=" + hex. Twitch publishes no
// test vector; the formula is recomputed independently.
func TestDocFormula(t *testing.T) {
	t.Parallel()
	h := harness()
	p := h.Build(t, "s3cre7")
	req := twitch.Spec.Sample("e76c6bd4-55c9-4987-8304-da1588d8988b", "")
	ts := providertest.Now.Add(-time.Minute).Format(time.RFC3339Nano)
	req.Header.Set(twitch.HeaderTimestamp, ts)
	m := hmac.New(sha256.New, []byte("s3cre7"))
	m.Write([]byte("e76c6bd4-55c9-4987-8304-da1588d8988b" + ts + string(req.Body)))
	req.Header.Set(twitch.HeaderSignature, "sha256="+hex.EncodeToString(m.Sum(nil)))
	require.NoError(t, p.Verify(req))
	ev, err := p.Resolve(req)
	require.NoError(t, err)
	require.Equal(t, "e76c6bd4-55c9-4987-8304-da1588d8988b", ev.ID)
	require.False(t, ev.Time.IsZero())

	// The id is signed: another id breaks the signature.
	req.Header.Set(twitch.HeaderID, "another")
	require.ErrorIs(t, p.Verify(req), providers.ErrInvalidSignature)
}

// TestCallbackVerification: a verified webhook_callback_verification is
// answered 200 with the raw challenge.
func TestCallbackVerification(t *testing.T) {
	t.Parallel()
	h := harness()
	p := h.Build(t, "s3cre7").(*twitch.Verifier)
	req := providertest.Request(`{"challenge":"pogchamp-kappa-360noscope-vohiyo","subscription":{"id":"f1c2a387-161a-49f9-a165-0f21d7a4e1c4","status":"webhook_callback_verification_pending","type":"channel.follow","version":"2"}}`,
		twitch.HeaderID, "e76c6bd4", twitch.HeaderType, "webhook_callback_verification")
	require.NoError(t, p.Sign(req, providertest.Now))
	require.NoError(t, p.Verify(req))
	status, body, handled := p.Respond(req)
	require.True(t, handled)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "pogchamp-kappa-360noscope-vohiyo", string(body))
	// Twitch reads the raw challenge: ingest answers it as text/plain.
	require.Equal(t, "text/plain", providers.ResponseContentType(p))

	_, _, handled = p.Respond(twitch.Spec.Sample("1", ""))
	require.False(t, handled)
}

func FuzzChallenge(f *testing.F) {
	f.Add([]byte(`{"challenge":"pogchamp"}`), "webhook_callback_verification")
	f.Add([]byte(`{"challenge":{}}`), "webhook_callback_verification")
	f.Add([]byte(`{`), "notification")
	f.Fuzz(func(t *testing.T, body []byte, typ string) {
		r := &providers.Request{Body: body, Header: http.Header{}}
		r.Header.Set(twitch.HeaderType, typ)
		c, ok := twitch.Challenge(r)
		if ok != (c != "") {
			t.Fatalf("ok %v with challenge %q", ok, c)
		}
	})
}
