package console_test

import (
	"encoding/base64"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Without a session the overview is the login form, every other page sends
// the browser there (to come back), and a POST is refused; a wrong token
// stays on the login form; the right one gets an HttpOnly, SameSite=Strict
// cookie for /admin/ui/ only.
func TestConsoleLogin(t *testing.T) {
	t.Parallel()
	h := startHookline(t)
	b := newBrowser(t, h.url)

	a := b.get("/admin/ui/")
	require.Equal(t, http.StatusOK, a.status)
	require.Contains(t, a.body, `<form method="post" action="/admin/ui/login">`)
	require.NotContains(t, a.body, `href="/admin/ui/events"`, "no menu before login")
	for _, p := range []string{"/admin/ui/events?state=dead", "/admin/ui/events/shop/x", "/admin/ui/dead", "/admin/ui/destinations"} {
		a = b.get(p)
		require.Equal(t, http.StatusSeeOther, a.status, p)
		require.Equal(t, "/admin/ui/?next="+url.QueryEscape(p), a.header.Get("Location"), p)
	}
	a = b.get("/admin/ui/?next=" + url.QueryEscape("/admin/ui/dead?reason=failed"))
	require.Contains(t, a.body, `name="next" value="/admin/ui/dead?reason=failed"`)
	a = b.post("/admin/ui/destinations/shop/default/pause", url.Values{"csrf": {"x"}})
	require.Equal(t, http.StatusForbidden, a.status)
	require.Equal(t, "active", h.destinationState(t, "shop", "default"))

	a = b.post("/admin/ui/login", url.Values{"token": {"not-the-token"}, "next": {"/admin/ui/dead"}})
	require.Equal(t, http.StatusUnauthorized, a.status)
	require.Contains(t, a.body, "That is not the admin token.")
	require.Contains(t, a.body, `name="next" value="/admin/ui/dead"`, "the form keeps where to go")
	require.Empty(t, a.header.Values("Set-Cookie"))
	require.Equal(t, http.StatusOK, b.get("/admin/ui/").status)
	require.Contains(t, b.get("/admin/ui/").body, `action="/admin/ui/login"`, "still the login form")

	a = b.post("/admin/ui/login", url.Values{"token": {token}, "next": {"/admin/ui/dead?reason=failed"}})
	require.Equal(t, http.StatusSeeOther, a.status)
	require.Equal(t, "/admin/ui/dead?reason=failed", a.header.Get("Location"))
	ck := a.header.Get("Set-Cookie")
	for _, attr := range []string{"hookline_console=", "Path=/admin/ui/", "HttpOnly", "SameSite=Strict", "Max-Age="} {
		require.Contains(t, ck, attr)
	}
	require.NotContains(t, ck, "Secure", "plain HTTP")
	require.NotContains(t, ck, token, "the cookie is not the token")
	a = b.get("/admin/ui/")
	require.Equal(t, http.StatusOK, a.status)
	require.Contains(t, a.body, `href="/admin/ui/events"`)

	// Where a login may send the browser: only console paths.
	for next, want := range map[string]string{"//evil.example/admin/ui/": "/admin/ui/", "https://evil.example/admin/ui/": "/admin/ui/",
		"/elsewhere": "/admin/ui/", "/admin/ui/events?type=a": "/admin/ui/events?type=a", "/admin/ui/\\evil": "/admin/ui/"} {
		a = newBrowser(t, h.url).post("/admin/ui/login", url.Values{"token": {token}, "next": {next}})
		require.Equal(t, want, a.header.Get("Location"), next)
	}
	// Over TLS (here: a proxy that says so) the cookie is Secure.
	a = newBrowser(t, h.url).post("/admin/ui/login", url.Values{"token": {token}}, "X-Forwarded-Proto", "https")
	require.Contains(t, a.header.Get("Set-Cookie"), "Secure")

	// A forged or altered cookie is no session.
	for _, v := range []string{"v1.9999999999.AAAA.BBBB", strings.Replace(b.login().Value, "v1.", "v1.1", 1), token} {
		fresh := newBrowser(t, h.url)
		u, _ := url.Parse(h.url + "/admin/ui/")
		fresh.c.Jar.SetCookies(u, []*http.Cookie{{Name: "hookline_console", Value: v, Path: "/admin/ui/"}})
		require.Contains(t, fresh.get("/admin/ui/").body, `action="/admin/ui/login"`, v)
	}

	// Logging out clears the cookie.
	a = b.post("/admin/ui/logout", url.Values{"csrf": {b.csrf()}})
	require.Equal(t, http.StatusSeeOther, a.status)
	require.Contains(t, a.header.Get("Set-Cookie"), "Max-Age=0")
	require.Contains(t, b.get("/admin/ui/").body, `action="/admin/ui/login"`)
}

// The session cookie opens the console only: every JSON route wants the
// bearer token, so a cookie alone never reads or changes anything there.
func TestConsoleCookieDoesNotOpenTheJSONAPI(t *testing.T) {
	t.Parallel()
	h := startHookline(t)
	b := newBrowser(t, h.url)
	ck := b.login()
	for _, r := range []struct{ method, path string }{
		{http.MethodGet, "/admin/dead"}, {http.MethodGet, "/admin/events"}, {http.MethodGet, "/admin/events/shop/x"},
		{http.MethodGet, "/admin/overview"}, {http.MethodGet, "/admin/destinations"},
		{http.MethodPost, "/admin/destinations/shop/default/pause"}, {http.MethodPost, "/admin/dead/retry"},
		{http.MethodPost, "/admin/dead/1/retry"}, {http.MethodDelete, "/admin/dead/1"}, {http.MethodGet, "/admin/river/"},
	} {
		req, err := http.NewRequest(r.method, h.url+r.path, nil)
		require.NoError(t, err)
		req.AddCookie(&http.Cookie{Name: ck.Name, Value: ck.Value})
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "%s %s with the console's cookie", r.method, r.path)
	}
	require.Equal(t, "active", h.destinationState(t, "shop", "default"))
}

// Every POST needs its session's CSRF token and the console's own origin:
// without the token, with a wrong or another session's token, or from
// another site (Sec-Fetch-Site or Origin), it is refused and nothing
// changes.
func TestConsoleCSRF(t *testing.T) {
	t.Parallel()
	h := startHookline(t)
	b := newBrowser(t, h.url)
	b.login()
	csrf := b.csrf()
	other := newBrowser(t, h.url)
	other.login()
	otherCSRF := other.csrf()
	require.NotEqual(t, csrf, otherCSRF, "each session has its own token")

	pause := "/admin/ui/destinations/shop/default/pause"
	for name, c := range map[string]struct {
		form   url.Values
		header []string
	}{
		"no token":              {url.Values{}, nil},
		"empty token":           {url.Values{"csrf": {""}}, nil},
		"wrong token":           {url.Values{"csrf": {csrf[:len(csrf)-2] + "xx"}}, nil},
		"another session's":     {url.Values{"csrf": {otherCSRF}}, nil},
		"cross-site fetch":      {url.Values{"csrf": {csrf}}, []string{"Sec-Fetch-Site", "cross-site"}},
		"same-site other port":  {url.Values{"csrf": {csrf}}, []string{"Sec-Fetch-Site", "same-site"}},
		"foreign Origin":        {url.Values{"csrf": {csrf}}, []string{"Origin", "https://evil.example"}},
		"foreign Origin, other": {url.Values{"csrf": {csrf}}, []string{"Origin", "http://127.0.0.1:1"}},
	} {
		a := b.post(pause, c.form, c.header...)
		require.Equal(t, http.StatusForbidden, a.status, name)
		require.Contains(t, a.body, "Refused", name)
		require.Equal(t, "active", h.destinationState(t, "shop", "default"), name)
	}
	// The login form is refused from another site too.
	a := newBrowser(t, h.url).post("/admin/ui/login", url.Values{"token": {token}}, "Sec-Fetch-Site", "cross-site")
	require.Equal(t, http.StatusForbidden, a.status)
	require.Empty(t, a.header.Values("Set-Cookie"))

	// The right token from the console's own origin acts.
	a = b.post(pause, url.Values{"csrf": {csrf}}, "Sec-Fetch-Site", "same-origin", "Origin", h.url)
	require.Equal(t, http.StatusSeeOther, a.status, a.body)
	require.Equal(t, "/admin/ui/destinations", a.header.Get("Location"))
	require.Equal(t, "paused", h.destinationState(t, "shop", "default"))
}

// Every answer carries a Content-Security-Policy without inline script, and
// no page has an inline script, event handler attribute or style.
func TestConsoleSecurityHeadersAndNoInlineScript(t *testing.T) {
	t.Parallel()
	h := startHookline(t)
	h.send(t, "billing", "evt_csp", "charge.succeeded")
	h.waitState(t, "billing", "evt_csp", "completed")
	b := newBrowser(t, h.url)
	inline := regexp.MustCompile(`(?i)<script(\s[^>]*)?>\s*[^<\s]|<script>|\son[a-z]+=|\sstyle=|javascript:`)
	check := func(path string, a answer) {
		csp := a.header.Get("Content-Security-Policy")
		require.Contains(t, csp, "script-src 'self'", path)
		require.NotContains(t, csp, "unsafe-inline", path)
		require.Contains(t, csp, "frame-ancestors 'none'", path)
		require.Equal(t, "nosniff", a.header.Get("X-Content-Type-Options"), path)
		require.Nil(t, inline.FindStringIndex(a.body), "%s has inline script or style: %v", path, inline.FindString(a.body))
	}
	check("login", b.get("/admin/ui/"))
	b.login()
	for _, p := range []string{"/admin/ui/", "/admin/ui/events", "/admin/ui/events/billing/evt_csp", "/admin/ui/dead", "/admin/ui/destinations", "/admin/ui/nope"} {
		a := b.get(p)
		check(p, a)
		if p != "/admin/ui/nope" {
			require.Equal(t, http.StatusOK, a.status, p)
			require.Equal(t, "no-store", a.header.Get("Cache-Control"), p)
		} else {
			require.Equal(t, http.StatusNotFound, a.status)
			require.Contains(t, a.body, "Not Found")
		}
	}
	a := b.get("/admin/ui/static/console.js")
	require.Equal(t, http.StatusOK, a.status)
	require.Equal(t, "text/javascript; charset=utf-8", a.header.Get("Content-Type"))
	a = b.get("/admin/ui/static/console.css")
	require.Equal(t, "text/css; charset=utf-8", a.header.Get("Content-Type"))
	require.Equal(t, http.StatusNotFound, b.get("/admin/ui/static/nope.js").status)
	a = b.get("/admin/ui")
	require.Equal(t, http.StatusMovedPermanently, a.status)
	require.Equal(t, "/admin/ui/", a.header.Get("Location"))
}

// The events page searches by source, state, type, id prefix and time,
// newest first, fifty at a time; the event page shows the payload (pretty
// and raw), the stored headers and every attempt per destination.
func TestConsoleEventsAndEventPages(t *testing.T) {
	t.Parallel()
	h := startHookline(t)
	require.Equal(t, "accepted", h.send(t, "shop", "evt_dead_7f3a", "charge.failed"))
	require.Equal(t, "accepted", h.send(t, "billing", "evt_ok_1", "invoice.paid"))
	require.Equal(t, "duplicate", h.send(t, "billing", "evt_ok_1", "invoice.paid"))
	h.waitState(t, "shop", "evt_dead_7f3a", "dead")
	h.waitState(t, "billing", "evt_ok_1", "completed")
	b := newBrowser(t, h.url)
	b.login()

	ids := func(body string) []string {
		var out []string
		for _, m := range regexp.MustCompile(`data-row-link href="/admin/ui/events/[^/]+/([^"]+)"`).FindAllStringSubmatch(body, -1) {
			out = append(out, m[1])
		}
		return out
	}
	a := b.get("/admin/ui/events")
	require.Equal(t, http.StatusOK, a.status)
	require.Equal(t, []string{"evt_ok_1", "evt_dead_7f3a"}, ids(a.body), "newest first")
	require.Contains(t, a.body, `<span class="state st-dead">dead</span>`)
	for q, want := range map[string][]string{
		"state=dead":                {"evt_dead_7f3a"},
		"state=completed":           {"evt_ok_1"},
		"state=queued":              nil,
		"source=billing":            {"evt_ok_1"},
		"type=charge.failed":        {"evt_dead_7f3a"},
		"id_prefix=evt_dead_7":      {"evt_dead_7f3a"},
		"id_prefix=evt_&state=dead": {"evt_dead_7f3a"},
		"id_prefix=evt_%25":         nil, // a literal %, not a wildcard
		"since=1h":                  {"evt_ok_1", "evt_dead_7f3a"},
		"until=2020-01-01":          nil,
		"since=" + url.QueryEscape(time.Now().UTC().Add(time.Hour).Format("2006-01-02 15:04")): nil,
	} {
		a := b.get("/admin/ui/events?" + q)
		require.Equal(t, http.StatusOK, a.status, q)
		require.Equal(t, want, ids(a.body), q)
	}
	for _, q := range []string{"state=nope", "since=yesterday", "cursor=garbage", "since=2h&until=3h"} {
		a := b.get("/admin/ui/events?" + q)
		require.Equal(t, http.StatusBadRequest, a.status, q)
		require.Contains(t, a.body, `class="error"`, q)
	}

	a = b.get("/admin/ui/events/shop/evt_dead_7f3a")
	require.Equal(t, http.StatusOK, a.status)
	body := html.UnescapeString(a.body)
	require.Contains(t, body, `<span class="state st-dead" id="state">dead</span>`)
	require.Contains(t, body, "\n  \"data\": {\n    \"object\": {\n      \"id\": \"pi_evt_dead_7f3a\",\n      \"amount\": 1200,", "pretty-printed")
	require.Contains(t, body, `{"id":"evt_dead_7f3a","object":"event","type":"charge.failed"`, "raw")
	require.Regexp(t, `<th scope="row">Stripe-Signature</th><td>t=\d+,v1=`, body, "stored headers")
	require.Regexp(t, `<td class="num">1</td><td><time datetime="[^"]+Z" title="[^"]+ UTC">[^<]+ UTC</time></td><td class="num">500</td><td class="num">\d+ ms</td><td class="err">destination answered 500`, body, "the attempt")
	require.Regexp(t, `action="/admin/ui/dead/\d+/retry"`, body, "a retry button for the dead destination")
	require.NotContains(t, a.body, `data-refresh`, "a dead event is final: nothing to refresh")
	require.Regexp(t, `<dd class="id" id="trace-id">[0-9a-f]{32}</dd>`, body, "the trace the event was received under")

	a = b.get("/admin/ui/events/billing/evt_ok_1")
	require.Contains(t, a.body, `<dd id="deliveries">2</dd>`, "the duplicate delivery counts")
	require.Contains(t, a.body, `<td class="num">200</td>`)
	require.NotContains(t, a.body, `data-refresh`, "completed: nothing to refresh")
	require.Equal(t, http.StatusNotFound, b.get("/admin/ui/events/shop/evt_nope").status)
}

// Paging: fifty per page, newest first, each event once across pages.
func TestConsoleEventsPaging(t *testing.T) {
	t.Parallel()
	h := startHookline(t)
	for i := range 55 {
		h.send(t, "billing", fmt.Sprintf("evt_page_%02d", i), "invoice.paid")
	}
	b := newBrowser(t, h.url)
	b.login()
	a := b.get("/admin/ui/events?source=billing")
	rows := regexp.MustCompile(`data-row-link href="/admin/ui/events/billing/(evt_page_\d+)"`)
	first := rows.FindAllStringSubmatch(a.body, -1)
	require.Len(t, first, 50)
	require.Equal(t, "evt_page_54", first[0][1])
	next := regexp.MustCompile(`href="([^"]+)" data-page="next"`).FindStringSubmatch(a.body)
	require.NotNil(t, next)
	a = b.get(html.UnescapeString(next[1]))
	second := rows.FindAllStringSubmatch(a.body, -1)
	require.Len(t, second, 5)
	require.Equal(t, "evt_page_00", second[4][1])
	require.NotContains(t, a.body, `data-page="next"`)
}

// The dead set page lists and filters; a bulk action is first a dry run
// that says how many items match and asks; only the confirmation acts.
func TestConsoleDeadSetBulk(t *testing.T) {
	t.Parallel()
	h := startHookline(t)
	for i := range 3 {
		h.send(t, "shop", fmt.Sprintf("evt_bulk_%d", i), "invoice.payment_failed")
	}
	h.send(t, "shop", "evt_other", "charge.failed")
	for i := range 3 {
		h.waitState(t, "shop", fmt.Sprintf("evt_bulk_%d", i), "dead")
	}
	h.waitState(t, "shop", "evt_other", "dead")
	b := newBrowser(t, h.url)
	b.login()
	csrf := b.csrf()

	a := b.get("/admin/ui/dead?event_type=invoice.payment_failed")
	require.Equal(t, http.StatusOK, a.status)
	require.Equal(t, 3, strings.Count(a.body, `name="id" value=`))
	require.NotContains(t, a.body, "evt_other")
	require.Contains(t, a.body, "destination answered 500")

	form := url.Values{"csrf": {csrf}, "op": {"retry-filter"}, "event_type": {"invoice.payment_failed"}}
	a = b.dryRun(form)
	require.Contains(t, a.body, "<strong>3 items match; retry them?</strong>")
	require.Equal(t, 4, deadItems(t, h), "the dry run changed nothing")

	h.flaky.status.Store(http.StatusOK)
	a = b.post("/admin/ui/dead/bulk", confirmForm(t, a.body))
	require.Equal(t, http.StatusSeeOther, a.status, a.body)
	require.Equal(t, "/admin/ui/dead?done=retried&event_type=invoice.payment_failed&n=3&of=3&skipped=0", a.header.Get("Location"))
	require.Contains(t, b.get(a.header.Get("Location")).body, "Retried 3 of 3 items.")
	for i := range 3 {
		h.waitState(t, "shop", fmt.Sprintf("evt_bulk_%d", i), "completed")
	}

	// A selection: the dry run counts the selected items still there.
	a = b.get("/admin/ui/dead")
	id := regexp.MustCompile(`name="id" value="(\d+)"`).FindStringSubmatch(a.body)[1]
	a = b.dryRun(url.Values{"csrf": {csrf}, "op": {"delete-selected"}, "id": {id, "999999"}})
	require.Contains(t, a.body, "<strong>1 item matches; delete it?</strong>")
	require.Equal(t, 1, deadItems(t, h))
	require.Equal(t, []string{id, "999999"}, confirmForm(t, a.body)["id"])
	a = b.post("/admin/ui/dead/bulk", confirmForm(t, a.body))
	require.Equal(t, http.StatusSeeOther, a.status, a.body)
	require.Contains(t, b.get(a.header.Get("Location")).body, "Deleted 1 of 2 items.")
	require.Equal(t, 0, deadItems(t, h))

	// An id selected twice (a hand-made form or URL) is one item: the dry
	// run counts it once, and the action says so.
	h.flaky.status.Store(http.StatusInternalServerError)
	h.send(t, "shop", "evt_twice", "charge.failed")
	h.waitState(t, "shop", "evt_twice", "dead")
	id = regexp.MustCompile(`name="id" value="(\d+)"`).FindStringSubmatch(b.get("/admin/ui/dead").body)[1]
	a = b.dryRun(url.Values{"csrf": {csrf}, "op": {"delete-selected"}, "id": {id, id, id}})
	require.Contains(t, a.body, "<strong>1 item matches; delete it?</strong>")
	require.Contains(t, a.body, "The 1 selected items (1 still in the dead set).")
	a = b.post("/admin/ui/dead/bulk", url.Values{"csrf": {csrf}, "action": {"delete"}, "scope": {"selected"}, "confirm": {"yes"},
		"n": {"1"}, "id": {id, id}})
	require.Equal(t, http.StatusSeeOther, a.status, a.body)
	require.Contains(t, b.get(a.header.Get("Location")).body, "Deleted 1 of 1 items.")
	require.Equal(t, 0, deadItems(t, h))

	for name, f := range map[string]url.Values{
		"nothing selected": {"csrf": {csrf}, "op": {"retry-selected"}},
		"unknown action":   {"csrf": {csrf}, "op": {"explode-filter"}},
		"bad reason":       {"csrf": {csrf}, "op": {"retry-filter"}, "reason": {"nope"}},
	} {
		require.Equal(t, http.StatusBadRequest, b.post("/admin/ui/dead/bulk", f).status, name)
	}
	a = b.dryRun(url.Values{"csrf": {csrf}, "op": {"retry-filter"}})
	require.Contains(t, a.body, "No item matches; nothing to retry.")
	require.NotContains(t, a.body, `name="confirm"`)
}

// dryRun posts a bulk action's first step, which answers with a redirect
// to its confirmation page (Post/Redirect/Get), and returns that page.
func (b *browser) dryRun(form url.Values) answer {
	b.t.Helper()
	a := b.post("/admin/ui/dead/bulk", form)
	require.Equal(b.t, http.StatusSeeOther, a.status, a.body)
	require.True(b.t, strings.HasPrefix(a.header.Get("Location"), "/admin/ui/dead/confirm?"), a.header.Get("Location"))
	a = b.get(a.header.Get("Location"))
	require.Equal(b.t, http.StatusOK, a.status, a.body)
	require.Equal(b.t, "no-store", a.header.Get("Cache-Control"))
	return a
}

var hiddenRE = regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`)

// confirmForm is what the confirmation page's form sends.
func confirmForm(t *testing.T, body string) url.Values {
	t.Helper()
	i := strings.Index(body, `<form method="post" action="/admin/ui/dead/bulk">`)
	require.GreaterOrEqual(t, i, 0, "no confirmation form")
	form := body[i : i+strings.Index(body[i:], "</form>")]
	v := url.Values{}
	for _, m := range hiddenRE.FindAllStringSubmatch(form, -1) {
		v.Add(m[1], html.UnescapeString(m[2]))
	}
	return v
}

func deadItems(t *testing.T, h *hookline) int {
	t.Helper()
	status, out := h.api(t, http.MethodGet, "/admin/dead")
	require.Equal(t, http.StatusOK, status)
	return len(out["items"].([]any))
}

// One dead item retried from its event page comes back to the event page,
// which then refreshes itself until the event completes.
func TestConsoleRetryOne(t *testing.T) {
	t.Parallel()
	h := startHookline(t)
	h.send(t, "shop", "evt_one", "charge.failed")
	ev := h.waitState(t, "shop", "evt_one", "dead")
	b := newBrowser(t, h.url)
	b.login()
	h.flaky.status.Store(http.StatusOK)
	a := b.post("/admin/ui/dead/"+ev["dead_item_id"].(string)+"/retry", url.Values{"csrf": {b.csrf()}, "back": {"/admin/ui/events/shop/evt_one"}})
	require.Equal(t, http.StatusSeeOther, a.status, a.body)
	require.Equal(t, "/admin/ui/events/shop/evt_one?done=retried-one", a.header.Get("Location"))
	h.waitState(t, "shop", "evt_one", "completed")
	a = b.get(a.header.Get("Location"))
	require.Contains(t, a.body, "Retry queued")
	require.Contains(t, a.body, `<span class="state st-completed" id="state">completed</span>`)

	a = b.post("/admin/ui/dead/"+ev["dead_item_id"].(string)+"/retry", url.Values{"csrf": {b.csrf()}})
	require.Equal(t, http.StatusNotFound, a.status, "retried already")
	require.Contains(t, a.body, "That dead item is gone")
	require.Equal(t, http.StatusNotFound, b.post("/admin/ui/dead/abc/delete", url.Values{"csrf": {b.csrf()}}).status)
}

// The destinations page shows state, backlog and circuit, and pauses and
// resumes.
func TestConsoleDestinations(t *testing.T) {
	t.Parallel()
	h := startHookline(t)
	b := newBrowser(t, h.url)
	b.login()
	a := b.get("/admin/ui/destinations")
	require.Regexp(t, `(?s)<tr id="dest-shop-default">\s*<td>shop</td>\s*<td><a [^>]*>default</a></td>\s*<td><span class="state st-active" data-state>active</span></td>`+
		`.*?<button [^>]*>Pause</button>.*?<td><span class="state st-closed">closed</span></td>`, a.body)
	require.Contains(t, a.body, `action="/admin/ui/destinations/shop/default/pause"`)
	// j/k and Enter go through the rows' links, which open a destination's
	// dead items; the Pause and Resume buttons act only when pressed.
	require.Contains(t, a.body, `<a data-row-link href="/admin/ui/dead?source=shop&amp;destination=default"`)
	require.NotRegexp(t, `<button[^>]*data-row-link`, a.body)
	require.Contains(t, a.body, `aria-label="Pause shop/default"`)

	a = b.post("/admin/ui/destinations/shop/default/pause", url.Values{"csrf": {b.csrf()}})
	require.Equal(t, http.StatusSeeOther, a.status)
	require.Equal(t, "paused", h.destinationState(t, "shop", "default"))
	h.send(t, "shop", "evt_waits", "charge.succeeded")
	a = b.get("/admin/ui/destinations")
	require.Contains(t, a.body, `<span class="state st-paused" data-state>paused</span>`)
	require.Contains(t, a.body, `action="/admin/ui/destinations/shop/default/resume"`)
	require.Regexp(t, `(?s)<tr id="dest-shop-default">.*?<td class="num">1</td>`, a.body, "one event waits")

	a = b.post("/admin/ui/destinations/shop/default/resume", url.Values{"csrf": {b.csrf()}})
	require.Equal(t, http.StatusSeeOther, a.status)
	require.Equal(t, "active", h.destinationState(t, "shop", "default"))
	a = b.post("/admin/ui/destinations/shop/nope/pause", url.Values{"csrf": {b.csrf()}})
	require.Equal(t, http.StatusNotFound, a.status)
}

// The overview draws each source's last hour (received, accepted,
// duplicate, failed) as SVG and shows the queue's lag.
func TestConsoleOverview(t *testing.T) {
	t.Parallel()
	h := startHookline(t)
	h.send(t, "billing", "evt_a", "invoice.paid")
	h.send(t, "billing", "evt_a", "invoice.paid")
	h.send(t, "billing", "evt_b", "invoice.paid")
	h.send(t, "shop", "evt_c", "charge.failed")
	h.waitState(t, "shop", "evt_c", "dead")
	b := newBrowser(t, h.url)
	b.login()
	var a answer
	require.Eventually(t, func() bool { // the overview is shared for a few seconds
		a = b.get("/admin/ui/")
		return strings.Contains(a.body, `<strong data-series="failed">1</strong>`)
	}, 15*time.Second, 250*time.Millisecond, a.body)
	require.Equal(t, http.StatusOK, a.status)
	require.Regexp(t, `(?s)<h2>billing</h2>.*?data-series="received">3<.*?data-series="accepted">2<.*?data-series="duplicate">1<.*?data-series="failed">0<`, a.body)
	require.Regexp(t, `(?s)<h2>shop</h2>.*?data-series="received">1<.*?data-series="failed">1<`, a.body)
	require.Equal(t, 8, strings.Count(a.body, "<polyline "), "four lines per source")
	require.Regexp(t, `points="0,\d+ 10,\d+ `, a.body)
	require.Contains(t, a.body, `<strong id="lag">`)
	require.Contains(t, a.body, `data-refresh="10"`)
}

// A bulk action over a filter acts on what its dry run counted, not on
// whatever matches when the operator confirms: the dry run turns relative
// times into instants and closes the window just after the newest item it
// counted; the confirmation carries the window and the count, so items
// that die meanwhile are left alone, and a confirmation that counted fewer
// than its window now holds changes nothing. The confirmation page
// restates the filter and does not focus its button (a second Enter must
// not act).
func TestConsoleBulkActsOnWhatTheDryRunCounted(t *testing.T) {
	t.Parallel()
	h := startHookline(t)
	for i := range 3 {
		h.send(t, "shop", fmt.Sprintf("evt_ref_a%d", i), "charge.refunded")
	}
	h.send(t, "shop", "evt_other", "charge.failed")
	for i := range 3 {
		h.waitState(t, "shop", fmt.Sprintf("evt_ref_a%d", i), "dead")
	}
	h.waitState(t, "shop", "evt_other", "dead")
	b := newBrowser(t, h.url)
	b.login()
	csrf := b.csrf()

	back := "/admin/ui/dead?event_type=charge.refunded&since=1h"
	a := b.post("/admin/ui/dead/bulk", url.Values{"csrf": {csrf}, "op": {"delete-filter"}, "event_type": {"charge.refunded"},
		"since": {"1h"}, "back": {back}})
	require.Equal(t, http.StatusSeeOther, a.status, a.body)
	loc, err := url.Parse(a.header.Get("Location"))
	require.NoError(t, err)
	require.Equal(t, "/admin/ui/dead/confirm", loc.Path)
	since, err := time.Parse(time.RFC3339Nano, loc.Query().Get("since"))
	require.NoError(t, err, "the dry run's since is an instant, not 1h")
	require.WithinDuration(t, time.Now().Add(-time.Hour), since, time.Minute)
	require.Equal(t, 4, deadItems(t, h), "the dry run changed nothing")

	a = b.dryRun(url.Values{"csrf": {csrf}, "op": {"delete-filter"}, "event_type": {"charge.refunded"}, "since": {"1h"}, "back": {back}})
	require.Contains(t, a.body, "<strong>3 items match; delete them?</strong>")
	for _, want := range []string{"<dt>Source</dt><dd>any</dd>", "<dt>Event type</dt><dd>charge.refunded</dd>", "<dt>Reason</dt><dd>any</dd>",
		`<dt>Dead since</dt><dd><time datetime="`, `<dt>Dead before</dt><dd id="until"><time datetime="`} {
		require.Contains(t, a.body, want, "the confirmation restates the filter")
	}
	require.NotContains(t, a.body, "autofocus", "nothing is focused: a second Enter does nothing")
	require.Contains(t, a.body, `<a href="`+html.EscapeString(back)+`" id="cancel">Cancel</a>`)
	confirm := confirmForm(t, a.body)
	require.Equal(t, "3", confirm.Get("n"))
	require.Equal(t, "charge.refunded", confirm.Get("event_type"))
	until, err := time.Parse(time.RFC3339Nano, confirm.Get("until"))
	require.NoError(t, err)
	require.WithinDuration(t, time.Now(), until, time.Minute)

	// Two more die after the dry run.
	for i := range 2 {
		h.send(t, "shop", fmt.Sprintf("evt_ref_b%d", i), "charge.refunded")
		h.waitState(t, "shop", fmt.Sprintf("evt_ref_b%d", i), "dead")
	}
	a = b.post("/admin/ui/dead/bulk", confirm)
	require.Equal(t, http.StatusSeeOther, a.status, a.body)
	require.Equal(t, "/admin/ui/dead?done=deleted&event_type=charge.refunded&n=3&of=3&since=1h&skipped=0", a.header.Get("Location"),
		"back to the dead set as it was filtered")
	a = b.get(a.header.Get("Location"))
	require.Contains(t, a.body, "Deleted 3 of 3 items.")
	require.Equal(t, 2, strings.Count(a.body, `name="id" value=`), "the two that died after the dry run are still there")
	require.Equal(t, 3, deadItems(t, h))

	// A confirmation that counted fewer than its window holds now (an item
	// committed late, or a hand-made form) changes nothing.
	a = b.dryRun(url.Values{"csrf": {csrf}, "op": {"retry-filter"}, "event_type": {"charge.refunded"}})
	require.Contains(t, a.body, "<strong>2 items match; retry them?</strong>")
	confirm = confirmForm(t, a.body)
	confirm.Set("n", "1")
	a = b.post("/admin/ui/dead/bulk", confirm)
	require.Equal(t, http.StatusConflict, a.status, a.body)
	require.Contains(t, a.body, "The dead set changed since the dry run: it counted 1, and 2 match now. Nothing was changed")
	// So does one without a window or a count (a form from before).
	a = b.post("/admin/ui/dead/bulk", url.Values{"csrf": {csrf}, "action": {"delete"}, "scope": {"filter"}, "confirm": {"yes"},
		"event_type": {"charge.refunded"}})
	require.Equal(t, http.StatusBadRequest, a.status, a.body)
	require.Equal(t, 3, deadItems(t, h))
}

// During a database outage every page answers a readable 503, with the
// notice area the script fills when a refresh fails (the browser test
// watches that); when the database is back, so are the pages.
func TestConsoleDatabaseOutage(t *testing.T) {
	t.Parallel()
	h := startHooklineWith(t, options{outage: true})
	b := newBrowser(t, h.url)
	b.login()
	a := b.get("/admin/ui/destinations")
	require.Equal(t, http.StatusOK, a.status, a.body)
	require.Contains(t, a.body, `<div id="refresh-status" role="alert"></div>`)
	require.Contains(t, a.body, `<section id="destinations" data-refresh="5">`)

	h.db.setDown(true)
	for _, p := range []string{"/admin/ui/destinations", "/admin/ui/events", "/admin/ui/dead", "/admin/ui/events/shop/evt_x"} {
		a := b.get(p)
		require.Equal(t, http.StatusServiceUnavailable, a.status, p)
		require.Contains(t, a.body, `<p class="error" role="alert">The database is unavailable; try again.</p>`, p)
		require.Equal(t, "no-store", a.header.Get("Cache-Control"), p)
	}
	h.db.setDown(false)
	require.Eventually(t, func() bool { return b.get("/admin/ui/destinations").status == http.StatusOK },
		30*time.Second, 100*time.Millisecond, "the pages answer again")
}

// Long ids and types are cut on the list pages, with the whole value in
// their title, and may wrap anywhere, so that the other columns stay in
// view; the filters fit a phone (the browser test measures both).
func TestConsoleLongValuesAndNarrowScreens(t *testing.T) {
	t.Parallel()
	h := startHookline(t)
	id, typ := "evt_"+strings.Repeat("L", 296), "customer."+strings.Repeat("verylongtypename", 15)
	h.send(t, "shop", id, typ)
	h.waitState(t, "shop", id, "dead")
	b := newBrowser(t, h.url)
	b.login()
	for _, p := range []string{"/admin/ui/events", "/admin/ui/dead"} {
		a := b.get(p)
		require.Contains(t, a.body, `<td class="wrap" title="`+typ+`">`+typ[:59]+`…</td>`, p)
		require.Regexp(t, `<td class="wrap"><a class="id" data-row-link href="[^"]+" title="`+id+`">evt_L+…</a></td>`, a.body, p)
	}
	css := b.get("/admin/ui/static/console.css").body
	for _, rule := range []string{".id { overflow-wrap: anywhere; }", "td.wrap { overflow-wrap: anywhere;", ".err { color: var(--danger); overflow-wrap: anywhere; }",
		".filters { grid-template-columns: repeat(2, minmax(0, 1fr));", ".filters input, .filters select { width: 100%; }"} {
		require.Contains(t, css, rule)
	}
}

// A dead item has a page of its own: why it died, its own payload and
// headers, and what its retry does. A rejected duplicate's payload is the
// duplicate's, not the event's, and the event page says that the item is a
// duplicate delivery and what "Retry" forwards.
func TestConsoleDuplicateDeadItem(t *testing.T) {
	t.Parallel()
	h := startHooklineWith(t, options{rejectDuplicates: true})
	h.flaky.status.Store(http.StatusOK)
	h.send(t, "shop", "evt_dup", "charge.succeeded")
	h.waitState(t, "shop", "evt_dup", "completed")
	_, _ = h.sendBody(t, "shop", eventBody("evt_dup", "charge.succeeded", `"replayed":true,`))
	var item map[string]any
	require.Eventually(t, func() bool {
		_, out := h.api(t, http.MethodGet, "/admin/dead")
		items, _ := out["items"].([]any)
		if len(items) == 1 {
			item = items[0].(map[string]any)
		}
		return item != nil
	}, 15*time.Second, 50*time.Millisecond)
	require.Equal(t, "duplicate", item["reason"])
	id := fmt.Sprint(item["id"])
	b := newBrowser(t, h.url)
	b.login()

	a := b.get("/admin/ui/events/shop/evt_dup")
	require.Equal(t, http.StatusOK, a.status)
	require.Contains(t, a.body, `<span class="state st-completed" id="state">completed</span>`)
	require.Contains(t, a.body, "<strong>Rejected duplicate delivery.</strong>")
	require.Contains(t, a.body, `<a href="/admin/ui/dead/`+id+`">dead item `+id+`</a>`)
	require.Contains(t, a.body, `<button type="submit" id="retry-`+id+`">Retry the duplicate</button>`)
	require.NotContains(t, a.body, "replayed", "the event's payload is the first delivery's")

	a = b.get("/admin/ui/dead")
	require.Contains(t, a.body, `<a href="/admin/ui/dead/`+id+`" class="dup"`)
	a = b.get("/admin/ui/dead/" + id)
	require.Equal(t, http.StatusOK, a.status, a.body)
	body := html.UnescapeString(a.body)
	require.Contains(t, body, `"replayed": true`, "the duplicate's own payload")
	require.Contains(t, body, "duplicate: a delivery of an event id already received, refused")
	require.Contains(t, body, "Retry forwards this delivery's payload to default under the event's id")
	require.Contains(t, a.body, `<a class="id" href="/admin/ui/events/shop/evt_dup" id="event-link">evt_dup</a>`)
	require.Regexp(t, `<th scope="row">Stripe-Signature</th>`, a.body, "its own headers")
	require.Equal(t, http.StatusNotFound, b.get("/admin/ui/dead/999999").status)
	require.Equal(t, http.StatusNotFound, b.get("/admin/ui/dead/abc").status)

	// A failed item's page says so.
	h.flaky.status.Store(http.StatusInternalServerError)
	h.send(t, "shop", "evt_fails", "charge.failed")
	ev := h.waitState(t, "shop", "evt_fails", "dead")
	a = b.get("/admin/ui/dead/" + ev["dead_item_id"].(string))
	require.Contains(t, a.body, "failed: its attempts at default ran out.")
	require.Contains(t, b.get("/admin/ui/events/shop/evt_fails").body, "<strong>Dead:</strong> its attempts ran out (1).")
}

// Events whose id is "." or ".." have links a browser does not resolve
// (the query form /admin/ui/event?…), and the path form with %2E still
// opens them.
func TestConsoleDotIDs(t *testing.T) {
	t.Parallel()
	h := startHookline(t)
	h.send(t, "shop", "..", "charge.failed")
	h.send(t, "billing", ".", "invoice.paid")
	ev := h.waitState(t, "shop", "..", "dead")
	h.waitState(t, "billing", ".", "completed")
	b := newBrowser(t, h.url)
	b.login()
	a := b.get("/admin/ui/events")
	require.Contains(t, a.body, `data-row-link href="/admin/ui/event?id=..&amp;source=shop"`)
	require.Contains(t, a.body, `data-row-link href="/admin/ui/event?id=.&amp;source=billing"`)
	require.Contains(t, b.get("/admin/ui/dead").body, `href="/admin/ui/event?id=..&amp;source=shop"`)
	for p, want := range map[string]string{
		"/admin/ui/event?id=..&source=shop":   `<span class="id" id="event-id">..</span> <span class="state st-dead" id="state">dead</span>`,
		"/admin/ui/events/shop/%2E%2E":        `<span class="id" id="event-id">..</span>`,
		"/admin/ui/event?id=.&source=billing": `<span class="id" id="event-id">.</span> <span class="state st-completed" id="state">completed</span>`,
	} {
		a := b.get(p)
		require.Equal(t, http.StatusOK, a.status, p)
		require.Contains(t, a.body, want, p)
	}
	require.Equal(t, http.StatusNotFound, b.get("/admin/ui/event?id=nope&source=shop").status)
	require.Equal(t, http.StatusNotFound, b.get("/admin/ui/event").status)

	// An action on its page comes back to it.
	h.flaky.status.Store(http.StatusOK)
	a = b.post("/admin/ui/dead/"+ev["dead_item_id"].(string)+"/retry", url.Values{"csrf": {b.csrf()}, "back": {"/admin/ui/event?id=..&source=shop"}})
	require.Equal(t, http.StatusSeeOther, a.status, a.body)
	require.Equal(t, "/admin/ui/event?done=retried-one&id=..&source=shop", a.header.Get("Location"))
	h.waitState(t, "shop", "..", "completed")
}

// An event's page refreshes its state only: the refresh (X-Console-Refresh)
// leaves the payload out, and while nothing changes the script waits
// longer between refreshes, up to data-refresh-max seconds.
func TestConsoleEventRefreshLeavesOutThePayload(t *testing.T) {
	t.Parallel()
	h := startHookline(t)
	b := newBrowser(t, h.url)
	b.login()
	require.Equal(t, http.StatusSeeOther, b.post("/admin/ui/destinations/shop/default/pause", url.Values{"csrf": {b.csrf()}}).status)
	h.send(t, "shop", "evt_waits", "charge.succeeded")
	h.waitState(t, "shop", "evt_waits", "queued")

	a := b.get("/admin/ui/events/shop/evt_waits")
	require.Contains(t, a.body, `<section id="event-state" data-refresh="1" data-refresh-max="30">`)
	require.Contains(t, a.body, `<section id="payload">`)
	require.Contains(t, a.body, "pi_evt_waits")
	a = b.do(http.MethodGet, "/admin/ui/events/shop/evt_waits", nil, "X-Console-Refresh", "event-state")
	require.Equal(t, http.StatusOK, a.status)
	require.Contains(t, a.body, `<section id="event-state" data-refresh="1" data-refresh-max="30">`)
	require.NotContains(t, a.body, `id="payload"`)
	require.NotContains(t, a.body, "pi_evt_waits", "no payload in a refresh")
}

// The overview's lag says what it counts: a paused destination's waiting
// jobs are not in it (they wait on purpose), and the page names that
// destination with its backlog and gives the longest wait at the others.
func TestConsoleOverviewLagWithAPausedDestination(t *testing.T) {
	t.Parallel()
	h := startHookline(t)
	b := newBrowser(t, h.url)
	b.login()
	require.Equal(t, http.StatusSeeOther, b.post("/admin/ui/destinations/shop/default/pause", url.Values{"csrf": {b.csrf()}}).status)
	h.send(t, "shop", "evt_parked", "charge.succeeded")
	h.waitState(t, "shop", "evt_parked", "queued")
	var a answer
	require.Eventually(t, func() bool { // the overview is shared for a few seconds
		a = b.get("/admin/ui/")
		return strings.Contains(a.body, `id="lag-paused"`)
	}, 15*time.Second, 250*time.Millisecond, a.body)
	require.Contains(t, a.body, "Lag: the oldest job available to run (not waiting for a retry's backoff, nor for a paused destination) has waited")
	require.Contains(t, a.body, "Paused destinations hold their jobs until someone resumes them (not counted in the lag): shop/default (1 waiting).")
	require.Contains(t, a.body, "No event waits at a destination that is not paused.")
}

// The small things: HEAD answers like GET (uptime probes), pages name a
// favicon the console serves, a CSRF token in the URL does not count, and
// invisible or bidirectional characters in a payload are pointed out (and
// escaped in the JSON view).
func TestConsoleSmallThings(t *testing.T) {
	t.Parallel()
	h := startHookline(t)
	_, _ = h.sendBody(t, "billing", eventBody("evt_bidi", "invoice.paid", `"note":"abc`+"\u202eLTR\u200b"+`",`))
	h.waitState(t, "billing", "evt_bidi", "completed")
	b := newBrowser(t, h.url)
	a := b.do(http.MethodHead, "/admin/ui/", nil)
	require.Equal(t, http.StatusOK, a.status, "the login page")
	require.Empty(t, a.body)
	a = b.do(http.MethodHead, "/admin/ui/events", nil)
	require.Equal(t, http.StatusSeeOther, a.status)
	b.login()
	for _, p := range []string{"/admin/ui/", "/admin/ui/events", "/admin/ui/dead", "/admin/ui/destinations", "/admin/ui/events/billing/evt_bidi", "/admin/ui/static/console.css"} {
		a := b.do(http.MethodHead, p, nil)
		require.Equal(t, http.StatusOK, a.status, p)
		require.Empty(t, a.body, p)
	}
	require.Equal(t, http.StatusNotFound, b.do(http.MethodHead, "/admin/ui/events/billing/nope", nil).status)

	a = b.get("/admin/ui/events")
	icon := regexp.MustCompile(`<link rel="icon" href="([^"]+)" type="image/svg\+xml">`).FindStringSubmatch(a.body)
	require.NotNil(t, icon)
	a = b.get(html.UnescapeString(icon[1]))
	require.Equal(t, http.StatusOK, a.status)
	require.Equal(t, "image/svg+xml", a.header.Get("Content-Type"))

	csrf := b.csrf()
	a = b.post("/admin/ui/destinations/shop/default/pause?csrf="+url.QueryEscape(csrf), url.Values{})
	require.Equal(t, http.StatusForbidden, a.status, "the token counts in the form's body only")
	require.Equal(t, "active", h.destinationState(t, "shop", "default"))

	a = b.get("/admin/ui/events/billing/evt_bidi")
	require.Contains(t, a.body, `<p class="warn" id="invisible">The payload has 2 invisible or bidirectional control characters`)
	require.Contains(t, a.body, `&#34;abc\u202eLTR\u200b&#34;`, "escaped in the JSON view")
	require.Contains(t, a.body, "abc\u202eLTR\u200b", "as they are in the raw view")
}

// An event page for a source or id no event can have (not valid UTF-8, a
// NUL byte) is a 404 like any unknown event, never a 500: the JSON lookup
// answers the same.
func TestConsoleEventPageNonTextIDs(t *testing.T) {
	t.Parallel()
	h := startHookline(t)
	b := newBrowser(t, h.url)
	b.login()
	for _, p := range []string{
		"/admin/ui/events/%FF/x",
		"/admin/ui/events/shop/%00",
		"/admin/ui/events/shop/..%FF",
		"/admin/ui/event?source=%FF&id=x",
		"/admin/ui/event?source=shop&id=%00",
	} {
		a := b.get(p)
		require.Equal(t, http.StatusNotFound, a.status, p)
		require.Contains(t, a.body, "No such event.", p)
	}
}

// A cursor whose time no cursor holds is refused (400), as a malformed one
// is: it would overflow on its way to Postgres and page from the newest row.
func TestConsoleCursorOutOfRange(t *testing.T) {
	t.Parallel()
	h := startHookline(t)
	b := newBrowser(t, h.url)
	b.login()
	b64 := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	for _, p := range []string{
		"/admin/ui/dead?cursor=" + b64("d1.-9223372036854775808.3"),
		"/admin/ui/dead?cursor=" + b64("d1.9223372036854775807.3"),
		"/admin/ui/events?cursor=" + b64(`["e1",-9223372036854775808,"shop","evt_1"]`),
		"/admin/ui/events?cursor=" + b64(`["e1",9223372036854775807,"shop","evt_1"]`),
	} {
		a := b.get(p)
		require.Equal(t, http.StatusBadRequest, a.status, p)
		require.Contains(t, a.body, `class="error"`, p)
	}
	require.Equal(t, http.StatusOK, b.get("/admin/ui/dead?cursor="+b64("d1.1796226727644590.3")).status, "a well-formed cursor still pages")
}
