package ingest_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"
	stripewebhook "github.com/stripe/stripe-go/v82/webhook"

	"github.com/hookline/hookline/ingest"
	"github.com/hookline/hookline/internal/pgcluster"
	"github.com/hookline/hookline/internal/pgtest"
	"github.com/hookline/hookline/providers"
	"github.com/hookline/hookline/providers/stripe"
)

const stripeSecret = "whsec_ingest_test"

type testBundle struct {
	pool   *pgxpool.Pool
	server *ingest.Server
	url    string
}

type opts struct {
	batch        bool
	onDuplicate  ingest.OnDuplicate
	maxBody      int64
	maxPending   int64
	queueTimeout time.Duration
}

func newStripe(t testing.TB) providers.Provider {
	p, err := stripe.New(providers.Config{Secrets: []string{stripeSecret}})
	require.NoError(t, err)
	return p
}

func setup(t testing.TB, pool *pgxpool.Pool, o opts) *testBundle {
	t.Helper()
	if pool == nil {
		pool = pgtest.NewPool(t)
	}
	rc, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
	require.NoError(t, err)
	srv, err := ingest.New(ingest.Config{
		Pool:         pool,
		River:        rc,
		IngestRoutes: true,
		Batch:        o.batch,
		MaxBodyBytes: o.maxBody,
		// The deadline a request has for room and for the committer.
		MaxPendingBytes: o.maxPending,
		QueueTimeout:    o.queueTimeout,
		Logger:          slog.New(slog.DiscardHandler),
		Sources: []*ingest.Source{
			{Name: "stripe", Provider: newStripe(t), OnDuplicate: o.onDuplicate, MaxAttempts: 3},
		},
	})
	require.NoError(t, err)
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); srv.Close() })
	return &testBundle{pool: pool, server: srv, url: hs.URL}
}

func stripeBody(id string) []byte {
	return []byte(`{"id":"` + id + `","object":"event","type":"charge.succeeded","created":1764504000,"data":{"object":{"id":"ch_1"}}}`)
}

func signedStripe(body []byte, at time.Time) string {
	return stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{Payload: body, Secret: stripeSecret, Timestamp: at}).Header
}

type answer struct {
	Status     int
	Body       map[string]any
	RetryAfter string
}

func post(t testing.TB, url string, body []byte, header ...string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	a := answer{Status: resp.StatusCode, RetryAfter: resp.Header.Get("Retry-After")}
	_ = json.Unmarshal(raw, &a.Body)
	return a
}

func postStripe(t testing.TB, b *testBundle, id string) answer {
	body := stripeBody(id)
	return post(t, b.url+"/webhooks/stripe", body, "Stripe-Signature", signedStripe(body, time.Now()))
}

func countJobs(t testing.TB, pool *pgxpool.Pool, eventID string) int {
	var n int
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT count(*) FROM river_job WHERE kind = 'hookline.event' AND args->>'event_id' = $1`, eventID).Scan(&n))
	return n
}

func TestIngest(t *testing.T) {
	t.Parallel()
	for _, batch := range []bool{false, true} {
		t.Run(fmt.Sprintf("batch=%v", batch), func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil, opts{batch: batch, maxBody: 4096})

			t.Run("AcceptsStripeGoSignedEventThenDuplicate", func(t *testing.T) {
				a := postStripe(t, b, "evt_accept")
				require.Equal(t, http.StatusOK, a.Status, a.Body)
				require.Equal(t, map[string]any{"status": "accepted", "source": "stripe", "event_id": "evt_accept"}, a.Body)
				a = postStripe(t, b, "evt_accept")
				require.Equal(t, http.StatusOK, a.Status)
				require.Equal(t, "duplicate", a.Body["status"])
				require.Equal(t, 1, countJobs(t, b.pool, "evt_accept"))
				var deliveries int
				require.NoError(t, b.pool.QueryRow(context.Background(),
					`SELECT deliveries FROM hookline_events WHERE source='stripe' AND event_id='evt_accept'`).Scan(&deliveries))
				require.Equal(t, 2, deliveries)
			})

			t.Run("RejectsBadSignatures", func(t *testing.T) {
				body := stripeBody("evt_bad")
				now := time.Now()
				tampered := bytes.Replace(body, []byte("ch_1"), []byte("ch_2"), 1)
				wrong := stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{Payload: body, Secret: "whsec_other", Timestamp: now}).Header
				cases := map[string]answer{
					"tampered": post(t, b.url+"/webhooks/stripe", tampered, "Stripe-Signature", signedStripe(body, now)),
					"wrong":    post(t, b.url+"/webhooks/stripe", body, "Stripe-Signature", wrong),
					"missing":  post(t, b.url+"/webhooks/stripe", body),
					"garbled":  post(t, b.url+"/webhooks/stripe", body, "Stripe-Signature", "t=x,v1=zz"),
					"stale":    post(t, b.url+"/webhooks/stripe", body, "Stripe-Signature", signedStripe(body, now.Add(-10*time.Minute))),
					"future":   post(t, b.url+"/webhooks/stripe", body, "Stripe-Signature", signedStripe(body, now.Add(10*time.Minute))),
				}
				for name, a := range cases {
					require.Equal(t, http.StatusUnauthorized, a.Status, name)
					msg, _ := a.Body["error"].(string)
					require.NotEmpty(t, msg, name)
					require.NotContains(t, msg, stripeSecret, name)
				}
				require.Equal(t, 0, countJobs(t, b.pool, "evt_bad"))
			})

			t.Run("UnknownSource404", func(t *testing.T) {
				require.Equal(t, http.StatusNotFound, post(t, b.url+"/webhooks/nope", stripeBody("x")).Status)
			})

			t.Run("GetIs405", func(t *testing.T) {
				resp, err := http.Get(b.url + "/webhooks/stripe")
				require.NoError(t, err)
				resp.Body.Close()
				require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
				require.Equal(t, "POST", resp.Header.Get("Allow"))
				for _, m := range []string{http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodHead, http.MethodOptions} {
					req, _ := http.NewRequest(m, b.url+"/webhooks/stripe", nil)
					resp, err := http.DefaultClient.Do(req)
					require.NoError(t, err)
					resp.Body.Close()
					require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, m)
					require.Equal(t, "POST", resp.Header.Get("Allow"), "%s: Allow names only what the route takes", m)
				}
				for _, m := range []string{http.MethodTrace, http.MethodConnect, "FOO"} {
					req, _ := http.NewRequest(m, b.url+"/webhooks/stripe", nil)
					resp, err := http.DefaultClient.Do(req)
					require.NoError(t, err)
					body, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, m)
					require.Equal(t, "POST", resp.Header.Get("Allow"), "%s: Allow names only what the route takes", m)
					require.Contains(t, string(body), "webhooks are POSTed", m)
				}
				req, _ := http.NewRequest("FOO", b.url+"/webhooks/nope", nil)
				resp, err = http.DefaultClient.Do(req)
				require.NoError(t, err)
				resp.Body.Close()
				require.Equal(t, http.StatusNotFound, resp.StatusCode, "an unknown source is still 404")
			})

			t.Run("Oversize413", func(t *testing.T) {
				big := []byte(`{"id":"evt_big","pad":"` + strings.Repeat("x", 5000) + `"}`)
				require.Equal(t, http.StatusRequestEntityTooLarge, post(t, b.url+"/webhooks/stripe", big, "Stripe-Signature", signedStripe(big, time.Now())).Status)
				// Chunked (no Content-Length): the cap still holds.
				req, _ := http.NewRequest(http.MethodPost, b.url+"/webhooks/stripe", io.MultiReader(bytes.NewReader(big)))
				req.ContentLength = -1
				req.Header.Set("Stripe-Signature", signedStripe(big, time.Now()))
				resp, err := http.DefaultClient.Do(req)
				require.NoError(t, err)
				resp.Body.Close()
				require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
			})

			t.Run("NoEventID400", func(t *testing.T) {
				body := []byte(`{"object":"event","type":"x"}`)
				require.Equal(t, http.StatusBadRequest, post(t, b.url+"/webhooks/stripe", body, "Stripe-Signature", signedStripe(body, time.Now())).Status)
				body = []byte(`{not json`)
				require.Equal(t, http.StatusBadRequest, post(t, b.url+"/webhooks/stripe", body, "Stripe-Signature", signedStripe(body, time.Now())).Status)
			})

			t.Run("UnstorableEventID400", func(t *testing.T) {
				// Postgres text takes neither NUL nor invalid UTF-8, and its
				// indexes no entry past ~2.7 KB: such ids are refused before
				// they reach a batch, naming the field.
				for name, id := range map[string]string{
					"nul":      `evt_\u0000x`,
					"utf8":     "evt_\xff\xfe",
					"too long": strings.Repeat("a", ingest.MaxEventIDBytes+1),
				} {
					body := stripeBody(id)
					a := post(t, b.url+"/webhooks/stripe", body, "Stripe-Signature", signedStripe(body, time.Now()))
					require.Equal(t, http.StatusBadRequest, a.Status, name)
					require.Contains(t, a.Body["error"], "event id", name)
				}
				// The longest id taken is stored and enqueued, random enough
				// that Postgres cannot compress the index entries.
				rnd := make([]byte, ingest.MaxEventIDBytes/2)
				_, _ = rand.Read(rnd)
				longest := hex.EncodeToString(rnd)
				a := postStripe(t, b, longest)
				require.Equal(t, http.StatusOK, a.Status, a.Body)
				require.Equal(t, "accepted", a.Body["status"])
				require.Equal(t, 1, countJobs(t, b.pool, longest))
			})

			t.Run("StoresRawBodyByteForByte", func(t *testing.T) {
				body := []byte("{ \"id\" : \"evt_raw\",\n\t\"type\":\"x\",  \"note\": \"h\u00e9llo \u2603 \\u00e9 \U0001F600\" ,\r\n \"n\": 1.50e3 }  \n")
				a := post(t, b.url+"/webhooks/stripe", body, "Stripe-Signature", signedStripe(body, time.Now()))
				require.Equal(t, http.StatusOK, a.Status, a.Body)
				var stored []byte
				var ct string
				require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT d.body, d.content_type FROM hookline_events e
					JOIN hookline_deliveries d ON d.id = e.delivery_id WHERE e.source='stripe' AND e.event_id='evt_raw'`).Scan(&stored, &ct))
				require.Equal(t, body, stored)
				require.Equal(t, "application/json", ct)
			})
		})
	}
}

func TestConcurrentDuplicates(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		batch  bool
		onDup  ingest.OnDuplicate
		wantDL int
	}{{false, ingest.OnDuplicateSkip, 0}, {true, ingest.OnDuplicateSkip, 0}, {false, ingest.OnDuplicateReject, 99}, {true, ingest.OnDuplicateReject, 99}} {
		t.Run(fmt.Sprintf("batch=%v/%s", tc.batch, tc.onDup), func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil, opts{batch: tc.batch, onDuplicate: tc.onDup})
			body := stripeBody("evt_race")
			sig := signedStripe(body, time.Now())
			// 100 concurrent deliveries of one event. The row lock serialises
			// their transactions, and on a loaded machine some wait past the
			// commit bound (503): like a provider, send those again, in waves
			// (each after the previous one has ended, and after a pause that
			// grows like a provider's backoff), until none is left.
			var mu sync.Mutex
			statuses := map[string]int{}
			var retried int64 // requests sent again after a 503
			pending := 100
			const waves = 20
			for wave := 0; pending > 0 && wave < waves; wave++ {
				if wave > 0 {
					retried += int64(pending)
					<-time.After(min(time.Duration(wave)*100*time.Millisecond, time.Second))
				}
				unavailable := 0
				var wg sync.WaitGroup
				start := make(chan struct{})
				for range pending {
					wg.Go(func() {
						<-start
						a := post(t, b.url+"/webhooks/stripe", body, "Stripe-Signature", sig)
						mu.Lock()
						defer mu.Unlock()
						switch {
						case a.Status == http.StatusServiceUnavailable:
							unavailable++
						case a.Status != http.StatusOK:
							statuses[fmt.Sprint(a.Status)]++
						default:
							statuses[a.Body["status"].(string)]++
						}
					})
				}
				close(start)
				wg.Wait()
				pending = unavailable
			}
			require.Zero(t, pending, "deliveries still answered 503 after %d waves: %v", waves, statuses)
			// A request answered 503 may still have committed (the commit
			// bound ran out while COMMIT was on its way): its retry is then a
			// duplicate receipt. Without retries the counts are exact.
			extra := retried
			require.Equal(t, 100, statuses["accepted"]+statuses["duplicate"], "every delivery ends 200: %v", statuses)
			if extra == 0 {
				require.Equal(t, 1, statuses["accepted"], statuses)
			} else {
				require.LessOrEqual(t, statuses["accepted"], 1, statuses)
			}
			require.Equal(t, 1, countJobs(t, b.pool, "evt_race"))
			var dead, deliveries int
			require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM hookline_dead WHERE event_id='evt_race' AND reason='duplicate'`).Scan(&dead))
			require.GreaterOrEqual(t, dead, tc.wantDL)
			if tc.wantDL == 0 {
				require.Zero(t, dead)
			} else {
				require.LessOrEqual(t, int64(dead), int64(tc.wantDL)+extra)
			}
			require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT deliveries FROM hookline_events WHERE event_id='evt_race'`).Scan(&deliveries))
			require.GreaterOrEqual(t, deliveries, 100)
			require.LessOrEqual(t, int64(deliveries), 100+extra)
		})
	}
}

// quickPool is a pool on a server the test will stop: connecting gives up
// after a second.
func quickPool(t *testing.T, dbURL string) *pgxpool.Pool {
	cfg, err := pgxpool.ParseConfig(dbURL)
	require.NoError(t, err)
	cfg.ConnConfig.ConnectTimeout = time.Second
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// TestPostgresDown stops the database under a running server: deliveries are
// answered 503 with Retry-After (never 2xx), and 200 again once it is back,
// without restarting the server.
func TestPostgresDown(t *testing.T) {
	t.Parallel()
	cluster, dbURL := pgtest.Cluster(t)
	for _, batch := range []bool{false, true} {
		t.Run(fmt.Sprintf("batch=%v", batch), func(t *testing.T) {
			b := setup(t, quickPool(t, dbURL), opts{batch: batch})
			pool := b.pool
			require.Equal(t, http.StatusOK, postStripe(t, b, fmt.Sprintf("evt_before_%v", batch)).Status)

			require.NoError(t, cluster.Stop())
			for i := range 5 {
				start := time.Now()
				a := postStripe(t, b, fmt.Sprintf("evt_down_%v_%d", batch, i))
				require.Equal(t, http.StatusServiceUnavailable, a.Status, a.Body)
				require.Equal(t, "1", a.RetryAfter)
				require.Less(t, time.Since(start), 5*time.Second, "a 503 must come within 5s")
			}

			restarted, err := restart(cluster)
			require.NoError(t, err)
			cluster = restarted
			require.Eventually(t, func() bool {
				return postStripe(t, b, fmt.Sprintf("evt_after_%v", batch)).Status == http.StatusOK
			}, 30*time.Second, 100*time.Millisecond)
			var n int
			require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM hookline_events WHERE event_id LIKE 'evt_down_%'`).Scan(&n))
			require.Zero(t, n, "nothing answered 503 may be stored")
		})
	}
}

// TestPendingBytesBound: bodies held in memory are bounded. With room for one
// body only, a second request waits the queue timeout for room and is then
// answered 503 + Retry-After, unread and unstored, while the first is stuck
// on its commit; once that commits, requests are taken again.
func TestPendingBytesBound(t *testing.T) {
	t.Parallel()
	for _, batch := range []bool{false, true} {
		t.Run(fmt.Sprintf("batch=%v", batch), func(t *testing.T) {
			t.Parallel()
			room := int64(len(stripeBody("evt_pending_1")) + 10)
			b := setup(t, nil, opts{batch: batch, maxBody: room, maxPending: room, queueTimeout: 300 * time.Millisecond})

			// Stall every commit: a lock that conflicts with INSERT.
			ctx := context.Background()
			lock, err := b.pool.Begin(ctx)
			require.NoError(t, err)
			defer func() { _ = lock.Rollback(ctx) }()
			_, err = lock.Exec(ctx, `LOCK TABLE hookline_deliveries IN SHARE ROW EXCLUSIVE MODE`)
			require.NoError(t, err)

			first := make(chan answer, 1)
			go func() { first <- postStripe(t, b, "evt_pending_1") }()
			// The first request holds the room once it waits on the lock.
			require.Eventually(t, func() bool {
				var waiting bool
				_ = b.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database())`).Scan(&waiting)
				return waiting
			}, 10*time.Second, 10*time.Millisecond)

			a := postStripe(t, b, "evt_pending_2")
			require.Equal(t, http.StatusServiceUnavailable, a.Status, a.Body)
			require.Equal(t, "1", a.RetryAfter)
			require.Contains(t, a.Body["error"], "saturated")

			require.NoError(t, lock.Rollback(ctx))
			a = <-first
			require.Equal(t, http.StatusOK, a.Status, a.Body)
			require.Equal(t, http.StatusOK, postStripe(t, b, "evt_pending_3").Status)
			require.Equal(t, 0, countJobs(t, b.pool, "evt_pending_2"), "a refused delivery is not stored")
			require.Equal(t, 1, countJobs(t, b.pool, "evt_pending_3"))
		})
	}
}

// TestPullThePlugUnderLoad kills PostgreSQL (SIGKILL to every server process,
// as a power cut would) while 16 senders are mid-stream into the group
// committer, on a server with fsync and synchronous commit on. Every answer
// is 200 or 503 + Retry-After; once the kill is done every answer is 503;
// and after Postgres recovers, every event that was answered 200 is there
// with its River job: no 2xx was given for an uncommitted event.
func TestPullThePlugUnderLoad(t *testing.T) {
	t.Parallel()
	cluster, dbURL := pgtest.DurableCluster(t)
	pool := quickPool(t, dbURL)
	b := setup(t, pool, opts{batch: true})

	type outcome struct {
		id         string
		status     int
		retryAfter string
		afterKill  bool // sent after the kill had completed
	}
	var (
		mu       sync.Mutex
		outcomes []outcome
		accepted int
		killed   = make(chan struct{})
		stop     = make(chan struct{})
		wg       sync.WaitGroup
	)
	client := &http.Client{Timeout: 10 * time.Second}
	for s := range 16 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				after := false
				select {
				case <-killed:
					after = true
				default:
				}
				id := fmt.Sprintf("evt_plug_%d_%d", s, i)
				body := stripeBody(id)
				req, _ := http.NewRequest(http.MethodPost, b.url+"/webhooks/stripe", bytes.NewReader(body))
				req.Header.Set("Stripe-Signature", signedStripe(body, time.Now()))
				resp, err := client.Do(req)
				if err != nil {
					t.Errorf("%s: %v", id, err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				mu.Lock()
				outcomes = append(outcomes, outcome{id, resp.StatusCode, resp.Header.Get("Retry-After"), after})
				if resp.StatusCode == http.StatusOK {
					accepted++
				}
				mu.Unlock()
			}
		})
	}
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return accepted >= 300 }, 60*time.Second, 5*time.Millisecond)
	cluster.Kill()
	close(killed)
	// Keep sending into the outage until each sender has had a few answers.
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, o := range outcomes {
			if o.afterKill {
				n++
			}
		}
		return n >= 64
	}, 60*time.Second, 10*time.Millisecond)
	close(stop)
	wg.Wait()

	restarted, err := pgcluster.Start(context.Background(), pgcluster.Options{Dir: cluster.Dir, Port: cluster.Port})
	require.NoError(t, err)
	t.Cleanup(func() { _ = restarted.Stop() })

	var ok []string
	unavailable := 0
	for _, o := range outcomes {
		switch o.status {
		case http.StatusOK:
			require.False(t, o.afterKill, "%s answered 200 after Postgres was killed", o.id)
			ok = append(ok, o.id)
		case http.StatusServiceUnavailable:
			require.Equal(t, "1", o.retryAfter, o.id)
			unavailable++
		default:
			t.Fatalf("%s: status %d, want 200 or 503", o.id, o.status)
		}
	}
	require.NotZero(t, unavailable)
	var stored []string
	require.Eventually(t, func() bool {
		err := pool.QueryRow(context.Background(), `SELECT coalesce(array_agg(e.event_id), '{}') FROM hookline_events e
			WHERE e.event_id = ANY($1) AND EXISTS (SELECT 1 FROM river_job j WHERE j.kind = 'hookline.event' AND j.args->>'event_id' = e.event_id)`, ok).Scan(&stored)
		return err == nil
	}, 30*time.Second, 100*time.Millisecond, "Postgres did not come back")
	require.ElementsMatch(t, ok, stored, "every event answered 200 must be stored with its job after the crash")
	t.Logf("%d answered 200 before the kill, all stored; %d answered 503", len(ok), unavailable)
}
