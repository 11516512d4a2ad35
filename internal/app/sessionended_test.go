package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/internal/app"
	"github.com/hookline/hookline/internal/config"
	"github.com/hookline/hookline/internal/pgtest"
)

// A connection used less than a second ago is handed out without the
// pool's ping; when the server has ended its session since (a DBA's
// pg_terminate_backend, idle_session_timeout, a restart), the next query
// still succeeds, on a new connection, instead of failing with the FATAL:
// every admin route, the console, /readyz and River share this pool.
func TestPoolReplacesConnectionWhoseSessionEnded(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	u := pgtest.NewURL(t)
	cfg := &config.Config{DatabaseURL: u}
	cfg.Database.MaxConns = 2
	pool, err := app.NewPool(ctx, cfg)
	require.NoError(t, err)
	defer pool.Close()

	killer, err := pgx.Connect(ctx, u)
	require.NoError(t, err)
	defer killer.Close(ctx)

	for round := range 3 {
		var pid int
		require.NoError(t, pool.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid))
		var ended bool
		require.NoError(t, killer.QueryRow(ctx, `SELECT pg_terminate_backend($1)`, pid).Scan(&ended))
		require.True(t, ended)
		require.Eventually(t, func() bool { // the backend ends a moment after the signal
			var left bool
			require.NoError(t, killer.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1)`, pid).Scan(&left))
			return !left
		}, 10*time.Second, 5*time.Millisecond)

		var now int
		require.NoError(t, pool.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&now), "round %d: the ended session's connection is replaced", round)
		require.NotEqual(t, pid, now)
	}
}
