// Package jobs is hookline's worker side: the River job for one event, run
// inside a Postgres-row idempotency claim (package idem) keyed on
// (source, event_id); destination delivery over HTTP or a Go handler in
// transactional mode; the dead set; and the periodic clean-up.
//
// One event job, step by step (EventWorker.Work):
//
//  1. In one transaction: claim "hookline:{source}:{event_id}" (fenced by a
//     token), count the attempt and load the stored payload. Commit, so every
//     other worker sees the claim.
//  2. Keep the lease alive while the work runs.
//  3. Deliver (HTTP destination) or handle (Go handler, inside a transaction).
//  4. Success: in one transaction, mark the claim completed (only if our
//     token still holds), the event completed, and the River job completed.
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
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/hookline/hookline/idem"
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
}

// WorkerConfig configures an EventWorker.
type WorkerConfig struct {
	Pool      *pgxpool.Pool
	Sources   []*Source
	Metrics   *metrics.Metrics // nil: a fresh set
	Logger    *slog.Logger     // nil: slog.Default()
	Forwarder *Forwarder       // nil: NewForwarder()
}

// NewEventWorker builds the worker.
func NewEventWorker(cfg WorkerConfig) (*EventWorker, error) {
	if cfg.Pool == nil {
		return nil, errors.New("jobs: WorkerConfig.Pool is required")
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.New()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Forwarder == nil {
		cfg.Forwarder = NewForwarder()
	}
	m := cfg.Metrics
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
		if s.MaxAttempts <= 0 {
			s.MaxAttempts = 10
		}
		if s.Lease <= 0 {
			s.Lease = idem.DefaultLease
		}
		if s.DedupWindow <= 0 {
			s.DedupWindow = idem.DefaultDedupWindow
		}
		if s.Timeout <= 0 {
			s.Timeout = s.Lease
		}
		if s.BackoffMin <= 0 {
			s.BackoffMin = time.Second
		}
		if s.BackoffMax <= 0 {
			s.BackoffMax = time.Hour
		}
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

// Work implements river.Worker.
func (w *EventWorker) Work(ctx context.Context, job *river.Job[EventArgs]) error {
	src := w.sources[job.Args.Source]
	if src == nil {
		// Not cancelled: during a rolling deploy that adds a source, a worker
		// with the old configuration must leave the event to one that has it.
		w.log.Warn("source not configured on this worker; snoozing", "source", job.Args.Source, "event_id", job.Args.EventID)
		return river.JobSnooze(30 * time.Second)
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

	// 1. Claim, count the attempt and load the payload in one transaction.
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
	var dup *idem.DuplicateError
	switch {
	case errors.As(err, &dup):
		return w.duplicate(ctx, job, src, dup)
	case errors.Is(err, errNoEvent):
		return river.JobCancel(err)
	case err != nil:
		// Nothing was claimed and no attempt counted (the transaction rolled
		// back): most likely the database is unreachable. Snooze, which
		// costs no River attempt, instead of burning the job's budget.
		wait := Backoff(time.Second, 10*time.Second, 2)
		w.log.Warn("could not claim; snoozing", "source", src.Name, "event_id", job.Args.EventID, "error", err.Error(), "snooze", wait.Round(time.Millisecond))
		return river.JobSnooze(wait)
	}
	claimedAt := time.Now()
	w.log.Debug("claimed", "source", src.Name, "event_id", ev.ID, "attempt", ev.Attempt, "holder", opts.Holder)

	if ev.budgetAttempt > src.MaxAttempts {
		// The budget was used up by an attempt whose failure could not be
		// recorded (the database went away): dead-set it now, without
		// calling the destination again.
		return w.fail(ctx, src, claim, job, ev, fmt.Errorf("attempts ran out (%d); the last error could not be recorded", src.MaxAttempts))
	}

	// 2. Keep the lease alive while the work runs.
	workCtx, stop := claim.KeepAlive(ctx)

	// 3 and 4.
	var workErr error
	if src.Handler != nil {
		workErr = w.handle(workCtx, src, claim, job, ev)
	} else {
		start := time.Now()
		workErr = w.fwd.Forward(workCtx, src.Destination, ev)
		w.m.DestSeconds.WithLabelValues(src.Name).Observe(time.Since(start).Seconds())
		if workErr == nil {
			w.m.Deliveries.WithLabelValues(src.Name, "success").Inc()
			workErr = pgx.BeginFunc(ctx, w.pool, func(tx pgx.Tx) error {
				return w.complete(ctx, tx, src, claim, job)
			})
		}
	}
	leaseErr := stop()
	w.m.ClaimHold.WithLabelValues(src.Name).Observe(time.Since(claimedAt).Seconds())
	if workErr == nil {
		return nil
	}
	if errors.Is(workErr, idem.ErrLeaseLost) || errors.Is(leaseErr, idem.ErrLeaseLost) {
		// Another attempt took the key over after our lease expired: it owns
		// the outcome now. Our effects (transactional mode) were rolled back.
		w.log.Warn("lease lost; the new holder finishes the event", "source", src.Name, "event_id", ev.ID, "holder", opts.Holder)
		return nil
	}
	return w.fail(ctx, src, claim, job, ev, workErr)
}

// handle runs a Go handler in transactional mode: its writes, the claim's
// completed mark and the River job's completion commit together.
func (w *EventWorker) handle(ctx context.Context, src *Source, claim *idem.Claim, job *river.Job[EventArgs], ev *Event) error {
	return pgx.BeginFunc(ctx, w.pool, func(tx pgx.Tx) error {
		if err := src.Handler.Handle(ctx, tx, ev); err != nil {
			return err
		}
		w.m.Deliveries.WithLabelValues(src.Name, "success").Inc()
		return w.complete(ctx, tx, src, claim, job)
	})
}

// complete marks claim, event and River job completed inside tx, and takes
// the event out of the dead set (a provider retry or operator replay of a
// dead event that has now succeeded).
func (w *EventWorker) complete(ctx context.Context, tx pgx.Tx, src *Source, claim *idem.Claim, job *river.Job[EventArgs]) error {
	if err := claim.Complete(ctx, tx); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `WITH e AS (
			UPDATE hookline_events SET state = 'completed', completed_at = now(),
				dedup_until = now() + $3::bigint * interval '1 microsecond', last_error = NULL
			WHERE source = $1 AND event_id = $2)
		DELETE FROM hookline_dead WHERE source = $1 AND event_id = $2 AND reason = 'failed'`,
		src.Name, job.Args.EventID, src.DedupWindow.Microseconds()); err != nil {
		return fmt.Errorf("mark completed: %w", err)
	}
	_, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
	return err
}

// fail releases the claim and records the error; after the budget's last
// attempt the event goes to the dead set (reason failed).
func (w *EventWorker) fail(ctx context.Context, src *Source, claim *idem.Claim, job *river.Job[EventArgs], ev *Event, workErr error) error {
	ctx = context.WithoutCancel(ctx) // record the outcome even during shutdown
	final := ev.budgetAttempt >= src.MaxAttempts
	msg := truncate(workErr.Error(), 1000)
	err := pgx.BeginFunc(ctx, w.pool, func(tx pgx.Tx) error {
		if err := claim.Release(ctx, tx); err != nil {
			return err
		}
		if !final {
			_, err := tx.Exec(ctx, `UPDATE hookline_events SET state = 'queued', last_error = $3 WHERE source = $1 AND event_id = $2`,
				src.Name, ev.ID, msg)
			return err
		}
		if _, err := tx.Exec(ctx, `WITH e AS (
				UPDATE hookline_events SET state = 'dead', last_error = $3 WHERE source = $1 AND event_id = $2)
			INSERT INTO hookline_dead (source, event_id, event_type, reason, attempts, last_error, delivery_id, content_type, headers, payload)
			VALUES ($1, $2, $4, 'failed', $5, $3, $6, $7, $8, $9)`,
			src.Name, ev.ID, msg, ev.Type, ev.Attempt, ev.DeliveryID, ev.ContentType, headersJSON(ev.Headers), ev.Body); err != nil {
			return err
		}
		// Finish the River job in the same transaction: the moment the event
		// is dead, its job no longer counts as active, so a provider's
		// re-delivery is accepted as a new job (CONTRACT.md §6) instead of
		// racing River's asynchronous completion. The event's outcome lives in
		// hookline_events and the dead set; River records the job completed.
		_, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
		return err
	})
	if errors.Is(err, idem.ErrLeaseLost) {
		return nil // someone else holds the key now
	}
	if err != nil {
		return fmt.Errorf("record failure (%v): %w", workErr, err)
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
	_, err := w.pool.Exec(ctx, `INSERT INTO hookline_dead (source, event_id, event_type, reason, attempts, last_error, delivery_id, content_type, headers, payload)
		SELECT e.source, e.event_id, e.event_type, 'duplicate', e.attempts, 'event already completed (on_duplicate: reject)', e.delivery_id, d.content_type, d.headers,
			CASE WHEN e.item_offset IS NULL THEN d.body ELSE substring(d.body FROM e.item_offset + 1 FOR e.item_length) END
		FROM hookline_events e JOIN hookline_deliveries d ON d.id = e.delivery_id
		WHERE e.source = $1 AND e.event_id = $2`, src.Name, job.Args.EventID)
	return err
}

var errNoEvent = errors.New("event not found in hookline_events (was it pruned?)")

// startAttempt counts an attempt (over the event's life, and within the
// budget of job jobID) and loads the event's payload.
func startAttempt(ctx context.Context, tx pgx.Tx, source, eventID string, jobID int64) (*Event, error) {
	ev := &Event{Source: source, ID: eventID}
	var headers []byte
	err := tx.QueryRow(ctx, `WITH e AS (
			UPDATE hookline_events SET state = 'processing', attempts = attempts + 1,
				job_attempts = CASE WHEN job_id = $3 THEN job_attempts + 1 ELSE 1 END, job_id = $3
			WHERE source = $1 AND event_id = $2
			RETURNING attempts, job_attempts, event_type, delivery_id, item_offset, item_length)
		SELECT e.attempts, e.job_attempts, e.event_type, e.delivery_id, d.content_type, d.headers, d.received_at,
			CASE WHEN e.item_offset IS NULL THEN d.body ELSE substring(d.body FROM e.item_offset + 1 FOR e.item_length) END
		FROM e JOIN hookline_deliveries d ON d.id = e.delivery_id`, source, eventID, jobID).
		Scan(&ev.Attempt, &ev.budgetAttempt, &ev.Type, &ev.DeliveryID, &ev.ContentType, &headers, &ev.ReceivedAt, &ev.Body)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, errNoEvent
	}
	if err != nil {
		return nil, err
	}
	ev.Headers = http.Header{}
	_ = json.Unmarshal(headers, &ev.Headers)
	return ev, nil
}

func headersJSON(h http.Header) []byte {
	b, _ := json.Marshal(h)
	return b
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
