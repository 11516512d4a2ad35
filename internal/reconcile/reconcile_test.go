package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/internal/reconcile"
	"github.com/hookline/hookline/internal/reconcile/fakeapi"
)

// 1,000 events of which 963 are known: 37 stored, oldest first, bodies
// byte for byte, counted by the metric and recorded in the runs table.
func TestRunStoresMissingOldestFirst(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	events := genEvents("evt_", "charge.succeeded", 1000, time.Minute, 80*time.Second) // the last ~22h
	// Odd spacing: the stored body must be the answer's bytes, not a re-encoding.
	events[500].Body = []byte(`{ "id" : "` + events[500].ID + `",  "object":"event", "created": ` +
		strconv.FormatInt(events[500].Created.Unix(), 10) + ` , "type":"charge.succeeded", "data":{"object":{"amount":  1}} }`)
	rng := rand.New(rand.NewPCG(1, 2))
	missing := map[string]bool{events[500].ID: true}
	for len(missing) < 37 {
		missing[events[rng.IntN(len(events))].ID] = true
	}
	for _, ev := range events {
		if !missing[ev.ID] {
			e.store.know("stripe", ev.ID)
		}
	}
	api := fakeapi.NewStripe(t, testKey, events)
	r := e.runner(nil, stripeSource("stripe", api.URL))

	res, err := r.Run(context.Background(), "stripe")
	require.NoError(t, err)
	assert.Equal(t, reconcile.Result{Checked: 1000, Missing: 37}, res)
	assert.Equal(t, 10, api.Requests(), "1,000 events at 100 a page")

	stored := e.store.storedEvents()
	require.Len(t, stored, 37)
	assert.True(t, slices.IsSortedFunc(stored, func(a, b reconcile.Event) int { return a.Created.Compare(b.Created) }), "oldest first")
	bodies := map[string][]byte{}
	for _, ev := range api.Events() {
		bodies[ev.ID] = ev.Body
	}
	for _, ev := range stored {
		assert.True(t, missing[ev.ID], ev.ID)
		assert.Equal(t, "charge.succeeded", ev.Type)
		assert.Equal(t, string(bodies[ev.ID]), string(ev.Body), "the listed body, byte for byte")
	}
	assert.Contains(t, string(stored[slices.IndexFunc(stored, func(ev reconcile.Event) bool { return ev.ID == events[500].ID })].Body), `"amount":  1}}`)
	assert.Equal(t, 37.0, e.reconciled("stripe"))
	row := e.lastRun("stripe")
	assert.Equal(t, 1000, row.checked)
	assert.Equal(t, 37, row.missing)
	assert.Nil(t, row.err)
	require.NotNil(t, row.finished)

	// A second run finds nothing missing.
	res, err = r.Run(context.Background(), "stripe")
	require.NoError(t, err)
	assert.Equal(t, reconcile.Result{Checked: 1000, Missing: 0}, res)
	assert.Equal(t, 37.0, e.reconciled("stripe"))
}

// Stripe's created is in whole seconds: events of one second are stored in
// the order Stripe lists them (newest first, so in reverse), not by id, so
// that an ordered key sees payment_intent.created before the
// payment_intent.succeeded of the same second. Across pages too.
func TestRunKeepsProviderOrderWithinASecond(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	sec := time.Now().Add(-time.Hour).Truncate(time.Second)
	var events []fakeapi.Event // in creation order; ids in the reverse order
	for i := range 150 {
		events = append(events, fakeapi.Event{ID: fmt.Sprintf("evt_%03d", 999-i), Type: "payment_intent.created", Created: sec})
	}
	events = append(events, fakeapi.Event{ID: "evt_000", Type: "payment_intent.created", Created: sec.Add(-time.Second)})
	api := fakeapi.NewStripe(t, testKey, events)
	r := e.runner(nil, stripeSource("stripe", api.URL))

	res, err := r.Run(context.Background(), "stripe")
	require.NoError(t, err)
	assert.Equal(t, reconcile.Result{Checked: 151, Missing: 151}, res)
	want := []string{"evt_000"}
	for i := range 150 {
		want = append(want, fmt.Sprintf("evt_%03d", 999-i))
	}
	var got []string
	for _, ev := range e.store.storedEvents() {
		got = append(got, ev.ID)
	}
	assert.Equal(t, want, got, "oldest first, and within a second in the provider's order")
}

func TestRunUnknownSource(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.runner(nil)
	_, err := r.Run(context.Background(), "nope")
	assert.ErrorIs(t, err, reconcile.ErrNotConfigured)
}

// Pagination of the three listers: page boundaries, the lookback filter,
// and the parameters each API is asked.
func TestPagination(t *testing.T) {
	t.Parallel()
	type listing struct {
		name      string
		newAPI    func(testing.TB, string, []fakeapi.Event) *fakeapi.Server
		provider  string
		prefix    string
		within    int // events within the lookback
		older     int // events older than the lookback
		wantPages int
	}
	cases := []listing{
		{"stripe one page", fakeapi.NewStripe, "stripe", "evt_", 100, 0, 1},
		{"stripe boundary+1", fakeapi.NewStripe, "stripe", "evt_", 101, 5, 2},
		{"stripe exact pages", fakeapi.NewStripe, "stripe", "evt_", 200, 50, 2},
		{"stripe three pages", fakeapi.NewStripe, "stripe", "evt_", 250, 30, 3},
		{"gocardless one page", fakeapi.NewGoCardless, "gocardless", "EV", 500, 20, 1},
		{"gocardless boundary+1", fakeapi.NewGoCardless, "gocardless", "EV", 501, 0, 2},
		{"gocardless three pages", fakeapi.NewGoCardless, "gocardless", "EV", 1200, 700, 3},
		// Paddle cannot filter by time: it pages newest first until a page
		// reaches past the lookback.
		{"paddle exact pages", fakeapi.NewPaddle, "paddle", "evt_", 400, 0, 2},
		{"paddle stops past the lookback", fakeapi.NewPaddle, "paddle", "evt_", 450, 500, 3},
		{"paddle older page", fakeapi.NewPaddle, "paddle", "evt_", 400, 500, 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			typ := "payments.created"
			if c.provider != "gocardless" {
				typ = "transaction.completed"
			}
			// Within: the last ~70h. Older: from an hour before the lookback.
			events := genEvents(c.prefix+"b", typ, c.within, time.Minute, 70*time.Hour/time.Duration(max(c.within, 1)))
			events = append(events, genEvents(c.prefix+"a", typ, c.older, 73*time.Hour, time.Minute)...)
			api := c.newAPI(t, testKey, events)
			src := reconcile.SourceConfig{Name: "s", Provider: c.provider, Lookback: 72 * time.Hour, APIKey: testKey, APIURL: api.URL}
			res, err := e.runner(nil, src).Run(context.Background(), "s")
			require.NoError(t, err)
			assert.Equal(t, reconcile.Result{Checked: c.within, Missing: c.within}, res)
			assert.Equal(t, c.wantPages, api.Requests())
			stored := e.store.storedEvents()
			require.Len(t, stored, c.within)
			assert.True(t, slices.IsSortedFunc(stored, func(a, b reconcile.Event) int { return a.Created.Compare(b.Created) }))
			for _, ev := range stored {
				assert.Equal(t, typ, ev.Type)
				assert.True(t, strings.HasPrefix(ev.ID, c.prefix+"b"), "only events within the lookback: %s", ev.ID)
			}
			checkQueries(t, c.provider, api)
		})
	}
}

// checkQueries checks the parameters of a listing's requests.
func checkQueries(t *testing.T, provider string, api *fakeapi.Server) {
	t.Helper()
	qs := api.Queries()
	for i, q := range qs {
		switch provider {
		case "stripe":
			assert.Equal(t, "100", q.Get("limit"))
			assert.NotEmpty(t, q.Get("created[gte]"))
			assert.Equal(t, i == 0, q.Get("starting_after") == "", "starting_after from page 2 on")
		case "gocardless":
			assert.Equal(t, "500", q.Get("limit"))
			_, err := time.Parse(time.RFC3339, q.Get("created_at[gte]"))
			assert.NoError(t, err)
			assert.Equal(t, i == 0, q.Get("after") == "", "after from page 2 on")
		case "paddle":
			assert.Equal(t, "200", q.Get("per_page"))
			assert.Equal(t, "id[DESC]", q.Get("order_by"))
			assert.Equal(t, i == 0, q.Get("after") == "", "after from page 2 on")
		}
	}
}

// A 429 with Retry-After is waited out, then the run goes on.
func TestRetryAfter429(t *testing.T) {
	for _, provider := range []string{"stripe", "gocardless", "paddle"} {
		t.Run(provider, func(t *testing.T) {
			e := newEnv(t)
			events := genEvents("evt_", "x.y", 3, time.Minute, time.Minute)
			api := newFake(t, provider, events)
			api.FailNext(http.StatusTooManyRequests, 1) // Retry-After: 1 (GoCardless: RateLimit-Reset)
			r := e.runner(nil, reconcile.SourceConfig{Name: "s", Provider: provider, APIKey: testKey, APIURL: api.URL})
			start := time.Now()
			res, err := r.Run(context.Background(), "s")
			require.NoError(t, err)
			assert.Equal(t, reconcile.Result{Checked: 3, Missing: 3}, res)
			assert.Equal(t, 2, api.Requests())
			if provider != "gocardless" { // an HTTP date has whole seconds: the wait is 0..1s
				assert.GreaterOrEqual(t, time.Since(start), 900*time.Millisecond, "Retry-After honoured")
			}
			assert.Contains(t, e.logs.String(), "retrying")
		})
	}
}

func newFake(t *testing.T, provider string, events []fakeapi.Event) *fakeapi.Server {
	switch provider {
	case "gocardless":
		return fakeapi.NewGoCardless(t, testKey, events)
	case "paddle":
		return fakeapi.NewPaddle(t, testKey, events)
	}
	return fakeapi.NewStripe(t, testKey, events)
}

// 500 on page 2 on every try: the run fails with a *ProviderError, stores
// nothing (the listing is incomplete), and the next run stores all.
func TestFailureOnPage2(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	api := fakeapi.NewStripe(t, testKey, genEvents("evt_", "charge.succeeded", 250, time.Minute, time.Minute))
	api.Inject(fakeapi.Fault{Status: http.StatusInternalServerError, Page: 2, Times: 5})
	src := stripeSource("stripe", api.URL)
	src.Every = time.Hour
	r := e.runner(nil, src)

	res, err := r.Run(context.Background(), "stripe")
	var pe *reconcile.ProviderError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, 500, pe.Status)
	assert.Equal(t, 2, pe.Page)
	assert.Equal(t, 5, pe.Tries)
	assert.Contains(t, err.Error(), "stripe events API answered 500 on all 5 tries for page 2")
	assert.Contains(t, err.Error(), "Sorry, something went wrong on Stripe's end.")
	assert.Contains(t, err.Error(), "will retry at the next run")
	assert.Equal(t, reconcile.Result{Checked: 100, Missing: 0}, res)
	assert.Equal(t, 6, api.Requests())
	assert.Empty(t, e.store.storedEvents())
	row := e.lastRun("stripe")
	require.NotNil(t, row.err)
	assert.Contains(t, *row.err, "answered 500")
	assert.Equal(t, 100, row.checked)

	res, err = r.Run(context.Background(), "stripe")
	require.NoError(t, err)
	assert.Equal(t, reconcile.Result{Checked: 250, Missing: 250}, res)
	assert.Nil(t, e.lastRun("stripe").err)
}

func TestRateLimitedEveryTry(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	api := fakeapi.NewStripe(t, testKey, genEvents("evt_", "charge.succeeded", 250, time.Minute, time.Minute))
	api.Inject(fakeapi.Fault{Status: http.StatusTooManyRequests, Page: 3, Times: 5, RetryAfter: "0"})
	res, err := e.runner(nil, stripeSource("stripe", api.URL)).Run(context.Background(), "stripe")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "stripe events API answered 429 on all 5 tries for page 3")
	assert.Contains(t, err.Error(), "run the reconciliation again later") // no periodic runs
	assert.Equal(t, 200, res.Checked)
}

// A wrong key fails at once, saying what the key needs.
func TestWrongKey(t *testing.T) {
	t.Parallel()
	for _, provider := range []string{"stripe", "gocardless", "paddle"} {
		t.Run(provider, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			api := newFake(t, provider, genEvents("evt_", "x.y", 3, time.Minute, time.Minute))
			const wrong = "sk_test_wrong_key_9876543210"
			r := e.runner(nil, reconcile.SourceConfig{Name: "s", Provider: provider, APIKey: wrong, APIURL: api.URL})
			_, err := r.Run(context.Background(), "s")
			var pe *reconcile.ProviderError
			require.ErrorAs(t, err, &pe)
			assert.True(t, pe.Auth())
			assert.Contains(t, err.Error(), "the API key needs read access to events")
			assert.NotContains(t, err.Error(), wrong)
			assert.Equal(t, 1, api.Requests(), "no retry")
			switch provider {
			case "stripe":
				assert.Equal(t, 401, pe.Status)
				assert.Contains(t, pe.Message, "Invalid API Key provided")
			case "gocardless":
				assert.Equal(t, 401, pe.Status)
				assert.Contains(t, pe.Message, "Access token not found")
			case "paddle":
				assert.Equal(t, 403, pe.Status)
				assert.Contains(t, pe.Message, "invalid_token")
			}
		})
	}
}

// An error answer that quotes the key never puts it in the error.
func TestKeyRedacted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":{"type":"invalid_request_error","message":"bad key ` + strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ") + `"}}`))
	}))
	defer hs.Close()
	_, err := e.runner(nil, stripeSource("s", hs.URL)).Run(context.Background(), "s")
	require.Error(t, err)
	assert.NotContains(t, err.Error(), testKey)
	assert.Contains(t, err.Error(), "[api key]")
	assert.NotContains(t, e.logs.String(), testKey)
}

func TestUnreachable(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	hs := httptest.NewServer(http.NotFoundHandler())
	hs.Close()
	_, err := e.runner(nil, stripeSource("s", hs.URL)).Run(context.Background(), "s")
	var pe *reconcile.ProviderError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, 0, pe.Status)
	assert.Equal(t, reconcile.DefaultMaxTries, pe.Tries)
	assert.Contains(t, err.Error(), "unreachable for page 1 after 5 tries")
}

// Two instances (two Runners, two pools, one database): while one runs a
// source, the other's Run gets ErrRunning, and so does a second Run here.
func TestConcurrentRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	api := fakeapi.NewStripe(t, testKey, genEvents("evt_", "charge.succeeded", 5, time.Minute, time.Minute))
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	e.store.knownHook = func() {
		once.Do(func() { close(entered) })
		<-release
	}
	a := e.runner(nil, stripeSource("stripe", api.URL))
	b := e.runner(e.secondPool(), stripeSource("stripe", api.URL))

	done := make(chan error, 1)
	go func() {
		_, err := a.Run(context.Background(), "stripe")
		done <- err
	}()
	<-entered
	_, err := b.Run(context.Background(), "stripe")
	assert.ErrorIs(t, err, reconcile.ErrRunning)
	_, err = a.Run(context.Background(), "stripe")
	assert.ErrorIs(t, err, reconcile.ErrRunning)
	close(release)
	require.NoError(t, <-done)

	res, err := b.Run(context.Background(), "stripe") // the lock was released
	require.NoError(t, err)
	assert.Equal(t, 5, res.Checked)
}

// Two instances with every=200ms for ~1s: at most about one run per period
// between them.
func TestPeriodicAcrossInstances(t *testing.T) {
	e := newEnv(t)
	api := fakeapi.NewStripe(t, testKey, genEvents("evt_", "charge.succeeded", 5, time.Minute, time.Minute))
	src := stripeSource("stripe", api.URL)
	src.Every = 200 * time.Millisecond
	a := e.runner(nil, src)
	b := e.runner(e.secondPool(), src)
	ctx, cancel := context.WithCancel(context.Background())
	a.Start(ctx)
	b.Start(ctx)
	time.Sleep(time.Second)
	cancel()
	a.Wait()
	b.Wait()
	// One page per run; a run starts only 200ms after the last started.
	n := api.Requests()
	t.Logf("%d periodic runs in 1s", n)
	assert.GreaterOrEqual(t, n, 2, "periodic runs happened")
	assert.LessOrEqual(t, n, 6, "at most one run per period across both instances (1s/200ms + the first)")
	assert.Len(t, e.store.storedEvents(), 5)
}

// Without every, Start calls no API.
func TestNoEveryNoCalls(t *testing.T) {
	e := newEnv(t)
	api := fakeapi.NewStripe(t, testKey, genEvents("evt_", "charge.succeeded", 5, time.Minute, time.Minute))
	r := e.runner(nil, stripeSource("stripe", api.URL))
	ctx, cancel := context.WithCancel(context.Background())
	r.Start(ctx)
	time.Sleep(300 * time.Millisecond)
	cancel()
	r.Wait()
	assert.Zero(t, api.Requests())
}

// A panic in the Store during a periodic run is recovered, logged and
// recorded; the lock is released and the next run stores the events.
func TestPeriodicPanicRecovered(t *testing.T) {
	e := newEnv(t)
	api := fakeapi.NewStripe(t, testKey, genEvents("evt_", "charge.succeeded", 5, time.Minute, time.Minute))
	var panicked sync.Once
	e.store.storeHook = func(int) error {
		first := false
		panicked.Do(func() { first = true })
		if first {
			panic("store exploded")
		}
		return nil
	}
	src := stripeSource("stripe", api.URL)
	src.Every = 100 * time.Millisecond
	r := e.runner(nil, src)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r.Start(ctx)
	require.Eventually(t, func() bool { return len(e.store.storedEvents()) == 5 }, 10*time.Second, 20*time.Millisecond)
	cancel()
	r.Wait()
	assert.Contains(t, e.logs.String(), "store exploded")
	assert.Contains(t, e.logs.String(), "run panicked")
	assert.Contains(t, e.logs.String(), "goroutine") // the stack
	assert.Equal(t, 5.0, e.reconciled("stripe"))
}

// An on-demand run that panics returns an error with what it stored
// before, records both, and releases the lock.
func TestRunPanicReturnsError(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	api := fakeapi.NewStripe(t, testKey, genEvents("evt_", "charge.succeeded", 150, time.Minute, time.Minute))
	e.store.storeHook = func(call int) error {
		if call == 2 {
			panic("boom")
		}
		return nil
	}
	r := e.runner(nil, stripeSource("stripe", api.URL))
	res, err := r.Run(context.Background(), "stripe")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "run panicked: boom")
	assert.Equal(t, reconcile.Result{Checked: 150, Missing: 100}, res)
	row := e.lastRun("stripe")
	require.NotNil(t, row.err)
	assert.Contains(t, *row.err, "boom")
	assert.Equal(t, 100, row.missing)
	res, err = r.Run(context.Background(), "stripe")
	require.NoError(t, err)
	assert.Equal(t, 50, res.Missing)
}

// A Store failure keeps what was stored before it; the next run stores the
// rest.
func TestStoreFailureKeepsStoredChunks(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	api := fakeapi.NewStripe(t, testKey, genEvents("evt_", "charge.succeeded", 250, time.Minute, time.Minute))
	e.store.storeHook = func(call int) error {
		if call == 2 {
			return errors.New("database unavailable")
		}
		return nil
	}
	r := e.runner(nil, stripeSource("stripe", api.URL))
	res, err := r.Run(context.Background(), "stripe")
	require.ErrorContains(t, err, "database unavailable")
	assert.Equal(t, reconcile.Result{Checked: 250, Missing: 100}, res)
	assert.Equal(t, 100.0, e.reconciled("stripe"))
	res, err = r.Run(context.Background(), "stripe")
	require.NoError(t, err)
	assert.Equal(t, reconcile.Result{Checked: 250, Missing: 150}, res)
	stored := e.store.storedEvents()
	assert.True(t, slices.IsSortedFunc(stored, func(a, b reconcile.Event) int { return a.Created.Compare(b.Created) }), "oldest first across both runs")
}

func TestNewRejects(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for name, sc := range map[string]reconcile.SourceConfig{
		"provider":  {Name: "s", Provider: "paypal", APIKey: "k"},
		"key":       {Name: "s", Provider: "stripe"},
		"url":       {Name: "s", Provider: "stripe", APIKey: "k", APIURL: "ftp://x"},
		"negative":  {Name: "s", Provider: "stripe", APIKey: "k", Every: -time.Second},
		"anonymous": {Provider: "stripe", APIKey: "k"},
	} {
		_, err := reconcile.New(reconcile.Config{Pool: e.pool, Store: e.store, Sources: []reconcile.SourceConfig{sc}})
		assert.Error(t, err, name)
	}
	sc := reconcile.SourceConfig{Name: "s", Provider: "stripe", APIKey: "k"}
	_, err := reconcile.New(reconcile.Config{Pool: e.pool, Store: e.store, Sources: []reconcile.SourceConfig{sc, sc}})
	assert.ErrorContains(t, err, "twice")
}

// The default client does not follow a redirect to another host (the key
// would go with it).
func TestRedirectToOtherHostRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the redirect was followed, Authorization %q", r.Header.Get("Authorization"))
	}))
	defer other.Close()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, strings.Replace(other.URL, "127.0.0.1", "localhost", 1)+r.URL.Path, http.StatusFound)
	}))
	defer hs.Close()
	r, err := reconcile.New(reconcile.Config{Pool: e.pool, Store: e.store, Sources: []reconcile.SourceConfig{stripeSource("s", hs.URL)}, MaxTries: 1})
	require.NoError(t, err)
	_, err = r.Run(context.Background(), "s")
	assert.ErrorContains(t, err, "redirect to another host")
}
