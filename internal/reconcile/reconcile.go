package reconcile

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookline/hookline/internal/defaults"
	"github.com/hookline/hookline/internal/metrics"
)

// Event is one event as the provider's API lists it.
type Event struct {
	ID      string    // the provider's event id
	Type    string    // the event type, as the provider's webhook adapter names it
	Created time.Time // the provider's creation time
	Body    []byte    // the event's JSON exactly as it stands in the API's answer
}

// Store is what a run stores through: hookline's ingest path (implemented
// by package ingest).
type Store interface {
	// Known reports, for each event, whether hookline has ever accepted it
	// (any state), or why it never can (Lookup). The answer has one element
	// per event, in order.
	Known(ctx context.Context, source string, events []Event) ([]Lookup, error)
	// Store stores events, in the order given, as deliveries of origin
	// "reconcile" through the ingest path (dedupe, filters, ordering) and
	// returns how many were stored as new events (a webhook that raced
	// ahead makes one a duplicate, not counted).
	Store(ctx context.Context, source string, events []Event) (stored int, err error)
}

// Lookup is what the Store knows of one event.
type Lookup struct {
	// Accepted: hookline has accepted the event (in any state).
	Accepted bool
	// Refused, when set, is why the event can never be stored: its id or
	// type is refused as a webhook carrying it would be. A run skips it
	// (and logs it) instead of failing on it every time.
	Refused error
}

// SourceConfig is one source's reconcile settings.
type SourceConfig struct {
	Name, Provider string
	// Every is the period of the periodic runs; 0: runs only on demand.
	Every time.Duration
	// Lookback is how far back a run lists; 0: defaults.ReconcileLookback.
	Lookback time.Duration
	// APIKey has read access to the provider's events. It is sent only in
	// the Authorization header to APIURL's host, never logged nor put in
	// an error.
	APIKey string
	// APIURL is the API's base URL; "": DefaultAPIURL(Provider).
	APIURL string
}

// Config configures a Runner.
type Config struct {
	Pool       *pgxpool.Pool
	Store      Store
	Sources    []SourceConfig        // only those with reconcile configured
	Registerer prometheus.Registerer // metrics.For(Registerer); nil: a registry nobody serves
	Logger     *slog.Logger          // nil: slog.Default()
	// HTTPClient calls the providers' APIs; nil: a client with a
	// DefaultTimeout timeout that follows redirects only within a host.
	HTTPClient *http.Client
	// MaxTries bounds the requests for one page (429, 5xx and network
	// errors are retried); 0: DefaultMaxTries.
	MaxTries int
	// Backoff is the first wait before a retry whose answer had no
	// Retry-After; it doubles with each try, capped at MaxWait. 0:
	// DefaultBackoff.
	Backoff time.Duration
}

// Defaults and bounds.
const (
	DefaultMaxTries = 5
	DefaultBackoff  = time.Second
	// MaxWait caps one wait between two tries of a page, Retry-After
	// included.
	MaxWait = 30 * time.Second
	// DefaultTimeout bounds one request of the default HTTP client.
	DefaultTimeout = 30 * time.Second
	// StoreChunk is the number of events per Store call.
	StoreChunk = 100
)

// Errors of Run.
var (
	// ErrNotConfigured: the source has no reconcile settings in Config.Sources.
	ErrNotConfigured = errors.New("reconcile: the source has no reconcile configured; add a reconcile block to it")
	// ErrRunning: a run of the source is in progress, here or on another
	// instance.
	ErrRunning = errors.New("reconcile: a run of this source is in progress (on this or another instance); wait for it to finish")
)

// Result is what one run did.
type Result struct {
	Checked int // events the provider listed within the lookback
	Missing int // events this run stored (hookline had never accepted them)
	Skipped int // events hookline can never store (Lookup.Refused), logged
}

// Runner runs the reconciliations of the configured sources. It is safe
// for concurrent use.
type Runner struct {
	pool    *pgxpool.Pool
	store   Store
	sources map[string]*source
	order   []*source // Config.Sources' order
	counter *prometheus.CounterVec
	logger  *slog.Logger

	startOnce sync.Once
	wg        sync.WaitGroup
}

// source is one configured source with its lister.
type source struct {
	cfg     SourceConfig
	lister  lister
	lockKey int64
	logger  *slog.Logger
}

// lister lists a provider's events.
type lister interface {
	// list calls page with each page of the events created at or after
	// since (a page may also hold older ones: the caller filters), in the
	// provider's order, until the last page, an error, or an error of
	// page.
	list(ctx context.Context, since time.Time, page func([]Event) error) error
}

// newestFirst is a lister whose API lists events newest first, in the
// provider's order even among events of one creation time (Stripe's
// created is in whole seconds): a run stores such ties in reverse listing
// order, the provider's order, rather than by id.
type newestFirst interface {
	newestFirst() bool
}

// New returns a Runner for cfg.Sources, checking each: a provider
// hookline can list, an API key, an http(s) API URL, no negative
// durations, no name twice.
func New(cfg Config) (*Runner, error) {
	if cfg.Pool == nil || cfg.Store == nil {
		return nil, errors.New("reconcile: Config.Pool and Config.Store are required")
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	httpc := cfg.HTTPClient
	if httpc == nil {
		httpc = defaultHTTPClient()
	}
	r := &Runner{pool: cfg.Pool, store: cfg.Store, sources: map[string]*source{},
		counter: metrics.For(cfg.Registerer).Reconciled, logger: logger}
	for _, sc := range cfg.Sources {
		src, err := newSource(sc, cfg, httpc, logger)
		if err != nil {
			return nil, err
		}
		if _, dup := r.sources[sc.Name]; dup {
			return nil, fmt.Errorf("reconcile: source %q is configured twice; give each source one reconcile block", sc.Name)
		}
		r.sources[sc.Name] = src
		r.order = append(r.order, src)
		r.counter.WithLabelValues(sc.Name) // the series exists (at 0) before the first run
	}
	return r, nil
}

// newSource checks sc and builds its lister.
func newSource(sc SourceConfig, cfg Config, httpc *http.Client, logger *slog.Logger) (*source, error) {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("reconcile: source %q: "+format, append([]any{sc.Name}, args...)...)
	}
	def, ok := DefaultAPIURL(sc.Provider)
	switch {
	case sc.Name == "":
		return nil, errors.New("reconcile: a source has no name")
	case !ok:
		return nil, fail("provider %q has no events API hookline can list (supported: %s)", sc.Provider, strings.Join(Providers(), ", "))
	case strings.TrimSpace(sc.APIKey) == "":
		return nil, fail("no API key; set one with read access to the provider's events")
	case sc.Every < 0 || sc.Lookback < 0:
		return nil, fail("every and lookback must not be negative")
	}
	if sc.Lookback == 0 {
		sc.Lookback = defaults.ReconcileLookback
	}
	if sc.APIURL == "" {
		sc.APIURL = def
	}
	base, err := url.Parse(sc.APIURL)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fail("api_url %q: want an http(s) URL", sc.APIURL)
	}
	log := logger.With("source", sc.Name, "provider", sc.Provider)
	c := &client{http: httpc, provider: sc.Provider, apiKey: sc.APIKey, maxTries: cfg.MaxTries, backoff: cfg.Backoff, logger: log}
	if c.maxTries <= 0 {
		c.maxTries = DefaultMaxTries
	}
	if c.backoff <= 0 {
		c.backoff = DefaultBackoff
	}
	src := &source{cfg: sc, lockKey: lockKey(sc.Name), logger: log}
	apiURL := strings.TrimRight(sc.APIURL, "/")
	switch sc.Provider {
	case "stripe":
		c.errMessage = stripeErrorMessage
		src.lister = &stripeLister{c: c, base: apiURL}
	case "gocardless":
		c.errMessage = goCardlessErrorMessage
		c.header = http.Header{"Gocardless-Version": {goCardlessVersion}}
		src.lister = &goCardlessLister{c: c, base: apiURL}
	case "paddle":
		c.errMessage = paddleErrorMessage
		src.lister = &paddleLister{c: c, base: apiURL}
	}
	return src, nil
}

// lockKey is the advisory lock key of source's runs: FNV-1a 64 of
// "hookline:reconcile:"+source, as a bigint.
func lockKey(source string) int64 {
	h := fnv.New64a()
	h.Write([]byte("hookline:reconcile:" + source))
	return int64(h.Sum64()) //nolint:gosec // a lock key: the bits matter, not the sign
}

// defaultHTTPClient times out after DefaultTimeout and follows redirects
// within the first request's host only, so the API key never leaves it.
func defaultHTTPClient() *http.Client {
	return &http.Client{
		Timeout: DefaultTimeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 10 {
				return errors.New("stopped after 10 redirects")
			}
			if req.URL.Host != via[0].URL.Host {
				return fmt.Errorf("redirect to another host (%s) refused: set reconcile.api_url to the API's own URL", req.URL.Host)
			}
			return nil
		},
	}
}

// Run runs one reconciliation of source now, whatever its Every. Errors:
// ErrNotConfigured (source is not in Config.Sources), ErrRunning (a run of
// source is in progress here or on another instance), *ProviderError (the
// provider's API failed; Result holds what the run did before), the
// Store's errors, and the database's.
func (r *Runner) Run(ctx context.Context, source string) (Result, error) {
	src, ok := r.sources[source]
	if !ok {
		return Result{}, ErrNotConfigured
	}
	res, _, err := r.run(ctx, src, false)
	return res, err
}

// Start runs the periodic reconciliations in the background and returns at
// once: one goroutine per source with Every > 0, which runs the source
// whenever its last run (on any instance) started Every ago. They stop
// when ctx ends (a run in progress is cancelled through ctx); Wait returns
// once they all have. Only the first call starts anything.
func (r *Runner) Start(ctx context.Context) {
	r.startOnce.Do(func() {
		for _, src := range r.order {
			if src.cfg.Every <= 0 {
				continue
			}
			r.wg.Add(1)
			go r.loop(ctx, src)
		}
	})
}

// Wait blocks until the goroutines of Start have returned (at once when
// Start was not called).
func (r *Runner) Wait() { r.wg.Wait() }
