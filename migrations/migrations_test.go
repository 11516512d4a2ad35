package migrations_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/internal/pgtest"
	"github.com/hookline/hookline/migrations"
)

func TestUpIsIdempotentAndConcurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewEmptyPool(t)

	st, err := migrations.Check(ctx, pool)
	require.NoError(t, err)
	require.False(t, st.Current())

	var wg sync.WaitGroup
	errs := make(chan error, 5)
	for range 5 {
		wg.Go(func() { errs <- migrations.Up(ctx, pool, nil) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	st, err = migrations.Check(ctx, pool)
	require.NoError(t, err)
	require.True(t, st.Current())
	require.Len(t, st.HooklineDone, len(migrations.All()))

	var n int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM hookline_events").Scan(&n))
}

func TestDownAndUpAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewPool(t)

	// down rolls back one step at a time, newest first.
	var exists bool
	for i := len(migrations.All()); i > 1; i-- {
		require.NoError(t, migrations.Down(ctx, pool, false, nil))
		st, err := migrations.Check(ctx, pool)
		require.NoError(t, err)
		require.Len(t, st.HooklineDone, i-1)
	}
	require.NoError(t, pool.QueryRow(ctx, "SELECT to_regclass('hookline_events') IS NOT NULL").Scan(&exists))
	require.True(t, exists)
	require.NoError(t, migrations.Down(ctx, pool, false, nil))
	require.NoError(t, pool.QueryRow(ctx, "SELECT to_regclass('hookline_events') IS NOT NULL").Scan(&exists))
	require.False(t, exists)

	require.NoError(t, migrations.Down(ctx, pool, true, nil))
	require.NoError(t, pool.QueryRow(ctx, "SELECT to_regclass('river_job') IS NOT NULL").Scan(&exists))
	require.False(t, exists)

	require.NoError(t, migrations.Up(ctx, pool, nil))
	st, err := migrations.Check(ctx, pool)
	require.NoError(t, err)
	require.True(t, st.Current())
}
