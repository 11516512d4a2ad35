package ingest

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/internal/pgtest"
)

// beginPipelined's transaction behaves as one: BEGIN goes with the first
// statement, writes are visible to others only after Commit, a failed
// statement makes Commit report the rollback, and Rollback undoes everything.
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
	begin := func(sql string) (*pipeTx, []int, error) {
		c, err := pool.Acquire(ctx)
		require.NoError(t, err)
		t.Cleanup(c.Release)
		tx, rows, err := beginPipelined(ctx, c.Conn(), sql, pipeOpts{})
		if err != nil {
			return tx, nil, err
		}
		vs, err := pgx.CollectRows(rows, pgx.RowTo[int]) // closes the rows, and the batch
		return tx, vs, err
	}

	tx, vs, err := begin(`INSERT INTO pipe_t VALUES (1), (2) RETURNING v`)
	require.NoError(t, err)
	require.Equal(t, []int{1, 2}, vs)
	require.Equal(t, byte('T'), tx.Conn().PgConn().TxStatus(), "inside a transaction")
	_, err = tx.Exec(ctx, `INSERT INTO pipe_t VALUES (3)`)
	require.NoError(t, err)
	require.Zero(t, count(), "not visible before COMMIT")
	require.NoError(t, tx.Commit(ctx))
	require.ErrorIs(t, tx.Commit(ctx), pgx.ErrTxClosed)
	require.Equal(t, 3, count())

	// A failing first statement: the error comes out of the rows; roll back.
	tx, _, err = begin(`INSERT INTO pipe_t VALUES (1) RETURNING v`)
	require.Error(t, err, "duplicate key")
	require.NoError(t, tx.Rollback(ctx))
	require.Equal(t, byte('I'), tx.Conn().PgConn().TxStatus())

	// A later statement fails: COMMIT reports the rollback, nothing is kept.
	tx, _, err = begin(`INSERT INTO pipe_t VALUES (10) RETURNING v`)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `INSERT INTO pipe_t VALUES (1)`)
	require.Error(t, err)
	require.ErrorIs(t, tx.Commit(ctx), pgx.ErrTxCommitRollback)
	require.Equal(t, 3, count())

	// Rollback undoes the first statement too.
	tx, _, err = begin(`INSERT INTO pipe_t VALUES (20) RETURNING v`)
	require.NoError(t, err)
	require.NoError(t, tx.Rollback(ctx))
	require.Equal(t, 3, count())

	// COMMIT with the first statement: over in one round trip; nothing may follow.
	c, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer c.Release()
	tx, rows, err := beginPipelined(ctx, c.Conn(), `INSERT INTO pipe_t VALUES (30) RETURNING v`, pipeOpts{commit: true, after: []string{`SELECT pg_notify('pipe_t', 'x')`}})
	require.NoError(t, err)
	vs, err = pgx.CollectRows(rows, pgx.RowTo[int])
	require.NoError(t, err)
	require.Equal(t, []int{30}, vs)
	require.Equal(t, byte('I'), c.Conn().PgConn().TxStatus(), "committed")
	require.Equal(t, 4, count())
	require.NoError(t, tx.Commit(ctx))
	require.ErrorIs(t, tx.Commit(ctx), pgx.ErrTxClosed)
	require.ErrorIs(t, tx.Rollback(ctx), pgx.ErrTxClosed)
	_, err = tx.Exec(ctx, `INSERT INTO pipe_t VALUES (31)`)
	require.ErrorIs(t, err, errAfterCommit)
	_, err = tx.Query(ctx, `SELECT 1`)
	require.ErrorIs(t, err, errAfterCommit)
	require.ErrorIs(t, tx.QueryRow(ctx, `SELECT 1`).Scan(new(int)), errAfterCommit)

	// The first statement fails: COMMIT is skipped, Rollback ends the transaction.
	tx, rows, err = beginPipelined(ctx, c.Conn(), `INSERT INTO pipe_t VALUES (30) RETURNING v`, pipeOpts{commit: true})
	if err == nil {
		_, err = pgx.CollectRows(rows, pgx.RowTo[int])
	}
	require.ErrorContains(t, err, "duplicate key")
	require.NoError(t, tx.Rollback(ctx))
	require.Equal(t, byte('I'), c.Conn().PgConn().TxStatus())

	// A statement behind the first fails: COMMIT is skipped, nothing is kept.
	tx, rows, err = beginPipelined(ctx, c.Conn(), `INSERT INTO pipe_t VALUES (40) RETURNING v`, pipeOpts{commit: true, after: []string{`SELECT 1/0`}})
	require.NoError(t, err)
	for rows.Next() {
	}
	rows.Close() // the statements behind the first answer when the rows close
	require.ErrorContains(t, rows.Err(), "division by zero")
	require.NoError(t, tx.Rollback(ctx))
	require.Equal(t, byte('I'), c.Conn().PgConn().TxStatus())
	require.Equal(t, 4, count())
}

// The group committer's transaction is one round trip (BEGIN, the store
// statement with the River jobs, River's notification, COMMIT) and all or
// nothing: a job insert that fails stores nothing, and neither does a COMMIT
// that fails after the statement succeeded. A batch with a reject source
// writes its dead items in the same transaction before COMMIT.
func TestPipelinedCommitIsAtomic(t *testing.T) {
	t.Parallel()
	st, pool := testStore(t)
	ctx := context.Background()
	skip := testSource(&Source{Name: "s", OnDuplicate: OnDuplicateSkip, MaxAttempts: 3})
	mk := func(src *Source, id string) *Delivery { return testDelivery(src, id, "ok") }
	stored := func(id string) (deliveries, jobs int) {
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM hookline_deliveries WHERE body = $1`, []byte(`{"id":"`+id+`"}`)).Scan(&deliveries))
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE args->>'event_id' = $1`, id).Scan(&jobs))
		return deliveries, jobs
	}

	out, err := st.commitPipelined(ctx, []*Delivery{mk(skip, "evt_ride_1"), mk(skip, "evt_ride_2")})
	require.NoError(t, err)
	require.Equal(t, StatusAccepted, out[0][0].Status)
	d, j := stored("evt_ride_2")
	require.Equal(t, [2]int{1, 1}, [2]int{d, j})

	// The job insert fails: the transaction rolls back.
	_, err = pool.Exec(ctx, `CREATE FUNCTION boom() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN IF NEW.args->>'event_id' = 'evt_boom' THEN RAISE EXCEPTION 'boom'; END IF; RETURN NEW; END $$;
		CREATE TRIGGER boom BEFORE INSERT ON river_job FOR EACH ROW EXECUTE FUNCTION boom()`)
	require.NoError(t, err)
	_, err = st.commitPipelined(ctx, []*Delivery{mk(skip, "evt_boom_mate"), mk(skip, "evt_boom")})
	require.ErrorContains(t, err, "boom")
	for _, id := range []string{"evt_boom", "evt_boom_mate"} {
		d, j := stored(id)
		require.Equal(t, [2]int{0, 0}, [2]int{d, j}, id)
	}

	// The statement succeeds, COMMIT fails (a deferred constraint): nothing kept.
	_, err = pool.Exec(ctx, `CREATE FUNCTION late() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN IF NEW.event_id = 'evt_late' THEN RAISE EXCEPTION 'late'; END IF; RETURN NEW; END $$;
		CREATE CONSTRAINT TRIGGER late AFTER INSERT ON hookline_events DEFERRABLE INITIALLY DEFERRED
			FOR EACH ROW EXECUTE FUNCTION late()`)
	require.NoError(t, err)
	_, err = st.commitPipelined(ctx, []*Delivery{mk(skip, "evt_late_mate"), mk(skip, "evt_late")})
	require.ErrorContains(t, err, "late")
	for _, id := range []string{"evt_late", "evt_late_mate"} {
		d, j := stored(id)
		require.Equal(t, [2]int{0, 0}, [2]int{d, j}, id)
	}

	// A reject source may need dead items after the store statement's answer:
	// COMMIT then goes on its own, and the dead item is in the transaction.
	reject := testSource(&Source{Name: "r", OnDuplicate: OnDuplicateReject, MaxAttempts: 3})
	res, err := st.commitPipelined(ctx, []*Delivery{mk(reject, "evt_rej"), mk(reject, "evt_rej")})
	require.NoError(t, err)
	require.Equal(t, StatusAccepted, res[0][0].Status)
	require.Equal(t, StatusDuplicate, res[1][0].Status)
	var dead int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM hookline_dead WHERE event_id = 'evt_rej' AND reason = 'duplicate'`).Scan(&dead))
	require.Equal(t, 1, dead)
	d, j = stored("evt_rej")
	require.Equal(t, [2]int{2, 1}, [2]int{d, j})

	var stuck int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND state LIKE 'idle in transaction%'`).Scan(&stuck))
	require.Zero(t, stuck, "no connection is left in a transaction")
}

// After the server ends the sessions of the pool's idle connections
// (pg_terminate_backend, as a DBA or a failover does), the next batch is
// not refused: the connection it got is found dead before COMMIT's answer
// (nothing committed), and the batch is sent again on another one. Only a
// FATAL of the session's end is marked so; an ordinary error is not.
func TestBatchSentAgainWhenItsSessionEnded(t *testing.T) {
	t.Parallel()
	st, pool := testStore(t)
	ctx := context.Background()
	b := newBatcher(st.commitPipelined, 1, 8, 0, nil)
	defer b.Close()
	src := testSource(&Source{Name: "s", OnDuplicate: OnDuplicateSkip, MaxAttempts: 3})

	// Several idle connections, all of them then ended by the server.
	var held []*pgxpool.Conn
	for range 4 {
		c, err := pool.Acquire(ctx)
		require.NoError(t, err)
		require.NoError(t, c.Ping(ctx))
		held = append(held, c)
	}
	for _, c := range held {
		c.Release()
	}
	killer, err := pgx.Connect(ctx, pool.Config().ConnString())
	require.NoError(t, err)
	defer killer.Close(ctx)
	var ended int
	require.NoError(t, killer.QueryRow(ctx, `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'`).Scan(&ended))
	require.GreaterOrEqual(t, ended, 4)
	require.Eventually(t, func() bool { // pg_terminate_backend signals; the sessions end a moment later
		var left int
		require.NoError(t, killer.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'`).Scan(&left))
		return left == 0
	}, 10*time.Second, 10*time.Millisecond)

	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	res, err := b.Submit(sctx, testDelivery(src, "evt_after_terminate", "x"), time.Second)
	require.NoError(t, err, "a batch whose connection's session had ended is sent again")
	require.Equal(t, StatusAccepted, res[0].Status)
	var n int
	require.NoError(t, killer.QueryRow(ctx, `SELECT count(*) FROM hookline_events WHERE event_id = 'evt_after_terminate'`).Scan(&n))
	require.Equal(t, 1, n)

	fatal := &pgconn.PgError{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: "57P01"}
	require.ErrorAs(t, uncommittedIfSessionEnded(fatal), new(uncommittedError))
	for _, err := range []error{
		&pgconn.PgError{Severity: "ERROR", SeverityUnlocalized: "ERROR", Code: "57014"}, // a statement cancelled: it ran
		&pgconn.PgError{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: "08P01"},
		io.ErrUnexpectedEOF, // a broken socket: the answers may have been lost
	} {
		require.NotErrorAs(t, uncommittedIfSessionEnded(err), new(uncommittedError), "%v", err)
	}
}
