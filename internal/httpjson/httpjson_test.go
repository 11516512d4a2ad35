package httpjson_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/internal/httpjson"
)

func newContext() (echo.Context, *httptest.ResponseRecorder) {
	rec := httptest.NewRecorder()
	return echo.New().NewContext(httptest.NewRequest(http.MethodGet, "/", nil), rec), rec
}

func TestError(t *testing.T) {
	c, rec := newContext()
	require.NoError(t, httpjson.Error(c, http.StatusConflict, `source "a" <gone>`))
	require.Equal(t, http.StatusConflict, rec.Code)
	require.Equal(t, echo.MIMEApplicationJSON, rec.Header().Get(echo.HeaderContentType))
	require.Equal(t, `{"error":"source \"a\" \u003cgone\u003e"}`+"\n", rec.Body.String())
}

func TestErrorHandler(t *testing.T) {
	for name, c := range map[string]struct {
		err  error
		code int
		body string
	}{
		"http error":         {echo.ErrMethodNotAllowed, http.StatusMethodNotAllowed, `{"error":"Method Not Allowed"}` + "\n"},
		"wrapped http error": {fmt.Errorf("route: %w", echo.NewHTTPError(http.StatusTeapot, "short and stout")), http.StatusTeapot, `{"error":"short and stout"}` + "\n"},
		"other error":        {errors.New("pq: password authentication failed"), http.StatusInternalServerError, `{"error":"internal error"}` + "\n"},
	} {
		ctx, rec := newContext()
		httpjson.ErrorHandler(c.err, ctx)
		require.Equal(t, c.code, rec.Code, name)
		require.Equal(t, c.body, rec.Body.String(), name)
	}

	ctx, rec := newContext()
	require.NoError(t, ctx.String(http.StatusAccepted, "started"))
	httpjson.ErrorHandler(echo.ErrNotFound, ctx)
	require.Equal(t, http.StatusAccepted, rec.Code)
	require.Equal(t, "started", rec.Body.String(), "an answer already started is left alone")
}
