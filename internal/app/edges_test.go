package app_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	stripewebhook "github.com/stripe/stripe-go/v82/webhook"

	"github.com/hookline/hookline/internal/app"
	"github.com/hookline/hookline/internal/config"
	"github.com/hookline/hookline/internal/pgtest"
	"github.com/hookline/hookline/internal/proctest"
	_ "github.com/hookline/hookline/providers/all"
)

// ---- helpers shared by edges_test.go and faults_test.go ----

const stripeSecret = "whsec_app_edges_test"

// The subprocess helpers are internal/proctest's, shared with cmd/hookline.
type proc = proctest.Proc

var (
	hooklineBin = proctest.Binary
	freeAddr    = proctest.FreeAddr
	writeConfig = proctest.WriteConfig
	launch      = proctest.Start
	startServe  = proctest.Serve
)

var testClient = &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 32}}

func get(url string, header ...string) (int, http.Header, string) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err.Error()
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := testClient.Do(req)
	if err != nil {
		return 0, nil, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func stripeBody(id string) []byte {
	return []byte(`{"id":"` + id + `","object":"event","type":"charge.succeeded","created":1764504000}`)
}

func stripeSig(body []byte, secret string) string {
	return stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{Payload: body, Secret: secret, Timestamp: time.Now()}).Header
}

type answer struct {
	Status int
	Header http.Header
	Body   string
	Took   time.Duration
	Err    error
}

// postEvent posts a Stripe-signed event to base/webhooks/source.
func postEvent(client *http.Client, base, source, id, secret string, header ...string) answer {
	body := stripeBody(id)
	req, err := http.NewRequest(http.MethodPost, base+"/webhooks/"+source, bytes.NewReader(body))
	if err != nil {
		return answer{Err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Stripe-Signature", stripeSig(body, secret))
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return answer{Err: err, Took: time.Since(start)}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{Status: resp.StatusCode, Header: resp.Header, Body: string(b), Took: time.Since(start)}
}

// sink is a destination that records what it received per Idempotency-Key
// and the highest number of concurrent requests for one key.
type sink struct {
	*httptest.Server
	mu            sync.Mutex
	keys          map[string]int // 2xx answers by key
	inFlight      map[string]int
	maxConcurrent int
	delay         time.Duration
	headers       []http.Header
}

func newSink(t *testing.T, delay time.Duration) *sink {
	s := &sink{keys: map[string]int{}, inFlight: map[string]int{}, delay: delay}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		key := r.Header.Get("Idempotency-Key")
		s.mu.Lock()
		s.inFlight[key]++
		s.maxConcurrent = max(s.maxConcurrent, s.inFlight[key])
		s.headers = append(s.headers, r.Header.Clone())
		s.mu.Unlock()
		defer func() { s.mu.Lock(); s.inFlight[key]--; s.mu.Unlock() }()
		if s.delay > 0 {
			select {
			case <-time.After(s.delay):
			case <-r.Context().Done():
				return
			}
		}
		s.mu.Lock()
		s.keys[key]++
		s.mu.Unlock()
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *sink) got(key string) int { s.mu.Lock(); defer s.mu.Unlock(); return s.keys[key] }

func (s *sink) concurrent() int { s.mu.Lock(); defer s.mu.Unlock(); return s.maxConcurrent }

// serveConfig is a one-source configuration ("s", Stripe) with short
// timings; extra is appended at the top level, srcExtra inside the source.
func serveConfig(listen, dbURL, dest, extra, srcExtra string) string {
	return fmt.Sprintf(`listen: %q
database_url: %q
workers: 4
shutdown_timeout: 10s
%s
sources:
  - name: s
    provider: stripe
    secrets: [%q]
    lease: 3s
%s
    destination:
      url: %q
      timeout: 1s
      max_attempts: 5
      backoff: {min: 100ms, max: 1s}
`, listen, dbURL, extra, stripeSecret, srcExtra, dest)
}

// stripeConfig is a config on a loopback port with the test admin token,
// top (more top-level lines, or ""), and one Stripe source "s" signed with
// stripeSecret, whose further lines (indented by four: its destinations,
// lease, ordering) are source.
func stripeConfig(dbURL, top, source string) string {
	return fmt.Sprintf("listen: 127.0.0.1:0\ndatabase_url: %q\nadmin_token: %s\n%ssources:\n  - name: s\n    provider: stripe\n    secrets: [%q]\n%s",
		dbURL, hostileToken, top, stripeSecret, source)
}

// inproc is an app.App running in this test process.
type inproc struct {
	app    *app.App
	cancel context.CancelFunc
	done   chan error
	addrs  []net.Addr
}

// startApp builds and runs an App from YAML, with listen addresses taken
// from the YAML (use 127.0.0.1:0).
func startApp(t *testing.T, yaml string, opts app.Options) *inproc {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml), os.Getenv)
	require.NoError(t, err)
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	a, err := app.New(ctx, cfg, opts)
	if err != nil {
		cancel()
		require.NoError(t, err)
	}
	ip := &inproc{app: a, cancel: cancel, done: make(chan error, 1)}
	ready := make(chan struct{})
	go func() { ip.done <- a.Run(ctx, func() { close(ready) }) }()
	select {
	case <-ready:
	case err := <-ip.done:
		cancel()
		t.Fatalf("app.Run: %v", err)
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatal("app did not start listening within 30s")
	}
	ip.addrs = a.Addrs()
	t.Cleanup(func() { ip.stop(t) })
	return ip
}

// stop cancels Run and waits (bounded) for it to return.
func (ip *inproc) stop(t *testing.T) {
	ip.cancel()
	select {
	case err, ok := <-ip.done:
		if ok {
			require.NoError(t, err)
			close(ip.done)
		}
	case <-time.After(45 * time.Second):
		t.Error("app.Run did not return within 45s of cancellation")
	}
}

func (ip *inproc) url(i int) string { return "http://" + ip.addrs[i].String() }

// ---- edge tests ----

// TestSlowlorisHeaders: a client that sends its headers one byte per second
// is cut off by ReadHeaderTimeout (5 s), not held open for ever.
func TestSlowlorisHeaders(t *testing.T) {
	t.Parallel()
	ip := startApp(t, serveConfig("127.0.0.1:0", pgtest.NewURL(t), "http://127.0.0.1:9/x", "", ""), app.Options{})
	conn, err := net.Dial("tcp", ip.addrs[0].String())
	require.NoError(t, err)
	defer conn.Close()
	start := time.Now()
	_, err = io.WriteString(conn, "POST /webhooks/s HTTP/1.1\r\nHost: hookline\r\nX-Slow: ")
	require.NoError(t, err)
	closed := make(chan time.Duration, 1)
	go func() {
		_, _ = io.Copy(io.Discard, conn) // returns when the server closes the connection
		closed <- time.Since(start)
	}()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case took := <-closed:
			require.GreaterOrEqual(t, took, 4500*time.Millisecond, "closed before ReadHeaderTimeout")
			require.LessOrEqual(t, took, 8*time.Second, "ReadHeaderTimeout is 5s")
			return
		case <-tick.C:
			_, _ = conn.Write([]byte("a")) // one byte per second, never a full header
			if time.Since(start) > 20*time.Second {
				t.Fatal("the server kept a slowloris connection open for 20s")
			}
		}
	}
}

// TestMaxHeaderBytes: more than 64 KiB of headers is answered 431; a large
// but allowed header is not.
func TestMaxHeaderBytes(t *testing.T) {
	t.Parallel()
	ip := startApp(t, serveConfig("127.0.0.1:0", pgtest.NewURL(t), "http://127.0.0.1:9/x", "", ""), app.Options{})
	a := postEvent(testClient, ip.url(0), "s", "evt_big_header", stripeSecret, "X-Big", strings.Repeat("a", 100<<10))
	require.NoError(t, a.Err)
	require.Equal(t, http.StatusRequestHeaderFieldsTooLarge, a.Status)

	a = postEvent(testClient, ip.url(0), "s", "evt_ok_header", stripeSecret, "X-Big", strings.Repeat("a", 32<<10))
	require.NoError(t, a.Err)
	require.Equal(t, http.StatusOK, a.Status, a.Body)
}

// TestSourceMaxConcurrency: with max_concurrency: 2, deliveries beyond two
// concurrent ones for the source are answered 503 with Retry-After, and
// deliveries are served again once the first two finish.
func TestSourceMaxConcurrency(t *testing.T) {
	t.Parallel()
	ip := startApp(t, serveConfig("127.0.0.1:0", pgtest.NewURL(t), "http://127.0.0.1:9/x", "", "    max_concurrency: 2"), app.Options{})
	addr := ip.addrs[0].String()
	// Four deliveries whose bodies never finish arriving: two take the
	// slots and hang reading their bodies, two are refused at once. The
	// refusals show in the metrics (no probe request could steal a slot
	// from a slow delivery the server has not dispatched yet).
	var slow []net.Conn
	defer func() {
		for _, c := range slow {
			c.Close()
		}
	}()
	for range 4 {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		slow = append(slow, c)
		_, err = io.WriteString(c, "POST /webhooks/s HTTP/1.1\r\nHost: hookline\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"id\":")
		require.NoError(t, err)
	}
	unavailable := func() string {
		_, _, m := get(ip.url(0) + "/metrics")
		for _, l := range strings.Split(m, "\n") {
			if strings.HasPrefix(l, `hookline_webhooks_received_total{outcome="unavailable",source="s"}`) {
				return strings.Fields(l)[1]
			}
		}
		return "0"
	}
	require.Eventually(t, func() bool { return unavailable() == "2" }, 30*time.Second, 20*time.Millisecond,
		"two of four concurrent deliveries are refused")

	a := postEvent(testClient, ip.url(0), "s", "evt_fifth", stripeSecret)
	require.Equal(t, http.StatusServiceUnavailable, a.Status, a.Body)
	require.Equal(t, "1", a.Header.Get("Retry-After"))
	require.Contains(t, a.Body, "too many concurrent deliveries")

	for _, c := range slow {
		c.Close()
	}
	require.Eventually(t, func() bool {
		return postEvent(testClient, ip.url(0), "s", "evt_after", stripeSecret).Status == http.StatusOK
	}, 30*time.Second, 50*time.Millisecond, "slots are released when the slow deliveries end")
}

// TestSecretsNeverLoggedOrEchoed runs `hookline serve` with debug logging
// and every kind of secret (source secrets, admin token, destination
// secret, database password), exercises good and bad deliveries, bad and
// good admin tokens and invalid configurations, and looks for the secrets
// in every line of output and every HTTP answer.
func TestSecretsNeverLoggedOrEchoed(t *testing.T) {
	t.Parallel()
	const (
		srcSecret   = "whsec_SRCSECRET4f1c2a"
		oldSecret   = "whsec_OLDSECRET77b1e0"
		adminToken  = "ADMTOKEN9b7e3dSECRET"
		destRaw     = "DESTSECRETab12cd34xyz"
		dbPassword  = "DBPASS77aaSECRET"
		wrongSecret = "whsec_not_the_secret"
	)
	destSecret := "whsec_" + base64.StdEncoding.EncodeToString([]byte(destRaw))
	secrets := []string{srcSecret, oldSecret, adminToken, destRaw, destSecret, strings.TrimPrefix(destSecret, "whsec_"), dbPassword}

	dbURL := pgtest.NewURL(t)
	withPW := strings.Replace(dbURL, "postgres://postgres@", "postgres://postgres:"+dbPassword+"@", 1)
	require.NotEqual(t, dbURL, withPW)
	dest := newSink(t, 0)
	addr := freeAddr(t)
	cfg := fmt.Sprintf(`listen: %q
database_url: %q
admin_token: %q
log: {level: debug}
sources:
  - name: s
    provider: stripe
    secrets: [%q, %q]
    lease: 3s
    destination: {url: %q, timeout: 1s, max_attempts: 2, backoff: {min: 100ms, max: 200ms}, secret: %q}
`, addr, withPW, adminToken, srcSecret, oldSecret, dest.URL, destSecret)
	p := startServe(t, writeConfig(t, cfg), addr)

	var answers strings.Builder
	record := func(a answer) {
		fmt.Fprintf(&answers, "%d %v %s\n", a.Status, a.Header, a.Body)
	}
	base := p.BaseURL()
	good := postEvent(testClient, base, "s", "evt_secret_ok", srcSecret)
	require.Equal(t, http.StatusOK, good.Status, good.Body)
	record(good)
	record(postEvent(testClient, base, "s", "evt_secret_old", oldSecret))
	for i, sig := range []string{
		"", "garbage", "t=1,v1=00", "v1=" + srcSecret, "t=" + fmt.Sprint(time.Now().Unix()) + ",v1=deadbeef",
	} {
		body := stripeBody(fmt.Sprintf("evt_bad_%d", i))
		req, _ := http.NewRequest(http.MethodPost, base+"/webhooks/s", bytes.NewReader(body))
		req.Header.Set("Stripe-Signature", sig)
		resp, err := testClient.Do(req)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, string(b))
		record(answer{Status: resp.StatusCode, Header: resp.Header, Body: string(b)})
	}
	a := postEvent(testClient, base, "s", "evt_wrong_secret", wrongSecret)
	require.Equal(t, http.StatusUnauthorized, a.Status)
	record(a)
	for _, auth := range []string{"", "Bearer wrong", "Bearer " + adminToken[:len(adminToken)-1], "Bearer " + adminToken + "x", "Basic " + adminToken, adminToken} {
		code, h, body := get(base+"/admin/dead", "Authorization", auth)
		require.Equal(t, http.StatusUnauthorized, code, "Authorization %q", auth)
		record(answer{Status: code, Header: h, Body: body})
	}
	code, h, body := get(base+"/admin/dead", "Authorization", "Bearer "+adminToken)
	require.Equal(t, http.StatusOK, code, body)
	record(answer{Status: code, Header: h, Body: body})
	for _, path := range []string{"/readyz", "/healthz", "/metrics", "/admin/events/s/evt_secret_ok"} {
		code, h, body := get(base+path, "Authorization", "Bearer "+adminToken)
		record(answer{Status: code, Header: h, Body: body})
	}
	require.Eventually(t, func() bool { return dest.got("s:evt_secret_ok") == 1 }, 30*time.Second, 20*time.Millisecond)
	dest.mu.Lock()
	for _, hd := range dest.headers {
		fmt.Fprintf(&answers, "forward %v\n", hd)
	}
	dest.mu.Unlock()

	// Invalid configurations next to real secrets: each error names the
	// field, never the secret.
	outputs := []string{p.Out()}
	bad := []string{
		strings.Replace(cfg, "provider: stripe", "provider: nope", 1),
		strings.Replace(cfg, "lease: 3s", "lease: 3s\n    tolerance: -1s", 1),
		strings.Replace(cfg, destSecret, "notwhsec_"+destRaw, 1),
		strings.Replace(cfg, withPW, "postgres://postgres:"+dbPassword+"@127.0.0.1:notaport/db", 1),
		strings.Replace(cfg, "lease: 3s", "lease: 3s\n    unknown_field: "+srcSecret, 1),
	}
	for _, c := range bad {
		path := writeConfig(t, c)
		for _, args := range [][]string{{"check", "--db", "--config", path}, {"serve", "--config", path}} {
			out, err := exec.Command(hooklineBin(t), args...).CombinedOutput()
			require.Error(t, err, "%v should fail:\n%s", args, out)
			outputs = append(outputs, string(out))
		}
	}

	require.NoError(t, p.Cmd.Process.Signal(syscall.SIGTERM))
	<-p.Exited
	outputs = append(outputs, p.Out(), answers.String())
	require.Contains(t, p.Out(), `"level":"DEBUG"`, "debug logging was on")
	for _, out := range outputs {
		for _, s := range secrets {
			require.NotContains(t, out, s, "a secret leaked:\n%s", out)
		}
	}
}

// TestTLS: with tls_cert and tls_key the ingest listener speaks HTTPS only.
func TestTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	certPEM, keyPEM := selfSigned(t)
	certPath, keyPath := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	require.NoError(t, os.WriteFile(certPath, certPEM, 0o600))
	require.NoError(t, os.WriteFile(keyPath, keyPEM, 0o600))
	extra := fmt.Sprintf("tls_cert: %q\ntls_key: %q", certPath, keyPath)
	ip := startApp(t, serveConfig("127.0.0.1:0", pgtest.NewURL(t), "http://127.0.0.1:9/x", extra, ""), app.Options{})

	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(certPEM))
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	base := "https://" + ip.addrs[0].String()
	a := postEvent(client, base, "s", "evt_tls", stripeSecret)
	require.NoError(t, a.Err)
	require.Equal(t, http.StatusOK, a.Status, a.Body)
	require.Contains(t, a.Body, `"accepted"`)

	code, _, _ := get(ip.url(0) + "/healthz") // plain HTTP on the TLS port
	require.NotEqual(t, http.StatusOK, code)
}

func selfSigned(t *testing.T) (certPEM, keyPEM []byte) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "hookline test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	kb, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
}

// TestAdminListen: with admin_listen the admin API is served there and not
// on listen; ingest stays on listen only.
func TestAdminListen(t *testing.T) {
	t.Parallel()
	const token = "admin-listen-token"
	extra := fmt.Sprintf("admin_token: %q\nadmin_listen: \"127.0.0.1:0\"", token)
	ip := startApp(t, serveConfig("127.0.0.1:0", pgtest.NewURL(t), "http://127.0.0.1:9/x", extra, ""), app.Options{})
	require.Len(t, ip.addrs, 2)
	public, admin := ip.url(0), ip.url(1)

	code, _, _ := get(public+"/admin/dead", "Authorization", "Bearer "+token)
	require.Equal(t, http.StatusNotFound, code, "admin routes are not on the public listener")
	code, _, body := get(admin+"/admin/dead", "Authorization", "Bearer "+token)
	require.Equal(t, http.StatusOK, code, body)
	code, _, _ = get(admin + "/admin/dead")
	require.Equal(t, http.StatusUnauthorized, code)
	a := postEvent(testClient, admin, "s", "evt_admin_port", stripeSecret)
	require.Equal(t, http.StatusNotFound, a.Status, "no ingest on the admin listener")
	a = postEvent(testClient, public, "s", "evt_public", stripeSecret)
	require.Equal(t, http.StatusOK, a.Status, a.Body)
}

// TestRequestIDInLogs: X-Request-Id is echoed, or generated, and names the
// log line of a rejected delivery.
func TestRequestIDInLogs(t *testing.T) {
	t.Parallel()
	logs := &proctest.Buffer{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ip := startApp(t, serveConfig("127.0.0.1:0", pgtest.NewURL(t), "http://127.0.0.1:9/x", "", ""), app.Options{Logger: log})

	a := postEvent(testClient, ip.url(0), "s", "evt_rid", "whsec_wrong", "X-Request-Id", "req-edge-42")
	require.Equal(t, http.StatusUnauthorized, a.Status)
	require.Equal(t, "req-edge-42", a.Header.Get("X-Request-Id"))

	a = postEvent(testClient, ip.url(0), "s", "evt_rid2", "whsec_wrong")
	require.Equal(t, http.StatusUnauthorized, a.Status)
	generated := a.Header.Get("X-Request-Id")
	require.NotEmpty(t, generated, "a request id is generated when the caller sends none")

	// A caller's id that is long or holds anything but visible ASCII is
	// replaced: it would be echoed and written in every log line.
	for _, odd := range []string{strings.Repeat("R", 129), "abc\xff\xfe\"}{", "two words"} {
		a = postEvent(testClient, ip.url(0), "s", "evt_rid3", "whsec_wrong", "X-Request-Id", odd)
		require.Equal(t, http.StatusUnauthorized, a.Status)
		require.NotEqual(t, odd, a.Header.Get("X-Request-Id"))
		require.NotEmpty(t, a.Header.Get("X-Request-Id"), "a new id is made")
		require.NotContains(t, logs.String(), odd)
	}
	a = postEvent(testClient, ip.url(0), "s", "evt_rid4", "whsec_wrong", "X-Request-Id", strings.Repeat("k", 128))
	require.Equal(t, strings.Repeat("k", 128), a.Header.Get("X-Request-Id"), "128 visible ASCII bytes are kept")

	for _, id := range []string{"req-edge-42", generated} {
		var found bool
		sc := bufio.NewScanner(strings.NewReader(logs.String()))
		for sc.Scan() {
			var line map[string]any
			require.NoError(t, json.Unmarshal(sc.Bytes(), &line), sc.Text())
			if line["msg"] == "delivery rejected" && line["request_id"] == id {
				found = true
				require.EqualValues(t, 401, line["status"])
			}
		}
		require.True(t, found, "no rejected-delivery log line with request_id %q in:\n%s", id, logs.String())
	}
}

// TestLogFormats: `hookline serve` logs JSON by default (production);
// `hookline dev` logs text.
func TestLogFormats(t *testing.T) {
	t.Parallel()
	t.Run("ServeJSON", func(t *testing.T) {
		t.Parallel()
		addr := freeAddr(t)
		p := startServe(t, writeConfig(t, serveConfig(addr, pgtest.NewURL(t), "http://127.0.0.1:9/x", "", "")), addr)
		require.Equal(t, http.StatusUnauthorized, postEvent(testClient, p.BaseURL(), "s", "evt_log", "whsec_wrong").Status)
		require.NoError(t, p.Cmd.Process.Signal(syscall.SIGTERM))
		<-p.Exited
		require.Equal(t, 0, p.Cmd.ProcessState.ExitCode())
		lines := strings.Split(strings.TrimSpace(p.Out()), "\n")
		require.GreaterOrEqual(t, len(lines), 3)
		for _, l := range lines {
			var m map[string]any
			require.NoError(t, json.Unmarshal([]byte(l), &m), "not a JSON log line: %q", l)
			require.Contains(t, m, "time")
			require.Contains(t, m, "level")
			require.Contains(t, m, "msg")
		}
	})
	t.Run("DevText", func(t *testing.T) {
		t.Parallel()
		addr := freeAddr(t)
		cmd := exec.Command(hooklineBin(t), "dev", "--listen", addr)
		cmd.Dir = t.TempDir()
		cmd.Env = append(os.Environ(), "DATABASE_URL="+pgtest.NewURL(t))
		out := &proctest.Buffer{}
		cmd.Stdout, cmd.Stderr = out, out
		require.NoError(t, cmd.Start())
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
		require.Eventually(t, func() bool { return strings.Contains(out.String(), "hookline dev is ready") }, 60*time.Second, 50*time.Millisecond, out.String())
		require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			t.Fatal("hookline dev did not stop on SIGTERM")
		}
		text := regexp.MustCompile(`^time=\S+ level=(DEBUG|INFO|WARN|ERROR) msg=`)
		var logLines int
		for _, l := range strings.Split(out.String(), "\n") {
			if strings.HasPrefix(l, "{") {
				t.Fatalf("JSON log line from hookline dev: %q", l)
			}
			if text.MatchString(l) {
				logLines++
			}
		}
		require.Positive(t, logLines, "no text log lines in:\n%s", out.String())
	})
}
