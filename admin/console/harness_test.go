package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	stripewebhook "github.com/stripe/stripe-go/v82/webhook"

	"github.com/hookline/hookline/internal/app"
	"github.com/hookline/hookline/internal/config"
	"github.com/hookline/hookline/internal/pgtest"
	_ "github.com/hookline/hookline/providers/all"
)

const (
	token  = "console-test-token"
	secret = "whsec_console_test"
)

// hookline is a whole hookline (internal/app: ingest, workers, admin API
// and console on one listener) on a fresh database, with two sources:
// "shop", whose one destination is flaky (failing until told otherwise)
// with a budget of one attempt, so its events die at once; and "billing",
// whose destination answers 200.
type hookline struct {
	url   string
	pool  *pgxpool.Pool
	flaky *destination
	db    *dbProxy // with options.outage
}

// destination answers its status (500 until set) and counts calls.
type destination struct {
	*httptest.Server
	status atomic.Int32
	calls  atomic.Int32
	body   atomic.Pointer[string] // what it answers; nil: "upstream says {status text}"
}

func newDestination(t *testing.T, status int) *destination {
	d := &destination{}
	d.status.Store(int32(status))
	d.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		d.calls.Add(1)
		w.WriteHeader(int(d.status.Load()))
		if b := d.body.Load(); b != nil {
			_, _ = io.WriteString(w, *b)
			return
		}
		_, _ = io.WriteString(w, "upstream says "+http.StatusText(int(d.status.Load())))
	}))
	t.Cleanup(d.Close)
	return d
}

// options changes what startHooklineWith starts.
type options struct {
	// outage puts a proxy between hookline and its database
	// (hookline.db), so that the test can cut the database off.
	outage bool
	// rejectDuplicates sets on_duplicate: reject on shop: a duplicate
	// delivery becomes a dead item of reason duplicate.
	rejectDuplicates bool
}

func startHookline(t *testing.T) *hookline { t.Helper(); return startHooklineWith(t, options{}) }

func startHooklineWith(t *testing.T, o options) *hookline {
	t.Helper()
	dbURL := pgtest.NewURL(t)
	var proxy *dbProxy
	if o.outage {
		u, err := url.Parse(dbURL)
		require.NoError(t, err)
		proxy = newDBProxy(t, u.Host)
		u.Host = proxy.ln.Addr().String()
		dbURL = u.String()
	}
	onDuplicate := "skip"
	if o.rejectDuplicates {
		onDuplicate = "reject"
	}
	flaky, ok := newDestination(t, http.StatusInternalServerError), newDestination(t, http.StatusOK)
	yaml := fmt.Sprintf(`listen: "127.0.0.1:0"
database_url: %q
admin_token: %q
workers: 8
shutdown_timeout: 5s
log: {level: error}
sources:
  - name: shop
    provider: stripe
    secrets: [%q]
    on_duplicate: %s
    lease: 3s
    destination: {url: %q, timeout: 2s, max_attempts: 1, backoff: {min: 100ms, max: 200ms}}
  - name: billing
    provider: stripe
    secrets: [%q]
    lease: 3s
    destination: {url: %q, timeout: 2s, max_attempts: 3, backoff: {min: 100ms, max: 200ms}}
`, dbURL, token, secret, onDuplicate, flaky.URL, secret, ok.URL)
	cfg, err := config.Parse([]byte(yaml), os.Getenv)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	a, err := app.New(ctx, cfg, app.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		cancel()
		require.NoError(t, err)
	}
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() { done <- a.Run(ctx, func() { close(ready) }) }()
	select {
	case <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("app.Run: %v", err)
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatal("hookline did not start within 30s")
	}
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("hookline did not stop within 30s")
		}
	})
	if proxy != nil {
		// Registered after the app's: runs before it stops, which needs
		// its database.
		t.Cleanup(func() { proxy.setDown(false) })
	}
	return &hookline{url: "http://" + a.Addrs()[0].String(), pool: a.Pool, flaky: flaky, db: proxy}
}

// dbProxy forwards TCP connections to the database until it is set down:
// then it closes every connection it holds and refuses new ones, as a
// database that went away would, until it is set up again.
type dbProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	down   bool
	conns  map[net.Conn]bool
}

func newDBProxy(t *testing.T, target string) *dbProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &dbProxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	go p.serve()
	t.Cleanup(func() { _ = ln.Close(); p.setDown(true) })
	return p
}

func (p *dbProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.pipe(c)
	}
}

// keep records c as open, or closes it when the proxy is down.
func (p *dbProxy) keep(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down {
		_ = c.Close()
		return false
	}
	p.conns[c] = true
	return true
}

func (p *dbProxy) pipe(c net.Conn) {
	if !p.keep(c) {
		return
	}
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = c.Close()
		return
	}
	if !p.keep(s) {
		_ = c.Close()
		return
	}
	go func() { _, _ = io.Copy(s, c); _ = s.Close() }()
	_, _ = io.Copy(c, s)
	_ = c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, s)
	p.mu.Unlock()
}

// setDown cuts the database off (true) or brings it back (false).
func (p *dbProxy) setDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
	if down {
		for c := range p.conns {
			_ = c.Close()
		}
		clear(p.conns)
	}
}

// send delivers a Stripe-signed event and returns ingest's status word
// (accepted, duplicate).
func (h *hookline) send(t testing.TB, source, id, typ string) string {
	t.Helper()
	status, out := h.sendBody(t, source, eventBody(id, typ, ""))
	require.Equal(t, http.StatusOK, status, out)
	return out["status"].(string)
}

// eventBody is a Stripe event; extra (`"k":v,`) goes into its object.
func eventBody(id, typ, extra string) []byte {
	return []byte(`{"id":` + jsonString(id) + `,"object":"event","type":` + jsonString(typ) + `,"created":1764504000,` +
		`"data":{"object":{` + extra + `"id":` + jsonString("pi_"+id) + `,"amount":1200,"currency":"eur"}}}`)
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// sendBody delivers a Stripe-signed body and returns ingest's status and answer.
func (h *hookline) sendBody(t testing.TB, source string, body []byte) (int, map[string]any) {
	t.Helper()
	sig := stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{Payload: body, Secret: secret, Timestamp: time.Now()}).Header
	req, err := http.NewRequest(http.MethodPost, h.url+"/webhooks/"+source, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Stripe-Signature", sig)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return resp.StatusCode, out
}

// api calls the JSON admin API with the bearer token.
func (h *hookline) api(t testing.TB, method, path string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, h.url+path, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out map[string]any
	raw, _ := io.ReadAll(resp.Body)
	if len(raw) > 0 {
		require.NoError(t, json.Unmarshal(raw, &out), string(raw))
	}
	return resp.StatusCode, out
}

// waitState waits until the lookup reports the event in state.
func (h *hookline) waitState(t testing.TB, source, id, state string) map[string]any {
	t.Helper()
	var ev map[string]any
	require.Eventually(t, func() bool {
		_, ev = h.api(t, http.MethodGet, "/admin/events/"+source+"/"+apiEscape(id))
		return ev["state"] == state
	}, 30*time.Second, 50*time.Millisecond, "event %s/%s never reached %s (last: %v)", source, id, state, ev)
	return ev
}

// apiEscape escapes an event id for a JSON route's path: "." and ".." as
// %2E, which Go's client sends as they are and the server decodes.
func apiEscape(id string) string {
	if id == "." || id == ".." {
		return strings.Repeat("%2E", len(id))
	}
	return url.PathEscape(id)
}

// destinationState is a destination's state as GET /admin/destinations says.
func (h *hookline) destinationState(t testing.TB, source, name string) string {
	t.Helper()
	status, out := h.api(t, http.MethodGet, "/admin/destinations")
	require.Equal(t, http.StatusOK, status, out)
	for _, it := range out["items"].([]any) {
		d := it.(map[string]any)
		if d["source"] == source && d["name"] == name {
			return d["state"].(string)
		}
	}
	t.Fatalf("no destination %s/%s", source, name)
	return ""
}

// browser is an HTTP client with a cookie jar that does not follow
// redirects, so tests see each answer.
type browser struct {
	t    testing.TB
	base string
	c    *http.Client
}

func newBrowser(t testing.TB, base string) *browser {
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &browser{t: t, base: base, c: &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

type answer struct {
	status int
	header http.Header
	body   string
}

func (b *browser) do(method, path string, form url.Values, header ...string) answer {
	b.t.Helper()
	var rd io.Reader
	if form != nil {
		rd = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.base+path, rd)
	require.NoError(b.t, err)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := b.c.Do(req)
	require.NoError(b.t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(b.t, err)
	return answer{resp.StatusCode, resp.Header, string(raw)}
}

func (b *browser) get(path string) answer { b.t.Helper(); return b.do(http.MethodGet, path, nil) }

func (b *browser) post(path string, form url.Values, header ...string) answer {
	b.t.Helper()
	return b.do(http.MethodPost, path, form, header...)
}

// login logs in with the admin token and returns the session cookie.
func (b *browser) login() *http.Cookie {
	b.t.Helper()
	a := b.post("/admin/ui/login", url.Values{"token": {token}})
	require.Equal(b.t, http.StatusSeeOther, a.status, a.body)
	u, _ := url.Parse(b.base + "/admin/ui/")
	for _, c := range b.c.Jar.Cookies(u) {
		if c.Name == "hookline_console" {
			return c
		}
	}
	b.t.Fatal("no session cookie after login")
	return nil
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf reads the CSRF token from a page's forms.
func (b *browser) csrf() string {
	b.t.Helper()
	a := b.get("/admin/ui/destinations")
	require.Equal(b.t, http.StatusOK, a.status, a.body)
	m := csrfRE.FindStringSubmatch(a.body)
	require.NotNil(b.t, m, "no CSRF token on the page")
	return m[1]
}
