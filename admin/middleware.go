package admin

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/hookline/hookline/internal/httpjson"
)

// bearerAuth checks "Authorization: Bearer {token}". Under /admin/river/ it
// also takes HTTP Basic with the token as password (any user name), since a
// browser cannot send a bearer token when it opens the UI; there a 401
// carries WWW-Authenticate so the browser asks for it. A 401 is the whole
// answer to a bad or missing token: it never says which.
func bearerAuth(token string) echo.MiddlewareFunc {
	want := sha256.Sum256([]byte(token))
	// Hashing first makes the comparison constant-time in the length too.
	ok := func(got string) bool {
		h := sha256.Sum256([]byte(got))
		return subtle.ConstantTimeCompare(h[:], want[:]) == 1
	}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			req := c.Request()
			ui := strings.HasPrefix(req.URL.Path, riverUIPrefix+"/") || req.URL.Path == riverUIPrefix
			scheme, cred, _ := strings.Cut(req.Header.Get(echo.HeaderAuthorization), " ")
			switch {
			case strings.EqualFold(scheme, "Bearer") && ok(strings.TrimSpace(cred)):
				return next(c)
			case ui && strings.EqualFold(scheme, "Basic"):
				if _, pw, found := req.BasicAuth(); found && ok(pw) {
					return next(c)
				}
			}
			if ui {
				c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Basic realm="hookline admin", charset="UTF-8"`)
			} else {
				c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="hookline admin"`)
			}
			return httpjson.Error(c, http.StatusUnauthorized, "unauthorized")
		}
	}
}

// jsonErrors answers echo's own errors (404 of an unknown /admin path, 405)
// as {"error": "..."} with echo's message in lower case, whatever the
// router's HTTPErrorHandler.
func jsonErrors(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		err := next(c)
		var he *echo.HTTPError
		if err != nil && errors.As(err, &he) && !c.Response().Committed {
			return httpjson.Error(c, he.Code, strings.ToLower(fmt.Sprint(he.Message)))
		}
		return err
	}
}

// noStore marks every answer of the JSON API Cache-Control: no-store: they
// carry payloads, headers and errors that no browser or proxy should keep.
// River UI's own assets (under riverUIPrefix) keep their caching.
func noStore(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if p := c.Request().URL.Path; p != riverUIPrefix && !strings.HasPrefix(p, riverUIPrefix+"/") {
			c.Response().Header().Set(echo.HeaderCacheControl, "no-store")
		}
		return next(c)
	}
}
