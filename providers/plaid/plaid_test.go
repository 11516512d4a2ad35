package plaid_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/plaid"
	"github.com/hookline/hookline/providers/providertest"
)

var _ providers.Provider = (*plaid.Verifier)(nil)

const (
	clientID  = "5f5a4d7e0e2a0c0012345678"
	secretOne = "plaid_sandbox_secret_one"
	secretTwo = "plaid_sandbox_secret_two"
)

type serverKey struct {
	priv      *ecdsa.PrivateKey
	expiredAt *int64
}

// keyServer plays /webhook_verification_key/get: keys are registered per
// API secret, as Plaid scopes them to the client. Requests with a secret in
// down are answered 503.
type keyServer struct {
	*httptest.Server
	fetches atomic.Int64
	mu      sync.Mutex
	keys    map[string]map[string]serverKey // secret → kid → key
	down    map[string]bool
}

func newKeyServer(t testing.TB) *keyServer {
	ks := &keyServer{keys: map[string]map[string]serverKey{}, down: map[string]bool{}}
	ks.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ks.fetches.Add(1)
		var req struct {
			ClientID string `json:"client_id"`
			Secret   string `json:"secret"`
			KeyID    string `json:"key_id"`
		}
		if r.Method != http.MethodPost || r.URL.Path != "/webhook_verification_key/get" || json.NewDecoder(r.Body).Decode(&req) != nil {
			http.Error(w, `{"error_code":"INVALID_REQUEST"}`, http.StatusBadRequest)
			return
		}
		ks.mu.Lock()
		keys, okSecret := ks.keys[req.Secret]
		k, okKey := keys[req.KeyID]
		down := ks.down[req.Secret]
		ks.mu.Unlock()
		switch {
		case down:
			http.Error(w, `{"error_code":"INTERNAL_SERVER_ERROR"}`, http.StatusServiceUnavailable)
		case req.ClientID != clientID || !okSecret:
			http.Error(w, `{"error_code":"INVALID_API_KEYS"}`, http.StatusBadRequest)
		case !okKey:
			http.Error(w, `{"error_code":"INVALID_WEBHOOK_VERIFICATION_KEY_ID"}`, http.StatusBadRequest)
		default:
			pub, err := k.priv.PublicKey.Bytes() // 0x04 || X || Y
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			_ = json.NewEncoder(w).Encode(map[string]any{
				"key": map[string]any{
					"alg": "ES256", "created_at": 1560466150, "crv": "P-256", "expired_at": k.expiredAt,
					"kid": req.KeyID, "kty": "EC", "use": "sig",
					"x": base64.RawURLEncoding.EncodeToString(pub[1:33]),
					"y": base64.RawURLEncoding.EncodeToString(pub[33:]),
				},
				"request_id": "RZ6Omi1bzzwDaLo",
			})
		}
	}))
	t.Cleanup(ks.Close)
	return ks
}

func (ks *keyServer) add(secret, kid string, priv *ecdsa.PrivateKey, expiredAt *int64) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if ks.keys[secret] == nil {
		ks.keys[secret] = map[string]serverKey{}
	}
	ks.keys[secret][kid] = serverKey{priv: priv, expiredAt: expiredAt}
}

func (ks *keyServer) setDown(secret string, down bool) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	ks.down[secret] = down
}

func (ks *keyServer) keyURL() string { return ks.URL + "/webhook_verification_key/get" }

func newKey(t testing.TB) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	return k
}

// token signs a Plaid-Verification JWT with golang-jwt (the independent
// implementation our parser is checked against).
func token(t testing.TB, priv *ecdsa.PrivateKey, kid string, body []byte, iat time.Time) string {
	t.Helper()
	sum := sha256.Sum256(body)
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{"iat": iat.Unix(), "request_body_sha256": hex.EncodeToString(sum[:])})
	tok.Header["kid"] = kid
	s, err := tok.SignedString(priv)
	require.NoError(t, err)
	return s
}

// sample is a Plaid webhook whose item_id is id.
func sample(id string) *providers.Request {
	return providertest.Request(`{"environment":"sandbox","error":null,"item_id":"` + id + `","new_transactions":0,"webhook_code":"SYNC_UPDATES_AVAILABLE","webhook_type":"TRANSACTIONS","initial_update_complete":true,"historical_update_complete":false}`)
}

func TestConformance(t *testing.T) {
	t.Parallel()
	ks := newKeyServer(t)
	k1, k2 := newKey(t), newKey(t)
	ks.add(secretOne, "kid-one", k1, nil)
	ks.add(secretTwo, "kid-two", k2, nil)
	providertest.Run(t, providertest.Harness{
		Provider: plaid.Name,
		Settings: map[string]any{"client_id": clientID, "key_url": ks.keyURL()},
		Secrets:  []string{secretOne, secretTwo},
		Delivery: sample,
		// Plaid sends no event id: it is the body's SHA-256, never empty.
		WantID: func(id string) string {
			sum := sha256.Sum256(sample(id).Body)
			return hex.EncodeToString(sum[:])
		},
		WantType: "TRANSACTIONS.SYNC_UPDATES_AVAILABLE",
		Sign: func(t testing.TB, secret string, req *providers.Request, now time.Time) {
			priv, kid := k1, "kid-one"
			if secret == secretTwo {
				priv, kid = k2, "kid-two"
			}
			req.Header.Set(plaid.Header, token(t, priv, kid, req.Body, now))
		},
		Features: providertest.Features{Timestamp: true},
	})
}

type bundle struct {
	ks   *keyServer
	priv *ecdsa.PrivateKey
	mu   sync.Mutex
	now  time.Time
}

func (b *bundle) clock() time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.now
}

func (b *bundle) advance(d time.Duration) time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.now = b.now.Add(d)
	return b.now
}

func setup(t *testing.T) *bundle {
	t.Helper()
	b := &bundle{ks: newKeyServer(t), priv: newKey(t), now: providertest.Now}
	b.ks.add(secretOne, "kid-one", b.priv, nil)
	return b
}

func (b *bundle) build(t *testing.T) *plaid.Verifier {
	t.Helper()
	v, err := plaid.New(providers.Config{
		Secrets:  []string{secretOne},
		Settings: providertest.DecodeSettings(map[string]any{"client_id": clientID, "key_url": b.ks.keyURL()}),
		Now:      b.clock,
	})
	require.NoError(t, err)
	return v
}

func TestVerifyAndResolve(t *testing.T) {
	t.Parallel()
	b := setup(t)
	v := b.build(t)
	req := sample("item_1")
	req.Header.Set(plaid.Header, token(t, b.priv, "kid-one", req.Body, providertest.Now))
	require.NoError(t, v.Verify(req))
	require.NoError(t, v.Verify(req))
	require.Equal(t, int64(1), b.ks.fetches.Load(), "key cached by kid")

	ev, err := v.Resolve(req)
	require.NoError(t, err)
	sum := sha256.Sum256(req.Body)
	require.Equal(t, providers.Event{ID: hex.EncodeToString(sum[:]), Type: "TRANSACTIONS.SYNC_UPDATES_AVAILABLE"}, ev)

	// Unknown kid.
	other := sample("item_1")
	other.Header.Set(plaid.Header, token(t, b.priv, "kid-unknown", other.Body, providertest.Now))
	require.ErrorIs(t, v.Verify(other), providers.ErrInvalidSignature)
	// Right kid, another key.
	other.Header.Set(plaid.Header, token(t, newKey(t), "kid-one", other.Body, providertest.Now))
	require.ErrorIs(t, v.Verify(other), providers.ErrInvalidSignature)
	// Signed for another body.
	other.Header.Set(plaid.Header, token(t, b.priv, "kid-one", []byte(`{}`), providertest.Now))
	require.ErrorIs(t, v.Verify(other), providers.ErrInvalidSignature)
	// Stale.
	other.Header.Set(plaid.Header, token(t, b.priv, "kid-one", other.Body, providertest.Now.Add(-6*time.Minute)))
	require.ErrorIs(t, v.Verify(other), providers.ErrTimestampTooOld)
}

func TestAlgorithms(t *testing.T) {
	t.Parallel()
	b := setup(t)
	v := b.build(t)
	body := sample("item_1").Body
	sum := sha256.Sum256(body)
	claims := jwt.MapClaims{"iat": providertest.Now.Unix(), "request_body_sha256": hex.EncodeToString(sum[:])}

	hs := jwt.NewWithClaims(jwt.SigningMethodHS256, claims)
	hs.Header["kid"] = "kid-one"
	hsToken, err := hs.SignedString([]byte(secretOne))
	require.NoError(t, err)

	none := jwt.NewWithClaims(jwt.SigningMethodNone, claims)
	none.Header["kid"] = "kid-one"
	noneToken, err := none.SignedString(jwt.UnsafeAllowNoneSignatureType)
	require.NoError(t, err)

	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	require.NoError(t, err)
	es384 := jwt.NewWithClaims(jwt.SigningMethodES384, claims)
	es384.Header["kid"] = "kid-one"
	es384Token, err := es384.SignedString(p384)
	require.NoError(t, err)

	// An ES256 signature under a header that claims another algorithm.
	good := token(t, b.priv, "kid-one", body, providertest.Now)
	_, rest, _ := strings.Cut(good, ".")
	relabelled := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"ES512","kid":"kid-one"}`)) + "." + rest

	for name, tok := range map[string]string{"HS256": hsToken, "none": noneToken, "ES384": es384Token, "relabelled": relabelled} {
		req := sample("item_1")
		req.Header.Set(plaid.Header, tok)
		require.ErrorIs(t, v.Verify(req), providers.ErrInvalidSignature, name)
	}
	require.Equal(t, int64(0), b.ks.fetches.Load(), "no key is fetched for a refused algorithm")
}

func TestKeyExpiry(t *testing.T) {
	t.Parallel()
	b := setup(t)
	past := providertest.Now.Add(-time.Hour).Unix()
	soon := providertest.Now.Add(30 * time.Minute).Unix()
	expiredKey, expiringKey := newKey(t), newKey(t)
	b.ks.add(secretOne, "kid-expired", expiredKey, &past)
	b.ks.add(secretOne, "kid-expiring", expiringKey, &soon)
	v := b.build(t)

	req := sample("item_1")
	req.Header.Set(plaid.Header, token(t, expiredKey, "kid-expired", req.Body, providertest.Now))
	require.ErrorIs(t, v.Verify(req), providers.ErrInvalidSignature)

	req.Header.Set(plaid.Header, token(t, expiringKey, "kid-expiring", req.Body, providertest.Now))
	require.NoError(t, v.Verify(req))
	now := b.advance(31 * time.Minute)
	req.Header.Set(plaid.Header, token(t, expiringKey, "kid-expiring", req.Body, now))
	require.ErrorIs(t, v.Verify(req), providers.ErrInvalidSignature)

	// A cached key is refreshed after an hour, so a later expiry is learned.
	req.Header.Set(plaid.Header, token(t, b.priv, "kid-one", req.Body, now))
	require.NoError(t, v.Verify(req))
	fetches := b.ks.fetches.Load()
	b.ks.add(secretOne, "kid-one", b.priv, &past)
	require.NoError(t, v.Verify(req), "cached")
	now = b.advance(61 * time.Minute)
	req.Header.Set(plaid.Header, token(t, b.priv, "kid-one", req.Body, now))
	require.ErrorIs(t, v.Verify(req), providers.ErrInvalidSignature)
	require.Equal(t, fetches+1, b.ks.fetches.Load())
}

// TestKeyUnavailable: a key that cannot be fetched for network reasons (a
// 5xx, a refused connection) leaves the delivery's authenticity unknown:
// ErrUnavailable, not a signature error, and nothing is cached. Other answers
// stay signature errors.
func TestKeyUnavailable(t *testing.T) {
	t.Parallel()
	requireUnavailable := func(t *testing.T, err error) {
		t.Helper()
		require.ErrorIs(t, err, providers.ErrUnavailable)
		require.False(t, providers.IsSignatureError(err), "%v", err)
	}

	t.Run("ServerError", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		v := b.build(t)
		req := sample("item_1")
		req.Header.Set(plaid.Header, token(t, b.priv, "kid-one", req.Body, providertest.Now))
		b.ks.setDown(secretOne, true)
		requireUnavailable(t, v.Verify(req))
		b.ks.setDown(secretOne, false)
		require.NoError(t, v.Verify(req))

		// An unknown kid is answered 400: a signature error.
		other := sample("item_1")
		other.Header.Set(plaid.Header, token(t, b.priv, "kid-unknown", other.Body, providertest.Now))
		err := v.Verify(other)
		require.ErrorIs(t, err, providers.ErrInvalidSignature)
		require.NotErrorIs(t, err, providers.ErrUnavailable)
	})

	t.Run("RotationWithOneSecretDown", func(t *testing.T) {
		t.Parallel()
		// The key lives under secretTwo, whose requests fail; secretOne's
		// answer (INVALID_API_KEYS here) does not make it a forgery, in
		// either order.
		ks := newKeyServer(t)
		priv := newKey(t)
		ks.add(secretTwo, "kid-two", priv, nil)
		ks.setDown(secretTwo, true)
		for _, secrets := range [][]string{{secretOne, secretTwo}, {secretTwo, secretOne}} {
			v, err := plaid.New(providers.Config{
				Secrets:  secrets,
				Settings: providertest.DecodeSettings(map[string]any{"client_id": clientID, "key_url": ks.keyURL()}),
				Now:      func() time.Time { return providertest.Now },
			})
			require.NoError(t, err)
			req := sample("item_1")
			req.Header.Set(plaid.Header, token(t, priv, "kid-two", req.Body, providertest.Now))
			requireUnavailable(t, v.Verify(req))
		}
	})

	t.Run("ConnectionRefused", func(t *testing.T) {
		t.Parallel()
		gone := httptest.NewServer(http.NotFoundHandler())
		keyURL := gone.URL + "/webhook_verification_key/get"
		gone.Close()
		v, err := plaid.New(providers.Config{
			Secrets:  []string{secretOne},
			Settings: providertest.DecodeSettings(map[string]any{"client_id": clientID, "key_url": keyURL}),
			Now:      func() time.Time { return providertest.Now },
		})
		require.NoError(t, err)
		req := sample("item_1")
		req.Header.Set(plaid.Header, token(t, newKey(t), "kid-one", req.Body, providertest.Now))
		requireUnavailable(t, v.Verify(req))
	})
}

func TestSettings(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		secrets  []string
		settings map[string]any
		want     string
	}{
		{nil, map[string]any{"client_id": clientID}, "secrets"},
		{[]string{secretOne}, nil, "plaid.client_id: required"},
		{[]string{secretOne}, map[string]any{"client_id": clientID, "key_url": "http://plaid.example/key"}, "plaid.key_url"},
		{[]string{secretOne}, map[string]any{"client_id": clientID, "key_url": "/key"}, "plaid.key_url"},
		{[]string{secretOne}, map[string]any{"client_id": clientID, "secret": "x"}, "plaid"},
	} {
		_, err := plaid.New(providers.Config{Secrets: c.secrets, Settings: providertest.DecodeSettings(c.settings)})
		require.ErrorContains(t, err, c.want, "%v", c.settings)
	}
	_, err := plaid.New(providers.Config{Secrets: []string{secretOne}, Settings: providertest.DecodeSettings(map[string]any{"client_id": clientID})})
	require.NoError(t, err)
}

func TestParseToken(t *testing.T) {
	t.Parallel()
	priv := newKey(t)
	tok, err := plaid.ParseToken(token(t, priv, "kid-1", []byte("x"), providertest.Now))
	require.NoError(t, err)
	require.Equal(t, "ES256", tok.Alg)
	require.Equal(t, "kid-1", tok.Kid)
	require.Equal(t, providertest.Now.Unix(), tok.IssuedAt)
	require.Equal(t, "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881", tok.BodySHA256)
	require.Len(t, tok.Signature, 64)

	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	sig := base64.RawURLEncoding.EncodeToString(make([]byte, 64))
	for _, bad := range []string{
		"", "a.b", "a.b.c.d",
		enc(`{"alg":"ES256"}`) + "." + enc(`{"iat":1,"request_body_sha256":"x"}`) + "." + sig,                // no kid
		enc(`{"alg":"ES256","kid":"k"}`) + "." + enc(`{"request_body_sha256":"x"}`) + "." + sig,              // no iat
		enc(`{"alg":"ES256","kid":"k"}`) + "." + enc(`{"iat":1}`) + "." + sig,                                // no body hash
		enc(`{"alg":"ES256","kid":"k"}`) + "." + enc(`{"iat":1.5,"request_body_sha256":"x"}`) + "." + sig,    // iat not integer
		enc(`{"alg":"ES256","kid":"k"}`) + "." + enc(`{"iat":1,"request_body_sha256":"x"}`) + "." + sig[:10], // short signature
		enc(`{"alg":"ES256","kid":"k"} {}`) + "." + enc(`{"iat":1,"request_body_sha256":"x"}`) + "." + sig,
		enc(`["ES256"]`) + "." + enc(`{"iat":1,"request_body_sha256":"x"}`) + "." + sig,
		enc(`{"alg":"es256","kid":"k"}`) + "." + enc(`{"iat":1,"request_body_sha256":"x"}`) + "." + sig,
	} {
		_, err := plaid.ParseToken(bad)
		require.ErrorIs(t, err, providers.ErrInvalidSignature, bad)
	}
}

func FuzzParseToken(f *testing.F) {
	priv := newKey(f)
	f.Add(token(f, priv, "kid-1", []byte("x"), providertest.Now))
	f.Add("eyJhbGciOiJFUzI1NiJ9..")
	f.Add("a.b.c")
	f.Add("....")
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := plaid.ParseToken(s)
		if err != nil {
			return
		}
		if tok.Alg != "ES256" || tok.Kid == "" || len(tok.Signature) != 64 || !strings.HasPrefix(s, tok.SigningInput+".") {
			t.Fatalf("bad token %+v from %q", tok, s)
		}
	})
}
