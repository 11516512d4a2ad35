// Package ingest is hookline's HTTP front: POST /webhooks/{source} verifies
// the delivery with the source's provider, resolves its event(s), stores the
// raw body and enqueues one River job per event in ONE transaction, and
// answers only after COMMIT: a 2xx means the delivery is durable. It also
// serves /healthz, /readyz and /metrics; package admin mounts the admin API
// on the same router (Server.Echo) or on one of its own.
//
// The data flow, in three files: ingest/server.go (this: HTTP → Delivery),
// ingest/commit.go (Delivery → rows + River job, duplicates resolved), then
// jobs/event_worker.go (job → idempotency claim → destination).
package ingest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/riverqueue/river"
	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/semaphore"

	"github.com/hookline/hookline/internal/defaults"
	"github.com/hookline/hookline/internal/httpjson"
	"github.com/hookline/hookline/internal/metrics"
	"github.com/hookline/hookline/internal/tracing"
	"github.com/hookline/hookline/jobs"
	"github.com/hookline/hookline/providers"
)

// OnDuplicate is what a source does with a duplicate delivery.
type OnDuplicate string

const (
	// OnDuplicateSkip counts and logs the duplicate, answers 2xx, drops it.
	OnDuplicateSkip OnDuplicate = "skip"
	// OnDuplicateReject also writes it to the dead set (reason duplicate).
	OnDuplicateReject OnDuplicate = "reject"
)

// Source is one webhook sender as ingest sees it.
type Source struct {
	// Name is the path segment: POST /webhooks/{Name}.
	Name string
	// Provider verifies and resolves deliveries.
	Provider providers.Provider
	// EventID and EventType override the provider's resolution when set.
	EventID, EventType providers.KeyResolver
	// OnDuplicate defaults to skip.
	OnDuplicate OnDuplicate
	// Destinations are where the source's events go: each new event goes to
	// every destination whose filter it matches, decided here, once. None:
	// one destination, jobs.DefaultDestination, for every event, with
	// MaxAttempts.
	Destinations []Destination
	// MaxAttempts is the single destination's attempt budget per job
	// (default 10), when Destinations is empty.
	MaxAttempts int
	// MaxConcurrency caps concurrent requests for this source; beyond it
	// requests are answered 503. Zero means no cap.
	MaxConcurrency int
	// DedupWindow is how long a delivery's signed content keeps marking a
	// replay under a fresh id as a duplicate (providers.ContentKeyer).
	// Default 720h.
	DedupWindow time.Duration
	// Ordering, when set, lines up the events that share a key, per
	// destination (each forwarded after the previous one ended).
	Ordering *Ordering
	// EventIDName and EventTypeName name the resolvers in 400 answers
	// ("json:id"); empty means the provider's default (its description's,
	// for the id).
	EventIDName, EventTypeName string

	sem        chan struct{}
	dropHeader map[string]bool // never stored: credentials and hop-by-hop headers
	// defaultType is the provider's default type resolver when every event
	// of its scheme has a type (providers.Description.DefaultEventType).
	defaultType string
}

// Destination is one destination of a source, as ingest routes to it.
type Destination struct {
	// Name is unique within the source.
	Name string
	// Match reports whether an event (its type, and its own bytes: a batch
	// item's) goes to this destination; nil: every event.
	Match func(eventType string, body []byte) bool
	// MaxAttempts is the destination's attempt budget per job (default 10).
	MaxAttempts int

	queue string // the destination's River queue
}

// maxAttempts is the budget of the destination named dest.
func (s *Source) maxAttempts(dest string) int {
	for _, d := range s.Destinations {
		if d.Name == dest {
			return d.MaxAttempts
		}
	}
	return DefaultMaxAttempts
}

// withDefaults fills what a Source left zero.
func (s *Source) withDefaults() {
	if s.OnDuplicate == "" {
		s.OnDuplicate = OnDuplicateSkip
	}
	if s.MaxAttempts <= 0 {
		s.MaxAttempts = DefaultMaxAttempts
	}
	if s.DedupWindow <= 0 {
		s.DedupWindow = DefaultDedupWindow
	}
	if d, ok := s.Provider.(providers.Describer); ok && s.EventIDName == "" {
		s.EventIDName = d.Describe().DefaultEventID
	}
	if len(s.Destinations) == 0 {
		s.Destinations = []Destination{{Name: jobs.DefaultDestination, MaxAttempts: s.MaxAttempts}}
	}
	for i := range s.Destinations {
		d := &s.Destinations[i]
		if d.MaxAttempts <= 0 {
			d.MaxAttempts = DefaultMaxAttempts
		}
		d.queue = jobs.QueueFor(s.Name, d.Name)
	}
	s.dropHeader = dropHeaders(s.Provider)
	if d, ok := s.Provider.(providers.Describer); ok {
		s.defaultType = d.Describe().DefaultEventType
	}
}

// Config configures a Server. Pointer fields are required unless noted.
type Config struct {
	Pool *pgxpool.Pool
	// River inserts jobs; an insert-only client (no queues) is enough.
	River   *river.Client[pgx.Tx]
	Sources []*Source
	// MaxBodyBytes caps bodies (413 beyond); default 1 MiB.
	MaxBodyBytes int64
	// Batch turns on group commit (see batcher); false is one transaction
	// per request.
	Batch bool
	// BatchSize caps deliveries per transaction (default 32); BatchWait is
	// how long a committer lingers for company (default 0).
	BatchSize int
	BatchWait time.Duration
	// Committers is the number of concurrent ingest transactions (default 4).
	Committers int
	// QueueTimeout bounds the wait for the database before a 503 (default 3s).
	QueueTimeout time.Duration
	// MaxPendingBytes bounds the request bodies held in memory at once: read
	// and waiting for their commit (default 256 MiB, at least MaxBodyBytes).
	// A request that would go past it waits up to QueueTimeout for room, then
	// is answered 503 with Retry-After before its body is read.
	MaxPendingBytes int64
	// BodyTimeout bounds how long a request body may take to arrive;
	// beyond it the request is answered 408 and nothing is stored
	// (default 10s).
	BodyTimeout time.Duration
	// IngestRoutes: false serves only /healthz, /readyz and /metrics
	// (--role worker).
	IngestRoutes bool
	// NoMetricsRoute leaves /metrics out (it is served elsewhere, e.g. on
	// the admin listener).
	NoMetricsRoute bool
	// Registry is where the metrics are registered and what /metrics
	// serves; nil: a fresh one with the Go and process collectors.
	Registry *prometheus.Registry
	Logger   *slog.Logger // nil: slog.Default()
	// Tracer starts each request's span (continuing the sender's
	// traceparent); nil: spans with real ids that record nothing.
	Tracer trace.Tracer
	// Ready reports readiness (Postgres reachable and migrated); nil pings the pool.
	Ready func(ctx context.Context) error
	// Pace, when set, says how long each delivery waits before its body is
	// read (admission control: package internal/pacing); nil: none.
	Pace Pacer
}

// Pacer says how long a delivery arriving now waits before it is read.
type Pacer interface {
	Delay() time.Duration
}

// Defaults of Config and Source fields left zero.
const (
	DefaultMaxBodyBytes = defaults.MaxBodyBytes
	DefaultBatchSize    = defaults.BatchSize
	DefaultCommitters   = defaults.Committers
	DefaultQueueTimeout = defaults.QueueTimeout
	DefaultBodyTimeout  = defaults.BodyTimeout
	// DefaultMaxPendingBytes, or four bodies of MaxBodyBytes if that is more.
	DefaultMaxPendingBytes = defaults.MaxPendingBytes
	DefaultMaxAttempts     = defaults.MaxAttempts
	DefaultDedupWindow     = defaults.DedupWindow
)

// Server is the HTTP front.
type Server struct {
	cfg     Config
	echo    *echo.Echo
	sources map[string]*Source
	batch   *batcher
	db      *store
	pending *semaphore.Weighted // bytes of bodies in memory (MaxPendingBytes)
	m       *metrics.Metrics
	log     *slog.Logger
}

// New builds a Server.
func New(cfg Config) (*Server, error) {
	if cfg.Pool == nil {
		return nil, errors.New("ingest: Config.Pool is required")
	}
	if cfg.IngestRoutes && cfg.River == nil {
		return nil, errors.New("ingest: Config.River is required (an insert-only river.Client over riverpgxv5)")
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = DefaultBatchSize
	}
	if cfg.Committers <= 0 {
		cfg.Committers = DefaultCommitters
	}
	if cfg.QueueTimeout <= 0 {
		cfg.QueueTimeout = DefaultQueueTimeout
	}
	if cfg.BodyTimeout <= 0 {
		cfg.BodyTimeout = DefaultBodyTimeout
	}
	if cfg.MaxPendingBytes <= 0 {
		cfg.MaxPendingBytes = max(DefaultMaxPendingBytes, 4*cfg.MaxBodyBytes)
	}
	if cfg.MaxPendingBytes < cfg.MaxBodyBytes {
		return nil, fmt.Errorf("ingest: MaxPendingBytes (%d) is below MaxBodyBytes (%d): a largest body would never fit", cfg.MaxPendingBytes, cfg.MaxBodyBytes)
	}
	if cfg.Registry == nil {
		cfg.Registry = metrics.NewRegistry()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Tracer == nil {
		cfg.Tracer = tracing.IDsOnly()
	}
	s := &Server{cfg: cfg, sources: map[string]*Source{}, m: metrics.For(cfg.Registry), log: cfg.Logger,
		db: &store{pool: cfg.Pool, river: cfg.River}, pending: semaphore.NewWeighted(cfg.MaxPendingBytes)}
	for _, src := range cfg.Sources {
		if src.MaxConcurrency > 0 {
			src.sem = make(chan struct{}, src.MaxConcurrency)
		}
		src.withDefaults()
		if _, dup := s.sources[src.Name]; dup {
			return nil, fmt.Errorf("ingest: source %q configured twice", src.Name)
		}
		s.sources[src.Name] = src
	}
	if cfg.IngestRoutes && cfg.Batch {
		s.batch = newBatcher(s.db.commitPipelined, cfg.Committers, cfg.BatchSize, cfg.BatchWait,
			func(n int) { s.m.BatchSize.Observe(float64(n)) })
	}

	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = httpjson.ErrorHandler
	// Every answer carries X-Request-Id (the caller's, when it is a short
	// token, or a new one); logs name it.
	e.Pre(dropOddRequestID)
	e.Use(middleware.RequestID(), middleware.Recover(), s.webhookMethods)
	// Probes answer HEAD as GET (some uptime monitors probe with HEAD).
	probe := func(path string, h echo.HandlerFunc) { e.Match([]string{http.MethodGet, http.MethodHead}, path, h) }
	probe("/healthz", func(c echo.Context) error { return c.JSON(http.StatusOK, map[string]string{"status": "ok"}) })
	probe("/readyz", s.readyz)
	if !cfg.NoMetricsRoute {
		probe("/metrics", s.MetricsHandler())
	}
	if cfg.IngestRoutes {
		e.POST("/webhooks/:source", s.receive)
		e.GET("/webhooks/:source", s.handshake)
		e.Match([]string{http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodHead, http.MethodOptions},
			"/webhooks/:source", s.notAllowed)
		// Other methods on this path (TRACE, CONNECT, made-up ones): webhookMethods.
	}
	s.echo = e
	return s, nil
}

// MetricsHandler serves the Prometheus registry.
func (s *Server) MetricsHandler() echo.HandlerFunc {
	return echo.WrapHandler(promhttp.HandlerFor(s.cfg.Registry, promhttp.HandlerOpts{}))
}

// Echo returns the underlying router, for mounting more routes (admin).
func (s *Server) Echo() *echo.Echo { return s.echo }

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.echo.ServeHTTP(w, r) }

// Close stops the group committer after in-flight batches finish.
func (s *Server) Close() {
	if s.batch != nil {
		s.batch.Close()
	}
}

func (s *Server) readyz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
	defer cancel()
	check := s.cfg.Ready
	if check == nil {
		check = func(ctx context.Context) error { return s.cfg.Pool.Ping(ctx) }
	}
	if err := check(ctx); err != nil {
		// The cause goes to the log, not to the unauthenticated caller: it
		// names hosts, users and databases.
		s.log.Warn("not ready", "error", err.Error())
		return c.JSON(http.StatusServiceUnavailable, map[string]string{"status": "unavailable"})
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "ready"})
}

// response bodies (docs/operations.md, ingest answers).
type singleResponse struct {
	Status  string `json:"status"`
	Source  string `json:"source"`
	EventID string `json:"event_id"`
}

type batchResponse struct {
	Status string        `json:"status"`
	Source string        `json:"source"`
	Events []EventResult `json:"events"`
}

// dropAlways are never stored: credentials and connection details a replay
// must not carry. Adapters add the headers that carry their credentials
// (providers.SecretHeaderer).
var dropAlways = []string{
	"Authorization", "Proxy-Authorization", "Cookie", "Connection",
	"Content-Length", "Transfer-Encoding", "Keep-Alive", "Upgrade",
	"Te", "Trailer", "Accept-Encoding",
}

// dropHeaders is the set of canonical header names a source never stores.
func dropHeaders(p providers.Provider) map[string]bool {
	drop := map[string]bool{}
	for _, h := range dropAlways {
		drop[h] = true
	}
	if sh, ok := p.(providers.SecretHeaderer); ok {
		for _, h := range sh.SecretHeaders() {
			drop[http.CanonicalHeaderKey(h)] = true
		}
	}
	return drop
}

// receive handles POST /webhooks/{source}: admit the request, read its body
// within the budgets, verify it, resolve its events, store it, answer.
// Every refusal is answered before anything is stored.
func (s *Server) receive(c echo.Context) error {
	start := time.Now()
	src, ok := s.sources[c.Param("source")]
	if !ok {
		return httpjson.Error(c, http.StatusNotFound, "unknown source")
	}
	defer func() { s.m.IngestSeconds.WithLabelValues(src.Name).Observe(time.Since(start).Seconds()) }()
	span := s.startSpan(c, src)
	defer func() {
		if span.IsRecording() {
			span.SetAttributes(semconv.HTTPResponseStatusCode(c.Response().Status))
		}
		span.End()
	}()
	if src.sem != nil {
		select {
		case src.sem <- struct{}{}:
			defer func() { <-src.sem }()
		default:
			return s.refuse(c, src, refusal{http.StatusServiceUnavailable, metrics.Unavailable, "too many concurrent deliveries for this source; retry later"})
		}
	}
	if s.cfg.Pace != nil {
		wait(c.Request().Context(), s.cfg.Pace.Delay())
	}
	// The queue deadline covers the wait for body budget and for the committer.
	deadline := start.Add(s.cfg.QueueTimeout)
	body, reserved, ref := s.readBody(c, src, deadline)
	defer s.pending.Release(reserved)
	if ref != nil {
		return s.refuse(c, src, *ref)
	}
	pr := &providers.Request{Body: body, Header: c.Request().Header, URL: requestURL(c.Request())}
	_, verifying := tracing.Step(c.Request().Context(), s.cfg.Tracer, "verify")
	ref = s.verify(c, src, pr)
	verifying.End()
	if ref != nil {
		return s.refuse(c, src, *ref)
	}
	if rp, ok := src.Provider.(providers.Responder); ok {
		if code, b, handled := rp.Respond(pr); handled {
			return c.Blob(code, providers.ResponseContentType(rp), b)
		}
	}
	d := newDelivery(src, c.Request(), body, start)
	if err := resolve(src, pr, d); err != nil {
		return s.refuse(c, src, refusal{http.StatusBadRequest, metrics.BadRequest, err.Error()})
	}
	d.TraceParent = tracing.TraceParent(c.Request().Context())
	ctx, committing := tracing.Step(c.Request().Context(), s.cfg.Tracer, "commit")
	results, err := s.store(ctx, d, deadline)
	committing.End()
	if err != nil {
		s.log.WarnContext(ctx, "delivery not stored", "source", src.Name, "error", err.Error(), "request_id", requestID(c))
		msg := "storage unavailable; retry later"
		if errors.Is(err, ErrBusy) {
			msg = "ingest is saturated; retry later"
		}
		return s.refuse(c, src, refusal{http.StatusServiceUnavailable, metrics.Unavailable, msg})
	}
	return s.answer(c, src, results)
}

// wait waits d, or until ctx is done.
func wait(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// startSpan starts the request's span, continuing the sender's
// traceparent if it sent one, and puts it in the request's context.
func (s *Server) startSpan(c echo.Context, src *Source) trace.Span {
	req := c.Request()
	ctx, span := s.cfg.Tracer.Start(tracing.Extract(req.Context(), req.Header), "POST /webhooks/{source}",
		trace.WithSpanKind(trace.SpanKindServer))
	if span.IsRecording() {
		span.SetAttributes(semconv.HTTPRequestMethodKey.String(req.Method), semconv.HTTPRoute("/webhooks/{source}"),
			attribute.String("hookline.source", src.Name))
	}
	c.SetRequest(req.WithContext(ctx))
	return span
}

// handshake answers GET /webhooks/{source}: a provider's handshake when its
// adapter has one (providers.GetResponder), else 405. Nothing is stored.
func (s *Server) handshake(c echo.Context) error {
	src, ok := s.sources[c.Param("source")]
	if !ok {
		return httpjson.Error(c, http.StatusNotFound, "unknown source")
	}
	if gr, ok := src.Provider.(providers.GetResponder); ok {
		pr := &providers.Request{Header: c.Request().Header, URL: requestURL(c.Request())}
		if code, ct, body, handled := gr.RespondGet(pr); handled {
			return c.Blob(code, ct, body)
		}
	}
	return s.notAllowed(c)
}

// webhookMethods answers, like notAllowed, a method the router has no
// route for on a webhook path (TRACE, CONNECT, a made-up one), whose 405
// would otherwise list every method routed there, refused ones included.
func (s *Server) webhookMethods(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if _, refused := c.Get(echo.ContextKeyHeaderAllow).(string); refused && c.Path() == "/webhooks/:source" {
			c.SetParamNames("source") // the router sets no parameters for a 405
			c.SetParamValues(strings.TrimPrefix(c.Request().URL.Path, "/webhooks/"))
			return s.notAllowed(c)
		}
		return next(c)
	}
}

// maxRequestIDBytes bounds a caller's X-Request-Id that hookline keeps.
const maxRequestIDBytes = 128

// dropOddRequestID removes a caller's X-Request-Id that is longer than
// maxRequestIDBytes or holds anything but visible ASCII, so that a new one
// is made: the id is echoed in the answer and written in every log line of
// the request, and unauthenticated callers must not choose their size.
func dropOddRequestID(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Request().Header
		if id := h.Get(echo.HeaderXRequestID); id != "" && (len(id) > maxRequestIDBytes || strings.IndexFunc(id, func(r rune) bool { return r <= ' ' || r > '~' }) >= 0) {
			h.Del(echo.HeaderXRequestID)
		}
		return next(c)
	}
}

// notAllowed answers a method other than POST (or a GET the source's
// adapter has no handshake for) with 405 and Allow: what the source takes.
func (s *Server) notAllowed(c echo.Context) error {
	src, ok := s.sources[c.Param("source")]
	if !ok {
		return httpjson.Error(c, http.StatusNotFound, "unknown source")
	}
	allow := http.MethodPost
	if _, ok := src.Provider.(providers.GetResponder); ok && c.Request().Method != http.MethodGet {
		allow = http.MethodGet + ", " + http.MethodPost
	}
	c.Response().Header().Set("Allow", allow)
	return httpjson.Error(c, http.StatusMethodNotAllowed, "method not allowed: webhooks are POSTed")
}

// refusal is a delivery answered with an error: nothing was stored.
type refusal struct {
	status  int
	outcome string // hookline_webhooks_received_total's outcome
	msg     string
}

// refuse counts and answers a refusal; a 503 carries Retry-After.
func (s *Server) refuse(c echo.Context, src *Source, r refusal) error {
	s.m.Received.WithLabelValues(src.Name, r.outcome).Inc()
	switch r.status {
	case http.StatusServiceUnavailable:
		c.Response().Header().Set("Retry-After", "1")
	case http.StatusRequestTimeout:
		c.Response().Header().Set("Connection", "close")
	}
	return httpjson.Error(c, r.status, r.msg)
}

// verify checks the delivery's signature. A key that could not be fetched
// is the provider's trouble, not the sender's: 503, so it retries. A body
// too deep to parse is a 400. Anything else that stopped verification (a
// bad signature, or a body too garbled to find one in) means the signature
// is not fine: 401 (or the adapter's status), which takes precedence over
// 400.
func (s *Server) verify(c echo.Context, src *Source, pr *providers.Request) *refusal {
	err := src.Provider.Verify(pr)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, providers.ErrUnavailable):
		s.log.WarnContext(c.Request().Context(), "verification unavailable", "source", src.Name, "error", err.Error(), "request_id", requestID(c))
		return &refusal{http.StatusServiceUnavailable, metrics.Unavailable, "signature verification unavailable; retry later"}
	case errors.Is(err, providers.ErrTooDeep):
		return &refusal{http.StatusBadRequest, metrics.BadRequest, err.Error()}
	}
	status := http.StatusUnauthorized
	if ss, ok := src.Provider.(providers.SignatureStatuser); ok {
		status = ss.InvalidSignatureStatus()
	}
	s.log.InfoContext(c.Request().Context(), "delivery rejected", "source", src.Name, "status", status, "error", err.Error(), "request_id", requestID(c))
	return &refusal{status, metrics.InvalidSignature, err.Error()}
}

// newDelivery is the delivery of a verified request, with the headers a
// replay needs (never the source's credentials).
func newDelivery(src *Source, req *http.Request, body []byte, received time.Time) *Delivery {
	d := &Delivery{Source: src, ReceivedAt: received.UTC(), ContentType: req.Header.Get("Content-Type"), Body: body,
		Headers: make(map[string][]string, len(req.Header))}
	for k, v := range req.Header {
		if !src.dropHeader[k] {
			d.Headers[k] = v
		}
	}
	return d
}

// answerSlack is how long past the queue deadline a delivery whose body
// came in time may wait for its commit: with the default queue_timeout,
// every answer comes within 4.5 s, also while the database hangs.
const answerSlack = 1500 * time.Millisecond

// answerBy is when a delivery whose queue deadline is deadline, and whose
// body has just been read, must be answered: answerSlack past the queue
// deadline, or, for a body that arrived late, commitTimeout from now.
func answerBy(deadline, now time.Time) time.Time {
	return later(deadline.Add(answerSlack), now.Add(commitTimeout))
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// store commits d through the group committer (or alone, in the naive
// mode), answering by answerBy whatever the database does.
func (s *Server) store(ctx context.Context, d *Delivery, deadline time.Time) ([]EventResult, error) {
	now := time.Now()
	ctx, cancel := context.WithDeadline(ctx, answerBy(deadline, now))
	defer cancel()
	if s.batch != nil {
		return s.batch.Submit(ctx, d, max(deadline.Sub(now), time.Millisecond))
	}
	ctx, cancelCommit := context.WithTimeout(ctx, commitTimeout)
	defer cancelCommit()
	all, err := s.db.commit(ctx, []*Delivery{d})
	if err != nil {
		return nil, err
	}
	return all[0], nil
}

// answer counts the stored delivery's events and answers 200.
func (s *Server) answer(c echo.Context, src *Source, results []EventResult) error {
	overall := StatusDuplicate
	for _, r := range results {
		if r.Status == StatusAccepted {
			overall = StatusAccepted
			s.m.Received.WithLabelValues(src.Name, metrics.Accepted).Inc()
			continue
		}
		s.m.Received.WithLabelValues(src.Name, metrics.Duplicate).Inc()
		s.m.Idempotency.WithLabelValues(src.Name, "duplicate").Inc()
		if !r.firstSeen.IsZero() {
			s.m.RedeliveryGap.WithLabelValues(src.Name).Observe(time.Since(r.firstSeen).Seconds())
		}
		s.log.InfoContext(c.Request().Context(), "duplicate delivery", "source", src.Name, "event_id", r.EventID, "on_duplicate", string(src.OnDuplicate), "request_id", requestID(c))
	}
	if _, isBatch := src.Provider.(providers.Splitter); isBatch {
		return c.JSON(http.StatusOK, batchResponse{Status: overall, Source: src.Name, Events: results})
	}
	return c.JSON(http.StatusOK, singleResponse{Status: results[0].Status, Source: src.Name, EventID: results[0].EventID})
}

// firstChunk is the body budget a request reserves before any byte of its
// body has arrived, and its first buffer: most webhook bodies fit in it.
const firstChunk = 16 << 10

// readBody reads the request body into memory within three bounds:
//
//   - at most MaxBodyBytes (413 beyond; a declared Content-Length over it is
//     refused before reading);
//   - all of it within BodyTimeout (408; a sender trickling bytes cannot
//     hold a slot longer);
//   - room in the pending-bytes budget (MaxPendingBytes), reserved for
//     what has been received, not what was announced: firstChunk up front,
//     then doubling as the buffer fills, so a request holds at most
//     max(firstChunk, twice its received bytes). A request that finds no
//     room waits until deadline, then gets 503.
//
// reserved is the budget the caller releases once the body is no longer
// held (after its commit), also on refusal.
func (s *Server) readBody(c echo.Context, src *Source, deadline time.Time) (body []byte, reserved int64, ref *refusal) {
	req := c.Request()
	limit := s.cfg.MaxBodyBytes
	tooLarge := &refusal{http.StatusRequestEntityTooLarge, metrics.TooLarge, fmt.Sprintf("body exceeds max_body_bytes (%d)", limit)}
	if req.ContentLength > limit {
		return nil, 0, tooLarge
	}
	reserve := func(n int64) *refusal {
		if !s.pending.TryAcquire(n) {
			ctx, cancel := context.WithDeadline(req.Context(), deadline)
			err := s.pending.Acquire(ctx, n)
			cancel()
			if err != nil {
				s.log.WarnContext(c.Request().Context(), "delivery refused: pending bodies at max_pending_bytes", "source", src.Name, "max_pending_bytes", s.cfg.MaxPendingBytes, "request_id", requestID(c))
				return &refusal{http.StatusServiceUnavailable, metrics.Unavailable, "ingest is saturated; retry later"}
			}
		}
		reserved += n
		return nil
	}
	rc := http.NewResponseController(c.Response())
	_ = rc.SetReadDeadline(time.Now().Add(s.cfg.BodyTimeout)) // unsupported only off a real server (tests' recorders)
	defer func() { _ = rc.SetReadDeadline(time.Time{}) }()

	want := req.ContentLength // -1: unknown (chunked)
	size := int64(firstChunk)
	if want >= 0 {
		size = min(size, want)
	}
	if ref := reserve(size); ref != nil {
		return nil, reserved, ref
	}
	r := http.MaxBytesReader(c.Response(), req.Body, limit)
	buf := make([]byte, 0, size)
	for {
		if len(buf) == cap(buf) {
			if int64(len(buf)) == want || int64(len(buf)) == limit {
				break // all announced (or allowed) bytes are in; confirm EOF below
			}
			next := min(2*int64(cap(buf)), limit)
			if want >= 0 {
				next = min(next, want)
			}
			if ref := reserve(next - int64(cap(buf))); ref != nil {
				return nil, reserved, ref
			}
			grown := make([]byte, len(buf), next)
			copy(grown, buf)
			buf = grown
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			if want >= 0 && int64(len(buf)) < want {
				return nil, reserved, s.bodyError(c, src, io.ErrUnexpectedEOF, tooLarge)
			}
			return buf, reserved, nil
		}
		if err != nil {
			return nil, reserved, s.bodyError(c, src, err, tooLarge)
		}
	}
	// Reading once more confirms the body ends here (net/http enforces
	// Content-Length; MaxBytesReader the limit) and lets the connection be reused.
	var one [1]byte
	n, err := r.Read(one[:])
	if n > 0 && err == nil {
		err = errors.New("body longer than Content-Length")
	}
	if err != nil && err != io.EOF {
		return nil, reserved, s.bodyError(c, src, err, tooLarge)
	}
	return buf, reserved, nil
}

// bodyError turns a failed body read into its refusal.
func (s *Server) bodyError(c echo.Context, src *Source, err error, tooLarge *refusal) *refusal {
	var mbe *http.MaxBytesError
	var ne net.Error
	switch {
	case errors.As(err, &mbe):
		return tooLarge
	case errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()):
		s.log.InfoContext(c.Request().Context(), "delivery refused: body not received in time", "source", src.Name, "body_timeout", s.cfg.BodyTimeout.String(), "request_id", requestID(c))
		return &refusal{http.StatusRequestTimeout, metrics.BadRequest, fmt.Sprintf("the body did not arrive within ingest.body_timeout (%s)", s.cfg.BodyTimeout)}
	}
	return &refusal{http.StatusBadRequest, metrics.BadRequest, "could not read body"}
}

// resolve fills d.Events from the provider (split batches) or the source's
// key resolvers, with each event's content key where the provider's ids are
// not signed.
func resolve(src *Source, pr *providers.Request, d *Delivery) error {
	if sp, ok := src.Provider.(providers.Splitter); ok {
		items, err := sp.Split(pr)
		if err != nil {
			return err
		}
		if len(items) == 0 {
			return fmt.Errorf("%w: batch has no items", providers.ErrMalformed)
		}
		for i, it := range items {
			if err := checkEvent(src, it.Event, false); err != nil {
				return fmt.Errorf("batch item %d: %w", i, err)
			}
			de := DeliveryEvent{ID: it.Event.ID, Type: it.Event.Type, Offset: it.Offset, Length: len(it.Body),
				Matched: match(src, it.Event.Type, it.Body)}
			if src.Ordering != nil { // the item's own request only for an ordered source
				if err := orderEvent(src.Ordering, &providers.Request{Body: it.Body, Header: pr.Header, URL: pr.URL}, &de); err != nil {
					return fmt.Errorf("batch item %d: %w", i, err)
				}
			}
			d.Events = append(d.Events, de)
		}
		return nil
	}
	ev, err := resolveOne(src, pr)
	if errors.Is(err, providers.ErrNoEventID) {
		return fmt.Errorf("%w (event id from %s)", err, resolverName(src.EventIDName))
	}
	if err != nil {
		return err
	}
	if err := checkEvent(src, ev, src.EventType != nil || src.defaultType != ""); err != nil {
		return err
	}
	de := DeliveryEvent{ID: ev.ID, Type: ev.Type, Length: -1, Matched: match(src, ev.Type, pr.Body)}
	if ck, ok := src.Provider.(providers.ContentKeyer); ok {
		de.ContentKey = ck.ContentKey(pr)
	}
	if err := orderEvent(src.Ordering, pr, &de); err != nil {
		return err
	}
	d.Events = []DeliveryEvent{de}
	return nil
}

// match lists the destinations of src an event of type eventType whose own
// bytes are body goes to.
func match(src *Source, eventType string, body []byte) []int {
	var out []int
	for i, d := range src.Destinations {
		if d.Match == nil || d.Match(eventType, body) {
			out = append(out, i)
		}
	}
	return out
}

// resolveOne resolves a single event: the provider's defaults, each
// overridden by the source's resolver where one is configured.
func resolveOne(src *Source, pr *providers.Request) (providers.Event, error) {
	if src.EventID == nil {
		ev, err := src.Provider.Resolve(pr)
		if err == nil && src.EventType != nil {
			ev.Type, err = src.EventType(pr)
		}
		return ev, err
	}
	id, err := src.EventID(pr)
	if err != nil {
		return providers.Event{}, err
	}
	ev := providers.Event{ID: id}
	switch {
	case src.EventType != nil:
		ev.Type, err = src.EventType(pr)
	default:
		if pev, perr := src.Provider.Resolve(pr); perr == nil {
			ev.Type = pev.Type
		}
	}
	return ev, err
}

// MaxEventIDBytes caps an event id. Postgres indexes (source, event_id) and
// River indexes the job's arguments; an index entry over ~2.7 KB fails the
// insert, and the sender would retry it for ever. Real ids are far shorter
// (Stripe ~30 bytes, composite ids ~100).
const MaxEventIDBytes = 1024

// checkEvent refuses, as a 400 naming the resolver, an event id that is
// blank (providers.Blank: empty, or only white space and invisible format
// characters; such a key names nothing a worker could claim), a type that
// is blank but not empty (or empty too,
// when typeRequired: the source configures an event_type resolver, or its
// provider's scheme gives every event a type), an id or type Postgres
// could not store (a NUL byte or invalid UTF-8, an id past
// MaxEventIDBytes), and an id or type a forward could not carry intact in
// its headers (Idempotency-Key, Hookline-Event-Id, Hookline-Event-Type,
// webhook-id): a control character, which HTTP refuses, or leading or
// trailing whitespace, which HTTP strips (two events "evt_1" and "evt_1 "
// would reach the destination under one key). Caught here, such a delivery
// is never stored.
func checkEvent(src *Source, ev providers.Event, typeRequired bool) error {
	idName, typeName := resolverName(src.EventIDName), resolverName(src.EventTypeName)
	if src.EventTypeName == "" && src.defaultType != "" {
		typeName = "the provider's default resolver " + src.defaultType
	}
	if providers.Blank(ev.ID) {
		return fmt.Errorf("%w: the event id resolved by %s is empty or blank", providers.ErrNoEventID, idName)
	}
	if (ev.Type != "" || typeRequired) && providers.Blank(ev.Type) {
		return fmt.Errorf("%w: the event type resolved by %s is empty or blank", providers.ErrMalformed, typeName)
	}
	for _, f := range [...]struct{ name, v string }{{"event id resolved by " + idName, ev.ID}, {"event type resolved by " + typeName, ev.Type}} {
		switch {
		case !utf8.ValidString(f.v):
			return fmt.Errorf("%w: the %s is not valid UTF-8", providers.ErrMalformed, f.name)
		case strings.IndexByte(f.v, 0) >= 0:
			return fmt.Errorf("%w: the %s contains a NUL byte", providers.ErrMalformed, f.name)
		}
		if i := strings.IndexFunc(f.v, isControl); i >= 0 {
			r, _ := utf8.DecodeRuneInString(f.v[i:])
			return fmt.Errorf("%w: the %s contains the control character %U at byte %d; HTTP headers cannot carry it to the destination",
				providers.ErrMalformed, f.name, r, i)
		}
		if f.v != "" && strings.TrimSpace(f.v) != f.v {
			return fmt.Errorf("%w: the %s starts or ends with whitespace; HTTP headers would strip it on the way to the destination",
				providers.ErrMalformed, f.name)
		}
	}
	if len(ev.ID) > MaxEventIDBytes {
		return fmt.Errorf("%w: the event id is %d bytes long; hookline takes at most %d", providers.ErrMalformed, len(ev.ID), MaxEventIDBytes)
	}
	return nil
}

// isControl: a C0 or C1 control character or DEL, none of which an HTTP
// header value may hold (tab included: a header may, but an id or type
// holding one is not a provider's).
func isControl(r rune) bool { return r < 0x20 || (r >= 0x7f && r < 0xa0) }

func resolverName(n string) string {
	if n == "" {
		return "the provider's default resolver"
	}
	return "resolver " + n
}

func requestURL(r *http.Request) *url.URL {
	u := *r.URL
	u.Host = r.Host
	u.Scheme = "http"
	if r.TLS != nil {
		u.Scheme = "https"
	}
	if p := r.Header.Get("X-Forwarded-Proto"); p == "https" || p == "http" {
		u.Scheme = p
	}
	return &u
}

func requestID(c echo.Context) string {
	if id := c.Request().Header.Get(echo.HeaderXRequestID); id != "" {
		return id
	}
	return c.Response().Header().Get(echo.HeaderXRequestID)
}
