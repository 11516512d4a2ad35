// Package groupcommit runs the work of concurrent callers in batches: each
// caller hands over one item and waits for its own result, while one
// statement (one round trip, one COMMIT) serves every item that arrived
// during the previous one.
//
// There is no background goroutine: the callers themselves take turns as
// the committer (leader/follower group commit). A caller queues its item,
// then either finds it answered by another caller's batch, or gets a
// committer slot and runs a batch of whatever is queued (its own item
// included, unless a batch already took it). With one slot, items that
// arrive while a batch is running form the next batch; the batches grow
// with the load and a lone caller is answered at once.
package groupcommit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// RunFunc runs one batch: it returns one result per item, in the items'
// order, or an error that answers every item of the batch. ctx is the
// committer's own, bounded by Options.Timeout: a caller that gives up does
// not cancel its batch-mates' statement.
type RunFunc[T, R any] func(ctx context.Context, items []T) ([]R, error)

// Options configure a Committer.
type Options struct {
	// MaxBatch caps the items of one batch. Default 256.
	MaxBatch int
	// Committers is how many batches may run at once. Default 1: the next
	// batch forms while the current one commits.
	Committers int
	// Overlap is how many items must be waiting for a batch to start while
	// another runs (with Committers > 1). Default 1: any. Larger, the
	// waiting items join one batch once the running one ends unless enough
	// of them wait, so batches stay large and run at once only under load.
	Overlap int
	// Timeout bounds one batch's run. Default 15s.
	Timeout time.Duration
	// Observe, if set, is told the size of every batch run.
	Observe func(n int)
}

// Committer batches the items of concurrent callers. It is safe for
// concurrent use; the zero value is not usable, call New.
type Committer[T, R any] struct {
	run   RunFunc[T, R]
	opts  Options
	slots chan struct{}

	mu      sync.Mutex
	queue   []*call[T, R]
	running int           // batches running
	changed chan struct{} // closed, and replaced, when a batch ends or the queue reaches Overlap
}

type call[T, R any] struct {
	item T
	done chan struct{}
	res  R
	err  error
}

// New returns a Committer running batches with run.
func New[T, R any](run RunFunc[T, R], opts Options) *Committer[T, R] {
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 256
	}
	if opts.Committers <= 0 {
		opts.Committers = 1
	}
	if opts.Overlap <= 0 {
		opts.Overlap = 1
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 15 * time.Second
	}
	return &Committer[T, R]{run: run, opts: opts, slots: make(chan struct{}, opts.Committers), changed: make(chan struct{})}
}

// Do runs item in a batch and returns its result. Once queued, the item is
// run whatever happens to ctx (its batch may already be committing), so Do
// returns the item's real outcome; ctx only bounds the wait for a committer
// slot when the item has not been taken by a batch yet, and then Do returns
// ctx's error with the item never run.
func (c *Committer[T, R]) Do(ctx context.Context, item T) (R, error) {
	cl := &call[T, R]{item: item, done: make(chan struct{})}
	c.mu.Lock()
	c.queue = append(c.queue, cl)
	if c.running > 0 && len(c.queue) == c.opts.Overlap {
		c.signal()
	}
	c.mu.Unlock()
	for {
		select {
		case <-cl.done:
			return cl.res, cl.err
		case c.slots <- struct{}{}:
			if changed, ok := c.begin(); !ok { // too few wait to run beside a batch
				<-c.slots
				select {
				case <-cl.done:
					return cl.res, cl.err
				case <-changed:
				case <-ctx.Done():
					if c.withdraw(cl) {
						var zero R
						return zero, ctx.Err()
					}
					<-cl.done
					return cl.res, cl.err
				}
				continue
			}
			c.commitNext()
			c.end()
			<-c.slots
			if c.taken(cl) { // by this batch or one in flight: wait for it
				<-cl.done
				return cl.res, cl.err
			}
		case <-ctx.Done():
			if c.withdraw(cl) {
				var zero R
				return zero, ctx.Err()
			}
			<-cl.done // taken by a batch: its outcome is the answer
			return cl.res, cl.err
		}
	}
}

// begin counts a batch as running, unless another runs and fewer than
// Overlap items wait: then it returns the channel that tells when that
// changes.
func (c *Committer[T, R]) begin() (<-chan struct{}, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running > 0 && len(c.queue) < c.opts.Overlap {
		return c.changed, false
	}
	c.running++
	return nil, true
}

// end counts a batch as ended and tells the callers waiting to start one.
func (c *Committer[T, R]) end() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.running--
	c.signal()
}

// signal wakes the callers waiting on changed; c.mu is held.
func (c *Committer[T, R]) signal() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// taken reports whether a batch has taken cl from the queue.
func (c *Committer[T, R]) taken(cl *call[T, R]) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !slices.Contains(c.queue, cl)
}

// withdraw removes cl from the queue; false when a batch has taken it.
func (c *Committer[T, R]) withdraw(cl *call[T, R]) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, q := range c.queue {
		if q == cl {
			c.queue = append(c.queue[:i], c.queue[i+1:]...)
			return true
		}
	}
	return false
}

// commitNext takes up to MaxBatch queued items, runs them and answers each.
func (c *Committer[T, R]) commitNext() {
	c.mu.Lock()
	n := min(len(c.queue), c.opts.MaxBatch)
	batch := make([]*call[T, R], n)
	copy(batch, c.queue)
	rest := copy(c.queue, c.queue[n:])
	clear(c.queue[rest:]) // drop references to taken calls
	c.queue = c.queue[:rest]
	c.mu.Unlock()
	if n == 0 {
		return
	}
	if c.opts.Observe != nil {
		c.opts.Observe(n)
	}
	items := make([]T, n)
	for i, cl := range batch {
		items[i] = cl.item
	}
	res, err := c.runBatch(items)
	for i, cl := range batch {
		if err != nil {
			cl.err = err
		} else {
			cl.res = res[i]
		}
		close(cl.done)
	}
}

// runBatch runs one batch with its own deadline; any failure, a panic
// included (no caller may wait for ever), is a *BatchError.
func (c *Committer[T, R]) runBatch(items []T) ([]R, error) {
	res, err := c.runSafe(items)
	if err == nil && len(res) != len(items) {
		err = fmt.Errorf("groupcommit: batch of %d items returned %d results", len(items), len(res))
	}
	if err != nil {
		return nil, &BatchError{N: len(items), Err: err}
	}
	return res, nil
}

func (c *Committer[T, R]) runSafe(items []T) (res []R, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.Timeout)
	defer cancel()
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("groupcommit: batch of %d panicked: %v", len(items), p)
		}
	}()
	return c.run(ctx, items)
}

// BatchError is a batch that failed as a whole: every item of it gets it.
type BatchError struct {
	N   int // items in the batch
	Err error
}

func (e *BatchError) Error() string { return fmt.Sprintf("batch of %d: %v", e.N, e.Err) }
func (e *BatchError) Unwrap() error { return e.Err }

// IsBatchError reports whether err is a whole batch's failure (as opposed
// to ctx's error from Do).
func IsBatchError(err error) bool {
	var be *BatchError
	return errors.As(err, &be)
}
