package keyfetch

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/providers"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

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

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

var (
	errNotFound = errors.New("not found")
	errDown     = fmt.Errorf("%w: answered 503", providers.ErrUnavailable)
)

// counter is a Fetcher that counts its calls and answers what answer says.
type counter struct {
	calls  atomic.Int64
	answer func(now time.Time) (string, time.Time, error)
}

func (c *counter) fetch(now time.Time) (string, time.Time, error) {
	c.calls.Add(1)
	return c.answer(now)
}

func TestCacheRemembersValues(t *testing.T) {
	t.Parallel()
	clk := &clock{now: t0}
	c := NewCache[string](Options{Now: clk.Now})
	f := &counter{answer: func(now time.Time) (string, time.Time, error) { return "v", now.Add(time.Hour), nil }}

	for range 3 {
		v, err := c.Get("k", f.fetch)
		require.NoError(t, err)
		require.Equal(t, "v", v)
	}
	require.Equal(t, int64(1), f.calls.Load())

	// Usable up to and including until.
	clk.Advance(time.Hour)
	_, _ = c.Get("k", f.fetch)
	require.Equal(t, int64(1), f.calls.Load())
	clk.Advance(time.Nanosecond)
	_, _ = c.Get("k", f.fetch)
	require.Equal(t, int64(2), f.calls.Load())

	// A clock that goes back before the fetch does not use the entry.
	clk.Advance(-time.Minute)
	_, _ = c.Get("k", f.fetch)
	require.Equal(t, int64(3), f.calls.Load())
}

func TestCacheDoesNotKeepOutOfDateValues(t *testing.T) {
	t.Parallel()
	clk := &clock{now: t0}
	c := NewCache[string](Options{Now: clk.Now})
	f := &counter{answer: func(now time.Time) (string, time.Time, error) { return "old", now.Add(-time.Second), nil }}
	for i := range 3 {
		v, err := c.Get("k", f.fetch)
		require.NoError(t, err)
		require.Equal(t, "old", v, "the caller sees the value and decides")
		require.Equal(t, int64(i+1), f.calls.Load(), "not kept")
	}
}

func TestCacheRemembersNegativeAnswers(t *testing.T) {
	t.Parallel()
	clk := &clock{now: t0}
	c := NewCache[string](Options{Now: clk.Now})
	f := &counter{answer: func(time.Time) (string, time.Time, error) { return "", time.Time{}, errNotFound }}

	for range 5 {
		_, err := c.Get("unknown", f.fetch)
		require.ErrorIs(t, err, errNotFound)
	}
	require.Equal(t, int64(1), f.calls.Load(), "remembered")

	clk.Advance(DefaultNegativeTTL - time.Nanosecond)
	_, _ = c.Get("unknown", f.fetch)
	require.Equal(t, int64(1), f.calls.Load())
	clk.Advance(time.Nanosecond)
	_, err := c.Get("unknown", f.fetch)
	require.ErrorIs(t, err, errNotFound)
	require.Equal(t, int64(2), f.calls.Load(), "forgotten after the negative TTL")

	// The key is published: once the answer is forgotten it is found.
	f.answer = func(now time.Time) (string, time.Time, error) { return "v", now.Add(time.Hour), nil }
	clk.Advance(DefaultNegativeTTL)
	v, err := c.Get("unknown", f.fetch)
	require.NoError(t, err)
	require.Equal(t, "v", v)
}

func TestCacheNeverRemembersUnavailability(t *testing.T) {
	t.Parallel()
	clk := &clock{now: t0}
	c := NewCache[string](Options{Now: clk.Now})
	f := &counter{answer: func(time.Time) (string, time.Time, error) { return "", time.Time{}, errDown }}
	for i := range 3 {
		_, err := c.Get("k", f.fetch)
		require.ErrorIs(t, err, providers.ErrUnavailable)
		require.Equal(t, int64(i+1), f.calls.Load())
	}
	_, err := c.Get("k", func(time.Time) (string, time.Time, error) { return "", time.Time{}, ErrRateLimited })
	require.ErrorIs(t, err, providers.ErrUnavailable)

	// Recovery is seen at once.
	f.answer = func(now time.Time) (string, time.Time, error) { return "v", now.Add(time.Hour), nil }
	v, err := c.Get("k", f.fetch)
	require.NoError(t, err)
	require.Equal(t, "v", v)
	require.Empty(t, c.misses)
}

func TestCacheBounded(t *testing.T) {
	t.Parallel()
	clk := &clock{now: t0}
	c := NewCache[string](Options{Now: clk.Now, MaxEntries: 4, MaxMisses: 8})
	for i := range 100 {
		until := t0.Add(time.Duration(i+1) * time.Minute)
		_, err := c.Get("ok"+strconv.Itoa(i), func(time.Time) (string, time.Time, error) { return "v", until, nil })
		require.NoError(t, err)
		_, err = c.Get("bad"+strconv.Itoa(i), func(time.Time) (string, time.Time, error) { return "", time.Time{}, errNotFound })
		require.ErrorIs(t, err, errNotFound)
		require.LessOrEqual(t, len(c.entries), 4)
		require.LessOrEqual(t, len(c.misses), 8)
	}
	// When full, the entry going out of date first and the oldest negative
	// answer make room: the latest ones stay.
	for i := 96; i < 100; i++ {
		require.Contains(t, c.entries, "ok"+strconv.Itoa(i))
	}
	require.Contains(t, c.misses, "bad99")
}

func TestCacheCoalesces(t *testing.T) {
	t.Parallel()
	for _, answer := range []error{nil, errNotFound, errDown} {
		t.Run(fmt.Sprint(answer), func(t *testing.T) {
			t.Parallel()
			c := NewCache[string](Options{Now: func() time.Time { return t0 }})
			release := make(chan struct{})
			var calls atomic.Int64
			fetch := func(now time.Time) (string, time.Time, error) {
				calls.Add(1)
				<-release
				return "v", now.Add(time.Hour), answer
			}
			const n = 200
			var started, done sync.WaitGroup
			errs := make([]error, n)
			for i := range n {
				started.Add(1)
				done.Add(1)
				go func() {
					defer done.Done()
					started.Done()
					_, errs[i] = c.Get("k", fetch)
				}()
			}
			started.Wait()
			time.Sleep(20 * time.Millisecond) // let the callers reach Get
			close(release)
			done.Wait()
			for _, err := range errs {
				if answer == nil {
					require.NoError(t, err)
				} else {
					require.ErrorIs(t, err, answer)
				}
			}
			if answer == errDown {
				// Not remembered: a caller arriving after the flight
				// fetches again, but never more than one at a time.
				require.GreaterOrEqual(t, calls.Load(), int64(1))
				return
			}
			require.Equal(t, int64(1), calls.Load(), "one fetch for all")
		})
	}
}

// fakeTime is a Limiter clock: sleeping advances it.
type fakeTime struct {
	mu     sync.Mutex
	now    time.Time
	slept  []time.Duration
	cancel bool
}

func (f *fakeTime) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeTime) advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
}

func (f *fakeTime) sleep(ctx context.Context, d time.Duration) error {
	f.mu.Lock()
	f.slept = append(f.slept, d)
	f.mu.Unlock()
	return nil
}

func newFakeLimiter(rate float64, burst int, maxWait time.Duration) (*Limiter, *fakeTime) {
	ft := &fakeTime{now: t0}
	l := NewLimiter(rate, burst, maxWait)
	l.now, l.sleep = ft.Now, ft.sleep
	return l, ft
}

func TestLimiterBurstThenRate(t *testing.T) {
	t.Parallel()
	l, ft := newFakeLimiter(10, 20, 0)
	ctx := context.Background()
	for i := range 20 {
		require.NoError(t, l.Wait(ctx), "burst %d", i)
	}
	err := l.Wait(ctx)
	require.ErrorIs(t, err, ErrRateLimited)
	require.ErrorIs(t, err, providers.ErrUnavailable)

	// 10 a second: one more every 100ms, and no saving up beyond the burst.
	ft.advance(100 * time.Millisecond)
	require.NoError(t, l.Wait(ctx))
	require.ErrorIs(t, l.Wait(ctx), ErrRateLimited)
	ft.advance(time.Hour)
	for range 20 {
		require.NoError(t, l.Wait(ctx))
	}
	require.ErrorIs(t, l.Wait(ctx), ErrRateLimited)
	require.Empty(t, ft.slept, "maxWait 0 never waits")
}

func TestLimiterWaitsAtMostMaxWait(t *testing.T) {
	t.Parallel()
	l, ft := newFakeLimiter(10, 2, time.Second)
	ctx := context.Background()
	require.NoError(t, l.Wait(ctx))
	require.NoError(t, l.Wait(ctx))
	// The next ten are promised a turn within a second, 100ms apart.
	for range 10 {
		require.NoError(t, l.Wait(ctx))
	}
	require.Len(t, ft.slept, 10)
	for i, d := range ft.slept {
		require.InDelta(t, float64(time.Duration(i+1)*100*time.Millisecond), float64(d), float64(time.Millisecond))
	}
	// The eleventh would wait 1.1s: refused, and it takes nothing.
	require.ErrorIs(t, l.Wait(ctx), ErrRateLimited)
	require.ErrorIs(t, l.Wait(ctx), ErrRateLimited)
	ft.advance(100 * time.Millisecond)
	require.NoError(t, l.Wait(ctx))
	require.Equal(t, time.Second, ft.slept[len(ft.slept)-1].Round(time.Millisecond))
}

func TestLimiterRealClock(t *testing.T) {
	t.Parallel()
	l := NewLimiter(50, 1, 200*time.Millisecond)
	ctx := context.Background()
	start := time.Now()
	for range 5 {
		require.NoError(t, l.Wait(ctx))
	}
	// One at once, then four 20ms apart.
	require.GreaterOrEqual(t, time.Since(start), 70*time.Millisecond)

	// A cancelled wait is a rate-limit error carrying the cause (a slow
	// limiter, so that no token comes back while the test runs).
	slow := NewLimiter(1, 1, 2*time.Second)
	require.NoError(t, slow.Wait(ctx))
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	err := slow.Wait(cctx)
	require.ErrorIs(t, err, ErrRateLimited)
	require.ErrorIs(t, err, context.Canceled)
}

// TestLimiterBoundsConcurrentFetches: whatever the number of callers, the
// fetches made are within burst + rate*(elapsed+maxWait).
func TestLimiterBoundsConcurrentFetches(t *testing.T) {
	t.Parallel()
	l := NewLimiter(20, 5, 100*time.Millisecond)
	var allowed atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range 500 {
		wg.Go(func() {
			if l.Wait(context.Background()) == nil {
				allowed.Add(1)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	bound := 5 + 20*(elapsed+100*time.Millisecond).Seconds()
	require.LessOrEqual(t, float64(allowed.Load()), bound)
	require.GreaterOrEqual(t, allowed.Load(), int64(5))
}

func TestTransient(t *testing.T) {
	t.Parallel()
	for code, want := range map[int]bool{200: false, 302: false, 400: false, 401: false, 403: false, 404: false,
		408: true, 429: true, 500: true, 502: true, 503: true, 504: true} {
		require.Equal(t, want, Transient(code), code)
	}
}
