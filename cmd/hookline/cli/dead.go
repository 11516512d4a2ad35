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
	"strings"
	"time"

	"github.com/hookline/hookline/internal/adminclient"
)

// deadDefaultURL is the server the command talks to without --url or HOOKLINE_URL.
const deadDefaultURL = "http://127.0.0.1:8080"

// deadUsage is the help of `hookline dead`.
const deadUsage = `usage: hookline dead COMMAND [flags]

Inspect and act on the dead set through the admin API.

  list   [--source S] [--destination D] [--reason failed|duplicate] [--event-type T]
         [--since TIME] [--until TIME] [--limit N] [--cursor C] [--json]
  show   ID [--json]
  retry  ID [--json]
  delete ID
  retry  --all [--source S] [--destination D] [--reason R] [--event-type T]
         [--since TIME] [--until TIME] [--dry-run] [--yes] [--json]
  delete --all [same filters] [--dry-run] [--yes] [--json]

Every command takes --url (default $HOOKLINE_URL, else ` + deadDefaultURL + `).
The token comes from $HOOKLINE_ADMIN_TOKEN (the server's admin_token).
--destination is a destination's name (default for a source's single
destination); list and show print each item's. retry ID re-runs the item's
destination only. --limit is 1 to 500 (default 50). TIME is RFC 3339
(2026-01-02T15:04:05Z). --all with no filter acts on the whole dead set and
needs --yes (or --dry-run to count first). Text from the server is shown
with its control characters escaped (\x1b, \r, \n, ...); --json prints it
exactly. Exit codes: 0 done, 1 the server or network refused, 2 bad usage.
`

// cmdDead is `hookline dead list|show|retry|delete`, a client of the admin
// API (token from HOOKLINE_ADMIN_TOKEN, server from --url or HOOKLINE_URL).
// args are the words after "dead"; it returns the exit code: 0 done, 1 the
// server or network refused, 2 bad usage.
func cmdDead(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	return (&deadCommand{Getenv: os.Getenv}).Run(ctx, args, stdout, stderr)
}

// deadCommand is `hookline dead` with its environment made explicit (for tests).
type deadCommand struct {
	// Getenv reads HOOKLINE_ADMIN_TOKEN and HOOKLINE_URL; nil means os.Getenv.
	Getenv func(string) string
	// HTTP sends requests; nil means adminclient.Client's default.
	HTTP *http.Client
}

// usageError is a mistake in the command line: exit 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return usageError{fmt.Sprintf(format, a...)} }

// exitCode reports err of `hookline name` on stderr and returns the exit
// status: 0 without an error or after the help (errHelp), 2 for a usage
// error (pointing at --help), else 1. The message may quote the server: it
// is printed escaped (safe).
func exitCode(stderr io.Writer, name string, err error) int {
	if err == nil || errors.Is(err, errHelp) {
		return 0
	}
	fmt.Fprintf(stderr, "hookline %s: %s\n", name, safe(err.Error()))
	var ue usageError
	if errors.As(err, &ue) {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stderr, "run 'hookline %s --help' for usage\n", name)
		}
		return 2
	}
	return 1
}

// Run is cmdDead with a context and the deadCommand's environment.
func (cmd *deadCommand) Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || slices.Contains([]string{"-h", "--help", "help"}, args[0]) {
		if len(args) == 0 {
			fmt.Fprint(stderr, deadUsage)
			return 2
		}
		fmt.Fprint(stdout, deadUsage)
		return 0
	}
	getenv := cmd.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	var err error
	switch args[0] {
	case "list", "show", "retry", "delete":
		err = cmd.run(ctx, getenv, args[0], args[1:], stdout)
	default:
		err = usagef("unknown command %q (want list, show, retry or delete)", args[0])
	}
	return exitCode(stderr, "dead", err)
}

type deadOptions struct {
	url                                                  string
	source, destination, reason, eventType, since, until string
	limit                                                int
	cursor                                               string
	asJSON, all, dryRun, yes                             bool
}

func (cmd *deadCommand) run(ctx context.Context, getenv func(string) string, verb string, args []string, stdout io.Writer) error {
	o := deadOptions{url: getenv("HOOKLINE_URL")}
	if o.url == "" {
		o.url = deadDefaultURL
	}
	fs := flag.NewFlagSet("hookline dead "+verb, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.url, "url", o.url, "admin API base URL")
	fs.BoolVar(&o.asJSON, "json", false, "print the server's JSON")
	filters := verb == "list" || verb == "retry" || verb == "delete"
	if filters {
		fs.StringVar(&o.source, "source", "", "only this source")
		fs.StringVar(&o.destination, "destination", "", "only this destination (its name, e.g. default)")
		fs.StringVar(&o.reason, "reason", "", "failed or duplicate")
		fs.StringVar(&o.eventType, "event-type", "", "only this event type")
		fs.StringVar(&o.since, "since", "", "dead at or after (RFC 3339)")
		fs.StringVar(&o.until, "until", "", "dead before (RFC 3339)")
	}
	if verb == "list" {
		fs.IntVar(&o.limit, "limit", 0, "items per page, 1 to 500 (default 50)")
		fs.StringVar(&o.cursor, "cursor", "", "next_cursor of the previous page")
	}
	if verb == "retry" || verb == "delete" {
		fs.BoolVar(&o.all, "all", false, "every item matching the filters")
		fs.BoolVar(&o.dryRun, "dry-run", false, "with --all: only count")
		fs.BoolVar(&o.yes, "yes", false, "with --all and no filter: confirm the whole dead set")
	}
	pos, err := parseInterleaved(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return printHelp(stdout, deadUsage, fs)
	}
	if err != nil {
		return usageError{err.Error()}
	}
	given := flagsGiven(fs)
	if given["limit"] && o.limit <= 0 {
		return usagef("--limit %d: want a number of items per page from 1 to 500 (without --limit: 50)", o.limit)
	}
	if err := checkAdminURL(o.url, given["url"]); err != nil {
		return err
	}

	token := getenv("HOOKLINE_ADMIN_TOKEN")
	if token == "" {
		return usagef("HOOKLINE_ADMIN_TOKEN is not set: export it with the server's admin_token")
	}
	c := &adminclient.Client{BaseURL: o.url, Token: token, HTTP: cmd.HTTP}
	f := adminclient.Filter{Source: o.source, Destination: o.destination, Reason: o.reason, EventType: o.eventType,
		Since: o.since, Until: o.until, DryRun: o.dryRun}
	if o.reason != "" && o.reason != "failed" && o.reason != "duplicate" {
		return usagef("--reason %q: want failed or duplicate", o.reason)
	}

	switch {
	case verb == "list":
		if len(pos) > 0 {
			return usagef("list takes no arguments (got %q); filter with --source, --reason, ...", pos[0])
		}
		p := adminclient.ListParams{Source: o.source, Destination: o.destination, Reason: o.reason, EventType: o.eventType,
			Limit: o.limit, Cursor: o.cursor}
		if p.Since, err = parseTimeFlag("--since", o.since); err != nil {
			return err
		}
		if p.Until, err = parseTimeFlag("--until", o.until); err != nil {
			return err
		}
		list, raw, err := c.List(ctx, p)
		if err != nil {
			return explainAdminError(err, o.url, "")
		}
		if o.asJSON {
			return printJSON(stdout, raw)
		}
		printDeadList(stdout, list)
		return nil

	case o.all:
		if len(pos) > 0 {
			return usagef("%s --all takes no id (got %q)", verb, pos[0])
		}
		if f.Empty() && !o.dryRun && !o.yes {
			return usagef("%s --all with no filter acts on the whole dead set: add --yes, or --dry-run to count first", verb)
		}
		var res *adminclient.Bulk
		var raw []byte
		if verb == "retry" {
			res, raw, err = c.RetryAll(ctx, f)
		} else {
			res, raw, err = c.DeleteAll(ctx, f)
		}
		if err != nil {
			return explainAdminError(err, o.url, "")
		}
		if o.asJSON {
			return printJSON(stdout, raw)
		}
		printBulk(stdout, verb, res)
		return nil
	}

	// One item: show, retry or delete ID.
	if len(pos) != 1 {
		return usagef("%s takes one dead item ID (see hookline dead list), or --all with filters", verb)
	}
	if !f.Empty() || o.dryRun || o.yes {
		return usagef("filters, --dry-run and --yes go with --all; %s ID acts on that item alone", verb)
	}
	id := pos[0]
	switch verb {
	case "show":
		it, raw, err := c.Show(ctx, id)
		if err != nil {
			return explainAdminError(err, o.url, id)
		}
		if o.asJSON {
			return printJSON(stdout, raw)
		}
		printDeadItem(stdout, it)
	case "retry":
		r, raw, err := c.Retry(ctx, id)
		if err != nil {
			return explainAdminError(err, o.url, id)
		}
		if o.asJSON {
			return printJSON(stdout, raw)
		}
		how := "as job " + fmt.Sprint(r.JobID)
		if r.Joined {
			how = fmt.Sprintf("joining job %d, already active for the event", r.JobID)
		}
		fmt.Fprintf(stdout, "requeued dead item %s (%s/%s), %s\n", safe(id), safe(r.Source), safe(r.EventID), how)
	case "delete":
		if err := c.Delete(ctx, id); err != nil {
			return explainAdminError(err, o.url, id)
		}
		if o.asJSON {
			return printJSON(stdout, []byte(`{"status":"deleted","id":`+jsonString(id)+`}`))
		}
		fmt.Fprintf(stdout, "deleted dead item %s\n", safe(id))
	}
	return nil
}

// printHelp prints a command's usage and the flags of fs on stdout, for -h
// or --help after a subcommand: errHelp (exit 0).
func printHelp(stdout io.Writer, usage string, fs *flag.FlagSet) error {
	fmt.Fprint(stdout, usage)
	fmt.Fprintf(stdout, "\nflags of %s:\n", fs.Name())
	fs.SetOutput(stdout)
	fs.PrintDefaults()
	return errHelp
}

// flagsGiven returns the names of the flags set on the command line.
func flagsGiven(fs *flag.FlagSet) map[string]bool {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	return given
}

// checkAdminURL refuses an admin API address that is not an http:// or
// https:// URL (bad usage, exit 2), naming where it came from: --url
// (fromFlag), else $HOOKLINE_URL.
func checkAdminURL(base string, fromFlag bool) error {
	err := adminclient.CheckBaseURL(base)
	switch {
	case err == nil:
		return nil
	case fromFlag:
		return usagef("--url %q: %v; give the server's address, e.g. %s", base, err, deadDefaultURL)
	}
	return usagef("HOOKLINE_URL %q: %v; set it (or --url) to the server's address, e.g. %s", base, err, deadDefaultURL)
}

// parseInterleaved parses flags that may come before or after positional
// arguments ("show 12 --json" as well as "show --json 12").
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if rest[0] == "--" {
			return append(pos, rest[1:]...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

func parseTimeFlag(name, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, usagef("%s %q: want an RFC 3339 time, e.g. 2026-01-02T15:04:05Z", name, v)
	}
	return t, nil
}

// routeNotFound reports whether a 404 answers a path the server does not
// serve: the admin API is off ("not found"), or not on this listener (echo's
// "Not Found" on listen when admin_listen is set), or the URL is not
// hookline's. Any other 404 is the admin API's own, about the dead item,
// destination or source the request named.
func routeNotFound(ae *adminclient.APIError) bool {
	return ae.Status == http.StatusNotFound && (ae.Message == "" || strings.EqualFold(ae.Message, "not found"))
}

// explain turns an error into a message that says what to do.
func explainAdminError(err error, base, id string) error {
	var ae *adminclient.APIError
	if !errors.As(err, &ae) {
		if errors.Is(err, context.Canceled) {
			return err
		}
		return fmt.Errorf("cannot reach the admin API at %s: %w (is hookline serve running there? set --url or HOOKLINE_URL)", base, err)
	}
	switch {
	case ae.Status == http.StatusUnauthorized:
		return fmt.Errorf("%d unauthorized: set HOOKLINE_ADMIN_TOKEN to the server's admin_token", ae.Status)
	case ae.Status == http.StatusNotFound && id != "" && !routeNotFound(ae):
		return fmt.Errorf("%d: dead item %s not found (retried, completed or deleted already? see hookline dead list)", ae.Status, id)
	case ae.Status == http.StatusNotFound:
		return fmt.Errorf("%d not found: the admin API is off on %s (the server's admin_token is empty), or --url / HOOKLINE_URL points at the wrong listener (admin_listen?)", ae.Status, base)
	case ae.Status == http.StatusBadRequest:
		return fmt.Errorf("%d bad request: %s", ae.Status, ae.Message)
	}
	return ae
}
