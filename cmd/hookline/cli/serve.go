package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"

	"github.com/hookline/hookline/internal/app"
	"github.com/hookline/hookline/internal/config"
	"github.com/hookline/hookline/migrations"
)

// serveUsage is the help of `hookline serve`.
const serveUsage = `usage: hookline serve [--config FILE] [--role all|ingest|worker] [--no-migrate]

Run ingest, the admin API and the workers (--role picks a part); pending
migrations are applied first unless --no-migrate. SIGTERM or SIGINT drains
within shutdown_timeout and exits 0.
`

func (c *command) serve(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	cfgPath := fs.String("config", "", "config file (default $HOOKLINE_CONFIG, then ./hookline.yaml)")
	role := fs.String("role", "all", "what to run: all, ingest or worker")
	noMigrate := fs.Bool("no-migrate", false, "do not apply pending migrations at start")
	if err := parseFlags(fs, args, stdout, serveUsage); err != nil {
		return err
	}
	r, err := app.ParseRole(*role)
	if err != nil {
		return &exitError{2, err}
	}
	cfg, err := config.Load(configPath(*cfgPath))
	if err != nil {
		return err
	}
	log := newLogger(stderr, cfg.Log.Format, cfg.Log.Level)
	if limit := setMemoryLimit(cfg); limit > 0 {
		log.Debug("memory soft limit set (GOMEMLIMIT overrides it)", "bytes", limit)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	a, err := app.New(ctx, cfg, app.Options{Role: r, NoMigrate: *noMigrate, Logger: log, Handlers: c.handlers})
	if err != nil {
		if ctx.Err() != nil {
			// SIGTERM/SIGINT while starting (waiting for the migration lock,
			// migrating): a migration stopped midway was rolled back.
			log.Info("stopped while starting; nothing was served", "error", err.Error())
			return nil
		}
		return err
	}
	stopProfile, err := cpuProfile(os.Getenv(cpuProfileEnv))
	if err != nil {
		return err
	}
	defer stopProfile()
	return a.Run(ctx, nil)
}

// cpuProfileEnv names a file: serve writes a CPU profile of its whole run
// there (read it with go tool pprof), for finding where a worker's or an
// ingest's time goes under a real load.
const cpuProfileEnv = "HOOKLINE_CPU_PROFILE"

func cpuProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cpuProfileEnv, err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", cpuProfileEnv, err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// migrateUsage is the help of `hookline migrate`.
const migrateUsage = `usage: hookline migrate up|down|status [--config FILE] [--all]
  up: apply River's and hookline's pending migrations; down: roll back hookline's latest (--all: every one, then River's); status: what is applied
`

func cmdMigrate(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return &exitError{2, fmt.Errorf("migrate: want up, down or status")}
	}
	dir := args[0]
	fs := flag.NewFlagSet("migrate "+dir, flag.ContinueOnError)
	cfgPath := fs.String("config", "", "config file (default $HOOKLINE_CONFIG, then ./hookline.yaml)")
	all := fs.Bool("all", false, "with down: roll back every hookline migration, then River's")
	switch dir {
	case "-h", "-help", "--help", "help":
		return parseFlags(fs, []string{"-h"}, stdout, migrateUsage) // the help, exit 0
	case "up", "down", "status":
	default:
		if strings.HasPrefix(dir, "-") {
			return &exitError{2, fmt.Errorf("migrate: the direction comes first, then the flags: hookline migrate up|down|status [--config FILE] [--all]")}
		}
		return &exitError{2, fmt.Errorf("migrate: unknown direction %q (want up, down or status)", dir)}
	}
	// After the direction, only flags: `migrate down oops --config prod.yaml`
	// is refused rather than run against the default config.
	if err := parseFlags(fs, args[1:], stdout, migrateUsage); err != nil {
		return err
	}
	if *all && dir != "down" {
		return &exitError{2, fmt.Errorf("migrate %s: --all applies only to migrate down", dir)}
	}
	// Only the database settings: a migration step needs no source secrets.
	cfg, err := config.LoadDatabase(configPath(*cfgPath))
	if err != nil {
		return err
	}
	ctx := context.Background()
	pool, err := app.NewPool(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	logf := func(format string, args ...any) { fmt.Fprintf(stdout, format+"\n", args...) }
	switch dir {
	case "up":
		if err := migrations.Up(ctx, pool, logf); err != nil {
			return err
		}
		fmt.Fprintln(stdout, "up to date")
		return nil
	case "down":
		return migrations.Down(ctx, pool, *all, logf)
	default: // status
		st, err := migrations.Check(ctx, pool)
		if err != nil {
			return err
		}
		printStatus(stdout, st)
		if !st.Current() {
			return &exitError{1, fmt.Errorf("migrations pending: run `hookline migrate up`")}
		}
		return nil
	}
}

func printStatus(w io.Writer, st migrations.Status) {
	riverAt := 0
	if n := len(st.RiverApplied); n > 0 {
		riverAt = st.RiverApplied[n-1]
	}
	fmt.Fprintf(w, "river:    version %d of %d\n", riverAt, st.RiverLatest)
	done := map[int]bool{}
	for _, v := range st.HooklineDone {
		done[v] = true
	}
	for _, m := range st.HooklineKnown {
		mark := "pending"
		if done[m.Version] {
			mark = "applied"
		}
		fmt.Fprintf(w, "hookline: %03d_%s %s\n", m.Version, m.Name, mark)
	}
}
