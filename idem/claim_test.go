package idem_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/idem"
)

func TestClaim(t *testing.T) {
	t.Parallel()

	t.Run("ConcurrentClaimersExactlyOneWins", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		store, bundle := setup(t)

		const n = 200
		type outcome struct {
			claim *idem.Claim
			err   error
		}
		outcomes := make([]outcome, n)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				<-start
				c, err := store.Claim(ctx, nil, opts("evt_1", fmt.Sprintf("worker-%d", i)))
				outcomes[i] = outcome{c, err}
			})
		}
		close(start)
		wg.Wait()

		var winner *idem.Claim
		for _, o := range outcomes {
			if o.err == nil {
				require.Nil(t, winner, "more than one claimer won")
				winner = o.claim
			}
		}
		require.NotNil(t, winner, "no claimer won")
		require.Equal(t, fullKey("evt_1"), winner.Key())

		for _, o := range outcomes {
			if o.claim == winner {
				continue
			}
			require.ErrorIs(t, o.err, idem.ErrDuplicate)
			var dup *idem.DuplicateError
			require.ErrorAs(t, o.err, &dup)
			require.Equal(t, fullKey("evt_1"), dup.Key)
			require.Equal(t, idem.StateProcessing, dup.State)
			require.Equal(t, winner.Holder(), dup.Holder)
			require.Equal(t, winner.Token(), dup.Token)
			require.True(t, dup.ExpiresAt.Equal(winner.ExpiresAt()))
		}

		row, ok := bundle.row(t, fullKey("evt_1"))
		require.True(t, ok)
		require.Equal(t, "processing", row.State)
		require.Equal(t, winner.Token(), row.Token)
		require.Equal(t, winner.Holder(), row.Holder)
	})

	t.Run("BlankSegmentIsAnError", func(t *testing.T) {
		t.Parallel()
		store, bundle := setup(t)
		claim, err := store.Claim(context.Background(), nil, opts(" ", "h"))
		require.ErrorIs(t, err, idem.ErrEmptySegment)
		require.Nil(t, claim)
		require.Zero(t, bundle.countClaims(t))
	})

	t.Run("ValidatesOptions", func(t *testing.T) {
		t.Parallel()
		store, _ := setup(t)
		ctx := context.Background()
		for name, mutate := range map[string]func(*idem.Options){
			"NegativeLease":       func(o *idem.Options) { o.Lease = -time.Second },
			"NegativeDedupWindow": func(o *idem.Options) { o.DedupWindow = -time.Second },
			"RenewEveryNotBelowLease": func(o *idem.Options) {
				o.Lease = time.Second
				o.RenewEvery = time.Second
			},
			"UnknownOnDuplicate": func(o *idem.Options) { o.OnDuplicate = 7 },
			"TinyLease":          func(o *idem.Options) { o.Lease = time.Microsecond },
			"TinyRenewEvery":     func(o *idem.Options) { o.RenewEvery = time.Microsecond },
		} {
			o := opts("seg", "h")
			mutate(&o)
			_, err := store.Claim(ctx, nil, o)
			require.ErrorContains(t, err, "idem: Options.", name)
			_, err = store.RunExternal(ctx, o, func(context.Context) error { return nil })
			require.ErrorContains(t, err, "idem: Options.", name)
		}
	})

	t.Run("ExpiredClaimIsTakenOverWithLargerToken", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		store, bundle := setup(t)

		stale := opts("evt_1", "stale")
		stale.Lease = 100 * time.Millisecond
		old, err := store.Claim(ctx, nil, stale)
		require.NoError(t, err)

		next := claimWhenFree(t, store, opts("evt_1", "next"))
		require.Greater(t, next.Token(), old.Token())

		// The stale holder is fenced off from everything.
		require.ErrorIs(t, old.Complete(ctx, nil), idem.ErrLeaseLost)
		require.ErrorIs(t, old.Release(ctx, nil), idem.ErrLeaseLost)
		require.ErrorIs(t, old.Renew(ctx), idem.ErrLeaseLost)

		row, ok := bundle.row(t, fullKey("evt_1"))
		require.True(t, ok)
		require.Equal(t, "processing", row.State)
		require.Equal(t, "next", row.Holder)
		require.Equal(t, next.Token(), row.Token)

		require.NoError(t, next.Complete(ctx, nil))
	})

	t.Run("TokenNeverRepeats", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		store, bundle := setup(t)

		var tokens []int64
		for i := range 5 {
			c, err := store.Claim(ctx, nil, opts("evt_1", fmt.Sprintf("h%d", i)))
			require.NoError(t, err)
			tokens = append(tokens, c.Token())
			require.NoError(t, c.Release(ctx, nil))
			require.Zero(t, bundle.countClaims(t))
		}
		// Deleted by Cleanup rather than released.
		o := opts("evt_1", "h")
		o.DedupWindow = time.Millisecond
		c, err := store.Claim(ctx, nil, o)
		require.NoError(t, err)
		tokens = append(tokens, c.Token())
		require.NoError(t, c.Complete(ctx, nil))
		eventually(t, "cleanup of the completed row", func() bool {
			n, err := store.Cleanup(ctx, 10)
			require.NoError(t, err)
			return n == 1
		})
		c, err = store.Claim(ctx, nil, o)
		require.NoError(t, err)
		tokens = append(tokens, c.Token())

		for i := 1; i < len(tokens); i++ {
			require.Greater(t, tokens[i], tokens[i-1], "tokens %v", tokens)
		}
	})

	t.Run("CompletedIsDuplicateUntilDedupWindowPasses", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		store, bundle := setup(t)

		o := opts("evt_1", "first")
		// Long enough for the next three statements on a loaded machine.
		o.DedupWindow = time.Second
		first, err := store.Claim(ctx, nil, o)
		require.NoError(t, err)
		require.NoError(t, first.Complete(ctx, nil))

		row, ok := bundle.row(t, fullKey("evt_1"))
		require.True(t, ok)
		require.Equal(t, "completed", row.State)
		require.NotNil(t, row.CompletedAt)
		require.Equal(t, time.Second, row.ExpiresAt.Sub(*row.CompletedAt))

		_, err = store.Claim(ctx, nil, opts("evt_1", "second"))
		var dup *idem.DuplicateError
		require.ErrorAs(t, err, &dup)
		require.Equal(t, idem.StateCompleted, dup.State)
		require.Equal(t, "first", dup.Holder)

		// Completing twice, or releasing after completing, is refused.
		require.ErrorIs(t, first.Complete(ctx, nil), idem.ErrLeaseLost)
		require.ErrorIs(t, first.Release(ctx, nil), idem.ErrLeaseLost)

		second := claimWhenFree(t, store, opts("evt_1", "second"))
		require.Greater(t, second.Token(), first.Token())
		row, ok = bundle.row(t, fullKey("evt_1"))
		require.True(t, ok)
		require.Equal(t, "processing", row.State)
		require.Nil(t, row.CompletedAt)
	})

	t.Run("OverrideCompletedBefore", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		store, bundle := setup(t)

		first, err := store.Claim(ctx, nil, opts("evt_1", "first"))
		require.NoError(t, err)
		require.NoError(t, first.Complete(ctx, nil))
		row, ok := bundle.row(t, fullKey("evt_1"))
		require.True(t, ok)
		completedAt := *row.CompletedAt

		// Completed at the cutoff, not before it: still a duplicate.
		replay := opts("evt_1", "replay")
		replay.OverrideCompletedBefore = completedAt
		_, err = store.Claim(ctx, nil, replay)
		var dup *idem.DuplicateError
		require.ErrorAs(t, err, &dup)
		require.Equal(t, idem.StateCompleted, dup.State)

		// Completed before the cutoff: taken over.
		replay.OverrideCompletedBefore = completedAt.Add(time.Microsecond)
		replayed, err := store.Claim(ctx, nil, replay)
		require.NoError(t, err)
		require.Greater(t, replayed.Token(), first.Token())

		// Never a live processing row, however late the cutoff.
		replay.OverrideCompletedBefore = time.Now().Add(24 * time.Hour)
		_, err = store.Claim(ctx, nil, replay)
		require.ErrorAs(t, err, &dup)
		require.Equal(t, idem.StateProcessing, dup.State)
		require.Equal(t, replayed.Token(), dup.Token)
	})

	t.Run("InCallerTransaction", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		store, bundle := setup(t)

		// Rolled back: the claim never existed.
		tx, err := bundle.pool.Begin(ctx)
		require.NoError(t, err)
		_, err = store.Claim(ctx, tx, opts("evt_1", "tx"))
		require.NoError(t, err)
		require.NoError(t, tx.Rollback(ctx))
		require.Zero(t, bundle.countClaims(t))

		// Committed: visible to others.
		tx, err = bundle.pool.Begin(ctx)
		require.NoError(t, err)
		claim, err := store.Claim(ctx, tx, opts("evt_1", "tx"))
		require.NoError(t, err)
		require.NoError(t, tx.Commit(ctx))
		_, err = store.Claim(ctx, nil, opts("evt_1", "other"))
		require.ErrorIs(t, err, idem.ErrDuplicate)

		// Completion in a rolled-back transaction does not stick.
		tx, err = bundle.pool.Begin(ctx)
		require.NoError(t, err)
		require.NoError(t, claim.Complete(ctx, tx))
		require.NoError(t, tx.Rollback(ctx))
		row, _ := bundle.row(t, fullKey("evt_1"))
		require.Equal(t, "processing", row.State)
		require.NoError(t, claim.Complete(ctx, nil))
	})

	t.Run("Telemetry", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		store, bundle := setup(t)

		claim, err := store.Claim(ctx, nil, opts("evt_1", "first"))
		require.NoError(t, err)
		_, err = store.Claim(ctx, nil, opts("evt_1", "second"))
		require.ErrorIs(t, err, idem.ErrDuplicate)
		require.NoError(t, claim.Complete(ctx, nil))
		_, err = store.Claim(ctx, nil, opts("evt_1", "third"))
		require.ErrorIs(t, err, idem.ErrDuplicate)

		base := idem.Event{Key: fullKey("evt_1"), Namespace: testNamespace, Scope: testScope, Holder: "first", Token: claim.Token()}
		with := func(kind string, state idem.State) recordedEvent {
			ev := base
			ev.State = state
			return recordedEvent{Kind: kind, Event: ev}
		}
		require.Equal(t, []recordedEvent{
			with("claimed", idem.StateProcessing),
			with("duplicate", idem.StateProcessing),
			with("completed", idem.StateCompleted),
			with("duplicate", idem.StateCompleted),
		}, bundle.events.take())

		// Release emits nothing.
		c2, err := store.Claim(ctx, nil, opts("evt_2", "h"))
		require.NoError(t, err)
		require.NoError(t, c2.Release(ctx, nil))
		evs := bundle.events.take()
		require.Len(t, evs, 1)
		require.Equal(t, "claimed", evs[0].Kind)
	})
}

// Renewal timing for TestLeaseRenewal: a lease long enough that a loaded
// machine (the whole suite on two cores) does not stall a renewal past it
// (300 ms did, once), short enough that the work outlives three leases in
// a few seconds.
const (
	renewalLease = time.Second
	renewalEvery = 50 * time.Millisecond
)

// TestLeaseRenewal holds the tests that need a lease NOT to run out, which a
// loaded machine could make happen by delaying renewals. It deliberately does
// not call t.Parallel: a top-level test that does not runs while every
// parallel test is paused, so the 200-goroutine stampede tests cannot starve
// these renewals. Its subtests still run in parallel with each other.
func TestLeaseRenewal(t *testing.T) {

	t.Run("KeepAliveRenewsPastLease", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		store, bundle := setup(t)

		o := opts("evt_1", "long")
		o.Lease = renewalLease
		o.RenewEvery = renewalEvery
		const lease = renewalLease
		claim, err := store.Claim(ctx, nil, o)
		require.NoError(t, err)
		firstExpiry := claim.ExpiresAt()

		workCtx, stop := claim.KeepAlive(ctx)
		competeFor(t, store, 3*lease, "evt_1", "long")
		require.NoError(t, workCtx.Err())
		require.NoError(t, stop())
		require.ErrorIs(t, workCtx.Err(), context.Canceled) // stop cancels workCtx
		require.NoError(t, stop())                          // idempotent

		require.True(t, claim.ExpiresAt().After(firstExpiry.Add(lease)), "lease was not renewed")
		row, _ := bundle.row(t, fullKey("evt_1"))
		require.True(t, row.ExpiresAt.Equal(claim.ExpiresAt()))
		require.NoError(t, claim.Complete(ctx, nil))
	})

	t.Run("RunRenewsLongWork", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		store, bundle := setup(t)

		o := opts("evt_1", "long")
		o.Lease = renewalLease
		o.RenewEvery = renewalEvery
		const lease = renewalLease
		res, err := store.Run(ctx, o, func(ctx context.Context, tx pgx.Tx) error {
			competeFor(t, store, 3*lease, "evt_1", "long")
			require.NoError(t, ctx.Err())
			return logWork(ctx, tx, fullKey("evt_1"), "long")
		})
		require.NoError(t, err)
		require.Equal(t, idem.StatusCompleted, res.Status)
		require.Equal(t, []string{"long"}, bundle.workHolders(t))
	})
}

func TestKeepAlive(t *testing.T) {
	t.Parallel()

	t.Run("CancelsWorkWhenLeaseLost", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		store, bundle := setup(t)

		o := opts("evt_1", "h")
		o.Lease = time.Minute
		o.RenewEvery = 20 * time.Millisecond
		claim, err := store.Claim(ctx, nil, o)
		require.NoError(t, err)
		workCtx, stop := claim.KeepAlive(ctx)

		// Simulate the row vanishing under the holder (an operator, or
		// Cleanup after a long stall) and someone else claiming it.
		_, err = bundle.pool.Exec(ctx, `DELETE FROM idem_claims`)
		require.NoError(t, err)
		_, err = store.Claim(ctx, nil, opts("evt_1", "other"))
		require.NoError(t, err)

		receive(t, workCtx.Done(), "workCtx to be cancelled")
		require.ErrorIs(t, context.Cause(workCtx), idem.ErrLeaseLost)
		require.ErrorIs(t, stop(), idem.ErrLeaseLost)
	})

	t.Run("StopsWithParentContext", func(t *testing.T) {
		t.Parallel()
		store, _ := setup(t)
		claim, err := store.Claim(context.Background(), nil, opts("evt_1", "h"))
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		workCtx, stop := claim.KeepAlive(ctx)
		cancel()
		receive(t, workCtx.Done(), "workCtx to follow its parent")
		require.NoError(t, stop())
	})

	t.Run("RenewalOff", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		store, _ := setup(t)
		o := opts("evt_1", "h")
		o.Lease = 100 * time.Millisecond
		o.RenewEvery = -1
		claim, err := store.Claim(ctx, nil, o)
		require.NoError(t, err)
		workCtx, stop := claim.KeepAlive(ctx)
		claimWhenFree(t, store, opts("evt_1", "other"))
		require.NoError(t, workCtx.Err())
		require.NoError(t, stop())
		require.ErrorIs(t, claim.Complete(ctx, nil), idem.ErrLeaseLost)
	})
}

// claimWhenFree polls Claim until the key is free and returns the claim.
func claimWhenFree(t *testing.T, store *idem.Store, o idem.Options) *idem.Claim {
	t.Helper()
	var claim *idem.Claim
	eventually(t, "key "+o.Segment+" to become claimable", func() bool {
		c, err := store.Claim(context.Background(), nil, o)
		if errors.Is(err, idem.ErrDuplicate) {
			return false
		}
		require.NoError(t, err)
		claim = c
		return true
	})
	return claim
}

// competeFor keeps trying to claim segment for d, measured from now, and at
// least 5 times, requiring every attempt to be refused by a processing claim
// held by holder.
func competeFor(t *testing.T, store *idem.Store, d time.Duration, segment, holder string) {
	t.Helper()
	deadline := time.Now().Add(d)
	attempts := 0
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for time.Now().Before(deadline) || attempts < 5 {
		_, err := store.Claim(context.Background(), nil, opts(segment, "competitor"))
		var dup *idem.DuplicateError
		require.ErrorAs(t, err, &dup, "attempt %d", attempts)
		require.Equal(t, idem.StateProcessing, dup.State)
		require.Equal(t, holder, dup.Holder)
		attempts++
		<-tick.C
	}
}

// TestStatements: a claim taken and completed through the embeddable
// statements behaves like Claim and Complete, telemetry included.
func TestStatements(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, bundle := setup(t)
	o := opts("evt_stmt", "h1")

	st, err := store.ClaimStatement(o)
	require.NoError(t, err)
	require.Len(t, st.Args, 4)
	// Embedded as a CTE, with a write of the caller's that depends on it.
	sql := `WITH claim AS (` + st.SQL + `),
		w AS (INSERT INTO work_log (key, holder) SELECT $5, $6 FROM claim)
		SELECT token, expires_at FROM claim`
	var token int64
	var expiresAt time.Time
	require.NoError(t, bundle.pool.QueryRow(ctx, sql, append(st.Args, fullKey("evt_stmt"), "h1")...).Scan(&token, &expiresAt))
	claim, err := store.ClaimFromRow(o, token, expiresAt)
	require.NoError(t, err)
	require.Equal(t, fullKey("evt_stmt"), claim.Key())
	require.Equal(t, token, claim.Token())
	require.Equal(t, "h1", claim.Holder())
	require.True(t, claim.ExpiresAt().Equal(expiresAt))
	require.Equal(t, []string{"h1"}, bundle.workHolders(t))

	// Refused: no row, and the caller's write does not happen.
	st2, err := store.ClaimStatement(opts("evt_stmt", "h2"))
	require.NoError(t, err)
	require.Equal(t, st.SQL, st2.SQL, "the SQL depends only on the table")
	err = bundle.pool.QueryRow(ctx, sql, append(st2.Args, fullKey("evt_stmt"), "h2")...).Scan(&token, &expiresAt)
	require.ErrorIs(t, err, pgx.ErrNoRows)
	require.Equal(t, []string{"h1"}, bundle.workHolders(t))
	_, err = store.Claim(ctx, nil, opts("evt_stmt", "h2"))
	var dup *idem.DuplicateError
	require.ErrorAs(t, err, &dup)
	require.Equal(t, "h1", dup.Holder)

	// Complete through the statement.
	cs := claim.CompleteStatement()
	require.Len(t, cs.Args, 3)
	csql := `WITH claim AS (` + cs.SQL + `) SELECT count(*) FROM claim`
	var n int64
	require.NoError(t, bundle.pool.QueryRow(ctx, csql, cs.Args...).Scan(&n))
	require.NoError(t, claim.ReportCompleted(n))
	row, ok := bundle.row(t, fullKey("evt_stmt"))
	require.True(t, ok)
	require.Equal(t, "completed", row.State)
	require.NotNil(t, row.CompletedAt)

	// Again: the row is no longer processing under the token.
	require.NoError(t, bundle.pool.QueryRow(ctx, csql, cs.Args...).Scan(&n))
	require.Zero(t, n)
	require.ErrorIs(t, claim.ReportCompleted(n), idem.ErrLeaseLost)
	require.ErrorIs(t, claim.Complete(ctx, nil), idem.ErrLeaseLost)

	var kinds []string
	for _, ev := range bundle.events.take() {
		kinds = append(kinds, ev.Kind)
		require.Equal(t, fullKey("evt_stmt"), ev.Key)
	}
	require.Equal(t, []string{"claimed", "duplicate", "completed"}, kinds)

	_, err = store.ClaimStatement(opts(" ", "h"))
	require.ErrorIs(t, err, idem.ErrEmptySegment)
	_, err = store.ClaimFromRow(opts(" ", "h"), 1, time.Now())
	require.ErrorIs(t, err, idem.ErrEmptySegment)
}
