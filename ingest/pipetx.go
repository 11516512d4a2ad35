package ingest

import (
	"context"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// pipeTx is the group committer's transaction: BEGIN travels in the same
// round trip as its first statement (pgx's Batch.BeginTx), and COMMIT can
// travel with River's job insert, its last write. A batch then costs two
// round trips (BEGIN + store, River's insert + COMMIT) instead of four; on a
// loaded machine every round trip waits for both sides to be scheduled
// (~0.3 ms of a ~4 ms batch here).
//
// It is a pgx.Tx, so River's InsertManyTx uses it like any other.
type pipeTx struct {
	pgx.Tx

	// commitOnInsert asks for COMMIT to be sent right behind River's job
	// insert, recognised by its statement name (riverInsertMarker): the
	// caller sets it when that insert is the transaction's last write. A
	// River version whose insert is not recognised just gets the COMMIT in
	// its own round trip. River's insert notification (pg_notify), which
	// follows the insert, then runs after COMMIT, on its own: a wake-up hint
	// for workers, sent a moment later.
	commitOnInsert bool
	committed      bool  // COMMIT went with the insert, and succeeded
	commitErr      error // COMMIT went with the insert, and failed
}

// riverInsertMarker names River's batch job insert in its SQL (sqlc's
// "-- name:" comment), which River's driver runs through Query;
// riverNotifyMarker its insert notification, the one statement River sends
// after the insert.
const (
	riverInsertMarker = "-- name: JobInsertFastMany "
	riverNotifyMarker = "-- name: PGNotifyMany "
)

// errAfterCommit refuses a statement sent after the COMMIT that went with
// River's insert: it would run outside the transaction. Should a River
// version write more after its insert, ingest fails loudly (503s, and every
// ingest test) instead of quietly losing atomicity.
var errAfterCommit = errors.New("ingest: statement after the transaction's COMMIT (sent with River's insert); only River's insert notification may follow it")

// beginPipelined begins a transaction on conn with sql as its first
// statement, in one round trip, and returns the transaction and sql's rows.
// The transaction is usable once the rows are closed.
func beginPipelined(ctx context.Context, conn *pgx.Conn, sql string, args ...any) (*pipeTx, pgx.Rows, error) {
	b := &pgx.Batch{}
	b.BeginTx(pgx.TxOptions{})
	b.Queue(sql, args...)
	br := conn.SendBatch(ctx, b)
	tx := &pipeTx{Tx: br.Tx()}
	if _, err := br.Exec(); err != nil { // BEGIN's answer
		_ = br.Close()
		return tx, nil, err
	}
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		return tx, nil, err
	}
	return tx, &batchRows{Rows: rows, br: br}, nil
}

// afterCommit reports whether sql must be refused: the transaction is over
// and sql is not River's notification.
func (t *pipeTx) afterCommit(sql string) bool {
	return (t.committed || t.commitErr != nil) && !strings.HasPrefix(strings.TrimSpace(sql), riverNotifyMarker)
}

// Commit commits, or reports how the COMMIT sent with River's insert went.
func (t *pipeTx) Commit(ctx context.Context) error {
	switch {
	case t.committed:
		return nil
	case t.commitErr != nil:
		return t.commitErr
	}
	return t.Tx.Commit(ctx)
}

// Rollback rolls back, unless the transaction already ended with River's insert.
func (t *pipeTx) Rollback(ctx context.Context) error {
	if t.committed || t.commitErr != nil {
		return pgx.ErrTxClosed
	}
	return t.Tx.Rollback(ctx)
}

func (t *pipeTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if t.afterCommit(sql) {
		return pgconn.CommandTag{}, errAfterCommit
	}
	return t.Tx.Exec(ctx, sql, args...)
}

func (t *pipeTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if t.afterCommit(sql) {
		return errRow{}
	}
	return t.Tx.QueryRow(ctx, sql, args...)
}

func (t *pipeTx) CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	if t.afterCommit("") {
		return 0, errAfterCommit
	}
	return t.Tx.CopyFrom(ctx, table, cols, src)
}

func (t *pipeTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if t.afterCommit("") {
		return errBatch{}
	}
	return t.Tx.SendBatch(ctx, b)
}

func (t *pipeTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if t.afterCommit(sql) {
		return nil, errAfterCommit
	}
	if !t.commitOnInsert || !strings.HasPrefix(strings.TrimSpace(sql), riverInsertMarker) {
		return t.Tx.Query(ctx, sql, args...)
	}
	t.commitOnInsert = false
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	b.Queue("commit")
	br := t.Tx.SendBatch(ctx, b)
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		return nil, err
	}
	return &commitRows{batchRows: batchRows{Rows: rows, br: br}, tx: t}, nil
}

// batchRows are the rows of a batch's last statement; closing them closes
// the batch, whose error (if any) Err then reports.
type batchRows struct {
	pgx.Rows
	br  pgx.BatchResults
	err error
}

func (r *batchRows) Close() {
	r.Rows.Close()
	if r.br != nil {
		if err := r.br.Close(); err != nil && r.err == nil {
			r.err = err
		}
		r.br = nil
	}
}

func (r *batchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
}

// commitRows are the rows of River's insert with COMMIT queued behind them:
// Close reads COMMIT's answer into the transaction. River checks the rows'
// error before it closes them, so the caller checks the transaction's
// outcome (Commit) after River returns.
type commitRows struct {
	batchRows
	tx *pipeTx
}

func (r *commitRows) Close() {
	r.Rows.Close()
	if r.br == nil {
		return
	}
	tag, err := r.br.Exec()
	switch {
	case r.Rows.Err() != nil:
		// The insert failed: the server skipped COMMIT, and the transaction
		// is still open (aborted) for the caller to roll back.
	case err != nil:
		r.tx.commitErr = err
	case tag.String() != "COMMIT":
		r.tx.commitErr = pgx.ErrTxCommitRollback
	default:
		r.tx.committed = true
	}
	_ = r.br.Close() // its error, if any, is the insert's or COMMIT's, kept above
	r.br = nil
}

// errRow and errBatch answer errAfterCommit.
type errRow struct{}

func (errRow) Scan(...any) error { return errAfterCommit }

type errBatch struct{}

func (errBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, errAfterCommit }
func (errBatch) Query() (pgx.Rows, error)         { return nil, errAfterCommit }
func (errBatch) QueryRow() pgx.Row                { return errRow{} }
func (errBatch) Close() error                     { return errAfterCommit }
func (errBatch) Tx() pgx.Tx                       { return nil }
