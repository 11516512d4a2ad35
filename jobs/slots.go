package jobs

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

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
//
// Every forward reports how long it waited for its slot (0 when one was
// free) to hookline_forward_slot_wait_seconds: waits show a destination
// whose workers are all busy.
type attemptSlots map[*Target]destSlots

// destSlots are one destination's slots and the observer of their waits.
type destSlots struct {
	busy chan struct{} // a send takes a slot, a receive gives it back
	wait prometheus.Observer
}

func newAttemptSlots(sources []*Source, workers int, waits *prometheus.HistogramVec) attemptSlots {
	s := attemptSlots{}
	for _, src := range sources {
		for _, t := range src.Targets {
			if t.Handler == nil {
				s[t] = destSlots{busy: make(chan struct{}, workers), wait: waits.WithLabelValues(src.Name, t.Name)}
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
	d, ok := s[t]
	if !ok { // not a destination of the worker's sources
		return post()
	}
	select {
	case d.busy <- struct{}{}:
		d.wait.Observe(0)
	default:
		start := time.Now()
		wait := ctx
		if deadline, ok := ctx.Deadline(); ok {
			var cancel context.CancelFunc
			wait, cancel = context.WithDeadline(ctx, deadline.Add(-forwardTimeout(t.HTTP)))
			defer cancel()
		}
		select {
		case d.busy <- struct{}{}:
			d.wait.Observe(time.Since(start).Seconds())
		case <-wait.Done():
			d.wait.Observe(time.Since(start).Seconds())
			if ctx.Err() != nil {
				return 0, context.Cause(ctx)
			}
			return 0, errNoSlot
		}
	}
	defer func() { <-d.busy }()
	return post()
}

// forwardTimeout is how long one forward to d may take.
func forwardTimeout(d *Destination) time.Duration {
	if d == nil || d.Timeout <= 0 {
		return defaults.DestTimeout
	}
	return d.Timeout
}
