package jobs

import (
	"math"
	"sync"
	"time"
)

// takePos is a job's place in River's fetch order (the order of its fetch
// index): priority, scheduled_at, id.
type takePos struct {
	priority    int16
	scheduledAt time.Time
	id          int64
}

// after tells whether p comes after q in River's fetch order.
func (p takePos) after(q takePos) bool {
	if p.priority != q.priority {
		return p.priority > q.priority
	}
	if !p.scheduledAt.Equal(q.scheduledAt) {
		return p.scheduledAt.After(q.scheduledAt)
	}
	return p.id > q.id
}

// takeStart comes before every job.
var takeStart = takePos{priority: math.MinInt16, scheduledAt: time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), id: math.MinInt64}

// takeCursor remembers, per queue, the place of the last available job
// the worker's completions took (takeAvailableJobs), and the next take of
// that queue starts after it. Without it, every take walks from the front
// of River's fetch index over the entries of the jobs taken since the last
// vacuum (their rows moved to running, then removed); on a backlog of
// 100,000 events that walk was a third of the take's cost.
//
// A job that becomes available behind the cursor (committed after later
// ones were taken, or retried) is not taken by the completions until the
// cursor goes back to the front, which it does after any take that found
// fewer jobs than it wanted (the queue's end reached); River's own fetch,
// which always starts at the front, runs it meanwhile (a chain gives its
// River slot back within chainFor). Nothing is skipped for good: the
// cursor only decides where a take looks first.
type takeCursor struct {
	mu  sync.Mutex
	pos map[string]takePos
}

func newTakeCursor() *takeCursor { return &takeCursor{pos: map[string]takePos{}} }

// args are the take's cursor arguments ($4, $5, $6) for queues.
func (t *takeCursor) args(queues []string) (priorities []int16, scheduledAts []time.Time, ids []int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	priorities, scheduledAts, ids = make([]int16, len(queues)), make([]time.Time, len(queues)), make([]int64, len(queues))
	for i, q := range queues {
		p, ok := t.pos[q]
		if !ok {
			p = takeStart
		}
		priorities[i], scheduledAts[i], ids[i] = p.priority, p.scheduledAt, p.id
	}
	return priorities, scheduledAts, ids
}

// advance records a committed take of queue: last is the place of the last
// job it took; short, that it found fewer jobs than it wanted (or none:
// last is then ignored), and the next take starts at the front again. The
// cursor only moves forward otherwise: takes run concurrently (two
// completion batches in flight), and one that started from the same place
// as a later-committed take took the jobs before that take's, not after.
func (t *takeCursor) advance(queue string, last takePos, short bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if short {
		delete(t.pos, queue)
		return
	}
	if cur, ok := t.pos[queue]; ok && !last.after(cur) {
		return
	}
	t.pos[queue] = last
}
