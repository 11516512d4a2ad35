package reconcile_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/internal/metrics"
	"github.com/hookline/hookline/internal/pgtest"
	"github.com/hookline/hookline/internal/reconcile"
	"github.com/hookline/hookline/internal/reconcile/fakeapi"
)

const testKey = "sk_test_reconcile_0123456789"

// memStore is an in-memory reconcile.Store: ids it has stored, or was told
// of with know, are known.
type memStore struct {
	mu     sync.Mutex
	known  map[string]bool // source + "\x00" + id
	stored []reconcile.Event
	calls  int // Store calls

	// knownHook, when set, runs at the start of each Known call.
	knownHook func()
	// storeHook, when set, runs at the start of each Store call; it may
	// panic or return an error.
	storeHook func(call int) error
}

func newMemStore() *memStore { return &memStore{known: map[string]bool{}} }

func (m *memStore) know(source string, ids ...string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, id := range ids {
		m.known[source+"\x00"+id] = true
	}
}

func (m *memStore) Known(_ context.Context, source string, events []reconcile.Event) ([]reconcile.Lookup, error) {
	if m.knownHook != nil {
		m.knownHook()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]reconcile.Lookup, len(events))
	for i, e := range events {
		out[i].Accepted = m.known[source+"\x00"+e.ID]
	}
	return out, nil
}

func (m *memStore) Store(_ context.Context, source string, events []reconcile.Event) (int, error) {
	m.mu.Lock()
	m.calls++
	call := m.calls
	m.mu.Unlock()
	if m.storeHook != nil {
		if err := m.storeHook(call); err != nil {
			return 0, err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, e := range events {
		if m.known[source+"\x00"+e.ID] {
			continue
		}
		m.known[source+"\x00"+e.ID] = true
		m.stored = append(m.stored, e)
		n++
	}
	return n, nil
}

func (m *memStore) storedEvents() []reconcile.Event {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]reconcile.Event(nil), m.stored...)
}

// genEvents makes n events of type typ, the newest age old, one every
// step going back; ids sort in creation order (as Paddle's do).
func genEvents(prefix, typ string, n int, age, step time.Duration) []fakeapi.Event {
	now := time.Now().Truncate(time.Second)
	out := make([]fakeapi.Event, n)
	for i := range n {
		out[i] = fakeapi.Event{
			ID:      fmt.Sprintf("%s%07d", prefix, n-i),
			Type:    typ,
			Created: now.Add(-age - time.Duration(i)*step),
		}
	}
	return out
}

// syncBuffer is a bytes.Buffer safe for the concurrent writes of a logger.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// env is one test's database, store, registry and logs.
type env struct {
	t     *testing.T
	pool  *pgxpool.Pool
	store *memStore
	reg   *prometheus.Registry
	logs  *syncBuffer
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return &env{t: t, pool: pgtest.NewPool(t), store: newMemStore(), reg: prometheus.NewRegistry(), logs: &syncBuffer{}}
}

// secondPool is another pool on e's database: another instance.
func (e *env) secondPool() *pgxpool.Pool {
	e.t.Helper()
	p, err := pgxpool.New(context.Background(), e.pool.Config().ConnString())
	require.NoError(e.t, err)
	e.t.Cleanup(p.Close)
	return p
}

// runner is a Runner of sources on pool (nil: e.pool) with fast retries.
func (e *env) runner(pool *pgxpool.Pool, sources ...reconcile.SourceConfig) *reconcile.Runner {
	e.t.Helper()
	if pool == nil {
		pool = e.pool
	}
	r, err := reconcile.New(reconcile.Config{
		Pool: pool, Store: e.store, Sources: sources, Registerer: e.reg,
		Logger:  slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Backoff: time.Millisecond,
	})
	require.NoError(e.t, err)
	return r
}

// reconciled reads hookline_reconciled_total{source}.
func (e *env) reconciled(source string) float64 {
	return testutil.ToFloat64(metrics.For(e.reg).Reconciled.WithLabelValues(source))
}

// runRow is a source's row of hookline_reconcile_runs.
type runRow struct {
	started, finished *time.Time
	checked, missing  int
	err               *string
}

func (e *env) lastRun(source string) runRow {
	e.t.Helper()
	var r runRow
	err := e.pool.QueryRow(context.Background(),
		`SELECT started_at, finished_at, checked, missing, error FROM hookline_reconcile_runs WHERE source = $1`, source).
		Scan(&r.started, &r.finished, &r.checked, &r.missing, &r.err)
	require.NoError(e.t, err)
	return r
}

func stripeSource(name, url string) reconcile.SourceConfig {
	return reconcile.SourceConfig{Name: name, Provider: "stripe", Lookback: 72 * time.Hour, APIKey: testKey, APIURL: url}
}
