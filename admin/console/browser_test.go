package console_test

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// chromium finds a Chromium or Chrome binary: $HOOKLINE_CHROMIUM, else the
// usual names on PATH. Without one the browser tests skip, unless CI is
// set (.ci/run sets it): there a missing browser is a failure, since
// `make test` installs it (.ci/ensure-chromium).
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("HOOKLINE_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if ci := os.Getenv("CI"); ci != "" && ci != "false" && ci != "0" {
		t.Fatal("Chromium not found, and CI is set: install it (bash .ci/ensure-chromium, which `make test` runs) or set HOOKLINE_CHROMIUM")
	}
	t.Skip("browser tests skipped: Chromium not found (install it: apt-get install chromium, or run `make test`, which does; or set HOOKLINE_CHROMIUM)")
	return ""
}

// newChrome starts headless Chromium with a fresh profile, at 1280×800, in
// a time zone other than UTC (so that the console's local times show).
func newChrome(t *testing.T) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium(t)),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 800),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	// The first Run starts the browser; it lives as long as ctx.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.EmulateViewport(1280, 800),
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := cdp.Call(ctx, tg, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: "Asia/Kolkata"})
			return err
		})))
	return ctx
}

// step runs actions with a time limit of its own.
func step(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	require.NoError(t, chromedp.Do(sctx, actions...), what)
}

func eval[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(sctx, chromedp.Evaluate[T](js))
	require.NoError(t, err, js)
	return v
}

func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(sctx, chromedp.Text(chromedp.CSS(sel)))
	require.NoError(t, err, sel)
	return strings.TrimSpace(v)
}

// waitFor waits until the JavaScript expression is true, across page loads
// (an evaluation during a navigation fails, and is tried again).
func waitFor(t *testing.T, ctx context.Context, js string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		// Poll evaluates js in the page on every animation frame until it
		// is true, for at most a second: a navigation (a form post) may
		// leave it watching the old page, so it starts again in the
		// current one until the deadline.
		_, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](js, chromedp.WithPollingTimeout(time.Second)))
		if err == nil {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("waited %v for %s: %v", within, js, err)
		}
	}
}

// screenshot writes the viewport as name.png into the test's temporary
// directory and, when HOOKLINE_SCREENSHOTS names a directory (relative to
// the repository's root), there too, recompressed.
func screenshot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	raw, err := chromedp.Run(sctx, chromedp.CaptureScreenshot())
	require.NoError(t, err)
	img, err := png.Decode(bytes.NewReader(raw))
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, (&png.Encoder{CompressionLevel: png.BestCompression}).Encode(&buf, img))
	require.NoError(t, os.WriteFile(filepath.Join(dir, name+".png"), buf.Bytes(), 0o644))
	if out := os.Getenv("HOOKLINE_SCREENSHOTS"); out != "" {
		if !filepath.IsAbs(out) {
			out = filepath.Join(repoRoot(t), out)
		}
		require.NoError(t, os.MkdirAll(out, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(out, name+".png"), buf.Bytes(), 0o644))
	}
	t.Logf("screenshot %s.png (%d bytes) in %s", name, buf.Len(), dir)
}

// repoRoot is the directory of go.mod above the test's directory.
func repoRoot(t *testing.T) string {
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		require.NotEqual(t, parent, dir, "no go.mod above the test")
		dir = parent
	}
}

// backfill stores an hour of history, so that the overview's charts have
// a shape: billing's deliveries every minute (some of them duplicates, one
// in three), and shop's deliveries with an outage of failed attempts
// between 35 and 20 minutes ago.
func backfill(t *testing.T, h *hookline) {
	t.Helper()
	_, err := h.pool.Exec(context.Background(), `WITH m AS (
			SELECT k, now() - k * interval '1 minute' AS at FROM generate_series(1, 58) k),
		n AS (
			SELECT 'billing' AS source, k, at, i, i % 3 = 0 AS dup FROM m, generate_series(1, 6 + (k * 7) % 9) i
			UNION ALL
			SELECT 'shop', k, at, i, false FROM m, generate_series(1, 3 + (k * 5) % 4) i),
		d AS (
			INSERT INTO hookline_deliveries (source, received_at, content_type, headers, body)
			SELECT source, at, 'application/json', '{}',
				convert_to('{"id":"evt_hist_' || k || '_' || CASE WHEN dup THEN i - 1 ELSE i END || '","dup":' || dup || '}', 'UTF8') FROM n
			RETURNING id, source, received_at, convert_from(body, 'UTF8')::jsonb AS j),
		e AS (
			INSERT INTO hookline_events (source, event_id, event_type, delivery_id, first_received_at, received_at)
			SELECT source, j->>'id', 'invoice.paid', id, received_at, received_at FROM d WHERE NOT (j->>'dup')::boolean
			RETURNING source, event_id, delivery_id, first_received_at),
		r AS (
			INSERT INTO hookline_event_destinations (source, event_id, destination, state, delivery_id, attempts, completed_at, dedup_until)
			SELECT source, event_id, 'default', 'completed', delivery_id, 1, first_received_at, first_received_at + interval '1 day' FROM e)
		INSERT INTO hookline_attempts (source, event_id, destination, n, at, status, duration_ms, error)
		SELECT source, event_id, 'default', 1, first_received_at, 200, 40, '' FROM e
		UNION ALL
		SELECT 'shop', 'evt_outage', 'default', k, now() - k * interval '1 minute', 503, 30, 'destination answered 503: maintenance'
		FROM generate_series(20, 35) k, generate_series(1, 4) x`)
	require.NoError(t, err)
}

// browse is what the browser tests share: the browser, the hookline, the
// directory of the screenshots.
type browse struct {
	ctx   context.Context
	h     *hookline
	shots string
}

// deadID is the event the browser tests find, retry and watch.
const deadID = "evt_1PbX9kL2mQ"

// TestBrowser drives the console in headless Chromium against a whole
// hookline, as an operator would: a wrong token, logging in, finding a dead
// event by its id prefix, reading its payload and attempts, retrying it and
// watching it complete; a bulk retry of a filter after its dry run; pausing
// and resuming a destination; a forged cross-site form; the keyboard; a
// phone-width screen. It writes a screenshot of each page. The steps run in
// order, in one browser session.
func TestBrowser(t *testing.T) {
	b := &browse{ctx: newChrome(t), h: startHookline(t), shots: t.TempDir()}
	h := b.h
	// Odd ones first (the keyboard step opens the newest event): a long id
	// and type, and an id a browser would resolve as a path segment.
	h.send(t, "shop", longID, longType)
	h.send(t, "shop", "..", "charge.failed")
	h.send(t, "shop", deadID, "payment_intent.payment_failed")
	for i := range 3 {
		h.send(t, "shop", fmt.Sprintf("evt_inv_%d", i), "invoice.payment_failed")
	}
	for i := range 6 {
		id := fmt.Sprintf("evt_bill_%d", i)
		h.send(t, "billing", id, "invoice.paid")
		if i%2 == 0 {
			h.send(t, "billing", id, "invoice.paid") // a duplicate delivery
		}
	}
	h.waitState(t, "shop", deadID, "dead")
	h.waitState(t, "shop", longID, "dead")
	h.waitState(t, "shop", "..", "dead")
	for i := range 3 {
		h.waitState(t, "shop", fmt.Sprintf("evt_inv_%d", i), "dead")
	}
	h.waitState(t, "billing", "evt_bill_5", "completed")
	backfill(t, h)
	for _, s := range []struct {
		name string
		run  func(b *browse, t *testing.T)
	}{
		{"WrongTokenStaysOnTheLoginPage", (*browse).wrongTokenStaysOnTheLoginPage},
		{"LogIn", (*browse).logIn},
		{"FindRetryAndWatchADeadEvent", (*browse).findRetryAndWatchADeadEvent},
		{"BulkRetryAFilterAfterADryRun", (*browse).bulkRetryAFilterAfterADryRun},
		{"PauseAndResumeADestination", (*browse).pauseAndResumeADestination},
		{"ForgedCrossSitePOSTIsRefused", (*browse).forgedCrossSitePOSTIsRefused},
		{"Overview", (*browse).overview},
		{"Keyboard", (*browse).keyboard},
		{"PhoneWidth", (*browse).phoneWidth},
		{"LongValuesKeepTheColumnsInView", (*browse).longValuesKeepTheColumnsInView},
		{"DotIDsOpen", (*browse).dotIDsOpen},
		{"BulkDeleteActsOnWhatTheDryRunCounted", (*browse).bulkDeleteActsOnWhatTheDryRunCounted},
		{"BackAfterActionsShowsTheStateNow", (*browse).backAfterActionsShowsTheStateNow},
		{"EnterOnADestinationDoesNotPauseIt", (*browse).enterOnADestinationDoesNotPauseIt},
		{"TimeFiltersInTheBrowsersZone", (*browse).timeFiltersInTheBrowsersZone},
		{"WaitingEventPageBacksOffAndKeepsASelection", (*browse).waitingEventPageBacksOffAndKeepsASelection},
	} {
		if !t.Run(s.name, func(t *testing.T) { s.run(b, t) }) {
			break // the next steps build on this one
		}
	}
}

// wrongTokenStaysOnTheLoginPage: a wrong token shows the error and the form again, and no menu.
func (b *browse) wrongTokenStaysOnTheLoginPage(t *testing.T) {
	step(t, b.ctx, "log in with a wrong token",
		chromedp.Navigate(b.h.url+"/admin/ui/"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), "not-the-token"),
		chromedp.Submit(chromedp.ID("token")),
		chromedp.WaitVisible(chromedp.ID("login-error")))
	require.Equal(t, "That is not the admin token.", text(t, b.ctx, "#login-error"))
	require.True(t, eval[bool](t, b.ctx, `document.querySelector('#token') !== null && document.querySelector('nav') === null`))
	screenshot(t, b.ctx, b.shots, "login")
}

// logIn: a page opened without a session asks for the token, then shows that page.
func (b *browse) logIn(t *testing.T) {
	step(t, b.ctx, "a page without a session asks to log in, then comes back",
		chromedp.Navigate(b.h.url+"/admin/ui/events"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), token),
		chromedp.Submit(chromedp.ID("token")),
		chromedp.WaitVisible(chromedp.ID("events")))
	require.True(t, eval[bool](t, b.ctx, `location.pathname === '/admin/ui/events'`))
	require.True(t, eval[bool](t, b.ctx, `document.cookie === ''`), "the session cookie is HttpOnly")
}

// findRetryAndWatchADeadEvent: the events page finds the dead event by its
// id prefix; its page shows the payload and the failed attempt; after Retry
// the page refreshes itself until the event completes.
func (b *browse) findRetryAndWatchADeadEvent(t *testing.T) {
	step(t, b.ctx, "search dead events by id prefix",
		chromedp.SetValue(chromedp.CSS(`select[name=state]`), "dead"),
		chromedp.SendKeys(chromedp.CSS(`input[name=id_prefix]`), "evt_1PbX"),
		chromedp.Submit(chromedp.CSS(`input[name=id_prefix]`)),
		chromedp.WaitVisible(chromedp.CSS(`a[href="/admin/ui/events/shop/`+deadID+`"]`)))
	require.Equal(t, 1, eval[int](t, b.ctx, `document.querySelectorAll('#events tbody a[data-row-link]').length`))
	screenshot(t, b.ctx, b.shots, "events")

	step(t, b.ctx, "open it", chromedp.Click(chromedp.CSS(`a[href="/admin/ui/events/shop/`+deadID+`"]`)), chromedp.WaitVisible(chromedp.ID("pretty")))
	require.Contains(t, text(t, b.ctx, "#pretty"), `"amount": 1200,`, "the payload, pretty-printed")
	require.Equal(t, "dead", text(t, b.ctx, "#state"))
	attempts := text(t, b.ctx, "table.attempts tbody")
	require.Contains(t, attempts, "500")
	require.Contains(t, attempts, "destination answered 500")
	require.Contains(t, text(t, b.ctx, "#headers"), "Stripe-Signature")
	// Times in the browser's zone (here +05:30), UTC on hover.
	require.True(t, eval[bool](t, b.ctx, `[...document.querySelectorAll('time')].every(e => e.hasAttribute('data-local') && e.title.endsWith(' UTC') && !e.textContent.endsWith('UTC'))`))
	screenshot(t, b.ctx, b.shots, "event-dead")

	b.h.flaky.status.Store(http.StatusOK)
	step(t, b.ctx, "retry it", chromedp.Click(chromedp.CSS(`button[id^="retry-"]`)), chromedp.WaitVisible(chromedp.CSS(".note")))
	waitFor(t, b.ctx, `document.querySelector('#state').textContent === 'completed'`, 30*time.Second)
	require.Contains(t, text(t, b.ctx, "table.attempts tbody"), "200", "the second attempt succeeded")
	b.h.waitState(t, "shop", deadID, "completed")
	screenshot(t, b.ctx, b.shots, "event")
}

// bulkRetryAFilterAfterADryRun: "Retry all…" over a filter first says how
// many items match and changes nothing; the confirmation retries them.
func (b *browse) bulkRetryAFilterAfterADryRun(t *testing.T) {
	step(t, b.ctx, "filter the dead set",
		chromedp.Navigate(b.h.url+"/admin/ui/dead"),
		chromedp.WaitVisible(chromedp.ID("dead")),
		chromedp.SendKeys(chromedp.CSS(`input[name=event_type]`), "invoice.payment_failed"),
		chromedp.Submit(chromedp.CSS(`input[name=event_type]`)),
		chromedp.WaitVisible(chromedp.CSS(`input[name=event_type][value="invoice.payment_failed"]`)))
	require.Equal(t, 3, eval[int](t, b.ctx, `document.querySelectorAll('#dead tbody input[name=id]').length`))
	screenshot(t, b.ctx, b.shots, "dead")
	step(t, b.ctx, "dry run", chromedp.Click(chromedp.ID("retry-filter")), chromedp.WaitVisible(chromedp.ID("question")))
	require.Equal(t, "3 items match; retry them?", text(t, b.ctx, "#question"))
	screenshot(t, b.ctx, b.shots, "confirm")
	for i := range 3 {
		_, ev := b.h.api(t, http.MethodGet, fmt.Sprintf("/admin/events/shop/evt_inv_%d", i))
		require.Equal(t, "dead", ev["state"], "the dry run changed nothing")
	}
	step(t, b.ctx, "confirm", chromedp.Click(chromedp.ID("confirm")), chromedp.WaitVisible(chromedp.ID("done")))
	require.Equal(t, "Retried 3 of 3 items.", text(t, b.ctx, "#done"))
	for i := range 3 {
		b.h.waitState(t, "shop", fmt.Sprintf("evt_inv_%d", i), "completed")
	}
}

// pauseAndResumeADestination: the destinations page pauses and resumes.
func (b *browse) pauseAndResumeADestination(t *testing.T) {
	row := "#dest-shop-default"
	step(t, b.ctx, "open destinations", chromedp.Navigate(b.h.url+"/admin/ui/destinations"), chromedp.WaitVisible(chromedp.CSS(row)))
	require.Equal(t, "active", text(t, b.ctx, row+" [data-state]"))
	step(t, b.ctx, "pause", chromedp.Click(chromedp.CSS(row+" button")))
	waitFor(t, b.ctx, `document.querySelector('`+row+` [data-state]').textContent === 'paused'`, 10*time.Second)
	require.Equal(t, "paused", b.h.destinationState(t, "shop", "default"))
	screenshot(t, b.ctx, b.shots, "destinations")
	step(t, b.ctx, "resume", chromedp.Click(chromedp.CSS(row+" button")))
	waitFor(t, b.ctx, `document.querySelector('`+row+` [data-state]').textContent === 'active'`, 10*time.Second)
	require.Equal(t, "active", b.h.destinationState(t, "shop", "default"))
}

// forgedCrossSitePOSTIsRefused: a form on another origin that posts to the
// console, with the operator's cookie, is refused and changes nothing.
func (b *browse) forgedCrossSitePOSTIsRefused(t *testing.T) {
	// Another origin on the same host: same-site, so the SameSite=Strict
	// cookie goes along; the origin check and the CSRF token refuse it.
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<!doctype html><form method="post" action="%s/admin/ui/destinations/shop/default/pause">
			<input type="hidden" name="csrf" value="forged"><button id="go">Claim your prize</button></form>`, b.h.url)
	}))
	defer evil.Close()
	step(t, b.ctx, "submit the forged form", chromedp.Navigate(evil.URL), chromedp.Click(chromedp.ID("go")), chromedp.WaitVisible(chromedp.CSS("main")))
	require.Contains(t, text(t, b.ctx, "main"), "Refused")
	require.Equal(t, "active", b.h.destinationState(t, "shop", "default"))
}

// overview: the charts of both sources.
func (b *browse) overview(t *testing.T) {
	step(t, b.ctx, "overview", chromedp.Navigate(b.h.url+"/admin/ui/"), chromedp.WaitVisible(chromedp.CSS("figure.chart svg polyline")))
	waitFor(t, b.ctx, `document.querySelector('figure.chart [data-series=duplicate]') !== null`, 5*time.Second)
	require.Equal(t, 2, eval[int](t, b.ctx, `document.querySelectorAll('figure.chart').length`))
	screenshot(t, b.ctx, b.shots, "overview")
}

// keyboard: / focuses the filters, j selects a row, Enter opens it, g d
// goes to the dead set.
func (b *browse) keyboard(t *testing.T) {
	step(t, b.ctx, "events", chromedp.Navigate(b.h.url+"/admin/ui/events"), chromedp.WaitVisible(chromedp.ID("events")))
	step(t, b.ctx, "/ focuses the filters", chromedp.KeyEvent("/"))
	require.True(t, eval[bool](t, b.ctx, `document.activeElement.name === 'source'`))
	step(t, b.ctx, "leave the field", chromedp.Blur(chromedp.CSS(`input[name=source]`)))
	step(t, b.ctx, "j selects the first row", chromedp.KeyEvent("j"))
	require.True(t, eval[bool](t, b.ctx, `document.activeElement.hasAttribute('data-row-link')`))
	step(t, b.ctx, "Enter opens it", chromedp.KeyEvent("\r"), chromedp.WaitVisible(chromedp.ID("event-state")))
	step(t, b.ctx, "g d goes to the dead set", chromedp.KeyEvent("gd"), chromedp.WaitVisible(chromedp.ID("dead")))
}

// phoneWidth: at 390, 375 and 360 px no page scrolls sideways (wide tables
// scroll in their own box), and every filter is on screen.
func (b *browse) phoneWidth(t *testing.T) {
	for _, w := range []int64{390, 375, 360} {
		step(t, b.ctx, "a phone", chromedp.EmulateViewport(w, 780, chromedp.EmulateScale(2), chromedp.EmulateMobile),
			chromedp.Navigate(b.h.url+"/admin/ui/events/shop/"+deadID), chromedp.WaitVisible(chromedp.ID("pretty")))
		for _, p := range []string{"/admin/ui/", "/admin/ui/events", "/admin/ui/dead", "/admin/ui/destinations", "/admin/ui/events/shop/" + deadID} {
			step(t, b.ctx, p, chromedp.Navigate(b.h.url+p), chromedp.WaitVisible(chromedp.ID("main")))
			// Against the screen's width: on a phone the layout viewport
			// (innerWidth) grows with content that is too wide.
			require.LessOrEqual(t, eval[int64](t, b.ctx, `document.documentElement.scrollWidth`), w, "%s scrolls sideways at %d px", p, w)
			require.True(t, eval[bool](t, b.ctx, fmt.Sprintf(`[...document.querySelectorAll('.filters input, .filters select, .filters button')].every(e => {
				const r = e.getBoundingClientRect(); return r.left >= 0 && r.right <= %d })`, w)), "%s: a filter is off screen at %d px", p, w)
		}
		if w == 390 {
			screenshot(t, b.ctx, b.shots, "phone-event")
		}
	}
	step(t, b.ctx, "back to a laptop", chromedp.EmulateReset(), chromedp.EmulateViewport(1280, 800))
}

// A long id and type, and the attempts of an event whose destination
// answered a long error without spaces.
var (
	longID   = "evt_" + strings.Repeat("L", 296)
	longType = "customer." + strings.Repeat("verylongtypename", 15)
)

// fits: no table on the page is wider than its scroll box, so every
// column is in view.
const fits = `[...document.querySelectorAll('.scroll')].every(s => s.scrollWidth <= s.clientWidth + 1)`

// longValuesKeepTheColumnsInView: at 1280×800, a long id or type (or a
// long error) wraps, and the State, Deliveries and Attempts columns stay
// in view.
func (b *browse) longValuesKeepTheColumnsInView(t *testing.T) {
	step(t, b.ctx, "events", chromedp.Navigate(b.h.url+"/admin/ui/events?source=shop"), chromedp.WaitVisible(chromedp.ID("events")))
	require.True(t, eval[bool](t, b.ctx, `document.querySelector('#events td[title^="customer.verylong"]') !== null`))
	require.True(t, eval[bool](t, b.ctx, fits), "the events table is wider than its box")
	require.True(t, eval[bool](t, b.ctx, `(() => { const box = document.querySelector('#events').closest('.scroll').getBoundingClientRect();
		return [...document.querySelectorAll('#events thead th')].every(th => th.getBoundingClientRect().right <= box.right + 1) })()`))
	screenshot(t, b.ctx, b.shots, "events-long")
	step(t, b.ctx, "dead set", chromedp.Navigate(b.h.url+"/admin/ui/dead"), chromedp.WaitVisible(chromedp.ID("dead")))
	require.True(t, eval[bool](t, b.ctx, fits), "the dead set is wider than its box")

	long := strings.Repeat("Ab0", 160) // an error of 480 bytes without a break (a token, base64)
	b.h.flaky.status.Store(http.StatusInternalServerError)
	b.h.flaky.body.Store(&long)
	defer b.h.flaky.body.Store(nil)
	b.h.send(t, "shop", "evt_long_error", "charge.failed")
	b.h.waitState(t, "shop", "evt_long_error", "dead")
	step(t, b.ctx, "its event", chromedp.Navigate(b.h.url+"/admin/ui/events/shop/evt_long_error"), chromedp.WaitVisible(chromedp.CSS("table.attempts")))
	require.Contains(t, text(t, b.ctx, "table.attempts td.err"), "Ab0Ab0")
	require.True(t, eval[bool](t, b.ctx, fits), "the attempts are wider than their box")
}

// dotIDsOpen: the link of an event whose id is ".." opens it (the browser
// would resolve /events/shop/.. to /events/).
func (b *browse) dotIDsOpen(t *testing.T) {
	step(t, b.ctx, "events", chromedp.Navigate(b.h.url+"/admin/ui/events?source=shop&state=dead"), chromedp.WaitVisible(chromedp.ID("events")))
	step(t, b.ctx, "open ..", chromedp.Click(chromedp.CSS(`#events a[data-row-link][title=".."]`)), chromedp.WaitVisible(chromedp.ID("event-id")))
	require.Equal(t, "..", text(t, b.ctx, "#event-id"))
	require.Equal(t, "dead", text(t, b.ctx, "#state"))
	step(t, b.ctx, "from the dead set too", chromedp.Navigate(b.h.url+"/admin/ui/dead"), chromedp.WaitVisible(chromedp.ID("dead")),
		chromedp.Click(chromedp.CSS(`#dead a[data-row-link][title=".."]`)), chromedp.WaitVisible(chromedp.ID("event-id")))
	require.Equal(t, "..", text(t, b.ctx, "#event-id"))
}

// bulkDeleteActsOnWhatTheDryRunCounted: Enter on "Delete all…" shows the
// dry run, a second Enter does nothing (no button is focused), and the
// confirmation deletes the items counted, not those that died meanwhile.
func (b *browse) bulkDeleteActsOnWhatTheDryRunCounted(t *testing.T) {
	h := b.h
	h.flaky.status.Store(http.StatusInternalServerError)
	for i := range 3 {
		h.send(t, "shop", fmt.Sprintf("evt_refund_a%d", i), "charge.refunded")
	}
	for i := range 3 {
		h.waitState(t, "shop", fmt.Sprintf("evt_refund_a%d", i), "dead")
	}
	rows := `document.querySelectorAll('#dead tbody input[name=id]').length`
	step(t, b.ctx, "the filter", chromedp.Navigate(b.h.url+"/admin/ui/dead?event_type=charge.refunded"), chromedp.WaitVisible(chromedp.ID("dead")))
	require.Equal(t, 3, eval[int](t, b.ctx, rows))
	step(t, b.ctx, "Enter on Delete all…", chromedp.Focus(chromedp.CSS(`button[value=delete-filter]`)), chromedp.KeyEvent("\r"),
		chromedp.WaitVisible(chromedp.ID("question")))
	require.Equal(t, "3 items match; delete them?", text(t, b.ctx, "#question"))
	require.Contains(t, text(t, b.ctx, "#scope"), "charge.refunded", "the filter, restated")
	screenshot(t, b.ctx, b.shots, "confirm-delete")
	step(t, b.ctx, "Enter again", chromedp.KeyEvent("\r"), chromedp.Sleep(time.Second))
	require.True(t, eval[bool](t, b.ctx, `location.pathname === '/admin/ui/dead/confirm' && document.querySelector('#question') !== null`), "a second Enter acted")
	_, out := h.api(t, http.MethodGet, "/admin/dead?event_type=charge.refunded")
	require.Len(t, out["items"], 3, "nothing deleted")

	for i := range 2 { // they die after the dry run
		h.send(t, "shop", fmt.Sprintf("evt_refund_b%d", i), "charge.refunded")
		h.waitState(t, "shop", fmt.Sprintf("evt_refund_b%d", i), "dead")
	}
	step(t, b.ctx, "confirm", chromedp.Click(chromedp.ID("confirm")), chromedp.WaitVisible(chromedp.ID("done")))
	require.Equal(t, "Deleted 3 of 3 items.", text(t, b.ctx, "#done"))
	require.Equal(t, 2, eval[int](t, b.ctx, rows), "the two that died after the dry run are left")
}

// back goes back in the tab's history (as the browser's Back button does,
// from the back/forward cache when the browser has the page there).
func back(t *testing.T, ctx context.Context) {
	t.Helper()
	require.True(t, eval[bool](t, ctx, `(history.back(), true)`))
}

// backAfterActionsShowsTheStateNow: Back after a bulk action shows the
// confirmation page again, counted afresh (not "Confirm Form
// Resubmission"); Back after a retry shows the event as it is now, not the
// dead event with its Retry button.
func (b *browse) backAfterActionsShowsTheStateNow(t *testing.T) {
	// Where the last step left the tab: the dead set after a bulk delete.
	back(t, b.ctx)
	waitFor(t, b.ctx, `location.pathname === '/admin/ui/dead/confirm' && document.querySelector('#question') !== null`, 15*time.Second)
	// (Read by script: chromedp's DOM queries do not follow a page restored from the back/forward cache.)
	require.Equal(t, "No item matches; nothing to delete.", eval[string](t, b.ctx, `document.querySelector('#question').textContent.trim()`),
		"counted afresh, not the page as it was")

	h := b.h
	h.flaky.status.Store(http.StatusInternalServerError)
	h.send(t, "shop", "evt_back", "charge.failed")
	h.waitState(t, "shop", "evt_back", "dead")
	step(t, b.ctx, "the dead event", chromedp.Navigate(h.url+"/admin/ui/events/shop/evt_back"), chromedp.WaitVisible(chromedp.CSS(`button[id^="retry-"]`)))
	require.True(t, eval[bool](t, b.ctx, `(window.stale = true)`))
	h.flaky.status.Store(http.StatusOK)
	step(t, b.ctx, "retry it", chromedp.Click(chromedp.CSS(`button[id^="retry-"]`)), chromedp.WaitVisible(chromedp.CSS(".note")))
	waitFor(t, b.ctx, `document.querySelector('#state').textContent === 'completed'`, 30*time.Second)
	back(t, b.ctx)
	waitFor(t, b.ctx, `location.pathname === '/admin/ui/events/shop/evt_back' && location.search === '' && window.stale === undefined &&
		document.querySelector('#state') !== null && document.querySelector('#state').textContent === 'completed' &&
		document.querySelector('button[id^="retry-"]') === null`, 15*time.Second)
}

// enterOnADestinationDoesNotPauseIt: j then Enter on the destinations page
// opens the destination's dead items; the Pause button acts only when
// pressed itself.
func (b *browse) enterOnADestinationDoesNotPauseIt(t *testing.T) {
	step(t, b.ctx, "destinations", chromedp.Navigate(b.h.url+"/admin/ui/destinations"), chromedp.WaitVisible(chromedp.ID("dests")))
	step(t, b.ctx, "j", chromedp.KeyEvent("j"))
	require.True(t, eval[bool](t, b.ctx, `document.activeElement.tagName === 'A' && document.activeElement.hasAttribute('data-row-link')`))
	step(t, b.ctx, "Enter", chromedp.KeyEvent("\r"), chromedp.WaitVisible(chromedp.ID("dead")))
	require.True(t, eval[bool](t, b.ctx, `location.pathname === '/admin/ui/dead' && location.search === '?source=shop&destination=default'`))
	require.Equal(t, "active", b.h.destinationState(t, "shop", "default"))
	require.Equal(t, "active", b.h.destinationState(t, "billing", "default"))
}

// timeFiltersInTheBrowsersZone: a time typed into a filter means the
// browser's zone (here +05:30), as the pages show times; the placeholder
// names the zone.
func (b *browse) timeFiltersInTheBrowsersZone(t *testing.T) {
	step(t, b.ctx, "events", chromedp.Navigate(b.h.url+"/admin/ui/events"), chromedp.WaitVisible(chromedp.ID("events")))
	require.Regexp(t, `\(Asia/(Kolkata|Calcutta)\)$`, eval[string](t, b.ctx, `document.querySelector('input[name=since]').placeholder`)) // ICU's name
	// Enter submits as an operator does (chromedp.Submit would skip the form's submit event).
	step(t, b.ctx, "since a local time", chromedp.SendKeys(chromedp.CSS(`input[name=since]`), "2026-01-02 15:04\r"),
		chromedp.WaitVisible(chromedp.CSS(`input[name=since][value="2026-01-02T15:04:00+05:30"]`)))
	require.Equal(t, "2026-01-02T15:04:00+05:30", eval[string](t, b.ctx, `new URLSearchParams(location.search).get('since')`))
	// As the pages show a time, with its zone's name.
	shown := eval[string](t, b.ctx, `document.querySelector('#events time').textContent`)
	step(t, b.ctx, "since a time as shown", chromedp.Navigate(b.h.url+"/admin/ui/events"), chromedp.WaitVisible(chromedp.ID("events")),
		chromedp.SendKeys(chromedp.CSS(`input[name=since]`), shown+"\r"),
		chromedp.WaitVisible(chromedp.CSS(`input[name=since][value$="+05:30"]`)))
	require.GreaterOrEqual(t, eval[int](t, b.ctx, `document.querySelectorAll('#events tbody a[data-row-link]').length`), 1,
		"the event shown at that time is found")
}

// waitingEventPageBacksOffAndKeepsASelection: the page of an event waiting
// behind a paused destination refreshes less and less often, without its
// payload, and never while text in it is selected.
func (b *browse) waitingEventPageBacksOffAndKeepsASelection(t *testing.T) {
	h := b.h
	status, out := h.api(t, http.MethodPost, "/admin/destinations/shop/default/pause")
	require.Equal(t, http.StatusAccepted, status, out)
	defer h.api(t, http.MethodPost, "/admin/destinations/shop/default/resume")
	h.send(t, "shop", "evt_parked", "charge.succeeded")
	h.waitState(t, "shop", "evt_parked", "queued")
	step(t, b.ctx, "its page", chromedp.Navigate(h.url+"/admin/ui/events/shop/evt_parked"), chromedp.WaitVisible(chromedp.ID("event-state")))
	require.Equal(t, "1", text(t, b.ctx, "#deliveries"))

	// Text selected in the part that refreshes (to copy it) stays selected,
	// even when the event changes (another delivery).
	require.Equal(t, "evt_parked", eval[string](t, b.ctx, `(() => { const r = document.createRange(); r.selectNodeContents(document.querySelector('#event-id'));
		const s = getSelection(); s.removeAllRanges(); s.addRange(r); document.querySelector('#event-state').dataset.marker = 'old'; return s.toString() })()`))
	h.send(t, "shop", "evt_parked", "charge.succeeded")
	step(t, b.ctx, "wait", chromedp.Sleep(5*time.Second))
	require.Equal(t, "evt_parked", eval[string](t, b.ctx, `getSelection().toString()`), "the selection is kept")
	require.Equal(t, "old", eval[string](t, b.ctx, `document.querySelector('#event-state').dataset.marker || ''`), "not swapped while selected")
	require.True(t, eval[bool](t, b.ctx, `(getSelection().removeAllRanges(), true)`))
	waitFor(t, b.ctx, `document.querySelector('#deliveries').textContent === '2'`, 10*time.Second)

	// Then nothing changes: it refreshes after 1, 2, 4 s …, not every second.
	require.True(t, eval[bool](t, b.ctx, `(performance.clearResourceTimings(), true)`))
	step(t, b.ctx, "wait", chromedp.Sleep(8*time.Second))
	fetches := eval[int](t, b.ctx, `performance.getEntriesByType('resource').filter(e => e.initiatorType === 'fetch').length`)
	require.GreaterOrEqual(t, fetches, 2, "it refreshes")
	require.LessOrEqual(t, fetches, 4, "every 1, 2, 4 s while nothing changes, not every second")
	require.Less(t, eval[int](t, b.ctx, `Math.max(...performance.getEntriesByType('resource').filter(e => e.initiatorType === 'fetch').map(e => e.decodedBodySize))`),
		eval[int](t, b.ctx, `document.documentElement.outerHTML.length`), "a refresh leaves the payload out")
}

// TestBrowserDatabaseOutage: while the database is away, a page that
// refreshes itself says so (an alert with what the server answered, the
// stale part dimmed) instead of showing its old numbers as live, and the
// notice goes once a refresh succeeds again.
func TestBrowserDatabaseOutage(t *testing.T) {
	t.Parallel()
	ctx, h := newChrome(t), startHooklineWith(t, options{outage: true})
	step(t, ctx, "log in", chromedp.Navigate(h.url+"/admin/ui/destinations"), chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), token), chromedp.Submit(chromedp.ID("token")), chromedp.WaitVisible(chromedp.ID("dests")))
	require.Equal(t, "", text(t, ctx, "#refresh-status"))

	h.db.setDown(true)
	waitFor(t, ctx, `document.querySelector('#refresh-status p') !== null`, 20*time.Second)
	msg := text(t, ctx, "#refresh-status")
	require.Contains(t, msg, "Not refreshed: the server answered 503: The database is unavailable; try again.")
	require.Contains(t, msg, "trying again every 5 s")
	require.Equal(t, "alert", eval[string](t, ctx, `document.querySelector('#refresh-status').getAttribute('role')`))
	require.True(t, eval[bool](t, ctx, `document.querySelector('#destinations').classList.contains('stale')`))
	require.True(t, eval[bool](t, ctx, `getComputedStyle(document.querySelector('#refresh-status p')).display !== 'none'`))
	screenshot(t, ctx, t.TempDir(), "outage")

	h.db.setDown(false)
	waitFor(t, ctx, `document.querySelector('#refresh-status').textContent === '' && !document.querySelector('#destinations').classList.contains('stale')`, 30*time.Second)
}
