package config_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/internal/config"
	_ "github.com/hookline/hookline/providers/all"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

const full = `
listen: ":9090"
database_url: "${DATABASE_URL}"
admin_token: "${HOOKLINE_ADMIN_TOKEN}"
max_body_bytes: 2048
workers: 7
shutdown_timeout: 12s
sources:
  - name: stripe
    provider: stripe
    secrets: ["${STRIPE_WEBHOOK_SECRET}", "whsec_old"]
    tolerance: 5m
    on_duplicate: reject
    lease: 2m
    dedup_window: 30d
    destination:
      url: "http://127.0.0.1:9000/hooks/stripe"
      timeout: 3s
      max_attempts: 4
      backoff: {min: 2s, max: 1m}
      secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
  - name: acme
    provider: hmac
    secrets: ["${ACME_SECRET}"]
    hmac: {header: X-Acme-Signature, algorithm: sha256, encoding: hex, prefix: "sha256="}
    event_id: "header:X-Acme-Delivery"
    event_type: "json:type"
    destination: {url: "http://127.0.0.1:9000/hooks/acme"}
`

func TestParseFull(t *testing.T) {
	t.Parallel()
	c, err := config.Parse([]byte(full), env(map[string]string{
		"DATABASE_URL": "postgres://x", "HOOKLINE_ADMIN_TOKEN": "tok", "STRIPE_WEBHOOK_SECRET": "whsec_new", "ACME_SECRET": "acme",
	}))
	require.NoError(t, err)
	require.Equal(t, ":9090", c.Listen)
	require.Equal(t, "postgres://x", c.DatabaseURL)
	require.Equal(t, "tok", c.AdminToken)
	require.Equal(t, 12*time.Second, c.ShutdownTimeout.D())
	s := c.Sources[0]
	require.Equal(t, []string{"whsec_new", "whsec_old"}, s.Secrets)
	require.Equal(t, "reject", s.OnDuplicate)
	require.Equal(t, 30*24*time.Hour, s.DedupWindow.D())
	require.Equal(t, 4, s.Destination.MaxAttempts)
	require.NotNil(t, s.Adapter())
	a := c.Sources[1]
	require.Equal(t, "skip", a.OnDuplicate, "default")
	require.Equal(t, config.DefaultLease, a.Lease.D())
	require.Equal(t, config.DefaultMaxAttempts, a.Destination.MaxAttempts)
	id, typ := a.KeyResolvers()
	require.NotNil(t, id)
	require.NotNil(t, typ)
	require.True(t, c.BatchEnabled())
	require.Equal(t, int64(config.DefaultMaxPendingBytes), c.Ingest.MaxPendingBytes)
}

func TestValidationNamesTheField(t *testing.T) {
	t.Parallel()
	base := "database_url: x\nsources:\n"
	cases := map[string]string{
		"sources[0].name":                     "  - {name: 'Bad Name', provider: stripe, secrets: [s]}",
		"sources[0].provider":                 "  - {name: a, provider: nope, secrets: [s]}",
		"sources[0].secrets":                  "  - {name: a, provider: stripe}",
		"sources[0].secrets[0]":               "  - {name: a, provider: stripe, secrets: ['${UNSET}']}",
		"sources[1].name":                     "  - {name: a, provider: stripe, secrets: [s]}\n  - {name: a, provider: stripe, secrets: [s]}",
		"sources[0].on_duplicate":             "  - {name: a, provider: stripe, secrets: [s], on_duplicate: maybe}",
		"sources[0].event_id":                 "  - {name: a, provider: hmac, secrets: [s], hmac: {header: X-S}}",
		"sources[0].destination.url":          "  - {name: a, provider: stripe, secrets: [s], destination: {url: 'ftp://x'}}",
		"sources[0].destination.backoff":      "  - {name: a, provider: stripe, secrets: [s], destination: {url: 'http://x', backoff: {min: 1h, max: 1s}}}",
		"sources[0].paypal":                   "  - {name: a, provider: stripe, secrets: [s], paypal: {webhook_id: x}}",
		"sources[0].hmac.header":              "  - {name: a, provider: hmac, secrets: [s], event_id: 'header:X', hmac: {algorithm: sha256}}",
		"sources[0].lease":                    "  - {name: a, provider: stripe, secrets: [s], lease: 1ms}",
		"sources[0].destination.secret":       "  - {name: a, provider: stripe, secrets: [s], destination: {url: 'http://x', secret: plain}}",
		"sources[0].destination.max_attempts": "  - {name: a, provider: stripe, secrets: [s], destination: {url: 'http://x', max_attempts: -1}}",
		"sources[1].destination.max_attempts": "  - {name: a, provider: stripe, secrets: [s]}\n  - {name: b, provider: stripe, secrets: [s], destination: {url: 'http://x', max_attempts: 8001}}",
	}
	for want, src := range cases {
		_, err := config.Parse([]byte(base+src), env(nil))
		require.Error(t, err, want)
		require.True(t, errors.Is(err, config.ErrInvalid), want)
		require.Contains(t, err.Error(), want, "error %q should name %s", err, want)
	}
	// Top-level settings.
	src := "  - {name: a, provider: stripe, secrets: [s]}\n"
	for want, top := range map[string]string{
		"ingest.max_pending_bytes": "max_body_bytes: 4096\ningest: {max_pending_bytes: 1024}\n",
		"ingest.batch_size":        "ingest: {batch_size: 5000}\n",
	} {
		_, err := config.Parse([]byte(top+base+src), env(nil))
		require.Error(t, err, want)
		require.True(t, errors.Is(err, config.ErrInvalid), want)
		require.Contains(t, err.Error(), want, "error %q should name %s", err, want)
	}
}

func TestUnknownFieldsAreErrors(t *testing.T) {
	t.Parallel()
	for _, src := range []string{
		"database_url: x\nlisten_addr: ':1'\nsources:\n  - {name: a, provider: stripe, secrets: [s]}",
		"database_url: x\nsources:\n  - {name: a, provider: stripe, secrets: [s], destination: {urll: 'http://x'}}",
	} {
		_, err := config.Parse([]byte(src), env(nil))
		require.ErrorIs(t, err, config.ErrInvalid)
		require.Contains(t, err.Error(), "not found")
	}
}

func TestBadDurationNamesTheValue(t *testing.T) {
	t.Parallel()
	_, err := config.Parse([]byte("database_url: x\nshutdown_timeout: soon\nsources:\n  - {name: a, provider: stripe, secrets: [s]}"), env(nil))
	require.ErrorIs(t, err, config.ErrInvalid)
	require.Contains(t, err.Error(), `"soon" is not a duration`)
}

func TestSecretsNeverInErrors(t *testing.T) {
	t.Parallel()
	_, err := config.Parse([]byte("database_url: x\nsources:\n  - {name: a, provider: standardwebhooks, secrets: ['whsec_!!notbase64-topsecret']}"), env(nil))
	require.Error(t, err)
	require.NotContains(t, err.Error(), "topsecret")
}
