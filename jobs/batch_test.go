package jobs

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/idem"
	"github.com/hookline/hookline/internal/pgtest"
)

// The batch statements, item by item: a claim taken starts its attempt and
// loads the payload; a key twice in one batch is left to its own statement
// (claim: nil; completion: skipped); a claim with no destination row is
// taken but starts nothing; a completion whose token no longer holds is
// lost and changes nothing; and the effects of a completion are those of
// the per-event statement.
func TestBatchStatements(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	ctx := context.Background()
	store := claimsStore(t, pool)
	for i := range 3 {
		storeEvent(t, pool, fmt.Sprintf("evt_%d", i))
	}
	claimSQL := claimManyStartSQL(store.ClaimManySQL)
	rows, err := claimMany(ctx, pool, claimSQL, []claimItem{claimOf("evt_0", 10), claimOf("evt_1", 11), claimOf("evt_0", 12), claimOf("evt_none", 13)})
	require.NoError(t, err)
	require.Len(t, rows, 4)
	require.NotNil(t, rows[0])
	require.NotNil(t, rows[1])
	require.Nil(t, rows[2], "a key twice in one batch goes its own way")
	require.NotNil(t, rows[3], "no destination row: the claim is taken all the same")
	require.Nil(t, rows[3].attempts, "… and starts nothing")
	require.Equal(t, 1, *rows[0].attempts)
	require.Equal(t, `{"id":"evt_0"}`, string(rows[0].ev.Body))
	require.Equal(t, "charge.succeeded", *rows[0].eventType)

	// Claiming a held key again is refused.
	again, err := claimMany(ctx, pool, claimSQL, []claimItem{claimOf("evt_1", 14), claimOf("evt_2", 15)})
	require.NoError(t, err)
	require.Nil(t, again[0], "evt_1 is held")
	require.NotNil(t, again[1])

	done := func(id string, token, job int64) completeItem {
		return completeItem{key: "hookline:s:default:" + id, token: token, dedupUS: 3_600_000_000, source: "s", eventID: id, dest: "default",
			destDedupUS: 3_600_000_000, jobID: job, n: 1, status: 200, durationMS: 3}
	}
	out, err := completeMany(ctx, pool, completeManySQL(store.CompleteManySQL), []completeItem{
		done("evt_0", rows[0].token, 10), done("evt_1", rows[1].token+1000, 11), done("evt_2", again[1].token, 15), done("evt_2", again[1].token, 15)}, "", nil, nil)
	require.NoError(t, err)
	require.Equal(t, []completion{completionDone, completionLost, completionDone, completionSkipped}, outcomes(out))

	states := map[string]string{}
	var id, state string
	r, err := pool.Query(ctx, `SELECT event_id, state FROM hookline_event_destinations ORDER BY event_id`)
	require.NoError(t, err)
	for r.Next() {
		require.NoError(t, r.Scan(&id, &state))
		states[id] = state
	}
	require.NoError(t, r.Err())
	require.Equal(t, map[string]string{"evt_0": "completed", "evt_1": "queued", "evt_2": "completed"}, states)
	var logged int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM hookline_attempts WHERE status = 200 AND duration_ms = 3`).Scan(&logged))
	require.Equal(t, 2, logged, "one attempt logged per completion, none for the lost one")
	var claimStates []string
	require.NoError(t, pool.QueryRow(ctx, `SELECT array_agg(state ORDER BY key) FROM hookline_claims`).Scan(&claimStates))
	require.Equal(t, []string{"completed", "processing", "completed", "processing"}, claimStates, "evt_0, evt_1, evt_2, evt_none")
}

// A crashed holder's claim, in a batch: once its lease has run out the
// batch takes the key over with a larger token, the crashed holder's
// completion (its old token) is lost and changes nothing, and the new
// holder's completes the event. Many jobs of the same key in one batch:
// exactly one claims it.
func TestBatchTakesOverAnExpiredLease(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	ctx := context.Background()
	store := claimsStore(t, pool)
	storeEvent(t, pool, "evt_crash")
	item := func(job int64) claimItem { return claimOf("evt_crash", job) }
	claimSQL, completeSQL := claimManyStartSQL(store.ClaimManySQL), completeManySQL(store.CompleteManySQL)
	first, err := claimMany(ctx, pool, claimSQL, []claimItem{item(1)})
	require.NoError(t, err)
	require.NotNil(t, first[0])

	// The holder crashes: nobody renews its lease, which runs out.
	_, err = pool.Exec(ctx, `UPDATE hookline_claims SET expires_at = now() - interval '1 second'`)
	require.NoError(t, err)
	items := make([]claimItem, 8)
	for i := range items {
		items[i] = item(int64(10 + i))
	}
	second, err := claimMany(ctx, pool, claimSQL, items)
	require.NoError(t, err)
	var taken []*startRow
	for _, r := range second {
		if r != nil {
			taken = append(taken, r)
		}
	}
	require.Len(t, taken, 1, "one job of the key claims it")
	require.Greater(t, taken[0].token, first[0].token)
	require.Equal(t, 2, *taken[0].attempts, "the crashed attempt counts")

	done := func(token, job int64) completeItem {
		return completeItem{key: "hookline:s:default:evt_crash", token: token, dedupUS: 3_600_000_000, source: "s", eventID: "evt_crash",
			dest: "default", destDedupUS: 3_600_000_000, jobID: job, n: 1, status: 200}
	}
	out, err := completeMany(ctx, pool, completeSQL, []completeItem{done(first[0].token, 1)}, "", nil, nil)
	require.NoError(t, err)
	require.Equal(t, []completion{completionLost}, outcomes(out), "the crashed holder's token no longer holds")
	var state string
	require.NoError(t, pool.QueryRow(ctx, `SELECT state FROM hookline_event_destinations WHERE event_id = 'evt_crash'`).Scan(&state))
	require.Equal(t, "queued", state)
	out, err = completeMany(ctx, pool, completeSQL, []completeItem{done(taken[0].token, 10)}, "", nil, nil)
	require.NoError(t, err)
	require.Equal(t, []completion{completionDone}, outcomes(out))
	require.NoError(t, pool.QueryRow(ctx, `SELECT state FROM hookline_event_destinations WHERE event_id = 'evt_crash'`).Scan(&state))
	require.Equal(t, "completed", state)
}

// Many jobs of one key claiming at once through the committer, in however
// many batches they fall into: exactly one holds the claim.
func TestConcurrentBatchClaimsOfOneKey(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	ctx := context.Background()
	store := claimsStore(t, pool)
	b := newBatches(pool, store, 50, func() string { return "" }, func(string) {}, func(string, int) {}, nil)
	var wg sync.WaitGroup
	var won atomic.Int64
	for g := range 32 {
		wg.Go(func() {
			for i := range 5 {
				job := int64(g*100 + i)
				row, err := b.claims.Do(ctx, claimItem{key: "hookline:s:default:evt_hot", holder: fmt.Sprint("job:", job), leaseUS: 60_000_000,
					source: "s", eventID: "evt_hot", dest: "default", jobID: job})
				if err != nil {
					t.Error(err)
					return
				}
				if row != nil {
					won.Add(1)
				}
			}
		})
	}
	wg.Wait()
	require.EqualValues(t, 1, won.Load(), "160 claims of one key, one taken")
}

// outcomes are the completions of a batch's items.
// claimsStore is the worker's claims store on pool.
func claimsStore(t *testing.T, pool *pgxpool.Pool) *idem.Store {
	t.Helper()
	store, err := idem.NewStore(pool, &idem.Config{Table: ClaimsTable})
	require.NoError(t, err)
	return store
}

// storeEvent stores event id of source s, a charge.succeeded whose body is
// {"id":"<id>"}, queued for the default destination.
func storeEvent(t *testing.T, pool *pgxpool.Pool, id string) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `WITH d AS (INSERT INTO hookline_deliveries (source, content_type, body) VALUES ('s', 'application/json', $2) RETURNING id),
		e AS (INSERT INTO hookline_events (source, event_id, event_type, delivery_id) SELECT 's', $1, 'charge.succeeded', id FROM d)
		INSERT INTO hookline_event_destinations (source, event_id, destination, delivery_id) SELECT 's', $1, 'default', id FROM d`,
		id, []byte(`{"id":"`+id+`"}`))
	require.NoError(t, err)
}

// claimOf is job's claim of event id of source s at the default
// destination, with a one-minute lease.
func claimOf(id string, job int64) claimItem {
	return claimItem{key: "hookline:s:default:" + id, holder: fmt.Sprint("job:", job), leaseUS: 60_000_000,
		source: "s", eventID: id, dest: "default", jobID: job}
}

func outcomes(out []completed) []completion {
	c := make([]completion, len(out))
	for i, o := range out {
		c[i] = o.completion
	}
	return c
}

// An attempt that never recorded its outcome (its worker was killed, or
// its lease ran out) is logged as lost by the next attempt's start,
// whichever statement starts it (the batch's, the job's own, or the long
// way's), and only then: an attempt that logged its outcome is not logged
// again.
func TestLostAttemptsAreLogged(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	ctx := context.Background()
	store := claimsStore(t, pool)
	storeEvent(t, pool, "evt_lost")
	opts := func(job int64) idem.Options {
		return idem.Options{Namespace: Namespace, Scope: "s", Segment: "default:evt_lost", Holder: fmt.Sprint("job:", job),
			Lease: time.Minute, DedupWindow: time.Hour}
	}
	expire := func() {
		_, err := pool.Exec(ctx, `UPDATE hookline_claims SET expires_at = now() - interval '1 second'`)
		require.NoError(t, err)
	}
	logged := func() []string {
		rows, err := pool.Query(ctx, `SELECT n || ' ' || split_part(error, ':', 1) FROM hookline_attempts ORDER BY n, id`)
		require.NoError(t, err)
		out, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		return out
	}

	// 1: the batch's statement; its worker dies.
	rows, err := claimMany(ctx, pool, claimManyStartSQL(store.ClaimManySQL), []claimItem{claimOf("evt_lost", 1)})
	require.NoError(t, err)
	require.Equal(t, 1, *rows[0].attempts)
	require.Empty(t, logged(), "a first attempt logs nothing when it starts")
	expire()

	// 2: the job's own statement finds attempt 1 lost; attempt 2 fails and
	// logs it.
	st, err := store.ClaimStatement(opts(2))
	require.NoError(t, err)
	row := &startRow{}
	require.NoError(t, pool.QueryRow(ctx, claimStartSQL(st.SQL, len(st.Args)), append(st.Args, "s", "evt_lost", "default", int64(2))...).
		Scan(row.targets()...))
	require.Equal(t, 2, *row.attempts)
	require.Equal(t, []string{"1 lost"}, logged())
	_, err = pool.Exec(ctx, stmt.markRetry, "s", "evt_lost", "default", "boom", 2, 500, 3, "failed: boom")
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `DELETE FROM hookline_claims`) // released
	require.NoError(t, err)

	// 3: the batch again; attempt 2 has its outcome, nothing more is
	// logged. Then its lease runs out.
	rows, err = claimMany(ctx, pool, claimManyStartSQL(store.ClaimManySQL), []claimItem{claimOf("evt_lost", 3)})
	require.NoError(t, err)
	require.Equal(t, 3, *rows[0].attempts)
	require.Equal(t, []string{"1 lost", "2 failed"}, logged())
	expire()

	// 4: the long way (claim, then start, in one transaction).
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := store.Claim(ctx, tx, opts(4)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, startSQL, "s", "evt_lost", "default", int64(4))
		return err
	}))
	require.Equal(t, []string{"1 lost", "2 failed", "3 lost"}, logged())
}
