package jobs

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
)

// Which events no instance will ever process. Every running instance keeps
// a record in hookline_instances, renewed every instanceHeartbeat: the
// event queues (one per source and destination, QueueFor) it configures,
// and those its workers run. A waiting event job in a queue that no live
// instance configures belongs to a source or destination removed from the
// configuration: after orphanGrace it goes to the dead set (reason
// failed), so that nothing waits without bound. A queue some live instance
// configures but none runs (an ingest instance deployed before the workers
// that learn its new source) is given unknownSourceGrace, the length of a
// rolling deploy. A queue a live instance runs is never orphaned, whatever
// the instance sweeping configures: instances may serve different sources.

// instanceHeartbeat is how often an instance renews its record.
const instanceHeartbeat = 10 * time.Second

// instanceLive is how recently a live instance's record was renewed. An
// instance stopped cleanly removes its record; a killed one's stops
// counting this long after its last renewal.
const instanceLive = 60 * time.Second

// orphanGrace is how long a job of a queue no live instance configures is
// left before its event goes to the dead set.
const orphanGrace = 10 * time.Second

// unknownSourceGrace is how long a job whose source or destination a live
// instance configures but no worker runs is left for a worker that will (a
// rolling deploy that adds one) before it goes to the dead set.
const unknownSourceGrace = 10 * time.Minute

// orphanSweep is how often the elected leader looks for orphaned jobs.
const orphanSweep = 10 * time.Second

// instanceRetention is how long the record of an instance that stopped
// renewing it is kept (for an operator's look), then pruned by the
// clean-up.
const instanceRetention = 24 * time.Hour

// EventQueues are the event queues of sources' destinations.
func EventQueues(sources []*Source) []string {
	var qs []string
	for _, s := range sources {
		for _, t := range s.Targets {
			qs = append(qs, QueueFor(s.Name, t.Name))
		}
	}
	return qs
}

// Instance is a running instance's record in hookline_instances, renewed
// until Stop.
type Instance struct {
	pool             *pgxpool.Pool
	id               string
	configures, runs []string
	log              *slog.Logger
	stop             context.CancelFunc
	done             sync.WaitGroup
}

// StartInstance records the instance id (River's client id), the event
// queues it configures and those its workers run (none for an ingest
// instance), and renews the record every instanceHeartbeat until Stop. The
// first record is written before it returns: an instance accepts no event
// before the other instances can see that it configures its queue.
func StartInstance(ctx context.Context, pool *pgxpool.Pool, id string, configures, runs []string, log *slog.Logger) (*Instance, error) {
	if log == nil {
		log = slog.Default()
	}
	in := &Instance{pool: pool, id: id, configures: nonNil(configures), runs: nonNil(runs), log: log}
	if err := in.renew(ctx); err != nil {
		return nil, fmt.Errorf("record this instance in hookline_instances: %w", err)
	}
	loop, stop := context.WithCancel(context.WithoutCancel(ctx))
	in.stop = stop
	in.done.Go(func() { in.heartbeat(loop) })
	return in, nil
}

// nonNil is qs, or an empty list for nil (a text[] column NOT NULL).
func nonNil(qs []string) []string {
	if qs == nil {
		return []string{}
	}
	return qs
}

// renew writes the instance's record.
func (in *Instance) renew(ctx context.Context) error {
	_, err := in.pool.Exec(ctx, stmt.seeInstance, in.id, in.configures, in.runs)
	return err
}

// heartbeat renews the record every instanceHeartbeat until ctx is done.
func (in *Instance) heartbeat(ctx context.Context) {
	t := time.NewTicker(instanceHeartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(ctx, instanceHeartbeat)
		if err := in.renew(rctx); err != nil && ctx.Err() == nil {
			in.log.Warn("could not renew this instance's record (its queues count as served for a minute after the last renewal)", "error", err.Error())
		}
		cancel()
	}
}

// Stop stops renewing the record and removes it: the events of the queues
// only this instance configured become orphans at once.
func (in *Instance) Stop(ctx context.Context) {
	in.stop()
	in.done.Wait()
	if _, err := in.pool.Exec(ctx, stmt.leaveInstance, in.id); err != nil {
		in.log.Warn("could not remove this instance's record; it stops counting a minute after its last renewal", "error", err.Error())
	}
}

// OrphanArgs is the periodic sweep for orphaned event jobs (run by one
// instance at a time).
type OrphanArgs struct{}

// Kind implements river.JobArgs.
func (OrphanArgs) Kind() string { return "hookline.orphans" }

// InsertOpts implements river.JobArgsWithInsertOpts: one sweep at a time;
// a failed sweep is not retried (the next one comes soon).
func (OrphanArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{MaxAttempts: 1, UniqueOpts: river.UniqueOpts{ByState: UniqueStates}}
}

// OrphanWorker moves the events of orphaned jobs to the dead set.
type OrphanWorker struct {
	river.WorkerDefaults[OrphanArgs]
	Pool *pgxpool.Pool
	// Queues are the event queues this instance's workers run: never
	// orphans.
	Queues []string
	Logger *slog.Logger
}

// Timeout implements river.Worker.
func (w *OrphanWorker) Timeout(*river.Job[OrphanArgs]) time.Duration { return 3 * orphanSweep }

// Work implements river.Worker.
func (w *OrphanWorker) Work(ctx context.Context, _ *river.Job[OrphanArgs]) error {
	unconfigured, unrun, err := orphanQueues(ctx, w.Pool, w.Queues)
	if err != nil || len(unconfigured)+len(unrun) == 0 {
		return err
	}
	rows, err := w.Pool.Query(ctx, orphanJobsSQL, append(unconfigured, unrun...), unrun,
		orphanGrace.Microseconds(), unknownSourceGrace.Microseconds())
	if err != nil {
		return err
	}
	var orphans []orphan
	var o orphan
	if _, err := pgx.ForEachRow(rows, []any{&o.id, &o.source, &o.event, &o.dest, &o.unrun}, func() error { orphans = append(orphans, o); return nil }); err != nil {
		return err
	}
	for _, o := range orphans {
		if err := o.dead(ctx, w.Pool); err != nil {
			return fmt.Errorf("dead-set an orphaned event: %w", err)
		}
		w.Logger.Error("event dead: its destination is not configured", "source", o.source, "destination", o.dest, "event_id", o.event)
	}
	return nil
}

// orphanQueues are the queues with waiting jobs that no live instance
// configures (unconfigured) and those that live instances configure but
// none runs (unrun); run are the queues this instance runs.
func orphanQueues(ctx context.Context, pool *pgxpool.Pool, run []string) (unconfigured, unrun []string, err error) {
	rows, err := pool.Query(ctx, waitingQueuesSQL)
	if err != nil {
		return nil, nil, err
	}
	waiting, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, nil, err
	}
	waiting = slices.DeleteFunc(waiting, func(q string) bool { return slices.Contains(run, q) })
	if len(waiting) == 0 {
		return nil, nil, nil
	}
	var configured, running []string
	if err := pool.QueryRow(ctx, stmt.liveQueues, instanceLive.Microseconds()).Scan(&configured, &running); err != nil {
		return nil, nil, err
	}
	for _, q := range waiting {
		switch {
		case slices.Contains(running, q):
		case slices.Contains(configured, q):
			unrun = append(unrun, q)
		default:
			unconfigured = append(unconfigured, q)
		}
	}
	return unconfigured, unrun, nil
}

// orphan is a waiting job no instance will run, and its event.
type orphan struct {
	id                  int64
	source, event, dest string
	unrun               bool // a live instance configures its queue, but none runs it
}

// dead moves the orphan's event to the dead set and finishes its job.
func (o orphan) dead(ctx context.Context, pool *pgxpool.Pool) error {
	msg := fmt.Sprintf("destination %q of source %q is not configured on any running instance (removed from the configuration?); add it back and retry the dead item", o.dest, o.source)
	if o.unrun {
		msg = fmt.Sprintf("destination %q of source %q is configured on a running instance, but no worker configures it (not deployed to the workers for %s); deploy it to the workers and retry the dead item", o.dest, o.source, unknownSourceGrace)
	}
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, stmt.deadUnclaimed, o.source, o.event, o.dest, msg); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, finishWaitingJobSQL, o.id)
		return err
	})
}

// configuredElsewhere tells whether a live instance configures queue.
func configuredElsewhere(ctx context.Context, pool *pgxpool.Pool, queue string) (bool, error) {
	var configured, running []string
	if err := pool.QueryRow(ctx, stmt.liveQueues, instanceLive.Microseconds()).Scan(&configured, &running); err != nil {
		return false, err
	}
	return slices.Contains(configured, queue), nil
}
