// Package app assembles a running hookline from a configuration: the
// Postgres pool, migrations, the River client (workers and/or inserts), the
// ingest and admin HTTP servers, metrics and logging, and a graceful
// shutdown. cmd/hookline, the benchmark and the chaos harness use it.
//
// Internal: no stability promise.
package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"

	"github.com/hookline/hookline/admin"
	"github.com/hookline/hookline/ingest"
	"github.com/hookline/hookline/internal/alert"
	"github.com/hookline/hookline/internal/config"
	"github.com/hookline/hookline/internal/metrics"
	"github.com/hookline/hookline/internal/pacing"
	"github.com/hookline/hookline/internal/reconcile"
	"github.com/hookline/hookline/internal/tracing"
	"github.com/hookline/hookline/jobs"
	"github.com/hookline/hookline/migrations"
)

// Role selects what a process runs.
type Role string

// Roles (--role).
const (
	RoleAll    Role = "all"
	RoleIngest Role = "ingest"
	RoleWorker Role = "worker"
)

// ParseRole parses --role.
func ParseRole(s string) (Role, error) {
	switch Role(s) {
	case RoleAll, RoleIngest, RoleWorker:
		return Role(s), nil
	case "":
		return RoleAll, nil
	}
	return "", fmt.Errorf("--role %q: want all, ingest or worker", s)
}

// Options tune New beyond the configuration file.
type Options struct {
	Role      Role
	NoMigrate bool
	Logger    *slog.Logger
	// Handlers are Go handlers by source name (transactional mode); a
	// source with a handler does not use its destination.
	Handlers map[string]jobs.Handler
	// Mount adds routes to the ingest router (hookline dev's demo sink).
	Mount func(s *ingest.Server)
	// CleanupInterval overrides the periodic clean-up interval (tests).
	CleanupInterval time.Duration
}

// App is a configured hookline process.
type App struct {
	Config *config.Config
	Pool   *pgxpool.Pool
	River  *river.Client[pgx.Tx]
	Ingest *ingest.Server
	// Registry holds every metric this process serves on /metrics.
	Registry *prometheus.Registry
	Log      *slog.Logger

	opts        Options
	queues      []string          // the event queues of the configured destinations
	queueBounds []time.Duration   // per queue, how long its events may wait (jobs.EventQueueBounds)
	instance    *jobs.Instance    // this instance's record, while it runs
	reconciler  *reconcile.Runner // nil: no source reconciles
	pacer       *pacing.Pacer     // nil: ingest is not paced (ingest.pace, --role all only)
	paced       sync.WaitGroup    // the pacer's measures, while they run
	admin       *echo.Echo        // separate admin router when admin_listen is set
	stopUI      context.CancelFunc
	stopping    chan struct{} // closed when shutdown begins: chains end (jobs.ClientConfig.Stopping)
	migratedAt  atomic.Int64  // when the schema was last found current (unix ns); 0: not yet
	tracing     *tracing.Provider
	servers     []*http.Server
	addrs       []net.Addr
	mu          sync.Mutex
}

// NewPool opens the Postgres pool described by cfg. A database_url without
// connect_timeout connects within defaultConnectTimeout; one that sets it
// is honoured. Requests are bounded by their own deadlines either way (an
// outage answers 503 within the ingest commit bound).
func NewPool(ctx context.Context, cfg *config.Config) (*pgxpool.Pool, error) {
	pc, err := poolConfig(cfg)
	if err != nil {
		return nil, err
	}
	pc.MaxConns = int32(cfg.Database.MaxConns)
	if pc.ConnConfig.ConnectTimeout == 0 {
		pc.ConnConfig.ConnectTimeout = defaultConnectTimeout
	}
	pc.HealthCheckPeriod = 5 * time.Second
	// The pool pings only connections idle for over a second; one used more
	// recently whose session the server has since ended is found so here,
	// without a round trip, and replaced instead of failing its first query.
	pc.PrepareConn = func(ctx context.Context, c *pgx.Conn) (bool, error) {
		return !sessionEnded(ctx, c.PgConn()), nil
	}
	return pgxpool.NewWithConfig(ctx, pc)
}

// poolConfig parses database_url; its errors are configuration errors
// naming the field (pgx's message hides the URL's password).
func poolConfig(cfg *config.Config) (*pgxpool.Config, error) {
	if cfg.DatabaseURL == "" {
		return nil, config.Invalid("database_url", "required: set it in the config (e.g. database_url: \"${DATABASE_URL}\") and export DATABASE_URL")
	}
	pc, err := pgxpool.ParseConfig(cfg.DatabaseURL)
	if err != nil {
		return nil, config.Invalid("database_url", "%v (want postgres://user:password@host:5432/dbname, or key=value pairs)", err)
	}
	return pc, nil
}

// Check reports what would stop New from serving cfg with opts, before
// anything connects: database_url missing or unreadable, a listen address
// that is not host:port, a destination with neither a URL nor a Go handler
// registered in opts. Its errors name the field and wrap
// config.ErrInvalid, as validation's do (hookline check runs it too).
func Check(cfg *config.Config, opts Options) error {
	if _, err := poolConfig(cfg); err != nil {
		return err
	}
	for _, l := range []struct{ path, addr string }{{"listen", cfg.Listen}, {"admin_listen", cfg.AdminListen}} {
		if l.addr == "" {
			continue
		}
		_, port, err := net.SplitHostPort(l.addr)
		if err != nil {
			return config.Invalid(l.path, "%q: want host:port (e.g. 0.0.0.0:8080, or :8080 for every interface)", l.addr)
		}
		if _, err := net.LookupPort("tcp", port); err != nil {
			return config.Invalid(l.path, "%q: the port must be a number from 0 to 65535 (e.g. 0.0.0.0:8080)", l.addr)
		}
	}
	if cfg.TLSCert != "" {
		if _, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey); err != nil {
			return config.Invalid("tls_cert", "with tls_key: %v", err)
		}
	}
	a := &App{Config: cfg, opts: opts}
	for _, s := range cfg.Sources {
		for _, d := range s.Destinations {
			if _, err := a.target(s, d); err != nil {
				return err
			}
		}
	}
	return nil
}

// defaultConnectTimeout bounds a new connection when database_url does not
// say: long enough for a busy Postgres to fork a backend (a shorter bound
// stalls River's leader election and retry bookkeeping under load), short
// enough that a host that drops packets is noticed.
const defaultConnectTimeout = 10 * time.Second

// New connects, migrates (unless NoMigrate) and builds everything; Run starts it.
func New(ctx context.Context, cfg *config.Config, opts Options) (*App, error) {
	if opts.Role == "" {
		opts.Role = RoleAll
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if err := Check(cfg, opts); err != nil {
		return nil, err
	}
	a := &App{Config: cfg, Registry: metrics.NewRegistry(), Log: opts.Logger, opts: opts, stopping: make(chan struct{})}
	pool, err := NewPool(ctx, cfg)
	if err != nil {
		return nil, err
	}
	a.Pool = pool
	if err := a.build(ctx); err != nil {
		if a.stopUI != nil {
			a.stopUI()
		}
		if a.tracing != nil {
			_ = a.tracing.Shutdown(ctx)
		}
		pool.Close()
		return nil, err
	}
	return a, nil
}

// build migrates and assembles the parts on a.Pool.
func (a *App) build(ctx context.Context) error {
	if !a.opts.NoMigrate {
		if err := a.migrate(ctx); err != nil {
			return err
		}
	} else if a.opts.Role != RoleIngest {
		// Workers need River's tables at start; say what to do rather than
		// River's "relation does not exist".
		st, err := migrations.Check(ctx, a.Pool)
		if err != nil {
			return fmt.Errorf("check migrations: %w", err)
		}
		if !st.Current() {
			return fmt.Errorf("%w (or start without --no-migrate)", errNotMigrated)
		}
	}
	inSources, jobSources, err := a.sources()
	if err != nil {
		return err
	}
	a.queues, a.queueBounds = jobs.EventQueues(jobSources), jobs.EventQueueBounds(jobSources)
	cfg, opts := a.Config, a.opts
	metricsOnAdmin := cfg.MetricsOnAdmin && cfg.AdminListen != ""
	a.tracing, err = tracing.New(tracing.Config{Endpoint: cfg.Tracing.OTLPEndpoint, SampleRatio: *cfg.Tracing.SampleRatio, ServiceName: cfg.Tracing.ServiceName})
	if err != nil {
		return fmt.Errorf("tracing: %w", err)
	}
	var alerts jobs.Alerter
	if len(cfg.Alerts) > 0 {
		rules := make([]alert.Rule, len(cfg.Alerts))
		for i, r := range cfg.Alerts {
			rules[i] = r.Rule()
		}
		alerts = alert.New(a.Pool, rules, nil, opts.Logger)
	}
	// Ingest paces itself to the workers only where both share the cores.
	var backlog *jobs.Backlog
	var pace ingest.Pacer
	if opts.Role == RoleAll && cfg.PaceEnabled() {
		backlog = jobs.NewBacklog(a.Pool, jobSources)
		gauge := metrics.For(a.Registry).PaceDelay
		a.pacer = pacing.New(pacing.Config{Measure: backlog.Lag, Lag: cfg.Ingest.PaceLag.D(), MaxDelay: cfg.Ingest.PaceMaxDelay.D(),
			Observe: func(d time.Duration) { gauge.Set(d.Seconds()) }, Logger: opts.Logger})
		pace = a.pacer
	}
	a.River, err = jobs.NewClient(jobs.ClientConfig{
		Pool: a.Pool, Sources: jobSources, Workers: cfg.Workers, InsertOnly: opts.Role == RoleIngest,
		DeliveryRetention: cfg.Retention.Deliveries.D(), CleanupInterval: opts.CleanupInterval,
		Registerer: a.Registry, Logger: opts.Logger, Alerts: alerts, Tracer: a.tracing.Tracer(),
		PerEvent: !cfg.ProcessingBatchEnabled(), Stopping: a.stopping, Backlog: backlog,
	})
	if err != nil {
		return err
	}
	a.Ingest, err = ingest.New(ingest.Config{
		Pool: a.Pool, River: a.River, Sources: inSources, MaxBodyBytes: cfg.MaxBodyBytes,
		Batch: cfg.BatchEnabled(), BatchSize: cfg.Ingest.BatchSize, BatchWait: cfg.Ingest.BatchWait.D(),
		QueueTimeout: cfg.Ingest.QueueTimeout.D(), MaxPendingBytes: cfg.Ingest.MaxPendingBytes,
		BodyTimeout: cfg.Ingest.BodyTimeout.D(), Pace: pace,
		IngestRoutes: opts.Role != RoleWorker, NoMetricsRoute: metricsOnAdmin,
		Registry: a.Registry, Logger: opts.Logger, Ready: a.ready, Tracer: a.tracing.Tracer(),
	})
	if err != nil {
		return err
	}
	if opts.Mount != nil {
		opts.Mount(a.Ingest)
	}
	if err := a.buildReconciler(); err != nil {
		return err
	}
	// The collectors that query the database run one set at a time and are
	// reused for a few seconds: /metrics is unauthenticated.
	a.Registry.MustRegister(metrics.NewDatabaseCollector(jobs.Stats{Pool: a.Pool, Destinations: a.destinationNames()}, opts.Logger, metrics.DatabaseTTL))
	return a.mountAdmin(metricsOnAdmin)
}

// sources turns the configured sources into ingest's and the workers'.
func (a *App) sources() ([]*ingest.Source, []*jobs.Source, error) {
	var inSources []*ingest.Source
	var jobSources []*jobs.Source
	for _, s := range a.Config.Sources {
		id, typ := s.KeyResolvers()
		onDup := ingest.OnDuplicateSkip
		if s.OnDuplicate == "reject" {
			onDup = ingest.OnDuplicateReject
		}
		in := &ingest.Source{Name: s.Name, Provider: s.Adapter(), EventID: id, EventType: typ,
			EventIDName: s.EventID, EventTypeName: s.EventType, DedupWindow: s.DedupWindow.D(),
			OnDuplicate: onDup, MaxConcurrency: s.MaxConcurrency}
		js := &jobs.Source{Name: s.Name, Reject: onDup == ingest.OnDuplicateReject, Lease: s.Lease.D(), DedupWindow: s.DedupWindow.D()}
		if o := s.Ordering; o != nil {
			key, by := o.Resolvers()
			in.Ordering = &ingest.Ordering{Key: key, By: by, KeyName: o.Key}
			js.StaleSkip = o.Stale == "skip"
		}
		for _, d := range s.Destinations {
			in.Destinations = append(in.Destinations, ingest.Destination{Name: d.Name, Match: d.Matcher().Match, MaxAttempts: d.MaxAttempts})
			t, err := a.target(s, d)
			if err != nil {
				return nil, nil, err
			}
			js.Targets = append(js.Targets, t)
		}
		inSources = append(inSources, in)
		jobSources = append(jobSources, js)
	}
	return inSources, jobSources, nil
}

// target is a configured destination as the workers see it. Its Go handler
// is registered under its handler name, or, for a source's single
// destination, under the source's name.
func (a *App) target(s *config.Source, d *config.Destination) (*jobs.Target, error) {
	t := &jobs.Target{Name: d.Name, MaxAttempts: d.MaxAttempts, BackoffMin: d.Backoff.Min.D(), BackoffMax: d.Backoff.Max.D(),
		RateLimit: d.Rate(), MaxInFlight: d.MaxInFlight}
	if d.Circuit != nil {
		t.Circuit = &jobs.Circuit{Failures: d.Circuit.Failures, CoolDown: d.Circuit.CoolDown.D()}
	}
	handler := d.Handler
	if handler == "" && d.URL == "" {
		handler = s.Name
	}
	switch {
	case d.URL != "":
		t.HTTP = &jobs.Destination{URL: d.URL, Timeout: d.Timeout.D(), Secret: d.Secret}
	case a.opts.Handlers[handler] != nil:
		t.Handler = a.opts.Handlers[handler]
	case a.opts.Role == RoleIngest:
		// Ingest routes to it; a worker will need the handler.
		t.HTTP = &jobs.Destination{}
	case d.Handler != "":
		return nil, config.Invalid(d.Path()+".handler", "no Go handler is registered as %q", d.Handler)
	default:
		return nil, config.Invalid(d.Path()+".url", "required (or register a Go handler for source %q)", s.Name)
	}
	return t, nil
}

// destinationNames are every configured destination.
func (a *App) destinationNames() []jobs.DestinationName {
	var names []jobs.DestinationName
	for _, s := range a.Config.Sources {
		for _, d := range s.Destinations {
			names = append(names, jobs.DestinationName{Source: s.Name, Name: d.Name})
		}
	}
	return names
}

// mountAdmin mounts the admin API: on the ingest listener, or on
// admin_listen so it need not face the internet (with /metrics, if
// metricsOnAdmin).
func (a *App) mountAdmin(metricsOnAdmin bool) error {
	cfg := a.Config
	adminRouter := a.Ingest.Echo()
	if cfg.AdminListen != "" {
		a.admin = echo.New()
		a.admin.HideBanner, a.admin.HidePort = true, true
		adminRouter = a.admin
		if metricsOnAdmin {
			a.admin.GET("/metrics", a.Ingest.MetricsHandler())
		}
	}
	uiCtx, stopUI := context.WithCancel(context.Background())
	a.stopUI = stopUI
	maxAttempts := map[[2]string]int{}
	for _, s := range cfg.Sources {
		for _, d := range s.Destinations {
			maxAttempts[[2]string{s.Name, d.Name}] = d.MaxAttempts
		}
	}
	names := a.destinationNames()
	return admin.Mount(adminRouter, admin.Config{
		Token: cfg.AdminToken, Pool: a.Pool, River: a.River, Logger: a.opts.Logger, Context: uiCtx, Destinations: names,
		MaxAttempts: func(source, destination string) (int, bool) {
			n, ok := maxAttempts[[2]string{source, destination}]
			return n, ok
		},
		Reconcile: a.reconcileNow,
	})
}

func (a *App) migrate(ctx context.Context) error {
	err := migrations.Up(ctx, a.Pool, func(format string, args ...any) { a.Log.Info(fmt.Sprintf(format, args...)) })
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	a.migratedAt.Store(time.Now().UnixNano())
	return nil
}

// migrationRecheck is how long /readyz trusts its last look at the schema:
// a database migrated down under a running instance turns it unready
// within this time.
const migrationRecheck = 10 * time.Second

// errNotMigrated says what to do about a database behind the binary.
var errNotMigrated = errors.New("database not migrated: run `hookline migrate up`")

// ready: Postgres reachable and migrated.
func (a *App) ready(ctx context.Context) error {
	if err := a.Pool.Ping(ctx); err != nil {
		return fmt.Errorf("postgres unreachable: %w", err)
	}
	if at := a.migratedAt.Load(); at != 0 && time.Since(time.Unix(0, at)) < migrationRecheck {
		return nil
	}
	st, err := migrations.Check(ctx, a.Pool)
	if err != nil {
		return err
	}
	if !st.Current() {
		a.migratedAt.Store(0)
		return errNotMigrated
	}
	a.migratedAt.Store(time.Now().UnixNano())
	return nil
}

// Addrs returns the listening addresses once Run has started listening.
func (a *App) Addrs() []net.Addr {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]net.Addr(nil), a.addrs...)
}

func (a *App) newServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(a.Log.Handler(), slog.LevelWarn),
	}
}

// Run listens, starts the workers and blocks until ctx is cancelled; then it
// stops accepting, finishes in-flight requests and jobs within
// shutdown_timeout, and returns nil. ready, if non-nil, is called once
// listening.
func (a *App) Run(ctx context.Context, ready func()) error {
	type listener struct {
		field, addr string
		h           http.Handler
	}
	ls := []listener{{"listen", a.Config.Listen, a.Ingest}}
	if a.admin != nil {
		ls = append(ls, listener{"admin_listen", a.Config.AdminListen, a.admin})
	}
	var tlsCfg *tls.Config
	if a.Config.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(a.Config.TLSCert, a.Config.TLSKey)
		if err != nil {
			return fmt.Errorf("tls_cert/tls_key: %w", err)
		}
		tlsCfg = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	var nls []net.Listener
	for _, l := range ls {
		nl, err := net.Listen("tcp", l.addr)
		if err != nil {
			for _, o := range nls {
				o.Close()
			}
			return fmt.Errorf("%s %s: %w", l.field, l.addr, err)
		}
		if tlsCfg != nil {
			nl = tls.NewListener(nl, tlsCfg)
		}
		nls = append(nls, nl)
		srv := a.newServer(l.h)
		a.mu.Lock()
		a.servers = append(a.servers, srv)
		a.addrs = append(a.addrs, nl.Addr())
		a.mu.Unlock()
	}
	closeAll := func() {
		for _, nl := range nls {
			nl.Close()
		}
	}
	// Recorded before any event is accepted: other instances then know
	// that this one configures its sources' queues (jobs/orphans.go).
	var runs []string
	if a.opts.Role != RoleIngest {
		runs = a.queues
	}
	instance, err := jobs.StartInstance(ctx, a.Pool, a.River.ID(), jobs.InstanceQueues{Configures: a.queues, Runs: runs, Bounds: a.queueBounds}, a.Log)
	if err != nil {
		closeAll()
		if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) && pgErr.Code == pgerrcode.UndefinedTable {
			return fmt.Errorf("%w: %v", errNotMigrated, err)
		}
		return err
	}
	a.instance = instance
	if a.opts.Role != RoleIngest {
		// River's work contexts derive from Start's context: cancelling it
		// would cancel running jobs. Shutdown stops River explicitly instead
		// (soft stop first, so running jobs finish).
		if err := a.River.Start(context.WithoutCancel(ctx)); err != nil {
			closeAll()
			a.instance.Stop(context.WithoutCancel(ctx))
			return fmt.Errorf("start workers: %w", err)
		}
	}
	if a.reconciler != nil {
		a.reconciler.Start(ctx) // periodic runs; each instance takes its turn through the database
	}
	if a.pacer != nil {
		pctx, stop := context.WithCancel(ctx)
		a.paced.Go(func() {
			defer stop()
			select { // measures end when the process begins to stop
			case <-a.stopping:
			case <-pctx.Done():
			}
		})
		a.paced.Go(func() { a.pacer.Run(pctx) })
	}
	errc := make(chan error, len(nls))
	for i, nl := range nls {
		srv := a.servers[i]
		go func() {
			if err := srv.Serve(nl); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- err
			}
		}()
		a.Log.Info("listening", "addr", nl.Addr().String(), "role", string(a.opts.Role), "tls", tlsCfg != nil)
	}
	if ready != nil {
		ready()
	}
	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errc:
	}
	a.shutdown()
	return runErr
}

// shutdown drains within shutdown_timeout. At once: HTTP stops taking
// requests (those in flight finish, then the committer), and the workers
// stop fetching (a job started after the signal would not be in flight);
// running jobs finish. Past the deadline less a reserve (a quarter of the
// timeout, at most 5 s), running jobs are cancelled: their attempts are
// recorded as interrupted, not counted, and retried. Whatever still holds
// a database connection at the deadline is not waited for.
func (a *App) shutdown() {
	timeout := a.Config.ShutdownTimeout.D()
	a.Log.Info("shutting down", "timeout", timeout.String())
	close(a.stopping)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	soft, softCancel := context.WithTimeout(ctx, timeout-min(5*time.Second, timeout/4))
	defer softCancel()
	workers := make(chan struct{})
	go func() {
		defer close(workers)
		if a.opts.Role == RoleIngest {
			return
		}
		if err := a.River.Stop(soft); err != nil {
			a.Log.Warn("jobs did not finish in time; cancelling them (their attempts are not counted)", "error", err.Error())
			_ = a.River.StopAndCancel(ctx)
		}
	}()
	var wg sync.WaitGroup
	for _, s := range a.servers {
		wg.Go(func() { _ = s.Shutdown(ctx) })
	}
	wg.Wait()
	a.Ingest.Close()
	<-workers
	a.paced.Wait()
	if a.reconciler != nil {
		a.reconciler.Wait() // Run's context is done: periodic runs stop
	}
	// Nothing is accepted or run here any more: the events of queues only
	// this instance configured are orphans from now on.
	a.instance.Stop(ctx)
	a.stopUI()
	closed := make(chan struct{})
	go func() { a.Pool.Close(); close(closed) }()
	select {
	case <-closed:
	case <-ctx.Done():
		a.Log.Warn("database connections still in use at the shutdown deadline (is Postgres answering?); exiting without them")
	}
	tctx, tcancel := context.WithTimeout(context.Background(), time.Second)
	if d, ok := ctx.Deadline(); ok && time.Until(d) > time.Second {
		tctx, tcancel = ctx, func() {}
	}
	defer tcancel()
	if err := a.tracing.Shutdown(tctx); err != nil {
		a.Log.Warn("spans not exported before shutdown", "error", err.Error())
	}
	a.Log.Info("stopped")
}
