package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
	"go.opentelemetry.io/otel/trace"

	"github.com/hookline/hookline/idem"
	"github.com/hookline/hookline/internal/defaults"
)

// ClientConfig configures the River client that runs hookline's jobs.
type ClientConfig struct {
	Pool    *pgxpool.Pool
	Sources []*Source
	// Workers bounds the attempts running at once at each destination in
	// this process (default 50): forwards, or Go handlers with their
	// transaction. With group commit River runs more jobs than that on an
	// HTTP destination's queue (jobsPerWorker); the others wait for their
	// claim batch or their completion's commit. Zero with InsertOnly makes an
	// insert-only client.
	Workers int
	// InsertOnly builds a client that only inserts (--role ingest).
	InsertOnly bool
	// DeliveryRetention prunes stored bodies of completed events older than
	// this (default 168h). Dead items keep their own copy.
	DeliveryRetention time.Duration
	// CleanupInterval is how often the periodic clean-up runs (default 1m).
	CleanupInterval time.Duration
	Registerer      prometheus.Registerer // where the metrics go; nil: nowhere served
	// Alerts, when set, is scanned every AlertInterval by the leader.
	Alerts Alerter
	Logger *slog.Logger
	// Tracer starts the attempts' spans (WorkerConfig.Tracer).
	Tracer    trace.Tracer
	Forwarder *Forwarder
	// PerEvent turns the worker's group commit off (WorkerConfig.PerEvent).
	PerEvent bool
	// Stopping is closed when a graceful stop begins (WorkerConfig.Stopping).
	Stopping <-chan struct{}
	// Backlog, when set, is shown the worker's forward slots
	// (WorkerConfig.Backlog).
	Backlog *Backlog
}

// RescueAfter returns River's RescueStuckJobsAfter for these sources: the
// shortest lease. River marks a job stuck when it has been running this long
// without finishing — which, for a live worker, is harmless: the rescued job
// finds the claim still held (the live worker renews its lease) and snoozes
// until the key completes or the lease really runs out. For a crashed
// worker, nobody renews the lease, so by the time River rescues the job the
// claim has expired too and the retry takes it over at once: a crashed
// worker's event is retried within lease + River's rescuer interval (30 s).
func RescueAfter(sources []*Source) time.Duration {
	d := idem.DefaultLease
	for i, s := range sources {
		if s.Lease > 0 && (i == 0 || s.Lease < d) {
			d = s.Lease
		}
	}
	return d
}

// NewClient builds the River client: the event worker on the hookline queue,
// the periodic clean-up, and rescue tied to the lease (see RescueAfter).
func NewClient(cfg ClientConfig) (*river.Client[pgx.Tx], error) {
	if cfg.Pool == nil {
		return nil, errors.New("jobs: ClientConfig.Pool is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.InsertOnly {
		return river.NewClient(riverpgxv5.New(cfg.Pool), &river.Config{Logger: cfg.Logger})
	}
	if cfg.Workers <= 0 {
		cfg.Workers = defaults.Workers
	}
	if cfg.DeliveryRetention <= 0 {
		cfg.DeliveryRetention = defaults.DeliveryRetention
	}
	if cfg.CleanupInterval <= 0 {
		cfg.CleanupInterval = defaults.CleanupInterval
	}
	w, err := NewEventWorker(WorkerConfig{Pool: cfg.Pool, Sources: cfg.Sources, Registerer: cfg.Registerer, Logger: cfg.Logger, Forwarder: cfg.Forwarder, Tracer: cfg.Tracer, PerEvent: cfg.PerEvent, Workers: cfg.Workers,
		Stopping: cfg.Stopping, Backlog: cfg.Backlog})
	if err != nil {
		return nil, err
	}
	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, w); err != nil {
		return nil, err
	}
	q := queues(cfg.Sources, cfg.Workers, cfg.PerEvent)
	runQueues := make([]string, 0, len(q))
	for name := range q {
		runQueues = append(runQueues, name)
	}
	if err := river.AddWorkerSafely(workers, &CleanupWorker{Pool: cfg.Pool, Claims: w.claims, DeliveryRetention: cfg.DeliveryRetention,
		Logger: cfg.Logger}); err != nil {
		return nil, err
	}
	if err := river.AddWorkerSafely(workers, &OrphanWorker{Pool: cfg.Pool, Queues: runQueues, Logger: cfg.Logger}); err != nil {
		return nil, err
	}
	periodic := []*river.PeriodicJob{
		river.NewPeriodicJob(river.PeriodicInterval(cfg.CleanupInterval),
			func() (river.JobArgs, *river.InsertOpts) { return CleanupArgs{}, nil },
			&river.PeriodicJobOpts{RunOnStart: true}),
		river.NewPeriodicJob(river.PeriodicInterval(orphanSweep),
			func() (river.JobArgs, *river.InsertOpts) { return OrphanArgs{}, nil },
			&river.PeriodicJobOpts{RunOnStart: true}),
	}
	if cfg.Alerts != nil {
		if err := river.AddWorkerSafely(workers, &AlertWorker{Alerts: cfg.Alerts}); err != nil {
			return nil, err
		}
		periodic = append(periodic, river.NewPeriodicJob(river.PeriodicInterval(AlertInterval),
			func() (river.JobArgs, *river.InsertOpts) { return AlertArgs{}, nil }, &river.PeriodicJobOpts{RunOnStart: true}))
	}
	client, err := river.NewClient(riverpgxv5.New(cfg.Pool), &river.Config{
		Logger:               cfg.Logger,
		Queues:               q,
		Workers:              workers,
		JobTimeout:           -1, // per kind: see EventWorker.Timeout
		RescueStuckJobsAfter: RescueAfter(cfg.Sources),
		// Polling bounds how fast a job inserted by another process starts
		// when LISTEN/NOTIFY is not available (e.g. behind PgBouncer).
		FetchCooldown:     20 * time.Millisecond,
		FetchPollInterval: 200 * time.Millisecond,
		PeriodicJobs:      periodic,
		// Migration 012 drops River's two GIN indexes (riverSearchIndexes).
		ReindexerIndexNames: reindexedRiverIndexes(),
	})
	if err != nil {
		return nil, err
	}
	w.runner = client.ID()
	return client, nil
}

// queueFetchCooldown is the event queues' fetch cooldown: while a backlog
// drains, River fetches again as soon as slots free up, at most this often.
// It is also the window of the notifications that wake a line's next job
// (queueWaker).
const queueFetchCooldown = 5 * time.Millisecond

// jobsPerWorker is how many River jobs an HTTP destination's queue runs at
// once per worker with group commit. A job spends most of its life waiting
// for the batch that takes its claim and the one that records its
// completion, and those waits hold no forward slot (attemptSlots), so River
// runs twice as many jobs as may forward at once: the batches grow and the
// waits overlap. Measured on 2 cores (make bench, processing, 20,000
// events, a quiet machine, 50 workers): 50 jobs 4,139-4,995 events/s at
// 0.32 ms of CPU per event (worker and Postgres), 100 jobs 5,163-5,218 at
// 0.27 ms.
const jobsPerWorker = 2

// riverJobs is how many jobs River runs at once on t's queue in a process
// with workers forward slots per destination: as many as the slots where a
// job holds its place for its whole life (the per-event path, a Go
// handler's transaction) or where its gate must be asked right before its
// forward (a rate limit, an in-flight cap or a circuit breaker: a job
// waiting for a slot would forward on an answer its gate gave before the
// wait); jobsPerWorker times as many otherwise.
func (t *Target) riverJobs(workers int, perEvent bool) int {
	if perEvent || t.Handler != nil || t.flowControlled() {
		return workers
	}
	return workers * jobsPerWorker
}

// queues are the River queues a worker process runs: one per destination
// (QueueFor), with Target.riverJobs jobs at once or the destination's in-flight
// cap if lower, so that a slow or paused destination holds only its own;
// the queue of jobs written before destinations had queues (workers jobs);
// River's default queue for the periodic jobs; a short fetch cooldown on
// the event queues (queueFetchCooldown).
func queues(sources []*Source, workers int, perEvent bool) map[string]river.QueueConfig {
	q := map[string]river.QueueConfig{
		Queue:              {MaxWorkers: workers, FetchCooldown: queueFetchCooldown},
		river.QueueDefault: {MaxWorkers: 2},
	}
	for _, s := range sources {
		for _, t := range s.Targets {
			n := t.riverJobs(workers, perEvent)
			if t.MaxInFlight > 0 {
				n = min(n, t.MaxInFlight)
			}
			q[QueueFor(s.Name, t.Name)] = river.QueueConfig{MaxWorkers: n, FetchCooldown: queueFetchCooldown}
		}
	}
	return q
}

// AlertInterval is how often the leader looks for what to alert about.
const AlertInterval = 10 * time.Second

// Alerter sends operator alerts (package internal/alert).
type Alerter interface {
	Scan(ctx context.Context) error
}

// AlertArgs is the periodic alert scan (run by the elected leader only).
type AlertArgs struct{}

// Kind implements river.JobArgs.
func (AlertArgs) Kind() string { return "hookline.alerts" }

// InsertOpts implements river.JobArgsWithInsertOpts: one scan at a time;
// a failed scan is not retried (the next one comes soon).
func (AlertArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{MaxAttempts: 1, UniqueOpts: river.UniqueOpts{ByState: UniqueStates}}
}

// AlertWorker runs the alert scan.
type AlertWorker struct {
	river.WorkerDefaults[AlertArgs]
	Alerts Alerter
}

// Work implements river.Worker.
func (w *AlertWorker) Work(ctx context.Context, _ *river.Job[AlertArgs]) error {
	return w.Alerts.Scan(ctx)
}

// Timeout implements river.Worker.
func (w *AlertWorker) Timeout(*river.Job[AlertArgs]) time.Duration { return AlertInterval * 3 }

// CleanupArgs is the periodic clean-up job (run by the elected leader only).
type CleanupArgs struct{}

// Kind implements river.JobArgs.
func (CleanupArgs) Kind() string { return "hookline.cleanup" }

// CleanupWorker deletes expired claims and prunes stored bodies of completed
// events past the retention period, in bounded batches, so tables do not
// grow without bound. Dead items are kept until an operator deletes them.
type CleanupWorker struct {
	river.WorkerDefaults[CleanupArgs]
	Pool              *pgxpool.Pool
	Claims            *idem.Store
	DeliveryRetention time.Duration
	Logger            *slog.Logger
	// SweepWindow is how many unfinished events one run checks for an
	// active job (default 1,000); see requeueStranded.
	SweepWindow int

	mu     sync.Mutex
	cursor sweepCursor // where the next sweep starts
}

// sweepCursor is a position in (queued_at, source, event_id) order.
type sweepCursor struct {
	at               time.Time
	source, id, dest string
}

// Work implements river.Worker.
func (w *CleanupWorker) Work(ctx context.Context, _ *river.Job[CleanupArgs]) error {
	claims, err := w.Claims.Cleanup(ctx, 1000)
	if err != nil {
		return err
	}
	deliveries, err := deleteBatches(ctx, w.Pool, stmt.pruneDeliveries, w.DeliveryRetention.Microseconds())
	if err != nil {
		return err
	}
	contentKeys, err := deleteBatches(ctx, w.Pool, stmt.pruneContentKeys)
	if err != nil {
		return err
	}
	if _, err := deleteBatches(ctx, w.Pool, stmt.pruneAttempts, w.DeliveryRetention.Microseconds()); err != nil {
		return err
	}
	requeued, err := w.requeueStranded(ctx, river.ClientFromContext[pgx.Tx](ctx).InsertMany)
	if err != nil {
		return err
	}
	if err := w.tendLines(ctx); err != nil {
		return err
	}
	if _, err := deleteBatches(ctx, w.Pool, stmt.pruneInstances, instanceRetention.Microseconds()); err != nil {
		return err
	}
	if claims+deliveries+contentKeys+int64(requeued) > 0 {
		w.Logger.Info("clean-up", "expired_claims", claims, "pruned_deliveries", deliveries, "expired_content_keys", contentKeys, "requeued_stranded", requeued)
	}
	return nil
}

// lineIdleRetention is how long an ordering line with nothing waiting is
// kept after it last moved: its greatest ordering.by marks stale events
// only while it is kept.
const lineIdleRetention = defaults.DedupWindow

// lineRepairAfter is how long a line with places not yet ended may stand
// still before the clean-up advances it (a no-op for a line whose head is
// running or retrying).
const lineRepairAfter = 30 * time.Second

// tendLines advances lines that have stood still (at most 1,000 per run)
// and prunes idle ones.
func (w *CleanupWorker) tendLines(ctx context.Context) error {
	rows, err := w.Pool.Query(ctx, behindLinesSQL, lineRepairAfter.Microseconds(), 1000)
	if err != nil {
		return err
	}
	var source, dest, key string
	var behind [][3]string
	if _, err := pgx.ForEachRow(rows, []any{&source, &dest, &key}, func() error {
		behind = append(behind, [3]string{source, dest, key})
		return nil
	}); err != nil {
		return err
	}
	for _, l := range behind {
		if err := AdvanceLine(ctx, w.Pool, l[0], l[1], l[2]); err != nil {
			return fmt.Errorf("advance ordering line: %w", err)
		}
	}
	_, err = deleteBatches(ctx, w.Pool, stmt.pruneLines, lineIdleRetention.Microseconds())
	return err
}

// deleteBatches runs a DELETE of at most 1,000 rows until it deletes fewer,
// and returns how many it deleted.
func deleteBatches(ctx context.Context, pool *pgxpool.Pool, sql string, args ...any) (int64, error) {
	var n int64
	for {
		tag, err := pool.Exec(ctx, sql, args...)
		if err != nil {
			return n, err
		}
		n += tag.RowsAffected()
		if tag.RowsAffected() < 1000 {
			return n, nil
		}
	}
}

// strandedAfter is how long an unfinished event may go without an active job
// before the sweep re-enqueues it. Ingest inserts an event's job in the
// event's own transaction and the worker ends it in the transaction that
// records the outcome, so an unfinished event without an active job is
// stranded (say a job cancelled from River UI); the delay only keeps the
// sweep away from transactions in flight.
const strandedAfter = time.Minute

// requeueStranded re-enqueues waiting events that have no active job:
// nothing disappears silently.
//
// Each run checks one window of SweepWindow waiting events, in queue order
// (strandedSQL), and the next run goes on from where it stopped, wrapping
// around at the end: the cost of a run is bounded however long the backlog,
// and the rotation still reaches every event in turn.
func (w *CleanupWorker) requeueStranded(ctx context.Context, insert func(context.Context, []river.InsertManyParams) ([]*rivertype.JobInsertResult, error)) (int, error) {
	window := w.SweepWindow
	if window <= 0 {
		window = 1000
	}
	w.mu.Lock()
	from := w.cursor
	w.mu.Unlock()
	rows, err := w.Pool.Query(ctx, strandedSQL, strandedAfter.Microseconds(), from.at, from.source, from.id, from.dest, window)
	if err != nil {
		return 0, err
	}
	var params []river.InsertManyParams
	var lines []EventArgs // Source, Destination and (in EventID) the key of each line to advance
	next := sweepCursor{} // an empty window: the end of the queue, start over
	for rows.Next() {
		var a EventArgs
		var at time.Time
		var lineKey *string
		var last bool
		var seen int
		if err := rows.Scan(&a.Source, &a.EventID, &a.Destination, &at, &lineKey, &last, &seen); err != nil {
			rows.Close()
			return 0, err
		}
		if !last {
			opts := InsertOptsFor(0)
			if lineKey != nil {
				opts.Pending = true // its line decides when it runs
				lines = append(lines, EventArgs{Source: a.Source, Destination: a.Destination, EventID: *lineKey})
			}
			params = append(params, river.InsertManyParams{Args: a, InsertOpts: opts})
		} else if seen >= window {
			next = sweepCursor{at: at, source: a.Source, id: a.EventID, dest: a.Destination}
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	w.mu.Lock()
	w.cursor = next
	w.mu.Unlock()
	if len(params) == 0 {
		return 0, nil
	}
	res, err := insert(ctx, params)
	if err != nil {
		return 0, fmt.Errorf("requeue stranded events: %w", err)
	}
	for _, l := range lines {
		if err := AdvanceLine(ctx, w.Pool, l.Source, l.Destination, l.EventID); err != nil {
			return 0, fmt.Errorf("advance the ordering line of a re-enqueued event: %w", err)
		}
	}
	n := 0
	for i, r := range res {
		if !r.UniqueSkippedAsDuplicate {
			n++
			w.Logger.Warn("re-enqueued an event left without a job", "source", params[i].Args.(EventArgs).Source,
				"event_id", params[i].Args.(EventArgs).EventID, "job_id", r.Job.ID)
		}
	}
	return n, nil
}
