// Package httpjson writes hookline's JSON error answers: a status and the
// body {"error": "..."}.
//
// Internal: no stability promise.
package httpjson

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"
)

// body is the JSON of every error answer.
type body struct {
	Error string `json:"error"`
}

// Error answers status with the body {"error": msg}.
func Error(c echo.Context, status int, msg string) error {
	return c.JSON(status, body{Error: msg})
}

// ErrorHandler is an echo.HTTPErrorHandler that answers in JSON: an
// *echo.HTTPError with its code and message, any other error with 500
// "internal error" (its text is not shown to the caller). An answer already
// started is left alone.
func ErrorHandler(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	code, msg := http.StatusInternalServerError, "internal error"
	var he *echo.HTTPError
	if errors.As(err, &he) {
		code = he.Code
		msg = fmt.Sprint(he.Message)
	}
	_ = Error(c, code, msg)
}
