// Package cli is the hookline command: `hookline serve`, `dev`, `check`,
// `migrate`, `send` and the rest, callable from a Go program so that it can
// register Go handlers (transactional mode) by the names a configuration's
// destinations give them (`handler: ledger`):
//
//	func main() {
//		os.Exit(cli.Main(os.Args[1:], cli.Options{Handlers: map[string]jobs.Handler{"ledger": ledger}}))
//	}
//
// cmd/hookline is Main with no handlers.
//
// Usage:
//
//	hookline serve   [--config FILE] [--role all|ingest|worker] [--no-migrate]
//	hookline migrate up|down|status [--config FILE] [--all]
//	hookline dev     [--listen ADDR]
//	hookline send    --config FILE --source NAME [--file F] [--event-id ID] [--type T] [--url URL]
//	hookline check   [--config FILE] [--db]
//	hookline providers
//	hookline dead    list|show|retry|delete ...
//	hookline destinations list|pause|resume ...
//	hookline reconcile --source NAME
//
// --config defaults to $HOOKLINE_CONFIG, then ./hookline.yaml. A bad
// configuration exits with code 2 and names the field. Exit codes: 0 done
// (and -h, --help), 1 the server, database or network refused, 2 bad usage
// (an unknown flag, an argument a command does not take).
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"

	"github.com/hookline/hookline/internal/config"
	"github.com/hookline/hookline/internal/tracing"
	"github.com/hookline/hookline/jobs"
	_ "github.com/hookline/hookline/providers/all"
)

const usage = `hookline — webhook ingestion with exactly-once processing

Commands:
  serve      run ingest, admin and workers   (--config, --role all|ingest|worker, --no-migrate)
  migrate    up | down [--all] | status       (--config)
  dev        run on a local Postgres with a demo source (no setup)
  send       sign and POST a sample event     (--config, --source, --file, --event-id, --type, --url)
  check      validate the config              (--config, --db)
  providers  list the provider adapters
  dead       list | show | retry | delete dead items through the admin API
  destinations list | pause | resume destinations through the admin API
  reconcile  fetch the events a provider never delivered (--source), through the admin API

Run 'hookline COMMAND -h' for a command's flags.
Exit codes: 0 done, 1 the server, database or network refused, 2 bad usage.
`

// exitError carries an exit code.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }

// Options are what a Go program adds to the hookline command.
type Options struct {
	// Handlers are Go handlers by the name a destination's `handler:`
	// gives (or, for a source's single destination without a URL, the
	// source's name). serve, dev and check use them.
	Handlers map[string]jobs.Handler
}

// Main runs the hookline command with args (without the program's name),
// writing to os.Stdout and os.Stderr, and returns the exit code.
func Main(args []string, opts Options) int {
	setGCPercent()
	return (&command{handlers: opts.Handlers}).run(args, os.Stdout, os.Stderr)
}

// command is one run of the hookline command.
type command struct {
	handlers map[string]jobs.Handler
}

// defaultGOGC is hookline's garbage-collection target when GOGC is not set.
// Its heap is small and short-lived (request bodies and batches on their way
// to Postgres): under load, Go's default of 100 collects it hundreds of
// times a second; 400 trades some tens of MB for CPU (docs/performance.md).
// GOGC and GOMEMLIMIT in the environment still apply.
const defaultGOGC = 400

func setGCPercent() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(defaultGOGC)
	}
}

// memoryLimit is the Go runtime's soft memory limit for a configuration
// when GOMEMLIMIT is not set: room for max_pending_bytes of request bodies
// held at once, as much again for their copies on the way to Postgres,
// and 256 MiB for everything else. With defaultGOGC the heap may otherwise
// grow to five times what is live (large bodies in flight: gigabytes); the
// limit makes the collector run sooner instead. It is soft: a process whose
// live memory passes it keeps running, collecting more often.
func memoryLimit(cfg *config.Config) int64 {
	return 2*cfg.Ingest.MaxPendingBytes + 256<<20
}

// setMemoryLimit applies memoryLimit unless GOMEMLIMIT is set, and returns
// the limit in force (0: GOMEMLIMIT's).
func setMemoryLimit(cfg *config.Config) int64 {
	if os.Getenv("GOMEMLIMIT") != "" {
		return 0
	}
	limit := memoryLimit(cfg)
	debug.SetMemoryLimit(limit)
	return limit
}

func (c *command) run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "serve":
		err = c.serve(args[1:], stdout, stderr)
	case "migrate":
		err = cmdMigrate(args[1:], stdout, stderr)
	case "dev":
		err = c.dev(args[1:], stdout, stderr)
	case "send":
		err = cmdSend(args[1:], stdout, stderr)
	case "check":
		err = c.check(args[1:], stdout, stderr)
	case "providers":
		err = cmdProviders(args[1:], stdout)
	case "dead":
		return cmdDead(args[1:], stdout, stderr)
	case "destinations":
		return cmdDestinations(args[1:], stdout, stderr)
	case "reconcile":
		return cmdReconcile(args[1:], stdout, stderr)
	case "-h", "--help", "help":
		// `hookline help COMMAND` is `hookline COMMAND --help`: that
		// command's usage and flags, not the list of commands.
		// An unknown COMMAND is refused as an unknown command is.
		if len(args) > 1 && args[0] == "help" && args[1] != "help" && args[1] != "-h" && args[1] != "--help" {
			return c.run([]string{args[1], "--help"}, stdout, stderr)
		}
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "hookline: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	if err == nil || errors.Is(err, errHelp) {
		return 0
	}
	// A message may quote what a server answered (send): escaped.
	fmt.Fprintln(stderr, "hookline:", safeLines(err.Error(), ""))
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	if errors.Is(err, config.ErrInvalid) {
		return 2
	}
	return 1
}

// errHelp says a command printed its help (-h, --help) on stdout: exit 0.
var errHelp = errors.New("help printed")

// parseFlags parses the flags of `hookline <fs.Name()>`, a command that
// takes no arguments besides its flags. usage is its help: with -h or
// --help it is printed on stdout with the flags' descriptions (errHelp,
// exit 0). An unknown or bad flag and a stray argument are bad usage (exit
// 2), named: Go's flag package stops at the first argument that is not a
// flag, so running anyway would silently drop every flag after it (a
// --config among them).
func parseFlags(fs *flag.FlagSet, args []string, stdout io.Writer, usage string) error {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stdout, usage)
		if hasFlags(fs) {
			fmt.Fprintln(stdout, "\nflags:")
			fs.SetOutput(stdout)
			fs.PrintDefaults()
		}
		return errHelp
	case err != nil:
		return &exitError{2, fmt.Errorf("%s: %w (hookline %s -h lists its flags)", fs.Name(), err, fs.Name())}
	case fs.NArg() > 0:
		return &exitError{2, strayArgument(fs, fs.Arg(0))}
	}
	return nil
}

// strayArgument says that `hookline <fs.Name()>` takes no argument arg; for
// a command with --config, an argument that looks like a config file (and
// any argument of check) is pointed at --config.
func strayArgument(fs *flag.FlagSet, arg string) error {
	name := fs.Name()
	msg := fmt.Sprintf("%s: unexpected argument %q (%s takes only flags; hookline %s -h lists them)", name, arg, name, name)
	if !hasFlags(fs) {
		msg = fmt.Sprintf("%s: unexpected argument %q (%s takes no arguments)", name, arg, name)
	}
	if fs.Lookup("config") != nil && (name == "check" || strings.HasSuffix(arg, ".yaml") || strings.HasSuffix(arg, ".yml")) {
		what := "to use that file as the config"
		if name == "check" {
			what = "to check that file"
		}
		msg = fmt.Sprintf("%s: unexpected argument %q (%s takes no arguments; %s: hookline %s --config %s)", name, arg, name, what, name, arg)
	}
	return errors.New(msg)
}

func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

// configPath resolves --config: the flag, then $HOOKLINE_CONFIG, then ./hookline.yaml.
func configPath(flagValue string) string {
	if flagValue != "" {
		return flagValue
	}
	if p := os.Getenv("HOOKLINE_CONFIG"); p != "" {
		return p
	}
	return "hookline.yaml"
}

// newLogger returns a structured logger: JSON in production, text in dev.
func newLogger(w io.Writer, format, level string) *slog.Logger {
	var lv slog.Level
	switch level {
	case "debug":
		lv = slog.LevelDebug
	case "warn":
		lv = slog.LevelWarn
	case "error":
		lv = slog.LevelError
	}
	opts := &slog.HandlerOptions{Level: lv}
	if format == "text" {
		return slog.New(tracing.LogHandler(slog.NewTextHandler(w, opts)))
	}
	return slog.New(tracing.LogHandler(slog.NewJSONHandler(w, opts)))
}
