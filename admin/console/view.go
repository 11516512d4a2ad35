package console

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static/*
var staticFS embed.FS

// csp allows the console's own script and stylesheet and nothing else: no
// inline script or style, no other origin, no framing, forms only to itself.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// views are the parsed pages (each the layout with its own "content") and
// the static files' URLs, versioned by their content.
type views struct {
	pages  map[string]*template.Template
	assets map[string]string // file name -> URL with ?v={hash}
}

func loadViews() *views {
	v := &views{pages: map[string]*template.Template{}, assets: map[string]string{}}
	files, _ := fs.Glob(staticFS, "static/*")
	for _, f := range files {
		b, _ := staticFS.ReadFile(f)
		sum := sha256.Sum256(b)
		v.assets[path.Base(f)] = Prefix + "/static/" + path.Base(f) + "?v=" + hex.EncodeToString(sum[:6])
	}
	funcs := template.FuncMap{"asset": func(name string) string { return v.assets[name] }, "when": when, "whenPtr": whenPtr,
		"ago": ago, "pathEsc": url.PathEscape, "short": short, "eventURL": eventURL, "deadURL": deadURL, "add": func(a, b int) int { return a + b },
		"deadActions": func(id int64, reason, csrf, retryBack, deleteBack string) deadActions {
			return deadActions{ID: id, Reason: reason, CSRF: csrf, RetryBack: retryBack, DeleteBack: deleteBack}
		}}
	layout := template.Must(template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html"))
	pages, _ := fs.Glob(templateFS, "templates/*.html")
	for _, p := range pages {
		name := path.Base(p)
		if name == "layout.html" {
			continue
		}
		v.pages[strings.TrimSuffix(name, ".html")] = template.Must(template.Must(layout.Clone()).ParseFS(templateFS, p))
	}
	return v
}

// deadActions is what the "deadActions" template draws: a dead item's
// retry and delete buttons, and the page each returns to.
type deadActions struct {
	ID                                  int64
	Reason, CSRF, RetryBack, DeleteBack string
}

// page is what every page's template gets.
type page struct {
	Title   string
	Nav     string // the menu entry to mark current
	CSRF    string // the session's CSRF token ("" on the login page)
	RiverUI bool
	Data    any
}

// render answers status with page name.
func (c *Console) render(ec echo.Context, status int, name string, p page) error {
	p.RiverUI = c.cfg.RiverUI
	if p.CSRF == "" {
		p.CSRF = c.csrfOf(ec)
	}
	var buf bytes.Buffer
	if err := c.views.pages[name].ExecuteTemplate(&buf, "layout.html", p); err != nil {
		return fmt.Errorf("console: render %s: %w", name, err)
	}
	ec.Response().Header().Set(echo.HeaderCacheControl, "no-store")
	return ec.HTMLBlob(status, buf.Bytes())
}

// loginPage shows the login form, with an error after a wrong token.
func (c *Console) loginPage(ec echo.Context, status int, msg, next string) error {
	if next == "" {
		next = localPath(ec.QueryParam("next"))
	}
	return c.render(ec, status, "login", page{Title: "Log in", Data: struct{ Error, Next string }{msg, next}})
}

// errorPage answers status with msg in the layout.
func (c *Console) errorPage(ec echo.Context, status int, msg string) error {
	return c.errorPageBack(ec, status, msg, "")
}

// errorPageBack is errorPage with a link back to the console page back
// ("": the overview).
func (c *Console) errorPageBack(ec echo.Context, status int, msg, back string) error {
	return c.render(ec, status, "error", page{Title: http.StatusText(status), Data: struct {
		Status        int
		Message, Back string
	}{status, msg, back}})
}

// fail answers an error of a page or action: the message of a known one,
// else a generic page (the error is logged).
func (c *Console) fail(ec echo.Context, err error) error {
	status, msg := classify(err)
	if status >= 500 {
		c.log.Error("console request failed", "method", ec.Request().Method, "path", ec.Path(), "error", err.Error())
	}
	return c.errorPage(ec, status, msg)
}

// static serves the embedded stylesheet and script.
func (c *Console) static(ec echo.Context) error {
	name := ec.Param("file")
	b, err := staticFS.ReadFile("static/" + name)
	if err != nil || strings.Contains(name, "/") {
		return echo.ErrNotFound
	}
	ctype := "text/css; charset=utf-8"
	switch {
	case strings.HasSuffix(name, ".js"):
		ctype = "text/javascript; charset=utf-8"
	case strings.HasSuffix(name, ".svg"):
		ctype = "image/svg+xml"
	}
	ec.Response().Header().Set(echo.HeaderCacheControl, "public, max-age=86400")
	return ec.Blob(http.StatusOK, ctype, b)
}

// secureHeaders sets, on every console answer, the Content-Security-Policy
// (no inline script) and the headers that keep pages out of frames, caches
// of other sites and content sniffing.
func (c *Console) secureHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(ec echo.Context) error {
		h := ec.Response().Header()
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin")
		return next(ec)
	}
}

// htmlErrors answers echo's own errors (404 of an unknown page, 405) as an
// HTML page, whatever the router's HTTPErrorHandler.
func (c *Console) htmlErrors(next echo.HandlerFunc) echo.HandlerFunc {
	return func(ec echo.Context) error {
		err := next(ec)
		var he *echo.HTTPError
		if err != nil && errors.As(err, &he) && !ec.Response().Committed {
			return c.errorPage(ec, he.Code, http.StatusText(he.Code)+".")
		}
		return err
	}
}

// when renders t as a <time> element: the UTC text the server sends, which
// the script shows in the browser's zone (with the UTC text on hover).
func when(t time.Time) template.HTML {
	u := t.UTC()
	return template.HTML(`<time datetime="` + u.Format(time.RFC3339Nano) + `" title="` + u.Format("2006-01-02 15:04:05") +
		` UTC">` + u.Format("2006-01-02 15:04:05") + ` UTC</time>`)
}

func whenPtr(t *time.Time) template.HTML {
	if t == nil {
		return "–"
	}
	return when(*t)
}

// ago is how long ago t was, to the second ("–" for nil).
func ago(t *time.Time) string {
	if t == nil {
		return "–"
	}
	return seconds(time.Since(*t).Seconds())
}

// seconds renders a lag in seconds: "0 s", "42 s", "3 min 5 s", "2 h 10 min".
func seconds(s float64) string {
	d := time.Duration(max(s, 0) * float64(time.Second)).Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%d s", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%d min %d s", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%d h %d min", int(d.Hours()), int(d.Minutes())%60)
}

// short cuts s to n runes, with an ellipsis.
func short(n int, s string) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// eventURL is the console's page of an event: /events/{source}/{event_id}
// with each part escaped, or, when a part would be the path segment "." or
// "..", /event?source=…&id=…: a browser resolves such a segment (escaped
// as %2E too, which the URL standard treats as a dot) before it sends the
// request, so the path form of such an id would open another page.
func eventURL(source, eventID string) string {
	s, id := url.PathEscape(source), url.PathEscape(eventID)
	if dotSegment(s) || dotSegment(id) {
		return Prefix + "/event?" + url.Values{"source": {source}, "id": {eventID}}.Encode()
	}
	return Prefix + "/events/" + s + "/" + id
}

// dotSegment reports whether a path segment is one a browser resolves:
// "." or "..", also written with %2e.
func dotSegment(seg string) bool {
	seg = strings.ReplaceAll(strings.ToLower(seg), "%2e", ".")
	return seg == "." || seg == ".."
}

// deadURL is the console's page of a dead item.
func deadURL(id int64) string { return Prefix + "/dead/" + strconv.FormatInt(id, 10) }
