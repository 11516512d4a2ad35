package appstore_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/appstore"
	"github.com/hookline/hookline/providers/appstore/appstoretest"
	"github.com/hookline/hookline/providers/providertest"
)

var _ providers.Provider = (*appstore.Verifier)(nil)

const (
	bundleID   = "com.example.hookline"
	appAppleID = 1234567890
)

// testChain is the test's stand-in for Apple's chain; foreignChain one
// under a root no source trusts. Each made once.
var (
	testChain    = sync.OnceValue(func() *appstoretest.Chain { return appstoretest.MustChain(appstoretest.Options{}) })
	foreignChain = sync.OnceValue(func() *appstoretest.Chain {
		return appstoretest.MustChain(appstoretest.Options{Name: "foreign"})
	})
	wrongKey = sync.OnceValue(func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			panic(err)
		}
		return k
	})
)

// settings is a source's appstore block trusting the test root.
func settings(env string, extra ...any) map[string]any {
	m := map[string]any{"bundle_id": bundleID, "root_certs": []string{testChain().RootPEM()}}
	if env != "" {
		m["environment"] = env
	}
	if env == "" || env == appstore.EnvironmentProduction {
		m["app_apple_id"] = appAppleID
	}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i].(string)] = extra[i+1]
	}
	return m
}

func newVerifier(t testing.TB, s map[string]any, tolerance time.Duration) *appstore.Verifier {
	t.Helper()
	v, err := appstore.New(providers.Config{Source: "test", Settings: providertest.DecodeSettings(s), Tolerance: tolerance,
		Now: func() time.Time { return providertest.Now }})
	require.NoError(t, err)
	return v
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// innerJWS signs a transaction or renewal payload with the test chain, as
// Apple signs signedTransactionInfo and signedRenewalInfo.
func innerJWS(t testing.TB, payload map[string]any) string {
	t.Helper()
	s, err := testChain().SignJWS([]byte(mustJSON(payload)))
	require.NoError(t, err)
	return s
}

// payload is a decoded notification: a subscription's renewal status
// turned off, for the test's app in env, with id as its notificationUUID.
func payload(t testing.TB, id, env string) map[string]any {
	t.Helper()
	data := map[string]any{
		"bundleId": bundleID, "bundleVersion": "42", "environment": env, "status": 1,
		"signedTransactionInfo": innerJWS(t, map[string]any{"transactionId": "2000000123456789", "originalTransactionId": "2000000123456789",
			"bundleId": bundleID, "productId": "com.example.hookline.pro.monthly", "environment": env, "type": "Auto-Renewable Subscription",
			"purchaseDate": 1764500000000, "expiresDate": 1767178400000, "signedDate": 1764504000000}),
		"signedRenewalInfo": innerJWS(t, map[string]any{"originalTransactionId": "2000000123456789", "autoRenewStatus": 0,
			"productId": "com.example.hookline.pro.monthly", "environment": env, "signedDate": 1764504000000}),
	}
	if env == appstore.EnvironmentProduction {
		data["appAppleId"] = appAppleID
	}
	p := map[string]any{"notificationType": "DID_CHANGE_RENEWAL_STATUS", "subtype": "AUTO_RENEW_DISABLED", "version": "2.0", "data": data}
	if id != "" {
		p["notificationUUID"] = id
	}
	return p
}

// sign signs p (its signedDate set to at) with chain and returns Apple's body.
func sign(t testing.TB, chain *appstoretest.Chain, p map[string]any, at time.Time) *providers.Request {
	t.Helper()
	req := providertest.Request(mustJSON(p))
	require.NoError(t, chain.Sign(req, at))
	return req
}

func signedJWS(t testing.TB, req *providers.Request) string {
	t.Helper()
	s, ok, err := appstore.SignedPayload(req.Body)
	require.NoError(t, err)
	require.True(t, ok)
	return s
}

func requireInvalid(t testing.TB, err error, contains string) {
	t.Helper()
	require.Error(t, err)
	require.ErrorIs(t, err, providers.ErrInvalidSignature)
	require.True(t, providers.IsSignatureError(err))
	if contains != "" {
		require.Contains(t, err.Error(), contains)
	}
}

func TestConformance(t *testing.T) {
	t.Parallel()
	providertest.Run(t, providertest.Harness{
		Provider: appstore.Name,
		Settings: settings(""),
		// Apple retries for days; the suite checks the tolerance a source sets.
		Tolerance: 200 * time.Hour,
		Delivery: func(id string) *providers.Request {
			return providertest.Request(mustJSON(payload(t, id, appstore.EnvironmentProduction)))
		},
		WantType: "DID_CHANGE_RENEWAL_STATUS.AUTO_RENEW_DISABLED",
		WantTime: providertest.Now,
		Sign: func(t testing.TB, _ string, req *providers.Request, now time.Time) {
			require.NoError(t, testChain().Sign(req, now))
		},
		// The test chain in x5c, another key.
		WrongSigner: func(t testing.TB, req *providers.Request) {
			p, err := appstoretest.WithSignedDate(req.Body, providertest.Now)
			require.NoError(t, err)
			jws, err := appstoretest.SignJWS(wrongKey(), testChain().X5C(), p)
			require.NoError(t, err)
			req.Body = appstoretest.Body(jws)
		},
		Features: providertest.Features{
			Timestamp:      true,
			NoSharedSecret: true,
			// The signature covers the JWS, not the JSON around it
			// (whitespace): TestTampered covers the JWS's parts.
			BodyNotSigned:   true,
			SignatureInBody: true,
		},
	})
}

func TestGenuine(t *testing.T) {
	t.Parallel()
	prod := newVerifier(t, settings(appstore.EnvironmentProduction), 0)
	sandbox := newVerifier(t, settings(appstore.EnvironmentSandbox), 0)
	at := providertest.Now.Add(-3 * time.Hour)

	t.Run("ProductionWithSubtype", func(t *testing.T) {
		req := sign(t, testChain(), payload(t, "6b1a3f0c-95bb-4a5e-9d0a-1f0e8a1d2c11", appstore.EnvironmentProduction), at)
		require.NoError(t, prod.Verify(req))
		ev, err := prod.Resolve(req)
		require.NoError(t, err)
		require.Equal(t, providers.Event{ID: "6b1a3f0c-95bb-4a5e-9d0a-1f0e8a1d2c11", Type: "DID_CHANGE_RENEWAL_STATUS.AUTO_RENEW_DISABLED", Time: at.UTC()}, ev)
		// Another environment's source refuses it.
		requireInvalid(t, sandbox.Verify(req), "environment")
	})
	t.Run("SandboxWithoutSubtype", func(t *testing.T) {
		p := payload(t, "0f5d9c9e-4a7b-4a8e-9f5e-3c1e0e6c2b11", appstore.EnvironmentSandbox)
		p["notificationType"] = "DID_RENEW"
		delete(p, "subtype")
		req := sign(t, testChain(), p, at)
		require.NoError(t, sandbox.Verify(req))
		ev, err := sandbox.Resolve(req)
		require.NoError(t, err)
		require.Equal(t, "DID_RENEW", ev.Type)
		requireInvalid(t, prod.Verify(req), "appAppleId") // no appAppleId in the sandbox
	})
	t.Run("Summary", func(t *testing.T) {
		p := map[string]any{"notificationType": "RENEWAL_EXTENSION", "subtype": "SUMMARY", "notificationUUID": "c2f0e0d4-1", "version": "2.0",
			"summary": map[string]any{"requestIdentifier": "r-1", "environment": "Production", "appAppleId": appAppleID, "bundleId": bundleID,
				"productId": "com.example.hookline.pro.monthly", "storefrontCountryCodes": []string{"USA"}, "succeededCount": 5, "failedCount": 0}}
		require.NoError(t, prod.Verify(sign(t, testChain(), p, at)))
	})
	t.Run("ExternalPurchaseToken", func(t *testing.T) {
		p := map[string]any{"notificationType": "EXTERNAL_PURCHASE_TOKEN", "subtype": "UNREPORTED", "notificationUUID": "e-1", "version": "2.0",
			"externalPurchaseToken": map[string]any{"externalPurchaseId": "b2158121-7af9-49d4-9561-1f588205523e", "tokenCreationDate": 1698148950000,
				"appAppleId": appAppleID, "bundleId": bundleID}}
		require.NoError(t, prod.Verify(sign(t, testChain(), p, at)))
		requireInvalid(t, sandbox.Verify(sign(t, testChain(), p, at)), "environment")
		// Its environment is Sandbox when its id says so.
		p["externalPurchaseToken"].(map[string]any)["externalPurchaseId"] = "SANDBOX_b2158121"
		require.NoError(t, sandbox.Verify(sign(t, testChain(), p, at)))
		requireInvalid(t, prod.Verify(sign(t, testChain(), p, at)), "environment")
	})
	t.Run("AppData", func(t *testing.T) {
		p := map[string]any{"notificationType": "RESCIND_CONSENT", "notificationUUID": "a-1", "version": "2.0",
			"appData": map[string]any{"appAppleId": appAppleID, "bundleId": bundleID, "environment": "Production", "signedAppTransactionInfo": "x.y.z"}}
		require.NoError(t, prod.Verify(sign(t, testChain(), p, at)))
	})
	t.Run("WithoutSignedDate", func(t *testing.T) {
		// The chain is then checked at the adapter's clock, as the library
		// checks it at its own.
		p := payload(t, "n-1", appstore.EnvironmentProduction)
		jws, err := testChain().SignJWS([]byte(mustJSON(p)))
		require.NoError(t, err)
		req := providertest.Request(string(appstoretest.Body(jws)))
		require.NoError(t, prod.Verify(req))
		ev, err := prod.Resolve(req)
		require.NoError(t, err)
		require.True(t, ev.Time.IsZero())
		old, err := testChain().WithLeaf(appstoretest.Options{LeafNotAfter: providertest.Now.Add(-time.Hour)})
		require.NoError(t, err)
		jws, err = old.SignJWS([]byte(mustJSON(p)))
		require.NoError(t, err)
		requireInvalid(t, prod.Verify(providertest.Request(string(appstoretest.Body(jws)))), "leaf is not valid")
	})
	t.Run("AppleLayout", func(t *testing.T) {
		// Whitespace around the JWS's JSON wrapper is not signed.
		req := sign(t, testChain(), payload(t, "l-1", appstore.EnvironmentProduction), at)
		req.Body = []byte("{\n  \"signedPayload\" : \"" + signedJWS(t, req) + "\"\n}\n")
		require.NoError(t, prod.Verify(req))
	})
}

// parts splits a compact JWS into its three parts.
func parts(s string) []string { return strings.Split(s, ".") }

func TestTampered(t *testing.T) {
	t.Parallel()
	v := newVerifier(t, settings(""), 0)
	req := sign(t, testChain(), payload(t, "t-1", appstore.EnvironmentProduction), providertest.Now)
	require.NoError(t, v.Verify(req))
	p := parts(signedJWS(t, req))
	decode := func(seg string) []byte {
		b, err := base64.RawURLEncoding.DecodeString(seg)
		require.NoError(t, err)
		return b
	}
	enc := base64.RawURLEncoding.EncodeToString
	body := func(h, pl, s string) *providers.Request {
		return providertest.Request(string(appstoretest.Body(h + "." + pl + "." + s)))
	}

	t.Run("PayloadByte", func(t *testing.T) {
		pl := decode(p[1])
		for _, from := range []string{`"t-1"`, `"2.0"`, `AUTO_RENEW_DISABLED`} {
			i := strings.Index(string(pl), from)
			require.GreaterOrEqual(t, i, 0)
			bad := []byte(string(pl))
			bad[i+1] ^= 0x01
			requireInvalid(t, v.Verify(body(p[0], enc(bad), p[2])), "signature does not match")
		}
	})
	t.Run("InnerJWS", func(t *testing.T) {
		// signedTransactionInfo is a string inside the signed payload: one
		// character of it changed breaks the outer signature.
		var m map[string]any
		require.NoError(t, json.Unmarshal(decode(p[1]), &m))
		data := m["data"].(map[string]any)
		inner := []byte(data["signedTransactionInfo"].(string))
		inner[len(inner)/2] ^= 0x01
		data["signedTransactionInfo"] = string(inner)
		requireInvalid(t, v.Verify(body(p[0], enc([]byte(mustJSON(m))), p[2])), "signature does not match")
	})
	t.Run("Header", func(t *testing.T) {
		var h map[string]any
		require.NoError(t, json.Unmarshal(decode(p[0]), &h))
		h["typ"] = "JWT"
		requireInvalid(t, v.Verify(body(enc([]byte(mustJSON(h))), p[1], p[2])), "signature does not match")
		// The same header re-encoded with a space.
		requireInvalid(t, v.Verify(body(enc(append([]byte(" "), decode(p[0])...)), p[1], p[2])), "signature does not match")
	})
	t.Run("Signature", func(t *testing.T) {
		sig := decode(p[2])
		for _, i := range []int{0, 31, 32, 63} {
			bad := []byte(string(sig))
			bad[i] ^= 0x01
			requireInvalid(t, v.Verify(body(p[0], p[1], enc(bad))), "")
		}
		requireInvalid(t, v.Verify(body(p[0], p[1], enc(sig[:63]))), "64 bytes")
		requireInvalid(t, v.Verify(body(p[0], p[1], "")), "64 bytes")
		requireInvalid(t, v.Verify(body(p[0], p[1], p[2]+"AA")), "64 bytes")
		zero := make([]byte, 64)
		requireInvalid(t, v.Verify(body(p[0], p[1], enc(zero))), "")
	})
	t.Run("WrongKey", func(t *testing.T) {
		jws, err := appstoretest.SignInput(wrongKey(), p[0]+"."+p[1])
		require.NoError(t, err)
		requireInvalid(t, v.Verify(providertest.Request(string(appstoretest.Body(jws)))), "signature does not match")
	})
	t.Run("Shape", func(t *testing.T) {
		for _, s := range []string{p[0] + "." + p[1], p[0] + "." + p[1] + "." + p[2] + ".x", "." + p[1] + "." + p[2],
			p[0] + ".." + p[2], p[0] + "=." + p[1] + "." + p[2], p[0] + "." + p[1] + "." + p[2] + "=",
			strings.ReplaceAll(p[0], "_", "/") + "." + p[1] + "." + p[2] + "/"} {
			requireInvalid(t, v.Verify(providertest.Request(string(appstoretest.Body(s)))), "")
		}
	})
}

func TestUntrustedRoot(t *testing.T) {
	t.Parallel()
	p := payload(t, "r-1", appstore.EnvironmentProduction)
	// A chain under a root the source does not trust.
	requireInvalid(t, newVerifier(t, settings(""), 0).Verify(sign(t, foreignChain(), p, providertest.Now)), "not issued by a trusted root")
	// The test chain, to a source trusting only Apple's root.
	apple := newVerifier(t, map[string]any{"bundle_id": bundleID, "app_apple_id": appAppleID}, 0)
	requireInvalid(t, apple.Verify(sign(t, testChain(), p, providertest.Now)), "not issued by a trusted root")
	// The trusted root named in x5c[2] changes nothing: trust is the
	// adapter's roots, and the intermediate is still foreign.
	x5c := foreignChain().X5C()
	x5c[2] = testChain().X5C()[2]
	pl, err := appstoretest.WithSignedDate([]byte(mustJSON(p)), providertest.Now)
	require.NoError(t, err)
	jws, err := appstoretest.SignJWS(foreignChain().LeafKey, x5c, pl)
	require.NoError(t, err)
	requireInvalid(t, newVerifier(t, settings(""), 0).Verify(providertest.Request(string(appstoretest.Body(jws)))), "not issued by a trusted root")
	// A foreign leaf under the trusted intermediate's name: not issued by it.
	x5c = testChain().X5C()
	x5c[0] = foreignChain().X5C()[0]
	jws, err = appstoretest.SignJWS(foreignChain().LeafKey, x5c, pl)
	require.NoError(t, err)
	requireInvalid(t, newVerifier(t, settings(""), 0).Verify(providertest.Request(string(appstoretest.Body(jws)))), "leaf is not issued by the intermediate")
	// The third certificate is not used, as in Apple's library: garbage
	// there changes nothing.
	x5c = testChain().X5C()
	x5c[2] = "not a certificate"
	jws, err = appstoretest.SignJWS(testChain().LeafKey, x5c, pl)
	require.NoError(t, err)
	require.NoError(t, newVerifier(t, settings(""), 0).Verify(providertest.Request(string(appstoretest.Body(jws)))))
}

func TestMarkerOIDs(t *testing.T) {
	t.Parallel()
	v := newVerifier(t, settings(""), 0)
	p := payload(t, "o-1", appstore.EnvironmentProduction)
	noLeafOID, err := testChain().WithLeaf(appstoretest.Options{NoLeafOID: true})
	require.NoError(t, err)
	requireInvalid(t, v.Verify(sign(t, noLeafOID, p, providertest.Now)), "leaf lacks Apple's marker extension 1.2.840.113635.100.6.11.1")

	noInterOID := appstoretest.MustChain(appstoretest.Options{NoIntermediateOID: true})
	v2 := newVerifier(t, settings("", "root_certs", []string{noInterOID.RootPEM()}), 0)
	requireInvalid(t, v2.Verify(sign(t, noInterOID, p, providertest.Now)), "intermediate lacks Apple's marker extension 1.2.840.113635.100.6.2.1")
}

func TestValidityAtSignedDate(t *testing.T) {
	t.Parallel()
	v := newVerifier(t, settings(""), 0)
	p := payload(t, "d-1", appstore.EnvironmentProduction)
	nb, na := providertest.Now.Add(-24*time.Hour), providertest.Now.Add(24*time.Hour)
	leaf, err := testChain().WithLeaf(appstoretest.Options{LeafNotBefore: nb, LeafNotAfter: na})
	require.NoError(t, err)
	for _, c := range []struct {
		at time.Time
		ok bool
	}{
		{providertest.Now, true},
		{na.Add(59 * time.Second), true}, // within the library's 60 s skew
		{na.Add(61 * time.Second), false},
		{nb.Add(-59 * time.Second), true},
		{nb.Add(-61 * time.Second), false},
		{na.Add(30 * 24 * time.Hour), false}, // an expired leaf
	} {
		err := v.Verify(sign(t, leaf, p, c.at))
		if c.ok {
			require.NoError(t, err, "signed at %v", c.at)
		} else {
			requireInvalid(t, err, "leaf is not valid at the notification's signedDate")
		}
	}
	// The date is signedDate, not the clock: the leaf expired long before
	// the adapter's now, yet was valid when Apple signed.
	old, err := testChain().WithLeaf(appstoretest.Options{LeafNotBefore: nb.AddDate(-2, 0, 0), LeafNotAfter: na.AddDate(-2, 0, 0)})
	require.NoError(t, err)
	require.NoError(t, v.Verify(sign(t, old, p, providertest.Now.AddDate(-2, 0, 0))))
	// The intermediate and the root are checked too.
	expired := appstoretest.MustChain(appstoretest.Options{NotBefore: nb, NotAfter: na, LeafNotBefore: nb, LeafNotAfter: na.AddDate(1, 0, 0)})
	v2 := newVerifier(t, settings("", "root_certs", []string{expired.RootPEM()}), 0)
	requireInvalid(t, v2.Verify(sign(t, expired, p, na.Add(time.Hour))), "intermediate is not valid")
}

func TestWrongApp(t *testing.T) {
	t.Parallel()
	prod := newVerifier(t, settings(""), 0)
	at := providertest.Now
	p := payload(t, "w-1", appstore.EnvironmentProduction)
	p["data"].(map[string]any)["bundleId"] = "com.example.other"
	requireInvalid(t, prod.Verify(sign(t, testChain(), p, at)), "bundleId is not appstore.bundle_id")

	p = payload(t, "w-2", appstore.EnvironmentProduction)
	p["data"].(map[string]any)["appAppleId"] = appAppleID + 1
	requireInvalid(t, prod.Verify(sign(t, testChain(), p, at)), "appAppleId is not appstore.app_apple_id")
	p["data"].(map[string]any)["appAppleId"] = json.Number("1234567890.0") // the same number to JavaScript
	require.NoError(t, prod.Verify(sign(t, testChain(), p, at)))

	p = payload(t, "w-3", appstore.EnvironmentProduction)
	p["data"].(map[string]any)["environment"] = appstore.EnvironmentSandbox
	requireInvalid(t, prod.Verify(sign(t, testChain(), p, at)), "environment is not Production")
	p["data"].(map[string]any)["environment"] = "production"
	requireInvalid(t, prod.Verify(sign(t, testChain(), p, at)), "environment is not Production")

	// In the sandbox, appAppleId is not checked (the library's rule: Apple
	// omits it there).
	sandbox := newVerifier(t, settings(appstore.EnvironmentSandbox, "app_apple_id", 42), 0)
	p = payload(t, "w-4", appstore.EnvironmentSandbox)
	p["data"].(map[string]any)["appAppleId"] = 7
	require.NoError(t, sandbox.Verify(sign(t, testChain(), p, at)))

	// A notification naming no app is for no source.
	p = map[string]any{"notificationType": "TEST", "notificationUUID": "w-5"}
	requireInvalid(t, prod.Verify(sign(t, testChain(), p, at)), "bundleId")
	// The first app object present is read, as in the library.
	p = payload(t, "w-6", appstore.EnvironmentProduction)
	p["summary"] = map[string]any{"bundleId": "com.example.other", "environment": "Production", "appAppleId": appAppleID}
	require.NoError(t, prod.Verify(sign(t, testChain(), p, at)))
}

func TestMissingNotificationUUID(t *testing.T) {
	t.Parallel()
	v := newVerifier(t, settings(""), 0)
	for _, id := range []string{"", "   "} {
		p := payload(t, id, appstore.EnvironmentProduction)
		if id != "" {
			p["notificationUUID"] = id
		}
		req := sign(t, testChain(), p, providertest.Now)
		require.NoError(t, v.Verify(req), "the library verifies it; it has no id to store")
		_, err := v.Resolve(req)
		require.ErrorIs(t, err, providers.ErrNoEventID)
	}
}

func TestChainLength(t *testing.T) {
	t.Parallel()
	v := newVerifier(t, settings(""), 0)
	pl, err := appstoretest.WithSignedDate([]byte(mustJSON(payload(t, "c-1", appstore.EnvironmentProduction))), providertest.Now)
	require.NoError(t, err)
	x5c := testChain().X5C()
	for _, chain := range [][]string{nil, {}, x5c[:1], x5c[:2], append(x5c[:3:3], x5c[2]), append(x5c[:3:3], x5c...)} {
		jws, err := appstoretest.SignJWS(testChain().LeafKey, chain, pl)
		require.NoError(t, err)
		requireInvalid(t, v.Verify(providertest.Request(string(appstoretest.Body(jws)))), "x5c")
	}
	for _, hdr := range []string{`{"alg":"ES256"}`, `{"alg":"ES256","x5c":"abc"}`, `{"alg":"ES256","x5c":[1,2,3]}`,
		`{"alg":"ES256","x5c":[null,"a","b"]}`, `{"alg":"ES256","x5c":["` + strings.Repeat("A", 6000) + `","a","b"]}`} {
		jws, err := appstoretest.SignInput(testChain().LeafKey, base64.RawURLEncoding.EncodeToString([]byte(hdr))+"."+base64.RawURLEncoding.EncodeToString(pl))
		require.NoError(t, err)
		requireInvalid(t, v.Verify(providertest.Request(string(appstoretest.Body(jws)))), "x5c")
	}
}

func TestAlgorithms(t *testing.T) {
	t.Parallel()
	v := newVerifier(t, settings(""), 0)
	pl, err := appstoretest.WithSignedDate([]byte(mustJSON(payload(t, "a-1", appstore.EnvironmentProduction))), providertest.Now)
	require.NoError(t, err)
	for _, alg := range []string{"none", "HS256", "ES384", "ES512", "RS256", "es256", ""} {
		hdr := mustJSON(map[string]any{"alg": alg, "x5c": testChain().X5C()})
		jws, err := appstoretest.SignInput(testChain().LeafKey, base64.RawURLEncoding.EncodeToString([]byte(hdr))+"."+base64.RawURLEncoding.EncodeToString(pl))
		require.NoError(t, err)
		requireInvalid(t, v.Verify(providertest.Request(string(appstoretest.Body(jws)))), "alg must be ES256")
	}
}

func TestBounds(t *testing.T) {
	t.Parallel()
	v := newVerifier(t, settings(""), 0)
	// A body nesting too deep is a 400 before anything else.
	deep := `{"signedPayload":"a.b.c","x":` + strings.Repeat("[", providers.MaxJSONDepth+1) + strings.Repeat("]", providers.MaxJSONDepth+1) + `}`
	require.ErrorIs(t, v.Verify(providertest.Request(deep)), providers.ErrTooDeep)
	_, err := v.Resolve(providertest.Request(deep))
	require.ErrorIs(t, err, providers.ErrTooDeep)
	// So is a signed payload nesting too deep: refused before the chain.
	p := payload(t, "b-1", appstore.EnvironmentProduction)
	var nested any = "x"
	for range providers.MaxJSONDepth + 1 {
		nested = []any{nested}
	}
	p["deep"] = nested
	require.ErrorIs(t, v.Verify(sign(t, testChain(), p, providertest.Now)), providers.ErrTooDeep)
	// A JWS over MaxJWSBytes.
	big := strings.Repeat("A", appstore.MaxJWSBytes) + ".AA.AA"
	requireInvalid(t, v.Verify(providertest.Request(string(appstoretest.Body(big)))), "over")
	// A payload key twice.
	pl := `{"notificationUUID":"b-2","notificationUUID":"b-3","data":{"bundleId":"` + bundleID + `"}}`
	jws, err := testChain().SignJWS([]byte(pl))
	require.NoError(t, err)
	requireInvalid(t, v.Verify(providertest.Request(string(appstoretest.Body(jws)))), "twice")
	// Members of the wrong type, as the library's validators type them.
	for _, bad := range []map[string]any{{"notificationType": 1}, {"notificationUUID": nil}, {"signedDate": "1764504000000"},
		{"signedDate": 1.5}, {"signedDate": 1e17}, {"data": nil}, {"data": []any{}}, {"data": map[string]any{"appAppleId": "1"}},
		{"summary": map[string]any{"bundleId": 1}}, {"exp": "never"}} {
		q := payload(t, "b-4", appstore.EnvironmentProduction)
		for k, val := range bad {
			q[k] = val
		}
		jws, err := testChain().SignJWS([]byte(mustJSON(q)))
		require.NoError(t, err)
		requireInvalid(t, v.Verify(providertest.Request(string(appstoretest.Body(jws)))), "")
	}
}

func TestJWTTimeClaims(t *testing.T) {
	t.Parallel()
	v := newVerifier(t, settings(""), 0)
	now := float64(providertest.Now.Unix())
	for _, c := range []struct {
		claim string
		value float64
		ok    bool
	}{{"exp", now + 60, true}, {"exp", now, false}, {"nbf", now, true}, {"nbf", now + 1, false}} {
		p := payload(t, "j-1", appstore.EnvironmentProduction)
		p[c.claim] = c.value
		err := v.Verify(sign(t, testChain(), p, providertest.Now))
		if c.ok {
			require.NoError(t, err, "%s %v", c.claim, c.value)
		} else {
			requireInvalid(t, err, "("+c.claim+")")
		}
	}
}

func TestBody(t *testing.T) {
	t.Parallel()
	v := newVerifier(t, settings(""), 0)
	for _, body := range []string{"", "null", "[]", `"x"`, `{}`, `{"signedPayload":null}`, `{"signedPayload":"a"} {}`,
		`{"signedPayload":"a","signedPayload":"b"}`, "\xff", `{"payload":"x"}`} {
		err := v.Verify(providertest.Request(body))
		require.ErrorIs(t, err, providers.ErrNoSignature, "%q", body)
	}
	for _, body := range []string{`{"signedPayload":""}`, `{"signedPayload":1}`, `{"signedPayload":{}}`, `{"signedPayload":"a.b"}`} {
		requireInvalid(t, v.Verify(providertest.Request(body)), "")
		_, err := v.Resolve(providertest.Request(body))
		require.ErrorIs(t, err, providers.ErrMalformed, "%q", body)
	}
}

func TestResolve(t *testing.T) {
	t.Parallel()
	v := newVerifier(t, settings(""), 0)
	for _, c := range []struct {
		notificationType, subtype, want string
	}{
		{"SUBSCRIBED", "INITIAL_BUY", "SUBSCRIBED.INITIAL_BUY"},
		{"DID_RENEW", "", "DID_RENEW"},
		{"TEST", "", "TEST"},
	} {
		p := payload(t, "res-1", appstore.EnvironmentProduction)
		p["notificationType"] = c.notificationType
		delete(p, "subtype")
		if c.subtype != "" {
			p["subtype"] = c.subtype
		}
		ev, err := v.Resolve(sign(t, testChain(), p, providertest.Now))
		require.NoError(t, err)
		require.Equal(t, c.want, ev.Type)
		require.Equal(t, "res-1", ev.ID)
		require.True(t, providertest.Now.Equal(ev.Time))
	}
}

func TestTolerance(t *testing.T) {
	t.Parallel()
	p := payload(t, "tol-1", appstore.EnvironmentProduction)
	// None by default: Apple retries a notification for days.
	require.NoError(t, newVerifier(t, settings(""), 0).Verify(sign(t, testChain(), p, providertest.Now.Add(-160*time.Hour))))
	v := newVerifier(t, settings(""), time.Hour)
	require.ErrorIs(t, v.Verify(sign(t, testChain(), p, providertest.Now.Add(-2*time.Hour))), providers.ErrTimestampTooOld)
	require.ErrorIs(t, v.Verify(sign(t, testChain(), p, providertest.Now.Add(2*time.Hour))), providers.ErrTimestampTooNew)
	// Without signedDate there is nothing to bound.
	jws, err := testChain().SignJWS([]byte(mustJSON(p)))
	require.NoError(t, err)
	requireInvalid(t, v.Verify(providertest.Request(string(appstoretest.Body(jws)))), "no signedDate")
}

func TestSettings(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pemFile := filepath.Join(dir, "root.pem")
	require.NoError(t, os.WriteFile(pemFile, []byte(testChain().RootPEM()), 0o600))
	derFile := filepath.Join(dir, "root.cer")
	require.NoError(t, os.WriteFile(derFile, testChain().Root.Raw, 0o600))
	keyFile := filepath.Join(dir, "key.pem")
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1}}), 0o600))
	leafPEM := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: testChain().Leaf.Raw}))

	build := func(secrets []string, s map[string]any) (*appstore.Verifier, error) {
		return appstore.New(providers.Config{Source: "test", Secrets: secrets, Settings: providertest.DecodeSettings(s)})
	}
	for _, c := range []struct {
		name    string
		secrets []string
		s       map[string]any
		err     string
	}{
		{"no block", nil, nil, "appstore.bundle_id: required"},
		{"no bundle", nil, map[string]any{"app_apple_id": 1}, "appstore.bundle_id: required"},
		{"spaces", nil, map[string]any{"bundle_id": " com.x ", "app_apple_id": 1}, "appstore.bundle_id"},
		{"production needs the app id", nil, map[string]any{"bundle_id": bundleID}, "appstore.app_apple_id: required in Production"},
		{"negative id", nil, map[string]any{"bundle_id": bundleID, "app_apple_id": -1}, "appstore.app_apple_id"},
		{"huge id", nil, map[string]any{"bundle_id": bundleID, "app_apple_id": int64(1) << 60}, "appstore.app_apple_id"},
		{"environment", nil, map[string]any{"bundle_id": bundleID, "environment": "Xcode"}, "appstore.environment"},
		{"secrets", []string{"s"}, settings(""), "secrets: appstore takes none"},
		{"unknown field", nil, map[string]any{"bundle_id": bundleID, "app_apple_id": 1, "shared_secret": "x"}, "appstore:"},
		{"missing file", nil, settings("", "root_certs", []string{filepath.Join(dir, "nope.pem")}), "appstore.root_certs[0]"},
		{"key file", nil, settings("", "root_certs", []string{keyFile}), "appstore.root_certs[0]: a PRIVATE KEY"},
		{"not a CA", nil, settings("", "root_certs", []string{leafPEM}), "not a CA"},
		{"empty PEM", nil, settings("", "root_certs", []string{"-----BEGIN CERTIFICATE-----\n-----END"}), "appstore.root_certs[0]"},
	} {
		_, err := build(c.secrets, c.s)
		require.ErrorContains(t, err, c.err, c.name)
	}
	for _, s := range []map[string]any{
		settings(""), settings(appstore.EnvironmentSandbox), settings("production", "app_apple_id", appAppleID),
		{"bundle_id": bundleID, "environment": "sandbox"}, // no app id in the sandbox
		settings("", "root_certs", []string{pemFile, derFile, testChain().RootPEM() + foreignChain().RootPEM()}),
	} {
		v, err := build(nil, s)
		require.NoError(t, err, "%v", s)
		require.Contains(t, []string{appstore.EnvironmentProduction, appstore.EnvironmentSandbox}, v.Environment())
	}
	// A root from a file works as inline PEM does.
	for _, f := range []string{pemFile, derFile} {
		v, err := build(nil, settings("", "root_certs", []string{f}))
		require.NoError(t, err)
		require.NoError(t, v.Verify(sign(t, testChain(), payload(t, "s-1", appstore.EnvironmentProduction), time.Now())))
	}
}

func TestDescribe(t *testing.T) {
	t.Parallel()
	v := newVerifier(t, settings(""), 0)
	require.Equal(t, providers.Description{DefaultEventID: appstore.DefaultEventID, IDSigned: true}, v.Describe())
	_, signs := any(v).(providers.Signer)
	require.False(t, signs, "only Apple holds the key")
}

// TestIntermediateNotCA: an intermediate without CA basic constraints
// issues nothing, marker extension or not (the library's intermediate.ca).
func TestIntermediateNotCA(t *testing.T) {
	t.Parallel()
	c := testChain()
	interKey, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	require.NoError(t, err)
	nb, na := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2045, 1, 1, 0, 0, 0, 0, time.UTC)
	interTmpl := &x509.Certificate{SerialNumber: big.NewInt(77), Subject: pkix.Name{CommonName: "not a CA"}, NotBefore: nb, NotAfter: na,
		KeyUsage: x509.KeyUsageDigitalSignature, BasicConstraintsValid: true, IsCA: false,
		ExtraExtensions: []pkix.Extension{{Id: appstore.OIDIntermediate, Value: []byte{5, 0}}}}
	interDER, err := x509.CreateCertificate(rand.Reader, interTmpl, c.Root, &interKey.PublicKey, c.RootKey)
	require.NoError(t, err)
	inter, err := x509.ParseCertificate(interDER)
	require.NoError(t, err)
	leafTmpl := &x509.Certificate{SerialNumber: big.NewInt(78), Subject: pkix.Name{CommonName: "leaf"}, NotBefore: nb, NotAfter: na,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtraExtensions: []pkix.Extension{{Id: appstore.OIDLeaf, Value: []byte{5, 0}}}}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, inter, &c.LeafKey.PublicKey, interKey)
	require.NoError(t, err)
	leaf, err := x509.ParseCertificate(leafDER)
	require.NoError(t, err)
	_, err = appstore.VerifyChain([]*x509.Certificate{c.Root}, leaf, inter, providertest.Now)
	require.ErrorContains(t, err, "the intermediate is not a CA")
	// The same chain with the real intermediate verifies.
	_, err = appstore.VerifyChain([]*x509.Certificate{c.Root}, c.Leaf, c.Intermediate, providertest.Now)
	require.NoError(t, err)
}
