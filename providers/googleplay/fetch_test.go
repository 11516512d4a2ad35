package googleplay_test

import (
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/googleplay"
	"github.com/hookline/hookline/providers/keyfetch"
	"github.com/hookline/hookline/providers/providertest"
)

func requireUnavailable(t *testing.T, err error) {
	t.Helper()
	require.ErrorIs(t, err, providers.ErrUnavailable)
	require.False(t, providers.IsSignatureError(err), "%v", err)
}

// signedBy is a push signed by priv under kid at now.
func signedBy(t *testing.T, priv *rsa.PrivateKey, kid string, now time.Time) *providers.Request {
	t.Helper()
	req := sample("136969346945")
	req.Header.Set("Authorization", "Bearer "+token(t, priv, kid, claims(now)))
	return req
}

// TestUnknownKid: a kid the cached set lacks triggers one refetch; a kid
// the refetched set lacks too is a 401, and is remembered: naming it again
// costs no fetch until the negative TTL has passed.
func TestUnknownKid(t *testing.T) {
	t.Parallel()
	ks := newKeyServer(t, map[string]*rsa.PublicKey{kidOne: &keyOne().PublicKey})
	clk := &clock{now: providertest.Now}
	v := build(t, ks, clk)
	require.NoError(t, v.Verify(signedBy(t, keyOne(), kidOne, clk.Now())))
	require.Equal(t, int64(1), ks.fetches.Load())

	unknown := signedBy(t, keyOne(), kidTwo, clk.Now())
	for range 20 {
		err := v.Verify(unknown)
		require.ErrorIs(t, err, providers.ErrInvalidSignature)
		require.NotErrorIs(t, err, providers.ErrUnavailable)
	}
	require.Equal(t, int64(2), ks.fetches.Load(), "one refetch for the unknown kid, then none")
	require.NoError(t, v.Verify(signedBy(t, keyOne(), kidOne, clk.Now())), "the known kid is unaffected")
	require.Equal(t, int64(2), ks.fetches.Load())

	now := clk.advance(keyfetch.DefaultNegativeTTL)
	require.ErrorIs(t, v.Verify(signedBy(t, keyOne(), kidTwo, now)), providers.ErrInvalidSignature)
	require.Equal(t, int64(3), ks.fetches.Load(), "asked again once the TTL has passed")
}

// TestKeyRotation: Google publishes a new key before signing with it; a
// push signed with a key added since the set was cached is accepted after
// one refetch, and later pushes with it cost no fetch. A key Google dropped
// stays usable until the cached set expires.
func TestKeyRotation(t *testing.T) {
	t.Parallel()
	ks := newKeyServer(t, map[string]*rsa.PublicKey{kidOne: &keyOne().PublicKey})
	clk := &clock{now: providertest.Now}
	v := build(t, ks, clk)
	require.NoError(t, v.Verify(signedBy(t, keyOne(), kidOne, clk.Now())))

	ks.setKeys(map[string]*rsa.PublicKey{kidTwo: &keyTwo().PublicKey})
	for range 5 {
		require.NoError(t, v.Verify(signedBy(t, keyTwo(), kidTwo, clk.Now())))
	}
	require.Equal(t, int64(2), ks.fetches.Load())
	require.NoError(t, v.Verify(signedBy(t, keyOne(), kidOne, clk.Now())), "cached until the set's max-age")
	require.Equal(t, int64(2), ks.fetches.Load())

	// The test server's max-age is 6 hours.
	now := clk.advance(6*time.Hour + time.Second)
	require.ErrorIs(t, v.Verify(signedBy(t, keyOne(), kidOne, now)), providers.ErrInvalidSignature)
	require.NoError(t, v.Verify(signedBy(t, keyTwo(), kidTwo, now)))
	require.Equal(t, int64(4), ks.fetches.Load(), "the set, then a refetch for the dropped kid")
}

// TestCacheControl: the set is kept for its max-age (at least a minute, at
// most a day), an hour without one.
func TestCacheControl(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		cc  string
		ttl time.Duration
	}{
		{"public, max-age=120, must-revalidate", 2 * time.Minute},
		{"max-age=0", time.Minute},
		{"no-store", time.Hour},
		{"", time.Hour},
		{"public, max-age=999999999", 24 * time.Hour},
	} {
		t.Run(c.cc, func(t *testing.T) {
			t.Parallel()
			ks := newKeyServer(t, map[string]*rsa.PublicKey{kidOne: &keyOne().PublicKey})
			ks.setCacheControl(c.cc)
			clk := &clock{now: providertest.Now}
			v := build(t, ks, clk)
			require.NoError(t, v.Verify(signedBy(t, keyOne(), kidOne, clk.Now())))
			clk.advance(c.ttl - time.Second)
			// A token is valid an hour (and 5 minutes): sign afresh.
			require.NoError(t, v.Verify(signedBy(t, keyOne(), kidOne, clk.Now())))
			require.Equal(t, int64(1), ks.fetches.Load())
			clk.advance(2 * time.Second)
			require.NoError(t, v.Verify(signedBy(t, keyOne(), kidOne, clk.Now())))
			require.Equal(t, int64(2), ks.fetches.Load())
		})
	}
}

// TestKeysUnavailable: a key set that cannot be had (any non-2xx answer, a
// body without a usable key, a refused connection) leaves the push's
// authenticity unknown: ErrUnavailable (503, Pub/Sub retries), never a
// signature error, and not remembered.
func TestKeysUnavailable(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusInternalServerError, http.StatusServiceUnavailable, http.StatusTooManyRequests, http.StatusRequestTimeout, http.StatusNotFound, http.StatusForbidden} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			t.Parallel()
			ks := newKeyServer(t, map[string]*rsa.PublicKey{kidOne: &keyOne().PublicKey})
			v := build(t, ks, &clock{now: providertest.Now})
			genuine := signedBy(t, keyOne(), kidOne, providertest.Now)
			ks.status.Store(int64(status))
			for range 3 {
				requireUnavailable(t, v.Verify(genuine))
			}
			require.Equal(t, int64(3), ks.fetches.Load(), "unavailability is not remembered")
			ks.status.Store(0)
			require.NoError(t, v.Verify(genuine))
			require.Equal(t, int64(4), ks.fetches.Load())
		})
	}
	for name, body := range map[string]string{
		"not JSON":     "<html>",
		"no keys":      `{"keys":[]}`,
		"EC key only":  `{"keys":[{"kty":"EC","crv":"P-256","kid":"` + kidOne + `","x":"AA","y":"AA"}]}`,
		"short RSA":    `{"keys":[{"kty":"RSA","kid":"` + kidOne + `","n":"AQAB","e":"AQAB"}]}`,
		"oversized":    `{"keys":[],"pad":"` + string(make([]byte, 70<<10)) + `"}`,
		"keys not set": `{"keys":{}}`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ks := newKeyServer(t, nil)
			ks.setBody([]byte(body))
			v := build(t, ks, &clock{now: providertest.Now})
			genuine := signedBy(t, keyOne(), kidOne, providertest.Now)
			requireUnavailable(t, v.Verify(genuine))
			requireUnavailable(t, v.Verify(genuine))
			require.Equal(t, int64(2), ks.fetches.Load())
		})
	}
	t.Run("ConnectionRefused", func(t *testing.T) {
		t.Parallel()
		gone := httptest.NewServer(http.NotFoundHandler())
		gone.Close()
		v, err := googleplay.New(providers.Config{Now: func() time.Time { return providertest.Now },
			Settings: providertest.DecodeSettings(map[string]any{"audience": audience, "service_account": serviceAccount, "keys_url": gone.URL + "/oauth2/v3/certs"})})
		require.NoError(t, err)
		requireUnavailable(t, v.Verify(signedBy(t, keyOne(), kidOne, providertest.Now)))
	})
	t.Run("Redirect", func(t *testing.T) {
		t.Parallel()
		ks := newKeyServer(t, map[string]*rsa.PublicKey{kidOne: &keyOne().PublicKey})
		redirect := httptest.NewServer(http.RedirectHandler(ks.keysURL(), http.StatusFound))
		t.Cleanup(redirect.Close)
		v, err := googleplay.New(providers.Config{Now: func() time.Time { return providertest.Now },
			Settings: providertest.DecodeSettings(map[string]any{"audience": audience, "service_account": serviceAccount, "keys_url": redirect.URL})})
		require.NoError(t, err)
		requireUnavailable(t, v.Verify(signedBy(t, keyOne(), kidOne, providertest.Now)))
		require.Zero(t, ks.fetches.Load(), "redirects are not followed")
	})
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

// TestCoalescedFetches: concurrent pushes share one fetch of the set, and
// concurrent pushes naming one unknown kid one refetch.
func TestCoalescedFetches(t *testing.T) {
	t.Parallel()
	for name, kid := range map[string]string{"Known": kidOne, "Unknown": kidTwo} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ks := newKeyServer(t, map[string]*rsa.PublicKey{kidOne: &keyOne().PublicKey})
			v := build(t, ks, &clock{now: providertest.Now})
			req := signedBy(t, keyOne(), kid, providertest.Now)
			want := int64(1)
			if kid != kidOne {
				require.NoError(t, v.Verify(signedBy(t, keyOne(), kidOne, providertest.Now)))
				want = 2
			}
			release := ks.hold()
			defer release()
			go func() {
				time.Sleep(100 * time.Millisecond)
				release()
			}()
			errs := runConcurrently(100, func(int) error { return v.Verify(req) })
			for _, err := range errs {
				if kid == kidOne {
					require.NoError(t, err)
				} else {
					require.ErrorIs(t, err, providers.ErrInvalidSignature)
				}
			}
			require.Equal(t, want, ks.fetches.Load())
		})
	}
}

// TestFetchFloodBounded: a flood of pushes naming random kids (with claims
// that pass, so that each reaches the key lookup) makes no more requests to
// the key endpoint than the rate limit allows (concurrent refetches share
// one request); the pushes it refuses are ErrUnavailable, the others
// signature errors. A genuine push verifies
// throughout: its kid is in the cached set.
func TestFetchFloodBounded(t *testing.T) {
	t.Parallel()
	ks := newKeyServer(t, map[string]*rsa.PublicKey{kidOne: &keyOne().PublicKey})
	v := build(t, ks, &clock{now: providertest.Now})
	genuine := signedBy(t, keyOne(), kidOne, providertest.Now)
	require.NoError(t, v.Verify(genuine))
	const n = 400
	reqs := make([]*providers.Request, n)
	for i := range reqs {
		reqs[i] = signedBy(t, keyOne(), rand.Text(), providertest.Now)
	}
	start := time.Now()
	errs := runConcurrently(n, func(i int) error {
		if i%50 == 0 {
			if err := v.Verify(genuine); err != nil {
				return errors.Join(errors.New("genuine push refused"), err)
			}
		}
		return v.Verify(reqs[i])
	})
	elapsed := time.Since(start)
	var invalid, unavailable int
	for _, err := range errs {
		switch {
		case errors.Is(err, providers.ErrUnavailable):
			require.ErrorIs(t, err, keyfetch.ErrRateLimited)
			unavailable++
		case errors.Is(err, providers.ErrInvalidSignature):
			invalid++
		default:
			t.Fatalf("unexpected error %v", err)
		}
	}
	fetches := ks.fetches.Load()
	bound := 1 + keyfetch.DefaultBurst + keyfetch.DefaultRate*(elapsed+keyfetch.DefaultMaxWait).Seconds()
	t.Logf("%d pushes in %s: %d key requests (bound %.0f), %d invalid, %d unavailable", n, elapsed, fetches, bound, invalid, unavailable)
	require.LessOrEqual(t, float64(fetches), bound)
	require.Less(t, fetches, int64(n/4))
}
