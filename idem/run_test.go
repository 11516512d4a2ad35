package idem_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/idem"
)

var errBoom = errors.New("boom")

func TestRun(t *testing.T) {
	t.Parallel()

	t.Run("CompletesAndCommitsWork", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		store, bundle := setup(t)

		res, err := store.Run(ctx, opts("evt_1", "job:1"), func(ctx context.Context, tx pgx.Tx) error {
			return logWork(ctx, tx, fullKey("evt_1"), "job:1")
		})
		require.NoError(t, err)
		require.Equal(t, idem.StatusCompleted, res.Status)
		require.Equal(t, idem.StateCompleted, res.State)
		require.Equal(t, fullKey("evt_1"), res.Key)
		require.Equal(t, "job:1", res.Holder)
		require.Empty(t, res.Code)
		require.Equal(t, []string{"job:1"}, bundle.workHolders(t))

		row, ok := bundle.row(t, fullKey("evt_1"))
		require.True(t, ok)
		require.Equal(t, "completed", row.State)
		require.Equal(t, res.Token, row.Token)

		evs := bundle.events.take()
		require.Len(t, evs, 2)
		require.Equal(t, "claimed", evs[0].Kind)
		require.Equal(t, "completed", evs[1].Kind)
		require.Equal(t, res.Token, evs[1].Token)
	})

	t.Run("ConcurrentRunsWorkOnce", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		store, bundle := setup(t)

		const n = 200
		var ran atomic.Int64
		results := make([]idem.Result, n)
		errs := make([]error, n)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				<-start
				holder := fmt.Sprintf("worker-%d", i)
				results[i], errs[i] = store.Run(ctx, opts("evt_1", holder), func(ctx context.Context, tx pgx.Tx) error {
					ran.Add(1)
					return logWork(ctx, tx, fullKey("evt_1"), holder)
				})
			})
		}
		close(start)
		wg.Wait()

		require.Equal(t, int64(1), ran.Load())
		completed := 0
		for i := range n {
			require.NoError(t, errs[i])
			switch results[i].Status {
			case idem.StatusCompleted:
				completed++
			case idem.StatusSkipped:
				require.Equal(t, idem.CodeDuplicate, results[i].Code)
				require.Equal(t, fullKey("evt_1"), results[i].Key)
			default:
				require.FailNow(t, "unexpected status", "%v", results[i].Status)
			}
		}
		require.Equal(t, 1, completed)
		require.Len(t, bundle.workHolders(t), 1)
	})

	t.Run("TakeoverRollsBackStaleHolder", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		store, bundle := setup(t)

		// The stale holder stalls (no renewal) past its lease inside its
		// work transaction.
		stale := opts("evt_1", "stale")
		stale.Lease = 150 * time.Millisecond
		stale.RenewEvery = -1
		started := make(chan struct{})
		proceed := make(chan struct{})
		staleDone := make(chan error, 1)
		go func() {
			_, err := store.Run(ctx, stale, func(ctx context.Context, tx pgx.Tx) error {
				if err := logWork(ctx, tx, fullKey("evt_1"), "stale"); err != nil {
					return err
				}
				close(started)
				select {
				case <-proceed:
					return nil
				case <-time.After(waitTimeout):
					return errors.New("test never said proceed")
				}
			})
			staleDone <- err
		}()
		receive(t, started, "the stale holder to start")

		var next idem.Result
		eventually(t, "the stale lease to be taken over", func() bool {
			res, err := store.Run(ctx, opts("evt_1", "next"), func(ctx context.Context, tx pgx.Tx) error {
				return logWork(ctx, tx, fullKey("evt_1"), "next")
			})
			require.NoError(t, err)
			next = res
			return res.Status == idem.StatusCompleted
		})

		close(proceed)
		err := receive(t, staleDone, "the stale holder to finish")
		require.ErrorIs(t, err, idem.ErrLeaseLost)

		require.Equal(t, []string{"next"}, bundle.workHolders(t))
		row, _ := bundle.row(t, fullKey("evt_1"))
		require.Equal(t, "completed", row.State)
		require.Equal(t, "next", row.Holder)
		require.Equal(t, next.Token, row.Token)
	})

	t.Run("ReleasesOnError", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		store, bundle := setup(t)

		_, err := store.Run(ctx, opts("evt_1", "a"), func(ctx context.Context, tx pgx.Tx) error {
			require.NoError(t, logWork(ctx, tx, fullKey("evt_1"), "a"))
			return errBoom
		})
		require.ErrorIs(t, err, errBoom)
		require.Zero(t, bundle.countClaims(t))
		require.Empty(t, bundle.workHolders(t))

		// A retry runs the work.
		res, err := store.Run(ctx, opts("evt_1", "b"), func(ctx context.Context, tx pgx.Tx) error {
			return logWork(ctx, tx, fullKey("evt_1"), "b")
		})
		require.NoError(t, err)
		require.Equal(t, idem.StatusCompleted, res.Status)
		require.Equal(t, []string{"b"}, bundle.workHolders(t))

		for _, ev := range bundle.events.take() {
			if ev.Kind == "completed" {
				require.Equal(t, "b", ev.Holder, "a failed run must not emit completed")
			}
		}
	})

	t.Run("ReleasesOnPanic", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		store, bundle := setup(t)

		require.PanicsWithValue(t, "kaboom", func() {
			_, _ = store.Run(ctx, opts("evt_1", "a"), func(ctx context.Context, tx pgx.Tx) error {
				require.NoError(t, logWork(ctx, tx, fullKey("evt_1"), "a"))
				panic("kaboom")
			})
		})
		require.Zero(t, bundle.countClaims(t))
		require.Empty(t, bundle.workHolders(t))

		res, err := store.Run(ctx, opts("evt_1", "b"), func(context.Context, pgx.Tx) error { return nil })
		require.NoError(t, err)
		require.Equal(t, idem.StatusCompleted, res.Status)
	})

	t.Run("ReleasesWhenContextCancelled", func(t *testing.T) {
		t.Parallel()
		store, bundle := setup(t)

		ctx, cancel := context.WithCancel(context.Background())
		_, err := store.Run(ctx, opts("evt_1", "a"), func(ctx context.Context, tx pgx.Tx) error {
			cancel()
			return ctx.Err()
		})
		require.ErrorIs(t, err, context.Canceled)
		require.Zero(t, bundle.countClaims(t))
	})

	t.Run("SkipAndFailOnDuplicate", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		store, _ := setup(t)

		held, err := store.Claim(ctx, nil, opts("evt_1", "holder-1"))
		require.NoError(t, err)
		mustNotRun := func(context.Context, pgx.Tx) error {
			t.Error("work ran for a duplicate")
			return nil
		}

		res, err := store.Run(ctx, opts("evt_1", "holder-2"), mustNotRun)
		require.NoError(t, err)
		require.Equal(t, idem.Result{
			Status: idem.StatusSkipped, Code: "duplicate", Key: "hookline:test.work:evt_1",
			State: idem.StateProcessing, Holder: "holder-1", Token: held.Token(),
		}, res)

		o := opts("evt_1", "holder-2")
		o.OnDuplicate = idem.Fail
		res, err = store.Run(ctx, o, mustNotRun)
		require.ErrorIs(t, err, idem.ErrDuplicate)
		var dup *idem.DuplicateError
		require.ErrorAs(t, err, &dup)
		require.Equal(t, "hookline:test.work:evt_1", dup.Key)
		require.Equal(t, idem.Result{
			Status: idem.StatusFailed, Code: "duplicate", Key: "hookline:test.work:evt_1",
			State: idem.StateProcessing, Holder: "holder-1", Token: held.Token(),
		}, res)

		require.NoError(t, held.Complete(ctx, nil))
		res, err = store.Run(ctx, opts("evt_1", "holder-3"), mustNotRun)
		require.NoError(t, err)
		require.Equal(t, idem.StatusSkipped, res.Status)
		require.Equal(t, idem.StateCompleted, res.State)
	})

	t.Run("BlankSegmentStepsAside", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		store, bundle := setup(t)

		for i := range 2 {
			res, err := store.Run(ctx, opts(" ", "h"), func(ctx context.Context, tx pgx.Tx) error {
				return logWork(ctx, tx, "", fmt.Sprintf("run-%d", i))
			})
			require.NoError(t, err)
			require.Equal(t, idem.Result{Status: idem.StatusSteppedAside}, res)
		}
		require.Equal(t, []string{"run-0", "run-1"}, bundle.workHolders(t))
		require.Zero(t, bundle.countClaims(t))
		require.Empty(t, bundle.events.take())

		// Work errors and panics roll back.
		_, err := store.Run(ctx, opts("", "h"), func(ctx context.Context, tx pgx.Tx) error {
			require.NoError(t, logWork(ctx, tx, "", "failed"))
			return errBoom
		})
		require.ErrorIs(t, err, errBoom)
		require.Panics(t, func() {
			_, _ = store.Run(ctx, opts("", "h"), func(ctx context.Context, tx pgx.Tx) error {
				require.NoError(t, logWork(ctx, tx, "", "panicked"))
				panic("kaboom")
			})
		})
		require.Equal(t, []string{"run-0", "run-1"}, bundle.workHolders(t))

		// Only the segment may be blank.
		o := opts("", "h")
		o.Scope = ""
		_, err = store.Run(ctx, o, func(context.Context, pgx.Tx) error { return nil })
		require.ErrorIs(t, err, idem.ErrEmptySegment)
	})
}

func TestRunExternal(t *testing.T) {
	t.Parallel()

	t.Run("CompletesAfterWork", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		store, bundle := setup(t)

		var ran atomic.Int64
		work := func(ctx context.Context) error {
			// The claim is committed before the work starts.
			row, ok := bundle.row(t, fullKey("evt_1"))
			require.True(t, ok)
			require.Equal(t, "processing", row.State)
			ran.Add(1)
			return nil
		}
		res, err := store.RunExternal(ctx, opts("evt_1", "a"), work)
		require.NoError(t, err)
		require.Equal(t, idem.StatusCompleted, res.Status)
		row, _ := bundle.row(t, fullKey("evt_1"))
		require.Equal(t, "completed", row.State)

		res, err = store.RunExternal(ctx, opts("evt_1", "b"), work)
		require.NoError(t, err)
		require.Equal(t, idem.StatusSkipped, res.Status)
		require.Equal(t, idem.CodeDuplicate, res.Code)
		require.Equal(t, idem.StateCompleted, res.State)
		require.Equal(t, "a", res.Holder)
		require.Equal(t, int64(1), ran.Load())
	})

	t.Run("ConcurrentRunsWorkOnce", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		store, _ := setup(t)

		const n = 200
		var ran atomic.Int64
		errs := make([]error, n)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				<-start
				_, errs[i] = store.RunExternal(ctx, opts("evt_1", fmt.Sprintf("w%d", i)), func(context.Context) error {
					ran.Add(1)
					return nil
				})
			})
		}
		close(start)
		wg.Wait()
		for _, err := range errs {
			require.NoError(t, err)
		}
		require.Equal(t, int64(1), ran.Load())
	})

	t.Run("ReleasesOnErrorAndPanic", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		store, bundle := setup(t)

		_, err := store.RunExternal(ctx, opts("evt_1", "a"), func(context.Context) error { return errBoom })
		require.ErrorIs(t, err, errBoom)
		require.Zero(t, bundle.countClaims(t))

		require.PanicsWithValue(t, "kaboom", func() {
			_, _ = store.RunExternal(ctx, opts("evt_1", "a"), func(context.Context) error { panic("kaboom") })
		})
		require.Zero(t, bundle.countClaims(t))

		res, err := store.RunExternal(ctx, opts("evt_1", "b"), func(context.Context) error { return nil })
		require.NoError(t, err)
		require.Equal(t, idem.StatusCompleted, res.Status)
	})

	t.Run("StaleHolderGetsLeaseLost", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		store, bundle := setup(t)

		stale := opts("evt_1", "stale")
		stale.Lease = 150 * time.Millisecond
		stale.RenewEvery = -1
		started := make(chan struct{})
		proceed := make(chan struct{})
		staleDone := make(chan error, 1)
		go func() {
			_, err := store.RunExternal(ctx, stale, func(context.Context) error {
				close(started)
				select {
				case <-proceed:
					return nil
				case <-time.After(waitTimeout):
					return errors.New("test never said proceed")
				}
			})
			staleDone <- err
		}()
		receive(t, started, "the stale holder to start")
		next := claimWhenFree(t, store, opts("evt_1", "next"))
		close(proceed)
		require.ErrorIs(t, receive(t, staleDone, "the stale holder to finish"), idem.ErrLeaseLost)

		row, _ := bundle.row(t, fullKey("evt_1"))
		require.Equal(t, "processing", row.State)
		require.Equal(t, next.Token(), row.Token)
	})

	t.Run("CancelsWorkWhenLeaseLost", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		store, bundle := setup(t)

		o := opts("evt_1", "a")
		o.RenewEvery = 20 * time.Millisecond
		_, err := store.RunExternal(ctx, o, func(ctx context.Context) error {
			_, err := bundle.pool.Exec(ctx, `DELETE FROM idem_claims`)
			require.NoError(t, err)
			receive(t, ctx.Done(), "the work context to be cancelled")
			require.ErrorIs(t, context.Cause(ctx), idem.ErrLeaseLost)
			return context.Cause(ctx)
		})
		require.ErrorIs(t, err, idem.ErrLeaseLost)
	})

	t.Run("BlankSegmentStepsAside", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		store, bundle := setup(t)

		var ran atomic.Int64
		for range 3 {
			res, err := store.RunExternal(ctx, opts("", "h"), func(context.Context) error {
				ran.Add(1)
				return nil
			})
			require.NoError(t, err)
			require.Equal(t, idem.StatusSteppedAside, res.Status)
		}
		require.Equal(t, int64(3), ran.Load())
		require.Zero(t, bundle.countClaims(t))
	})
}
