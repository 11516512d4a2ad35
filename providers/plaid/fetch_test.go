package plaid_test

import (
	"crypto/ecdsa"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/keyfetch"
	"github.com/hookline/hookline/providers/plaid"
	"github.com/hookline/hookline/providers/providertest"
)

// fetchServer plays the key endpoint with one key, "kid-one", and counts
// requests. A non-zero status answers every request with it; while gate is
// set, requests wait for it to close.
type fetchServer struct {
	*httptest.Server
	fetches atomic.Int64
	status  atomic.Int64
	mu      sync.Mutex
	gate    chan struct{}
}

func newFetchServer(t testing.TB, priv *ecdsa.PrivateKey) *fetchServer {
	pub, err := priv.PublicKey.Bytes()
	require.NoError(t, err)
	fs := &fetchServer{}
	fs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fs.fetches.Add(1)
		fs.mu.Lock()
		gate := fs.gate
		fs.mu.Unlock()
		if gate != nil {
			<-gate
		}
		if s := fs.status.Load(); s != 0 {
			http.Error(w, `{"error_type":"RATE_LIMIT_EXCEEDED","error_code":"RATE_LIMIT"}`, int(s))
			return
		}
		var req struct {
			KeyID string `json:"key_id"`
		}
		if json.NewDecoder(r.Body).Decode(&req) != nil || req.KeyID != "kid-one" {
			http.Error(w, `{"error_code":"INVALID_WEBHOOK_VERIFICATION_KEY_ID"}`, http.StatusBadRequest)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"key": map[string]any{
			"alg": "ES256", "crv": "P-256", "kid": req.KeyID, "kty": "EC", "use": "sig",
			"x": base64.RawURLEncoding.EncodeToString(pub[1:33]),
			"y": base64.RawURLEncoding.EncodeToString(pub[33:]),
		}})
	}))
	t.Cleanup(fs.Close)
	return fs
}

// hold makes requests wait until the returned func is called.
func (fs *fetchServer) hold() (release func()) {
	gate := make(chan struct{})
	fs.mu.Lock()
	fs.gate = gate
	fs.mu.Unlock()
	return sync.OnceFunc(func() {
		fs.mu.Lock()
		fs.gate = nil
		fs.mu.Unlock()
		close(gate)
	})
}

// fetchSetup returns a key server, an adapter using it at clk, the key
// "kid-one" signs with and a genuine delivery signed by it.
func fetchSetup(t *testing.T) (*fetchServer, *plaid.Verifier, *bundle, *ecdsa.PrivateKey, *providers.Request) {
	t.Helper()
	priv := newKey(t)
	fs := newFetchServer(t, priv)
	clk := &bundle{now: providertest.Now}
	v, err := plaid.New(providers.Config{
		Secrets:  []string{secretOne},
		Settings: providertest.DecodeSettings(map[string]any{"client_id": clientID, "key_url": fs.URL + "/webhook_verification_key/get"}),
		Now:      clk.clock,
	})
	require.NoError(t, err)
	req := sample("item_1")
	req.Header.Set(plaid.Header, token(t, priv, "kid-one", req.Body, providertest.Now))
	return fs, v, clk, priv, req
}

// runConcurrently calls f n times at once and returns the errors.
func runConcurrently(n int, f func(i int) error) []error {
	errs := make([]error, n)
	var start, done sync.WaitGroup
	start.Add(1)
	for i := range n {
		done.Go(func() {
			start.Wait()
			errs[i] = f(i)
		})
	}
	start.Done()
	done.Wait()
	return errs
}

// TestFetchFloodBounded: a flood of deliveries naming random kids makes no
// more key requests than the rate limit allows; the deliveries it refuses
// are ErrUnavailable (the sender retries), the others signature errors. A
// genuine delivery verifies once the flood is over.
func TestFetchFloodBounded(t *testing.T) {
	t.Parallel()
	fs, v, _, priv, genuine := fetchSetup(t)
	const n = 500
	reqs := make([]*providers.Request, n)
	for i := range reqs {
		reqs[i] = sample("item_1")
		reqs[i].Header.Set(plaid.Header, token(t, priv, rand.Text(), reqs[i].Body, providertest.Now))
	}
	start := time.Now()
	errs := runConcurrently(n, func(i int) error { return v.Verify(reqs[i]) })
	elapsed := time.Since(start)

	var invalid, unavailable int
	for _, err := range errs {
		switch {
		case errors.Is(err, providers.ErrUnavailable):
			require.False(t, providers.IsSignatureError(err), "%v", err)
			require.ErrorIs(t, err, keyfetch.ErrRateLimited)
			unavailable++
		case errors.Is(err, providers.ErrInvalidSignature):
			invalid++
		default:
			t.Fatalf("unexpected error %v", err)
		}
	}
	fetches := fs.fetches.Load()
	bound := keyfetch.DefaultBurst + keyfetch.DefaultRate*(elapsed+keyfetch.DefaultMaxWait).Seconds()
	t.Logf("%d deliveries in %s: %d key requests (bound %.0f), %d invalid, %d unavailable", n, elapsed, fetches, bound, invalid, unavailable)
	require.LessOrEqual(t, float64(fetches), bound)
	require.Less(t, fetches, int64(n/4))
	require.Equal(t, int64(invalid), fetches, "every request answered unknown kid, every other delivery was refused before asking")
	require.Positive(t, unavailable)

	require.Eventually(t, func() bool { return v.Verify(genuine) == nil }, 5*time.Second, 50*time.Millisecond,
		"a genuine delivery verifies once the limiter has refilled")
}

// TestNegativeCache: a kid answered unknown is remembered for the negative
// TTL: naming it again costs no request.
func TestNegativeCache(t *testing.T) {
	t.Parallel()
	fs, v, clk, priv, genuine := fetchSetup(t)
	unknown := sample("item_1")
	unknown.Header.Set(plaid.Header, token(t, priv, "kid-unknown", unknown.Body, providertest.Now))
	for range 50 {
		err := v.Verify(unknown)
		require.ErrorIs(t, err, providers.ErrInvalidSignature)
		require.NotErrorIs(t, err, providers.ErrUnavailable)
	}
	require.Equal(t, int64(1), fs.fetches.Load())

	// The genuine kid is unaffected.
	require.NoError(t, v.Verify(genuine))
	require.Equal(t, int64(2), fs.fetches.Load())

	// Once the TTL has passed the kid is asked again.
	now := clk.advance(keyfetch.DefaultNegativeTTL)
	unknown.Header.Set(plaid.Header, token(t, priv, "kid-unknown", unknown.Body, now))
	require.ErrorIs(t, v.Verify(unknown), providers.ErrInvalidSignature)
	require.Equal(t, int64(3), fs.fetches.Load())
}

// TestCoalescedFetches: concurrent deliveries naming the same uncached kid
// share one key request, whether the key is found or not.
func TestCoalescedFetches(t *testing.T) {
	t.Parallel()
	for name, kid := range map[string]string{"Found": "kid-one", "NotFound": "kid-missing"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fs, v, _, priv, _ := fetchSetup(t)
			req := sample("item_1")
			req.Header.Set(plaid.Header, token(t, priv, kid, req.Body, providertest.Now))
			release := fs.hold()
			defer release()
			go func() {
				// Let every caller reach the lookup before it is answered.
				time.Sleep(100 * time.Millisecond)
				release()
			}()
			errs := runConcurrently(200, func(int) error { return v.Verify(req) })
			for _, err := range errs {
				if name == "Found" {
					require.NoError(t, err)
				} else {
					require.ErrorIs(t, err, providers.ErrInvalidSignature)
				}
			}
			require.Equal(t, int64(1), fs.fetches.Load())
		})
	}
}

// TestProviderThrottledOrFailing: a key endpoint answering 408, 429 or a 5xx
// leaves the delivery's authenticity unknown: ErrUnavailable (503), never a
// signature error, and not remembered: once the endpoint recovers the genuine
// delivery verifies.
func TestProviderThrottledOrFailing(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusRequestTimeout} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			t.Parallel()
			fs, v, _, _, genuine := fetchSetup(t)
			fs.status.Store(int64(status))
			for range 3 {
				err := v.Verify(genuine)
				require.ErrorIs(t, err, providers.ErrUnavailable)
				require.False(t, providers.IsSignatureError(err), "%v", err)
			}
			require.Equal(t, int64(3), fs.fetches.Load(), "unavailability is not remembered")
			fs.status.Store(0)
			require.NoError(t, v.Verify(genuine))
			require.NoError(t, v.Verify(genuine))
			require.Equal(t, int64(4), fs.fetches.Load())
		})
	}
}

// TestLongKid: a kid over 256 bytes is refused unfetched.
func TestLongKid(t *testing.T) {
	t.Parallel()
	fs, v, _, priv, _ := fetchSetup(t)
	req := sample("item_1")
	req.Header.Set(plaid.Header, token(t, priv, strings.Repeat("k", 257), req.Body, providertest.Now))
	require.ErrorIs(t, v.Verify(req), providers.ErrInvalidSignature)
	require.Zero(t, fs.fetches.Load())
	req.Header.Set(plaid.Header, token(t, priv, strings.Repeat("k", 256), req.Body, providertest.Now))
	require.ErrorIs(t, v.Verify(req), providers.ErrInvalidSignature)
	require.Equal(t, int64(1), fs.fetches.Load())
}
