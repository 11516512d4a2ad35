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
	"slices"
	"text/tabwriter"
	"time"

	"github.com/hookline/hookline/internal/adminclient"
)

// destinationsUsage is the help of `hookline destinations`.
const destinationsUsage = `usage: hookline destinations COMMAND [flags]

Show, pause and resume destinations through the admin API.

  list   [--json]
  pause  SOURCE NAME [--json]
  resume SOURCE NAME [--json]

While a destination is paused its events keep being accepted and wait; no
attempt starts and none is spent. The pause is stored in Postgres: it holds
on every instance, across restarts, until resume.

Every command takes --url (default $HOOKLINE_URL, else ` + deadDefaultURL + `).
The token comes from $HOOKLINE_ADMIN_TOKEN (the server's admin_token).
A last error is shown with its control characters escaped; --json prints it
exactly. Exit codes: 0 done, 1 the server or network refused, 2 bad usage.
`

// cmdDestinations is `hookline destinations list|pause|resume`, a client of
// the admin API like cmdDead (same environment, flags and exit codes: 0
// done, 1 the server or network refused, 2 bad usage). args are the words
// after "destinations".
func cmdDestinations(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	return (&destinationsCommand{Getenv: os.Getenv}).Run(ctx, args, stdout, stderr)
}

// destinationsCommand is `hookline destinations` with its environment made
// explicit (for tests).
type destinationsCommand struct {
	// Getenv reads HOOKLINE_ADMIN_TOKEN and HOOKLINE_URL; nil means os.Getenv.
	Getenv func(string) string
	// HTTP sends requests; nil means adminclient.Client's default.
	HTTP *http.Client
}

// Run is cmdDestinations with a context and the command's environment.
func (cmd *destinationsCommand) Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || slices.Contains([]string{"-h", "--help", "help"}, args[0]) {
		if len(args) == 0 {
			fmt.Fprint(stderr, destinationsUsage)
			return 2
		}
		fmt.Fprint(stdout, destinationsUsage)
		return 0
	}
	getenv := cmd.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	var err error
	switch args[0] {
	case "list", "pause", "resume":
		err = cmd.run(ctx, getenv, args[0], args[1:], stdout)
	default:
		err = usagef("unknown command %q (want list, pause or resume)", args[0])
	}
	return exitCode(stderr, "destinations", err)
}

func (cmd *destinationsCommand) run(ctx context.Context, getenv func(string) string, verb string, args []string, stdout io.Writer) error {
	base := getenv("HOOKLINE_URL")
	if base == "" {
		base = deadDefaultURL
	}
	var asJSON bool
	fs := flag.NewFlagSet("hookline destinations "+verb, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&base, "url", base, "admin API base URL")
	fs.BoolVar(&asJSON, "json", false, "print the server's JSON")
	pos, err := parseInterleaved(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return printHelp(stdout, destinationsUsage, fs)
	}
	if err != nil {
		return usageError{err.Error()}
	}
	if err := checkAdminURL(base, flagsGiven(fs)["url"]); err != nil {
		return err
	}
	switch {
	case verb == "list" && len(pos) > 0:
		return usagef("list takes no arguments (got %q)", pos[0])
	case verb != "list" && len(pos) != 2:
		return usagef("%s takes SOURCE NAME, the destination's source and name (see hookline destinations list)", verb)
	}

	token := getenv("HOOKLINE_ADMIN_TOKEN")
	if token == "" {
		return usagef("HOOKLINE_ADMIN_TOKEN is not set: export it with the server's admin_token")
	}
	c := &adminclient.Client{BaseURL: base, Token: token, HTTP: cmd.HTTP}

	if verb == "list" {
		list, raw, err := c.Destinations(ctx)
		if err != nil {
			return explainAdminError(err, base, "")
		}
		if asJSON {
			return printJSON(stdout, raw)
		}
		printDestinations(stdout, list)
		return nil
	}

	source, name := pos[0], pos[1]
	set, status := c.PauseDestination, "paused"
	if verb == "resume" {
		set, status = c.ResumeDestination, "resumed"
	}
	if err := set(ctx, source, name); err != nil {
		return explainDestinationError(err, base, source, name)
	}
	if asJSON {
		return printJSON(stdout, []byte(`{"status":"`+status+`","source":`+jsonString(source)+`,"name":`+jsonString(name)+`}`))
	}
	fmt.Fprintf(stdout, "%s destination %s/%s\n", status, safe(source), safe(name))
	if verb == "pause" {
		fmt.Fprintf(stdout, "its events are accepted and wait; deliver them with: hookline destinations resume %s %s\n", safe(source), safe(name))
	}
	return nil
}

// explainDestinationError is explainAdminError for a request naming one
// destination: the server's own 404 (its message is not the bare "not
// found" of a closed admin API or an unknown route: routeNotFound) means
// the destination is not configured there.
func explainDestinationError(err error, base, source, name string) error {
	var ae *adminclient.APIError
	if errors.As(err, &ae) && ae.Status == http.StatusNotFound && !routeNotFound(ae) {
		return fmt.Errorf("%d: destination %s/%s not found (not configured on the server at %s? see hookline destinations list)", ae.Status, source, name, base)
	}
	return explainAdminError(err, base, "")
}

// printDestinations prints the destinations as a table; "-" marks a
// paused_at or last_error that is not set. Text is escaped (oneLine).
func printDestinations(w io.Writer, l *adminclient.DestinationList) {
	if len(l.Items) == 0 {
		fmt.Fprintln(w, "no destinations configured")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SOURCE\tNAME\tSTATE\tQUEUED\tIN_FLIGHT\tFAILURES\tPAUSED_AT\tLAST_ERROR")
	for _, d := range l.Items {
		pausedAt, lastError := "-", "-"
		if d.PausedAt != nil {
			pausedAt = d.PausedAt.UTC().Format(time.RFC3339)
		}
		if d.LastError != nil && *d.LastError != "" {
			lastError = oneLine(*d.LastError, 60)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\n", oneLine(d.Source, 30), oneLine(d.Name, 30), oneLine(d.State, 20),
			d.Queued, d.InFlight, d.FailureStreak, pausedAt, lastError)
	}
	_ = tw.Flush()
}
