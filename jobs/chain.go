package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/riverqueue/river"
)

// Chains: with group commit, the worker that completes an event takes its
// next job in the transaction of that completion and runs it itself:
//
//   - an ordered event's: the line's next job, straight from pending to
//     running (takePendingJobsSQL), instead of waking it for River to
//     fetch. The order and the one-at-a-time rule of the line are
//     unchanged: the next job is taken only once the place before it has
//     ended, in the transaction that ends it;
//   - an unordered event's: an available job of the destination's queue,
//     as River's fetch would take it (takeAvailableJobsSQL: River's order,
//     rows locked by others skipped, nothing from a paused queue), starting
//     where the worker's last take of the queue ended (takeCursor), and
//     only when its claim can be taken with it (no gate to ask, not paused).
//
// When the destination needs no gate, the same transaction takes the next
// job's claim and starts its attempt (claimAhead): in a second round trip,
// or in the completion's own when the job was known beforehand — the
// advance that takes a line's job answers the pending job of the place
// after it, whose claim the next completion then sends with its statements
// (claimTakenManyStartSQL takes it only if that transaction did take the
// job for this worker). One event then costs the destination's round trip
// and one transaction, without River's fetch, a claim batch and their
// commits in between; each chain runs inside the
// River job slot of the job it started with, so River's job count still
// bounds the jobs running, and the forward slots (attemptSlots) the forwards.
//
// A taken job is an ordinary running River job whose outcome the worker
// records as River's executor would (finishRunningJob); if the worker dies
// meanwhile, River's rescuer retries it like any job the worker had
// fetched (crash takeover: lease + 30 s). A chain ends after chainFor (the
// line's next job is then woken for any worker, as without chains), when
// the River job's context is done or the process begins to stop
// (WorkerConfig.Stopping), or when a line has no next job waiting.

// chainFor bounds how long one River job's worker goes on with the next
// events of its line: River's client waits for it on a graceful stop.
const chainFor = 2 * time.Second

// newRun starts a run of job that may take its line's next job until
// chainUntil, while ctx is not done.
func (w *EventWorker) newRun(ctx context.Context, job *river.Job[EventArgs], chainUntil time.Time) *run {
	return &run{job: job, mayChain: func() bool { return ctx.Err() == nil && time.Now().Before(chainUntil) && !w.isStopping() }}
}

// isStopping reports whether the process has begun a graceful stop.
func (w *EventWorker) isStopping() bool {
	select {
	case <-w.stopping:
		return true
	default:
		return false
	}
}

// chain runs the jobs r's worker took from its line, one after another,
// and records each one's outcome in River; it takes no more after until.
func (w *EventWorker) chain(ctx context.Context, r *run, until time.Time) {
	for next, claimed, after := r.next, r.nextStart, r.nextAfter; next != nil; {
		jobCtx, cancel := chainedContext(ctx, w.Timeout(next))
		cr := w.newRun(jobCtx, next, until)
		cr.claimed, cr.predicted = claimed, after
		started := time.Now()
		err := w.attemptRecovering(jobCtx, cr)
		cancel()
		if err != nil || !cr.jobDone {
			fctx, fcancel := context.WithTimeout(context.WithoutCancel(ctx), completeTimeout)
			if ferr := finishRunningJob(fctx, w.pool, next.JobRow, started, err, w.NextRetry(next)); ferr != nil {
				w.log.Warn("could not record a chained job's outcome in River; River's rescuer will retry the job",
					"job_id", next.ID, "event_id", next.Args.EventID, "error", ferr.Error())
			}
			fcancel()
		}
		next, claimed, after = cr.next, cr.nextStart, cr.nextAfter
	}
}

// attemptRecovering is attempt, with a panic returned as an error (River's
// executor does the same for the jobs it runs).
func (w *EventWorker) attemptRecovering(ctx context.Context, r *run) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
			w.log.Error("chained job panicked", "job_id", r.job.ID, "event_id", r.job.Args.EventID, "panic", fmt.Sprint(p))
		}
	}()
	return w.attempt(ctx, r)
}

// chainedContext is the context of a job taken into a chain: parent's
// values, the job's own timeout, and cancelled with parent unless parent
// merely ran out of its own (the first job's) time.
func chainedContext(parent context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(parent), timeout)
	stop := context.AfterFunc(parent, func() {
		if !errors.Is(context.Cause(parent), context.DeadlineExceeded) {
			cancel()
		}
	})
	return ctx, func() { stop(); cancel() }
}
