package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookline/hookline/idem"
)

// Event states as the event lookup reports them.
const (
	EventQueued     = "queued"     // waiting, including a scheduled retry
	EventProcessing = "processing" // a worker holds its claim (a live lease)
	EventCompleted  = "completed"
	EventDead       = "dead"
)

// EventStatus is an event's life as the event lookup reports it.
type EventStatus struct {
	Source    string
	EventID   string
	EventType string
	// State is EventQueued, EventProcessing, EventCompleted or EventDead.
	State string
	// Deliveries counts every receipt, duplicates included.
	Deliveries int
	// Attempts counts destination attempts over the event's whole life.
	Attempts int
	// ReceivedAt is the first receipt.
	ReceivedAt time.Time
	// CompletedAt is set only in state completed.
	CompletedAt *time.Time
	LastError   *string
	// DeadItemID is the event's dead item: the newest with reason failed,
	// else the newest duplicate; nil when it has none.
	DeadItemID *int64
}

// Events looks events up (hookline_events, with their claims and dead
// items).
type Events struct {
	pool *pgxpool.Pool
}

// NewEvents returns the event lookup on pool.
func NewEvents(pool *pgxpool.Pool) *Events { return &Events{pool: pool} }

// Lookup returns the status of (source, eventID), or ErrEventNotFound.
//
// An event row is queued, completed or dead; a queued event is reported
// processing while its claim is processing under a live lease (the worker
// does not write "processing" to the event, so that counting an attempt
// stays a HOT update).
func (e *Events) Lookup(ctx context.Context, source, eventID string) (*EventStatus, error) {
	key, err := idem.ComposeKey(Namespace, source, eventID)
	if err != nil {
		return nil, ErrEventNotFound // a blank part names no event
	}
	ev := &EventStatus{}
	var live bool
	err = e.pool.QueryRow(ctx, stmt.lookupEvent, source, eventID, key).
		Scan(&ev.Source, &ev.EventID, &ev.EventType, &ev.State, &ev.Deliveries, &ev.Attempts,
			&ev.ReceivedAt, &ev.CompletedAt, &ev.LastError, &live, &ev.DeadItemID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrEventNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("look up event: %w", err)
	}
	if ev.State == EventQueued && live {
		ev.State = EventProcessing
	}
	if ev.State != EventCompleted {
		ev.CompletedAt = nil
	}
	return ev, nil
}

// Stats reads what the metrics report from the database: the dead set's
// size and the queue's depth and lag.
type Stats struct {
	Pool *pgxpool.Pool
}

// DeadItems counts the items in the dead set by (source, reason).
func (s Stats) DeadItems(ctx context.Context) (map[[2]string]int64, error) {
	rows, err := s.Pool.Query(ctx, stmt.deadItemCounts)
	if err != nil {
		return nil, err
	}
	counts := map[[2]string]int64{}
	var k [2]string
	var n int64
	_, err = pgx.ForEachRow(rows, []any{&k[0], &k[1], &n}, func() error { counts[k] = n; return nil })
	return counts, err
}

// Queue reads the event queue's depth by River state and the age of its
// oldest available job, in one read-only snapshot.
func (s Stats) Queue(ctx context.Context) (byState map[string]int64, oldestAvailable float64, err error) {
	var st QueueStats
	err = pgx.BeginTxFunc(ctx, s.Pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var err error
		st, err = ReadQueueStats(ctx, tx)
		return err
	})
	return st.ByState, st.OldestAvailableSeconds, err
}
