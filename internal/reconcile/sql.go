package reconcile

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The statements of package reconcile, in one place.
//
// The run lock is a session advisory lock, taken with pg_try_advisory_lock
// on the connection a run holds from start to end, so it is held exactly
// while that connection's session runs the source, and a crashed instance's
// lock goes with its session.
//
// hookline_reconcile_runs has one row per source: the last run's
// started_at (database clock), and once it ended finished_at, checked,
// missing and error (NULL: success). A run claims the row under the lock;
// a periodic claim needs started_at <= now() - every, an on-demand one
// passes every = 0 and always claims. finish writes only the row of the
// run that claimed it (started_at matches).

const (
	tryLockSQL = `SELECT pg_try_advisory_lock($1)`
	unlockSQL  = `SELECT pg_advisory_unlock($1)`

	// claimSQL: source $1, every in microseconds $2. One row iff claimed.
	claimSQL = `INSERT INTO hookline_reconcile_runs AS r (source, started_at) VALUES ($1, now())
		ON CONFLICT (source) DO UPDATE SET started_at = now(), finished_at = NULL, checked = 0, missing = 0, error = NULL
		WHERE r.started_at <= now() - $2::bigint * interval '1 microsecond'
		RETURNING started_at`

	// untilDueSQL: source $1, every in microseconds $2: how long until a
	// periodic run is due, in microseconds (<= 0: due). No row: never ran.
	untilDueSQL = `SELECT (EXTRACT(EPOCH FROM started_at + $2::bigint * interval '1 microsecond' - now()) * 1e6)::bigint
		FROM hookline_reconcile_runs WHERE source = $1`

	// finishSQL: source $1, started_at $2, checked $3, missing $4, error $5.
	finishSQL = `UPDATE hookline_reconcile_runs SET finished_at = now(), checked = $3, missing = $4, error = $5
		WHERE source = $1 AND started_at = $2`
)

// tryLock takes the run lock key on conn's session; false: another session
// holds it.
func tryLock(ctx context.Context, conn *pgxpool.Conn, key int64) (bool, error) {
	var ok bool
	err := conn.QueryRow(ctx, tryLockSQL, key).Scan(&ok)
	return ok, err
}

// unlock releases the run lock key held by conn's session.
func unlock(ctx context.Context, conn *pgxpool.Conn, key int64) error {
	var ok bool
	if err := conn.QueryRow(ctx, unlockSQL, key).Scan(&ok); err != nil {
		return err
	}
	if !ok {
		return errors.New("the session did not hold the run lock")
	}
	return nil
}

// claim records the start of a run of source when the last one started at
// least every ago; false: not due.
func claim(ctx context.Context, conn *pgxpool.Conn, source string, every time.Duration) (startedAt time.Time, ok bool, err error) {
	err = conn.QueryRow(ctx, claimSQL, source, every.Microseconds()).Scan(&startedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, false, nil
	}
	return startedAt, err == nil, err
}

// untilDue is how long until a periodic run of source is due (<= 0: due).
func untilDue(ctx context.Context, pool *pgxpool.Pool, source string, every time.Duration) (time.Duration, error) {
	var us int64
	err := pool.QueryRow(ctx, untilDueSQL, source, every.Microseconds()).Scan(&us)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return time.Duration(us) * time.Microsecond, err
}

// finish records the end of the run of source that started at startedAt.
func finish(ctx context.Context, conn *pgxpool.Conn, source string, startedAt time.Time, res Result, runErr error) error {
	var msg *string
	if runErr != nil {
		s := runErr.Error()
		msg = &s
	}
	_, err := conn.Exec(ctx, finishSQL, source, startedAt, clamp32(res.Checked), clamp32(res.Missing), msg)
	return err
}

// clamp32 fits n in an integer column.
func clamp32(n int) int32 {
	return int32(min(n, 1<<31-1)) //nolint:gosec // clamped
}
