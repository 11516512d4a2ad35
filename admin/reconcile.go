package admin

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/labstack/echo/v4"

	"github.com/hookline/hookline/internal/dberr"
	"github.com/hookline/hookline/internal/httpjson"
)

// ReconcileResult answers POST /admin/sources/{source}/reconcile.
type ReconcileResult struct {
	Checked int `json:"checked"` // events the provider listed within the lookback
	Missing int `json:"missing"` // events this run stored (never accepted before)
}

// Errors Config.Reconcile returns, and how the route answers them. Any
// other error is a 503: "database unavailable; try again" when the
// database could not be reached (the detail is logged), else the error's
// text.
var (
	ErrNoSuchSource     = errors.New("unknown source")                                                           // 404
	ErrNotReconciled    = errors.New("the source has no reconcile block; add one to its configuration")          // 400
	ErrReconcileRunning = errors.New("a reconciliation of this source is running (here or on another instance)") // 409
)

// ProviderError is a run the provider's API failed (502). What the run
// stored before the failure stays stored.
type ProviderError struct{ Err error }

func (e *ProviderError) Error() string { return e.Err.Error() }
func (e *ProviderError) Unwrap() error { return e.Err }

// reconcileRunLimit bounds one on-demand run: the route clears the
// server's write timeout, which is meant for ordinary answers.
const reconcileRunLimit = 15 * time.Minute

// reconcile answers POST /admin/sources/{source}/reconcile: one run now,
// answered once its missing events are stored.
func (a *api) reconcile(c echo.Context) error {
	if a.reconcileFn == nil {
		return httpjson.Error(c, http.StatusBadRequest, ErrNotReconciled.Error())
	}
	source := pathParam(c, "source")
	_ = http.NewResponseController(c.Response().Writer).SetWriteDeadline(time.Now().Add(reconcileRunLimit + time.Minute))
	ctx, cancel := context.WithTimeout(c.Request().Context(), reconcileRunLimit)
	defer cancel()
	res, err := a.reconcileFn(ctx, source)
	var pe *ProviderError
	switch {
	case err == nil:
		a.log.Info("reconciliation run by an operator", "source", source, "checked", res.Checked, "missing", res.Missing)
		return c.JSON(http.StatusOK, res)
	case errors.Is(err, ErrNoSuchSource):
		return httpjson.Error(c, http.StatusNotFound, err.Error())
	case errors.Is(err, ErrNotReconciled):
		return httpjson.Error(c, http.StatusBadRequest, err.Error())
	case errors.Is(err, ErrReconcileRunning):
		return httpjson.Error(c, http.StatusConflict, err.Error()+"; try again when it has finished")
	case errors.As(err, &pe):
		a.log.Warn("reconciliation failed: the provider's API", "source", source, "checked", res.Checked, "missing", res.Missing, "error", err.Error())
		return c.JSON(http.StatusBadGateway, map[string]any{"error": pe.Error(), "checked": res.Checked, "missing": res.Missing})
	}
	a.log.Error("reconciliation failed", "source", source, "error", err.Error())
	if databaseDown(err) {
		// As every admin route: the detail (pgx's text names the user,
		// database, host and port) is for the log only.
		return httpjson.Error(c, http.StatusServiceUnavailable, "database unavailable; try again")
	}
	return httpjson.Error(c, http.StatusServiceUnavailable, "reconciliation failed: "+err.Error())
}

// databaseDown reports whether a run's error is the database's being
// unreachable or failing for reasons of its own (dberr.Unavailable), as
// opposed to an error of the run itself, whose text is answered.
func databaseDown(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return dberr.Unavailable(err)
	}
	var connErr *pgconn.ConnectError
	var netErr net.Error
	return errors.As(err, &connErr) || errors.As(err, &netErr) || errors.Is(err, pgconn.ErrConnClosed) ||
		errors.Is(err, io.ErrUnexpectedEOF) || pgconn.SafeToRetry(err) || pgconn.Timeout(err)
}
