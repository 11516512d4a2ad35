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
	"slices"
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
	okeys   []*orderKey // the ordered source's keys
	ordered []*event    // the ordered source's events
	recon   []*event    // the reconciled source's events
	rc      *reconState // the reconciled source's machinery (nil: none)
	dest    *destination
	procs   []*proc
	stats   sendStats
	faultMu sync.Mutex
	faults  []string
	windows [][2]time.Time // instance kills (kill to restarted) and outages (stop to every instance ready)
	logOnce sync.Once
	logged  *hooklineLog // hlog's
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
	hooklineBin, self, err := h.binaries(ctx, specs)
	if err != nil {
		return nil, err
	}
	stopPG, err := h.startPostgres(ctx)
	if err != nil {
		return nil, err
	}
	defer stopPG()

	// Events, the fake events API and the HTTP destinations.
	reconTasks, reconURL := h.makeEvents()
	if h.rc != nil {
		defer h.rc.api.Close()
	}
	h.dest = newDestination(slices.Concat(h.events, h.ordered, h.recon), o)
	destSrv, destBase, err := serveDestination(h.dest)
	if err != nil {
		return nil, err
	}
	defer destSrv.Close()

	defer func() {
		for _, p := range h.procs {
			p.kill()
		}
	}()
	if err := h.startInstances(ctx, specs, hooklineBin, self, destBase, reconURL); err != nil {
		return nil, err
	}

	// Monitor stuck claims while everything runs.
	monCtx, stopMon := context.WithCancel(ctx)
	monDone := make(chan struct{})
	go func() { defer close(monDone); h.monitor(monCtx) }()
	chaosErr := h.send(ctx, rep, h.tasks(reconTasks))
	if chaosErr == nil && o.ReconEvents > 0 {
		h.rc.catchUp = h.reconcileNow(ctx, "once the senders are done")
	}
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
	if o.ReconEvents > 0 {
		h.rc.final = h.reconcileNow(ctx, "after settling")
	}

	h.check(ctx, rep)
	h.shutdown()
	return h.finish(ctx, rep, nil)
}

// makeEvents makes every source's events and, for the reconciled source,
// starts the fake events API (Close it); it returns the reconciled
// source's tasks and the API's URL.
func (h *harness) makeEvents() (reconTasks []task, reconURL string) {
	h.events = makeEvents(h.o, h.rng)
	h.okeys, h.ordered = makeOrdered(h.o, h.rng)
	if h.o.ReconEvents == 0 {
		return nil, "http://127.0.0.1:1" // unused: no source reconciles
	}
	h.recon = makeRecon(h.o, h.rng)
	reconTasks = h.startRecon(h.rng)
	return reconTasks, h.rc.api.URL
}

// binaries builds cmd/hookline when a "serve" instance needs it (unless
// given) and finds this executable (for "self" instances).
func (h *harness) binaries(ctx context.Context, specs []instanceSpec) (hooklineBin, self string, err error) {
	hooklineBin = h.o.HooklineBin
	needServe := false
	for _, s := range specs {
		needServe = needServe || s.kind == "serve"
	}
	if needServe && hooklineBin == "" {
		hooklineBin = filepath.Join(h.dir, "hookline")
		h.logf("building cmd/hookline ...")
		if err := buildHookline(ctx, hooklineBin, h.o.Race); err != nil {
			return "", "", err
		}
	}
	self, err = os.Executable()
	return hooklineBin, self, err
}

// startPostgres starts the private cluster, opens the harness's pool and
// creates chaos_ledger; stop stops them.
func (h *harness) startPostgres(ctx context.Context) (stop func(), err error) {
	if h.pgLog, err = os.OpenFile(filepath.Join(h.dir, "postgres.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
		return nil, err
	}
	h.logf("starting Postgres ...")
	if h.pg, err = pgcluster.Start(ctx, pgcluster.Options{Dir: filepath.Join(h.dir, "pg"), Fast: h.o.PGFast, Log: h.pgLog}); err != nil {
		h.pgLog.Close()
		return nil, err
	}
	stop = func() {
		if h.pool != nil {
			h.pool.Close()
		}
		h.pgMu.Lock()
		_ = h.pg.Stop()
		h.pgMu.Unlock()
		h.pgLog.Close()
	}
	pcfg, err := pgxpool.ParseConfig(h.pg.URL("postgres"))
	if err != nil {
		stop()
		return nil, err
	}
	pcfg.MaxConns = 4
	pcfg.ConnConfig.ConnectTimeout = 2 * time.Second
	if h.pool, err = pgxpool.NewWithConfig(ctx, pcfg); err != nil {
		stop()
		return nil, err
	}
	if _, err := h.pool.Exec(ctx, ledgerDDL); err != nil {
		stop()
		return nil, fmt.Errorf("create chaos_ledger: %w", err)
	}
	return stop, nil
}

// startInstances writes the instances' configurations and starts them all
// at once on the empty database: their migrations race under the advisory
// lock.
func (h *harness) startInstances(ctx context.Context, specs []instanceSpec, hooklineBin, self, destBase, reconURL string) error {
	o := h.o
	dbURL := h.pg.URL("postgres")
	for i, s := range specs {
		addr, err := freeAddr()
		if err != nil {
			return err
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
		if err := os.WriteFile(p.cfgPath, []byte(instanceConfig(o, addr, dbURL, destBase, reconURL)), 0o600); err != nil {
			return err
		}
		h.procs = append(h.procs, p)
	}
	h.logf("starting %d instances at once on an empty database: %s", len(specs), strings.Join(o.Instances, ", "))
	var wg sync.WaitGroup
	startErrs := make([]error, len(h.procs))
	for i, p := range h.procs {
		wg.Go(func() { startErrs[i] = p.start(ctx) })
	}
	wg.Wait()
	if err := errors.Join(startErrs...); err != nil {
		return err
	}
	for _, p := range h.procs {
		if code := h.getStatus(ctx, p, "/readyz"); code != http.StatusOK {
			h.violation("%s: /readyz answered %d after start-up", p.name(), code)
		}
	}
	return nil
}

// tasks is every step of the sending, shuffled: each event of the http,
// ledger and fan-out sources Deliveries times, each ordered key's script
// step by step, and the reconciled source's publications and webhooks.
func (h *harness) tasks(reconTasks []task) []task {
	out := make([]task, 0, len(h.events)*h.o.Deliveries+len(h.ordered)*h.o.Deliveries+len(reconTasks))
	for range h.o.Deliveries {
		for _, ev := range h.events {
			out = append(out, task{ev: ev})
		}
	}
	for _, k := range h.okeys {
		for range k.script {
			out = append(out, task{key: k})
		}
	}
	out = append(out, reconTasks...)
	h.rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// send runs the senders over tasks and, meanwhile, the faults (and the
// on-demand reconciliations), until both are done; an error is the
// faults' (the harness could not restart something).
func (h *harness) send(ctx context.Context, rep *Report, tasks []task) error {
	o := h.o
	h.logf("sending %d events x %d deliveries, %d ordered events on %d keys, %d events in the fake events API, with %d senders",
		o.Events, o.Deliveries, len(h.ordered), len(h.okeys), len(h.recon), o.Senders)
	sendStart := time.Now()
	work := make(chan task, o.Senders)
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
	if h.rc != nil {
		snd.publish = h.publish
	}
	sendersDone := make(chan struct{})
	var swg, twg sync.WaitGroup
	sctx, stopSending := context.WithCancel(ctx) // a failed fault (the run aborts) stops the senders
	defer stopSending()
	for i := range o.Senders {
		rng := rand.New(rand.NewPCG(uint64(o.Seed), uint64(i)+1))
		swg.Go(func() { snd.run(sctx, work, rng) })
	}
	go func() {
		defer close(work)
		for _, t := range tasks {
			select {
			case work <- t:
			case <-sctx.Done():
				return
			}
		}
	}()
	go func() { swg.Wait(); close(sendersDone) }()
	if h.rc != nil {
		twg.Go(func() { h.reconTrigger(ctx, sendersDone) })
	}

	// Faults, spread over the sending.
	chaosErr := h.chaos(ctx, int64(len(tasks)), sendersDone)
	if chaosErr != nil {
		stopSending()
	}
	<-sendersDone
	twg.Wait()
	rep.SendTime = time.Since(sendStart)
	h.logf("senders done: %d requests, %d accepted, %d duplicates", h.stats.requests.Load(), h.stats.accepted.Load(), h.stats.duplicates.Load())
	return chaosErr
}

// shutdown stops every instance gracefully: each drains and exits 0
// (SIGTERM).
func (h *harness) shutdown() {
	var wg sync.WaitGroup
	for _, p := range h.procs {
		wg.Go(func() {
			p.stop(30 * time.Second)
			if code := p.cmd.ProcessState.ExitCode(); code != 0 {
				h.violation("%s: exit code %d after SIGTERM (want 0)", p.name(), code)
			}
		})
	}
	wg.Wait()
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
	killedAt := time.Now()
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
			h.window(killedAt)
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
	stoppedAt := time.Now()
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

	// The monitor samples claims once the outage is over: lastUp must
	// never be older than the outage then, or claims that expired before it
	// would count the outage against their takeover. Stored again once
	// Postgres is up, which is when their clock restarts.
	h.lastUp.Store(time.Now().UnixNano())
	h.out.set(false)
	if err := h.startPostgresAgain(ctx); err != nil {
		return err
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
	h.window(stoppedAt)
	return nil
}

// window records a fault that lasted from since until now.
func (h *harness) window(since time.Time) {
	h.faultMu.Lock()
	h.windows = append(h.windows, [2]time.Time{since, time.Now()})
	h.faultMu.Unlock()
}

// startPostgresAgain starts Postgres on its directory and port again. Like
// a supervisor, it tries again when the start fails: on a starved machine
// the instances' reconnecting pools can keep Postgres from answering the
// start's own probe (2 s a try) for its whole minute; each failed start is
// listed among the faults.
func (h *harness) startPostgresAgain(ctx context.Context) error {
	for try := 1; ; try++ {
		h.pgMu.Lock()
		c, err := pgcluster.Start(ctx, pgcluster.Options{Dir: h.pg.Dir, Port: h.pg.Port, Fast: h.o.PGFast, Log: h.pgLog})
		if err == nil {
			h.pg = c
		}
		h.pgMu.Unlock()
		if err == nil {
			return nil
		}
		if try == restartTries || ctx.Err() != nil {
			return fmt.Errorf("restart Postgres: %w", err)
		}
		h.fault("start of Postgres failed (%v); starting it again", err)
		sleepCtx(ctx, time.Second)
	}
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
