package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/hookline/hookline/internal/config"
	"github.com/hookline/hookline/jobs"
)

// runTextbook is the processing scenario's textbook run: a fresh database
// with River's own schema (riverTemplateDB), the backlog written into
// textbook_events and River's jobs (not measured), the textbook worker as a
// subprocess until it has done every job, then its figures and the checks
// (as runOne's for hookline).
func (b *bench) runTextbook(ctx context.Context, spec runSpec) (*Result, error) {
	rs := &runState{b: b, spec: spec, name: spec.runName(b.o.repeat)}
	defer rs.close()
	if err := rs.createDatabaseFrom(ctx, riverTemplateDB); err != nil {
		return nil, err
	}
	b.logf("%s: writing a backlog of %d events", rs.name, spec.events)
	if err := rs.writeTextbookBacklog(ctx); err != nil {
		return nil, fmt.Errorf("textbook backlog: %w", err)
	}
	rs.r = rs.newResult()
	b.logf("%s: draining", rs.name)
	p, err := rs.drainTextbook(ctx)
	if err != nil {
		return nil, err
	}
	if err := rs.measureTextbook(ctx, p); err != nil {
		return nil, err
	}
	if err := rs.checkTextbook(ctx); err != nil {
		return nil, err
	}
	return rs.r, nil
}

// textbookInsertBatch is how many River jobs one InsertManyFast writes.
const textbookInsertBatch = 10_000

// writeTextbookBacklog creates textbook_events and writes the run's
// backlog: the generator's events (the bodies and ids hookline's runs
// send) with COPY, and one River job per event on the textbook queue with
// InsertManyFast. The events count as accepted, once each.
func (rs *runState) writeTextbookBacklog(ctx context.Context) error {
	n := rs.spec.events
	g, err := newGenerator(rs.b.secret, rs.name, rs.b.dest.url, 0, rs.spec.keys)
	if err != nil {
		return err
	}
	start := time.Now()
	if _, err := rs.pool.Exec(ctx, textbookTableSQL); err != nil {
		return fmt.Errorf("create textbook_events: %w", err)
	}
	i := 0
	_, err = rs.pool.CopyFrom(ctx, pgx.Identifier{"textbook_events"}, []string{"id", "payload"}, pgx.CopyFromFunc(func() ([]any, error) {
		if i == n {
			return nil, nil
		}
		id, body := g.body(i)
		i++
		return []any{id, body}, nil
	}))
	if err != nil {
		return fmt.Errorf("copy into textbook_events: %w", err)
	}
	// An insert-only client: no queues, no workers.
	client, err := river.NewClient(riverpgxv5.New(rs.pool), &river.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return fmt.Errorf("River client: %w", err)
	}
	accepted := make(map[string]int, n)
	for lo := 0; lo < n; lo += textbookInsertBatch {
		params := make([]river.InsertManyParams, 0, min(textbookInsertBatch, n-lo))
		for i := lo; i < min(n, lo+textbookInsertBatch); i++ {
			id := g.eventID(i)
			accepted[id] = 1
			params = append(params, river.InsertManyParams{Args: textbookArgs{ID: id}})
		}
		if _, err := client.InsertManyFast(ctx, params); err != nil {
			return fmt.Errorf("insert River jobs: %w", err)
		}
	}
	rs.gen, rs.ld = g, &loadResult{first: start, last: time.Now(), accepted: accepted}
	return nil
}

// drainTextbook runs the textbook worker until it exits (it does once no
// textbook job is left), stopping it (SIGTERM) at the drain timeout, and
// returns its report. Processing is timed from before it starts. Stopped
// before it reported, its cost is that of its whole life (its rusage;
// ru_maxrss is the VmHWM it had).
func (rs *runState) drainTextbook(ctx context.Context) (textbookReport, error) {
	b := rs.b
	exe, err := os.Executable()
	if err != nil {
		return textbookReport{}, fmt.Errorf("the textbook worker is this executable: %w", err)
	}
	logPath := filepath.Join(b.dir, rs.name+"_worker.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return textbookReport{}, err
	}
	cmd := exec.Command(exe, textbookWorkerFlag, "-db", withDatabase(b.server, rs.db), "-dest", b.dest.url+"/hooks/"+rs.name,
		"-workers", strconv.Itoa(cmp.Or(b.o.workers, config.DefaultWorkers)),
		"-max-conns", strconv.Itoa(cmp.Or(b.o.maxConns, config.DefaultPoolSize)))
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	rs.procStart, rs.procPG0, rs.procSys0, rs.procSelf0 = time.Now(), pgCPU(b.pmPid), systemCPU(), selfCPU()
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return textbookReport{}, fmt.Errorf("start the textbook worker: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait(); logFile.Close() }()
	timeout := rs.drainTimeout()
	select {
	case err = <-done:
	case <-time.After(timeout):
		rs.r.Problem = fmt.Sprintf("drain timeout: the textbook worker had jobs left after %s", timeout)
		err = stopProcess(cmd, done)
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		<-done
		return textbookReport{}, ctx.Err()
	}
	if err != nil && rs.r.Problem == "" {
		return textbookReport{}, fmt.Errorf("textbook worker: %w: %s", err, tail(logPath))
	}
	var rep textbookReport
	if json.Unmarshal(stdout.Bytes(), &rep) == nil {
		return rep, nil
	}
	if rs.r.Problem == "" {
		return textbookReport{}, fmt.Errorf("textbook worker: exited without its report (stdout %q): %s", stdout.String(), tail(logPath))
	}
	rep.CPU = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		rep.PeakRSS = ru.Maxrss << 10 // kB on Linux
	}
	return rep, nil
}

// stopProcess sends cmd SIGTERM and waits for it (done: cmd.Wait's
// result), killing it after 30 s.
func stopProcess(cmd *exec.Cmd, done <-chan error) error {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		return fmt.Errorf("did not stop within 30s; killed")
	}
}

// measureTextbook sets the textbook run's figures, as measure does
// hookline's: processed/s from the worker's start to the last
// processed_at, CPU per 1,000 events of the worker and of Postgres over
// the same span (the run is its drain: the backlog was written, not
// measured).
func (rs *runState) measureTextbook(ctx context.Context, p textbookReport) error {
	r := rs.r
	pg1, self1, sys1 := pgCPU(rs.b.pmPid), selfCPU(), systemCPU()
	pg, self := pg1-rs.procPG0, self1-rs.procSelf0
	if s := time.Since(rs.procStart).Seconds() * float64(runtime.NumCPU()); s > 0 {
		r.ProcOtherCPUPct = max(0, 100*(sys1-rs.procSys0-p.CPU-pg-self).Seconds()/s)
	}
	r.WorkerPeakRSSMB = float64(p.PeakRSS) / (1 << 20)
	var first, last *time.Time
	var rows int
	if err := rs.pool.QueryRow(ctx, `SELECT min(processed_at), max(processed_at), count(processed_at) FROM textbook_events`).
		Scan(&first, &last, &rows); err != nil {
		return fmt.Errorf("read textbook_events: %w", err)
	}
	r.fill(rs.ld)
	n := len(rs.ld.accepted)
	if n == 0 {
		return nil
	}
	if last != nil {
		if s := last.Sub(rs.procStart).Seconds(); s > 0 {
			r.ProcessedPerSec = float64(n) / s
			r.DeliveriesPerSec = float64(rows) / s
		}
		if s := last.Sub(*first).Seconds(); s > 0 && rows > 1 {
			r.SteadyPerSec = float64(rows-1) / s
		}
	}
	r.ProcCPUPer1k = p.CPU.Seconds() / float64(n) * 1000
	r.ProcPGCPUPer1k = pg.Seconds() / float64(n) * 1000
	r.CPUPer1k, r.PGCPUPer1k = r.ProcCPUPer1k, r.ProcPGCPUPer1k
	r.BenchCPUPer1k = self.Seconds() / float64(n) * 1000
	return nil
}

// checkTextbook checks the textbook run as check does hookline's: every
// event has its processed_at and reached the destination exactly once
// (the sink counts hits by Idempotency-Key, the event's id), and every job
// completed.
func (rs *runState) checkTextbook(ctx context.Context) error {
	r, accepted := rs.r, rs.ld.accepted
	unprocessed := map[string]bool{}
	rows, err := rs.pool.Query(ctx, `SELECT id FROM textbook_events WHERE processed_at IS NULL`)
	if err != nil {
		return fmt.Errorf("read textbook_events: %w", err)
	}
	var id string
	if _, err := pgx.ForEachRow(rows, []any{&id}, func() error { unprocessed[id] = true; return nil }); err != nil {
		return fmt.Errorf("read textbook_events: %w", err)
	}
	got := rs.sink.snapshot()
	for id := range accepted {
		switch h := got.hits[hitKey(jobs.DefaultDestination, id)]; {
		case unprocessed[id] || h == 0:
			r.Lost++
		case h > 1:
			r.Double++
		}
	}
	for key, h := range got.hits {
		if _, id, _ := strings.Cut(key, " "); accepted[id] == 0 {
			r.Stray++
			if h > 1 {
				r.Double++
			}
		}
	}
	var unfinished int
	if r.Jobs, unfinished, err = jobs.CountJobsOfKind(ctx, rs.pool, textbookArgs{}.Kind()); err != nil {
		return fmt.Errorf("read the textbook jobs: %w", err)
	}
	if r.Jobs != len(accepted) || unfinished > 0 {
		r.Problem = strings.TrimPrefix(r.Problem+fmt.Sprintf("; %d textbook jobs (%d not completed) for %d events", r.Jobs, unfinished, len(accepted)), "; ")
	}
	return nil
}

// Target is one of a scenario's targets, checked on the medians (or, for a
// peak, the largest run) and round by round.
type Target struct {
	Scenario  string  `json:"scenario"`
	Name      string  `json:"name"`
	Value     float64 `json:"value"`
	Measured  string  `json:"measured"` // Value, in words
	Met       bool    `json:"met"`
	Rounds    int     `json:"rounds"`
	RoundsMet int     `json:"rounds_met"`
	Note      string  `json:"note,omitempty"`
}

// processingTargets checks the batched runs of the processing scenario
// against its targets: batched/textbook processed/s, batched
// processed/s, its CPU per event and its worker's peak RSS (the rate and
// the RSS meant for a 100,000-event backlog). None without batched runs.
func processingTargets(rs []Result, ratios []Ratio) []Target {
	var batched []Result
	for _, r := range rs {
		if r.Scenario == scenarioProcessing && r.Mode == runBatched {
			batched = append(batched, r)
		}
	}
	if len(batched) == 0 {
		return nil
	}
	var out []Target
	for _, ra := range ratios {
		if ra.Scenario == scenarioProcessing && ra.Name == ratioBatchedTextbook {
			t := Target{Scenario: scenarioProcessing, Name: fmt.Sprintf("%s ≥ %.2f", ra.Name, processingTargetRatio), Value: ra.OfMedians,
				Measured: fmt.Sprintf("%.2f× of the medians", ra.OfMedians), Met: ra.OfMedians >= processingTargetRatio, Rounds: len(ra.Rounds)}
			for _, v := range ra.Rounds {
				t.RoundsMet += b2i(v >= processingTargetRatio)
			}
			out = append(out, t)
		}
	}
	rate, cpu, rss, events := make([]float64, len(batched)), make([]float64, len(batched)), make([]float64, len(batched)), 0
	for i, r := range batched {
		rate[i], cpu[i], rss[i], events = r.ProcessedPerSec, processingCPU(r), r.WorkerPeakRSSMB, max(events, r.Accepted)
	}
	backlogNote := ""
	if events < processingTargetBacklog {
		backlogNote = fmt.Sprintf("with a backlog of %d events; the target is for %d (-backlog %d)", events, processingTargetBacklog, processingTargetBacklog)
	}
	t := Target{Scenario: scenarioProcessing, Name: fmt.Sprintf("%s processed/s ≥ %d", runBatched, processingTargetRate), Value: median(rate),
		Measured: fmt.Sprintf("median %.0f/s", median(rate)), Met: median(rate) >= processingTargetRate, Rounds: len(rate), Note: backlogNote}
	for _, v := range rate {
		t.RoundsMet += b2i(v >= processingTargetRate)
	}
	out = append(out, t)
	t = Target{Scenario: scenarioProcessing, Name: fmt.Sprintf("%s CPU per event ≤ %.2f ms", runBatched, processingTargetCPUms), Value: round3(median(cpu)),
		Measured: fmt.Sprintf("median %.3f ms (worker and Postgres)", median(cpu)), Met: round3(median(cpu)) <= processingTargetCPUms, Rounds: len(cpu)}
	for _, v := range cpu {
		t.RoundsMet += b2i(round3(v) <= processingTargetCPUms) // as printed: 0.1 + 0.2 is 0.300
	}
	out = append(out, t)
	t = Target{Scenario: scenarioProcessing, Name: fmt.Sprintf("%s worker peak RSS ≤ %d MB", runBatched, processingTargetRSSMB), Value: slices.Max(rss),
		Measured: fmt.Sprintf("largest %.0f MB", slices.Max(rss)), Met: slices.Max(rss) <= processingTargetRSSMB, Rounds: len(rss)}
	for _, v := range rss {
		t.RoundsMet += b2i(v <= processingTargetRSSMB)
	}
	t.Note = backlogNote
	return append(out, t)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// printProcessingSummary prints, after the processing scenario's table and
// ratios, each run's CPU per event and worker peak RSS (medians), and the
// targets.
func printProcessingSummary(w io.Writer, rep *Report) {
	for _, s := range rep.Summary {
		if s.Scenario == scenarioProcessing {
			fmt.Fprintf(w, "  %-10s CPU %.3f ms/event (worker %.3f + Postgres %.3f); worker peak RSS %.0f MB (largest %.0f)\n",
				s.Mode+":", s.ProcCPUPer1k+s.ProcPGCPUPer1k, s.ProcCPUPer1k, s.ProcPGCPUPer1k, s.WorkerPeakRSSMB, s.MaxWorkerPeakRSSMB)
		}
	}
	for _, t := range rep.Targets {
		if t.Scenario != scenarioProcessing {
			continue
		}
		verdict := "met"
		if !t.Met {
			verdict = "NOT met"
		}
		fmt.Fprintf(w, "  target %s: %s, %s (%d of %d rounds)", t.Name, verdict, t.Measured, t.RoundsMet, t.Rounds)
		if t.Note != "" {
			fmt.Fprintf(w, " [%s]", t.Note)
		}
		fmt.Fprintln(w)
	}
}
