package ingest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
)

// fakeCommit records batch sizes; it blocks while gate is held, and fails
// a batch holding a delivery with body "bad" with a data error.
type fakeCommit struct {
	mu      sync.Mutex
	batches []int
	gate    sync.RWMutex
}

func (f *fakeCommit) commit(_ context.Context, ds []*Delivery) ([][]EventResult, error) {
	f.gate.RLock()
	defer f.gate.RUnlock()
	f.mu.Lock()
	f.batches = append(f.batches, len(ds))
	f.mu.Unlock()
	out := make([][]EventResult, len(ds))
	for i, d := range ds {
		if string(d.Body) == "bad" {
			return nil, &pgconn.PgError{Code: "22021"}
		}
		out[i] = []EventResult{{EventID: string(d.Body), Status: StatusAccepted}}
	}
	return out, nil
}

func (f *fakeCommit) sizes() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int(nil), f.batches...)
}

func delivery(body string) *Delivery { return &Delivery{Body: []byte(body)} }

// While a commit is in flight, requests pile up and share the next one.
func TestBatcherGroupsWhileBusy(t *testing.T) {
	t.Parallel()
	f := &fakeCommit{}
	b := newBatcher(f.commit, 1, 64, 0, nil)
	defer b.Close()
	f.gate.Lock()
	var wg sync.WaitGroup
	submit := func(body string) {
		wg.Go(func() {
			res, err := b.Submit(context.Background(), delivery(body), time.Minute)
			require.NoError(t, err)
			require.Equal(t, body, res[0].EventID)
		})
	}
	submit("first")
	inFlight(t, b)
	for range 10 {
		submit("next")
	}
	require.Eventually(t, func() bool { return len(b.queue) == 10 }, 5*time.Second, time.Millisecond)
	f.gate.Unlock()
	wg.Wait()
	require.Equal(t, []int{1, 10}, f.sizes())
}

// A batch is sealed once its bodies reach maxBatchBytes, however many more
// requests wait: large bodies travel in several smaller batches.
func TestBatcherCapsABatchsBodyBytes(t *testing.T) {
	t.Parallel()
	f := &fakeCommit{}
	b := newBatcher(f.commit, 1, 64, 0, nil)
	defer b.Close()
	f.gate.Lock()
	var wg sync.WaitGroup
	submit := func(body string) {
		wg.Go(func() {
			_, err := b.Submit(context.Background(), delivery(body), time.Minute)
			require.NoError(t, err)
		})
	}
	submit("first")
	inFlight(t, b)
	big := string(make([]byte, maxBatchBytes/3+1)) // three reach the cap
	for range 7 {
		submit(big)
	}
	require.Eventually(t, func() bool { return len(b.queue) == 7 }, 5*time.Second, time.Millisecond)
	f.gate.Unlock()
	wg.Wait()
	require.Equal(t, []int{1, 3, 3, 1}, f.sizes())
}

// Several committers do not split the waiting requests between them: one
// gathers (lingering while others commit), the others wait their turn.
func TestBatcherOneGathererAtATime(t *testing.T) {
	t.Parallel()
	f := &fakeCommit{}
	b := newBatcher(f.commit, 4, 64, 500*time.Millisecond, nil)
	defer b.Close()
	f.gate.Lock()
	var wg sync.WaitGroup
	submit := func() {
		wg.Go(func() {
			_, err := b.Submit(context.Background(), delivery("x"), time.Minute)
			require.NoError(t, err)
		})
	}
	submit()
	inFlight(t, b)
	for range 20 {
		submit()
	}
	require.Eventually(t, func() bool { return b.inFlight.Load() == 2 }, 5*time.Second, time.Millisecond)
	f.gate.Unlock()
	wg.Wait()
	sizes := f.sizes()
	slices.Sort(sizes)
	require.Equal(t, []int{1, 20}, sizes)
}

// inFlight waits until one batch is in its (blocked) commit and the queue is empty.
func inFlight(t *testing.T, b *batcher) {
	t.Helper()
	require.Eventually(t, func() bool { return b.inFlight.Load() == 1 && len(b.queue) == 0 }, 5*time.Second, time.Millisecond)
}

// A lone request is committed at once, even with a linger time: nobody is
// committing, so there is no company to wait for.
func TestBatcherLoneRequestDoesNotLinger(t *testing.T) {
	t.Parallel()
	f := &fakeCommit{}
	b := newBatcher(f.commit, 4, 64, time.Second, nil)
	defer b.Close()
	start := time.Now()
	_, err := b.Submit(context.Background(), delivery("x"), time.Minute)
	require.NoError(t, err)
	require.Less(t, time.Since(start), 500*time.Millisecond)
}

// A data error fails only the bad delivery: its batch-mates are retried alone.
func TestBatcherDataErrorIsolated(t *testing.T) {
	t.Parallel()
	f := &fakeCommit{}
	b := newBatcher(f.commit, 1, 64, 0, nil)
	defer b.Close()
	f.gate.Lock()
	var wg sync.WaitGroup
	wg.Go(func() {
		_, err := b.Submit(context.Background(), delivery("blocker"), time.Minute)
		require.NoError(t, err)
	})
	inFlight(t, b)
	errs := make(chan error, 3)
	for _, body := range []string{"good1", "bad", "good2"} {
		wg.Go(func() {
			_, err := b.Submit(context.Background(), delivery(body), time.Minute)
			errs <- err
		})
	}
	require.Eventually(t, func() bool { return len(b.queue) == 3 }, 5*time.Second, time.Millisecond)
	f.gate.Unlock()
	wg.Wait()
	close(errs)
	var failed int
	for err := range errs {
		if err != nil {
			failed++
			var pgErr *pgconn.PgError
			require.True(t, errors.As(err, &pgErr))
		}
	}
	require.Equal(t, 1, failed)
	require.Equal(t, []int{1, 3, 1, 1, 1}, f.sizes())
}

// Close answers everything queued, and later submissions fail at once.
func TestBatcherClose(t *testing.T) {
	t.Parallel()
	f := &fakeCommit{}
	b := newBatcher(f.commit, 1, 8, time.Millisecond, nil)
	f.gate.Lock()
	var wg sync.WaitGroup
	submit := func() {
		wg.Go(func() {
			_, err := b.Submit(context.Background(), delivery("x"), time.Minute)
			require.NoError(t, err)
		})
	}
	submit()
	inFlight(t, b)
	for range 5 {
		submit()
	}
	require.Eventually(t, func() bool { return len(b.queue) == 5 }, 5*time.Second, time.Millisecond)
	closed := make(chan struct{})
	go func() { b.Close(); close(closed) }()
	require.Eventually(t, func() bool {
		b.closing.RLock()
		defer b.closing.RUnlock()
		return b.closed
	}, 5*time.Second, time.Millisecond)
	_, err := b.Submit(context.Background(), delivery("late"), time.Minute)
	require.ErrorIs(t, err, errClosed)
	f.gate.Unlock()
	wg.Wait()
	<-closed
	total := 0
	for _, n := range f.sizes() {
		total += n
	}
	require.Equal(t, 6, total)
}

// A full queue answers ErrBusy after the queue timeout.
func TestBatcherBusy(t *testing.T) {
	t.Parallel()
	f := &fakeCommit{}
	b := newBatcher(f.commit, 1, 2, 0, nil) // queue capacity 2
	f.gate.Lock()
	var wg sync.WaitGroup
	submit := func() { wg.Go(func() { _, _ = b.Submit(context.Background(), delivery("x"), time.Minute) }) }
	submit()
	inFlight(t, b)
	submit()
	submit()
	require.Eventually(t, func() bool { return len(b.queue) == 2 }, 5*time.Second, time.Millisecond)
	start := time.Now()
	_, err := b.Submit(context.Background(), delivery("y"), 50*time.Millisecond)
	require.ErrorIs(t, err, ErrBusy)
	require.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond)
	f.gate.Unlock()
	wg.Wait()
	b.Close()
}

// While the database hangs (every commit waits until its context ends),
// each delivery is answered by its own deadline, also one queued behind a
// commit in flight: the batch's commit is bounded by its members'
// deadlines, not by commitTimeout alone, and Submit gives up at the
// deadline even on a commit that does not end.
func TestBatcherAnswersByTheDeadline(t *testing.T) {
	t.Parallel()
	hang := func(ctx context.Context, _ []*Delivery) ([][]EventResult, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	b := newBatcher(hang, 1, 8, 0, nil)
	defer b.Close()
	const bound = 300 * time.Millisecond
	var wg sync.WaitGroup
	submit := func() {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), bound)
			defer cancel()
			start := time.Now()
			_, err := b.Submit(ctx, delivery("x"), time.Minute)
			require.Error(t, err)
			require.Less(t, time.Since(start), bound+250*time.Millisecond, "answered past its deadline")
		})
	}
	submit()
	inFlight(t, b)
	for range 3 {
		submit()
	}
	wg.Wait()

	// A commit that ignores its context (a connection stuck in the kernel).
	gate := make(chan struct{})
	stuck := newBatcher(func(context.Context, []*Delivery) ([][]EventResult, error) {
		<-gate
		return nil, errors.New("too late")
	}, 1, 8, 0, nil)
	defer stuck.Close()
	defer close(gate)
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	answered := make(chan error, 1)
	go func() {
		_, err := stuck.Submit(ctx, delivery("x"), time.Minute)
		answered <- err
	}()
	select {
	case err := <-answered:
		require.ErrorIs(t, err, errAnswerDue)
	case <-time.After(bound + 250*time.Millisecond):
		t.Fatal("no answer by the deadline while the commit hangs")
	}
}
