package paypal_test

import (
	"crypto/rand"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/keyfetch"
	"github.com/hookline/hookline/providers/paypal"
	"github.com/hookline/hookline/providers/providertest"
)

// fetchServer serves /certs/CERT-1 (current) and /certs/CERT-old (expired)
// and counts requests. A non-zero status
// answers every request with it; while gate is set, requests wait for it to
// close.
type fetchServer struct {
	*httptest.Server
	fetches atomic.Int64
	status  atomic.Int64
	mu      sync.Mutex
	gate    chan struct{}
	cert    []byte
	expired []byte
}

func newFetchServer(t testing.TB) *fetchServer {
	fs := &fetchServer{
		cert:    certPEM(t, signingKey(), providertest.Now.Add(-24*time.Hour), providertest.Now.Add(365*24*time.Hour)),
		expired: certPEM(t, signingKey(), providertest.Now.Add(-48*time.Hour), providertest.Now.Add(-24*time.Hour)),
	}
	fs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fs.fetches.Add(1)
		fs.mu.Lock()
		gate := fs.gate
		fs.mu.Unlock()
		if gate != nil {
			<-gate
		}
		if s := fs.status.Load(); s != 0 {
			http.Error(w, http.StatusText(int(s)), int(s))
			return
		}
		switch r.URL.Path {
		case "/certs/CERT-1":
			_, _ = w.Write(fs.cert)
		case "/certs/CERT-old":
			_, _ = w.Write(fs.expired)
		default:
			http.NotFound(w, r)
		}
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

func (fs *fetchServer) host() string {
	u, _ := url.Parse(fs.URL)
	return u.Host
}

// fetchSetup returns a server, an adapter allowed to fetch from it at clk,
// and a genuine delivery whose certificate is at /certs/CERT-1.
func fetchSetup(t *testing.T) (*fetchServer, *paypal.Verifier, *bundle, *providers.Request) {
	t.Helper()
	fs := newFetchServer(t)
	clk := &bundle{now: providertest.Now}
	v, err := paypal.New(providers.Config{
		Settings: providertest.DecodeSettings(map[string]any{"webhook_id": "WH1", "cert_hosts": []string{fs.host()}}),
		Now:      clk.clock,
	})
	require.NoError(t, err)
	req := sample("WH-1")
	sign(t, signingKey(), fs.URL+"/certs/CERT-1", "WH1", req, providertest.Now)
	return fs, v, clk, req
}

// withCertURL is req naming another certificate URL.
func withCertURL(req *providers.Request, certURL string) *providers.Request {
	r := providertest.Clone(req)
	r.Header.Set(paypal.HeaderCertURL, certURL)
	return r
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

// TestFetchFloodBounded: a flood of deliveries naming random certificate
// URLs on an allowed host makes no more fetches than the rate limit allows;
// the deliveries it refuses are ErrUnavailable (the sender retries), the
// others signature errors. A genuine delivery verifies once the flood is over.
func TestFetchFloodBounded(t *testing.T) {
	t.Parallel()
	fs, v, _, genuine := fetchSetup(t)
	const n = 500
	start := time.Now()
	errs := runConcurrently(n, func(int) error {
		return v.Verify(withCertURL(genuine, fs.URL+"/certs/CERT-"+rand.Text()))
	})
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
	t.Logf("%d deliveries in %s: %d fetches (bound %.0f), %d invalid, %d unavailable", n, elapsed, fetches, bound, invalid, unavailable)
	require.LessOrEqual(t, float64(fetches), bound)
	require.Less(t, fetches, int64(n/4))
	require.Equal(t, int64(invalid), fetches, "every fetch answered 404, every other delivery was refused before fetching")
	require.Positive(t, unavailable)

	require.Eventually(t, func() bool { return v.Verify(genuine) == nil }, 5*time.Second, 50*time.Millisecond,
		"a genuine delivery verifies once the limiter has refilled")
}

// TestNegativeCache: a URL answered 404 is remembered for the negative TTL:
// naming it again, one after the other or all at once, costs no fetch.
func TestNegativeCache(t *testing.T) {
	t.Parallel()
	fs, v, clk, genuine := fetchSetup(t)
	unknown := withCertURL(genuine, fs.URL+"/certs/CERT-unknown")
	for range 50 {
		err := v.Verify(unknown)
		require.ErrorIs(t, err, providers.ErrInvalidSignature)
		require.NotErrorIs(t, err, providers.ErrUnavailable)
	}
	require.Equal(t, int64(1), fs.fetches.Load())

	// A query string makes another URL: fetched once, then remembered.
	other := withCertURL(genuine, fs.URL+"/certs/CERT-unknown?x=1")
	require.ErrorIs(t, v.Verify(other), providers.ErrInvalidSignature)
	require.ErrorIs(t, v.Verify(other), providers.ErrInvalidSignature)
	require.Equal(t, int64(2), fs.fetches.Load())

	// Once the TTL has passed the URL is asked again (the delivery's
	// transmission time moves with the clock).
	later := clk.clock().Add(keyfetch.DefaultNegativeTTL)
	clk.setClock(later)
	fresh := sample("WH-2")
	sign(t, signingKey(), fs.URL+"/certs/CERT-unknown", "WH1", fresh, later)
	require.ErrorIs(t, v.Verify(fresh), providers.ErrInvalidSignature)
	require.Equal(t, int64(3), fs.fetches.Load())

	// The genuine certificate's URL was never affected.
	require.NoError(t, v.Verify(withCertURL(fresh, fs.URL+"/certs/CERT-1")))
}

// TestCoalescedFetches: concurrent deliveries naming the same uncached URL
// share one fetch, whether the certificate is found or not.
func TestCoalescedFetches(t *testing.T) {
	t.Parallel()
	for name, path := range map[string]string{"Found": "/certs/CERT-1", "NotFound": "/certs/CERT-missing"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fs, v, _, genuine := fetchSetup(t)
			req := withCertURL(genuine, fs.URL+path)
			release := fs.hold()
			defer release()
			go func() {
				// Let every caller reach the fetch before it is answered.
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

// TestProviderThrottledOrFailing: a certificate host answering 408, 429 or a
// 5xx leaves the delivery's authenticity unknown: ErrUnavailable (503), never
// a signature error, and not remembered: once the host recovers the genuine
// delivery verifies.
func TestProviderThrottledOrFailing(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusRequestTimeout} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			t.Parallel()
			fs, v, _, genuine := fetchSetup(t)
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

// TestLongCertURL: a PAYPAL-CERT-URL over 2048 bytes is refused unfetched.
func TestLongCertURL(t *testing.T) {
	t.Parallel()
	fs, v, _, genuine := fetchSetup(t)
	long := fs.URL + "/certs/CERT-1?" + strings.Repeat("a", 2048)
	err := v.Verify(withCertURL(genuine, long))
	require.ErrorIs(t, err, providers.ErrInvalidSignature)
	require.Zero(t, fs.fetches.Load())
}

// TestExpiredCertFetchesBounded: an expired certificate is not kept (so a
// renewed one at the same URL is seen at once), yet deliveries naming it
// cost no more fetches than the rate limit allows, and concurrent ones share
// a fetch.
func TestExpiredCertFetchesBounded(t *testing.T) {
	t.Parallel()
	fs, v, _, genuine := fetchSetup(t)
	old := withCertURL(genuine, fs.URL+"/certs/CERT-old")
	const n = 500
	start := time.Now()
	errs := runConcurrently(n, func(int) error { return v.Verify(old) })
	for range 10 {
		errs = append(errs, v.Verify(old))
	}
	elapsed := time.Since(start)
	for _, err := range errs {
		if !errors.Is(err, providers.ErrUnavailable) {
			require.ErrorIs(t, err, providers.ErrInvalidSignature)
		}
	}
	bound := keyfetch.DefaultBurst + keyfetch.DefaultRate*(elapsed+keyfetch.DefaultMaxWait).Seconds()
	require.LessOrEqual(t, float64(fs.fetches.Load()), bound)
	t.Logf("%d deliveries in %s: %d fetches (bound %.0f)", len(errs), elapsed, fs.fetches.Load(), bound)
}

// The content key is the digest of exactly what PayPal signs: the
// transmission id, its time, the webhook id and the body's CRC-32. A body
// rewritten to another id that keeps the CRC-32 (which anyone can arrange)
// verifies, and keys as the original it replays.
func TestContentKeyIsTheSignedString(t *testing.T) {
	t.Parallel()
	v, err := paypal.New(providers.Config{Source: "p", Settings: func(x any) error {
		return yaml.Unmarshal([]byte("webhook_id: WH-1"), x)
	}})
	require.NoError(t, err)
	var ck providers.ContentKeyer = v
	req := func(id string, body string) *providers.Request {
		h := http.Header{}
		h.Set(paypal.HeaderTransmissionID, id)
		h.Set(paypal.HeaderTransmissionTime, "2026-11-30T12:00:00Z")
		return &providers.Request{Body: []byte(body), Header: h}
	}
	a := ck.ContentKey(req("tx-1", `{"id":"WH-EVT-1"}`))
	require.Equal(t, providers.ContentDigest("paypal", []byte(paypal.SignedString("tx-1", "2026-11-30T12:00:00Z", "WH-1", []byte(`{"id":"WH-EVT-1"}`)))), a)
	require.NotEqual(t, a, ck.ContentKey(req("tx-2", `{"id":"WH-EVT-1"}`)), "another transmission")
	require.NotEqual(t, a, ck.ContentKey(req("tx-1", `{"id":"WH-EVT-2"}`)), "another CRC-32")
}
