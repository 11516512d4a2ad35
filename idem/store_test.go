package idem_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/idem"
	"github.com/hookline/hookline/internal/pgtest"
)

func TestNewStore(t *testing.T) {
	t.Parallel()

	t.Run("RequiresDB", func(t *testing.T) {
		t.Parallel()
		store, err := idem.NewStore(nil, nil)
		require.Error(t, err)
		require.Nil(t, store)
	})

	t.Run("RejectsBadTableNames", func(t *testing.T) {
		t.Parallel()
		pool := pgtest.NewEmptyPool(t)
		for _, table := range []string{"1claims", "claims; DROP TABLE x", `my"table`, "public.claims", "claims-v2", "a_very_long_table_name_that_is_longer_than_the_limit"} {
			store, err := idem.NewStore(pool, &idem.Config{Table: table})
			require.ErrorContains(t, err, "Config.Table", table)
			require.Nil(t, store)
			require.Error(t, idem.CreateTable(context.Background(), pool, table), table)
		}
	})

	t.Run("CustomTable", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		pool := pgtest.NewEmptyPool(t)
		// Quoted, so a reserved word and mixed case both work.
		for _, table := range []string{"Claims", "user"} {
			require.NoError(t, idem.CreateTable(ctx, pool, table))
			store, err := idem.NewStore(pool, &idem.Config{Table: table})
			require.NoError(t, err)
			claim, err := store.Claim(ctx, nil, opts("seg", "h"))
			require.NoError(t, err)
			require.NoError(t, claim.Complete(ctx, nil))
			_, err = store.Claim(ctx, nil, opts("seg", "h"))
			require.ErrorIs(t, err, idem.ErrDuplicate)
		}
	})
}

func TestMigratedSchema(t *testing.T) {
	t.Parallel()

	// hookline's own migration creates the table as hookline_claims; the
	// Store must work on it unchanged.
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	store, err := idem.NewStore(pool, &idem.Config{Table: "hookline_claims"})
	require.NoError(t, err)

	first, err := store.Claim(ctx, nil, opts("evt_1", "a"))
	require.NoError(t, err)
	require.NoError(t, first.Release(ctx, nil))
	res, err := store.RunExternal(ctx, opts("evt_1", "b"), func(context.Context) error { return nil })
	require.NoError(t, err)
	require.Equal(t, idem.StatusCompleted, res.Status)
	require.Greater(t, res.Token, first.Token())
	_, err = store.Claim(ctx, nil, opts("evt_1", "c"))
	require.ErrorIs(t, err, idem.ErrDuplicate)
	_, err = store.Cleanup(ctx, 0)
	require.NoError(t, err)
}

func TestCreateTable(t *testing.T) {
	t.Parallel()

	t.Run("IsIdempotentAndSafeConcurrently", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		pool := pgtest.NewEmptyPool(t)
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for i := range errs {
			wg.Go(func() { errs[i] = idem.CreateTable(ctx, pool, "") })
		}
		wg.Wait()
		for _, err := range errs {
			require.NoError(t, err)
		}
		require.NoError(t, idem.CreateTable(ctx, pool, idem.DefaultTable))

		var n int
		require.NoError(t, pool.QueryRow(ctx,
			`SELECT count(*) FROM pg_indexes WHERE tablename = 'idem_claims' AND indexname = 'idem_claims_expires_at_idx'`).Scan(&n))
		require.Equal(t, 1, n)
	})

	t.Run("DDL", func(t *testing.T) {
		t.Parallel()
		ddl, err := idem.TableDDL("")
		require.NoError(t, err)
		require.Len(t, ddl, 3)
		_, err = idem.TableDDL("bad name")
		require.Error(t, err)
	})
}

func TestCleanup(t *testing.T) {
	t.Parallel()

	t.Run("DeletesOnlyExpiredRows", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		store, bundle := setup(t)

		// Three processing claims that will expire, a live one, a completed
		// one inside its window and a completed one past it.
		for _, seg := range []string{"expired-1", "expired-2", "expired-3"} {
			o := opts(seg, "crashed")
			o.Lease = 50 * time.Millisecond
			_, err := store.Claim(ctx, nil, o)
			require.NoError(t, err)
		}
		_, err := store.Claim(ctx, nil, opts("live", "h"))
		require.NoError(t, err)
		done, err := store.Claim(ctx, nil, opts("done", "h"))
		require.NoError(t, err)
		require.NoError(t, done.Complete(ctx, nil))
		oShort := opts("done-expired", "h")
		oShort.DedupWindow = 50 * time.Millisecond
		doneExpired, err := store.Claim(ctx, nil, oShort)
		require.NoError(t, err)
		require.NoError(t, doneExpired.Complete(ctx, nil))

		eventually(t, "four rows to expire", func() bool {
			var n int
			require.NoError(t, bundle.pool.QueryRow(ctx, `SELECT count(*) FROM idem_claims WHERE expires_at < now()`).Scan(&n))
			return n == 4
		})

		// Batches of 3: a full batch, then a short one.
		deleted, err := store.Cleanup(ctx, 3)
		require.NoError(t, err)
		require.Equal(t, int64(4), deleted)

		_, ok := bundle.row(t, fullKey("live"))
		require.True(t, ok)
		_, ok = bundle.row(t, fullKey("done"))
		require.True(t, ok)
		require.Equal(t, 2, bundle.countClaims(t))

		deleted, err = store.Cleanup(ctx, 0)
		require.NoError(t, err)
		require.Zero(t, deleted)
	})

	t.Run("ExpiredHolderLosesLease", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		store, bundle := setup(t)

		o := opts("seg", "crashed")
		o.Lease = 50 * time.Millisecond
		stale, err := store.Claim(ctx, nil, o)
		require.NoError(t, err)
		eventually(t, "the lease to expire", func() bool {
			deleted, err := store.Cleanup(ctx, 10)
			require.NoError(t, err)
			return deleted == 1
		})
		require.Zero(t, bundle.countClaims(t))
		require.ErrorIs(t, stale.Complete(ctx, nil), idem.ErrLeaseLost)
	})
}
