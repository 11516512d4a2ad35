// Package jobs is hookline's worker side: the River job for one event at one
// destination, run inside a Postgres-row idempotency claim (package idem)
// keyed on (source, destination, event_id); delivery over HTTP or a Go
// handler in transactional mode; the dead set; and the periodic clean-up.
//
// One event job, step by step (EventWorker.Work):
//
//  1. The destination's gate, for destinations with a rate limit, an
//     in-flight cap or a circuit breaker (gate.go): wait, without spending
//     an attempt, until the destination may be called.
//  2. In one statement (atomic, one round trip): claim
//     "hookline:{source}:{destination}:{event_id}" (fenced by a token),
//     count the attempt and load the stored payload. It commits at once, so
//     every other worker sees the claim.
//  3. Keep the lease alive while the work runs.
//  4. Deliver (HTTP destination) or handle (Go handler, inside a
//     transaction).
//  5. Success: in one statement (inside the handler's transaction in
//     transactional mode), mark the claim completed (only if our token
//     still holds), the destination completed, the attempt logged, and the
//     River job removed (its record is the destination's). Failure:
//     release the claim and record the error; after the last attempt the
//     destination goes to the dead set with reason failed.
//
// A job that finds its key completed does not run the work (skip, or dead
// set with reason duplicate under on_duplicate: reject). A job that finds
// the key processing — held by an earlier attempt of itself that crashed, or
// by another job — snoozes until that lease can expire, then tries again.
package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/hookline/hookline/idem"
	"github.com/hookline/hookline/internal/defaults"
	"github.com/hookline/hookline/internal/metrics"
	"github.com/hookline/hookline/internal/tracing"
)

// Namespace is the first part of every event claim key.
const Namespace = "hookline"

// ClaimsTable is the idem table hookline's migrations create.
const ClaimsTable = "hookline_claims"

// EventWorker runs event jobs.
type EventWorker struct {
	river.WorkerDefaults[EventArgs]

	pool    *pgxpool.Pool
	claims  *idem.Store
	fwd     *Forwarder
	sources map[string]*Source
	gate    *gate
	wakes   *queueWaker // notifies the queues of jobs woken by completions
	batch   *batches    // group commit of claims and completions; nil: per event
	slots   attemptSlots
	tracer  trace.Tracer
	m       *metrics.Metrics
	log     *slog.Logger

	// stopping is WorkerConfig.Stopping.
	stopping <-chan struct{}

	// runner is River's id of the client running this worker (set once,
	// before the client starts): what a job taken by the worker itself
	// (chain.go) carries in attempted_by.
	runner string

	// The worker's own statements around idem's (whose SQL depends only on
	// the claims table), built on first use.
	claimSQL, completeSQL lazySQL
}

// lazySQL is a statement built once.
type lazySQL struct {
	once sync.Once
	sql  string
}

func (l *lazySQL) get(build func() string) string {
	l.once.Do(func() { l.sql = build() })
	return l.sql
}

// WorkerConfig configures an EventWorker.
type WorkerConfig struct {
	Pool    *pgxpool.Pool
	Sources []*Source
	// Registerer is where the metrics are registered (shared with ingest
	// when both run in one process); nil: a registry nobody serves.
	Registerer prometheus.Registerer
	Logger     *slog.Logger // nil: slog.Default()
	Forwarder  *Forwarder   // nil: NewForwarder()
	// Tracer starts each attempt's spans, in the trace its delivery was
	// received under; nil: spans with real ids that record nothing.
	Tracer trace.Tracer
	// PerEvent turns group commit off: each job claims and completes with
	// statements of its own (batch.go says what group commit does).
	PerEvent bool
	// Workers bounds the attempts running at once at each destination
	// (default 50; attemptSlots); group commit sizes its batches by the
	// jobs River runs for them (Target.riverJobs).
	Workers int
	// Stopping, closed when the process begins a graceful stop, ends every
	// chain (chain.go) at its current event: River's graceful stop lets
	// running jobs finish but tells them nothing, and a chain would
	// otherwise start new events for up to chainFor. nil: never.
	Stopping <-chan struct{}
	// Backlog, when set, is shown the worker's forward slots, so that its
	// Lag leaves out destinations whose slots are all busy.
	Backlog *Backlog
}

// NewEventWorker builds the worker.
func NewEventWorker(cfg WorkerConfig) (*EventWorker, error) {
	if cfg.Pool == nil {
		return nil, errors.New("jobs: WorkerConfig.Pool is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Forwarder == nil {
		cfg.Forwarder = NewForwarder()
	}
	m := metrics.For(cfg.Registerer)
	claims, err := idem.NewStore(cfg.Pool, &idem.Config{
		Table: ClaimsTable,
		Telemetry: &idem.Telemetry{
			Claimed:   func(ev idem.Event) { m.Idempotency.WithLabelValues(ev.Scope, "claimed").Inc() },
			Completed: func(ev idem.Event) { m.Idempotency.WithLabelValues(ev.Scope, "completed").Inc() },
		},
	})
	if err != nil {
		return nil, err
	}
	w := &EventWorker{pool: cfg.Pool, claims: claims, fwd: cfg.Forwarder, sources: map[string]*Source{}, m: m, log: cfg.Logger,
		gate: newGate(cfg.Pool), tracer: cfg.Tracer, stopping: cfg.Stopping}
	if w.tracer == nil {
		w.tracer = tracing.IDsOnly()
	}
	w.wakes = newQueueWaker(func(ctx context.Context, sql string, args ...any) error {
		_, err := cfg.Pool.Exec(ctx, sql, args...)
		return err
	}, queueFetchCooldown, cfg.Logger)
	if cfg.Workers <= 0 {
		cfg.Workers = defaults.Workers
	}
	mostJobs := cfg.Workers // the most River runs at once on one queue
	for _, s := range cfg.Sources {
		if err := s.withDefaults(); err != nil {
			return nil, err
		}
		w.sources[s.Name] = s
		for _, t := range s.Targets {
			mostJobs = max(mostJobs, t.riverJobs(cfg.Workers, cfg.PerEvent))
		}
	}
	if !cfg.PerEvent {
		w.batch = newBatches(cfg.Pool, claims, mostJobs, func() string { return w.runner }, w.wakes.Wake,
			func(kind string, n int) { m.WorkerBatch.WithLabelValues(kind).Observe(float64(n)) }, w.claimAhead)
	}
	w.slots = newAttemptSlots(cfg.Sources, cfg.Workers, m.SlotWait)
	if cfg.Backlog != nil {
		cfg.Backlog.watch(w.sources, w.slots)
	}
	return w, nil
}

// lookup returns the job's source and destination, nil when this worker
// does not know them.
func (w *EventWorker) lookup(job *river.Job[EventArgs]) (*Source, *Target) {
	src := w.sources[job.Args.Source]
	if src == nil {
		return nil, nil
	}
	return src, src.target(job.Args.Dest())
}

// Timeout implements river.Worker: a job may run for its destination's
// Timeout, by default its source's lease. River only rescues a stuck job
// whose kind has a positive timeout that has passed, so tying the timeout
// to the lease is what brings a crashed worker's event back: the claim
// lapses after the lease (nobody renews it), River's rescuer marks the job
// retryable once RescueStuckJobsAfter (the shortest lease, see RescueAfter)
// and this timeout have passed, and the retry takes the expired claim over —
// within lease + the rescuer's 30 s interval. Config validation keeps the
// lease longer than a destination's timeout, so a healthy attempt always
// finishes inside it.
func (w *EventWorker) Timeout(job *river.Job[EventArgs]) time.Duration {
	if _, t := w.lookup(job); t != nil {
		return t.Timeout
	}
	return idem.DefaultLease
}

// NextRetry implements river.Worker: exponential backoff from the
// destination's backoff.min, doubling per attempt, capped at backoff.max,
// with jitter (a random point in the upper half of the interval).
func (w *EventWorker) NextRetry(job *river.Job[EventArgs]) time.Time {
	_, t := w.lookup(job)
	if t == nil {
		return time.Now().Add(time.Minute)
	}
	return time.Now().Add(Backoff(t.BackoffMin, t.BackoffMax, job.Attempt))
}

// Backoff returns the delay before the attempt after attempt (1-based):
// minD doubled per attempt, up to maxD, plus up to half of it at random,
// never above maxD. So minD is a floor and maxD a ceiling.
func Backoff(minD, maxD time.Duration, attempt int) time.Duration {
	d := minD
	for i := 1; i < attempt && d < maxD; i++ {
		d *= 2
	}
	d = min(d, maxD)
	return min(d+time.Duration(rand.Int64N(int64(d/2)+1)), maxD)
}

// holder names the claim holder: the River job and its attempt.
func holder(job *river.Job[EventArgs]) string {
	return "job:" + strconv.FormatInt(job.ID, 10) + ":attempt:" + strconv.Itoa(job.Attempt)
}

// completeTimeout bounds recording a completion after the destination
// answered 2xx; it runs even when the job's context is done.
const completeTimeout = 15 * time.Second

// run is one job's attempt: the job, its source and destination, and, once
// claimed, the claim and the event.
type run struct {
	job   *river.Job[EventArgs]
	src   *Source
	t     *Target
	claim *idem.Claim
	ev    *Event
	start time.Time // when the destination was called

	// mayChain says whether the worker may still take its ordering line's
	// next job to run it itself (chain.go); next is that job, once taken,
	// nextStart its claim and attempt if they were taken with it, and
	// nextAfter the job expected to follow next in its line, as it will be
	// once taken (next's run predicts its claim: predicted).
	mayChain  func() bool
	next      *river.Job[EventArgs]
	nextStart *startRow
	nextAfter *river.Job[EventArgs]
	predicted *river.Job[EventArgs]
	// claimed is this job's claim and attempt, taken with the job itself
	// when the worker took it into a chain (nil: claim it now).
	claimed *startRow
	// jobDone: the completion statement removed the River job as well.
	jobDone bool
	// gateResult: the attempt's outcome was recorded in its destination's
	// gate (gate.result).
	gateResult bool
}

// Work implements river.Worker. Every way out ends the destination
// completed, in the dead set, or retried with backoff; nothing waits
// without bound: a snooze happens only while the key is held by a live
// lease, while the database is unreachable, while the destination's gate is
// closed (paused, circuit open, rate or in-flight limit), or while a live
// instance configures a source or destination this one does not (unknown).
//
// An ordered event's worker may go on with the next event of its line
// itself (chain.go) before it returns.
func (w *EventWorker) Work(ctx context.Context, job *river.Job[EventArgs]) error {
	until := time.Now().Add(chainFor)
	r := w.newRun(ctx, job, until)
	err := w.attempt(ctx, r)
	w.chain(ctx, r, until)
	return err
}

// attempt runs one attempt of r's job (Work, without the chain).
func (w *EventWorker) attempt(ctx context.Context, r *run) error {
	src, t := w.lookup(r.job)
	if t == nil {
		return w.unknown(ctx, r.job, src)
	}
	r.src, r.t = src, t
	if r.claimed == nil { // a claim taken ahead passed the gate then (claimAhead)
		if wait, err := w.gate.enter(ctx, r); err != nil || wait > 0 {
			return w.gateClosed(r, wait, err)
		}
		defer w.gate.leave(r)
	}

	// Claim, count the attempt and load the payload: one statement.
	claimStart := time.Now()
	if err := w.claimAndStart(ctx, r); err != nil {
		return w.notClaimed(ctx, r, err)
	}
	claimedAt := time.Now()
	ctx, span := w.startAttempt(ctx, r, claimStart)
	defer span.End()
	if w.log.Enabled(ctx, slog.LevelDebug) { // spares the hot path the arguments
		w.log.DebugContext(ctx, "claimed", "source", src.Name, "destination", t.Name, "event_id", r.ev.ID, "attempt", r.ev.Attempt)
	}
	if r.ev.Stale && src.StaleSkip {
		return w.skipStale(ctx, r)
	}

	// Keep the lease alive while the work runs.
	workCtx, stop := r.claim.KeepAlive(ctx)
	var workErr error
	if t.Handler != nil {
		workErr = w.handle(workCtx, r)
	} else {
		workErr = w.forward(ctx, workCtx, r)
	}
	leaseErr := stop()
	w.m.ClaimHold.WithLabelValues(src.Name).Observe(time.Since(claimedAt).Seconds())
	return w.outcome(ctx, r, workErr, leaseErr)
}

// startAttempt starts the attempt's span in the trace its delivery was
// received under (a trace of its own when there is none) and records the
// claim, which has just ended, as its first child.
func (w *EventWorker) startAttempt(ctx context.Context, r *run, claimStart time.Time) (context.Context, trace.Span) {
	if r.ev.traceParent != nil {
		ctx = tracing.ContextWith(ctx, *r.ev.traceParent)
	}
	ctx, span := w.tracer.Start(ctx, "attempt", trace.WithTimestamp(claimStart), trace.WithSpanKind(trace.SpanKindConsumer))
	if span.IsRecording() {
		span.SetAttributes(attribute.String("hookline.source", r.src.Name), attribute.String("hookline.destination", r.t.Name),
			attribute.String("hookline.event_id", r.ev.ID), attribute.Int("hookline.attempt", r.ev.Attempt))
		_, claim := w.tracer.Start(ctx, "claim", trace.WithTimestamp(claimStart))
		claim.End()
	}
	return ctx, span
}

// outcome ends an attempt that ran: completed, lost to another holder,
// delivered but unrecorded, or failed.
func (w *EventWorker) outcome(ctx context.Context, r *run, workErr, leaseErr error) error {
	var delivered *deliveredError
	switch {
	case workErr == nil:
		w.gate.result(ctx, r, nil)
		return nil
	case errors.Is(workErr, idem.ErrLeaseLost) || errors.Is(leaseErr, idem.ErrLeaseLost):
		// Another attempt took the key over after our lease expired: it owns
		// the outcome now. Our effects (transactional mode) were rolled back.
		w.log.WarnContext(ctx, "lease lost; the new holder finishes the event", "source", r.src.Name, "destination", r.t.Name, "event_id", r.ev.ID)
		return nil
	case errors.As(workErr, &delivered):
		// The destination has the event; only our record of it failed. A 2xx
		// is final: never the dead set. River retries the job with backoff;
		// the next attempt forwards again (at-least-once) and completes.
		w.gate.result(ctx, r, nil)
		w.log.WarnContext(ctx, "delivered, but the completion could not be recorded; the event will be forwarded again",
			"source", r.src.Name, "destination", r.t.Name, "event_id", r.ev.ID, "error", delivered.err.Error())
		_ = r.claim.Release(context.WithoutCancel(ctx), nil)
		return workErr
	case stopped(ctx):
		// This worker is stopping (a deploy's SIGTERM past its deadline) and
		// cancelled the attempt: not the destination's failure.
		// The forward may have reached the destination: the attempt stays
		// in its count.
		return w.interrupted(ctx, r, "this worker was stopping", true, workErr)
	case errors.Is(workErr, errNoSlot):
		// The attempt never reached the destination (attemptSlots).
		return w.interrupted(ctx, r, "no forward slot", false, workErr)
	case errors.Is(workErr, errPausedMeanwhile):
		return w.interrupted(ctx, r, "destination paused", false, workErr)
	}
	w.gate.result(ctx, r, workErr)
	return w.fail(ctx, r, workErr)
}

// skipStale completes a stale event without forwarding it (ordering.stale:
// skip): its place in the line ends, and the line's greatest ordering.by
// stays as it is.
func (w *EventWorker) skipStale(ctx context.Context, r *run) error {
	r.start = time.Now()
	err := w.complete(ctx, w.pool, r, 0, SkippedStale)
	switch {
	case errors.Is(err, idem.ErrLeaseLost):
		return nil
	case err != nil:
		_ = r.claim.Release(context.WithoutCancel(ctx), nil)
		return err
	}
	w.m.Deliveries.WithLabelValues(r.src.Name, r.t.Name, "skipped").Inc()
	w.log.InfoContext(ctx, "stale event skipped: an event of its ordering key with a greater ordering.by was already forwarded",
		"source", r.src.Name, "destination", r.t.Name, "event_id", r.ev.ID, "order_key", r.ev.OrderKey)
	return nil
}

// SkippedStale is why a stale event was completed without being forwarded
// (the lookup's "skipped").
const SkippedStale = "stale"

// unknown handles a job whose source or destination this worker does not
// know (a job of the queue all workers share, written before destinations
// had queues of their own): left to a worker that does while another
// instance keeps its destination's queue (orphans.go), dead otherwise.
func (w *EventWorker) unknown(ctx context.Context, job *river.Job[EventArgs], src *Source) error {
	what := fmt.Sprintf("source %q", job.Args.Source)
	if src != nil {
		what = fmt.Sprintf("destination %q of source %q", job.Args.Dest(), job.Args.Source)
	}
	age := time.Since(job.CreatedAt)
	k, err := keptElsewhere(ctx, w.pool, QueueFor(job.Args.Source, job.Args.Dest()))
	if err != nil {
		w.log.Warn("could not read which instances configure "+what+"; snoozing", "event_id", job.Args.EventID, "error", err.Error())
		return river.JobSnooze(10 * time.Second)
	}
	// Kept for a grace by no live instance running it: no longer than its
	// events' own bound allows.
	capped := k.bound > 0 && age >= boundCap(k.bound)
	if age < orphanGrace || k.runs || (!capped && (k.protects || (k.configures && age < unknownSourceGrace))) {
		w.log.Warn(what+" not configured on this worker; snoozing", "event_id", job.Args.EventID)
		return river.JobSnooze(10 * time.Second)
	}
	if k.configures {
		return w.deadUnclaimed(ctx, job, fmt.Errorf("%s is not configured on this worker, and no worker that configures it took the job in time (%s, or the bound of its events' wait); deploy it to the workers and retry the dead item", what, unknownSourceGrace))
	}
	return w.deadUnclaimed(ctx, job, fmt.Errorf("%s is not configured on any running instance (removed from the configuration?); add it back and retry the dead item", what))
}

// gateClosed snoozes a job the destination's gate did not let through: no
// attempt is spent. A gate that could not be asked (the database) is tried
// again shortly.
func (w *EventWorker) gateClosed(r *run, wait time.Duration, err error) error {
	if err != nil {
		wait = Backoff(time.Second, 10*time.Second, 2)
		w.log.Warn("destination gate unavailable; snoozing", "source", r.src.Name, "destination", r.t.Name, "error", err.Error())
	}
	return river.JobSnooze(max(wait, 10*time.Millisecond))
}

// deliveredError is a completion that could not be recorded after the
// destination answered 2xx.
type deliveredError struct{ err error }

func (e *deliveredError) Error() string {
	return "delivered, but recording the completion failed: " + e.err.Error()
}
func (e *deliveredError) Unwrap() error { return e.err }

// forward posts the event to the destination and, on a 2xx, records the
// completion on a context of its own: a 2xx is final, so its record must
// not be lost to the job's cancellation or timeout.
func (w *EventWorker) forward(jobCtx, workCtx context.Context, r *run) error {
	r.start = time.Now() // post restarts it once a slot is free
	status, err := w.slots.forward(workCtx, r.t, func() (int, error) { return w.postIfOpen(workCtx, r) })
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(jobCtx), completeTimeout)
	defer cancel()
	if err := w.complete(ctx, w.pool, r, status, ""); err != nil {
		if errors.Is(err, idem.ErrLeaseLost) {
			return err
		}
		return &deliveredError{err}
	}
	w.m.Deliveries.WithLabelValues(r.src.Name, r.t.Name, "success").Inc()
	return nil
}

// postIfOpen is post, unless the destination was paused since its gate let
// the attempt through (before the claim, and maybe before a wait for a
// forward slot): then errPausedMeanwhile, and nothing is sent.
func (w *EventWorker) postIfOpen(workCtx context.Context, r *run) (int, error) {
	if w.gate.isPaused(workCtx, r.src.Name, r.t.Name) {
		return 0, errPausedMeanwhile
	}
	return w.post(workCtx, r)
}

// post sends the event to the destination: its status, or why it failed.
func (w *EventWorker) post(workCtx context.Context, r *run) (int, error) {
	r.start = time.Now()
	fctx, span := w.tracer.Start(workCtx, "forward", trace.WithSpanKind(trace.SpanKindClient))
	status, err := w.fwd.Forward(fctx, r.t.HTTP, r.ev)
	if span.IsRecording() {
		span.SetAttributes(semconv.HTTPRequestMethodKey.String(http.MethodPost))
		if status > 0 {
			span.SetAttributes(semconv.HTTPResponseStatusCode(status))
		}
		if err != nil {
			span.SetStatus(codes.Error, CleanText(err.Error(), maxErrorBytes))
		}
	}
	span.End()
	w.m.DestSeconds.WithLabelValues(r.src.Name).Observe(time.Since(r.start).Seconds())
	return status, err
}
