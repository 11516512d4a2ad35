package ingest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookline/hookline/internal/dberr"
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
// One committer gathers at a time (the others are committing or waiting for
// their turn), so that concurrent committers do not split the queue into
// small batches between them. While another batch is being committed, the
// gatherer keeps gathering until that commit ends (so the next batch is
// everything that arrived meanwhile: group commit), the batch is full, or
// wait has passed, whichever comes first; then it commits, alongside if need
// be (up to the number of committers). When nothing is being committed it
// commits at once, so a lone request never waits.
//
// maxBatch is therefore also what sets the overlap: a full batch does not
// wait for the one in flight, so a smaller maxBatch gives more, smaller
// commits in flight at once (docs/performance.md measures the trade).
//
// If a batch fails for reasons of the data (a constraint, an oversized row),
// each of its deliveries is retried on its own so one bad delivery never
// fails its batch-mates. A deadlock or serialization failure runs the batch
// once more. If it fails because the database is unavailable, every request
// in it is answered 503.
type batcher struct {
	commit   commitFunc
	maxBatch int
	wait     time.Duration
	queue    chan *pending
	observe  func(n int)
	gather   sync.Mutex   // held by the committer gathering the next batch
	inFlight atomic.Int32 // batches being committed
	wg       sync.WaitGroup
	stop     chan struct{}
	freed    chan struct{} // a commit ended

	// closing guards Submit against Close: once closed is set no delivery
	// enters the queue, and the committers drain what is in it before they exit.
	closing sync.RWMutex
	closed  bool
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
		freed:    make(chan struct{}, 1),
	}
	for range committers {
		b.wg.Go(b.loop)
	}
	return b
}

// Close stops the committers after the queue drains.
func (b *batcher) Close() {
	b.closing.Lock()
	already := b.closed
	b.closed = true
	b.closing.Unlock()
	if already {
		return
	}
	close(b.stop)
	b.wg.Wait()
}

// errClosed answers deliveries that arrive after Close.
var errClosed = errors.New("ingest is shutting down")

// errAnswerDue answers a delivery whose answer deadline came before its
// commit ended.
var errAnswerDue = errors.New("ingest: the commit did not end before the answer was due")

// Submit hands d to a committer and waits for its result. It gives up with
// ErrBusy if no committer takes it within timeout. A deadline on ctx is
// when the delivery must be answered: the commit of its batch is bounded
// by it, and past it Submit returns errAnswerDue (a 503, never a 2xx)
// even if a commit left hanging by an unresponsive database has not ended.
func (b *batcher) Submit(ctx context.Context, d *Delivery, timeout time.Duration) ([]EventResult, error) {
	p := &pending{ctx: ctx, d: d, done: make(chan batchResult, 1)}
	if err := b.enqueue(p, timeout); err != nil {
		return nil, err
	}
	// Once queued, the delivery may be committed: wait for the outcome so
	// that a 2xx is only ever given after COMMIT. The transaction itself is
	// bounded by the committer's timeout and by ctx's deadline.
	select {
	case r := <-p.done:
		return r.res, r.err
	case <-ctx.Done():
	}
	select { // an outcome that came at the same moment wins
	case r := <-p.done:
		return r.res, r.err
	default:
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return nil, errAnswerDue
	}
	r := <-p.done // the client is gone: nothing to answer, but the outcome ends the wait
	return r.res, r.err
}

// commitDeadline is when a commit of ps started now must end: within
// commitTimeout, and before the first of their answer deadlines (a
// request's deadline; a cancelled request, whose client is gone, does not
// shorten it).
func commitDeadline(ps []*pending, now time.Time) time.Time {
	deadline := now.Add(commitTimeout)
	for _, p := range ps {
		if dl, ok := p.ctx.Deadline(); ok && dl.Before(deadline) {
			deadline = dl
		}
	}
	return deadline
}

func (b *batcher) enqueue(p *pending, timeout time.Duration) error {
	b.closing.RLock()
	defer b.closing.RUnlock()
	if b.closed {
		return errClosed
	}
	select { // the common case: room in the queue, no timer needed
	case b.queue <- p:
		return nil
	default:
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case b.queue <- p:
		return nil
	case <-t.C:
		return ErrBusy
	case <-p.ctx.Done():
		return p.ctx.Err()
	}
}

func (b *batcher) loop() {
	batch := make([]*pending, 0, b.maxBatch)
	for {
		var ok bool
		if batch, ok = b.next(batch[:0]); !ok {
			return
		}
		b.inFlight.Add(1)
		b.run(batch)
		b.inFlight.Add(-1)
		select { // wake a gatherer lingering for this commit to end
		case b.freed <- struct{}{}:
		default:
		}
		clear(batch) // drop references to answered requests
	}
}

// maxBatchBytes seals a batch whose bodies reach it, whatever maxBatch
// says: a batch's bodies travel as one parameter, laid out and encoded
// once more each, so large bodies in large batches would multiply the
// memory they hold. A single larger body is a batch of its own.
const maxBatchBytes = 4 << 20

// gathering is a batch being gathered: its deliveries and their bodies'
// bytes.
type gathering struct {
	ps    []*pending
	bytes int
}

func (g *gathering) add(p *pending) {
	g.ps = append(g.ps, p)
	g.bytes += len(p.d.Body)
}

// full reports whether the batch can take no more deliveries.
func (b *batcher) full(g *gathering) bool {
	return len(g.ps) >= b.maxBatch || g.bytes >= maxBatchBytes
}

// next gathers the next batch into batch; false means stop (closed and
// drained).
func (b *batcher) next(batch []*pending) ([]*pending, bool) {
	b.gather.Lock()
	defer b.gather.Unlock()
	g := &gathering{ps: batch}
	select {
	case p := <-b.queue:
		g.add(p)
	case <-b.stop:
		// Drain what is left so no request waits forever.
		select {
		case p := <-b.queue:
			g.add(p)
		default:
			return nil, false
		}
	}
	b.drain(g) // whatever else is already waiting
	if b.full(g) || b.wait <= 0 {
		return g.ps, true
	}
	// While another batch is being committed, gather until it is done (the
	// classic group commit: the next batch forms during the current commit),
	// the batch is full, or wait has passed; then commit, even alongside.
	if b.inFlight.Load() == 0 {
		return g.ps, true
	}
	t := time.NewTimer(b.wait)
	defer t.Stop()
	for !b.full(g) && b.inFlight.Load() > 0 {
		select {
		case p := <-b.queue:
			g.add(p)
		case <-b.freed:
		case <-t.C:
			b.drain(g)
			return g.ps, true
		case <-b.stop:
			b.drain(g)
			return g.ps, true
		}
	}
	b.drain(g)
	return g.ps, true
}

// drain adds whatever is already waiting, until the batch is full.
func (b *batcher) drain(g *gathering) {
	for !b.full(g) {
		select {
		case p := <-b.queue:
			g.add(p)
		default:
			return
		}
	}
}

func (b *batcher) run(batch []*pending) {
	live := batch[:0:0]
	for _, p := range batch {
		if p.ctx.Err() != nil { // the client is gone, or its answer is due: nothing was stored
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
	deadline := commitDeadline(live, time.Now())
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	res, err := b.commit(ctx, ds)
	// A batch that did not commit because the server ended its connection's
	// session is sent again: after pg_terminate_backend or a restart, each
	// idle connection of the pool is dead but only found so when used.
	for try := 0; try < maxResends && errors.As(err, new(uncommittedError)) && ctx.Err() == nil; try++ {
		res, err = b.commit(ctx, ds)
	}
	if dberr.Transient(err) { // a deadlock or serialization failure: once more
		res, err = b.commit(ctx, ds)
	}
	cancel()
	if err == nil {
		for i, p := range live {
			p.done <- batchResult{res: res[i]}
		}
		return
	}
	if dberr.Unavailable(err) || len(live) == 1 {
		for _, p := range live {
			p.done <- batchResult{err: err}
		}
		return
	}
	// A data error: retry each delivery alone so only the bad one fails; all
	// the retries together get one more commit bound (the senders are waiting).
	for _, p := range live {
		ctx, cancel := context.WithDeadline(context.Background(), commitDeadline([]*pending{p}, deadline))
		res, err := b.commit(ctx, []*Delivery{p.d})
		cancel()
		if err != nil {
			p.done <- batchResult{err: err}
		} else {
			p.done <- batchResult{res: res[0]}
		}
	}
}

// maxResends bounds how often a batch is sent again after its connection's
// session was found ended: each try uses up one dead idle connection.
const maxResends = 8

// commitTimeout bounds one ingest transaction, so that during an outage each
// answer (503) comes within the contract's 5 s.
const commitTimeout = 3500 * time.Millisecond
