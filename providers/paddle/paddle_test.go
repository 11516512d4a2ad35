package paddle_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/paddle"
	"github.com/hookline/hookline/providers/providertest"
)

var (
	_ providers.Provider  = (*paddle.Verifier)(nil)
	_ providers.Signer    = (*paddle.Verifier)(nil)
	_ providers.Describer = (*paddle.Verifier)(nil)
)

func sample(id string) *providers.Request {
	return providertest.Request(`{"event_id":"` + id + `","event_type":"transaction.completed","occurred_at":"2026-11-30T11:59:58.123456Z","notification_id":"ntf_01","data":{"id":"txn_01"}}`)
}

func harness() providertest.Harness {
	return providertest.Harness{
		Provider: paddle.Name,
		Secrets: []string{"pdl_ntfset_01hsdn8d43dt7mezr1ef2jtbaw_one",
			"pdl_ntfset_01hsdn8d43dt7mezr1ef2jtbaw_two"},
		Delivery: sample,
		WantType: "transaction.completed",
		WantTime: time.Date(2026, 11, 30, 11, 59, 58, 123456000, time.UTC),
		Features: providertest.Features{Timestamp: true, MultipleSignatures: true},
		MergeSignatures: func(a, b http.Header) {
			_, h1, ok := strings.Cut(b.Get(paddle.Header), ";h1=")
			if !ok {
				panic("no h1 in " + b.Get(paddle.Header))
			}
			a.Set(paddle.Header, a.Get(paddle.Header)+";h2=deadbeef;h1="+h1)
		},
	}
}

func TestConformance(t *testing.T) {
	t.Parallel()
	providertest.Run(t, harness())
}

// TestConformanceTolerance runs the suite with a configured tolerance.
func TestConformanceTolerance(t *testing.T) {
	t.Parallel()
	h := harness()
	h.Tolerance = 5 * time.Minute
	providertest.Run(t, h)
}

// The published vector of paddle-go-sdk's webhook_verifier_test.go (the SDK
// module is not served to this project, so it cannot be the oracle); the
// signature was also recomputed at development time with
// `printf '%s' "1710929255:$payload" | openssl dgst -sha256 -hmac "$secret"`.
const (
	vectorSecret    = `pdl_ntfset_01hsdn8d43dt7mezr1ef2jtbaw_hKkRiCGyyRhbFwIUuqiTBgI7gnWoV0Gr`
	vectorSignature = `ts=1710929255;h1=6c05ef8fa83c44d751be6d259ec955ce5638e2c54095bf128e408e2fce1589c8`
	vectorPayload   = `{"data":{"id":"pri_01hsdn96k2hxjzsq5yerecdj9j","name":null,"status":"active","quantity":{"maximum":999999,"minimum":1},"tax_mode":"account_setting","product_id":"pro_01hsdn8qp7yydry3x1yeg6a9rv","unit_price":{"amount":"1000","currency_code":"USD"},"custom_data":null,"description":"testing","import_meta":null,"trial_period":null,"billing_cycle":{"interval":"month","frequency":1},"unit_price_overrides":[]},"event_id":"evt_01hsdn97563968dy0szkmgjwh3","event_type":"price.created","occurred_at":"2024-03-20T10:07:35.590857Z","notification_id":"ntf_01hsdn977e920kbgzt6r6c9rqc"}`
)

func build(t *testing.T, now time.Time, tolerance time.Duration, secrets ...string) *paddle.Verifier {
	t.Helper()
	v, err := paddle.New(providers.Config{Secrets: secrets, Tolerance: tolerance, Now: func() time.Time { return now }})
	require.NoError(t, err)
	return v
}

func TestPublishedVector(t *testing.T) {
	t.Parallel()
	require.Len(t, vectorPayload, 575)
	signedAt := time.Unix(1710929255, 0)
	v := build(t, signedAt.Add(3*time.Second), 0, vectorSecret)

	req := providertest.Request(vectorPayload, paddle.Header, vectorSignature)
	require.NoError(t, v.Verify(req))

	ours := providertest.Request(vectorPayload)
	require.NoError(t, v.Sign(ours, signedAt))
	require.Equal(t, vectorSignature, ours.Header.Get(paddle.Header))

	ev, err := v.Resolve(req)
	require.NoError(t, err)
	require.Equal(t, "evt_01hsdn97563968dy0szkmgjwh3", ev.ID)
	require.Equal(t, "price.created", ev.Type)
	require.True(t, ev.Time.Equal(time.Date(2024, 3, 20, 10, 7, 35, 590857000, time.UTC)))

	// The SDK's negative cases.
	require.ErrorIs(t, v.Verify(providertest.Request(`{}`, paddle.Header, vectorSignature)), providers.ErrInvalidSignature)
	require.ErrorIs(t, v.Verify(providertest.Request(vectorPayload, paddle.Header, "ts=x;h1=y")), providers.ErrInvalidSignature)
	require.ErrorIs(t, build(t, signedAt, 0, "abc").Verify(req), providers.ErrInvalidSignature)
	require.ErrorIs(t, v.Verify(providertest.Request(vectorPayload)), providers.ErrNoSignature)

	// 6 s later is past the 5 s default; a configured tolerance widens it.
	require.ErrorIs(t, build(t, signedAt.Add(6*time.Second), 0, vectorSecret).Verify(req), providers.ErrTimestampTooOld)
	require.ErrorIs(t, build(t, signedAt.Add(-6*time.Second), 0, vectorSecret).Verify(req), providers.ErrTimestampTooNew)
	require.NoError(t, build(t, signedAt.Add(time.Hour), 2*time.Hour, vectorSecret).Verify(req))
}

func TestSeveralH1(t *testing.T) {
	t.Parallel()
	v := build(t, time.Unix(1710929255, 0), 0, "other secret", vectorSecret)
	_, h1, ok := strings.Cut(vectorSignature, ";h1=")
	require.True(t, ok)
	for _, header := range []string{
		"ts=1710929255;h1=" + strings.Repeat("0", 64) + ";h1=" + h1,
		"ts=1710929255; h1=zz; h1=" + h1,
		"h1=" + h1 + ";ts=1710929255",
		"ts=1710929255;h0=abc;h1=" + h1,
	} {
		require.NoError(t, v.Verify(providertest.Request(vectorPayload, paddle.Header, header)), header)
	}
	for _, header := range []string{
		"ts=1710929256;h1=" + h1, // the timestamp is signed
		"ts=1710929255;h2=" + h1, // unknown schemes never count
		"ts=1710929255;ts=1710929255;h1=" + h1,
		"ts=+1710929255;h1=" + h1,
		"ts=1710929255",
		"h1=" + h1,
	} {
		require.ErrorIs(t, v.Verify(providertest.Request(vectorPayload, paddle.Header, header)), providers.ErrInvalidSignature, header)
	}
}

func TestResolveErrors(t *testing.T) {
	t.Parallel()
	v := build(t, providertest.Now, 0, "s")
	_, err := v.Resolve(providertest.Request(`{"event_type":"x"}`))
	require.ErrorIs(t, err, providers.ErrNoEventID)
	_, err = v.Resolve(providertest.Request(`{"event_id":`))
	require.ErrorIs(t, err, providers.ErrMalformed)
	require.Equal(t, "json:event_id", v.Describe().DefaultEventID)
	require.Equal(t, 5*time.Second, v.Describe().DefaultTolerance)

	_, err = paddle.New(providers.Config{})
	require.Error(t, err)
	_, err = paddle.New(providers.Config{Secrets: []string{"s"}, Settings: providertest.DecodeSettings(map[string]any{"tolerance": "5s"})})
	require.Error(t, err)
}

func FuzzParseHeader(f *testing.F) {
	f.Add(vectorSignature)
	f.Add("ts=1710929255;h1=00;h1=6c05ef8fa83c44d751be6d259ec955ce5638e2c54095bf128e408e2fce1589c8")
	f.Add("ts=;h1=")
	f.Add(";;;=")
	f.Fuzz(func(t *testing.T, v string) {
		ts, sigs, err := paddle.ParseHeader(v)
		if err != nil {
			return
		}
		if len(sigs) == 0 || ts == "" {
			t.Fatalf("no error but ts=%q and %d signatures for %q", ts, len(sigs), v)
		}
		if !strings.Contains(v, "ts="+ts) {
			t.Fatalf("ts %q not in %q", ts, v)
		}
		for _, s := range sigs {
			if len(s) != 32 {
				t.Fatalf("signature of %d bytes accepted from %q", len(s), v)
			}
		}
	})
}
