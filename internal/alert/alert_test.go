package alert_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookline/hookline/internal/alert"
	"github.com/hookline/hookline/internal/pgtest"
)

// received is one alert as the receiver decoded it.
type received struct {
	Text        string `json:"text"`
	Kind        string `json:"kind"`
	Source      string `json:"source"`
	Destination string `json:"destination"`
	Count       int64  `json:"count"`
	At          string `json:"at"`
}

// Receiver modes.
const (
	answerOK int32 = iota
	answer500
	hang // never answers; the request ends when the client gives up
)

// receiver is a loopback incoming webhook that records what it is sent.
type receiver struct {
	srv      *httptest.Server
	stop     chan struct{} // closed at cleanup: hanging requests end
	mode     atomic.Int32
	requests atomic.Int32
	mu       sync.Mutex
	got      []received
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{stop: make(chan struct{})}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(func() { close(r.stop); r.srv.Close() })
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	r.requests.Add(1)
	body, _ := io.ReadAll(req.Body)
	switch r.mode.Load() {
	case answer500:
		http.Error(w, "boom", http.StatusInternalServerError)
		return
	case hang:
		select {
		case <-req.Context().Done():
		case <-r.stop:
		}
		return
	}
	var fields map[string]json.RawMessage
	var m received
	if req.Method != http.MethodPost || req.Header.Get("Content-Type") != "application/json" ||
		json.Unmarshal(body, &fields) != nil || json.Unmarshal(body, &m) != nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if want := []string{"at", "count", "destination", "kind", "source", "text"}; !slices.Equal(keys, want) {
		m.Text = fmt.Sprintf("unexpected fields %v", keys)
	}
	r.mu.Lock()
	r.got = append(r.got, m)
	r.mu.Unlock()
	_, _ = w.Write([]byte("ok"))
}

// take returns the alerts received since the last take.
func (r *receiver) take() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	got := r.got
	r.got = nil
	return got
}

// url is the webhook URL, with a path like Slack's (a secret token).
func (r *receiver) url() string { return r.srv.URL + "/services/T0/B0/secret-token" }

// logBuffer collects an Alerter's log lines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

type fixture struct {
	t    *testing.T
	pool *pgxpool.Pool
	recv *receiver
	logs *logBuffer
}

func newFixture(t *testing.T) *fixture {
	return &fixture{t: t, pool: pgtest.NewPool(t), recv: newReceiver(t), logs: &logBuffer{}}
}

// alerter returns an Alerter with one rule to the receiver; client nil
// means the default.
func (f *fixture) alerter(rule alert.Rule, client *http.Client) *alert.Alerter {
	rule.URL = f.recv.url()
	logger := slog.New(slog.NewTextHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return alert.New(f.pool, []alert.Rule{rule}, client, logger)
}

func (f *fixture) scan(a *alert.Alerter) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := a.Scan(ctx); err != nil {
		f.t.Fatalf("Scan: %v", err)
	}
}

func (f *fixture) exec(sql string, args ...any) {
	f.t.Helper()
	if _, err := f.pool.Exec(context.Background(), sql, args...); err != nil {
		f.t.Fatalf("%s: %v", sql, err)
	}
}

var eventSeq atomic.Int64

// die adds n dead items of (source, destination) that die now.
func (f *fixture) die(source, destination, reason string, n int) {
	f.t.Helper()
	for range n {
		f.exec(`INSERT INTO hookline_dead (source, event_id, reason, attempts, last_error, destination, payload)
			VALUES ($1, $2, $3, 5, 'HTTP 503', $4, '')`, source, fmt.Sprintf("evt_%d", eventSeq.Add(1)), reason, destination)
	}
}

// queue adds n events of (source, destination) in state, queued now.
func (f *fixture) queue(source, destination, state string, n int) {
	f.t.Helper()
	for range n {
		f.exec(`INSERT INTO hookline_event_destinations (source, event_id, destination, state, delivery_id)
			VALUES ($1, $2, $3, $4, 1)`, source, fmt.Sprintf("evt_%d", eventSeq.Add(1)), destination, state)
	}
}

// openCircuit opens the circuit of (source, name) now, creating its row.
func (f *fixture) openCircuit(source, name string, streak int, lastErr string) {
	f.t.Helper()
	f.exec(`INSERT INTO hookline_destinations (source, name, circuit, failure_streak, opened_at, last_error)
		VALUES ($1, $2, 'open', $3, now(), $4)
		ON CONFLICT (source, name) DO UPDATE SET circuit = 'open', failure_streak = $3, opened_at = now(), last_error = $4`,
		source, name, streak, lastErr)
}

// travel moves every stored time back by d, as if d had passed.
func (f *fixture) travel(d time.Duration) {
	f.t.Helper()
	iv := fmt.Sprintf("%d microseconds", d.Microseconds())
	f.exec(`UPDATE hookline_alerts SET sent_at = sent_at - $1::interval`, iv)
	f.exec(`UPDATE hookline_dead SET dead_at = dead_at - $1::interval`, iv)
	f.exec(`UPDATE hookline_destinations SET opened_at = opened_at - $1::interval`, iv)
	f.exec(`UPDATE hookline_event_destinations SET queued_at = queued_at - $1::interval`, iv)
}

// expect checks that the receiver got exactly want (texts), in any order.
func (f *fixture) expect(want ...string) []received {
	f.t.Helper()
	got := f.recv.take()
	texts := make([]string, len(got))
	for i, m := range got {
		texts[i] = m.Text
	}
	slices.Sort(texts)
	want = slices.Clone(want)
	slices.Sort(want)
	if !slices.Equal(texts, want) {
		f.t.Fatalf("alerts:\n got %q\nwant %q", texts, want)
	}
	return got
}

// expectRE checks that the receiver got one alert per pattern, each
// matching its pattern, in the order of their texts.
func (f *fixture) expectRE(patterns ...string) []received {
	f.t.Helper()
	got := f.recv.take()
	slices.SortFunc(got, func(a, b received) int { return strings.Compare(a.Text, b.Text) })
	ok := len(got) == len(patterns)
	for i := 0; ok && i < len(got); i++ {
		ok = regexp.MustCompile(patterns[i]).MatchString(got[i].Text)
	}
	if !ok {
		f.t.Fatalf("alerts:\n got %+v\nwant %q", got, patterns)
	}
	return got
}

func checkAt(t *testing.T, at string) {
	t.Helper()
	ts, err := time.Parse(time.RFC3339, at)
	if err != nil {
		t.Fatalf("at %q: %v", at, err)
	}
	if d := time.Since(ts); d < -time.Minute || d > time.Minute {
		t.Fatalf("at %q is %v from now", at, d)
	}
}

const deadText3 = "hookline: 3 events of stripe → billing went to the dead set (reason failed)"

func TestDeadFailedAlertsOnce(t *testing.T) {
	f := newFixture(t)
	a := f.alerter(alert.Rule{On: []string{alert.KindDead}}, nil)
	f.scan(a) // alerting starts
	f.die("stripe", "billing", "failed", 3)
	f.scan(a) // younger than the settle time: not yet
	f.expect()
	f.travel(10 * time.Second)
	f.scan(a)
	got := f.expect(deadText3)
	m := got[0]
	if m.Kind != "dead" || m.Source != "stripe" || m.Destination != "billing" || m.Count != 3 {
		t.Fatalf("alert %+v", m)
	}
	checkAt(t, m.At)
	f.scan(a)
	f.expect()
	if strings.Contains(f.logs.String(), "secret-token") {
		t.Fatalf("the logs show the webhook URL's token:\n%s", f.logs)
	}
}

func TestDeadDuplicateNotAlerted(t *testing.T) {
	f := newFixture(t)
	a := f.alerter(alert.Rule{}, nil)
	f.scan(a)
	f.die("stripe", "billing", "duplicate", 2)
	f.travel(time.Minute)
	f.scan(a)
	f.expect()
}

func TestDeadThrottledThenCountsNewOnes(t *testing.T) {
	f := newFixture(t)
	a := f.alerter(alert.Rule{On: []string{alert.KindDead}, MinInterval: 5 * time.Minute}, nil)
	f.scan(a)
	f.die("stripe", "billing", "failed", 3)
	f.travel(10 * time.Second)
	f.scan(a)
	f.expect(deadText3)

	f.die("stripe", "billing", "failed", 1)
	f.travel(time.Minute)
	f.die("stripe", "billing", "failed", 1)
	f.travel(time.Minute)
	f.scan(a) // within min_interval
	f.expect()

	f.travel(4 * time.Minute)
	f.scan(a)
	got := f.expect("hookline: 2 events of stripe → billing went to the dead set (reason failed)")
	if got[0].Count != 2 {
		t.Fatalf("count %d, want 2", got[0].Count)
	}
	f.travel(10 * time.Minute)
	f.scan(a)
	f.expect()
}

func TestDeadHistoryNotAlerted(t *testing.T) {
	f := newFixture(t)
	f.die("stripe", "billing", "failed", 5)
	f.die("github", "ci", "failed", 1)
	f.travel(time.Hour)
	a := f.alerter(alert.Rule{}, nil)
	f.scan(a) // the first scan of this URL
	f.travel(time.Minute)
	f.scan(a)
	f.expect()

	f.die("stripe", "billing", "failed", 1)
	f.travel(10 * time.Second)
	f.scan(a)
	f.expect("hookline: 1 event of stripe → billing went to the dead set (reason failed)")
}

func TestDeadKeysAreSeparate(t *testing.T) {
	f := newFixture(t)
	a := f.alerter(alert.Rule{}, nil)
	f.scan(a)
	f.die("stripe", "billing", "failed", 3)
	f.die("stripe", "ledger", "failed", 1)
	f.die("github", "billing", "failed", 2)
	f.travel(10 * time.Second)
	f.scan(a)
	f.expect(deadText3,
		"hookline: 1 event of stripe → ledger went to the dead set (reason failed)",
		"hookline: 2 events of github → billing went to the dead set (reason failed)")
}

func TestCircuitOpenOncePerOpeningAndInterval(t *testing.T) {
	f := newFixture(t)
	a := f.alerter(alert.Rule{On: []string{alert.KindCircuitOpen}}, nil)
	f.openCircuit("stripe", "billing", 5, "HTTP 503 <Service Unavailable>\n  try again")
	f.openCircuit("stripe", "ledger", 2, "")
	f.exec(`UPDATE hookline_destinations SET circuit = 'closed' WHERE name = 'ledger'`) // recovered
	f.scan(a)
	got := f.expect("hookline: the circuit of stripe → billing opened after 5 failures in a row " +
		"(last error: HTTP 503 &lt;Service Unavailable&gt; try again)")
	if m := got[0]; m.Kind != "circuit_open" || m.Count != 1 || m.Source != "stripe" || m.Destination != "billing" {
		t.Fatalf("alert %+v", m)
	}
	checkAt(t, got[0].At)
	f.scan(a)
	f.expect()

	f.travel(time.Minute)
	f.openCircuit("stripe", "billing", 3, "") // a new opening within min_interval
	f.scan(a)
	f.expect()
	f.travel(5 * time.Minute)
	f.scan(a)
	f.expect("hookline: the circuit of stripe → billing opened after 3 failures in a row")

	f.travel(10 * time.Minute) // still open, no new opening
	f.scan(a)
	f.expect()
}

func TestLagOnlyPastThreshold(t *testing.T) {
	f := newFixture(t)
	a := f.alerter(alert.Rule{On: []string{alert.KindLag}, LagThreshold: 2 * time.Minute}, nil)
	f.queue("stripe", "billing", "queued", 2)
	f.queue("stripe", "ledger", "completed", 4)
	f.queue("github", "ci", "queued", 1)
	f.travel(time.Minute)
	f.scan(a)
	f.expect()

	f.travel(2 * time.Minute)
	f.queue("github", "ci", "queued", 1)
	f.queue("stripe", "billing", "queued", 1) // young: not counted
	f.exec(`UPDATE hookline_event_destinations SET queued_at = now() WHERE source = 'github'`)
	f.exec(`INSERT INTO hookline_destinations (source, name, paused_at) VALUES ('stripe', 'billing', now())`)
	f.die("stripe", "billing", "failed", 1) // dead is not in `on`
	f.travel(10 * time.Second)
	f.scan(a)
	// The oldest's age is the time travelled plus the test's own run time.
	got := f.expectRE(`^hookline: 2 events of stripe → billing queued for over 2m \(oldest: 3m1\ds\); the destination is paused$`)
	if m := got[0]; m.Kind != "lag" || m.Count != 2 || m.Source != "stripe" || m.Destination != "billing" {
		t.Fatalf("alert %+v", m)
	}
	checkAt(t, got[0].At)
	f.scan(a)
	f.expect()

	f.travel(5 * time.Minute) // still lagging: reminded once per min_interval
	f.scan(a)
	f.expectRE(`^hookline: 2 events of github → ci queued for over 2m \(oldest: 5m1\ds\)$`,
		`^hookline: 3 events of stripe → billing queued for over 2m \(oldest: 8m1\ds\); the destination is paused$`)
}

func TestConcurrentAlertersSendOnce(t *testing.T) {
	f := newFixture(t)
	rule := alert.Rule{LagThreshold: time.Minute}
	a1 := f.alerter(rule, nil)
	pool2, err := pgxpool.New(context.Background(), f.pool.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool2.Close)
	rule.URL = f.recv.url()
	a2 := alert.New(pool2, []alert.Rule{rule}, nil, slog.New(slog.NewTextHandler(f.logs, nil)))

	f.scan(a1)
	for _, s := range []string{"s1", "s2", "s3"} {
		f.die(s, "d", "failed", 2)
		f.openCircuit(s, "d", 4, "")
		f.queue(s, "d", "queued", 1)
	}
	f.travel(2 * time.Minute)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for _, a := range []*alert.Alerter{a1, a2, a1, a2, a1, a2} {
		wg.Go(func() { errs <- a.Scan(context.Background()) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	got := f.recv.take()
	seen := map[string]int{}
	for _, m := range got {
		seen[m.Kind+" "+m.Source+" "+m.Destination]++
	}
	if len(got) != 9 || len(seen) != 9 {
		t.Fatalf("%d alerts for %d keys, want one for each of 9: %v", len(got), len(seen), seen)
	}
}

func TestFailingEndpointRetriedByNextScan(t *testing.T) {
	f := newFixture(t)
	a := f.alerter(alert.Rule{}, nil)
	f.scan(a)
	f.die("stripe", "billing", "failed", 1)
	f.openCircuit("stripe", "billing", 5, "")
	f.travel(10 * time.Second)

	f.recv.mode.Store(answer500)
	f.scan(a) // Scan does not fail: the POST's failure is logged
	if n := f.recv.requests.Load(); n != 1 {
		t.Fatalf("%d requests, want 1 (the rest wait for the next scan)", n)
	}
	if !strings.Contains(f.logs.String(), "answered 500") {
		t.Fatalf("the failure is not logged:\n%s", f.logs)
	}
	f.die("stripe", "billing", "failed", 1)
	f.travel(10 * time.Second)

	f.recv.mode.Store(answerOK)
	f.scan(a)
	f.expect("hookline: 2 events of stripe → billing went to the dead set (reason failed)",
		"hookline: the circuit of stripe → billing opened after 5 failures in a row")

	// A failure after an earlier alert restores that alert's cursor.
	f.travel(10 * time.Minute)
	f.die("stripe", "billing", "failed", 1)
	f.travel(10 * time.Second)
	f.recv.mode.Store(answer500)
	f.scan(a)
	f.recv.mode.Store(answerOK)
	f.scan(a)
	f.expect("hookline: 1 event of stripe → billing went to the dead set (reason failed)")
}

func TestHangingEndpointBounded(t *testing.T) {
	f := newFixture(t)
	client := &http.Client{Timeout: 300 * time.Millisecond}
	a := f.alerter(alert.Rule{}, client)
	f.scan(a)
	f.die("stripe", "billing", "failed", 1)
	f.openCircuit("stripe", "billing", 5, "")
	f.queue("stripe", "billing", "queued", 1)
	f.travel(10 * time.Minute)

	f.recv.mode.Store(hang)
	start := time.Now()
	f.scan(a)
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Scan took %v with a hanging endpoint", d)
	}
	if n := f.recv.requests.Load(); n != 1 {
		t.Fatalf("%d requests, want 1", n)
	}
	if !strings.Contains(f.logs.String(), "alert not sent") {
		t.Fatalf("the failure is not logged:\n%s", f.logs)
	}

	f.recv.mode.Store(answerOK)
	f.scan(a)
	if got := f.recv.take(); len(got) != 3 {
		t.Fatalf("after the endpoint recovered: %d alerts, want 3: %+v", len(got), got)
	}
}

func TestScanContextBoundsPOST(t *testing.T) {
	// A client without a Timeout: the scan's context bounds the POST.
	f := newFixture(t)
	a := f.alerter(alert.Rule{On: []string{alert.KindCircuitOpen}}, &http.Client{})
	f.openCircuit("stripe", "billing", 5, "")
	f.recv.mode.Store(hang)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := a.Scan(ctx)
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Scan took %v", d)
	}
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Scan: %v", err)
	}
	// The claim was released: the next scan sends.
	f.recv.mode.Store(answerOK)
	f.scan(a)
	f.expect("hookline: the circuit of stripe → billing opened after 5 failures in a row")
}

func TestValidate(t *testing.T) {
	ok := "https://hooks.slack.com/services/T0/B0/x"
	for _, c := range []struct {
		rule  alert.Rule
		field string // "" = valid
	}{
		{alert.Rule{URL: ok}, ""},
		{alert.Rule{URL: ok, On: []string{"dead", "circuit_open", "lag"}, LagThreshold: time.Second, MinInterval: time.Second}, ""},
		{alert.Rule{URL: ""}, "url"},
		{alert.Rule{URL: "hooks.slack.com/services/x"}, "url"},
		{alert.Rule{URL: "ftp://example.com/x"}, "url"},
		{alert.Rule{URL: "https://"}, "url"},
		{alert.Rule{URL: "http://[::1"}, "url"},
		{alert.Rule{URL: ok, On: []string{"dead", "deaf"}}, "on[1]"},
		{alert.Rule{URL: ok, On: []string{"lag", "dead", "lag"}}, "on[2]"},
		{alert.Rule{URL: ok, LagThreshold: -time.Second}, "lag_threshold"},
		{alert.Rule{URL: ok, MinInterval: -time.Second}, "min_interval"},
	} {
		err := c.rule.Validate()
		var fe *alert.FieldError
		switch {
		case c.field == "" && err != nil:
			t.Errorf("%+v: %v", c.rule, err)
		case c.field != "" && (!errors.As(err, &fe) || fe.Field != c.field):
			t.Errorf("%+v: error %v, want one naming %s", c.rule, err, c.field)
		case err != nil && strings.Contains(err.Error(), "slack.com"):
			t.Errorf("%+v: the error quotes the URL: %v", c.rule, err)
		}
	}
}

func TestWithDefaults(t *testing.T) {
	r := alert.Rule{URL: "https://example.com/x"}.WithDefaults()
	if !slices.Equal(r.On, []string{"dead", "circuit_open", "lag"}) ||
		r.LagThreshold != 5*time.Minute || r.MinInterval != 5*time.Minute {
		t.Fatalf("%+v", r)
	}
}

func TestInvalidRuleIgnored(t *testing.T) {
	f := newFixture(t)
	logger := slog.New(slog.NewTextHandler(f.logs, nil))
	a := alert.New(f.pool, []alert.Rule{{URL: "nope"}}, nil, logger)
	f.openCircuit("stripe", "billing", 5, "")
	f.scan(a)
	if !strings.Contains(f.logs.String(), "alert rule ignored") {
		t.Fatalf("logs:\n%s", f.logs)
	}
}
