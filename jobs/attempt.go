package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/hookline/hookline/idem"
	"github.com/hookline/hookline/internal/dberr"
	"github.com/hookline/hookline/internal/groupcommit"
	"github.com/hookline/hookline/internal/tracing"
)

// The steps of one attempt around the destination call: claim and start,
// complete, fail, and the ways a job ends without an attempt.

// claimOptions are the idem options of the job's claim: its key is
// hookline:{source}:{destination}:{event_id}.
func claimOptions(r *run) idem.Options {
	return idem.Options{
		Namespace:               Namespace,
		Scope:                   r.src.Name,
		Segment:                 r.t.Name + ":" + r.job.Args.EventID,
		Holder:                  holder(r.job),
		Lease:                   r.src.Lease,
		DedupWindow:             r.src.DedupWindow,
		OverrideCompletedBefore: r.job.Args.OverrideBefore,
	}
}

// ClaimKeyPrefix is the start of the claim keys of a source's events:
// ClaimKeyPrefix(source) + destination + ":" + event_id.
func ClaimKeyPrefix(source string) string {
	return Namespace + idem.KeySeparator + source + idem.KeySeparator
}

// notClaimed ends a job whose claim was not taken: the key held (a
// duplicate), no such destination row, a claim no try can take (dead), or
// the database unreachable (snooze, which costs no attempt).
func (w *EventWorker) notClaimed(ctx context.Context, r *run, err error) error {
	var dup *idem.DuplicateError
	switch {
	case errors.As(err, &dup):
		return w.duplicate(ctx, r, dup)
	case errors.Is(err, errNoEvent):
		return w.noEvent(ctx, r.job)
	case permanent(err):
		return w.deadUnclaimed(ctx, r.job, fmt.Errorf("could not claim the event: %w", err))
	}
	wait := Backoff(time.Second, 10*time.Second, 2)
	w.log.Warn("could not claim; snoozing", "source", r.src.Name, "destination", r.t.Name, "event_id", r.job.Args.EventID,
		"error", err.Error(), "snooze", wait.Round(time.Millisecond))
	return river.JobSnooze(wait)
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

var errNoEvent = errors.New("the event's destination is not stored (was it pruned?)")

// claimAndStart claims the key, counts the attempt and loads the payload in
// ONE statement: the job's own (claimStartSQL), or its batch's
// (claimManyStartSQL, group commit). No explicit transaction, one round
// trip, and it commits on its own, so every other worker sees the claim. A
// refused claim (the key is held) changes nothing; it is then retried the
// long way (claimAndStartTx), which reports the *idem.DuplicateError, or
// takes the key if it became free in between.
func (w *EventWorker) claimAndStart(ctx context.Context, r *run) error {
	if strings.TrimSpace(r.job.Args.EventID) == "" {
		// Ingest refuses blank ids; one stored by an older release names no
		// event a claim could tell apart.
		return &claimError{fmt.Errorf("%w: the event id is blank", idem.ErrEmptySegment)}
	}
	opts := claimOptions(r)
	st, err := w.claims.ClaimStatement(opts)
	if err != nil {
		return &claimError{err}
	}
	row, err := w.claimRow(ctx, r, opts, st)
	if err != nil {
		return err
	}
	if row == nil {
		return w.claimAndStartTx(ctx, r, opts)
	}
	claim, err := w.claims.ClaimFromRow(opts, row.token, row.expiresAt)
	if err != nil {
		return &claimError{err}
	}
	ev, ok := row.event(r)
	if !ok {
		// Claimed, but there is nothing to work on: give the key back.
		_ = claim.Release(context.WithoutCancel(ctx), nil)
		return errNoEvent
	}
	if r.t.Handler != nil {
		ev.Headers = decodeHeaders(ev.rawHeaders)
	}
	r.claim, r.ev = claim, ev
	return nil
}

// claimRow takes the claim and starts the attempt: in a batch when group
// commit is on and the claim has no override, else (or when the batch
// failed as a whole, which changed nothing) with the job's own statement.
// nil, nil: the claim was refused.
func (w *EventWorker) claimRow(ctx context.Context, r *run, opts idem.Options, st idem.Statement) (*startRow, error) {
	if r.claimed != nil {
		row := r.claimed
		r.claimed = nil
		return row, nil
	}
	if w.batch != nil && opts.OverrideCompletedBefore.IsZero() {
		row, err := w.batch.claims.Do(ctx, newClaimItem(r, st))
		if !groupcommit.IsBatchError(err) {
			return row, err
		}
		w.log.Warn("claim batch failed; claiming on its own", "source", r.src.Name, "event_id", r.job.Args.EventID, "error", err.Error())
	}
	sql := w.claimSQL.get(func() string { return claimStartSQL(st.SQL, len(st.Args)) })
	row := &startRow{}
	err := w.pool.QueryRow(ctx, sql, append(st.Args, r.src.Name, r.job.Args.EventID, r.t.Name, r.job.ID)...).Scan(row.targets()...)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return row, nil
}

// newClaimItem is r's claim (st: its claim statement) for a claim batch.
func newClaimItem(r *run, st idem.Statement) claimItem {
	return claimItem{key: st.Args[0].(string), holder: st.Args[1].(string), leaseUS: st.Args[2].(int64),
		source: r.src.Name, eventID: r.job.Args.EventID, dest: r.t.Name, jobID: r.job.ID, attempt: int32(r.job.Attempt)}
}

// claimAhead is the claim of a job the worker took into a chain, to be
// taken in the transaction that took the job (batch.go: claimAhead), or
// false when the job must claim the usual way: a destination whose gate
// must be asked first (rate limit, in-flight cap, circuit breaker), an
// operator's override, or a job this worker cannot claim at all. The
// caller checked the pause.
func (w *EventWorker) claimAhead(job *river.Job[EventArgs]) (claimItem, bool) {
	src, t := w.lookup(job)
	if t == nil || t.flowControlled() || !job.Args.OverrideBefore.IsZero() || strings.TrimSpace(job.Args.EventID) == "" {
		return claimItem{}, false
	}
	r := &run{job: job, src: src, t: t}
	st, err := w.claims.ClaimStatement(claimOptions(r))
	if err != nil {
		return claimItem{}, false
	}
	return newClaimItem(r, st), true
}

// newEvent is the event the job works on, before its payload is loaded.
func (r *run) newEvent() *Event {
	return &Event{Source: r.src.Name, ID: r.job.Args.EventID, Destination: r.t.Name}
}

// claimAndStartTx is the long way of claimAndStart, for a key that was held
// a moment ago: claim, count the attempt and load the payload in one
// transaction.
func (w *EventWorker) claimAndStartTx(ctx context.Context, r *run, opts idem.Options) error {
	return pgx.BeginFunc(ctx, w.pool, func(tx pgx.Tx) error {
		claim, err := w.claims.Claim(ctx, tx, opts)
		if err != nil {
			return err
		}
		ev := r.newEvent()
		var headers []byte
		var o lineColumns
		err = tx.QueryRow(ctx, startSQL, r.src.Name, r.job.Args.EventID, r.t.Name, r.job.ID).
			Scan(&ev.Attempt, &ev.budgetAttempt, &ev.Type, &ev.DeliveryID, &ev.ContentType, &headers, &ev.ReceivedAt, &ev.Body,
				&ev.Origin, &o.key, &o.inLine, &o.by, &o.byKind, &o.stale, &ev.traceParent)
		if errors.Is(err, pgx.ErrNoRows) {
			return errNoEvent
		}
		if err != nil {
			return err
		}
		ev.rawHeaders = headers
		ev.Headers = decodeHeaders(headers)
		o.apply(ev)
		r.claim, r.ev = claim, ev
		return nil
	})
}

// handle runs a Go handler in transactional mode: its writes, the claim's
// completed mark and the River job's removal commit together.
func (w *EventWorker) handle(ctx context.Context, r *run) error {
	r.start = time.Now()
	err := pgx.BeginFunc(ctx, w.pool, func(tx pgx.Tx) error {
		if err := r.t.Handler.Handle(ctx, tx, r.ev); err != nil {
			return err
		}
		return w.complete(ctx, tx, r, 0, "")
	})
	if err == nil {
		w.m.Deliveries.WithLabelValues(r.src.Name, r.t.Name, "success").Inc()
	}
	return err
}

// complete marks claim and destination completed, removes the River job,
// logs the attempt (status: the destination's answer, 0 for a Go handler),
// and takes the destination out of the dead set (a provider retry or
// operator replay that has now succeeded), in ONE statement (completeSQL):
// atomic on its own, so the HTTP path needs no explicit transaction; in
// transactional mode it runs inside the handler's transaction. If the
// claim's token no longer holds, nothing changes and the error wraps
// idem.ErrLeaseLost.
//
// An event with a place in an ordering line ends its place in the same
// transaction: the line is locked first and advanced last (endPlace).
// skipped ("stale", or "" when forwarded) records why it was not forwarded.
func (w *EventWorker) complete(ctx context.Context, q sender, r *run, status int, skipped string) error {
	ctx, span := tracing.Step(ctx, w.tracer, "complete")
	defer span.End()
	st := r.claim.CompleteStatement()
	sql := w.completeSQL.get(func() string { return completeSQL(st.SQL, len(st.Args)) })
	var skip *string
	if skipped != "" {
		skip = &skipped
	}
	args := append(st.Args, r.src.Name, r.job.Args.EventID, r.t.Name, r.src.DedupWindow.Microseconds(), r.job.ID,
		r.ev.Attempt, status, time.Since(r.start).Milliseconds(), "", skip)
	n, done, err := w.completeInBatch(ctx, q, r, st, status, skip)
	switch {
	case done:
	case r.ev.line != nil:
		var woke bool
		n, woke, err = endPlace(ctx, q, r.src.Name, r.t.Name, r.ev.ID, r.ev.line, sql, args)
		if woke {
			w.wakes.Wake(QueueFor(r.src.Name, r.t.Name))
		}
	case r.ev.offLine != nil && skip == nil:
		n, err = completeOffLine(ctx, q, r.src.Name, r.t.Name, r.ev.ID, r.ev.offLine, sql, args)
	default:
		err = q.QueryRow(ctx, sql, args...).Scan(&n)
	}
	if err != nil {
		return fmt.Errorf("mark completed: %w", err)
	}
	if err := r.claim.ReportCompleted(n); err != nil {
		return err
	}
	r.jobDone = true // the statement removed the River job too
	return nil
}

// completeInBatch records the completion in a batch (group commit) when it
// is on and q is the pool (not a handler's transaction); done is false
// when the job's own statement must do it: group commit off, the key
// twice in the batch, or the batch failed as a whole (which changed
// nothing).
func (w *EventWorker) completeInBatch(ctx context.Context, q sender, r *run, st idem.Statement, status int, skip *string) (n int64, done bool, err error) {
	if _, inTx := q.(pgx.Tx); inTx || w.batch == nil || r.ev.offLine != nil {
		// An ordered event forwarded outside its line (rare: an operator's
		// retry) raises its line's greatest by in its own statements.
		return 0, false, nil
	}
	// The next job runs here (chain.go): the line's next for an ordered
	// event, with its claim taken too unless the destination's gate must be
	// asked first (the next job is of the same source and destination); an
	// available job of the destination's queue for an unordered one, or an
	// ordered one whose line has none, only where its claim can be taken
	// with it.
	chain := r.mayChain()
	claimNext := chain && !r.t.flowControlled() && !w.gate.isPaused(ctx, r.src.Name, r.t.Name)
	if r.ev.line == nil {
		chain = claimNext
	}
	var predicted *claimItem
	if claimNext && r.ev.line != nil && r.predicted != nil {
		if it, ok := w.claimAhead(r.predicted); ok {
			predicted = &it
		}
	}
	out, err := w.batch.completions.Do(ctx, completeItem{key: st.Args[0].(string), token: st.Args[1].(int64), dedupUS: st.Args[2].(int64),
		source: r.src.Name, eventID: r.job.Args.EventID, dest: r.t.Name, destDedupUS: r.src.DedupWindow.Microseconds(), jobID: r.job.ID,
		n: int32(r.ev.Attempt), status: int32(status), durationMS: int32(min(time.Since(r.start).Milliseconds(), math.MaxInt32)), skipped: skip,
		line: r.ev.line, chain: chain, claimNext: claimNext, predicted: predicted})
	r.next, r.nextStart, r.nextAfter = out.next, out.nextStart, out.after
	switch {
	case groupcommit.IsBatchError(err):
		w.log.Warn("completion batch failed; completing on its own", "source", r.src.Name, "event_id", r.ev.ID, "error", err.Error())
		return 0, false, nil
	case err != nil:
		return 0, true, err
	case out.completion == completionDone:
		return 1, true, nil
	case out.completion == completionLost:
		return 0, true, nil
	}
	return 0, false, nil // completionSkipped
}

// sender runs statements and batches: the pool or a transaction.
type sender interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	batchSender
}

// fail releases the claim and records the error; after the budget's last
// attempt the destination goes to the dead set (reason failed). The next
// attempt follows the backoff (River's NextRetry), or the destination's
// Retry-After, not the lease: the release is recorded with the error, and
// should the error text itself be refused, it is recorded again as a plain
// notice.
func (w *EventWorker) fail(ctx context.Context, r *run, workErr error) error {
	ctx = context.WithoutCancel(ctx) // record the outcome even during shutdown
	final := r.ev.budgetAttempt >= r.t.MaxAttempts
	msg := CleanText(workErr.Error(), maxErrorBytes)
	trace.SpanFromContext(ctx).SetStatus(codes.Error, msg)
	ctx, span := tracing.Step(ctx, w.tracer, "record failure")
	defer span.End()
	err := w.recordFailure(ctx, r, workErr, msg, final)
	if err != nil && !errors.Is(err, idem.ErrLeaseLost) && !dberr.Unavailable(err) {
		w.log.WarnContext(ctx, "could not record the attempt's error; recording a notice instead", "source", r.src.Name, "event_id", r.ev.ID, "error", err.Error())
		err = w.recordFailure(ctx, r, workErr, "the attempt failed; its error could not be recorded (see the worker's log)", final)
	}
	if errors.Is(err, idem.ErrLeaseLost) {
		return nil // someone else holds the key now
	}
	if err != nil {
		return fmt.Errorf("record failure (%s): %w", msg, err)
	}
	log := []any{"source", r.src.Name, "destination", r.t.Name, "event_id", r.ev.ID, "attempt", r.ev.Attempt, "error", msg}
	if final {
		w.m.Deliveries.WithLabelValues(r.src.Name, r.t.Name, "dead").Inc()
		w.log.WarnContext(ctx, "event dead: attempts ran out", log...)
		return nil
	}
	w.m.Deliveries.WithLabelValues(r.src.Name, r.t.Name, "failure").Inc()
	w.log.InfoContext(ctx, "attempt failed; will retry", log...)
	var de *DestinationError
	if errors.As(workErr, &de) && de.RetryAfter > 0 {
		// The destination said when: the next attempt waits until then
		// instead of the backoff (a snooze: the attempt was counted).
		return river.JobSnooze(min(de.RetryAfter, maxRetryAfter))
	}
	return workErr
}

// stopped: ctx was cancelled by the worker's own stop (River's
// StopAndCancel, or a chain's parent job cancelled), not by the attempt's
// timeout.
func stopped(ctx context.Context) bool {
	return ctx.Err() != nil && !errors.Is(context.Cause(ctx), context.DeadlineExceeded)
}

// interrupted records an attempt this worker cut short by stopping, or
// that never reached the destination (no forward slot, paused meanwhile):
// the claim released, the error logged in the attempts log, and the attempt
// given back to the budget, so a deploy never spends an event's attempts,
// opens its destination's circuit or puts it in the dead set. An attempt
// that never reached the destination (reached false) is given back to the
// destination's attempts count too: the next one carries the same number.
// River retries the job (or its rescuer does, should the process exit
// first).
func (w *EventWorker) interrupted(ctx context.Context, r *run, why string, reached bool, workErr error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), interruptedTimeout)
	defer cancel()
	note := " (the attempt may have reached the destination; not charged to the budget)"
	if !reached {
		note = " (the attempt never reached the destination and does not count)"
	}
	msg := CleanText("interrupted: "+why+note+": "+workErr.Error(), maxErrorBytes)
	err := pgx.BeginFunc(ctx, w.pool, func(tx pgx.Tx) error {
		if err := r.claim.Release(ctx, tx); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, stmt.markInterrupted, r.src.Name, r.ev.ID, r.t.Name, msg, r.ev.Attempt, 0, time.Since(r.start).Milliseconds(), msg, reached)
		return err
	})
	if err != nil && !errors.Is(err, idem.ErrLeaseLost) {
		w.log.WarnContext(ctx, "could not record an interrupted attempt; its claim expires after the lease", "source", r.src.Name,
			"destination", r.t.Name, "event_id", r.ev.ID, "error", err.Error())
	}
	w.log.InfoContext(ctx, "attempt interrupted ("+why+"); not charged to the budget, will retry", "source", r.src.Name,
		"destination", r.t.Name, "event_id", r.ev.ID, "attempt", r.ev.Attempt)
	return workErr
}

// interruptedTimeout bounds recording an interrupted attempt: the process
// is stopping.
const interruptedTimeout = 3 * time.Second

// maxRetryAfter caps how long a destination's Retry-After delays the next
// attempt.
const maxRetryAfter = time.Hour

// recordFailure releases the claim and records msg and the attempt, in one
// transaction; final moves the destination to the dead set and finishes
// its River job.
func (w *EventWorker) recordFailure(ctx context.Context, r *run, workErr error, msg string, final bool) error {
	status := 0
	var de *DestinationError
	if errors.As(workErr, &de) {
		status = de.Status
	}
	dur := time.Since(r.start).Milliseconds()
	ev := r.ev
	return pgx.BeginFunc(ctx, w.pool, func(tx pgx.Tx) error {
		if final && ev.line != nil {
			// The last attempt ends the event's place in its line.
			if err := lockLine(ctx, tx, r.src.Name, r.t.Name, ev.line.key); err != nil {
				return err
			}
		}
		if err := r.claim.Release(ctx, tx); err != nil {
			return err
		}
		if !final {
			_, err := tx.Exec(ctx, stmt.markRetry, r.src.Name, ev.ID, r.t.Name, msg, ev.Attempt, status, dur, msg)
			return err
		}
		if _, err := tx.Exec(ctx, stmt.markDead, r.src.Name, ev.ID, r.t.Name, msg, ev.Attempt, status, dur, msg,
			ev.Type, ev.DeliveryID, ev.ContentType, headersJSON(ev), ev.Body); err != nil {
			return err
		}
		// Finish the River job in the same transaction: the moment the
		// destination is dead, its job no longer counts as active, so a
		// provider's re-delivery is accepted as a new job instead of racing
		// River's asynchronous completion.
		if _, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, r.job); err != nil {
			return err
		}
		if ev.line != nil {
			return advanceLine(ctx, tx, r.src.Name, r.t.Name, ev.line.key)
		}
		return nil
	})
}

// deadUnclaimed moves the job's destination to the dead set (reason failed)
// with cause, without a claim: the claim cannot be taken for a reason that
// will not go away, or the source or destination is gone from the
// configuration. The dead item copies the stored payload (empty if it was
// pruned). A destination that is not waiting (already completed or dead) is
// left as it is. The River job is finished either way.
func (w *EventWorker) deadUnclaimed(ctx context.Context, job *river.Job[EventArgs], cause error) error {
	ctx = context.WithoutCancel(ctx)
	msg := CleanText(cause.Error(), maxErrorBytes)
	src, dest, id := job.Args.Source, job.Args.Dest(), job.Args.EventID
	var key *string // the destination's ordering line, if it has a place in one
	if err := w.pool.QueryRow(ctx, lineOfSQL, src, id, dest).Scan(&key); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("look up the event's ordering line: %w", err)
	}
	var n int64
	err := pgx.BeginFunc(ctx, w.pool, func(tx pgx.Tx) error {
		if key != nil {
			if err := lockLine(ctx, tx, src, dest, *key); err != nil {
				return err
			}
		}
		tag, err := tx.Exec(ctx, stmt.deadUnclaimed, src, id, dest, msg)
		if err != nil {
			return err
		}
		n = tag.RowsAffected()
		if _, err = river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job); err != nil {
			return err
		}
		if key != nil {
			return advanceLine(ctx, tx, src, dest, *key)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("move event to the dead set (%s): %w", msg, err)
	}
	if n > 0 {
		w.m.Deliveries.WithLabelValues(job.Args.Source, job.Args.Dest(), "dead").Inc()
		w.log.Error("event dead: it cannot be processed", "source", job.Args.Source, "destination", job.Args.Dest(),
			"event_id", job.Args.EventID, "error", msg)
	}
	return nil
}

// noEvent handles a job whose destination row is missing, or whose stored
// payload is. With no row there is nothing to do (the job is cancelled). A
// waiting destination whose delivery is gone cannot be forwarded: dead set.
func (w *EventWorker) noEvent(ctx context.Context, job *river.Job[EventArgs]) error {
	var exists bool
	if err := w.pool.QueryRow(ctx, stmt.destinationExists, job.Args.Source, job.Args.EventID, job.Args.Dest()).Scan(&exists); err != nil {
		return fmt.Errorf("look up event: %w", err)
	}
	if !exists {
		return river.JobCancel(errNoEvent)
	}
	return w.deadUnclaimed(ctx, job, errors.New("the event's stored delivery is missing; nothing to forward"))
}

// duplicate handles a job whose key is held: completed → skip or dead set
// (reject); processing → snooze until that lease can have expired.
func (w *EventWorker) duplicate(ctx context.Context, r *run, dup *idem.DuplicateError) error {
	job := r.job
	if dup.State == idem.StateProcessing {
		// Held by an earlier attempt of this same job that crashed (its
		// lease runs out since nobody renews it), or by another job. Either
		// way, wait for the lease and try again; a snooze costs no attempt.
		wait := max(time.Until(dup.ExpiresAt)+500*time.Millisecond, time.Second)
		own := strings.HasPrefix(dup.Holder, "job:"+strconv.FormatInt(job.ID, 10)+":")
		w.log.Info("event is being processed elsewhere; snoozing", "source", r.src.Name, "destination", r.t.Name,
			"event_id", job.Args.EventID, "holder", dup.Holder, "own_earlier_attempt", own, "snooze", wait.Round(time.Millisecond))
		return river.JobSnooze(wait)
	}
	w.m.Idempotency.WithLabelValues(r.src.Name, "duplicate").Inc()
	if !r.src.Reject {
		w.log.Info("event already completed; skipped", "source", r.src.Name, "destination", r.t.Name, "event_id", job.Args.EventID)
		return nil
	}
	// The stored delivery may have been pruned (retention) while the
	// destination is within its dedup window: the item is written all the
	// same, with an empty payload.
	_, err := w.pool.Exec(ctx, stmt.deadDuplicate, r.src.Name, job.Args.EventID, r.t.Name)
	return err
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

// maxErrorBytes bounds a recorded last error.
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
