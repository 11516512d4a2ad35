package config_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/internal/config"
)

// TestAppStoreSourceTakesNoSecrets: an appstore source needs no secrets
// (Apple signs with its own key) and refuses any, naming the field; its
// settings block is decoded and checked by the adapter, each error under
// the source's path.
func TestAppStoreSourceTakesNoSecrets(t *testing.T) {
	t.Parallel()
	base := "database_url: x\nsources:\n"
	for _, ok := range []string{
		"  - {name: a, provider: appstore, appstore: {bundle_id: com.example.app, app_apple_id: 1234567890}}",
		"  - {name: a, provider: appstore, appstore: {bundle_id: com.example.app, environment: Sandbox}}",
	} {
		c, err := config.Parse([]byte(base+ok), env(nil))
		require.NoError(t, err, ok)
		require.NotNil(t, c.Sources[0].Adapter())
	}
	for want, src := range map[string]string{
		"sources[0].secrets: appstore takes none":       "  - {name: a, provider: appstore, secrets: [s], appstore: {bundle_id: com.example.app, app_apple_id: 1}}",
		"sources[0].appstore.bundle_id: required":       "  - {name: a, provider: appstore}",
		"sources[0].appstore.app_apple_id: required":    "  - {name: a, provider: appstore, appstore: {bundle_id: com.example.app}}",
		"sources[0].appstore.environment":               "  - {name: a, provider: appstore, appstore: {bundle_id: com.example.app, environment: Xcode}}",
		"sources[0].appstore.root_certs[0]":             "  - {name: a, provider: appstore, appstore: {bundle_id: com.example.app, app_apple_id: 1, root_certs: [/nonexistent.pem]}}",
		"sources[0].appstore: yaml: unmarshal errors":   "  - {name: a, provider: appstore, appstore: {bundle_id: com.example.app, app_apple_id: 1, shared_secret: x}}",
		"sources[0].paypal: unknown field (provider-sp": "  - {name: a, provider: appstore, paypal: {webhook_id: x}}",
	} {
		_, err := config.Parse([]byte(base+src), env(nil))
		require.ErrorIs(t, err, config.ErrInvalid, want)
		require.Contains(t, err.Error(), want)
	}
}
