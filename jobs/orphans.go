package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/hookline/hookline/internal/defaults"
)

// Which events no instance will ever process. Every running instance keeps
// a record in hookline_instances, renewed every instanceHeartbeat: the
// event queues (one per source and destination, QueueFor) it configures,
// and those its workers run; it marks the record stopped when it stops. A
// waiting event job belongs to a source or destination removed from the
// configuration when no record keeps its queue:
//
//   - a live record (renewed within instanceLive) that runs the queue keeps
//     it for as long as it lives, whatever the sweeping instance
//     configures: instances may serve different sources;
//   - a live record that only configures it (an ingest instance deployed
//     before the workers that learn its new source) keeps a job for
//     unknownSourceGrace after the job was queued, a rolling deploy;
//   - a record stopped cleanly keeps its queues for orphanGrace after its
//     stop; one that stopped renewing without stopping (killed, or cut off
//     from Postgres) keeps them for killedGrace after its last renewal,
//     time for it to be restarted;
//   - those last two keep a job no longer than its events' bound
//     (EventQueueBounds, which each record carries per configured queue;
//     boundCap), so that an accepted event ends within it, whatever fails.
//
// Jobs no record keeps go to the dead set (reason failed) once queued for
// orphanGrace: nothing waits without bound.

// instanceHeartbeat is how often an instance renews its record.
const instanceHeartbeat = 10 * time.Second

// instanceLive is how recently a live instance's record was renewed.
const instanceLive = 60 * time.Second

// orphanGrace is how long a job of a queue no record keeps is left before
// its event goes to the dead set, and how long a cleanly stopped
// instance's record keeps its queues.
const orphanGrace = 10 * time.Second

// killedGrace is how long the record of an instance that stopped renewing
// it without stopping keeps its queues after its last renewal.
const killedGrace = 10 * time.Minute

// unknownSourceGrace is how long a job whose queue a live instance
// configures but none runs is left for a worker that will (a rolling
// deploy that adds a source or destination) before it goes to the dead
// set.
const unknownSourceGrace = 10 * time.Minute

// orphanSweep is how often the elected leader looks for orphaned jobs.
const orphanSweep = 10 * time.Second

// instanceRetention is how long an instance's record is kept after it
// stopped or was last renewed (for an operator's look), then pruned by the
// clean-up.
const instanceRetention = 24 * time.Hour

// EventQueueBounds are, in EventQueues' order, the longest an accepted event
// of each queue may wait before it completes or goes to the dead set:
// max_attempts × (timeout + max(backoff.max, 1 h)) + lease + 60 s, with the
// defaults of the fields left zero; 1 h is the longest Retry-After honoured
// (a 429 or 503 may ask for that instead of the backoff).
func EventQueueBounds(sources []*Source) []time.Duration {
	var out []time.Duration
	for _, s := range sources {
		lease := s.Lease
		if lease <= 0 {
			lease = defaults.Lease
		}
		for _, t := range s.destinations() {
			// An attempt lasts the destination's timeout; a Go handler's,
			// the target's (the lease by default).
			attempts, timeout, backoff := t.MaxAttempts, t.Timeout, t.BackoffMax
			if t.HTTP != nil {
				timeout = t.HTTP.Timeout
				if timeout <= 0 {
					timeout = defaults.DestTimeout
				}
			}
			if attempts <= 0 {
				attempts = defaults.MaxAttempts
			}
			if timeout <= 0 {
				timeout = lease
			}
			if backoff <= 0 {
				backoff = defaults.BackoffMax
			}
			backoff = max(backoff, maxRetryAfter)
			out = append(out, time.Duration(attempts)*(timeout+backoff)+lease+time.Minute)
		}
	}
	return out
}

// EventQueues are the event queues of sources' destinations.
func EventQueues(sources []*Source) []string {
	var qs []string
	for _, s := range sources {
		for _, t := range s.destinations() {
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
	bounds           []int64 // µs, per configures; 0: unknown
	log              *slog.Logger
	stop             context.CancelFunc
	done             sync.WaitGroup
}

// InstanceQueues are the event queues an instance configures and those its
// workers run (none for an ingest instance), with the bound of each
// configured queue (EventQueueBounds; missing or 0: unknown).
type InstanceQueues struct {
	Configures, Runs []string
	Bounds           []time.Duration
}

// StartInstance records the instance id (River's client id) and its queues,
// and renews the record every instanceHeartbeat until Stop. The first
// record is written before it returns: an instance accepts no event before
// the other instances can see that it configures its queue.
func StartInstance(ctx context.Context, pool *pgxpool.Pool, id string, q InstanceQueues, log *slog.Logger) (*Instance, error) {
	if log == nil {
		log = slog.Default()
	}
	bounds := make([]int64, len(q.Configures))
	for i := range bounds {
		if i < len(q.Bounds) {
			bounds[i] = q.Bounds[i].Microseconds()
		}
	}
	in := &Instance{pool: pool, id: id, configures: nonNil(q.Configures), runs: nonNil(q.Runs), bounds: bounds, log: log}
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
	_, err := in.pool.Exec(ctx, stmt.seeInstance, in.id, in.configures, in.runs, in.bounds)
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
			in.log.Warn("could not renew this instance's record (the other instances leave its queues alone for ten minutes after its last renewal)", "error", err.Error())
		}
		cancel()
	}
}

// Stop stops renewing the record and marks it stopped: the events of the
// queues only this instance configured become orphans orphanGrace later.
func (in *Instance) Stop(ctx context.Context) {
	in.stop()
	in.done.Wait()
	if _, err := in.pool.Exec(ctx, stmt.leaveInstance, in.id); err != nil {
		in.log.Warn("could not mark this instance's record stopped; its queues stay its own for ten minutes after its last renewal", "error", err.Error())
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
	qs, err := orphanQueues(ctx, w.Pool, w.Queues)
	if err != nil || len(qs.unkept)+len(qs.capped) == 0 {
		return err
	}
	rows, err := w.Pool.Query(ctx, orphanJobsSQL, qs.unkept, qs.configured, orphanGrace.Microseconds(), unknownSourceGrace.Microseconds(),
		qs.capped, qs.caps)
	if err != nil {
		return err
	}
	var orphans []orphan
	var o orphan
	if _, err := pgx.ForEachRow(rows, []any{&o.id, &o.source, &o.event, &o.dest, &o.configured}, func() error { orphans = append(orphans, o); return nil }); err != nil {
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

// orphanQueues are the queues with waiting jobs that no record keeps
// (unkept), and of those the ones a live instance configures without
// running them (configured: their jobs get unknownSourceGrace); run are
// the queues this instance runs.
func orphanQueues(ctx context.Context, pool *pgxpool.Pool, run []string) (orphanedQueues, error) {
	var out orphanedQueues
	rows, err := pool.Query(ctx, waitingQueuesSQL)
	if err != nil {
		return out, err
	}
	waiting, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return out, err
	}
	waiting = slices.DeleteFunc(waiting, func(q string) bool { return slices.Contains(run, q) })
	if len(waiting) == 0 {
		return out, nil
	}
	records, err := readInstances(ctx, pool)
	if err != nil {
		return out, err
	}
	out = orphanedQueues{unkept: []string{}, configured: []string{}, capped: []string{}, caps: []int64{}}
	for _, q := range waiting {
		k := keeperOf(records, q)
		switch {
		case k.runs:
			continue
		case k.protects:
		case k.configures:
			out.unkept, out.configured = append(out.unkept, q), append(out.configured, q)
		default:
			out.unkept = append(out.unkept, q)
			continue
		}
		// Kept for a grace, but by no live instance running it: no longer
		// than its events' own bound allows.
		if k.bound > 0 {
			out.capped, out.caps = append(out.capped, q), append(out.caps, boundCap(k.bound).Microseconds())
		}
	}
	return out, nil
}

// orphanedQueues are what orphanQueues found: the queues no record keeps
// (unkept; of those, configured by a live instance that runs none of them:
// configured), and the queues kept only for a grace (a killed instance's, or
// configured without a worker) whose events' bound is known (capped, with
// each one's cap in µs).
type orphanedQueues struct {
	unkept, configured, capped []string
	caps                       []int64
}

// boundCap is how long a job of a queue with the given bound may wait
// while no live instance runs it: the bound, less two sweeps (so that the
// sweep that dead-sets it comes within the bound), and no less than
// orphanGrace.
func boundCap(bound time.Duration) time.Duration {
	return max(bound-2*orphanSweep, orphanGrace)
}

// instanceRecord is an instance's record as the sweep reads it: its queues,
// whether it is live, and, if not, whether its queues are still its own.
type instanceRecord struct {
	configures, runs []string
	bounds           []int64 // µs, per configures (shorter, or 0: unknown)
	live, protects   bool
}

// readInstances reads every instance's record.
func readInstances(ctx context.Context, pool *pgxpool.Pool) ([]instanceRecord, error) {
	rows, err := pool.Query(ctx, stmt.instances, instanceLive.Microseconds(), orphanGrace.Microseconds(), killedGrace.Microseconds())
	if err != nil {
		return nil, err
	}
	var out []instanceRecord
	var r instanceRecord
	_, err = pgx.ForEachRow(rows, []any{&r.configures, &r.runs, &r.bounds, &r.live, &r.protects}, func() error { out = append(out, r); return nil })
	return out, err
}

// keeper is what the records say of one queue: a live record runs it, a
// live record configures it, a record no longer live still keeps it; and
// the shortest bound any record gives its events (0: none known).
type keeper struct {
	runs, configures, protects bool
	bound                      time.Duration
}

// keeperOf is what records say of queue q.
func keeperOf(records []instanceRecord, q string) keeper {
	var k keeper
	for _, r := range records {
		mine := slices.Contains(r.configures, q) || slices.Contains(r.runs, q)
		if i := slices.Index(r.configures, q); i >= 0 && i < len(r.bounds) && r.bounds[i] > 0 && (r.live || r.protects) {
			if b := time.Duration(r.bounds[i]) * time.Microsecond; k.bound == 0 || b < k.bound {
				k.bound = b
			}
		}
		switch {
		case !mine:
		case r.live:
			k.runs = k.runs || slices.Contains(r.runs, q)
			k.configures = true
		case r.protects:
			k.protects = true
		}
	}
	return k
}

// orphan is a waiting job no instance will run, and its event.
type orphan struct {
	id                  int64
	source, event, dest string
	configured          bool // a live instance configures its queue, but none runs it
}

// dead moves the orphan's event to the dead set and finishes its job; an
// event with a place in an ordering line ends that place, and the line
// moves on, as when a worker dead-sets an event.
func (o orphan) dead(ctx context.Context, pool *pgxpool.Pool) error {
	msg := fmt.Sprintf("destination %q of source %q is not configured on any running instance (removed from the configuration?); add it back and retry the dead item", o.dest, o.source)
	if o.configured {
		msg = fmt.Sprintf("destination %q of source %q is configured on a running instance, but no worker configures it (not deployed to the workers within %s, or within the bound of its events' wait); deploy it to the workers and retry the dead item", o.dest, o.source, unknownSourceGrace)
	}
	var key *string // the destination's ordering line, if it has a place in one
	if err := pool.QueryRow(ctx, lineOfSQL, o.source, o.event, o.dest).Scan(&key); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("look up the event's ordering line: %w", err)
	}
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if key != nil {
			if err := lockLine(ctx, tx, o.source, o.dest, *key); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, stmt.deadUnclaimed, o.source, o.event, o.dest, msg); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, finishWaitingJobSQL, o.id); err != nil {
			return err
		}
		if key != nil {
			return advanceLine(ctx, tx, o.source, o.dest, *key)
		}
		return nil
	})
}

// keptElsewhere tells whether another instance keeps queue (for how long
// a live instance that only configures it does: unknownSourceGrace after
// the job was queued).
func keptElsewhere(ctx context.Context, pool *pgxpool.Pool, queue string) (keeper, error) {
	records, err := readInstances(ctx, pool)
	if err != nil {
		return keeper{}, err
	}
	return keeperOf(records, queue), nil
}
