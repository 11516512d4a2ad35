package groupcommit_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hookline/hookline/internal/groupcommit"
)

// Every caller gets its own item's result; batches never overlap beyond
// Committers; under concurrency items share batches.
func TestEveryCallerGetsItsOwnResult(t *testing.T) {
	var running, most, batches, items atomic.Int64
	run := func(ctx context.Context, in []int) ([]string, error) {
		n := running.Add(1)
		defer running.Add(-1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		batches.Add(1)
		items.Add(int64(len(in)))
		time.Sleep(time.Millisecond) // a commit's round trip
		out := make([]string, len(in))
		for i, v := range in {
			out[i] = fmt.Sprint("r", v)
		}
		return out, nil
	}
	c := groupcommit.New(run, groupcommit.Options{MaxBatch: 16})
	var wg sync.WaitGroup
	for g := range 64 {
		wg.Go(func() {
			for i := range 20 {
				v := g*1000 + i
				got, err := c.Do(context.Background(), v)
				if err != nil || got != fmt.Sprint("r", v) {
					t.Errorf("Do(%d) = %q, %v", v, got, err)
				}
			}
		})
	}
	wg.Wait()
	if items.Load() != 64*20 {
		t.Fatalf("items run: %d, want %d", items.Load(), 64*20)
	}
	if most.Load() != 1 {
		t.Fatalf("%d batches ran at once, want 1 (Committers default)", most.Load())
	}
	if mean := float64(items.Load()) / float64(batches.Load()); mean < 2 {
		t.Fatalf("mean batch %.1f under 64 concurrent callers: items are not sharing batches", mean)
	}
}

// A failed batch answers each of its items with a *BatchError; a panic too.
func TestBatchFailureAnswersEveryItem(t *testing.T) {
	boom := errors.New("boom")
	c := groupcommit.New(func(ctx context.Context, in []int) ([]int, error) {
		if in[0] < 0 {
			panic("negative")
		}
		return nil, boom
	}, groupcommit.Options{})
	_, err := c.Do(context.Background(), 1)
	if !errors.Is(err, boom) || !groupcommit.IsBatchError(err) {
		t.Fatalf("err = %v, want a BatchError wrapping boom", err)
	}
	_, err = c.Do(context.Background(), -1)
	if !groupcommit.IsBatchError(err) {
		t.Fatalf("panic: err = %v, want a BatchError", err)
	}
	// A batch returning the wrong number of results is an error, not a
	// wrong answer.
	short := groupcommit.New(func(ctx context.Context, in []int) ([]int, error) { return nil, nil }, groupcommit.Options{})
	if _, err := short.Do(context.Background(), 1); !groupcommit.IsBatchError(err) {
		t.Fatalf("short result: err = %v", err)
	}
}

// A caller whose context ends before a batch takes its item withdraws it:
// the item never runs.
func TestCancelledBeforeTakenNeverRuns(t *testing.T) {
	release := make(chan struct{})
	var ran sync.Map
	c := groupcommit.New(func(ctx context.Context, in []int) ([]int, error) {
		for _, v := range in {
			ran.Store(v, true)
		}
		if in[0] == 1 {
			<-release // hold the only slot
		}
		return in, nil
	}, groupcommit.Options{})
	first := make(chan error, 1)
	go func() { _, err := c.Do(context.Background(), 1); first <- err }()
	for { // until item 1's batch holds the slot
		if _, ok := ran.Load(1); ok {
			break
		}
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Do(ctx, 2); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if _, err := c.Do(context.Background(), 3); err != nil {
		t.Fatal(err)
	}
	if _, ok := ran.Load(2); ok {
		t.Fatal("the withdrawn item ran")
	}
}

// With Overlap, a batch starts beside a running one only once that many
// items wait, and then takes them all; the callers of a second committer
// slot left waiting are woken, not lost, when the running batch ends.
func TestOverlapKeepsConcurrentBatchesLarge(t *testing.T) {
	release := make(chan struct{})
	sizes := make(chan int, 16)
	first := true
	var mu sync.Mutex
	c := groupcommit.New(func(ctx context.Context, in []int) ([]int, error) {
		sizes <- len(in)
		mu.Lock()
		wait := first
		first = false
		mu.Unlock()
		if wait {
			<-release
		}
		return in, nil
	}, groupcommit.Options{Committers: 2, Overlap: 8})
	var wg sync.WaitGroup
	do := func(v int) {
		wg.Go(func() {
			if got, err := c.Do(context.Background(), v); err != nil || got != v {
				t.Errorf("Do(%d) = %d, %v", v, got, err)
			}
		})
	}
	do(0)
	if n := <-sizes; n != 1 {
		t.Fatalf("first batch of %d items, want 1", n)
	}
	for v := 1; v <= 8; v++ {
		do(v)
	}
	if n := <-sizes; n != 8 {
		t.Fatalf("batch of %d items ran beside the first, want 8 (Overlap)", n)
	}
	// A caller that gives up while too few wait to start a batch beside
	// the first gets its context's error, its item never run.
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Do(cancelled, 100); !errors.Is(err, context.Canceled) {
		t.Fatalf("Do with a cancelled context while a batch runs: %v, want context.Canceled", err)
	}
	do(9) // fewer than Overlap wait: it runs once the first batch ends
	close(release)
	wg.Wait()
	if n := <-sizes; n != 1 {
		t.Fatalf("last batch of %d items, want 1 (the cancelled item is not run)", n)
	}

	// Many callers, batches ending all the time: nobody waits for ever.
	c = groupcommit.New(func(ctx context.Context, in []int) ([]int, error) {
		time.Sleep(100 * time.Microsecond) // a commit's round trip
		return in, nil
	}, groupcommit.Options{Committers: 2, Overlap: 4, MaxBatch: 8})
	for g := range 32 {
		wg.Go(func() {
			for i := range 50 {
				if got, err := c.Do(context.Background(), g*100+i); err != nil || got != g*100+i {
					t.Errorf("Do = %d, %v", got, err)
				}
			}
		})
	}
	wg.Wait()
}

// With several committers, a caller whose item is in another's batch
// waits for it instead of spinning on a free slot: while one batch holds
// every item for 200 ms, the process burns next to no CPU.
func TestSeveralCommittersDoNotSpin(t *testing.T) {
	started := make(chan struct{})
	var once sync.Once
	c := groupcommit.New(func(ctx context.Context, in []int) ([]int, error) {
		once.Do(func() { close(started) })
		time.Sleep(200 * time.Millisecond)
		return in, nil
	}, groupcommit.Options{Committers: 4})
	release := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			<-release
			if _, err := c.Do(context.Background(), i); err != nil {
				t.Error(err)
			}
		})
	}
	close(release)
	<-started
	before := cpuTime(t)
	wg.Wait()
	if used := cpuTime(t) - before; used > 100*time.Millisecond {
		t.Fatalf("the callers used %s of CPU while waiting about 200 ms for their batches", used)
	}
}

func cpuTime(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
