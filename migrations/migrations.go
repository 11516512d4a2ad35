// Package migrations holds hookline's schema: River's own migrations (applied
// through rivermigrate) and hookline's tables (embedded SQL files in sql/).
// Up, Down and Status run inside one transaction holding a Postgres advisory
// lock, so several instances starting together migrate once and the others
// wait, then find nothing to do.
package migrations

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

//go:embed sql/*.sql
var files embed.FS

// lockKey is the advisory lock all hookline migrators take ("hookline" in ASCII).
const lockKey = 0x686f6f6b6c696e65

// Migration is one of hookline's own schema steps.
type Migration struct {
	Version int
	Name    string
	Up      string
	Down    string
}

// All returns hookline's own migrations in order.
func All() []Migration {
	byVersion := map[int]*Migration{}
	entries, _ := fs.ReadDir(files, "sql")
	for _, e := range entries {
		name := e.Name()
		num, rest, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			panic("migrations: bad file name " + name)
		}
		body, _ := files.ReadFile("sql/" + name)
		m := byVersion[v]
		if m == nil {
			m = &Migration{Version: v}
			byVersion[v] = m
		}
		switch {
		case strings.HasSuffix(rest, ".up.sql"):
			m.Name, m.Up = strings.TrimSuffix(rest, ".up.sql"), string(body)
		case strings.HasSuffix(rest, ".down.sql"):
			m.Down = string(body)
		}
	}
	out := make([]Migration, 0, len(byVersion))
	for _, m := range byVersion {
		out = append(out, *m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out
}

// Status reports what is applied.
type Status struct {
	RiverApplied  []int // River migration versions applied
	RiverLatest   int   // newest River migration this build knows
	HooklineDone  []int // hookline versions applied
	HooklineKnown []Migration
}

// Current reports whether everything this build knows is applied.
func (s Status) Current() bool {
	return len(s.RiverApplied) > 0 && s.RiverApplied[len(s.RiverApplied)-1] == s.RiverLatest &&
		len(s.HooklineDone) == len(s.HooklineKnown)
}

// Logf receives progress lines; nil discards them.
type Logf func(format string, args ...any)

// withLock runs fn holding a session-level advisory lock on a dedicated
// connection. River's migrations cannot all run in one transaction (a new
// enum value cannot be used in the transaction that adds it), so the lock,
// not a transaction, is what serialises concurrent migrators.
func withLock(ctx context.Context, pool *pgxpool.Pool, fn func(conn *pgx.Conn) error) error {
	c, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("migrations: connect: %w", err)
	}
	defer c.Release()
	conn := c.Conn()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", int64(lockKey)); err != nil {
		return fmt.Errorf("migrations: advisory lock: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", int64(lockKey)) //nolint:errcheck
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS hookline_migration (
		version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return fmt.Errorf("migrations: version table: %w", err)
	}
	return fn(conn)
}

// inTx runs fn in a transaction on conn.
func inTx(ctx context.Context, conn *pgx.Conn, fn func(tx pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, conn, fn)
}

func applied(ctx context.Context, tx *pgx.Conn) (map[int]bool, error) {
	rows, err := tx.Query(ctx, "SELECT version FROM hookline_migration")
	if err != nil {
		return nil, err
	}
	done := map[int]bool{}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		done[v] = true
	}
	return done, rows.Err()
}

func riverMigrator(pool *pgxpool.Pool) (*rivermigrate.Migrator[pgx.Tx], error) {
	return rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{})
}

// Up applies River's and hookline's pending migrations. It is idempotent and
// safe to run from several processes at once.
func Up(ctx context.Context, pool *pgxpool.Pool, logf Logf) error {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	rm, err := riverMigrator(pool)
	if err != nil {
		return err
	}
	return withLock(ctx, pool, func(conn *pgx.Conn) error {
		res, err := rm.Migrate(ctx, rivermigrate.DirectionUp, nil)
		if err != nil {
			return fmt.Errorf("migrations: river: %w", err)
		}
		for _, v := range res.Versions {
			logf("applied river migration %03d %s", v.Version, v.Name)
		}
		done, err := applied(ctx, conn)
		if err != nil {
			return err
		}
		for _, m := range All() {
			if done[m.Version] {
				continue
			}
			err := inTx(ctx, conn, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, m.Up); err != nil {
					return fmt.Errorf("migrations: %03d_%s: %w", m.Version, m.Name, err)
				}
				_, err := tx.Exec(ctx, "INSERT INTO hookline_migration (version, name) VALUES ($1, $2)", m.Version, m.Name)
				return err
			})
			if err != nil {
				return err
			}
			logf("applied hookline migration %03d %s", m.Version, m.Name)
		}
		return nil
	})
}

// Down rolls back hookline's newest migration; with all, every hookline
// migration and then River's.
func Down(ctx context.Context, pool *pgxpool.Pool, all bool, logf Logf) error {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	rm, err := riverMigrator(pool)
	if err != nil {
		return err
	}
	return withLock(ctx, pool, func(conn *pgx.Conn) error {
		done, err := applied(ctx, conn)
		if err != nil {
			return err
		}
		ms := All()
		for i := len(ms) - 1; i >= 0; i-- {
			m := ms[i]
			if !done[m.Version] {
				continue
			}
			err := inTx(ctx, conn, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, m.Down); err != nil {
					return fmt.Errorf("migrations: down %03d_%s: %w", m.Version, m.Name, err)
				}
				_, err := tx.Exec(ctx, "DELETE FROM hookline_migration WHERE version = $1", m.Version)
				return err
			})
			if err != nil {
				return err
			}
			logf("rolled back hookline migration %03d %s", m.Version, m.Name)
			if !all {
				return nil
			}
		}
		if !all {
			logf("no hookline migration to roll back")
			return nil
		}
		if _, err := conn.Exec(ctx, clearStaleUniqueKeys); err != nil {
			return fmt.Errorf("migrations: river down: %w", err)
		}
		res, err := rm.Migrate(ctx, rivermigrate.DirectionDown, &rivermigrate.MigrateOpts{TargetVersion: -1})
		if err != nil {
			return fmt.Errorf("migrations: river down: %w", err)
		}
		for _, v := range res.Versions {
			logf("rolled back river migration %03d %s", v.Version, v.Name)
		}
		_, err = conn.Exec(ctx, "DROP TABLE hookline_migration")
		return err
	})
}

// clearStaleUniqueKeys clears the unique_key of River's jobs that are
// outside their unique states (a completed run of a unique job), which
// River's uniqueness no longer consults. River's own down of its migration
// 006 recreates a unique index on (kind, unique_key) over every state, which
// such rows break wherever a unique job ran more than once (hookline's
// periodic jobs, a retried event); the jobs still in their unique states
// have distinct keys. A no-op before River's 006 (no bitmask function).
const clearStaleUniqueKeys = `DO $$
BEGIN
	IF EXISTS (SELECT 1 FROM pg_proc WHERE proname = 'river_job_state_in_bitmask' AND pg_function_is_visible(oid)) THEN
		UPDATE river_job SET unique_key = NULL
		WHERE unique_key IS NOT NULL AND unique_states IS NOT NULL AND NOT river_job_state_in_bitmask(unique_states, state);
	END IF;
END $$`

// Check reports the migration status without changing anything.
func Check(ctx context.Context, pool *pgxpool.Pool) (Status, error) {
	var st Status
	rm, err := riverMigrator(pool)
	if err != nil {
		return st, err
	}
	all := rm.AllVersions()
	st.RiverLatest = all[len(all)-1].Version
	st.HooklineKnown = All()
	var exists bool
	if err := pool.QueryRow(ctx, "SELECT to_regclass('river_migration') IS NOT NULL").Scan(&exists); err != nil {
		return st, fmt.Errorf("migrations: %w", err)
	}
	if exists {
		existing, err := rm.ExistingVersions(ctx)
		if err != nil {
			return st, err
		}
		for _, m := range existing {
			st.RiverApplied = append(st.RiverApplied, m.Version)
		}
	}
	if err := pool.QueryRow(ctx, "SELECT to_regclass('hookline_migration') IS NOT NULL").Scan(&exists); err != nil {
		return st, err
	}
	if exists {
		rows, err := pool.Query(ctx, "SELECT version FROM hookline_migration ORDER BY version")
		if err != nil {
			return st, err
		}
		st.HooklineDone, err = pgx.CollectRows(rows, pgx.RowTo[int])
		if err != nil {
			return st, err
		}
	}
	return st, nil
}
