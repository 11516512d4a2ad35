package googleplay_test

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/googleplay"
	"github.com/hookline/hookline/providers/providertest"
)

const (
	audience       = "https://hooks.example.com/webhooks/googleplay"
	serviceAccount = "rtdn-push@hookline-example.iam.gserviceaccount.com"
	subject        = "113774264463038321964"
	kidOne         = "5f2e4c9a0b7d1e3f6a8c0b2d4e6f8a1c3e5d7f9b"
	kidTwo         = "a1c3e5d7f9b5f2e4c9a0b7d1e3f6a8c0b2d4e6f8"
	packageName    = "com.example.hookline"
)

// Test keys, made once: RSA key generation is slow.
var (
	keyOne   = sync.OnceValue(func() *rsa.PrivateKey { return newKey() })
	keyTwo   = sync.OnceValue(func() *rsa.PrivateKey { return newKey() })
	keyOther = sync.OnceValue(func() *rsa.PrivateKey { return newKey() })
)

func newKey() *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return k
}

// keyServer plays Google's key endpoint: the JWKS of its keys, with
// cacheControl as Cache-Control, counting requests. A non-zero status
// answers every request with it; while a gate is set, requests wait for it.
type keyServer struct {
	*httptest.Server
	fetches atomic.Int64
	status  atomic.Int64

	mu           sync.Mutex
	keys         map[string]*rsa.PublicKey
	cacheControl string
	body         []byte // when set, served instead of the keys
	gate         chan struct{}
}

func newKeyServer(t testing.TB, keys map[string]*rsa.PublicKey) *keyServer {
	ks := &keyServer{keys: keys, cacheControl: "public, max-age=21600, must-revalidate, no-transform"}
	ks.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ks.fetches.Add(1)
		ks.mu.Lock()
		gate, keys, cc, body := ks.gate, ks.keys, ks.cacheControl, ks.body
		ks.mu.Unlock()
		if gate != nil {
			<-gate
		}
		if s := ks.status.Load(); s != 0 {
			http.Error(w, `{"error":"backend"}`, int(s))
			return
		}
		if r.Method != http.MethodGet || r.URL.Path != "/oauth2/v3/certs" {
			http.NotFound(w, r)
			return
		}
		if body == nil {
			var err error
			if body, err = googleplay.JWKS(keys); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
		}
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		if cc != "" {
			w.Header().Set("Cache-Control", cc)
		}
		_, _ = w.Write(body)
	}))
	t.Cleanup(ks.Close)
	return ks
}

func (ks *keyServer) keysURL() string { return ks.URL + "/oauth2/v3/certs" }

func (ks *keyServer) setKeys(keys map[string]*rsa.PublicKey) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	ks.keys = keys
}

func (ks *keyServer) setBody(body []byte) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	ks.body = body
}

func (ks *keyServer) setCacheControl(cc string) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	ks.cacheControl = cc
}

// hold makes requests wait until the returned func is called.
func (ks *keyServer) hold() (release func()) {
	gate := make(chan struct{})
	ks.mu.Lock()
	ks.gate = gate
	ks.mu.Unlock()
	return sync.OnceFunc(func() {
		ks.mu.Lock()
		ks.gate = nil
		ks.mu.Unlock()
		close(gate)
	})
}

// clock is a settable clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

// settings are a source's googleplay block with keys from ks.
func settings(ks *keyServer, extra ...string) map[string]any {
	m := map[string]any{"audience": audience, "service_account": serviceAccount, "keys_url": ks.keysURL()}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i]] = extra[i+1]
	}
	return m
}

// build returns an adapter with keys from ks at clk.
func build(t testing.TB, ks *keyServer, clk *clock, extra ...string) *googleplay.Verifier {
	t.Helper()
	v, err := googleplay.New(providers.Config{Source: "test", Settings: providertest.DecodeSettings(settings(ks, extra...)), Now: clk.Now})
	require.NoError(t, err)
	return v
}

// claims are those of a push's token issued at iat, valid an hour.
func claims(iat time.Time) jwt.MapClaims {
	return jwt.MapClaims{
		"aud": audience, "azp": subject, "email": serviceAccount, "email_verified": true,
		"exp": iat.Add(time.Hour).Unix(), "iat": iat.Unix(), "iss": "https://accounts.google.com", "sub": subject,
	}
}

// token signs c with priv under kid using golang-jwt: an implementation
// independent of the adapter's parser.
func token(t testing.TB, priv *rsa.PrivateKey, kid string, c jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, c)
	tok.Header["kid"] = kid
	s, err := tok.SignedString(priv)
	require.NoError(t, err)
	return s
}

// authorize sets req's Authorization to a token of keyOne issued at iat.
func authorize(t testing.TB, req *providers.Request, iat time.Time) *providers.Request {
	t.Helper()
	req.Header.Set("Authorization", "Bearer "+token(t, keyOne(), kidOne, claims(iat)))
	return req
}

// eventMillis is the eventTimeMillis of the test notifications.
var eventMillis = providertest.Now.Add(-2 * time.Second).UnixMilli()

// rtdn is a Developer Notification of kind ("subscriptionNotification", …).
func rtdn(kind string) string {
	inner := `{"version":"1.0","notificationType":4,"purchaseToken":"PURCHASE_TOKEN","subscriptionId":"premium.monthly"}`
	if kind == "testNotification" {
		inner = `{"version":"1.0"}`
	}
	return `{"version":"1.0","packageName":"` + packageName + `","eventTimeMillis":"` + strconv.FormatInt(eventMillis, 10) + `","` + kind + `":` + inner + `}`
}

// push is a Pub/Sub push of message id carrying data, as Pub/Sub lays it
// out: both spellings of the id and the publish time.
func push(id, data string) *providers.Request {
	published := providertest.Now.Add(-time.Second).Format("2006-01-02T15:04:05.000Z")
	m := map[string]any{"data": base64.StdEncoding.EncodeToString([]byte(data)), "messageId": id, "message_id": id,
		"publishTime": published, "publish_time": published}
	raw, err := json.Marshal(map[string]any{"message": m, "subscription": "projects/hookline-example/subscriptions/play-rtdn"})
	if err != nil {
		panic(err)
	}
	return providertest.Request(string(raw))
}

// sample is a push of a subscription notification, message id id.
func sample(id string) *providers.Request { return push(id, rtdn("subscriptionNotification")) }
