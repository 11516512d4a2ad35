package razorpay_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/razorpay/razorpay-go/utils"
	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/providertest"
	"github.com/hookline/hookline/providers/razorpay"
)

var _ providers.Provider = (*razorpay.Verifier)(nil)
var _ providers.Signer = (*razorpay.Verifier)(nil)
var _ providers.Describer = (*razorpay.Verifier)(nil)

func sample(id string) *providers.Request {
	req := providertest.Request(`{"entity":"event","account_id":"acc_HVFD0PFnHPAzKj","event":"payment.captured","contains":["payment"],"payload":{"payment":{"entity":{"id":"pay_JUEM4c0pSLpFEW","amount":12300,"currency":"INR","status":"captured"}}},"created_at":1764503880}`)
	req.Header.Set(razorpay.EventIDHeader, id)
	return req
}

func harness() providertest.Harness {
	return providertest.Harness{
		Provider: razorpay.Name,
		Secrets:  []string{"rzp_webhook_secret_one", "rzp_webhook_secret_two"},
		Delivery: sample,
		WantType: "payment.captured",
		WantTime: time.Unix(1764503880, 0),
	}
}

func TestConformance(t *testing.T) {
	t.Parallel()
	providertest.Run(t, harness())
}

// sdkBody is the 778-byte webhook body of razorpay-go v1.3.3
// resources/verify_payment_test.go (TestVerifyWebhookSignature), signed there
// with secret "123456".
const (
	sdkSecret = "123456"
	sdkBody   = `{"entity":"event","account_id":"acc_HVFD0PFnHPAzKj","event":"payment.authorized","contains":["payment"],"payload":{"payment":{"entity":{"id":"pay_JUEM4c0pSLpFEW","entity":"payment","amount":12300,"currency":"INR","status":"authorized","order_id":"order_JUELuT6cFaHkvd","invoice_id":null,"international":false,"method":"netbanking","amount_refunded":0,"refund_status":null,"captured":false,"description":"#JUELZ1z1EC0pwi","card_id":null,"bank":"SBIN","wallet":null,"vpa":null,"email":"prathmesh.bijjargi@razorpay.com","contact":"+917411714931","notes":[],"fee":null,"tax":null,"error_code":null,"error_description":null,"error_source":null,"error_step":null,"error_reason":null,"acquirer_data":{"bank_transaction_id":"6416615"},"created_at":1652339804}}},"created_at":1652339806}`
	sdkSig    = "ea962f3a2a8090aa14ef10fc178306edcb46ee7ccadae8afe2275cda26f3d2a6"
)

// TestRazorpayGoOracle checks the SDK's published vector and that
// razorpay-go's utils.VerifyWebhookSignature agrees with us both ways.
func TestRazorpayGoOracle(t *testing.T) {
	t.Parallel()
	require.Len(t, sdkBody, 778)
	require.True(t, utils.VerifyWebhookSignature(sdkBody, sdkSig, sdkSecret), "the oracle accepts its own vector")

	p, err := razorpay.New(providers.Config{Secrets: []string{"old_secret", sdkSecret}})
	require.NoError(t, err)
	req := providertest.Request(sdkBody, razorpay.Header, sdkSig, razorpay.EventIDHeader, "evt_JUEM4c0pSLpFEW")
	require.NoError(t, p.Verify(req))
	ev, err := p.Resolve(req)
	require.NoError(t, err)
	require.Equal(t, providers.Event{ID: "evt_JUEM4c0pSLpFEW", Type: "payment.authorized", Time: time.Unix(1652339806, 0).UTC()}, ev)

	// What we sign, the SDK accepts; what we reject, the SDK rejects.
	signer, err := razorpay.New(providers.Config{Secrets: []string{"another secret"}})
	require.NoError(t, err)
	ours := sample("evt_ours")
	require.NoError(t, signer.Sign(ours, time.Time{}))
	require.True(t, utils.VerifyWebhookSignature(string(ours.Body), ours.Header.Get(razorpay.Header), "another secret"))
	require.ErrorIs(t, p.Verify(ours), providers.ErrInvalidSignature)
	require.False(t, utils.VerifyWebhookSignature(string(ours.Body), ours.Header.Get(razorpay.Header), sdkSecret))
}

func TestResolve(t *testing.T) {
	t.Parallel()
	p, err := razorpay.New(providers.Config{Secrets: []string{sdkSecret}})
	require.NoError(t, err)

	_, err = p.Resolve(providertest.Request(sdkBody))
	require.ErrorIs(t, err, providers.ErrNoEventID)
	_, err = p.Resolve(providertest.Request(sdkBody, razorpay.EventIDHeader, "   "))
	require.ErrorIs(t, err, providers.ErrNoEventID)
	_, err = p.Resolve(providertest.Request(`{"event":`, razorpay.EventIDHeader, "evt_1"))
	require.ErrorIs(t, err, providers.ErrMalformed)
}

func TestNew(t *testing.T) {
	t.Parallel()
	_, err := razorpay.New(providers.Config{})
	require.Error(t, err)
	_, err = razorpay.New(providers.Config{Secrets: []string{"k"}, Settings: providertest.DecodeSettings(map[string]any{"key_id": "x"})})
	require.Error(t, err, "unknown settings are an error")

	// A tolerance is accepted and ignored: the scheme has no timestamp.
	p, err := razorpay.New(providers.Config{Secrets: []string{sdkSecret}, Tolerance: time.Nanosecond})
	require.NoError(t, err)
	require.NoError(t, p.Verify(providertest.Request(sdkBody, razorpay.Header, sdkSig)))
	require.Equal(t, "header:X-Razorpay-Event-Id", p.Describe().DefaultEventID)
}

// FuzzVerify feeds arbitrary X-Razorpay-Signature values: no panics, only
// signature errors, and only the exact vector passes.
func FuzzVerify(f *testing.F) {
	f.Add(sdkSig)
	f.Add("EA962F3A2A8090AA14EF10FC178306EDCB46EE7CCADAE8AFE2275CDA26F3D2A6")
	f.Add(sdkSig + "00")
	f.Add("sha256=" + sdkSig)
	f.Add("")
	p, err := razorpay.New(providers.Config{Secrets: []string{sdkSecret}})
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, sig string) {
		req := providertest.Request(sdkBody)
		req.Header = http.Header{razorpay.Header: {sig}}
		err := p.Verify(req)
		if err == nil {
			if sig != sdkSig {
				t.Fatalf("accepted %q", sig)
			}
			return
		}
		if !providers.IsSignatureError(err) {
			t.Fatalf("not a signature error: %v", err)
		}
	})
}

// TestContentKey: X-Razorpay-Event-Id is not signed; a replay under a fresh
// one has the original's content key, another body another key.
func TestContentKey(t *testing.T) {
	t.Parallel()
	other := sample("evt_other")
	other.Body = []byte(`{"entity":"event","event":"payment.failed","created_at":1764503881}`)
	providertest.ContentKeyReplay(t, harness(), func(r *providers.Request) {
		r.Header.Set(razorpay.EventIDHeader, "evt_fresh")
	}, other)
	p, err := razorpay.New(providers.Config{Secrets: []string{"s"}})
	require.NoError(t, err)
	require.False(t, p.Describe().IDSigned)
}
