package jobs

import (
	"context"
	"errors"
	"time"

	"github.com/hookline/hookline/internal/defaults"
)

// attemptSlots bound the forwards running at once to each HTTP destination
// to the process's workers. With group commit River runs more jobs than
// that on an HTTP destination's queue (jobsPerWorker): a job spends most of
// its life waiting for the batch that takes its claim and the one that
// records its completion, and those waits hold no slot, so they no longer
// hold the destination's concurrency. Each destination has slots of its
// own, so a slow one never takes another's. A Go handler's queue runs no
// more jobs than workers (its job holds its place through its own
// transaction), so it needs none.
type attemptSlots map[*Target]chan struct{}

func newAttemptSlots(sources []*Source, workers int) attemptSlots {
	s := attemptSlots{}
	for _, src := range sources {
		for _, t := range src.Targets {
			if t.Handler == nil {
				s[t] = make(chan struct{}, workers)
			}
		}
	}
	return s
}

// errNoSlot is an attempt that found no free slot while its job still had
// the time to run a whole forward: it did not start, and does not count.
var errNoSlot = errors.New("no forward slot of this worker came free while the job had time left for a whole forward; not counted, will retry")

// forward runs post in one of t's slots, once one is free and while ctx
// leaves post its whole timeout; otherwise it returns errNoSlot, or ctx's
// error if ctx ends first (a stop).
func (s attemptSlots) forward(ctx context.Context, t *Target, post func() (int, error)) (int, error) {
	slot := s[t]
	if slot == nil { // not a destination of the worker's sources
		return post()
	}
	select {
	case slot <- struct{}{}:
	default:
		wait := ctx
		if deadline, ok := ctx.Deadline(); ok {
			var cancel context.CancelFunc
			wait, cancel = context.WithDeadline(ctx, deadline.Add(-forwardTimeout(t.HTTP)))
			defer cancel()
		}
		select {
		case slot <- struct{}{}:
		case <-wait.Done():
			if ctx.Err() != nil {
				return 0, context.Cause(ctx)
			}
			return 0, errNoSlot
		}
	}
	defer func() { <-slot }()
	return post()
}

// forwardTimeout is how long one forward to d may take.
func forwardTimeout(d *Destination) time.Duration {
	if d == nil || d.Timeout <= 0 {
		return defaults.DestTimeout
	}
	return d.Timeout
}
