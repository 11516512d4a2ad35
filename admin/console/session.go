package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
)

// cookieName is the session cookie's name.
const cookieName = "hookline_console"

// csrfField is the form field every POST carries the CSRF token in.
const csrfField = "csrf"

// maxForm caps a POST's body: a form of filters and at most maxSelect ids.
const maxForm = 64 << 10

// sessions issues and checks session cookies without storing anything: a
// session is "v1.{expiry unix}.{nonce}.{mac}", the mac an HMAC-SHA256 of
// the rest under a key derived from the admin token. Any instance with the
// same token accepts it until its expiry; a new token ends them all. A
// session's CSRF token is an HMAC of the session under the same key.
type sessions struct {
	key  []byte
	ttl  time.Duration
	now  func() time.Time
	hash [sha256.Size]byte // of the token, for the login's comparison
}

func newSessions(token string, ttl time.Duration) *sessions {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("hookline console session key v1"))
	return &sessions{key: m.Sum(nil), ttl: ttl, now: time.Now, hash: sha256.Sum256([]byte(token))}
}

// tokenOK compares a login's token with the admin token in constant time
// (hashing first makes it constant in the length too).
func (s *sessions) tokenOK(got string) bool {
	h := sha256.Sum256([]byte(got))
	return subtle.ConstantTimeCompare(h[:], s.hash[:]) == 1
}

func (s *sessions) mac(parts ...string) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(strings.Join(parts, "|")))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// issue returns a new session and when it expires.
func (s *sessions) issue() (string, time.Time) {
	exp := s.now().Add(s.ttl).Truncate(time.Second)
	nonce := make([]byte, 16)
	_, _ = rand.Read(nonce)
	body := "v1." + strconv.FormatInt(exp.Unix(), 10) + "." + base64.RawURLEncoding.EncodeToString(nonce)
	return body + "." + s.mac("session", body), exp
}

// valid reports whether v is a session this key issued that has not expired.
func (s *sessions) valid(v string) bool {
	i := strings.LastIndexByte(v, '.')
	if i < 0 || !strings.HasPrefix(v, "v1.") {
		return false
	}
	body, mac := v[:i], v[i+1:]
	if !hmac.Equal([]byte(mac), []byte(s.mac("session", body))) {
		return false
	}
	parts := strings.Split(body, ".")
	if len(parts) != 3 {
		return false
	}
	exp, err := strconv.ParseInt(parts[1], 10, 64)
	return err == nil && s.now().Before(time.Unix(exp, 0))
}

// csrf is session v's CSRF token.
func (s *sessions) csrf(v string) string { return s.mac("csrf", v) }

// session returns the request's valid session, or "".
func (c *Console) session(ec echo.Context) string {
	ck, err := ec.Cookie(cookieName)
	if err != nil || !c.sessions.valid(ck.Value) {
		return ""
	}
	return ck.Value
}

// setCookie sets (or, with maxAge < 0, clears) the session cookie: HttpOnly,
// SameSite=Strict, only under Prefix, Secure when the request came over
// TLS (directly, or through a proxy that says so).
func setCookie(ec echo.Context, value string, maxAge int) {
	r := ec.Request()
	ec.SetCookie(&http.Cookie{Name: cookieName, Value: value, Path: Prefix + "/", MaxAge: maxAge, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")})
}

// sessionKey is where withSession leaves the session for the handlers.
const sessionKey = "console.session"

// withSession lets a request with a valid session through. Without one, a
// GET (or HEAD) of the overview shows the login form, another GET is sent
// there (to come back after logging in), and a POST is refused.
func (c *Console) withSession(next echo.HandlerFunc) echo.HandlerFunc {
	return func(ec echo.Context) error {
		if s := c.session(ec); s != "" {
			ec.Set(sessionKey, s)
			return next(ec)
		}
		r := ec.Request()
		switch {
		case r.Method != http.MethodGet && r.Method != http.MethodHead:
			return c.errorPage(ec, http.StatusForbidden, "Your session has ended; log in again.")
		case r.URL.Path == Prefix+"/":
			return c.loginPage(ec, http.StatusOK, "", "")
		}
		return ec.Redirect(http.StatusSeeOther, Prefix+"/?next="+url.QueryEscape(r.URL.RequestURI()))
	}
}

// sameOrigin refuses a POST that a browser says comes from another origin
// (Sec-Fetch-Site, else Origin against Host): another site's form never
// acts, even on a browser that would send the cookie along.
func (c *Console) sameOrigin(next echo.HandlerFunc) echo.HandlerFunc {
	return func(ec echo.Context) error {
		if err := c.origin.Check(ec.Request()); err != nil {
			c.log.Warn("console: cross-origin request refused", "path", ec.Request().URL.Path,
				"origin", ec.Request().Header.Get("Origin"), "sec_fetch_site", ec.Request().Header.Get("Sec-Fetch-Site"))
			return c.errorPage(ec, http.StatusForbidden, "Refused: the request came from another site.")
		}
		ec.Request().Body = http.MaxBytesReader(ec.Response(), ec.Request().Body, maxForm)
		return next(ec)
	}
}

// checkCSRF refuses a POST whose form body does not carry its session's
// CSRF token (compared in constant time).
func (c *Console) checkCSRF(next echo.HandlerFunc) echo.HandlerFunc {
	return func(ec echo.Context) error {
		want := c.sessions.csrf(ec.Get(sessionKey).(string))
		// From the form's body only: a token in the URL would end up in
		// access logs and browser history.
		if !hmac.Equal([]byte(ec.Request().PostFormValue(csrfField)), []byte(want)) {
			c.log.Warn("console: request without its CSRF token refused", "path", ec.Request().URL.Path)
			return c.errorPage(ec, http.StatusForbidden, "Refused: the form's security token is missing or stale; reload the page and try again.")
		}
		return next(ec)
	}
}

// login answers POST /admin/ui/login: the right token gets a session and
// goes on to next (or the overview); a wrong one stays on the login form.
func (c *Console) login(ec echo.Context) error {
	next := localPath(ec.FormValue("next"))
	if !c.sessions.tokenOK(ec.FormValue("token")) {
		c.log.Warn("console: login with a wrong token", "remote", ec.RealIP())
		return c.loginPage(ec, http.StatusUnauthorized, "That is not the admin token.", next)
	}
	v, exp := c.sessions.issue()
	setCookie(ec, v, int(time.Until(exp).Seconds()))
	c.log.Info("console: operator logged in", "remote", ec.RealIP())
	if next == "" {
		next = Prefix + "/"
	}
	return ec.Redirect(http.StatusSeeOther, next)
}

// logout answers POST /admin/ui/logout: the cookie is cleared. (The
// session itself stays valid until it expires, for whoever copied it.)
func (c *Console) logout(ec echo.Context) error {
	setCookie(ec, "", -1)
	return ec.Redirect(http.StatusSeeOther, Prefix+"/")
}

// localPath is v if it is a path of the console (where a login or an
// action may send the browser next), else "". The path must start with
// Prefix as written (not only once unescaped: /%61dmin/ui/ is refused) and
// have no "." or ".." segment (also written %2e), which the browser would
// resolve to a path outside the console.
func localPath(v string) string {
	u, err := url.Parse(v)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" ||
		strings.HasPrefix(v, "//") || strings.ContainsAny(v, "\\\r\n") {
		return ""
	}
	p := u.EscapedPath()
	if !strings.HasPrefix(p, Prefix+"/") {
		return ""
	}
	for _, seg := range strings.Split(p, "/") {
		if dotSegment(seg) {
			return ""
		}
	}
	return u.RequestURI()
}

// csrfOf is the CSRF token of the request's session, for its forms.
func (c *Console) csrfOf(ec echo.Context) string {
	if s, ok := ec.Get(sessionKey).(string); ok {
		return c.sessions.csrf(s)
	}
	return ""
}
