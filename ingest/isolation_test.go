package ingest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/internal/dberr"
)

// On real Postgres, one delivery that the database refuses fails alone: an
// event id too large for the (source, event_id) index (past what the HTTP
// front lets through, so built by hand here) and a header Postgres's jsonb
// cannot hold (\u0000). Their batch fails as a whole; the batcher retries each
// delivery on its own, its batch-mates are committed with their jobs, and the
// bad ones get the database's data error, not a 503-class one.
func TestBatchIsolatesUnstorableDelivery(t *testing.T) {
	t.Parallel()
	st, pool := testStore(t)
	src := testSource(&Source{Name: "stripe", OnDuplicate: OnDuplicateSkip, MaxAttempts: 3})
	mk := func(id, header string) *Delivery { return testDelivery(src, id, header) }
	rnd := make([]byte, 2000)
	_, _ = rand.Read(rnd)
	huge := hex.EncodeToString(rnd) // 4,000 bytes that do not compress

	for name, bad := range map[string]*Delivery{
		"index entry too large": mk(huge, "ok"),      // 54000, program limit exceeded
		"jsonb refuses NUL":     mk("evt_x", "\x00"), // 22P05
	} {
		t.Run(name, func(t *testing.T) {
			pfx := strings.ReplaceAll(name, " ", "_")
			ds := []*Delivery{mk(pfx+"_1", "ok"), bad, mk(pfx+"_2", "ok"), mk(pfx+"_3", "ok")}
			_, err := st.commitPipelined(context.Background(), ds)
			require.Error(t, err, "the batch as a whole must fail for this test to mean anything")

			b := newBatcher(st.commitPipelined, 1, len(ds), 0, nil)
			defer b.Close()
			batch := make([]*pending, len(ds))
			for i, d := range ds {
				batch[i] = &pending{ctx: context.Background(), d: d, done: make(chan batchResult, 1)}
			}
			b.run(batch)
			for i, p := range batch {
				r := <-p.done
				if p.d == bad {
					var pgErr *pgconn.PgError
					require.True(t, errors.As(r.err, &pgErr), "%v", r.err)
					require.False(t, dberr.Unavailable(r.err), "a data error, not unavailability: %v", r.err)
					continue
				}
				require.NoError(t, r.err, "delivery %d", i)
				require.Equal(t, StatusAccepted, r.res[0].Status)
			}
			var jobs int
			require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM river_job WHERE args->>'event_id' LIKE $1`, pfx+"%").Scan(&jobs))
			require.Equal(t, 3, jobs, "the good deliveries are stored and enqueued")
		})
	}
}
