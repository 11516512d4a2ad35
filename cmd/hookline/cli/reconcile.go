package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"

	"github.com/hookline/hookline/internal/adminclient"
)

// reconcileUsage is the help of `hookline reconcile`.
const reconcileUsage = `usage: hookline reconcile --source NAME [--url URL] [--json]

Run one reconciliation of a source now, through the admin API: list the
provider's events within the source's reconcile.lookback and store every
one hookline never accepted, as if its webhook had arrived (deduplicated,
filtered, ordered). It prints how many events the provider listed and how
many were missing, once the missing ones are stored.

The source needs a reconcile block in the server's configuration. Only one
run per source goes at a time, across instances.

--url defaults to $HOOKLINE_URL, else ` + deadDefaultURL + `.
The token comes from $HOOKLINE_ADMIN_TOKEN (the server's admin_token).
Exit codes: 0 done, 1 the run failed or the server refused, 2 bad usage.
`

// cmdReconcile is `hookline reconcile`, a client of the admin API like
// cmdDead. args are the words after "reconcile".
func cmdReconcile(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	return (&reconcileCommand{Getenv: os.Getenv}).Run(ctx, args, stdout, stderr)
}

// reconcileCommand is `hookline reconcile` with its environment made
// explicit (for tests).
type reconcileCommand struct {
	Getenv func(string) string // nil: os.Getenv
	HTTP   *http.Client        // nil: adminclient's default for a run
}

// Run is cmdReconcile with a context and the command's environment.
func (cmd *reconcileCommand) Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return exitCode(stderr, "reconcile", cmd.run(ctx, args, stdout))
}

func (cmd *reconcileCommand) run(ctx context.Context, args []string, stdout io.Writer) error {
	getenv := cmd.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	base := getenv("HOOKLINE_URL")
	if base == "" {
		base = deadDefaultURL
	}
	var source string
	var asJSON bool
	fs := flag.NewFlagSet("hookline reconcile", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&source, "source", "", "the source to reconcile")
	fs.StringVar(&base, "url", base, "admin API base URL")
	fs.BoolVar(&asJSON, "json", false, "print the server's JSON")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			// The usage and the flags, like every command's help.
			return printHelp(stdout, reconcileUsage, fs)
		}
		return usageError{err.Error()}
	}
	switch {
	case fs.NArg() > 0:
		return usagef("unexpected argument %q (name the source with --source)", fs.Arg(0))
	case source == "":
		return usagef("--source is required: the name of a source with a reconcile block")
	}
	if err := checkAdminURL(base, flagsGiven(fs)["url"]); err != nil {
		return err
	}
	token := getenv("HOOKLINE_ADMIN_TOKEN")
	if token == "" {
		return usagef("HOOKLINE_ADMIN_TOKEN is not set: export it with the server's admin_token")
	}
	c := &adminclient.Client{BaseURL: base, Token: token, HTTP: cmd.HTTP}
	res, raw, err := c.Reconcile(ctx, source)
	if err != nil {
		return explainReconcileError(err, base, source)
	}
	if asJSON {
		return printJSON(stdout, raw)
	}
	fmt.Fprintf(stdout, "reconciled %s: the provider listed %d events, %d were missing and are now stored\n", safe(source), res.Checked, res.Missing)
	return nil
}

// explainReconcileError says what a refused run means and what to do.
func explainReconcileError(err error, base, source string) error {
	var ae *adminclient.APIError
	if !errors.As(err, &ae) {
		return explainAdminError(err, base, "")
	}
	switch {
	case ae.Status == http.StatusNotFound && !routeNotFound(ae):
		return fmt.Errorf("%d: source %s is not configured on the server at %s", ae.Status, source, base)
	case ae.Status == http.StatusConflict:
		return fmt.Errorf("%d: %s", ae.Status, ae.Message)
	case ae.Status == http.StatusBadGateway:
		return fmt.Errorf("%d: the provider's API failed: %s (events stored before the failure stay stored)", ae.Status, ae.Message)
	}
	return explainAdminError(err, base, "")
}
