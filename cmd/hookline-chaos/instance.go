package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookline/hookline/internal/app"
	"github.com/hookline/hookline/internal/config"
	"github.com/hookline/hookline/jobs"
	_ "github.com/hookline/hookline/providers/all"
)

// instanceEnv, when set, makes this binary a hookline instance (kind self)
// instead of the harness. The harness sets it on the children it starts.
const instanceEnv = "HOOKLINE_CHAOS_INSTANCE"

// Settings of the Go handlers, passed to self instances by environment.
const (
	envFailRate       = "HOOKLINE_CHAOS_FAIL_RATE"
	envRandomAttempts = "HOOKLINE_CHAOS_RANDOM_ATTEMPTS"
	envOverlaps       = "HOOKLINE_CHAOS_OVERLAPS" // file the handlers append overlaps to
)

// flakyMaxInFlight is the flaky destination's max_in_flight.
const flakyMaxInFlight = 8

// ledgerDDL is the Go handlers' effect table: one row per effect, naming
// the (source, destination, event) it is for. It has no unique constraint
// on purpose: a double effect must show up as two rows.
const ledgerDDL = `CREATE TABLE IF NOT EXISTS chaos_ledger (
	id          bigserial   PRIMARY KEY,
	source      text        NOT NULL,
	destination text        NOT NULL,
	event_id    text        NOT NULL,
	event_type  text        NOT NULL,
	attempt     integer     NOT NULL,
	pid         integer     NOT NULL,
	order_key   text        NOT NULL, -- jobs.Event.OrderKey ('' unordered)
	stale       boolean     NOT NULL, -- jobs.Event.Stale
	origin      text        NOT NULL, -- jobs.Event.Origin
	at          timestamptz NOT NULL DEFAULT now())`

// instanceMain runs a hookline instance with the Go handlers registered:
// `hookline serve --config FILE --role ROLE`, plus the handler "ledger"
// (the ledger source's) and "books" (the fan-out source's books
// destination). It returns the exit code.
func instanceMain(args []string) int {
	fs := flag.NewFlagSet("instance", flag.ContinueOnError)
	cfgPath := fs.String("config", "", "config file")
	role := fs.String("role", "all", "all, ingest or worker")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	r, err := app.ParseRole(*role)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	failRate, _ := strconv.ParseFloat(os.Getenv(envFailRate), 64)
	randomAttempts, _ := strconv.Atoi(os.Getenv(envRandomAttempts))
	ov := &overlapLog{path: os.Getenv(envOverlaps)}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	a, err := app.New(ctx, cfg, app.Options{Role: r, Logger: log, Handlers: map[string]jobs.Handler{
		srcLedger: ledgerHandler(failRate, randomAttempts, true, ov),
		destBooks: ledgerHandler(failRate, randomAttempts, false, ov),
	}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "instance:", err)
		return 1
	}
	if err := a.Run(ctx, nil); err != nil {
		fmt.Fprintln(os.Stderr, "instance:", err)
		return 1
	}
	return 0
}

// ledgerHandler writes the effect of the event at its destination, then
// fails for doomed events (always, if failDoomed) and at random during the
// first attempts, and otherwise lingers a little so that kills land inside
// open transactions. A failure rolls the effect back with the claim.
//
// It first takes a transaction-scoped advisory lock on (source,
// destination, event) without waiting: while one transaction runs the
// handler for an (event, destination), no other can get the lock, so a
// refusal is two concurrent runs for one key; it is appended to ov (outside
// the transaction, which may roll back) for the harness to count. An
// ordered event takes a second one on (source, destination, ordering key):
// a refusal is two events of one key processed at once (a line "order ...").
func ledgerHandler(failRate float64, randomAttempts int, failDoomed bool, ov *overlapLog) jobs.Handler {
	pid := os.Getpid()
	return jobs.HandlerFunc(func(ctx context.Context, tx pgx.Tx, ev *jobs.Event) error {
		key := ev.Source + ":" + ev.Destination + ":" + ev.ID
		alone, err := tryXactLock(ctx, tx, "hookline-chaos:"+key)
		if err != nil {
			return err
		}
		if !alone {
			ov.add(fmt.Sprintf("%s attempt %d (pid %d)", key, ev.Attempt, pid))
		}
		if ev.OrderKey != "" {
			if alone, err = tryXactLock(ctx, tx, "hookline-chaos-order:"+ev.Source+":"+ev.Destination+":"+ev.OrderKey); err != nil {
				return err
			}
			if !alone {
				ov.add(fmt.Sprintf("%s%s:%s:%s event %s attempt %d (pid %d)", orderOverlapPrefix, ev.Source, ev.Destination, ev.OrderKey, ev.ID, ev.Attempt, pid))
			}
		}
		if _, err := tx.Exec(ctx, `INSERT INTO chaos_ledger (source, destination, event_id, event_type, attempt, pid, order_key, stale, origin)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
			ev.Source, ev.Destination, ev.ID, ev.Type, ev.Attempt, pid, ev.OrderKey, ev.Stale, ev.Origin); err != nil {
			return err
		}
		if failDoomed && isDoomed(ev.ID) {
			return errors.New("doomed event: the handler always fails")
		}
		if ev.Attempt <= randomAttempts && rand.Float64() < failRate {
			return fmt.Errorf("random handler failure on attempt %d", ev.Attempt)
		}
		select {
		case <-time.After(time.Duration(10+rand.IntN(90)) * time.Millisecond):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
}

// tryXactLock takes a transaction-scoped advisory lock on name without
// waiting; false: another transaction holds it.
func tryXactLock(ctx context.Context, tx pgx.Tx, name string) (bool, error) {
	var ok bool
	err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock(hashtextextended($1, 0))`, name).Scan(&ok)
	return ok, err
}

// orderOverlapPrefix starts an overlap line of two events of one ordering
// key in the handler at once.
const orderOverlapPrefix = "order "

func isDoomed(eventID string) bool { return strings.HasSuffix(eventID, "_doom") }

// overlapLog is the file a self instance's handlers append concurrent runs
// to, one line each; the harness reads every instance's lines (O_APPEND
// writes of one short line do not interleave).
type overlapLog struct {
	path string
	mu   sync.Mutex
}

func (l *overlapLog) add(line string) {
	if l.path == "" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	f, err := os.OpenFile(l.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	_, _ = f.WriteString(line + "\n")
	_ = f.Close()
}

// readOverlaps returns the lines the handlers appended to path.
func readOverlaps(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if line != "" {
			out = append(out, line)
		}
	}
	return out, nil
}

// proc is one hookline instance process, restartable on the same address.
type proc struct {
	idx     int
	spec    instanceSpec
	addr    string
	cfgPath string
	logPath string
	bin     string // hookline binary (serve) or this executable (self)
	env     []string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	starts int
}

func (p *proc) name() string { return fmt.Sprintf("#%d %s", p.idx, p.spec) }

// start launches the process and waits (bounded) until /healthz answers.
func (p *proc) start(ctx context.Context) error {
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	var cmd *exec.Cmd
	if p.spec.kind == "serve" {
		cmd = exec.Command(p.bin, "serve", "--config", p.cfgPath, "--role", p.spec.role)
	} else {
		cmd = exec.Command(p.bin, "--config", p.cfgPath, "--role", p.spec.role)
		cmd.Env = append(os.Environ(), append([]string{instanceEnv + "=1"}, p.env...)...)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	// The instance dies with the harness (Linux), so a killed run leaves
	// nothing behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", p.name(), err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(exited) }()
	p.mu.Lock()
	p.cmd, p.exited = cmd, exited
	p.starts++
	p.mu.Unlock()

	deadline := time.Now().Add(90 * time.Second)
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		select {
		case <-exited:
			return fmt.Errorf("%s exited during start-up (exit %d); see %s", p.name(), cmd.ProcessState.ExitCode(), p.logPath)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if resp, err := client.Get("http://" + p.addr + "/healthz"); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not answer /healthz within 90s; see %s", p.name(), p.logPath)
		}
	}
}

func (p *proc) startCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.starts
}

// kill SIGKILLs the process and waits for it to be gone.
func (p *proc) kill() {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-exited
}

// stop asks for a graceful shutdown (SIGTERM), then kills after grace.
func (p *proc) stop(grace time.Duration) {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(grace):
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-exited
	}
}

// alive reports whether the process is running.
func (p *proc) alive() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exited == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// instanceConfig is the YAML every instance gets; only listen differs.
// destBase is the chaos destination server's base URL (destPath), reconURL
// the fake Stripe events API's.
func instanceConfig(o Options, listen, dbURL, destBase, reconURL string) string {
	ms := func(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) + "ms" }
	retries := fmt.Sprintf("max_attempts: %d\n        backoff: {min: %s, max: %s}", o.MaxAttempts, ms(o.BackoffMin), ms(o.BackoffMax))
	var b strings.Builder
	fmt.Fprintf(&b, `# Written by hookline-chaos.
listen: %q
database_url: %q
workers: %d
admin_token: %q
shutdown_timeout: 5s
log: {format: json, level: info}
database: {max_conns: 24}
sources:
  - name: %s
    provider: stripe
    secrets: [%q]
    lease: %s
    destination:
      url: %q
      timeout: %s
      max_attempts: %d
      backoff: {min: %s, max: %s}
`, listen, dbURL, o.Workers, adminToken, srcHTTP, stripeSecret, ms(o.Lease), destBase+destPath(srcHTTP, destDefault), ms(o.DestTimeout), o.MaxAttempts, ms(o.BackoffMin), ms(o.BackoffMax))
	if o.LedgerShare > 0 {
		fmt.Fprintf(&b, `  - name: %s
    provider: stripe
    secrets: [%q]
    lease: %s
    destination:
      max_attempts: %d
      backoff: {min: %s, max: %s}
`, srcLedger, stripeSecret, ms(o.Lease), o.MaxAttempts, ms(o.BackoffMin), ms(o.BackoffMax))
	}
	if o.FanoutShare > 0 {
		// The filters are fanoutRoutes's: books takes the types
		// booksTypePrefix*, flaky the bodies whose data.object.region is
		// flakyRegion; sink takes every event.
		fmt.Fprintf(&b, `  - name: %s
    provider: stripe
    secrets: [%q]
    lease: %s
    destinations:
      - name: %s
        url: %q
        timeout: %s
        %s
      - name: %s
        handler: %s
        types: [%q]
        timeout: %s
        %s
      - name: %s
        url: %q
        where: {"data.object.region": %q}
        timeout: %s
        max_in_flight: %d
        %s
`, srcFanout, stripeSecret, ms(o.Lease),
			destSink, destBase+destPath(srcFanout, destSink), ms(o.DestTimeout), retries,
			destBooks, destBooks, booksTypePrefix+"*", ms(o.DestTimeout), retries,
			destFlaky, destBase+destPath(srcFanout, destFlaky), flakyRegion, ms(o.DestTimeout), flakyMaxInFlight, retries)
	}
	if o.OrderedKeys > 0 {
		// Ordered per data.object.id; created is the provider's time, so an
		// event older than one already forwarded is stale (delivered,
		// marked).
		writeHookBooksSource(&b, o, srcOrdered, destBase, retries,
			`ordering: {key: "json:data.object.id", by: "json:created", stale: deliver}`)
	}
	if o.ReconEvents > 0 {
		writeHookBooksSource(&b, o, srcRecon, destBase, retries,
			fmt.Sprintf("reconcile: {every: %s, lookback: %s, api_key: %q, api_url: %q}", ms(o.ReconEvery), reconLookback, reconAPIKey, reconURL))
	}
	return b.String()
}

// writeHookBooksSource writes a source with the destinations destHook
// (HTTP, failing at random like flaky) and destBooks (the Go handler in
// transactional mode) and the extra line extra (its ordering or reconcile
// block).
func writeHookBooksSource(b *strings.Builder, o Options, name, destBase, retries, extra string) {
	ms := func(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) + "ms" }
	fmt.Fprintf(b, `  - name: %s
    provider: stripe
    secrets: [%q]
    lease: %s
    %s
    destinations:
      - name: %s
        url: %q
        timeout: %s
        %s
      - name: %s
        handler: %s
        timeout: %s
        %s
`, name, stripeSecret, ms(o.Lease), extra,
		destHook, destBase+destPath(name, destHook), ms(o.DestTimeout), retries,
		destBooks, destBooks, ms(o.DestTimeout), retries)
}
