package ingest

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// pipeTx is a transaction whose BEGIN travels in the same round trip as its
// first statement (pgx sends a batch as one pipeline). The group committer
// uses it: a batch then costs three round trips (BEGIN + store, River's
// insert, COMMIT) instead of four, and on a loaded machine every round trip
// waits for both sides to be scheduled (~0.3 ms of a ~4 ms batch here).
//
// It implements pgx.Tx over one connection, so River's InsertManyTx can use
// it like any other transaction. Nested transactions are not offered (River's
// insert does not use them). If the connection is handed back to the pool in
// a transaction (a failed ROLLBACK), pgxpool destroys it rather than reuse it.
type pipeTx struct {
	conn   *pgx.Conn
	open   bool // BEGIN has run
	closed bool // COMMIT or ROLLBACK was sent
}

// errNoNestedTx answers pipeTx.Begin.
var errNoNestedTx = errors.New("ingest: nested transactions are not supported on the pipelined ingest transaction")

// beginWith sends BEGIN and sql in one round trip and returns sql's rows.
func (t *pipeTx) beginWith(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	b := &pgx.Batch{}
	b.Queue("begin")
	b.Queue(sql, args...)
	br := t.conn.SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		_ = br.Close()
		return nil, err
	}
	t.open = true
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, br: br}, nil
}

func (t *pipeTx) Begin(context.Context) (pgx.Tx, error) { return nil, errNoNestedTx }

func (t *pipeTx) Commit(ctx context.Context) error {
	if t.closed || !t.open {
		return pgx.ErrTxClosed
	}
	t.closed = true
	tag, err := t.conn.Exec(ctx, "commit")
	if err != nil {
		return err
	}
	if tag.String() == "ROLLBACK" { // the transaction had failed
		return pgx.ErrTxCommitRollback
	}
	return nil
}

func (t *pipeTx) Rollback(ctx context.Context) error {
	if t.closed || !t.open {
		return pgx.ErrTxClosed
	}
	t.closed = true
	_, err := t.conn.Exec(ctx, "rollback")
	return err
}

func (t *pipeTx) CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	return t.conn.CopyFrom(ctx, table, cols, src)
}

func (t *pipeTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return t.conn.SendBatch(ctx, b)
}

// LargeObjects is not offered: nothing on the ingest path uses them.
func (t *pipeTx) LargeObjects() pgx.LargeObjects { return pgx.LargeObjects{} }

func (t *pipeTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	return t.conn.Prepare(ctx, name, sql)
}

func (t *pipeTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return t.conn.Exec(ctx, sql, args...)
}

func (t *pipeTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return t.conn.Query(ctx, sql, args...)
}

func (t *pipeTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return t.conn.QueryRow(ctx, sql, args...)
}

func (t *pipeTx) Conn() *pgx.Conn { return t.conn }

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
