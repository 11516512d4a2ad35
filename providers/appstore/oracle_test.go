package appstore_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/appstore"
	"github.com/hookline/hookline/providers/providertest"
)

// oracleVectors is testdata/oracle_vectors.json: notifications signed with
// test chains and recorded by testdata/oracle/gen.mjs with Apple's App Store
// Server Library for Node.js (SignedDataVerifier.verifyAndDecodeNotification,
// online checks off), each with the library's verdict.
type oracleVectors struct {
	Library struct {
		Package, Version string
	}
	Time    int64 // Unix milliseconds: the library's clock when it ran
	Root    string
	Vectors []struct {
		Name, Kind       string
		Environment      string
		BundleID         string `json:"bundleId"`
		AppAppleID       *int64 `json:"appAppleId"`
		Body             string
		NoEventID        bool
		Valid            bool
		Status, Error    string
		NotificationUUID string `json:"notificationUUID"`
		Type             string
		SignedDate       *int64
	}
}

// statusWords are what hookline's error says for each of the library's
// refusals (VerificationStatus, and the cause it wraps).
var statusWords = map[string][]string{
	"VERIFICATION_FAILURE":   {"chain", "signature", "alg", "marker extension"},
	"INVALID_CERTIFICATE":    {"not valid at"},
	"INVALID_APP_IDENTIFIER": {"bundleId", "appAppleId"},
	"INVALID_ENVIRONMENT":    {"environment"},
	"INVALID_CHAIN_LENGTH":   {"x5c"},
	"FAILURE":                {"the notification's"},
}

// TestOracleVectors replays every recorded vector through the adapter, at
// the time it was recorded, the test root given through
// appstore.root_certs and the vector's bundle id, environment and app Apple
// ID as the source's settings: hookline's verdict must be the library's,
// and its refusal must say what the library's status says.
func TestOracleVectors(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join("testdata", "oracle_vectors.json"))
	require.NoError(t, err)
	var ov oracleVectors
	require.NoError(t, json.Unmarshal(raw, &ov))
	require.Equal(t, "@apple/app-store-server-library", ov.Library.Package)
	require.NotEmpty(t, ov.Library.Version)
	require.NotEmpty(t, ov.Vectors)
	at := time.UnixMilli(ov.Time)

	kinds := map[string]int{}
	for _, vec := range ov.Vectors {
		kinds[vec.Kind]++
		t.Run(vec.Name, func(t *testing.T) {
			s := map[string]any{"bundle_id": vec.BundleID, "environment": vec.Environment, "root_certs": []string{ov.Root}}
			if vec.AppAppleID != nil {
				s["app_apple_id"] = *vec.AppAppleID
			}
			v, err := appstore.New(providers.Config{Source: "oracle", Settings: providertest.DecodeSettings(s), Now: func() time.Time { return at }})
			require.NoError(t, err)
			req := providertest.Request(vec.Body)
			err = v.Verify(req)
			require.Equal(t, vec.Valid, err == nil, "library: %s %s; hookline: %v", vec.Status, vec.Error, err)
			require.Equal(t, vec.Kind == "genuine", vec.Valid)
			if !vec.Valid {
				require.True(t, providers.IsSignatureError(err), "%v", err)
				status := vec.Status
				if cause, ok := strings.CutPrefix(vec.Error, "caused by "); ok {
					status = cause
				}
				words := statusWords[status]
				require.NotEmpty(t, words, "status %s", status)
				require.True(t, containsAny(err.Error(), words), "library: %s; hookline: %v", status, err)
				return
			}
			ev, err := v.Resolve(req)
			if vec.NoEventID {
				require.ErrorIs(t, err, providers.ErrNoEventID)
				return
			}
			require.NoError(t, err)
			require.Equal(t, vec.NotificationUUID, ev.ID)
			require.Equal(t, vec.Type, ev.Type)
			if vec.SignedDate == nil {
				require.True(t, ev.Time.IsZero())
			} else {
				require.True(t, time.UnixMilli(*vec.SignedDate).Equal(ev.Time))
			}
		})
	}
	require.GreaterOrEqual(t, kinds["genuine"], 4)
	require.GreaterOrEqual(t, kinds["tampered"], 10)
	// Both environments are among the genuine ones, with and without subtype.
	seen := map[string]bool{}
	for _, vec := range ov.Vectors {
		if vec.Valid {
			seen[vec.Environment+"/"+map[bool]string{true: "subtype", false: "plain"}[strings.Contains(vec.Type, ".")]] = true
		}
	}
	for _, k := range []string{"Production/subtype", "Production/plain", "Sandbox/subtype", "Sandbox/plain"} {
		require.True(t, seen[k], k)
	}
}

func containsAny(s string, words []string) bool {
	for _, w := range words {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}
