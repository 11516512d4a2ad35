package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/riverqueue/river"
)

// Chains: a worker that ends an event's place in an ordering line with
// group commit may take the line's next job in the same transaction —
// straight from pending to running, for this worker (takePendingJobsSQL) —
// and run it itself, instead of waking it for River to fetch. One event of
// a hot key then costs the destination's round trip and the claim's and
// the completion's commits, without a notification, a fetch and the
// fetch's commit in between. The order and the
// one-at-a-time rule of the line are unchanged: the next job is taken only
// once the place before it has ended, in the transaction that ends it.
//
// A taken job is an ordinary running River job whose outcome the worker
// records as River's executor would (finishRunningJob); if the worker dies
// meanwhile, River's rescuer retries it like any job the worker had
// fetched (crash takeover: lease + 30 s). A chain ends after chainFor (the
// line's next job is then woken for any worker, as without chains), when
// the River job's context is done (shutdown), or when a line has no next
// job waiting.

// chainFor bounds how long one River job's worker goes on with the next
// events of its line: River's client waits for it on a graceful stop.
const chainFor = 2 * time.Second

// newRun starts a run of job that may take its line's next job until
// chainUntil, while ctx is not done.
func (w *EventWorker) newRun(ctx context.Context, job *river.Job[EventArgs], chainUntil time.Time) *run {
	return &run{job: job, mayChain: func() bool { return ctx.Err() == nil && time.Now().Before(chainUntil) }}
}

// chain runs the jobs r's worker took from its line, one after another,
// and records each one's outcome in River; it takes no more after until.
func (w *EventWorker) chain(ctx context.Context, r *run, until time.Time) {
	for next, claimed := r.next, r.nextStart; next != nil; {
		jobCtx, cancel := chainedContext(ctx, w.Timeout(next))
		cr := w.newRun(jobCtx, next, until)
		cr.claimed = claimed
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
		next, claimed = cr.next, cr.nextStart
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
