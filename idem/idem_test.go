package idem_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/idem"
	"github.com/hookline/hookline/internal/pgtest"
)

// Every handle the package accepts satisfies DB.
var (
	_ idem.DB = (*pgxpool.Pool)(nil)
	_ idem.DB = (*pgx.Conn)(nil)
	_ idem.DB = pgx.Tx(nil)
)

const (
	testNamespace = "hookline"
	testScope     = "test.work"
	// waitTimeout bounds every wait in these tests.
	waitTimeout = 15 * time.Second
	pollEvery   = 10 * time.Millisecond
)

type testBundle struct {
	pool   *pgxpool.Pool
	events *eventRecorder
}

// setup returns a Store on a fresh, empty database with the claims table
// created, plus what the test needs to inspect it.
func setup(t *testing.T) (*idem.Store, *testBundle) {
	t.Helper()
	ctx := context.Background()
	pool := pgtest.NewEmptyPool(t)
	require.NoError(t, idem.CreateTable(ctx, pool, ""))
	_, err := pool.Exec(ctx, `CREATE TABLE work_log (id bigserial PRIMARY KEY, key text NOT NULL, holder text NOT NULL)`)
	require.NoError(t, err)

	events := &eventRecorder{}
	store, err := idem.NewStore(pool, &idem.Config{Telemetry: events.telemetry()})
	require.NoError(t, err)
	return store, &testBundle{pool: pool, events: events}
}

func opts(segment, holder string) idem.Options {
	return idem.Options{Namespace: testNamespace, Scope: testScope, Segment: segment, Holder: holder}
}

func fullKey(segment string) string { return testNamespace + ":" + testScope + ":" + segment }

// eventually polls cond on the test goroutine until it reports true, failing
// the test after waitTimeout. It waits on a ticker between polls.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		if cond() {
			return
		}
		select {
		case <-deadline.C:
			require.FailNow(t, "timed out waiting for "+what)
		case <-tick.C:
		}
	}
}

// receive waits for one value from ch, bounded by waitTimeout.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitTimeout):
		require.FailNow(t, "timed out waiting for "+what)
		panic("unreachable")
	}
}

type claimRow struct {
	State       string
	Token       int64
	Holder      string
	ExpiresAt   time.Time
	CompletedAt *time.Time
}

// row reads the claim row for key; ok is false if there is none.
func (b *testBundle) row(t *testing.T, key string) (claimRow, bool) {
	t.Helper()
	var r claimRow
	err := b.pool.QueryRow(context.Background(),
		`SELECT state, token, holder, expires_at, completed_at FROM idem_claims WHERE key = $1`, key).
		Scan(&r.State, &r.Token, &r.Holder, &r.ExpiresAt, &r.CompletedAt)
	if err == pgx.ErrNoRows {
		return claimRow{}, false
	}
	require.NoError(t, err)
	return r, true
}

func (b *testBundle) countClaims(t *testing.T) int {
	t.Helper()
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM idem_claims`).Scan(&n))
	return n
}

// workHolders returns the holders that wrote to work_log, in order.
func (b *testBundle) workHolders(t *testing.T) []string {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), `SELECT holder FROM work_log ORDER BY id`)
	require.NoError(t, err)
	holders, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return holders
}

func logWork(ctx context.Context, tx pgx.Tx, key, holder string) error {
	_, err := tx.Exec(ctx, `INSERT INTO work_log (key, holder) VALUES ($1, $2)`, key, holder)
	return err
}

type recordedEvent struct {
	Kind string
	idem.Event
}

type eventRecorder struct {
	mu     sync.Mutex
	events []recordedEvent
}

func (r *eventRecorder) telemetry() *idem.Telemetry {
	record := func(kind string) func(idem.Event) {
		return func(ev idem.Event) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.events = append(r.events, recordedEvent{Kind: kind, Event: ev})
		}
	}
	return &idem.Telemetry{Claimed: record("claimed"), Completed: record("completed"), Duplicate: record("duplicate")}
}

func (r *eventRecorder) take() []recordedEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	evs := r.events
	r.events = nil
	return evs
}
