package admin

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"
	"github.com/riverqueue/river"
	"riverqueue.com/riverui"
)

// riverUIPrefix is where the River UI is served, behind the admin token.
const riverUIPrefix = "/admin/river"

// riverUI is River's own UI (riverqueue.com/riverui) for serving under
// /admin/river/. Its background services (a job-count cache) run until ctx
// is done.
//
// Because a browser sends the token as HTTP Basic (see bearerAuth), which it
// then repeats on its own, state-changing requests from another origin are
// refused (http.CrossOriginProtection): another site cannot make an
// operator's browser cancel or delete jobs.
//
// River UI's "retry" of a hookline job does not go through the dead set: for
// a dead event, use POST /admin/dead/{id}/retry, which also handles an event
// whose job is still active (riverqueue/riverui#622).
func riverUI(ctx context.Context, client *river.Client[pgx.Tx], logger *slog.Logger) (http.Handler, error) {
	h, err := riverui.NewHandler(&riverui.HandlerOpts{
		Endpoints: riverui.NewEndpoints(client, nil),
		Logger:    logger,
		Prefix:    riverUIPrefix,
	})
	if err != nil {
		return nil, fmt.Errorf("admin: river UI: %w", err)
	}
	if err := h.Start(ctx); err != nil {
		return nil, fmt.Errorf("admin: start river UI: %w", err)
	}
	return http.NewCrossOriginProtection().Handler(h), nil
}

// mountRiverUI serves ui under /admin/river/ on the admin group g, so it sits
// behind the same token.
func mountRiverUI(g *echo.Group, ui http.Handler) {
	wrapped := echo.WrapHandler(ui)
	g.Any("/river", wrapped)
	g.Any("/river/*", wrapped)
}
