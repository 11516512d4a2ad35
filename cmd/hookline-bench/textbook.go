package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/hookline/hookline/internal/config"
	"github.com/hookline/hookline/jobs"
)

// textbookWorkerFlag, as the first argument, makes hookline-bench the
// textbook worker instead of the benchmark (hidden from -h).
const textbookWorkerFlag = "-textbook-worker"

// textbookQueue is the textbook jobs' River queue: one of their own.
const textbookQueue = "textbook"

// textbookTableSQL creates the textbook design's events table.
const textbookTableSQL = `CREATE TABLE textbook_events (
	id           text PRIMARY KEY,
	payload      bytea NOT NULL,
	processed_at timestamptz
)`

// textbookArgs is a textbook job's args: the event's id.
type textbookArgs struct {
	ID string `json:"id"`
}

func (textbookArgs) Kind() string { return "textbook_event" }

// InsertOpts puts the jobs on the textbook queue.
func (textbookArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{Queue: textbookQueue} }

// textbookWorker is the processing scenario's baseline: the textbook
// design a user would build on Postgres and River without hookline, and
// compare hookline's worker with. Its events wait in a table of their own
// (textbook_events: id, payload, processed_at), each with one River job
// whose args name it; a plain river.Client (riverpgxv5, one queue, River's
// defaults but for the queue's size and a 5 ms fetch cooldown, so River's
// batched completer) works the jobs, one event per job: read the event's
// payload by its id, POST it to the destination with its id as
// Idempotency-Key over a keep-alive client, and mark it processed. It
// borrows nothing from hookline and skimps on nothing a competent user
// would do, so that the comparison measures what hookline's design costs or
// saves rather than a handicapped baseline. The bench runs it as a
// subprocess of its own (hookline-bench -textbook-worker …, re-executing
// itself), so that its CPU and peak RSS are measured the way hookline's
// worker's are.
type textbookWorker struct {
	river.WorkerDefaults[textbookArgs]
	pool   *pgxpool.Pool
	client *http.Client
	dest   string
	// processed counts the jobs this process worked to the end: the drain
	// check asks Postgres only once it reaches the backlog.
	processed atomic.Int64
}

// Work forwards the job's event to the destination and marks it processed;
// an error (the event missing, the destination unreachable or not 2xx)
// leaves the job to River's retries.
func (w *textbookWorker) Work(ctx context.Context, job *river.Job[textbookArgs]) error {
	id := job.Args.ID
	var payload []byte
	if err := w.pool.QueryRow(ctx, `SELECT payload FROM textbook_events WHERE id = $1`, id).Scan(&payload); err != nil {
		return fmt.Errorf("read textbook event %s: %w", id, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.dest, bytes.NewReader(payload))
	if err != nil {
		return fmt.Errorf("forward textbook event %s: %w", id, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", id)
	resp, err := w.client.Do(req)
	if err != nil {
		return fmt.Errorf("forward textbook event %s: %w", id, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body) // read to the end: the connection is kept alive
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("forward textbook event %s: the destination answered %s", id, resp.Status)
	}
	if _, err := w.pool.Exec(ctx, `UPDATE textbook_events SET processed_at = now() WHERE id = $1`, id); err != nil {
		return fmt.Errorf("mark textbook event %s processed: %w", id, err)
	}
	w.processed.Add(1)
	return nil
}

// textbookOptions are the textbook worker's flags.
type textbookOptions struct {
	db, dest string
	workers  int // the queue's MaxWorkers
	maxConns int // the pool's size
}

func parseTextbookFlags(args []string, stderr io.Writer) (textbookOptions, error) {
	fs := flag.NewFlagSet("hookline-bench "+textbookWorkerFlag, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o textbookOptions
	fs.StringVar(&o.db, "db", "", "database URL (its textbook_events table and River's tables)")
	fs.StringVar(&o.dest, "dest", "", "destination URL each event is POSTed to")
	fs.IntVar(&o.workers, "workers", config.DefaultWorkers, "River workers of the textbook queue")
	fs.IntVar(&o.maxConns, "max-conns", config.DefaultPoolSize, "database connections")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("unexpected arguments: %v", fs.Args())
	case o.db == "" || o.dest == "":
		return o, errors.New("-db and -dest are required")
	case o.workers < 1 || o.workers > river.QueueNumWorkersMax:
		return o, fmt.Errorf("-workers: want 1..%d", river.QueueNumWorkersMax)
	case o.maxConns < 1:
		return o, errors.New("-max-conns: want at least 1")
	}
	return o, nil
}

// textbookReport is what the textbook worker writes on its stdout, as one
// JSON line, once no job is left: the CPU (user+sys) it used from River's
// start until then, and its peak RSS (VmHWM). The bench charges that CPU
// to the drain, as it charges hookline's worker's from /readyz to the
// drained queue: neither's start-up nor shut-down counts.
type textbookReport struct {
	CPU     time.Duration `json:"cpu_ns"`
	PeakRSS int64         `json:"peak_rss_bytes"`
}

// textbookMain is hookline-bench -textbook-worker: it works the textbook
// queue until no job of it is left unfinished (then reports on stdout), or
// until SIGTERM.
func textbookMain(args []string, stdout, stderr io.Writer) int {
	o, err := parseTextbookFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "hookline-bench "+textbookWorkerFlag+":", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := runTextbookWorker(ctx, o, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, "hookline-bench "+textbookWorkerFlag+":", err)
		return 1
	}
	return 0
}

// runTextbookWorker runs the River client until the textbook queue has no
// unfinished job (then writes its textbookReport to stdout) or ctx ends,
// then stops it gracefully.
func runTextbookWorker(ctx context.Context, o textbookOptions, stdout, stderr io.Writer) error {
	pc, err := pgxpool.ParseConfig(o.db)
	if err != nil {
		return fmt.Errorf("-db: %w", err)
	}
	pc.MaxConns = int32(o.maxConns)
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer pool.Close()
	client, w, err := newTextbookClient(pool, o, slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		return err
	}
	var backlog int64
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM textbook_events WHERE processed_at IS NULL`).Scan(&backlog); err != nil {
		return fmt.Errorf("count the backlog: %w", err)
	}
	if err := client.Start(ctx); err != nil {
		return fmt.Errorf("start River: %w", err)
	}
	cpu0 := selfCPU()
	waitErr := waitTextbookDone(ctx, pool, func() bool { return w.processed.Load() >= backlog })
	if waitErr == nil {
		rep := textbookReport{CPU: selfCPU() - cpu0, PeakRSS: procHWM(os.Getpid())}
		if err := json.NewEncoder(stdout).Encode(rep); err != nil {
			waitErr = fmt.Errorf("report: %w", err)
		}
	}
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := client.Stop(stopCtx); err != nil {
		return fmt.Errorf("stop River: %w", err)
	}
	if errors.Is(waitErr, context.Canceled) {
		return nil // SIGTERM: stopped gracefully
	}
	return waitErr
}

// newTextbookClient is the textbook worker's River client: one queue of
// o.workers workers, a 5 ms fetch cooldown (hookline's event queues'), and
// an HTTP client that keeps a connection per worker alive.
func newTextbookClient(pool *pgxpool.Pool, o textbookOptions, log *slog.Logger) (*river.Client[pgx.Tx], *textbookWorker, error) {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConns = max(transport.MaxIdleConns, o.workers)
	transport.MaxIdleConnsPerHost = o.workers
	workers := river.NewWorkers()
	w := &textbookWorker{pool: pool, dest: o.dest, client: &http.Client{Transport: transport, Timeout: textbookDestTimeout}}
	if err := river.AddWorkerSafely(workers, w); err != nil {
		return nil, nil, fmt.Errorf("register the textbook worker: %w", err)
	}
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Logger:        log,
		Queues:        map[string]river.QueueConfig{textbookQueue: {MaxWorkers: o.workers}},
		Workers:       workers,
		FetchCooldown: 5 * time.Millisecond,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("River client: %w", err)
	}
	return client, w, nil
}

// textbookDestTimeout bounds a POST to the destination, as the bench's
// configuration bounds hookline's (timeout: 10s).
const textbookDestTimeout = 10 * time.Second

// waitTextbookDone polls every 100 ms, as the bench does for hookline's
// workers, until no textbook job is left unfinished; it asks Postgres only
// once worked() says every event of the backlog was worked (each probe
// walks River's fetch index, a cost charged to the drain).
func waitTextbookDone(ctx context.Context, pool *pgxpool.Pool, worked func() bool) error {
	for {
		for !worked() {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
		pending, err := jobs.AnyUnfinishedJobOfKind(ctx, pool, textbookArgs{}.Kind())
		if err != nil {
			return fmt.Errorf("poll the textbook queue: %w", err)
		}
		if !pending {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
