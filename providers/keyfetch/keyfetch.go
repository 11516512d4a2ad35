// Package keyfetch bounds what unauthenticated deliveries can make an adapter
// fetch. Some schemes are checked with a key or certificate that the delivery
// itself names (PayPal's PAYPAL-CERT-URL, the kid of Plaid's JWT) and that the
// adapter fetches from the provider. The delivery is not authenticated until
// that key is known, so anyone can name any key; this package keeps the cost
// of that bounded:
//
//   - A Cache remembers fetched keys for as long as the adapter says (a
//     PayPal certificate until its NotAfter, a Plaid key for an hour), and
//     remembers answers that a key does not exist or is unusable for
//     DefaultNegativeTTL, so naming the same unknown key again costs no
//     fetch. At most DefaultMaxMisses such answers are kept.
//   - Concurrent lookups of one key share one fetch (singleflight).
//   - A Limiter is a token bucket on an adapter's outbound requests:
//     DefaultRate a second with bursts of DefaultBurst. A request whose turn
//     is more than DefaultMaxWait away is not made: the lookup fails with
//     ErrRateLimited, which wraps providers.ErrUnavailable, so the delivery is
//     answered 503 and the sender retries.
//   - Certs puts both together for the schemes whose delivery names an X.509
//     certificate by URL (PayPal, SNS): fetched without following
//     redirects, read up to a size, kept until its NotAfter, its RSA key
//     answered only while the certificate is current.
//
// Failures that say nothing about the key (errors wrapping
// providers.ErrUnavailable: a network error, a timeout, a 408, 429 or 5xx
// answer, the rate limit) are never remembered: the next lookup tries again,
// within the rate limit.
package keyfetch

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/hookline/hookline/providers"
)

// Defaults of an adapter's Cache and Limiter.
const (
	// DefaultRate is the sustained number of outbound fetches a second.
	DefaultRate = 10
	// DefaultBurst is how many fetches may be made at once after a quiet spell.
	DefaultBurst = 20
	// DefaultMaxWait is the longest a fetch waits for its turn; a fetch whose
	// turn is further away is refused with ErrRateLimited.
	DefaultMaxWait = time.Second
	// DefaultNegativeTTL is how long an answer that a key does not exist or
	// is unusable is remembered.
	DefaultNegativeTTL = 2 * time.Minute
	// DefaultMaxEntries bounds the keys a Cache keeps.
	DefaultMaxEntries = 64
	// DefaultMaxMisses bounds the negative answers a Cache keeps.
	DefaultMaxMisses = 1024
)

// ErrRateLimited is the error of a fetch refused by a Limiter. It wraps
// providers.ErrUnavailable: it says nothing about the delivery.
var ErrRateLimited = fmt.Errorf("%w: too many key fetches, retry later", providers.ErrUnavailable)

// Transient reports whether an HTTP answer with status code says the provider
// cannot answer now (408, 429, 5xx), as opposed to an answer about the key.
// A lookup answered so must fail with an error wrapping
// providers.ErrUnavailable.
func Transient(code int) bool {
	return code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500
}

// Options configure a Cache. Zero fields take the defaults.
type Options struct {
	// MaxEntries bounds the keys kept. Default DefaultMaxEntries.
	MaxEntries int
	// MaxMisses bounds the negative answers kept. Default DefaultMaxMisses.
	MaxMisses int
	// NegativeTTL is how long a negative answer is kept. Default
	// DefaultNegativeTTL.
	NegativeTTL time.Duration
	// Now is the clock entries are dated with (the adapter's clock). Default
	// time.Now.
	Now func() time.Time
}

// entry is a fetched value, usable while fetched <= now <= until.
type entry[V any] struct {
	value          V
	fetched, until time.Time
}

// miss is a negative answer, remembered while at <= now < at+ttl.
type miss struct {
	err error
	at  time.Time
}

// Cache remembers the outcome of key lookups. Its zero value is not usable:
// build one with NewCache.
//
// Invariants: a key is in at most one of entries and misses; len(entries) <=
// MaxEntries and len(misses) <= MaxMisses; no error wrapping
// providers.ErrUnavailable is ever in misses; at most one fetch of a key runs
// at a time.
type Cache[V any] struct {
	opts  Options
	group singleflight.Group

	mu      sync.Mutex
	entries map[string]entry[V]
	misses  map[string]miss
}

// NewCache returns an empty Cache.
func NewCache[V any](opts Options) *Cache[V] {
	if opts.MaxEntries <= 0 {
		opts.MaxEntries = DefaultMaxEntries
	}
	if opts.MaxMisses <= 0 {
		opts.MaxMisses = DefaultMaxMisses
	}
	if opts.NegativeTTL <= 0 {
		opts.NegativeTTL = DefaultNegativeTTL
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Cache[V]{opts: opts, entries: map[string]entry[V]{}, misses: map[string]miss{}}
}

// Fetcher fetches the value of a key at now. It returns the value and the
// time until which it may be reused, or an error: one wrapping
// providers.ErrUnavailable when the provider could not answer (not
// remembered), any other when the key does not exist or is unusable
// (remembered for the negative TTL).
type Fetcher[V any] func(now time.Time) (value V, until time.Time, err error)

// Get returns the value of key: the remembered one, the remembered negative
// answer, or else what fetch returns. Concurrent Gets of one key that is not
// remembered share one call of fetch. A value whose until is already past is
// returned to the callers of that fetch but not kept: the caller decides what
// an out-of-date value means.
func (c *Cache[V]) Get(key string, fetch Fetcher[V]) (V, error) {
	if v, err, ok := c.lookup(key); ok {
		return v, err
	}
	res, err, _ := c.group.Do(key, func() (any, error) {
		// Looked up again inside the flight: a flight that ended between
		// the lookup above and Do has stored its outcome, and it must not
		// be fetched a second time.
		if v, err, ok := c.lookup(key); ok {
			return v, err
		}
		now := c.opts.Now()
		v, until, err := fetch(now)
		c.store(key, now, v, until, err)
		return v, err
	})
	v, _ := res.(V)
	return v, err
}

// lookup returns the remembered outcome for key; ok is false when there is
// none (or it is out of date).
func (c *Cache[V]) lookup(key string) (v V, err error, ok bool) {
	now := c.opts.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, found := c.entries[key]; found {
		if !now.Before(e.fetched) && !now.After(e.until) {
			return e.value, nil, true
		}
		delete(c.entries, key)
	}
	if m, found := c.misses[key]; found {
		if c.missCurrent(m, now) {
			return v, m.err, true
		}
		delete(c.misses, key)
	}
	return v, nil, false
}

func (c *Cache[V]) missCurrent(m miss, now time.Time) bool {
	return !now.Before(m.at) && now.Before(m.at.Add(c.opts.NegativeTTL))
}

// store records the outcome of a fetch made at now.
func (c *Cache[V]) store(key string, now time.Time, v V, until time.Time, err error) {
	if errors.Is(err, providers.ErrUnavailable) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, key)
	delete(c.misses, key)
	if err != nil {
		if len(c.misses) >= c.opts.MaxMisses {
			c.evictMiss(now)
		}
		c.misses[key] = miss{err: err, at: now}
		return
	}
	if now.After(until) {
		return
	}
	if len(c.entries) >= c.opts.MaxEntries {
		c.evictEntry(now)
	}
	c.entries[key] = entry[V]{value: v, fetched: now, until: until}
}

// evictEntry drops the entries out of date at now and, if none was, the one
// that goes out of date first. c.mu is held.
func (c *Cache[V]) evictEntry(now time.Time) {
	var first string
	found := false
	for k, e := range c.entries {
		if now.Before(e.fetched) || now.After(e.until) {
			delete(c.entries, k)
		} else if !found || e.until.Before(c.entries[first].until) {
			first, found = k, true
		}
	}
	if len(c.entries) >= c.opts.MaxEntries && found {
		delete(c.entries, first)
	}
}

// evictMiss drops the negative answers out of date at now and, if none was,
// the oldest. c.mu is held.
func (c *Cache[V]) evictMiss(now time.Time) {
	var oldest string
	found := false
	for k, m := range c.misses {
		if !c.missCurrent(m, now) {
			delete(c.misses, k)
		} else if !found || m.at.Before(c.misses[oldest].at) {
			oldest, found = k, true
		}
	}
	if len(c.misses) >= c.opts.MaxMisses && found {
		delete(c.misses, oldest)
	}
}

// Limiter is a token bucket on outbound fetches: rate tokens a second, at
// most burst saved up. A fetch takes one token, waiting for it when the bucket
// is empty, but never longer than maxWait: a fetch whose turn is further away
// is refused at once. So at most burst + rate*(t+maxWait) fetches are made in
// any t, and at most rate*maxWait callers wait at any time.
//
// The Limiter runs on the real (monotonic) clock, not an adapter's clock: it
// bounds real traffic.
type Limiter struct {
	rate    float64 // tokens a second, > 0
	burst   float64 // >= 1
	maxWait time.Duration

	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error

	mu     sync.Mutex
	tokens float64 // may be negative: tokens promised to waiting callers
	last   time.Time
	primed bool
}

// NewLimiter returns a Limiter allowing perSecond fetches a second with
// bursts of burst, each waiting at most maxWait for its turn. Values <= 0
// take DefaultRate, DefaultBurst; a negative maxWait means no waiting.
func NewLimiter(perSecond float64, burst int, maxWait time.Duration) *Limiter {
	if perSecond <= 0 {
		perSecond = DefaultRate
	}
	if burst <= 0 {
		burst = DefaultBurst
	}
	return &Limiter{rate: perSecond, burst: float64(burst), maxWait: max(maxWait, 0), now: time.Now, sleep: sleep}
}

// NewDefaultLimiter returns a Limiter with DefaultRate, DefaultBurst and
// DefaultMaxWait.
func NewDefaultLimiter() *Limiter {
	return NewLimiter(DefaultRate, DefaultBurst, DefaultMaxWait)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// reserve takes a token and says how long to wait for it; ok is false (and
// nothing is taken) when that is longer than maxWait.
func (l *Limiter) reserve() (wait time.Duration, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if !l.primed {
		l.tokens, l.last, l.primed = l.burst, now, true
	}
	if d := now.Sub(l.last); d > 0 {
		l.tokens = min(l.burst, l.tokens+d.Seconds()*l.rate)
		l.last = now
	}
	if l.tokens >= 1 {
		l.tokens--
		return 0, true
	}
	wait = time.Duration((1 - l.tokens) / l.rate * float64(time.Second))
	if wait > l.maxWait {
		return wait, false
	}
	l.tokens--
	return wait, true
}

// Wait returns nil when a fetch may be made now, after waiting for its turn
// if need be. It returns ErrRateLimited when the turn is more than maxWait
// away, and an error wrapping both ErrRateLimited and ctx's error when ctx
// ends first (the token stays taken).
func (l *Limiter) Wait(ctx context.Context) error {
	wait, ok := l.reserve()
	if !ok {
		return ErrRateLimited
	}
	if wait <= 0 {
		return nil
	}
	if err := l.sleep(ctx, wait); err != nil {
		return fmt.Errorf("%w: %w", ErrRateLimited, err)
	}
	return nil
}
