package jobs

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/hookline/hookline/idem"
	"github.com/hookline/hookline/internal/metrics"
)

// ClientConfig configures the River client that runs hookline's jobs.
type ClientConfig struct {
	Pool    *pgxpool.Pool
	Sources []*Source
	// Workers is the number of concurrent jobs in this process (default 50).
	// Zero with InsertOnly makes an insert-only client.
	Workers int
	// InsertOnly builds a client that only inserts (--role ingest).
	InsertOnly bool
	// DeliveryRetention prunes stored bodies of completed events older than
	// this (default 168h). Dead items keep their own copy.
	DeliveryRetention time.Duration
	// CleanupInterval is how often the periodic clean-up runs (default 1m).
	CleanupInterval time.Duration
	Metrics         *metrics.Metrics
	Logger          *slog.Logger
	Forwarder       *Forwarder
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
		cfg.Workers = 50
	}
	if cfg.DeliveryRetention <= 0 {
		cfg.DeliveryRetention = 7 * 24 * time.Hour
	}
	if cfg.CleanupInterval <= 0 {
		cfg.CleanupInterval = time.Minute
	}
	w, err := NewEventWorker(WorkerConfig{Pool: cfg.Pool, Sources: cfg.Sources, Metrics: cfg.Metrics, Logger: cfg.Logger, Forwarder: cfg.Forwarder})
	if err != nil {
		return nil, err
	}
	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, w); err != nil {
		return nil, err
	}
	if err := river.AddWorkerSafely(workers, &CleanupWorker{Pool: cfg.Pool, Claims: w.claims, DeliveryRetention: cfg.DeliveryRetention, Logger: cfg.Logger}); err != nil {
		return nil, err
	}
	return river.NewClient(riverpgxv5.New(cfg.Pool), &river.Config{
		Logger: cfg.Logger,
		Queues: map[string]river.QueueConfig{
			Queue:              {MaxWorkers: cfg.Workers},
			river.QueueDefault: {MaxWorkers: 2},
		},
		Workers:              workers,
		JobTimeout:           -1, // per kind: see EventWorker.Timeout
		RescueStuckJobsAfter: RescueAfter(cfg.Sources),
		// Polling bounds how fast a job inserted by another process starts
		// when LISTEN/NOTIFY is not available (e.g. behind PgBouncer).
		FetchCooldown:     20 * time.Millisecond,
		FetchPollInterval: 200 * time.Millisecond,
		PeriodicJobs: []*river.PeriodicJob{
			river.NewPeriodicJob(river.PeriodicInterval(cfg.CleanupInterval),
				func() (river.JobArgs, *river.InsertOpts) { return CleanupArgs{}, nil },
				&river.PeriodicJobOpts{RunOnStart: true}),
		},
	})
}

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
}

// Work implements river.Worker.
func (w *CleanupWorker) Work(ctx context.Context, _ *river.Job[CleanupArgs]) error {
	claims, err := w.Claims.Cleanup(ctx, 1000)
	if err != nil {
		return err
	}
	var deliveries int64
	for {
		tag, err := w.Pool.Exec(ctx, `DELETE FROM hookline_deliveries WHERE id IN (
			SELECT d.id FROM hookline_deliveries d
			WHERE d.received_at < now() - $1::bigint * interval '1 microsecond'
			  AND NOT EXISTS (SELECT 1 FROM hookline_events e WHERE e.delivery_id = d.id AND e.state <> 'completed')
			LIMIT 1000)`, w.DeliveryRetention.Microseconds())
		if err != nil {
			return err
		}
		deliveries += tag.RowsAffected()
		if tag.RowsAffected() < 1000 {
			break
		}
	}
	if claims+deliveries > 0 {
		w.Logger.Info("clean-up", "expired_claims", claims, "pruned_deliveries", deliveries)
	}
	return nil
}
