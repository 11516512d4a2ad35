package ingest

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// pipeTx is the group committer's transaction: BEGIN, its first statement
// and, when that statement is the transaction's only write, COMMIT travel in
// one round trip (a pgx.Batch: pipelined, one Sync): on a loaded machine
// every round trip waits for both sides to be scheduled, so a batch waits
// once instead of four times.
//
// Atomicity is Postgres's: after an error the server skips the rest of the
// pipeline, COMMIT included, and the transaction is left open (aborted) for
// Rollback.
type pipeTx struct {
	pgx.Tx

	committed bool  // COMMIT went with the first statement, and succeeded
	commitErr error // COMMIT went with the first statement, and failed
}

// pipeOpts are what beginPipelined sends behind the first statement.
type pipeOpts struct {
	// after are statements without results (a notification) that belong to
	// the transaction.
	after []string
	// commit sends COMMIT: the caller writes nothing more.
	commit bool
}

// errAfterCommit refuses a statement sent on a transaction whose COMMIT went
// with its first statement: it would run outside the transaction.
var errAfterCommit = errors.New("ingest: statement after the transaction's COMMIT (sent with its first statement)")

// beginPipelined begins a transaction on conn with sql as its first
// statement, followed by opts, in one round trip, and returns the
// transaction and sql's rows. The transaction is usable once the rows are
// closed; with opts.commit it is then over, and Commit reports its outcome.
func beginPipelined(ctx context.Context, conn *pgx.Conn, sql string, opts pipeOpts, args ...any) (*pipeTx, pgx.Rows, error) {
	b := &pgx.Batch{}
	b.BeginTx(pgx.TxOptions{})
	b.Queue(sql, args...)
	for _, s := range opts.after {
		b.Queue(s)
	}
	if opts.commit {
		b.Queue("commit")
	}
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
	return tx, &pipeRows{Rows: rows, br: br, tx: tx, after: len(opts.after), commit: opts.commit}, nil
}

// over reports whether the transaction ended with its first statement.
func (t *pipeTx) over() bool { return t.committed || t.commitErr != nil }

// Commit commits, or reports how the COMMIT sent with the first statement went.
func (t *pipeTx) Commit(ctx context.Context) error {
	switch {
	case t.committed:
		t.committed, t.commitErr = false, pgx.ErrTxClosed // a second Commit is pgx's error
		return nil
	case t.commitErr != nil:
		return t.commitErr
	}
	return t.Tx.Commit(ctx)
}

// Rollback rolls back, unless the transaction already ended.
func (t *pipeTx) Rollback(ctx context.Context) error {
	if t.over() {
		return pgx.ErrTxClosed
	}
	return t.Tx.Rollback(ctx)
}

func (t *pipeTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if t.over() {
		return pgconn.CommandTag{}, errAfterCommit
	}
	return t.Tx.Exec(ctx, sql, args...)
}

func (t *pipeTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if t.over() {
		return nil, errAfterCommit
	}
	return t.Tx.Query(ctx, sql, args...)
}

func (t *pipeTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if t.over() {
		return errRow{}
	}
	return t.Tx.QueryRow(ctx, sql, args...)
}

func (t *pipeTx) CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	if t.over() {
		return 0, errAfterCommit
	}
	return t.Tx.CopyFrom(ctx, table, cols, src)
}

func (t *pipeTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if t.over() {
		return errBatch{}
	}
	return t.Tx.SendBatch(ctx, b)
}

// pipeRows are the rows of the first statement: Close reads the answers of
// the statements behind it, COMMIT's into the transaction, and closes the
// batch; Err reports the first statement's error, or theirs.
type pipeRows struct {
	pgx.Rows
	br     pgx.BatchResults
	tx     *pipeTx
	after  int
	commit bool
	err    error
}

func (r *pipeRows) Close() {
	r.Rows.Close()
	if r.br == nil {
		return
	}
	failed := r.Rows.Err() != nil
	for range r.after {
		if _, err := r.br.Exec(); err != nil && r.err == nil && !failed {
			r.err = err
		}
	}
	if r.commit {
		tag, err := r.br.Exec()
		switch {
		case failed || r.err != nil:
			// A statement failed: the server skipped COMMIT, and the
			// transaction is still open (aborted) for the caller to roll back.
		case err != nil:
			r.tx.commitErr = err
		case tag.String() != "COMMIT":
			r.tx.commitErr = pgx.ErrTxCommitRollback
		default:
			r.tx.committed = true
		}
	}
	if err := r.br.Close(); err != nil && r.err == nil && !failed && !r.tx.over() {
		r.err = err
	}
	r.br = nil
}

func (r *pipeRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
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
