package square_test

import (
	"encoding/base64"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/providertest"
	"github.com/hookline/hookline/providers/square"
)

var _ providers.Provider = (*square.Verifier)(nil)
var _ providers.Signer = (*square.Verifier)(nil)

const notificationURL = "https://hooks.example.com/webhooks/square"

func sample(id string) *providers.Request {
	return providertest.Request(`{"merchant_id":"MLEFBHHSJGVHD","type":"payment.updated","event_id":"` + id + `","created_at":"2026-11-30T11:59:30.123456789Z","data":{"type":"payment","id":"KkAkhdMsgzn59SM8A89WgKwekxLZY","object":{"payment":{"id":"KkAkhdMsgzn59SM8A89WgKwekxLZY","status":"COMPLETED"}}}}`)
}

func harness() providertest.Harness {
	return providertest.Harness{
		Provider: square.Name,
		Settings: map[string]any{"notification_url": notificationURL},
		Secrets:  []string{"Ibxx_5AKakO-3qeNVR61Dw", "aBcD_9XYzzO-1qeNVR61Ew"},
		Delivery: sample,
		WantType: "payment.updated",
		WantTime: time.Date(2026, 11, 30, 11, 59, 30, 123456789, time.UTC),
	}
}

func TestConformance(t *testing.T) {
	t.Parallel()
	providertest.Run(t, harness())
}

// TestSDKVector: the vector of square-go-sdk's webhooks tests (the SDK
// module is not served here), recomputed with
// `printf '%s' "$URL$BODY" | openssl dgst -sha256 -hmac "$KEY" -binary | base64`.
func TestSDKVector(t *testing.T) {
	t.Parallel()
	const (
		key  = "Ibxx_5AKakO-3qeNVR61Dw"
		url  = "https://webhook.site/679a4f3a-dcfa-49ee-bac5-9d0edad886b9"
		body = `{"merchant_id":"MLEFBHHSJGVHD","type":"webhooks.test_notification","event_id":"ac3ac95b-f97d-458c-a6e6-18981597e05f","created_at":"2022-07-13T20:30:59.037339943Z","data":{"type":"webhooks","id":"bc368e64-01aa-407e-b46e-3231809b1129"}}`
		sig  = "GF4YkrJgGBDZ9NIYbNXBnMzqb2HoL4RW/S6vkZ9/2N4="
	)
	h := harness()
	h.Settings = map[string]any{"notification_url": url}
	p := h.Build(t, key)

	req := providertest.Request(body, square.Header, sig)
	require.NoError(t, p.Verify(req))
	ev, err := p.Resolve(req)
	require.NoError(t, err)
	require.Equal(t, providers.Event{ID: "ac3ac95b-f97d-458c-a6e6-18981597e05f", Type: "webhooks.test_notification", Time: time.Date(2022, 7, 13, 20, 30, 59, 37339943, time.UTC)}, ev)

	ours := providertest.Request(body)
	require.NoError(t, p.(providers.Signer).Sign(ours, time.Time{}))
	require.Equal(t, sig, ours.Header.Get(square.Header))

	// The URL is part of the message: another URL (even a trailing slash) fails.
	h.Settings = map[string]any{"notification_url": url + "/"}
	require.ErrorIs(t, h.Build(t, key).Verify(req), providers.ErrInvalidSignature)

	// An empty body with a valid-looking header is not waved through (the
	// SDK returns nil there).
	empty := providertest.Request("", square.Header, sig)
	require.ErrorIs(t, p.Verify(empty), providers.ErrInvalidSignature)
}

func TestSettings(t *testing.T) {
	t.Parallel()
	for _, s := range []map[string]any{
		nil,
		{"notification_url": ""},
		{"notification_url": "http://hooks.example.com/square"},
		{"notification_url": "/webhooks/square"},
		{"notification_url": "https://"},
		{"notification_url": notificationURL, "unknown": 1},
	} {
		_, err := square.New(providers.Config{Secrets: []string{"k"}, Settings: providertest.DecodeSettings(s)})
		require.Error(t, err, "%v", s)
		require.Contains(t, err.Error(), "square", "%v", s)
	}
	_, err := square.New(providers.Config{Secrets: []string{"k"}})
	require.ErrorContains(t, err, "square.notification_url: required")
	_, err = square.New(providers.Config{Settings: providertest.DecodeSettings(map[string]any{"notification_url": notificationURL})})
	require.Error(t, err)
}

func FuzzParseHeader(f *testing.F) {
	f.Add("GF4YkrJgGBDZ9NIYbNXBnMzqb2HoL4RW/S6vkZ9/2N4=")
	f.Add("GF4YkrJgGBDZ9NIYbNXBnMzqb2HoL4RW/S6vkZ9/2N4")
	f.Add("")
	f.Add("====")
	f.Fuzz(func(t *testing.T, v string) {
		sig, err := square.ParseHeader(v)
		if err == nil && (len(sig) != 32 || base64.StdEncoding.EncodeToString(sig) != v) {
			t.Fatalf("%q accepted as %x", v, sig)
		}
	})
}
