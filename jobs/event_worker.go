// Package jobs is hookline's worker side: the River job for one event, run
// inside a Postgres-row idempotency claim (package idem) keyed on
// (source, event_id); destination delivery over HTTP or a Go handler in
// transactional mode; the dead set; and the periodic clean-up.
//
// One event job, step by step (EventWorker.Work):
//
//  1. In one statement (atomic, one round trip): claim
//     "hookline:{source}:{event_id}" (fenced by a token), count the attempt
//     and load the stored payload. It commits at once, so every other worker
//     sees the claim.
//  2. Keep the lease alive while the work runs.
//  3. Deliver (HTTP destination) or handle (Go handler, inside a transaction).
//  4. Success: in one statement (inside the handler's transaction in
//     transactional mode), mark the claim completed (only if our token still
//     holds), the event completed, and the River job completed.
//     Failure: release the claim and record the error; after the last
//     attempt the event goes to the dead set with reason failed.
//
// A job that finds its key completed does not run the work (skip, or dead
// set with reason duplicate under on_duplicate: reject). A job that finds
// the key processing — held by an earlier attempt of itself that crashed, or
// by another job — snoozes until that lease can expire, then tries again.
package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/hookline/hookline/idem"
	"github.com/hookline/hookline/internal/dberr"
	"github.com/hookline/hookline/internal/metrics"
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
	m       *metrics.Metrics
	log     *slog.Logger

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
	w := &EventWorker{pool: cfg.Pool, claims: claims, fwd: cfg.Forwarder, sources: map[string]*Source{}, m: m, log: cfg.Logger}
	for _, s := range cfg.Sources {
		if s.Destination == nil && s.Handler == nil {
			return nil, fmt.Errorf("jobs: source %q has neither a destination nor a handler", s.Name)
		}
		s.withDefaults()
		w.sources[s.Name] = s
	}
	return w, nil
}

// Timeout implements river.Worker: a job may run for its source's Timeout,
// by default its lease.
// River only rescues a stuck job whose kind has a positive timeout that has
// passed, so tying the timeout to the lease is what brings a crashed
// worker's event back: the claim lapses after the lease (nobody renews it),
// River's rescuer marks the job retryable once RescueStuckJobsAfter (the
// shortest lease, see RescueAfter) and this timeout have passed, and the
// retry takes the expired claim over — within lease + the rescuer's 30 s
// interval. Config validation keeps lease longer than destination.timeout,
// so a healthy attempt always finishes inside it.
func (w *EventWorker) Timeout(job *river.Job[EventArgs]) time.Duration {
	if src := w.sources[job.Args.Source]; src != nil {
		return src.Timeout
	}
	return idem.DefaultLease
}

// NextRetry implements river.Worker: exponential backoff from the source's
// backoff.min, doubling per attempt, capped at backoff.max, with jitter (a
// random point in the upper half of the interval).
func (w *EventWorker) NextRetry(job *river.Job[EventArgs]) time.Time {
	src := w.sources[job.Args.Source]
	if src == nil {
		return time.Now().Add(time.Minute)
	}
	return time.Now().Add(Backoff(src.BackoffMin, src.BackoffMax, job.Attempt))
}

// Backoff returns the delay before the attempt after attempt (1-based).
func Backoff(minD, maxD time.Duration, attempt int) time.Duration {
	d := minD
	for i := 1; i < attempt && d < maxD; i++ {
		d *= 2
	}
	d = min(d, maxD)
	half := d / 2
	return half + time.Duration(rand.Int64N(int64(half)+1))
}

// holder names the claim holder: the River job and its attempt.
func holder(job *river.Job[EventArgs]) string {
	return "job:" + strconv.FormatInt(job.ID, 10) + ":attempt:" + strconv.Itoa(job.Attempt)
}

// unknownSourceGrace is how long a job whose source this worker does not
// know is left for a worker that does (a rolling deploy that adds a source)
// before its event goes to the dead set.
const unknownSourceGrace = time.Minute

// completeTimeout bounds recording a completion after the destination
// answered 2xx; it runs even when the job's context is done.
const completeTimeout = 15 * time.Second

// Work implements river.Worker. Every way out ends the event completed, in
// the dead set, or retried with backoff; nothing waits without bound: a
// snooze happens only while the key is held by a live lease, while the
// database is unreachable, or during unknownSourceGrace.
func (w *EventWorker) Work(ctx context.Context, job *river.Job[EventArgs]) error {
	src := w.sources[job.Args.Source]
	if src == nil {
		if time.Since(job.CreatedAt) < unknownSourceGrace {
			w.log.Warn("source not configured on this worker; snoozing", "source", job.Args.Source, "event_id", job.Args.EventID)
			return river.JobSnooze(10 * time.Second)
		}
		return w.deadUnclaimed(ctx, job, fmt.Errorf("source %q is not configured on this worker (removed from the configuration?); add it back and retry the dead item", job.Args.Source))
	}
	opts := idem.Options{
		Namespace:               Namespace,
		Scope:                   src.Name,
		Segment:                 job.Args.EventID,
		Holder:                  holder(job),
		Lease:                   src.Lease,
		DedupWindow:             src.DedupWindow,
		OverrideCompletedBefore: job.Args.OverrideBefore,
	}

	// 1. Claim, count the attempt and load the payload: one statement.
	claim, ev, err := w.claimAndStart(ctx, src, job, opts)
	var dup *idem.DuplicateError
	switch {
	case errors.As(err, &dup):
		return w.duplicate(ctx, job, src, dup)
	case errors.Is(err, errNoEvent):
		return w.noEvent(ctx, job)
	case err != nil && permanent(err):
		return w.deadUnclaimed(ctx, job, fmt.Errorf("could not claim the event: %w", err))
	case err != nil:
		// Nothing was claimed and no attempt counted: the database is
		// unreachable or busy. Snooze, which costs no River attempt,
		// instead of burning the job's budget.
		wait := Backoff(time.Second, 10*time.Second, 2)
		w.log.Warn("could not claim; snoozing", "source", src.Name, "event_id", job.Args.EventID, "error", err.Error(), "snooze", wait.Round(time.Millisecond))
		return river.JobSnooze(wait)
	}
	claimedAt := time.Now()
	w.log.Debug("claimed", "source", src.Name, "event_id", ev.ID, "attempt", ev.Attempt, "holder", opts.Holder)

	// 2. Keep the lease alive while the work runs. 3 and 4.
	workCtx, stop := claim.KeepAlive(ctx)
	var workErr error
	if src.Handler != nil {
		workErr = w.handle(workCtx, src, claim, job, ev)
	} else {
		workErr = w.forward(ctx, workCtx, src, claim, job, ev)
	}
	leaseErr := stop()
	w.m.ClaimHold.WithLabelValues(src.Name).Observe(time.Since(claimedAt).Seconds())
	var delivered *deliveredError
	switch {
	case workErr == nil:
		return nil
	case errors.Is(workErr, idem.ErrLeaseLost) || errors.Is(leaseErr, idem.ErrLeaseLost):
		// Another attempt took the key over after our lease expired: it owns
		// the outcome now. Our effects (transactional mode) were rolled back.
		w.log.Warn("lease lost; the new holder finishes the event", "source", src.Name, "event_id", ev.ID, "holder", opts.Holder)
		return nil
	case errors.As(workErr, &delivered):
		// The destination has the event; only our record of it failed. A 2xx
		// is final: never the dead set. River retries the job with backoff;
		// the next attempt forwards again (at-least-once) and completes.
		w.log.Warn("delivered, but the completion could not be recorded; the event will be forwarded again", "source", src.Name, "event_id", ev.ID, "error", delivered.err.Error())
		_ = claim.Release(context.WithoutCancel(ctx), nil)
		return workErr
	}
	return w.fail(ctx, src, claim, job, ev, workErr)
}

// deliveredError is a completion that could not be recorded after the
// destination answered 2xx.
type deliveredError struct{ err error }

func (e *deliveredError) Error() string {
	return "delivered, but recording the completion failed: " + e.err.Error()
}
func (e *deliveredError) Unwrap() error { return e.err }

// forward posts the event to the source's destination and, on a 2xx,
// records the completion on a context of its own: a 2xx is final, so its
// record must not be lost to the job's cancellation or timeout.
func (w *EventWorker) forward(jobCtx, workCtx context.Context, src *Source, claim *idem.Claim, job *river.Job[EventArgs], ev *Event) error {
	start := time.Now()
	err := w.fwd.Forward(workCtx, src.Destination, ev)
	w.m.DestSeconds.WithLabelValues(src.Name).Observe(time.Since(start).Seconds())
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(jobCtx), completeTimeout)
	defer cancel()
	if err := w.complete(ctx, w.pool, src, claim, job); err != nil {
		if errors.Is(err, idem.ErrLeaseLost) {
			return err
		}
		return &deliveredError{err}
	}
	w.m.Deliveries.WithLabelValues(src.Name, "success").Inc()
	return nil
}

// claimError marks an error that trying again cannot fix: the claim's key
// or options are refused (a blank event id stored by an older release).
type claimError struct{ err error }

func (e *claimError) Error() string { return e.err.Error() }
func (e *claimError) Unwrap() error { return e.err }

// permanent reports whether a claim failed for a reason that will recur on
// every try: a key idem refuses, or a statement Postgres refuses for the
// data's sake. Losing the connection, a timeout or a deadlock are not.
func permanent(err error) bool {
	var ce *claimError
	if errors.As(err, &ce) {
		return true
	}
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && !dberr.Unavailable(err)
}

// handle runs a Go handler in transactional mode: its writes, the claim's
// completed mark and the River job's completion commit together.
func (w *EventWorker) handle(ctx context.Context, src *Source, claim *idem.Claim, job *river.Job[EventArgs], ev *Event) error {
	err := pgx.BeginFunc(ctx, w.pool, func(tx pgx.Tx) error {
		if err := src.Handler.Handle(ctx, tx, ev); err != nil {
			return err
		}
		return w.complete(ctx, tx, src, claim, job)
	})
	if err == nil {
		w.m.Deliveries.WithLabelValues(src.Name, "success").Inc()
	}
	return err
}

// complete marks claim, event and River job completed, and takes the event
// out of the dead set (a provider retry or operator replay of a dead event
// that has now succeeded), in ONE statement (completeSQL): atomic on its
// own, so the HTTP-destination path needs no explicit transaction; in
// transactional mode it runs inside the handler's transaction. If the
// claim's token no longer holds, nothing changes and the error wraps
// idem.ErrLeaseLost.
func (w *EventWorker) complete(ctx context.Context, q idem.DB, src *Source, claim *idem.Claim, job *river.Job[EventArgs]) error {
	st := claim.CompleteStatement()
	sql := w.completeSQL.get(func() string { return completeSQL(st.SQL, len(st.Args)) })
	args := append(st.Args, src.Name, job.Args.EventID, src.DedupWindow.Microseconds(), job.ID)
	var n int64
	if err := q.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
		return fmt.Errorf("mark completed: %w", err)
	}
	return claim.ReportCompleted(n)
}

// fail releases the claim and records the error; after the budget's last
// attempt the event goes to the dead set (reason failed). The next attempt
// follows the backoff (River's NextRetry), not the lease: the release is
// recorded with the error, and should the error text itself be refused, it
// is recorded again as a plain notice.
func (w *EventWorker) fail(ctx context.Context, src *Source, claim *idem.Claim, job *river.Job[EventArgs], ev *Event, workErr error) error {
	ctx = context.WithoutCancel(ctx) // record the outcome even during shutdown
	final := ev.budgetAttempt >= src.MaxAttempts
	msg := CleanText(workErr.Error(), maxErrorBytes)
	err := w.recordFailure(ctx, src, claim, job, ev, msg, final)
	if err != nil && !errors.Is(err, idem.ErrLeaseLost) && !dberr.Unavailable(err) {
		w.log.Warn("could not record the attempt's error; recording a notice instead", "source", src.Name, "event_id", ev.ID, "error", err.Error())
		err = w.recordFailure(ctx, src, claim, job, ev, "the attempt failed; its error could not be recorded (see the worker's log)", final)
	}
	if errors.Is(err, idem.ErrLeaseLost) {
		return nil // someone else holds the key now
	}
	if err != nil {
		return fmt.Errorf("record failure (%s): %w", msg, err)
	}
	if final {
		w.m.Deliveries.WithLabelValues(src.Name, "dead").Inc()
		w.log.Warn("event dead: attempts ran out", "source", src.Name, "event_id", ev.ID, "attempts", ev.Attempt, "error", msg)
		return nil
	}
	w.m.Deliveries.WithLabelValues(src.Name, "failure").Inc()
	w.log.Info("attempt failed; will retry", "source", src.Name, "event_id", ev.ID, "attempt", ev.Attempt, "error", msg)
	return workErr
}

// recordFailure releases the claim and records msg, in one transaction;
// final moves the event to the dead set and finishes its River job.
func (w *EventWorker) recordFailure(ctx context.Context, src *Source, claim *idem.Claim, job *river.Job[EventArgs], ev *Event, msg string, final bool) error {
	return pgx.BeginFunc(ctx, w.pool, func(tx pgx.Tx) error {
		if err := claim.Release(ctx, tx); err != nil {
			return err
		}
		if !final {
			_, err := tx.Exec(ctx, stmt.markRetry, src.Name, ev.ID, msg)
			return err
		}
		if _, err := tx.Exec(ctx, stmt.markDead, src.Name, ev.ID, msg, ev.Type, ev.Attempt, ev.DeliveryID, ev.ContentType, headersJSON(ev), ev.Body); err != nil {
			return err
		}
		// Finish the River job in the same transaction: the moment the event
		// is dead, its job no longer counts as active, so a provider's
		// re-delivery is accepted as a new job instead of racing River's
		// asynchronous completion. The event's outcome lives in
		// hookline_events and the dead set; River records the job completed.
		_, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
		return err
	})
}

// deadUnclaimed moves the job's event to the dead set (reason failed) with
// cause, without a claim: the claim cannot be taken for a reason that will
// not go away, or the source is gone from the configuration. The dead item
// copies the stored payload (empty if it was pruned). An event that is not
// waiting (already completed or dead) is left as it is. The River job is
// finished either way.
func (w *EventWorker) deadUnclaimed(ctx context.Context, job *river.Job[EventArgs], cause error) error {
	ctx = context.WithoutCancel(ctx)
	msg := CleanText(cause.Error(), maxErrorBytes)
	var n int64
	err := pgx.BeginFunc(ctx, w.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, stmt.deadUnclaimed, job.Args.Source, job.Args.EventID, msg)
		if err != nil {
			return err
		}
		n = tag.RowsAffected()
		_, err = river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
		return err
	})
	if err != nil {
		return fmt.Errorf("move event to the dead set (%s): %w", msg, err)
	}
	if n > 0 {
		w.m.Deliveries.WithLabelValues(job.Args.Source, "dead").Inc()
		w.log.Error("event dead: it cannot be processed", "source", job.Args.Source, "event_id", job.Args.EventID, "error", msg)
	}
	return nil
}

// noEvent handles a job whose event has no row, or no stored payload. With
// no row there is nothing to do (the job is cancelled). A waiting event
// whose delivery is gone cannot be forwarded: dead set.
func (w *EventWorker) noEvent(ctx context.Context, job *river.Job[EventArgs]) error {
	var exists bool
	if err := w.pool.QueryRow(ctx, stmt.eventExists, job.Args.Source, job.Args.EventID).Scan(&exists); err != nil {
		return fmt.Errorf("look up event: %w", err)
	}
	if !exists {
		return river.JobCancel(errNoEvent)
	}
	return w.deadUnclaimed(ctx, job, errors.New("the event's stored delivery is missing; nothing to forward"))
}

// duplicate handles a job whose key is held: completed → skip or dead set
// (reject); processing → snooze until that lease can have expired.
func (w *EventWorker) duplicate(ctx context.Context, job *river.Job[EventArgs], src *Source, dup *idem.DuplicateError) error {
	if dup.State == idem.StateProcessing {
		// Held by an earlier attempt of this same job that crashed (its
		// lease runs out since nobody renews it), or by another job. Either
		// way, wait for the lease and try again; a snooze costs no attempt.
		wait := time.Until(dup.ExpiresAt) + 500*time.Millisecond
		if wait < time.Second {
			wait = time.Second
		}
		own := strings.HasPrefix(dup.Holder, "job:"+strconv.FormatInt(job.ID, 10)+":")
		w.log.Info("event is being processed elsewhere; snoozing", "source", src.Name, "event_id", job.Args.EventID,
			"holder", dup.Holder, "own_earlier_attempt", own, "snooze", wait.Round(time.Millisecond))
		return river.JobSnooze(wait)
	}
	w.m.Idempotency.WithLabelValues(src.Name, "duplicate").Inc()
	if !src.Reject {
		w.log.Info("event already completed; skipped", "source", src.Name, "event_id", job.Args.EventID)
		return nil
	}
	// The stored delivery may have been pruned (retention) while the event
	// is within its dedup window: the item is written all the same, with an
	// empty payload.
	_, err := w.pool.Exec(ctx, stmt.deadDuplicate, src.Name, job.Args.EventID)
	return err
}

var errNoEvent = errors.New("event not found in hookline_events (was it pruned?)")

// claimAndStart claims the event's key, counts the attempt and loads the
// payload in ONE statement (claimStartSQL): no explicit transaction, one
// round trip, and it commits on its own, so every other worker sees the claim.
// A refused claim (the key is held) changes nothing; it is then retried the
// long way (claimAndStartTx), which reports the *idem.DuplicateError, or
// takes the key if it became free in between.
func (w *EventWorker) claimAndStart(ctx context.Context, src *Source, job *river.Job[EventArgs], opts idem.Options) (*idem.Claim, *Event, error) {
	st, err := w.claims.ClaimStatement(opts)
	if err != nil {
		return nil, nil, &claimError{err}
	}
	sql := w.claimSQL.get(func() string { return claimStartSQL(st.SQL, len(st.Args)) })
	args := append(st.Args, src.Name, job.Args.EventID, job.ID)
	var (
		token       int64
		expiresAt   time.Time
		attempts    *int
		ev          = &Event{Source: src.Name, ID: job.Args.EventID}
		eventType   *string
		deliveryID  *int64
		contentType *string
		receivedAt  *time.Time
	)
	err = w.pool.QueryRow(ctx, sql, args...).Scan(&token, &expiresAt, &attempts, &ev.budgetAttempt, &eventType,
		&deliveryID, &contentType, &ev.rawHeaders, &receivedAt, &ev.Body)
	if errors.Is(err, pgx.ErrNoRows) {
		return w.claimAndStartTx(ctx, src, job, opts)
	}
	if err != nil {
		return nil, nil, err
	}
	claim, err := w.claims.ClaimFromRow(opts, token, expiresAt)
	if err != nil {
		return nil, nil, &claimError{err}
	}
	if attempts == nil {
		// Claimed, but there is no event (or no delivery) to work on: give
		// the key back.
		_ = claim.Release(context.WithoutCancel(ctx), nil)
		return nil, nil, errNoEvent
	}
	ev.Attempt, ev.Type, ev.DeliveryID, ev.ContentType, ev.ReceivedAt = *attempts, *eventType, *deliveryID, *contentType, *receivedAt
	if src.Handler != nil {
		ev.Headers = decodeHeaders(ev.rawHeaders)
	}
	return claim, ev, nil
}

// claimAndStartTx is the long way of claimAndStart, for a key that was held
// a moment ago: claim, count the attempt and load the payload in one
// transaction.
func (w *EventWorker) claimAndStartTx(ctx context.Context, src *Source, job *river.Job[EventArgs], opts idem.Options) (*idem.Claim, *Event, error) {
	var claim *idem.Claim
	var ev *Event
	err := pgx.BeginFunc(ctx, w.pool, func(tx pgx.Tx) error {
		var err error
		if claim, err = w.claims.Claim(ctx, tx, opts); err != nil {
			return err
		}
		ev, err = startAttempt(ctx, tx, src.Name, job.Args.EventID, job.ID)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return claim, ev, nil
}

// startAttempt counts an attempt and loads the event's payload
// (startAttemptSQL), under a claim taken earlier in tx.
func startAttempt(ctx context.Context, tx pgx.Tx, source, eventID string, jobID int64) (*Event, error) {
	ev := &Event{Source: source, ID: eventID}
	var headers []byte
	err := tx.QueryRow(ctx, startSQL, source, eventID, jobID).
		Scan(&ev.Attempt, &ev.budgetAttempt, &ev.Type, &ev.DeliveryID, &ev.ContentType, &headers, &ev.ReceivedAt, &ev.Body)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, errNoEvent
	}
	if err != nil {
		return nil, err
	}
	ev.rawHeaders = headers
	ev.Headers = decodeHeaders(headers)
	return ev, nil
}

func decodeHeaders(raw []byte) http.Header {
	h := http.Header{}
	_ = json.Unmarshal(raw, &h)
	return h
}

// headersJSON returns the stored headers of ev for its dead item.
func headersJSON(ev *Event) []byte {
	if ev.rawHeaders != nil {
		return ev.rawHeaders
	}
	b, _ := json.Marshal(ev.Headers)
	return b
}

// maxErrorBytes bounds an event's recorded last error.
const maxErrorBytes = 1000

// CleanText returns s as Postgres text and a reader can take it: invalid
// UTF-8 and NUL bytes become U+FFFD, and at most n bytes are kept, cut at a
// rune boundary ("…" marks the cut, within n).
func CleanText(s string, n int) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if strings.IndexByte(s, 0) >= 0 {
		s = strings.ReplaceAll(s, "\x00", "\uFFFD")
	}
	if len(s) <= n {
		return s
	}
	const ellipsis = "…"
	cut := max(n-len(ellipsis), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ellipsis
}
