package ingest

import (
	"context"
	"errors"
	"sync"
	"time"
)

// ErrBusy means the committer did not take the delivery within the queue
// timeout: the request is answered 503 with Retry-After.
var ErrBusy = errors.New("ingest is saturated")

// batcher is the group committer: concurrent requests hand their verified
// deliveries to a few committer goroutines, each of which takes whatever is
// waiting (up to maxBatch), writes it in one transaction and answers every
// request after COMMIT. A lone request is written at once; under load,
// requests pile up while a commit is in flight and share the next one.
//
// If a batch fails for reasons of the data (a constraint, an oversized row),
// each of its deliveries is retried on its own so one bad delivery never
// fails its batch-mates. If it fails because the database is unavailable,
// every request in it is answered 503.
type batcher struct {
	commit   commitFunc
	maxBatch int
	wait     time.Duration
	queue    chan *pending
	observe  func(n int)
	wg       sync.WaitGroup
	stop     chan struct{}
}

type pending struct {
	ctx  context.Context
	d    *Delivery
	done chan batchResult
}

type batchResult struct {
	res []EventResult
	err error
}

func newBatcher(commit commitFunc, committers, maxBatch int, wait time.Duration, observe func(int)) *batcher {
	b := &batcher{
		commit:   commit,
		maxBatch: maxBatch,
		wait:     wait,
		queue:    make(chan *pending, committers*maxBatch),
		observe:  observe,
		stop:     make(chan struct{}),
	}
	for range committers {
		b.wg.Go(b.loop)
	}
	return b
}

// Close stops the committers after the queue drains.
func (b *batcher) Close() {
	close(b.stop)
	b.wg.Wait()
}

// Submit hands d to a committer and waits for its result. It gives up with
// ErrBusy if no committer takes it within timeout.
func (b *batcher) Submit(ctx context.Context, d *Delivery, timeout time.Duration) ([]EventResult, error) {
	p := &pending{ctx: ctx, d: d, done: make(chan batchResult, 1)}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case b.queue <- p:
	case <-t.C:
		return nil, ErrBusy
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	// Once queued, the delivery may be committed: wait for the outcome so
	// that a 2xx is only ever given after COMMIT. The transaction itself is
	// bounded by the committer's timeout.
	r := <-p.done
	return r.res, r.err
}

func (b *batcher) loop() {
	batch := make([]*pending, 0, b.maxBatch)
	for {
		select {
		case p := <-b.queue:
			batch = append(batch[:0], p)
		case <-b.stop:
			// Drain what is left so no request waits forever.
			for {
				select {
				case p := <-b.queue:
					b.run([]*pending{p})
				default:
					return
				}
			}
		}
		b.fill(&batch)
		b.run(batch)
	}
}

// fill takes whatever else is already waiting, up to maxBatch; with a
// non-zero wait it lingers that long for company.
func (b *batcher) fill(batch *[]*pending) {
	var deadline <-chan time.Time
	if b.wait > 0 {
		t := time.NewTimer(b.wait)
		defer t.Stop()
		deadline = t.C
	}
	for len(*batch) < b.maxBatch {
		if deadline == nil {
			select {
			case p := <-b.queue:
				*batch = append(*batch, p)
				continue
			default:
				return
			}
		}
		select {
		case p := <-b.queue:
			*batch = append(*batch, p)
		case <-deadline:
			return
		}
	}
}

func (b *batcher) run(batch []*pending) {
	live := batch[:0:0]
	for _, p := range batch {
		if p.ctx.Err() != nil { // the client is gone: nothing was stored, nothing to answer
			p.done <- batchResult{err: p.ctx.Err()}
			continue
		}
		live = append(live, p)
	}
	if len(live) == 0 {
		return
	}
	ds := make([]*Delivery, len(live))
	for i, p := range live {
		ds[i] = p.d
	}
	if b.observe != nil {
		b.observe(len(ds))
	}
	ctx, cancel := context.WithTimeout(context.Background(), commitTimeout)
	res, err := b.commit(ctx, ds)
	cancel()
	if err == nil {
		for i, p := range live {
			p.done <- batchResult{res: res[i]}
		}
		return
	}
	if IsUnavailable(err) || len(live) == 1 {
		for _, p := range live {
			p.done <- batchResult{err: err}
		}
		return
	}
	// A data error: retry each delivery alone so only the bad one fails.
	for _, p := range live {
		ctx, cancel := context.WithTimeout(context.Background(), commitTimeout)
		res, err := b.commit(ctx, []*Delivery{p.d})
		cancel()
		if err != nil {
			p.done <- batchResult{err: err}
		} else {
			p.done <- batchResult{res: res[0]}
		}
	}
}

// commitTimeout bounds one ingest transaction, so that during an outage each
// answer (503) comes within the contract's 5 s.
const commitTimeout = 3500 * time.Millisecond
