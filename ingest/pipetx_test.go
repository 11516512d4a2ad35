package ingest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/internal/pgtest"
)

// pipeTx behaves as a transaction: BEGIN goes with the first statement,
// writes are visible to others only after Commit, a failed statement makes
// Commit report the rollback, and Rollback undoes everything.
func TestPipeTx(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	ctx := context.Background()
	_, err := pool.Exec(ctx, `CREATE TABLE pipe_t (v int PRIMARY KEY)`)
	require.NoError(t, err)
	count := func() (n int) {
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pipe_t`).Scan(&n))
		return n
	}
	withTx := func(f func(tx *pipeTx)) {
		c, err := pool.Acquire(ctx)
		require.NoError(t, err)
		defer c.Release()
		f(&pipeTx{conn: c.Conn()})
	}

	withTx(func(tx *pipeTx) {
		rows, err := tx.beginWith(ctx, `INSERT INTO pipe_t VALUES (1), (2) RETURNING v`)
		require.NoError(t, err)
		vs, err := pgx.CollectRows(rows, pgx.RowTo[int])
		require.NoError(t, err)
		require.Equal(t, []int{1, 2}, vs)
		require.Equal(t, byte('T'), tx.conn.PgConn().TxStatus(), "inside a transaction")
		_, err = tx.Exec(ctx, `INSERT INTO pipe_t VALUES (3)`)
		require.NoError(t, err)
		require.Zero(t, count(), "not visible before COMMIT")
		require.NoError(t, tx.Commit(ctx))
		require.ErrorIs(t, tx.Commit(ctx), pgx.ErrTxClosed)
		_, err = tx.Begin(ctx)
		require.ErrorIs(t, err, errNoNestedTx)
	})
	require.Equal(t, 3, count())

	// A failing first statement: the error comes out of the rows.
	withTx(func(tx *pipeTx) {
		rows, err := tx.beginWith(ctx, `INSERT INTO pipe_t VALUES (1) RETURNING v`)
		if err == nil {
			for rows.Next() {
			}
			rows.Close()
			err = rows.Err()
		}
		require.Error(t, err, "duplicate key")
		require.True(t, tx.open)
		require.NoError(t, tx.Rollback(ctx))
		require.Equal(t, byte('I'), tx.conn.PgConn().TxStatus())
	})

	// A later statement fails: COMMIT reports the rollback, nothing is kept.
	withTx(func(tx *pipeTx) {
		rows, err := tx.beginWith(ctx, `INSERT INTO pipe_t VALUES (10) RETURNING v`)
		require.NoError(t, err)
		rows.Close()
		require.NoError(t, rows.Err())
		_, err = tx.Exec(ctx, `INSERT INTO pipe_t VALUES (1)`)
		require.Error(t, err)
		require.ErrorIs(t, tx.Commit(ctx), pgx.ErrTxCommitRollback)
	})
	require.Equal(t, 3, count())

	// Rollback undoes the first statement too.
	withTx(func(tx *pipeTx) {
		rows, err := tx.beginWith(ctx, `INSERT INTO pipe_t VALUES (20) RETURNING v`)
		require.NoError(t, err)
		rows.Close()
		require.NoError(t, tx.Rollback(ctx))
	})
	require.Equal(t, 3, count())
	var stuck int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND state LIKE 'idle in transaction%'`).Scan(&stuck))
	require.Zero(t, stuck, "no connection is left in a transaction")
}
