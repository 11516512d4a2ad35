package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/hookline/hookline/internal/app"
	"github.com/hookline/hookline/internal/config"
	"github.com/hookline/hookline/internal/pgcluster"
	"github.com/hookline/hookline/migrations"
)

// bench is one benchmark session: the Postgres cluster, the destination and
// the hookline binary, shared by every run.
type bench struct {
	o      options
	out    io.Writer
	dir    string
	server string // admin URL of the PostgreSQL server
	pmPid  int    // its postmaster's pid, when it runs on this machine
	admin  *pgx.Conn
	dest   *destination
	bin    string
	secret string
	logf   func(format string, args ...any)
}

const benchSecret = "whsec_hookline_bench_0123456789"

func run(ctx context.Context, o options, stdout io.Writer) (*Report, error) {
	b := &bench{o: o, out: stdout, secret: benchSecret, logf: func(string, ...any) {}}
	if o.verbose {
		b.logf = func(format string, args ...any) {
			fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, args...)...)
		}
	}
	dir, err := os.MkdirTemp("", "hookline-bench-")
	if err != nil {
		return nil, err
	}
	b.dir = dir
	_ = os.Chmod(dir, 0o755) // Postgres runs as the postgres user when we are root
	defer func() {
		if o.keep {
			fmt.Fprintf(stdout, "kept %s\n", dir)
			return
		}
		_ = os.RemoveAll(dir)
	}()

	if !o.inProcess {
		if b.bin = o.hookline; b.bin == "" {
			b.logf("building hookline")
			b.bin = filepath.Join(dir, "hookline")
			cmd := exec.CommandContext(ctx, "go", "build", "-o", b.bin, "github.com/hookline/hookline/cmd/hookline")
			if out, err := cmd.CombinedOutput(); err != nil {
				return nil, fmt.Errorf("go build ./cmd/hookline: %w\n%s", err, out)
			}
		}
	}

	if b.server = o.pgURL; b.server == "" {
		b.logf("starting PostgreSQL (fsync on)")
		pgLog, err := os.Create(filepath.Join(dir, "postgres.log"))
		if err != nil {
			return nil, err
		}
		defer pgLog.Close()
		pg, err := pgcluster.Start(ctx, pgcluster.Options{Dir: filepath.Join(dir, "pg"), Fast: false, Log: pgLog})
		if err != nil {
			return nil, err
		}
		defer pg.Stop()
		b.server = pg.URL("postgres")
	}
	b.admin, err = pgx.Connect(ctx, b.server)
	if err != nil {
		return nil, err
	}
	defer b.admin.Close(context.Background())
	var backend int
	if err := b.admin.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&backend); err == nil {
		if f := procStat(backend); len(f) > 1 {
			b.pmPid, _ = strconv.Atoi(f[1]) // a backend's parent is the postmaster
		}
	}
	_, _ = b.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+templateDB)
	if err := b.makeTemplate(ctx); err != nil {
		return nil, err
	}
	_, _ = b.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+riverTemplateDB)
	if err := b.makeRiverTemplate(ctx); err != nil {
		return nil, err
	}

	b.dest, err = startDestination()
	if err != nil {
		return nil, err
	}
	defer b.dest.Close()

	rep := &Report{
		Started:  time.Now().UTC(),
		Machine:  machineInfo(ctx, b.admin),
		Settings: settingsOf(o),
		OK:       true,
	}
	ingest := "" // the ingest scenario's settings (the colocated scenario prints its own)
	if slices.Contains(o.scenarios, scenarioIngest) {
		ingest = fmt.Sprintf("; ingest runs %s each; %.0f%% duplicates; %s", o.duration, o.dupRatio*100, topology(o))
	}
	fmt.Fprintf(stdout, "hookline-bench: %s, %d CPUs, %s (fsync %s); scenarios %s; hookline %s%s\n",
		rep.Machine.GoVersion, rep.Machine.CPUs, rep.Machine.Postgres, rep.Machine.Fsync, strings.Join(o.scenarios, ", "),
		map[bool]string{true: "in-process", false: "as a subprocess"}[o.inProcess], ingest)
	if err := b.runScenarios(ctx, rep); err != nil {
		return nil, err
	}
	rep.Finished = time.Now().UTC()
	rep.Summary = summarize(rep.Results)
	rep.Speedup = speedups(rep.Summary)
	rep.Ratios = drainRatios(rep.Results, o.fanout)
	rep.Targets = append(processingTargets(rep.Results, rep.Ratios), colocatedTargets(rep.Results)...)
	printFooter(stdout, rep)
	if o.out != "" {
		if err := writeResults(o.out, rep); err != nil {
			return rep, err
		}
		wrote := filepath.Join(o.out, "results.json")
		if len(ingestPoints(rep)) > 0 {
			wrote += " and " + filepath.Join(o.out, "chart.svg")
		}
		if colocatedSVG(rep) != "" {
			wrote += " and " + filepath.Join(o.out, "colocated.svg")
		}
		fmt.Fprintf(stdout, "wrote %s\n", wrote)
	}
	return rep, nil
}

// runScenarios runs each scenario's plan, printing a row per run.
func (b *bench) runScenarios(ctx context.Context, rep *Report) error {
	guess := map[string]float64{modeNaive: 3000, modeBatched: 20000, runColocatedBatched: 5000, runColocatedUnpaced: 5000, runColocatedPerEvent: 5000}
	for _, sc := range b.o.scenarios {
		switch sc {
		case scenarioIngest:
			printHeader(b.out)
		case scenarioColocated:
			printColocatedHeader(b.out, b.o)
		default:
			printDrainHeader(b.out, sc, b.o)
		}
		for _, spec := range plan(b.o, sc) {
			if err := ctx.Err(); err != nil {
				return err
			}
			r, err := b.runOne(ctx, spec, guess[spec.name])
			if err != nil {
				return fmt.Errorf("%s c=%d round %d: %w", spec.name, spec.c, spec.round, err)
			}
			if (sc == scenarioIngest || sc == scenarioColocated) && r.AcceptedPerSec > 0 {
				guess[spec.name] = r.AcceptedPerSec
			}
			rep.Results = append(rep.Results, *r)
			switch sc {
			case scenarioIngest:
				printRow(b.out, r)
			case scenarioColocated:
				printColocatedRow(b.out, r)
			default:
				printDrainRow(b.out, r)
			}
			rep.OK = rep.OK && r.ok()
		}
	}
	return nil
}

const templateDB = "hookline_bench_template"

// makeTemplate migrates a template database once; every run clones it. The
// hookline binary under test migrates it, so that its schema is the one the
// binary expects.
func (b *bench) makeTemplate(ctx context.Context) error {
	if _, err := b.admin.Exec(ctx, "CREATE DATABASE "+templateDB); err != nil {
		return err
	}
	if b.bin != "" {
		cfg := filepath.Join(b.dir, "migrate.yaml")
		text := fmt.Sprintf("database_url: %q\nsources: [{name: s, provider: stripe, secrets: [x], destination: {url: \"http://127.0.0.1:1/\"}}]\n",
			withDatabase(b.server, templateDB))
		if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
			return err
		}
		if out, err := exec.CommandContext(ctx, b.bin, "migrate", "up", "--config", cfg).CombinedOutput(); err != nil {
			return fmt.Errorf("hookline migrate up: %w\n%s", err, out)
		}
		return nil
	}
	pool, err := pgxpool.New(ctx, withDatabase(b.server, templateDB))
	if err != nil {
		return err
	}
	defer pool.Close()
	return migrations.Up(ctx, pool, nil)
}

// riverTemplateDB is the textbook runs' template: River's schema exactly
// as River's own migrations make it (hookline's migrations change River's
// indexes), with nothing of hookline's.
const riverTemplateDB = "hookline_bench_river_template"

// makeRiverTemplate migrates riverTemplateDB with rivermigrate alone.
func (b *bench) makeRiverTemplate(ctx context.Context) error {
	if _, err := b.admin.Exec(ctx, "CREATE DATABASE "+riverTemplateDB); err != nil {
		return err
	}
	pool, err := pgxpool.New(ctx, withDatabase(b.server, riverTemplateDB))
	if err != nil {
		return err
	}
	defer pool.Close()
	m, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return err
	}
	_, err = m.Migrate(ctx, rivermigrate.DirectionUp, nil)
	return err
}

// withDatabase returns the server URL u with its database replaced.
func withDatabase(u, db string) string {
	parsed, err := url.Parse(u)
	if err != nil {
		return u
	}
	parsed.Path = "/" + db
	return parsed.String()
}

// configYAML is hookline's configuration for one run. Every destination
// is the loopback destination (destURL); with several, Hookline-Destination
// tells them apart.
func (b *bench) configYAML(spec runSpec, db, listen, destURL string) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "listen: %q\ndatabase_url: %q\nshutdown_timeout: 10s\n", listen, withDatabase(b.server, db))
	if b.o.workers > 0 {
		fmt.Fprintf(&sb, "workers: %d\n", b.o.workers)
	}
	if b.o.maxConns > 0 {
		fmt.Fprintf(&sb, "database: {max_conns: %d}\n", b.o.maxConns)
	}
	fmt.Fprintf(&sb, "ingest:\n  batch: %v\n", spec.batch)
	if b.o.batchSize > 0 {
		fmt.Fprintf(&sb, "  batch_size: %d\n", b.o.batchSize)
	}
	if b.o.batchWait > 0 {
		fmt.Fprintf(&sb, "  batch_wait: %s\n", b.o.batchWait)
	}
	if b.o.queueTimeout > 0 {
		fmt.Fprintf(&sb, "  queue_timeout: %s\n", b.o.queueTimeout)
	}
	if spec.unpaced {
		sb.WriteString("  pace: false\n")
	}
	if spec.perEvent { // the worker's per-event path; batched is the default
		sb.WriteString("processing:\n  batch: false\n")
	}
	if spec.name == modeTraced {
		fmt.Fprintf(&sb, "tracing: {otlp_endpoint: %q, sample_ratio: 1}\n", b.dest.url)
	}
	fmt.Fprintf(&sb, `log: {format: json, level: warn}
sources:
  - name: stripe
    provider: stripe
    secrets: [%q]
    tolerance: 1h
`, b.secret)
	if spec.ordered {
		sb.WriteString("    ordering: {key: \"json:data.object.id\", by: \"json:created\", stale: deliver}\n")
	}
	if spec.dests <= 1 {
		fmt.Fprintf(&sb, "    destination:\n      url: %q\n      timeout: 10s\n", destURL)
		return sb.String()
	}
	sb.WriteString("    destinations:\n")
	for _, name := range spec.destNames() {
		fmt.Fprintf(&sb, "      - {name: %s, url: %q, timeout: 10s}\n", name, destURL)
	}
	return sb.String()
}

// instance is a running hookline: a subprocess or an in-process app.
type instance struct {
	url   string
	cmd   *exec.Cmd
	done  chan error
	log   string
	stop  context.CancelFunc
	inApp *app.App
}

func (b *bench) start(ctx context.Context, name, cfgText string, port int, role app.Role) (*instance, error) {
	cfgPath := filepath.Join(b.dir, name+".yaml")
	if err := os.WriteFile(cfgPath, []byte(cfgText), 0o600); err != nil {
		return nil, err
	}
	logPath := filepath.Join(b.dir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	in := &instance{url: fmt.Sprintf("http://127.0.0.1:%d", port), done: make(chan error, 1), log: logPath}
	if b.o.inProcess {
		cfg, err := config.Parse([]byte(cfgText), os.Getenv)
		if err != nil {
			logFile.Close()
			return nil, err
		}
		log := slog.New(slog.NewJSONHandler(logFile, &slog.HandlerOptions{Level: slog.LevelWarn}))
		a, err := app.New(ctx, cfg, app.Options{Role: role, NoMigrate: true, Logger: log})
		if err != nil {
			logFile.Close()
			return nil, err
		}
		runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		in.stop, in.inApp = cancel, a
		go func() { in.done <- a.Run(runCtx, nil); logFile.Close() }()
	} else {
		cmd := exec.Command(b.bin, "serve", "--config", cfgPath, "--no-migrate", "--role", string(role))
		cmd.Stdout, cmd.Stderr = logFile, logFile
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			logFile.Close()
			return nil, err
		}
		in.cmd = cmd
		go func() { in.done <- cmd.Wait(); logFile.Close() }()
	}
	// Ready: /readyz answers 200.
	deadline := time.Now().Add(30 * time.Second)
	var last string
	for {
		resp, err := http.Get(in.url + "/readyz")
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return in, nil
			}
			last = fmt.Sprintf("/readyz: %d %s", resp.StatusCode, bytes.TrimSpace(body))
		}
		select {
		case err := <-in.done:
			return nil, fmt.Errorf("hookline exited during start-up (%v): %s", err, tail(logPath))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			in.Stop()
			return nil, fmt.Errorf("hookline not ready within 30s (%s): %s", last, tail(logPath))
		}
	}
}

// Stop asks hookline to shut down (SIGTERM) and waits, killing it after 30 s.
func (in *instance) Stop() error {
	if in.stop != nil {
		in.stop()
		select {
		case err := <-in.done:
			return err
		case <-time.After(30 * time.Second):
			return errors.New("in-process hookline did not stop within 30s")
		}
	}
	_ = in.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-in.done:
		return err
	case <-time.After(30 * time.Second):
		_ = in.cmd.Process.Kill()
		<-in.done
		return errors.New("hookline did not stop within 30s; killed")
	}
}

// usage is CPU time (user+sys) and peak RSS of hookline.
func (in *instance) cpu() time.Duration {
	if in.cmd == nil {
		return selfCPU()
	}
	u, _ := procCPU(in.cmd.Process.Pid)
	return u
}

func (in *instance) peakRSS() int64 {
	if in.cmd == nil {
		var ru syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return ru.Maxrss << 10
	}
	return procHWM(in.cmd.Process.Pid)
}

// meanBatch reads the mean group-commit batch size from /metrics.
func meanBatch(base string) float64 {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	var sum, count float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "hookline_ingest_batch_size_sum "); ok {
			sum, _ = strconv.ParseFloat(v, 64)
		}
		if v, ok := strings.CutPrefix(line, "hookline_ingest_batch_size_count "); ok {
			count, _ = strconv.ParseFloat(v, 64)
		}
	}
	if count == 0 {
		return 0
	}
	return sum / count
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(bytes.TrimSpace(b))
}

// clkTck is USER_HZ, the unit of /proc/<pid>/stat times (100 on Linux).
const clkTck = 100

// procStat returns the fields of /proc/<pid>/stat after the command name
// (fields[0] is field 3, the state).
func procStat(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(b[i+1:]))
}

func ticks(s string) time.Duration {
	n, _ := strconv.ParseInt(s, 10, 64)
	return time.Duration(n) * time.Second / clkTck
}

// procCPU returns utime+stime of pid, and its reaped children's.
func procCPU(pid int) (self, children time.Duration) {
	f := procStat(pid)
	if len(f) < 15 {
		return 0, 0
	}
	return ticks(f[11]) + ticks(f[12]), ticks(f[13]) + ticks(f[14])
}

// procHWM returns the peak resident set size (VmHWM) of pid in bytes.
func procHWM(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// pgCPU is the CPU time of the whole PostgreSQL server: the postmaster,
// its exited (reaped) children, and its live children.
func pgCPU(pm int) time.Duration {
	if pm <= 1 {
		return 0
	}
	self, reaped := procCPU(pm)
	total := self + reaped
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == pm {
			continue
		}
		f := procStat(pid)
		if len(f) < 15 || f[1] != strconv.Itoa(pm) {
			continue
		}
		total += ticks(f[11]) + ticks(f[12])
	}
	return total
}

// systemCPU is the busy CPU time of the whole machine (/proc/stat).
func systemCPU() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
	var busy time.Duration
	for i := 1; i < len(f) && i <= 8; i++ {
		if i == 4 || i == 5 { // idle, iowait
			continue
		}
		busy += ticks(f[i])
	}
	return busy
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
