package sns_test

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

	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/keyfetch"
	"github.com/hookline/hookline/providers/providertest"
	"github.com/hookline/hookline/providers/sns"
)

// fetchServer serves the current certificate at certPath and an expired
// one at /SimpleNotificationService-old.pem, and counts requests. A non-zero
// status answers every request with it; while gate is set, requests wait
// for it to close.
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
		case certPath:
			_, _ = w.Write(fs.cert)
		case "/SimpleNotificationService-old.pem":
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

// fetchSetup returns a server, an adapter with the default settings whose
// fetches of SNS's hosts reach that server, and a genuine delivery whose
// certificate is at awsCertURL.
func fetchSetup(t *testing.T) (*fetchServer, *sns.Verifier, *bundle, *providers.Request) {
	t.Helper()
	fs := newFetchServer(t)
	clk := &bundle{now: providertest.Now}
	u, _ := url.Parse(fs.URL)
	v, err := sns.New(providers.Config{Secrets: []string{topicArn}, Now: clk.clock, HTTPClient: &http.Client{Transport: awsTransport{to: u}}})
	require.NoError(t, err)
	return fs, v, clk, sign(t, signingKey(), "2", awsCertURL, notification("b1f0-fetch")).request()
}

// withCertURL is req naming another certificate URL (SigningCertURL is not
// signed: the signature stays valid).
func withCertURL(t testing.TB, req *providers.Request, certURL string) *providers.Request {
	return decode(t, req.Body).with("SigningCertURL", certURL).request()
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
// URLs on SNS's hosts makes no more fetches than the rate limit allows; the
// deliveries it refuses are ErrUnavailable (SNS retries), the others
// signature errors. A genuine delivery verifies once the flood is over.
func TestFetchFloodBounded(t *testing.T) {
	t.Parallel()
	fs, v, _, genuine := fetchSetup(t)
	const n = 500
	reqs := make([]*providers.Request, n)
	for i := range reqs {
		reqs[i] = withCertURL(t, genuine, "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-"+rand.Text()+".pem")
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
	const unknownURL = "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-unknown.pem"
	unknown := withCertURL(t, genuine, unknownURL)
	for range 50 {
		err := v.Verify(unknown)
		require.ErrorIs(t, err, providers.ErrInvalidSignature)
		require.NotErrorIs(t, err, providers.ErrUnavailable)
	}
	require.Equal(t, int64(1), fs.fetches.Load())

	// Another region's host makes another URL: fetched once, then remembered.
	other := withCertURL(t, genuine, strings.Replace(unknownURL, "us-east-1", "eu-west-1", 1))
	require.ErrorIs(t, v.Verify(other), providers.ErrInvalidSignature)
	require.ErrorIs(t, v.Verify(other), providers.ErrInvalidSignature)
	require.Equal(t, int64(2), fs.fetches.Load())

	// Once the TTL has passed the URL is asked again.
	clk.setClock(clk.clock().Add(keyfetch.DefaultNegativeTTL))
	require.ErrorIs(t, v.Verify(unknown), providers.ErrInvalidSignature)
	require.Equal(t, int64(3), fs.fetches.Load())

	// The genuine certificate's URL was never affected.
	require.NoError(t, v.Verify(genuine))
}

// TestCoalescedFetches: concurrent deliveries naming the same uncached URL
// share one fetch, whether the certificate is found or not.
func TestCoalescedFetches(t *testing.T) {
	t.Parallel()
	for name, path := range map[string]string{"Found": certPath, "NotFound": "/SimpleNotificationService-missing.pem"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fs, v, _, genuine := fetchSetup(t)
			req := withCertURL(t, genuine, "https://sns.us-east-1.amazonaws.com"+path)
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

// TestLongCertURL: a SigningCertURL over 2048 bytes is refused unfetched.
func TestLongCertURL(t *testing.T) {
	t.Parallel()
	fs, v, _, genuine := fetchSetup(t)
	long := "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-" + strings.Repeat("a", 2048) + ".pem"
	err := v.Verify(withCertURL(t, genuine, long))
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
	old := withCertURL(t, genuine, "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-old.pem")
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
