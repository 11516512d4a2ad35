package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookline/hookline/internal/app"
	"github.com/hookline/hookline/jobs"
)

// runState is one run in progress: its database, hookline instance, load
// and the accounting that spans the phases.
type runState struct {
	b        *bench
	spec     runSpec
	name, db string
	pool     *pgxpool.Pool
	sink     *sink
	in       *instance
	running  []*instance
	gen      *generator
	ld       *loadResult
	r        *Result

	cpu0, pg0, self0 time.Duration // at the load's start (cpu0: of the current instance)
	cpu              time.Duration // hookline's CPU of the phases done
	rss              int64
	procStart        time.Time // processing: from the worker's start (or the load's)
	procPG0          time.Duration
	procSys0         time.Duration // the machine's busy CPU, and ours, at procStart
	procSelf0        time.Duration
	// smp samples accepted and delivered once a second from the load's
	// start to the end of the drain (the colocated scenario).
	smp *sampler
}

// runOne is one run: a fresh database, hookline under load, then (unless
// -no-drain) a worker draining the queue, and the checks.
func (b *bench) runOne(ctx context.Context, spec runSpec, rateGuess float64) (*Result, error) {
	if spec.textbook {
		return b.runTextbook(ctx, spec)
	}
	rs := &runState{b: b, spec: spec, name: spec.runName(b.o.repeat)}
	defer rs.close()
	if err := rs.prepare(ctx); err != nil {
		return nil, err
	}
	if spec.scenario == scenarioColocated {
		rs.smp = newSampler(rs.sink)
		defer func() { rs.smp.stop() }()
	}
	if err := rs.load(ctx, rateGuess); err != nil {
		return nil, err
	}
	if b.o.noDrain {
		rs.finishSeries()
		rs.r.MeanBatch = meanBatch(rs.in.url)
		rs.r.PeakRSSMB = float64(rs.in.peakRSS()) / (1 << 20)
		rs.r.fill(rs.ld)
		rs.r.CPUPer1k, rs.r.PGCPUPer1k = rs.r.LoadCPUPer1k, rs.r.LoadPGCPUPer1k
		rs.r.Unchecked = true
		return rs.r, nil
	}
	if !rs.colocated() {
		if err := rs.handOver(ctx); err != nil {
			return nil, err
		}
	}
	if err := rs.drain(ctx); err != nil {
		return nil, err
	}
	rs.finishSeries()
	if err := rs.measure(ctx); err != nil {
		return nil, err
	}
	if err := rs.check(ctx); err != nil {
		return nil, err
	}
	return rs.r, nil
}

// colocated reports whether one --role all process takes the load and
// processes it (the colocated scenario, or -colocated).
func (rs *runState) colocated() bool {
	return rs.b.o.colocated || rs.spec.scenario == scenarioColocated
}

// prepare creates the run's database and starts hookline (--role ingest,
// or all with -colocated and in the colocated scenario).
func (rs *runState) prepare(ctx context.Context) error {
	if err := rs.createDatabase(ctx); err != nil {
		return err
	}
	role := app.RoleIngest
	if rs.colocated() {
		role = app.RoleAll
	}
	return rs.startHookline(ctx, rs.name, role)
}

// createDatabase creates the run's database from the template, its pool
// and its sink.
func (rs *runState) createDatabase(ctx context.Context) error {
	return rs.createDatabaseFrom(ctx, templateDB)
}

// createDatabaseFrom is createDatabase from the given template.
func (rs *runState) createDatabaseFrom(ctx context.Context, template string) error {
	b := rs.b
	rs.db = "bench_" + rs.name
	_, _ = b.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+rs.db+" WITH (FORCE)") // kept by an earlier -keep
	if _, err := b.admin.Exec(ctx, "CREATE DATABASE "+rs.db+" TEMPLATE "+template); err != nil {
		rs.db = ""
		return err
	}
	// A checkpoint now, so that one run's dirty pages are not flushed during the next.
	_, _ = b.admin.Exec(ctx, "CHECKPOINT")
	var err error
	if rs.pool, err = pgxpool.New(ctx, withDatabase(b.server, rs.db)); err != nil {
		return err
	}
	rs.sink = b.dest.newSink(rs.name, rs.spec.latency)
	return nil
}

// startHookline starts an instance of the run's configuration.
func (rs *runState) startHookline(ctx context.Context, name string, role app.Role) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	cfg := rs.b.configYAML(rs.spec, rs.db, fmt.Sprintf("127.0.0.1:%d", port), rs.b.dest.url+"/hooks/"+rs.name)
	in, err := rs.b.start(ctx, name, cfg, port, role)
	if err != nil {
		return err
	}
	rs.in, rs.running = in, []*instance{in}
	return nil
}

// stopHookline stops the current instance.
func (rs *runState) stopHookline() {
	rs.running = nil
	if err := rs.in.Stop(); err != nil {
		rs.b.logf("%s: stop: %v", rs.name, err)
	}
}

func (rs *runState) close() {
	for _, in := range rs.running {
		_ = in.Stop()
	}
	if rs.pool != nil {
		rs.pool.Close()
	}
	if rs.db != "" && !rs.b.o.keep {
		_, _ = rs.b.admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+rs.db+" WITH (FORCE)")
	}
}

// load runs the load generator: for -d (the ingest scenario) or until
// spec.events new events are accepted (the drain scenarios).
func (rs *runState) load(ctx context.Context, rateGuess float64) error {
	b, o := rs.b, rs.b.o
	cfg := loadConfig{concurrency: rs.spec.c, duration: o.duration, dupRatio: o.dupRatio, maxEvents: o.maxEvents, spans: rs.spec.ordered}
	if rs.spec.scenario == scenarioColocated {
		cfg.dupRatio = 0 // every request a new event: accepted = what the workers must deliver
		cfg.rate = o.rate
	}
	// Pre-sign enough events for the run at the rate this mode reached last
	// time (more are signed on the fly if the load outruns the guess).
	n := min(int(rateGuess*1.4*o.duration.Seconds())+2000, 600_000)
	if o.maxEvents > 0 {
		n = min(n, o.maxEvents)
	}
	if rs.spec.events > 0 {
		n, cfg.maxEvents, cfg.duration = rs.spec.events, rs.spec.events, backlogLoadLimit
	}
	var err error
	if cfg.gen, err = newGenerator(b.secret, rs.name, rs.in.url+"/webhooks/stripe", n, rs.spec.keys); err != nil {
		return err
	}
	rs.gen = cfg.gen
	runtime.GC()
	var prof *os.File
	if o.cpuProfile != "" {
		if prof, err = os.Create(fmt.Sprintf("%s-%s-%d.prof", strings.TrimSuffix(o.cpuProfile, ".prof"), rs.spec.name, rs.spec.c)); err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(prof); err != nil {
			return err
		}
	}
	rs.cpu0, rs.pg0, rs.self0 = rs.in.cpu(), pgCPU(b.pmPid), selfCPU()
	sys0 := systemCPU()
	b.logf("%s: load (%s, %d events at most)", rs.name, cfg.duration, cfg.maxEvents)
	if rs.smp != nil {
		cfg.progress = &rs.smp.accepted
		rs.smp.start()
	}
	rs.ld = runLoad(ctx, cfg)
	if rs.smp != nil {
		rs.smp.endLoad()
	}
	if prof != nil {
		pprof.StopCPUProfile()
		prof.Close()
	}
	b.logf("%s: %d accepted, waiting for processing", rs.name, len(rs.ld.accepted))
	rs.r = rs.newResult()
	rs.accountLoad(sys0)
	rs.procStart, rs.procPG0, rs.procSys0, rs.procSelf0 = rs.ld.first, rs.pg0, sys0, rs.self0
	return nil
}

func (rs *runState) newResult() *Result {
	s := rs.spec
	r := &Result{Scenario: s.scenario, Mode: s.name, Concurrency: s.c, Round: s.round, DurationSec: rs.ld.elapsed.Seconds(),
		Destinations: s.dests, Ordered: s.ordered, Keys: s.keys, DestLatencyMs: ms(s.latency)}
	if s.ordered && s.keys == 1 && s.latency > 0 {
		r.BoundPerSec = 1 / s.latency.Seconds()
	}
	return r
}

// accountLoad sets the load phase's CPU figures (sys0: the machine's busy
// CPU at the load's start).
func (rs *runState) accountLoad(sys0 time.Duration) {
	r, ld := rs.r, rs.ld
	// Other processes' share of the machine during the load: the numbers
	// are only comparable when it is near zero.
	loadHL, loadPG, loadSelf := rs.in.cpu()-rs.cpu0, pgCPU(rs.b.pmPid)-rs.pg0, selfCPU()-rs.self0
	if sys := systemCPU() - sys0; sys > 0 {
		ours := loadHL + loadPG + loadSelf
		if rs.b.o.inProcess {
			ours = loadHL + loadPG
		}
		r.OtherCPUPct = max(0, 100*(sys-ours).Seconds()/(ld.elapsed.Seconds()*float64(runtime.NumCPU())))
	}
	if n := len(ld.accepted); n > 0 {
		r.LoadCPUPer1k = loadHL.Seconds() / float64(n) * 1000
		r.LoadPGCPUPer1k = loadPG.Seconds() / float64(n) * 1000
	}
	if s := ld.elapsed.Seconds() * float64(runtime.NumCPU()); s > 0 {
		r.LoadCPUPct = map[string]float64{
			"hookline": 100 * loadHL.Seconds() / s, "postgres": 100 * loadPG.Seconds() / s, "bench": 100 * loadSelf.Seconds() / s,
		}
	}
}

// handOver stops the ingest process, accounting for it, and starts a
// --role worker process to drain the queue.
func (rs *runState) handOver(ctx context.Context) error {
	rs.cpu, rs.rss = rs.in.cpu()-rs.cpu0, rs.in.peakRSS()
	rs.r.MeanBatch = meanBatch(rs.in.url)
	rs.stopHookline()
	// Processing is timed from before the worker starts (its start-up,
	// ~0.2 s, counts against it): it may work before /readyz answers.
	rs.procStart, rs.procPG0, rs.procSys0, rs.procSelf0 = time.Now(), pgCPU(rs.b.pmPid), systemCPU(), selfCPU()
	if err := rs.startHookline(ctx, rs.name+"_worker", app.RoleWorker); err != nil {
		return err
	}
	rs.cpu0 = rs.in.cpu()
	return nil
}

// drain waits until every accepted event is processed: no event job left
// unfinished and every accepted event completed at every destination.
func (rs *runState) drain(ctx context.Context) error {
	want := len(rs.ld.accepted) * rs.spec.dests
	timeout := rs.drainTimeout()
	deadline := time.Now().Add(timeout)
	for {
		// Postgres is asked only once the destination has received every
		// event (or at the deadline): each probe costs the server CPU
		// charged to processing.
		if int(rs.sink.distinct.Load()) < want && time.Now().Before(deadline) {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		pending, err := jobs.AnyUnfinishedJob(ctx, rs.pool)
		if err != nil {
			return err
		}
		var completed int
		if !pending {
			if err := rs.pool.QueryRow(ctx, `SELECT count(*) FROM hookline_event_destinations WHERE state = 'completed'`).Scan(&completed); err != nil {
				return err
			}
			if completed >= want {
				return nil
			}
		}
		if time.Now().After(deadline) {
			if pending {
				_ = rs.pool.QueryRow(ctx, `SELECT count(*) FROM hookline_event_destinations WHERE state = 'completed'`).Scan(&completed)
			}
			rs.r.Problem = fmt.Sprintf("drain timeout: %d of %d accepted (event, destination) completed (jobs unfinished: %v) after %s",
				completed, want, pending, timeout)
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// drainTimeout is how long the drain may take: -drain-timeout, or by
// default 120 s + 10 x -d, and in the drain scenarios 120 s + 30 ms per event.
func (rs *runState) drainTimeout() time.Duration {
	if t := rs.b.o.drainTimeout; t > 0 {
		return t
	}
	if rs.spec.events > 0 {
		return 120*time.Second + time.Duration(rs.spec.events)*30*time.Millisecond
	}
	return 120*time.Second + 10*rs.b.o.duration
}

// measure sets the processing figures and stops hookline.
func (rs *runState) measure(ctx context.Context) error {
	r, in := rs.r, rs.in
	pg1, self1, sys1 := pgCPU(rs.b.pmPid), selfCPU(), systemCPU()
	workerCPU := in.cpu() - rs.cpu0
	cpu := rs.cpu + workerCPU
	if s := time.Since(rs.procStart).Seconds() * float64(runtime.NumCPU()); s > 0 && !rs.colocated() && !rs.b.o.inProcess {
		ours := workerCPU + (pg1 - rs.procPG0) + (self1 - rs.procSelf0)
		r.ProcOtherCPUPct = max(0, 100*(sys1-rs.procSys0-ours).Seconds()/s)
	}
	r.PeakRSSMB = float64(max(rs.rss, in.peakRSS())) / (1 << 20)
	if !rs.b.o.inProcess {
		r.WorkerPeakRSSMB = float64(in.peakRSS()) / (1 << 20) // the --role worker (or all) process's
	}
	if rs.colocated() {
		r.MeanBatch = meanBatch(in.url)
	}
	var first, last *time.Time
	var rows int
	if err := rs.pool.QueryRow(ctx, `SELECT min(completed_at), max(completed_at), count(*) FROM hookline_event_destinations WHERE state = 'completed'`).
		Scan(&first, &last, &rows); err != nil {
		return err
	}
	rs.stopHookline()
	r.fill(rs.ld)
	n := len(rs.ld.accepted)
	if n == 0 {
		return nil
	}
	if last != nil {
		r.EndToEndPerSec = float64(n) / last.Sub(rs.ld.first).Seconds()
		r.DrainSec = max(0, last.Sub(rs.ld.last).Seconds())
		if s := last.Sub(rs.procStart).Seconds(); s > 0 {
			r.ProcessedPerSec = float64(n) / s
			r.DeliveriesPerSec = float64(rows) / s
		}
		if s := last.Sub(*first).Seconds(); s > 0 && rows > 1 {
			r.SteadyPerSec = float64(rows-1) / s / float64(rs.spec.dests)
		}
	}
	if !rs.colocated() {
		r.ProcCPUPer1k = workerCPU.Seconds() / float64(n) * 1000
		r.ProcPGCPUPer1k = (pg1 - rs.procPG0).Seconds() / float64(n) * 1000
	}
	r.CPUPer1k = cpu.Seconds() / float64(n) * 1000
	r.PGCPUPer1k = (pg1 - rs.pg0).Seconds() / float64(n) * 1000
	r.BenchCPUPer1k = (self1 - rs.self0).Seconds() / float64(n) * 1000
	r.SignedInline = int(rs.gen.inline.Load())
	return nil
}

// check compares what the senders were told with what Postgres holds and
// what the destination received: each accepted event stored, completed and
// forwarded exactly once to each of its destinations (LOST, DOUBLE: per
// event and destination), and for an ordered run the order of each line.
func (rs *runState) check(ctx context.Context) error {
	r, accepted := rs.r, rs.ld.accepted
	state, err := destinationStates(ctx, rs.pool)
	if err != nil {
		return err
	}
	js, err := jobs.ReadJobStats(ctx, rs.pool, false)
	if err != nil {
		return err
	}
	got := rs.sink.snapshot()
	dests := rs.spec.destNames()
	for id, n := range accepted {
		if n > 1 {
			r.Double++ // accepted twice: two jobs for one event
			continue
		}
		for _, d := range dests {
			st, ok := state[d+" "+id]
			switch h := got.hits[hitKey(d, "stripe:"+id)]; {
			case !ok || st != "completed" || h == 0:
				r.Lost++
			case h > 1:
				r.Double++
			}
		}
	}
	// Stray: processed or stored but never acknowledged as accepted (e.g.
	// the sender gave up waiting).
	stray := map[string]bool{}
	for key, h := range got.hits {
		_, id, _ := strings.Cut(key, " stripe:")
		if _, ok := accepted[id]; !ok {
			stray[id] = true
			if h > 1 {
				r.Double++
			}
		}
	}
	for key := range state {
		if _, id, _ := strings.Cut(key, " "); accepted[id] == 0 {
			stray[id] = true
		}
	}
	// A completed event's job leaves River's table with its completion, so
	// the jobs that ran are counted in the attempts log: one attempt per
	// event and destination (the destination always answers 200), and no
	// event job may be left waiting, running or given up on.
	var attempts int
	if err := rs.pool.QueryRow(ctx, `SELECT count(*) FROM hookline_attempts`).Scan(&attempts); err != nil {
		return err
	}
	r.Stray, r.Jobs = len(stray), attempts
	if want := (len(accepted) + len(stray)) * len(dests); attempts != want {
		r.Problem = strings.TrimPrefix(r.Problem+fmt.Sprintf("; %d attempts for %d accepted events and %d destinations", attempts, len(accepted), len(dests)), "; ")
	}
	if js.Unfinished > 0 || js.Abandoned > 0 {
		r.Problem = strings.TrimPrefix(r.Problem+fmt.Sprintf("; %d event jobs unfinished and %d discarded or cancelled after the drain", js.Unfinished, js.Abandoned), "; ")
	}
	r.HeldMs = got.heldMs
	if rs.spec.ordered {
		return rs.checkOrder(ctx, got)
	}
	return nil
}

// checkOrder checks an ordered run's lines (checkOrder) and the
// destination's overlaps.
func (rs *runState) checkOrder(ctx context.Context, got received) error {
	want, err := readLines(ctx, rs.pool)
	if err != nil {
		return err
	}
	c := checkOrder(got.lines, want, rs.ld.spans)
	r := rs.r
	r.OrderLines, r.OrderViolations, r.Inversions, r.Missing, r.Overlaps = c.lines, c.violations, c.inversions, c.missing, got.overlaps
	if c.example != "" {
		r.Problem = strings.TrimPrefix(r.Problem+"; "+c.example, "; ")
	}
	if places := countPlaces(want); places != len(rs.ld.accepted)*rs.spec.dests {
		r.Problem = strings.TrimPrefix(r.Problem+fmt.Sprintf("; %d places in ordering lines for %d accepted events", places, len(rs.ld.accepted)), "; ")
	}
	return nil
}

func countPlaces(lines map[string][]string) int {
	n := 0
	for _, l := range lines {
		n += len(l)
	}
	return n
}

// destinationStates reads every (destination, event)'s state:
// "destination event_id" → state.
func destinationStates(ctx context.Context, pool *pgxpool.Pool) (map[string]string, error) {
	rows, err := pool.Query(ctx, `SELECT destination, event_id, state FROM hookline_event_destinations WHERE source = 'stripe'`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	state := map[string]string{}
	for rows.Next() {
		var dest, id, st string
		if err := rows.Scan(&dest, &id, &st); err != nil {
			return nil, err
		}
		state[dest+" "+id] = st
	}
	return state, rows.Err()
}

// ok reports whether the run passed its checks.
func (r *Result) ok() bool {
	return r.Lost == 0 && r.Double == 0 && r.Problem == "" &&
		r.OrderViolations == 0 && r.Overlaps == 0 && r.Inversions == 0 && r.Missing == 0
}
