package jobs

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Backlog measures how far behind this process's workers are: the age of
// the oldest event job ready to run on the queues whose speed is the
// process's own (its CPU and its database), not a destination's.
//
// Left out, because their jobs wait on purpose or on the destination, and
// a slower ingest would not help them:
//   - the queues of flow-controlled destinations (rate limit, in-flight
//     cap, circuit breaker) and of paused ones;
//   - the queue of an HTTP destination whose forward slots in this process
//     are all busy at the time of the measure: a slow destination.
//
// An ordering line's waiting places are River 'pending' jobs, not ready to
// run, so a hot key's line is not a backlog either.
type Backlog struct {
	pool   *pgxpool.Pool
	queues []backlogQueue
}

type backlogQueue struct {
	name  string
	slots chan struct{} // the destination's forward slots; nil: none (a Go handler)
}

// NewBacklog returns the backlog of sources' queues; give it to the
// ClientConfig of the River client that runs them (Backlog), which lets it
// see the forward slots.
func NewBacklog(pool *pgxpool.Pool, sources []*Source) *Backlog {
	b := &Backlog{pool: pool}
	for _, s := range sources {
		for _, t := range s.destinations() {
			if !t.flowControlled() {
				b.queues = append(b.queues, backlogQueue{name: QueueFor(s.Name, t.Name)})
			}
		}
	}
	return b
}

// watch lets b see the forward slots of the worker's sources.
func (b *Backlog) watch(sources map[string]*Source, slots attemptSlots) {
	for _, s := range sources {
		for _, t := range s.Targets {
			d, ok := slots[t]
			if !ok {
				continue
			}
			for i := range b.queues {
				if b.queues[i].name == QueueFor(s.Name, t.Name) {
					b.queues[i].slots = d.busy
				}
			}
		}
	}
}

// Lag returns the age of the oldest ready event job of b's queues (0 when
// there is none), leaving out the queues whose destination has no free
// forward slot in this process.
func (b *Backlog) Lag(ctx context.Context) (time.Duration, error) {
	names := make([]string, 0, len(b.queues))
	for _, q := range b.queues {
		if q.slots == nil || len(q.slots) < cap(q.slots) {
			names = append(names, q.name)
		}
	}
	if len(names) == 0 {
		return 0, nil
	}
	var seconds float64
	if err := b.pool.QueryRow(ctx, backlogLagSQL, names, EventArgs{}.Kind()).Scan(&seconds); err != nil {
		return 0, err
	}
	return time.Duration(max(seconds, 0) * float64(time.Second)), nil
}
