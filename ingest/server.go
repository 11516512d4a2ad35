// Package ingest is hookline's HTTP front: POST /webhooks/{source} verifies
// the delivery with the source's provider, resolves its event(s), stores the
// raw body and enqueues one River job per event in ONE transaction, and
// answers only after COMMIT (CONTRACT.md §1, promise 1). It also serves
// /healthz, /readyz, /metrics and the admin API.
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
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/riverqueue/river"
	"golang.org/x/sync/semaphore"

	"github.com/hookline/hookline/internal/metrics"
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
	// MaxAttempts is the destination's attempt budget per job (default 10).
	MaxAttempts int
	// MaxConcurrency caps concurrent requests for this source; beyond it
	// requests are answered 503. Zero means no cap.
	MaxConcurrency int

	sem chan struct{}
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
	// QueueTimeout bounds the wait for the database before a 503 (default 1s).
	QueueTimeout time.Duration
	// MaxPendingBytes bounds the request bodies held in memory at once: read
	// and waiting for their commit (default 256 MiB, at least MaxBodyBytes).
	// A request that would go past it waits up to QueueTimeout for room, then
	// is answered 503 with Retry-After before its body is read.
	MaxPendingBytes int64
	// IngestRoutes: false serves only /healthz, /readyz and /metrics
	// (--role worker).
	IngestRoutes bool
	Metrics      *metrics.Metrics // nil: a fresh set
	Logger       *slog.Logger     // nil: slog.Default()
	// Ready reports readiness (Postgres reachable and migrated); nil pings the pool.
	Ready func(ctx context.Context) error
}

// DefaultMaxPendingBytes is Config.MaxPendingBytes when unset (or four
// bodies of MaxBodyBytes, if that is more).
const DefaultMaxPendingBytes = 256 << 20

// Server is the HTTP front.
type Server struct {
	cfg     Config
	echo    *echo.Echo
	sources map[string]*Source
	batch   *batcher
	store   *store
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
		cfg.MaxBodyBytes = 1 << 20
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 32
	}
	if cfg.Committers <= 0 {
		cfg.Committers = 4
	}
	if cfg.QueueTimeout <= 0 {
		cfg.QueueTimeout = time.Second
	}
	if cfg.MaxPendingBytes <= 0 {
		cfg.MaxPendingBytes = max(DefaultMaxPendingBytes, 4*cfg.MaxBodyBytes)
	}
	if cfg.MaxPendingBytes < cfg.MaxBodyBytes {
		return nil, fmt.Errorf("ingest: MaxPendingBytes (%d) is below MaxBodyBytes (%d): a largest body would never fit", cfg.MaxPendingBytes, cfg.MaxBodyBytes)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.New()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Server{cfg: cfg, sources: map[string]*Source{}, m: cfg.Metrics, log: cfg.Logger,
		store: &store{pool: cfg.Pool, river: cfg.River}, pending: semaphore.NewWeighted(cfg.MaxPendingBytes)}
	for _, src := range cfg.Sources {
		if src.OnDuplicate == "" {
			src.OnDuplicate = OnDuplicateSkip
		}
		if src.MaxAttempts <= 0 {
			src.MaxAttempts = 10
		}
		if src.MaxConcurrency > 0 {
			src.sem = make(chan struct{}, src.MaxConcurrency)
		}
		if _, dup := s.sources[src.Name]; dup {
			return nil, fmt.Errorf("ingest: source %q configured twice", src.Name)
		}
		s.sources[src.Name] = src
	}
	if cfg.IngestRoutes && cfg.Batch {
		s.batch = newBatcher(s.store.commitPipelined, cfg.Committers, cfg.BatchSize, cfg.BatchWait,
			func(n int) { s.m.BatchSize.Observe(float64(n)) })
	}

	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = jsonErrorHandler
	// Every answer carries X-Request-Id (the caller's, or a new one); logs name it.
	e.Use(middleware.RequestID(), middleware.Recover())
	e.GET("/healthz", func(c echo.Context) error { return c.JSON(http.StatusOK, map[string]string{"status": "ok"}) })
	e.GET("/readyz", s.readyz)
	e.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(s.m.Registry, promhttp.HandlerOpts{})))
	if cfg.IngestRoutes {
		e.POST("/webhooks/:source", s.receive)
		// Other methods on this path get echo's 405.
	}
	s.echo = e
	return s, nil
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
		return c.JSON(http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "error": err.Error()})
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "ready"})
}

type errorBody struct {
	Error string `json:"error"`
}

func jsonErrorHandler(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	code, msg := http.StatusInternalServerError, "internal error"
	var he *echo.HTTPError
	if errors.As(err, &he) {
		code = he.Code
		msg = fmt.Sprint(he.Message)
	}
	_ = c.JSON(code, errorBody{Error: msg})
}

// response bodies (CONTRACT.md §4).
type batchResponse struct {
	Status string        `json:"status"`
	Source string        `json:"source"`
	Events []EventResult `json:"events"`
}

// replayHeaders are left out of the stored headers: credentials and
// connection details a replay must not carry.
var skipHeaders = map[string]bool{
	"Authorization": true, "Proxy-Authorization": true, "Cookie": true, "Connection": true,
	"Content-Length": true, "Transfer-Encoding": true, "Keep-Alive": true, "Upgrade": true,
	"Te": true, "Trailer": true, "Accept-Encoding": true,
}

func (s *Server) receive(c echo.Context) error {
	start := time.Now()
	req := c.Request()
	src, ok := s.sources[c.Param("source")]
	if !ok {
		return c.JSON(http.StatusNotFound, errorBody{Error: "unknown source"})
	}
	defer func() { s.m.IngestSeconds.WithLabelValues(src.Name).Observe(time.Since(start).Seconds()) }()
	count := func(outcome string, n int) { s.m.Received.WithLabelValues(src.Name, outcome).Add(float64(n)) }
	unavailable := func(msg string) error {
		count(metrics.Unavailable, 1)
		c.Response().Header().Set("Retry-After", "1")
		return c.JSON(http.StatusServiceUnavailable, errorBody{Error: msg})
	}

	if src.sem != nil {
		select {
		case src.sem <- struct{}{}:
			defer func() { <-src.sem }()
		default:
			return unavailable("too many concurrent deliveries for this source; retry later")
		}
	}

	// Cap the body before reading it all.
	if req.ContentLength > s.cfg.MaxBodyBytes {
		count(metrics.TooLarge, 1)
		return c.JSON(http.StatusRequestEntityTooLarge, errorBody{Error: fmt.Sprintf("body exceeds max_body_bytes (%d)", s.cfg.MaxBodyBytes)})
	}
	// Room for the body among the pending ones, or 503 within the queue
	// timeout: memory stays bounded however many senders there are. The
	// deadline covers the wait for the committer too.
	deadline := start.Add(s.cfg.QueueTimeout)
	weight := req.ContentLength
	if weight < 0 { // chunked: it may grow to the cap
		weight = s.cfg.MaxBodyBytes
	}
	if !s.pending.TryAcquire(weight) {
		ctx, cancel := context.WithDeadline(req.Context(), deadline)
		err := s.pending.Acquire(ctx, weight)
		cancel()
		if err != nil {
			s.log.Warn("delivery refused: pending bodies at max_pending_bytes", "source", src.Name, "max_pending_bytes", s.cfg.MaxPendingBytes, "request_id", requestID(c))
			return unavailable("ingest is saturated; retry later")
		}
	}
	defer s.pending.Release(weight)
	body, err := readBody(c.Response(), req, s.cfg.MaxBodyBytes)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			count(metrics.TooLarge, 1)
			return c.JSON(http.StatusRequestEntityTooLarge, errorBody{Error: fmt.Sprintf("body exceeds max_body_bytes (%d)", s.cfg.MaxBodyBytes)})
		}
		count(metrics.BadRequest, 1)
		return c.JSON(http.StatusBadRequest, errorBody{Error: "could not read body"})
	}

	pr := &providers.Request{Body: body, Header: req.Header, URL: requestURL(req)}
	if err := src.Provider.Verify(pr); errors.Is(err, providers.ErrUnavailable) {
		// A key or certificate could not be fetched: not the sender's fault.
		s.log.Warn("verification unavailable", "source", src.Name, "error", err.Error(), "request_id", requestID(c))
		return unavailable("signature verification unavailable; retry later")
	} else if err != nil {
		// Whatever stopped verification (a bad signature, or a body too
		// garbled to find one in), the signature is not fine: 401, which
		// takes precedence over 400 (CONTRACT.md §6).
		status := http.StatusUnauthorized
		if ss, ok := src.Provider.(providers.SignatureStatuser); ok {
			status = ss.InvalidSignatureStatus()
		}
		count(metrics.InvalidSignature, 1)
		s.log.Info("delivery rejected", "source", src.Name, "status", status, "error", err.Error(), "request_id", requestID(c))
		return c.JSON(status, errorBody{Error: err.Error()})
	}
	if rp, ok := src.Provider.(providers.Responder); ok {
		if code, b, handled := rp.Respond(pr); handled {
			return c.Blob(code, echo.MIMEApplicationJSON, b)
		}
	}

	d := &Delivery{Source: src, ReceivedAt: start.UTC(), ContentType: req.Header.Get("Content-Type"), Body: body,
		Headers: map[string][]string{}}
	for k, v := range req.Header {
		if !skipHeaders[k] {
			d.Headers[k] = v
		}
	}
	_, isBatch := src.Provider.(providers.Splitter)
	if err := resolve(src, pr, d); err != nil {
		count(metrics.BadRequest, 1)
		return c.JSON(http.StatusBadRequest, errorBody{Error: err.Error()})
	}

	var results []EventResult
	if s.batch != nil {
		results, err = s.batch.Submit(req.Context(), d, max(time.Until(deadline), time.Millisecond))
	} else {
		ctx, cancel := context.WithTimeout(req.Context(), commitTimeout)
		var all [][]EventResult
		all, err = s.store.commit(ctx, []*Delivery{d})
		cancel()
		if err == nil {
			results = all[0]
		}
	}
	if err != nil {
		s.log.Warn("delivery not stored", "source", src.Name, "error", err.Error(), "request_id", requestID(c))
		if errors.Is(err, ErrBusy) {
			return unavailable("ingest is saturated; retry later")
		}
		return unavailable("storage unavailable; retry later")
	}

	overall := StatusDuplicate
	for _, r := range results {
		if r.Status == StatusAccepted {
			overall = StatusAccepted
			count(metrics.Accepted, 1)
			continue
		}
		count(metrics.Duplicate, 1)
		s.m.Idempotency.WithLabelValues(src.Name, "duplicate").Inc()
		if !r.firstSeen.IsZero() {
			s.m.RedeliveryGap.WithLabelValues(src.Name).Observe(time.Since(r.firstSeen).Seconds())
		}
		s.log.Info("duplicate delivery", "source", src.Name, "event_id", r.EventID, "on_duplicate", string(src.OnDuplicate), "request_id", requestID(c))
	}
	if isBatch {
		return c.JSON(http.StatusOK, batchResponse{Status: overall, Source: src.Name, Events: results})
	}
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, singleResponseJSON(results[0].Status, src.Name, results[0].EventID))
}

// singleResponseJSON is the answer to a single-event delivery,
// {"status":…,"source":…,"event_id":…} and a newline as c.JSON writes it, but
// without reflection: this is the hot path.
func singleResponseJSON(status, source, eventID string) []byte {
	out := make([]byte, 0, 48+len(status)+len(source)+len(eventID))
	out = append(out, `{"status":`...)
	out = appendJSONString(out, status)
	out = append(out, `,"source":`...)
	out = appendJSONString(out, source)
	out = append(out, `,"event_id":`...)
	out = appendJSONString(out, eventID)
	return append(out, "}\n"...)
}

// readBody reads the request body, at most limit bytes (a longer one is an
// *http.MaxBytesError). With a Content-Length it reads into one buffer of
// exactly that size instead of growing one: the largest allocation of the
// ingest path before.
func readBody(w http.ResponseWriter, req *http.Request, limit int64) ([]byte, error) {
	r := http.MaxBytesReader(w, req.Body, limit)
	if n := req.ContentLength; n >= 0 && n <= limit {
		body := make([]byte, n)
		if _, err := io.ReadFull(r, body); err != nil {
			return nil, err
		}
		// The body must end where Content-Length says (net/http enforces
		// it); reading once more confirms EOF and lets the connection be reused.
		var one [1]byte
		if k, err := r.Read(one[:]); k > 0 || (err != nil && err != io.EOF) {
			if err == nil {
				err = errors.New("body longer than Content-Length")
			}
			return nil, err
		}
		return body, nil
	}
	return io.ReadAll(r)
}

// resolve fills d.Events from the provider (split batches) or the source's
// key resolvers.
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
			if it.Event.ID == "" {
				return providers.ErrNoEventID
			}
			if err := checkEvent(it.Event); err != nil {
				return fmt.Errorf("batch item %d: %w", i, err)
			}
			d.Events = append(d.Events, DeliveryEvent{ID: it.Event.ID, Type: it.Event.Type, Offset: it.Offset, Length: len(it.Body)})
		}
		return nil
	}
	var ev providers.Event
	var err error
	if src.EventID != nil {
		ev, err = providers.EventResolver{ID: src.EventID, Type: src.EventType}.Resolve(pr)
		if err == nil && src.EventType == nil {
			if pev, perr := src.Provider.Resolve(pr); perr == nil {
				ev.Type = pev.Type
			}
		}
	} else {
		ev, err = src.Provider.Resolve(pr)
		if err == nil && src.EventType != nil {
			ev.Type, err = src.EventType(pr)
		}
	}
	if err != nil {
		return err
	}
	if ev.ID == "" {
		return fmt.Errorf("%w: the event id resolved empty", providers.ErrNoEventID)
	}
	if err := checkEvent(ev); err != nil {
		return err
	}
	d.Events = []DeliveryEvent{{ID: ev.ID, Type: ev.Type, Length: -1}}
	return nil
}

// MaxEventIDBytes caps an event id. Postgres indexes (source, event_id) and
// River indexes the job's arguments; an index entry over ~2.7 KB fails the
// insert, and the sender would retry it for ever. Real ids are far shorter
// (Stripe ~30 bytes, composite ids ~100).
const MaxEventIDBytes = 1024

// checkEvent refuses, as a 400 naming the field, an event id or type that
// Postgres could not store: a NUL byte or invalid UTF-8 (text columns reject
// both), or an id past MaxEventIDBytes. Caught here, such a delivery never
// reaches a batch, so it cannot fail its batch-mates' transaction.
func checkEvent(ev providers.Event) error {
	for _, f := range [...]struct{ name, v string }{{"event id", ev.ID}, {"event type", ev.Type}} {
		switch {
		case !utf8.ValidString(f.v):
			return fmt.Errorf("%w: the %s is not valid UTF-8", providers.ErrMalformed, f.name)
		case strings.IndexByte(f.v, 0) >= 0:
			return fmt.Errorf("%w: the %s contains a NUL byte", providers.ErrMalformed, f.name)
		}
	}
	if len(ev.ID) > MaxEventIDBytes {
		return fmt.Errorf("%w: the event id is %d bytes long; hookline takes at most %d", providers.ErrMalformed, len(ev.ID), MaxEventIDBytes)
	}
	return nil
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
