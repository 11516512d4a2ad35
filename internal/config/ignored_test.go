package config_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/internal/config"
)

// TestSettingsAnAdapterWouldIgnoreAreRefused: a field the source's adapter
// would not use is an error naming it, never silently dropped: resolvers on
// a batch adapter (each item's id and type are the adapter's), secrets on
// an adapter that verifies with the provider's own keys.
func TestSettingsAnAdapterWouldIgnoreAreRefused(t *testing.T) {
	t.Parallel()
	base := "database_url: x\nsources:\n"
	for _, ok := range []string{
		"  - {name: a, provider: gocardless, secrets: [s]}",
		"  - {name: a, provider: adyen, secrets: ['0123456789ABCDEF']}",
		"  - {name: a, provider: paypal, paypal: {webhook_id: WH-1}}",
		"  - {name: a, provider: stripe, secrets: [s], event_id: 'json:id', event_type: 'json:type'}",
	} {
		_, err := config.Parse([]byte(base+ok), env(nil))
		require.NoError(t, err, ok)
	}
	for want, src := range map[string]string{
		"sources[0].event_id: provider gocardless splits each delivery":   "  - {name: a, provider: gocardless, secrets: [s], event_id: 'json:meta.webhook_id'}",
		"sources[0].event_type: provider gocardless splits each delivery": "  - {name: a, provider: gocardless, secrets: [s], event_type: 'json:action'}",
		"sources[0].event_id: provider adyen splits each delivery":        "  - {name: a, provider: adyen, secrets: ['0123456789ABCDEF'], event_id: 'json:pspReference'}",
		"sources[0].secrets: paypal takes none":                           "  - {name: a, provider: paypal, secrets: [s], paypal: {webhook_id: WH-1}}",
		"sources[0].secrets: googleplay takes none":                       "  - {name: a, provider: googleplay, secrets: [s], googleplay: {audience: a, service_account: s@example.com}}",
	} {
		_, err := config.Parse([]byte(base+src), env(nil))
		require.ErrorIs(t, err, config.ErrInvalid, want)
		require.Contains(t, err.Error(), want)
	}
}
