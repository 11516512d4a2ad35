package jobs

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// queueWaker tells River's workers, in every process, that a job this
// process made available (the next place of an ordering line) is waiting
// on its queue: River's insert notification, sent after the transaction
// that woke the job committed, at most once per queue per window.
//
// A notifying commit holds a database-wide lock through its WAL flush, so
// a notification in every completion's transaction makes the workers'
// commits take turns. River's producers debounce notifications by their
// fetch cooldown anyway; one per window loses nothing. A wake during the
// window is sent at its end, so no woken job waits for River's poll.
type queueWaker struct {
	exec   func(ctx context.Context, sql string, args ...any) error
	window time.Duration
	log    *slog.Logger

	mu     sync.Mutex
	queues map[string]*queueWake
}

// queueWake is a queue's notification state: when the last one started,
// and whether one is scheduled and not yet started.
type queueWake struct {
	last      time.Time
	scheduled bool
}

// wakeNotifySQL sends River's insert notification for queue $1.
var wakeNotifySQL = `SELECT ` + notifyQueueSQL("$1::text")

func newQueueWaker(exec func(ctx context.Context, sql string, args ...any) error, window time.Duration, log *slog.Logger) *queueWaker {
	return &queueWaker{exec: exec, window: window, log: log, queues: map[string]*queueWake{}}
}

// Wake notifies queue's workers, now or at the end of the current window.
// Call it after the commit that made the job available: a notification
// sent once it started may have been read before that commit.
func (q *queueWaker) Wake(queue string) {
	q.mu.Lock()
	st := q.queues[queue]
	if st == nil {
		st = &queueWake{}
		q.queues[queue] = st
	}
	if st.scheduled { // that one starts after this commit: it covers it
		q.mu.Unlock()
		return
	}
	st.scheduled = true
	wait := time.Until(st.last.Add(q.window))
	q.mu.Unlock()
	go q.send(queue, st, wait)
}

func (q *queueWaker) send(queue string, st *queueWake, wait time.Duration) {
	if wait > 0 {
		time.Sleep(wait) // the rest of the window
	}
	q.mu.Lock()
	st.scheduled, st.last = false, time.Now()
	q.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := q.exec(ctx, wakeNotifySQL, queue); err != nil {
		// The job is not lost: River's poll finds it.
		q.log.Debug("could not notify a queue of a woken job; River's poll will find it", "queue", queue, "error", err.Error())
	}
}
