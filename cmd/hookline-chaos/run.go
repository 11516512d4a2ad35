package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookline/hookline/internal/pgcluster"
	hjobs "github.com/hookline/hookline/jobs"
)

// Time bounds the harness checks (docs/chaos.md).
const (
	outageAnswerBound = 5 * time.Second  // each ingest answer during an outage
	rescuerInterval   = 30 * time.Second // River's stuck-job rescuer
	slack             = 15 * time.Second // scheduling noise on a loaded 2-core machine
)

// harness is one run's state.
type harness struct {
	o     Options
	start time.Time
	rng   *rand.Rand
	logw  io.Writer
	dir   string

	pgMu    sync.Mutex
	pg      *pgcluster.Cluster
	pgLog   *os.File
	pool    *pgxpool.Pool // the harness's own connections (checks, monitor)
	out     outage
	lastUp  atomic.Int64 // unix nanos of the last Postgres start (0: never restarted)
	events  []*event
	dest    *destination
	procs   []*proc
	stats   sendStats
	faultMu sync.Mutex
	faults  []string
	vioMu   sync.Mutex
	vio     []string
	// probes during outages
	probe503s, probeReadyz503 atomic.Int64
	stuckMax                  atomic.Int64
	stuckExample              atomic.Value // string
}

func (h *harness) logf(format string, args ...any) {
	if h.logw != nil {
		fmt.Fprintf(h.logw, "[%6.1fs] %s\n", time.Since(h.start).Seconds(), fmt.Sprintf(format, args...))
	}
}

func (h *harness) violation(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	h.vioMu.Lock()
	h.vio = append(h.vio, msg)
	h.vioMu.Unlock()
	h.logf("VIOLATION: %s", msg)
}

func (h *harness) fault(format string, args ...any) {
	msg := fmt.Sprintf("%6.1fs  %s", time.Since(h.start).Seconds(), fmt.Sprintf(format, args...))
	h.faultMu.Lock()
	h.faults = append(h.faults, msg)
	h.faultMu.Unlock()
	h.logf("fault: %s", fmt.Sprintf(format, args...))
}

// Run runs the scenario and returns its report; an error means the harness
// itself could not run (no Postgres binaries, a build failure, ...).
func Run(ctx context.Context, o Options) (*Report, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	specs, _ := parseInstances(o.Instances, o.handlers())
	if o.Seed == 0 {
		o.Seed = time.Now().UnixNano()
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	h := &harness{o: o, start: time.Now(), rng: rand.New(rand.NewPCG(uint64(o.Seed), 0x6b6c)), logw: o.Log}
	rep := &Report{Options: o}

	var err error
	if h.dir, err = workDir(o.Dir); err != nil {
		return nil, err
	}
	rep.Dir = h.dir
	h.logf("working directory %s (seed %d)", h.dir, o.Seed)

	// Binaries.
	hooklineBin := o.HooklineBin
	needServe := false
	for _, s := range specs {
		needServe = needServe || s.kind == "serve"
	}
	if needServe && hooklineBin == "" {
		hooklineBin = filepath.Join(h.dir, "hookline")
		h.logf("building cmd/hookline ...")
		if err := buildHookline(ctx, hooklineBin, o.Race); err != nil {
			return nil, err
		}
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}

	// Postgres.
	if h.pgLog, err = os.OpenFile(filepath.Join(h.dir, "postgres.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
		return nil, err
	}
	defer h.pgLog.Close()
	h.logf("starting Postgres ...")
	if h.pg, err = pgcluster.Start(ctx, pgcluster.Options{Dir: filepath.Join(h.dir, "pg"), Fast: o.PGFast, Log: h.pgLog}); err != nil {
		return nil, err
	}
	defer func() { h.pgMu.Lock(); _ = h.pg.Stop(); h.pgMu.Unlock() }()
	dbURL := h.pg.URL("postgres")
	pcfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return nil, err
	}
	pcfg.MaxConns = 4
	pcfg.ConnConfig.ConnectTimeout = 2 * time.Second
	if h.pool, err = pgxpool.NewWithConfig(ctx, pcfg); err != nil {
		return nil, err
	}
	defer h.pool.Close()
	if _, err := h.pool.Exec(ctx, ledgerDDL); err != nil {
		return nil, fmt.Errorf("create chaos_ledger: %w", err)
	}

	// Events and the HTTP destinations.
	h.events = makeEvents(o, h.rng)
	h.dest = newDestination(h.events, o)
	destSrv, destBase, err := serveDestination(h.dest)
	if err != nil {
		return nil, err
	}
	defer destSrv.Close()

	// Instances, all started at once on the empty database: their
	// migrations race under the advisory lock.
	for i, s := range specs {
		addr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		p := &proc{idx: i, spec: s, addr: addr,
			cfgPath: filepath.Join(h.dir, fmt.Sprintf("instance-%d.yaml", i)),
			logPath: filepath.Join(h.dir, fmt.Sprintf("instance-%d.log", i)),
			bin:     hooklineBin,
			env: []string{envFailRate + "=" + strconv.FormatFloat(o.FailRate, 'g', -1, 64), envRandomAttempts + "=" + strconv.Itoa(o.RandomAttempts),
				envOverlaps + "=" + h.overlapsPath()}}
		if s.kind == "self" {
			p.bin = self
		}
		if err := os.WriteFile(p.cfgPath, []byte(instanceConfig(o, addr, dbURL, destBase)), 0o600); err != nil {
			return nil, err
		}
		h.procs = append(h.procs, p)
	}
	defer func() {
		for _, p := range h.procs {
			p.kill()
		}
	}()
	h.logf("starting %d instances at once on an empty database: %s", len(specs), strings.Join(o.Instances, ", "))
	var wg sync.WaitGroup
	startErrs := make([]error, len(h.procs))
	for i, p := range h.procs {
		wg.Go(func() { startErrs[i] = p.start(ctx) })
	}
	wg.Wait()
	if err := errors.Join(startErrs...); err != nil {
		return nil, err
	}
	for _, p := range h.procs {
		if code := h.getStatus(ctx, p, "/readyz"); code != http.StatusOK {
			h.violation("%s: /readyz answered %d after start-up", p.name(), code)
		}
	}

	// Monitor stuck claims while everything runs.
	monCtx, stopMon := context.WithCancel(ctx)
	monDone := make(chan struct{})
	go func() { defer close(monDone); h.monitor(monCtx) }()

	// Senders.
	h.logf("sending %d events x %d deliveries with %d senders", o.Events, o.Deliveries, o.Senders)
	sendStart := time.Now()
	work := make(chan *event, o.Senders)
	deliveries := make([]*event, 0, o.Events*o.Deliveries)
	for range o.Deliveries {
		deliveries = append(deliveries, h.events...)
	}
	h.rng.Shuffle(len(deliveries), func(i, j int) { deliveries[i], deliveries[j] = deliveries[j], deliveries[i] })
	var limiter <-chan time.Time
	if o.Rate > 0 {
		t := time.NewTicker(time.Duration(float64(time.Second) / o.Rate))
		defer t.Stop()
		limiter = t.C
	}
	transport := &http.Transport{MaxIdleConns: o.Senders * 2, MaxIdleConnsPerHost: o.Senders, IdleConnTimeout: 30 * time.Second}
	defer transport.CloseIdleConnections()
	snd := &sender{
		targets: h.ingestAddrs,
		client:  &http.Client{Transport: transport, Timeout: 15 * time.Second},
		stats:   &h.stats, out: &h.out, limiter: limiter,
		giveUp: time.Duration(o.PGRestarts+1)*o.PGDown + 2*time.Minute,
	}
	sendersDone := make(chan struct{})
	var swg sync.WaitGroup
	for i := range o.Senders {
		rng := rand.New(rand.NewPCG(uint64(o.Seed), uint64(i)+1))
		swg.Go(func() { snd.run(ctx, work, rng) })
	}
	go func() {
		defer close(work)
		for _, ev := range deliveries {
			select {
			case work <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()
	go func() { swg.Wait(); close(sendersDone) }()

	// Faults, spread over the sending.
	chaosErr := h.chaos(ctx, int64(len(deliveries)), sendersDone)
	<-sendersDone
	rep.SendTime = time.Since(sendStart)
	h.logf("senders done: %d requests, %d accepted, %d duplicates", h.stats.requests.Load(), h.stats.accepted.Load(), h.stats.duplicates.Load())
	if chaosErr != nil {
		stopMon()
		<-monDone
		return h.finish(ctx, rep, chaosErr)
	}

	// Settle: wait for every event to finish.
	settleStart := time.Now()
	h.settle(ctx)
	rep.SettleTime = time.Since(settleStart)
	stopMon()
	<-monDone

	h.check(ctx, rep)

	// Graceful shutdown: every instance drains and exits 0 (SIGTERM).
	for _, p := range h.procs {
		wg.Go(func() {
			p.stop(30 * time.Second)
			if code := p.cmd.ProcessState.ExitCode(); code != 0 {
				h.violation("%s: exit code %d after SIGTERM (want 0)", p.name(), code)
			}
		})
	}
	wg.Wait()
	return h.finish(ctx, rep, nil)
}

func (h *harness) finish(_ context.Context, rep *Report, err error) (*Report, error) {
	rep.Duration = time.Since(h.start)
	rep.Faults = h.faults
	if err != nil {
		rep.Aborted = err.Error()
	}
	h.vioMu.Lock()
	rep.Violations = append(rep.Violations, h.vio...)
	h.vioMu.Unlock()
	if err == nil && len(rep.Violations) == 0 && !h.o.Keep && h.o.Dir == "" {
		_ = os.RemoveAll(h.dir)
		rep.Dir = ""
	}
	return rep, err
}

// overlapsPath is the file the self instances' Go handlers append
// concurrent runs for one (destination, event) to (overlapLog).
func (h *harness) overlapsPath() string { return filepath.Join(h.dir, "handler-overlaps.log") }

func workDir(dir string) (string, error) {
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "hookline-chaos-"); err != nil {
			return "", err
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// Postgres runs as the postgres user when we are root: it must reach it.
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", err
	}
	return filepath.Abs(dir)
}

func buildHookline(ctx context.Context, out string, race bool) error {
	args := []string{"build", "-o", out}
	if race {
		args = append(args, "-race")
	}
	args = append(args, "github.com/hookline/hookline/cmd/hookline")
	cmd := exec.CommandContext(ctx, "go", args...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build cmd/hookline: %w\n%s", err, b)
	}
	return nil
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// ingestAddrs lists the instances that serve the ingest route (alive or not:
// a sender that finds one dead tries another).
func (h *harness) ingestAddrs() []string {
	var out []string
	for _, p := range h.procs {
		if p.spec.ingests() {
			out = append(out, p.addr)
		}
	}
	return out
}

var probeClient = &http.Client{Timeout: 10 * time.Second}

func (h *harness) getStatus(ctx context.Context, p *proc, path string) int {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.addr+path, nil)
	resp, err := probeClient.Do(req)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// chaos runs the faults in sequence, each when its share of the deliveries
// is done (or at once when the senders have finished): kills and Postgres
// restarts interleaved.
func (h *harness) chaos(ctx context.Context, total int64, sendersDone <-chan struct{}) error {
	var plan []string
	k, r := h.o.Kills, h.o.PGRestarts
	for k > 0 || r > 0 {
		if k > 0 {
			plan = append(plan, "kill")
			k--
		}
		if r > 0 {
			plan = append(plan, "pg")
			r--
		}
	}
	killed := 0
	for j, f := range plan {
		threshold := total * int64(j+1) / int64(len(plan)+1)
		for h.stats.done.Load() < threshold {
			select {
			case <-sendersDone:
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(20 * time.Millisecond):
				continue
			}
			break
		}
		var err error
		switch f {
		case "kill":
			err = h.killOne(ctx, killed == 0)
			killed++
		case "pg":
			err = h.restartPostgres(ctx)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// killOne SIGKILLs a random instance and restarts it after a short pause.
func (h *harness) killOne(ctx context.Context, worker bool) error {
	// The first victim runs workers, so that deliveries are cut; later ones
	// are instances not killed yet, while there are any.
	var pick, fresh []*proc
	for _, p := range h.procs {
		if !worker || p.spec.works() {
			pick = append(pick, p)
			if p.startCount() == 1 {
				fresh = append(fresh, p)
			}
		}
	}
	if len(fresh) > 0 {
		pick = fresh
	}
	p := pick[h.rng.IntN(len(pick))]
	h.fault("SIGKILL %s (%d deliveries done)", p.name(), h.stats.done.Load())
	p.kill()
	sleepCtx(ctx, time.Duration(300+h.rng.IntN(1200))*time.Millisecond)
	// Like a process supervisor, start it again if it exits during
	// start-up (on a loaded machine its first connection to Postgres may
	// time out); each failed start is listed among the faults.
	for try := 1; ; try++ {
		t := time.Now()
		err := p.start(ctx)
		if err == nil {
			h.fault("restarted %s (healthy after %s)", p.name(), time.Since(t).Round(time.Millisecond))
			return nil
		}
		if try == restartTries || ctx.Err() != nil {
			return fmt.Errorf("restart after kill: %w", err)
		}
		h.fault("restart of %s failed (%v); starting it again", p.name(), err)
		p.kill() // in case it is still running (no /healthz in time)
		sleepCtx(ctx, time.Second)
	}
}

// restartTries bounds the starts of a killed instance.
const restartTries = 3

// restartPostgres stops Postgres, keeps it down for PGDown while probing
// ingest and /readyz, starts it again on the same directory and port, and
// waits for every instance to be ready again.
func (h *harness) restartPostgres(ctx context.Context) error {
	h.fault("stopping Postgres (%d deliveries done)", h.stats.done.Load())
	h.pgMu.Lock()
	_ = h.pg.Stop()
	h.pgMu.Unlock()
	h.out.set(true)
	downAt := time.Now()
	h.fault("Postgres down; probing for %s", h.o.PGDown)

	probeN := 0
	for time.Since(downAt) < h.o.PGDown {
		var wg sync.WaitGroup
		for _, p := range h.procs {
			if !p.alive() {
				continue
			}
			wg.Go(func() { h.probeReadyz(ctx, p, http.StatusServiceUnavailable, "while Postgres is down") })
			if p.spec.ingests() {
				probeN++
				n := probeN
				wg.Go(func() { h.probeIngest(ctx, p, n) })
			}
		}
		wg.Wait()
		sleepCtx(ctx, time.Second)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}

	h.out.set(false)
	h.pgMu.Lock()
	c, err := pgcluster.Start(ctx, pgcluster.Options{Dir: h.pg.Dir, Port: h.pg.Port, Fast: h.o.PGFast, Log: h.pgLog})
	if err == nil {
		h.pg = c
	}
	h.pgMu.Unlock()
	if err != nil {
		return fmt.Errorf("restart Postgres: %w", err)
	}
	h.lastUp.Store(time.Now().UnixNano())
	h.fault("Postgres started again after %s down", time.Since(downAt).Round(100*time.Millisecond))

	// Every instance becomes ready again by itself.
	t := time.Now()
	for _, p := range h.procs {
		deadline := time.Now().Add(60 * time.Second)
		for h.getStatus(ctx, p, "/readyz") != http.StatusOK {
			if time.Now().After(deadline) {
				h.violation("%s: /readyz not 200 within 60s after Postgres came back", p.name())
				break
			}
			sleepCtx(ctx, 200*time.Millisecond)
		}
	}
	h.fault("every instance ready again %s after Postgres started", time.Since(t).Round(time.Millisecond))
	return nil
}

func (h *harness) probeReadyz(ctx context.Context, p *proc, want int, when string) {
	start := time.Now()
	code := h.getStatus(ctx, p, "/readyz")
	took := time.Since(start)
	if !p.alive() || ctx.Err() != nil {
		return
	}
	h.probeReadyz503.Add(1)
	if code != want {
		h.violation("%s: /readyz answered %d %s (want %d)", p.name(), code, when, want)
	}
	if took > outageAnswerBound {
		h.violation("%s: /readyz took %s %s (bound %s)", p.name(), took.Round(time.Millisecond), when, outageAnswerBound)
	}
}

// probeIngest posts a fresh event during the outage: it must be answered
// 503 with Retry-After in whole seconds, within 5 s, and never 2xx.
func (h *harness) probeIngest(ctx context.Context, p *proc, n int) {
	ev := &event{source: srcHTTP, id: fmt.Sprintf("evt_probe_%d", n)}
	ev.body = []byte(`{"id":"` + ev.id + `","object":"event","type":"chaos.probe","created":1764504000}`)
	s := &sender{client: probeClient}
	start := time.Now()
	r := s.post(ctx, p.addr, ev)
	took := time.Since(start)
	if r.err != nil || !p.alive() || ctx.Err() != nil {
		return // killed meanwhile; not an answer
	}
	h.probe503s.Add(1)
	if r.status != http.StatusServiceUnavailable {
		h.violation("%s: ingest answered %d while Postgres was down (want 503): %v", p.name(), r.status, r.body)
	}
	if secs, err := strconv.Atoi(r.retryAfter); err != nil || secs < 1 {
		h.violation("%s: 503 during the outage with Retry-After %q (want whole seconds)", p.name(), r.retryAfter)
	}
	if took > outageAnswerBound {
		h.violation("%s: ingest answer took %s during the outage (bound %s)", p.name(), took.Round(time.Millisecond), outageAnswerBound)
	}
}

// monitor samples, every 2 s, claims still processing well past their
// lease: a crashed worker's claim must be taken over within River's rescuer
// interval once it has expired (or once Postgres is back).
func (h *harness) monitor(ctx context.Context) {
	bound := rescuerInterval + slack
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(2 * time.Second):
		}
		if h.out.inOutage() {
			continue
		}
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		var n int64
		var example string
		err := h.pool.QueryRow(qctx, `SELECT count(*), coalesce(min(key), '') FROM hookline_claims
			WHERE state = 'processing' AND greatest(expires_at, $1::timestamptz) < now() - $2::bigint * interval '1 microsecond'`,
			time.Unix(0, h.lastUp.Load()), bound.Microseconds()).Scan(&n, &example)
		cancel()
		if err != nil {
			continue // Postgres restarting, or the table not there yet
		}
		if n > h.stuckMax.Load() {
			h.stuckMax.Store(n)
			h.stuckExample.Store(example)
			h.logf("stuck claims: %d (e.g. %s)", n, example)
		}
	}
}

func (o *outage) inOutage() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.inProgress
}

// settle waits until every stored event is completed or dead and River has
// no unfinished event job, bounded by Settle.
func (h *harness) settle(ctx context.Context) {
	deadline := time.Now().Add(h.o.Settle)
	last := time.Time{}
	for {
		var open, jobs int
		qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := h.pool.QueryRow(qctx, `SELECT count(*) FROM hookline_event_states WHERE state NOT IN ('completed', 'dead')`).Scan(&open)
		if err == nil {
			var js hjobs.JobStats
			js, err = hjobs.ReadJobStats(qctx, h.pool, false)
			jobs = js.Unfinished
		}
		cancel()
		if err == nil && open == 0 && jobs == 0 {
			h.logf("settled: every event completed or dead")
			return
		}
		if time.Since(last) > 5*time.Second {
			h.logf("settling: %d events unfinished, %d event jobs unfinished (err %v)", open, jobs, err)
			last = time.Now()
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			h.violation("not settled within %s: %d events unfinished, %d event jobs unfinished", h.o.Settle, open, jobs)
			return
		}
		sleepCtx(ctx, time.Second)
	}
}

// rows helpers for check.
func queryPairs(ctx context.Context, pool *pgxpool.Pool, sql string, scan func(pgx.Rows) error) error {
	rows, err := pool.Query(ctx, sql)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}
