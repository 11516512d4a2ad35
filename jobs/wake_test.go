package jobs

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/internal/pgtest"
)

// A burst of wakes for one queue is one notification now and one at the
// window's end (River's insert notification, as River's producers listen for
// it); another queue is not held by the first; a wake after a quiet window
// is sent at once.
func TestQueueWakerCoalescesNotifications(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	listener, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer listener.Release()
	var channel string
	require.NoError(t, listener.QueryRow(ctx, `SELECT coalesce(current_schema() || '.', '') || 'river_insert'`).Scan(&channel))
	_, err = listener.Exec(ctx, `LISTEN "`+channel+`"`)
	require.NoError(t, err)

	var mu sync.Mutex
	sent := 0
	const window = time.Second
	w := newQueueWaker(func(ctx context.Context, sql string, args ...any) error {
		mu.Lock()
		sent++
		mu.Unlock()
		_, err := pool.Exec(ctx, sql, args...)
		return err
	}, window, slog.Default())

	got := map[string]int{}
	arrived := map[string][]time.Duration{}
	start := time.Now()
	next := func() {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		n, err := listener.Conn().WaitForNotification(wctx)
		require.NoError(t, err, "notifications so far: %v", got)
		q := n.Payload[len(`{"queue": "`) : len(n.Payload)-2]
		got[q]++
		arrived[q] = append(arrived[q], time.Since(start))
	}
	w.Wake("q1")
	next() // q1's first: sent at once
	for range 50 {
		w.Wake("q1") // after that send started: one more, at the window's end
	}
	w.Wake("q2")
	next()
	next()
	require.Equal(t, map[string]int{"q1": 2, "q2": 1}, got, "one at once, one at the window's end")
	require.Less(t, arrived["q1"][0], window, "the first is not held")
	require.GreaterOrEqual(t, arrived["q1"][1], window, "the burst waits for the window's end")
	require.Less(t, arrived["q2"][0], window, "q2 is not held by q1's window")
	wctx, cancel := context.WithTimeout(ctx, 2*window)
	_, err = listener.Conn().WaitForNotification(wctx)
	cancel()
	require.Error(t, err, "nothing more after the burst")
	mu.Lock()
	require.Equal(t, 3, sent)
	mu.Unlock()

	// The window has passed: a wake goes out at once.
	at := time.Now()
	w.Wake("q1")
	wctx, cancel = context.WithTimeout(ctx, 5*time.Second)
	n, err := listener.Conn().WaitForNotification(wctx)
	cancel()
	require.NoError(t, err)
	require.Equal(t, `{"queue": "q1"}`, n.Payload)
	require.Less(t, time.Since(at), window)
}
