package idem

import (
	"context"
	"errors"
	"fmt"
	"regexp"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DB is what idem needs from a database handle. *pgxpool.Pool, *pgx.Conn and
// pgx.Tx all satisfy it.
//
// The DB given to NewStore must be safe for concurrent use when Run,
// RunExternal or Claim.KeepAlive are used (a *pgxpool.Pool), because lease
// renewals run on it while the work runs, and it must not be a transaction:
// Run and RunExternal rely on the claim committing on its own.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Begin(ctx context.Context) (pgx.Tx, error)
}

// DefaultTable is the claims table used when Config.Table is empty.
const DefaultTable = "idem_claims"

// maxTableLen leaves room for the "_expires_at_idx" suffix within
// PostgreSQL's 63-byte identifier limit.
const maxTableLen = 48

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Config configures a Store. A nil *Config means all defaults.
type Config struct {
	// Table is the name of the claims table. It must be a plain SQL
	// identifier (letters, digits and underscores, not starting with a
	// digit, at most 48 characters); it is quoted, so case matters and
	// reserved words are fine. The token sequence is named Table+"_token_seq"
	// and the index Table+"_expires_at_idx".
	//
	// Default: "idem_claims".
	Table string

	// Telemetry receives claimed/completed/duplicate events.
	//
	// Default: nil (no callbacks).
	Telemetry *Telemetry
}

func (c *Config) validate() error {
	if err := validateTable(c.Table); err != nil {
		return fmt.Errorf("idem: Config.Table: %w", err)
	}
	return nil
}

func validateTable(table string) error {
	if len(table) > maxTableLen {
		return fmt.Errorf("%q is longer than %d characters", table, maxTableLen)
	}
	if !identRE.MatchString(table) {
		return fmt.Errorf("%q is not a plain SQL identifier (use letters, digits and underscores, not starting with a digit)", table)
	}
	return nil
}

// Store claims idempotency keys in a PostgreSQL table. It is safe for
// concurrent use. Create it with NewStore; create its table with CreateTable
// or a migration running the same DDL.
type Store struct {
	db        DB
	table     string
	telemetry Telemetry
	sql       statements
}

// NewStore returns a Store that claims keys through db. cfg may be nil for
// defaults. NewStore does not touch the database.
func NewStore(db DB, cfg *Config) (*Store, error) {
	if db == nil {
		return nil, errors.New("idem: missing database (pass a *pgxpool.Pool to NewStore)")
	}
	c := Config{}
	if cfg != nil {
		c = *cfg
	}
	if c.Table == "" {
		c.Table = DefaultTable
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	s := &Store{db: db, table: c.Table, sql: newStatements(c.Table)}
	if c.Telemetry != nil {
		s.telemetry = *c.Telemetry
	}
	return s, nil
}

// CreateTable creates the claims table, its token sequence and its expires_at
// index if they do not exist yet (DDL in TableDDL). table "" means
// DefaultTable. It serialises concurrent callers with a transaction-scoped
// advisory lock, so it is safe to call from many processes at start-up; it is
// meant for standalone users and tests; services usually put the same DDL in
// their migrations.
func CreateTable(ctx context.Context, db DB, table string) error {
	if table == "" {
		table = DefaultTable
	}
	if err := validateTable(table); err != nil {
		return fmt.Errorf("idem: CreateTable: %w", err)
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("idem: CreateTable: begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext($1))", "idem.CreateTable:"+table); err != nil {
		return fmt.Errorf("idem: CreateTable: lock: %w", err)
	}
	ddl, err := TableDDL(table)
	if err != nil {
		return err
	}
	for _, stmt := range ddl {
		if _, err := tx.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("idem: CreateTable %s: %w", table, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("idem: CreateTable: commit: %w", err)
	}
	return nil
}

// TableDDL returns the statements CreateTable runs for table ("" means
// DefaultTable), in order, for copying into a migration. table must be a
// valid name (see Config.Table).
//
// The sequence deliberately is not OWNED BY the table: dropping and
// recreating the table keeps the sequence, so tokens never repeat.
func TableDDL(table string) ([]string, error) {
	if table == "" {
		table = DefaultTable
	}
	if err := validateTable(table); err != nil {
		return nil, fmt.Errorf("idem: TableDDL: %w", err)
	}
	n := names(table)
	return []string{
		fmt.Sprintf(`CREATE SEQUENCE IF NOT EXISTS %s AS bigint`, n.seq),
		fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (
    key          text        PRIMARY KEY,
    state        text        NOT NULL CHECK (state IN ('processing', 'completed')),
    token        bigint      NOT NULL DEFAULT nextval(%s),
    holder       text        NOT NULL DEFAULT '',
    expires_at   timestamptz NOT NULL,
    claimed_at   timestamptz NOT NULL DEFAULT now(),
    completed_at timestamptz,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now()
)`, n.table, n.seqLit),
		fmt.Sprintf(`CREATE INDEX IF NOT EXISTS %s ON %s (expires_at)`, n.index, n.table),
	}, nil
}

type objectNames struct {
	table, seq, seqLit, index string
}

func names(table string) objectNames {
	seq := pgx.Identifier{table + "_token_seq"}.Sanitize()
	return objectNames{
		table: pgx.Identifier{table}.Sanitize(),
		seq:   seq,
		// The name only holds [A-Za-z0-9_], so it needs no escaping inside
		// the string literal.
		seqLit: "'" + seq + "'::regclass",
		index:  pgx.Identifier{table + "_expires_at_idx"}.Sanitize(),
	}
}

// takeOverSQL is how a claim's insert meets an existing row (the table
// aliased c): it takes the row over, with the new token, holder and
// lease, when the row's lease or dedup window has run out; callers may add
// conditions with OR.
const takeOverSQL = `ON CONFLICT (key) DO UPDATE SET
    state        = 'processing',
    token        = EXCLUDED.token,
    holder       = EXCLUDED.holder,
    expires_at   = EXCLUDED.expires_at,
    claimed_at   = EXCLUDED.claimed_at,
    completed_at = NULL,
    updated_at   = EXCLUDED.updated_at
WHERE c.expires_at <= now()`

// statements are the SQL a Store runs, rendered once for its table. Every
// time comparison and computation uses the database clock (now()), never the
// Go clock. Durations travel as microseconds.
type statements struct {
	claim, lookup, complete, completeReturning, renew, release, cleanup string
}

func newStatements(table string) statements {
	n := names(table)
	return statements{
		// One statement: insert, or take over an expired row (or a
		// completed row the caller may override). No read-then-write race:
		// concurrent claimers serialise on the primary key, and a refused
		// claim returns no row. nextval is evaluated for every attempt, so a
		// takeover always gets a larger token than any before it.
		claim: fmt.Sprintf(`INSERT INTO %[1]s AS c
    (key, state, token, holder, expires_at, claimed_at, completed_at, created_at, updated_at)
VALUES
    ($1, 'processing', nextval(%[2]s), $2, now() + $3::bigint * interval '1 microsecond', now(), NULL, now(), now())
`+takeOverSQL+`
   OR (c.state = 'completed' AND c.completed_at < $4::timestamptz)
RETURNING token, expires_at`, n.table, n.seqLit),

		lookup: fmt.Sprintf(`SELECT state, holder, expires_at, token,
    COALESCE(expires_at <= now() OR (state = 'completed' AND completed_at < $2::timestamptz), false) AS claimable
FROM %s WHERE key = $1`, n.table),

		complete: fmt.Sprintf(`UPDATE %s
SET state = 'completed', expires_at = now() + $3::bigint * interval '1 microsecond',
    completed_at = now(), updated_at = now()
WHERE key = $1 AND token = $2 AND state = 'processing'`, n.table),

		completeReturning: fmt.Sprintf(`UPDATE %s
SET state = 'completed', expires_at = now() + $3::bigint * interval '1 microsecond',
    completed_at = now(), updated_at = now()
WHERE key = $1 AND token = $2 AND state = 'processing'
RETURNING token`, n.table),

		renew: fmt.Sprintf(`UPDATE %s
SET expires_at = now() + $3::bigint * interval '1 microsecond', updated_at = now()
WHERE key = $1 AND token = $2 AND state = 'processing'
RETURNING expires_at`, n.table),

		release: fmt.Sprintf(`DELETE FROM %s WHERE key = $1 AND token = $2 AND state = 'processing'`, n.table),

		// SKIP LOCKED: rows being claimed or completed right now are left for
		// the next run; the outer condition re-checks expiry on the row
		// version actually deleted.
		cleanup: fmt.Sprintf(`DELETE FROM %[1]s
WHERE key IN (
    SELECT key FROM %[1]s
    WHERE expires_at < now()
    ORDER BY expires_at
    LIMIT $1
    FOR UPDATE SKIP LOCKED
) AND expires_at < now()`, n.table),
	}
}

// DefaultCleanupLimit is the batch size Cleanup uses when limit <= 0.
const DefaultCleanupLimit = 1000

// Cleanup deletes rows whose expires_at is before now(), by the database
// clock: completed rows past their dedup window and processing rows whose
// lease ran out (a crashed holder's). It deletes in batches of at most limit
// rows, one statement per batch, until a batch comes back short, and returns
// the number of rows deleted. limit <= 0 means DefaultCleanupLimit. Rows
// locked by a concurrent claim are skipped and left for the next call.
//
// Cleanup is optional for correctness (expired rows are taken over in place
// by Claim); it keeps the table small. Run it periodically.
func (s *Store) Cleanup(ctx context.Context, limit int) (int64, error) {
	if limit <= 0 {
		limit = DefaultCleanupLimit
	}
	var total int64
	for {
		if err := ctx.Err(); err != nil {
			return total, fmt.Errorf("idem: cleanup: %w", err)
		}
		tag, err := s.db.Exec(ctx, s.sql.cleanup, limit)
		if err != nil {
			return total, fmt.Errorf("idem: cleanup: %w", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < int64(limit) {
			return total, nil
		}
	}
}
