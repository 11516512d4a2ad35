package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookline/hookline/idem"
	"github.com/hookline/hookline/internal/metrics"
	"github.com/hookline/hookline/internal/tracing"
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
	// State is EventDead if a destination is dead, else EventProcessing if
	// one holds a live claim, else EventQueued if one is waiting (a paused
	// destination's events wait), else EventCompleted (also when the event
	// matched no destination).
	State string
	// Deliveries counts every receipt, duplicates included.
	Deliveries int
	// Attempts counts destination attempts over the event's whole life,
	// summed over its destinations.
	Attempts int
	// ReceivedAt is the first receipt.
	ReceivedAt time.Time
	// CompletedAt is when the last destination completed; set only in
	// state completed.
	CompletedAt *time.Time
	// LastError is the last error of a destination that is not completed
	// (the dead one's first), nil when none has one.
	LastError *string
	// DeadItemID is the event's dead item: the newest with reason failed,
	// else the newest duplicate; nil when it has none.
	DeadItemID *int64
	// Origin is where the event was first received from: "webhook", or
	// "reconcile" (found by a reconciliation run).
	Origin string
	// OrderKey is the event's ordering key ("" when unordered).
	OrderKey string
	// TraceID is the trace its first delivery was received under (the
	// sender's, continued, or one hookline started); "" for events stored
	// before tracing or found by reconciliation.
	TraceID string
	// Skipped is SkippedStale when every destination completed without a
	// forward (ordering.stale: skip); "" otherwise.
	Skipped string
	// Destinations are the destinations the event matched, by name.
	Destinations []DestinationStatus
	// AttemptsLog is every attempt, oldest first (at most 1,000).
	AttemptsLog []AttemptRecord
}

// DestinationStatus is one destination of an event.
type DestinationStatus struct {
	Name string
	// State uses the event words: queued (waiting, also behind a pause),
	// processing, completed, dead.
	State       string
	Attempts    int
	LastError   *string
	CompletedAt *time.Time
	DeadItemID  *int64
	// OrderKey is the event's ordering key here ("" when unordered);
	// Skipped is SkippedStale when it completed without a forward.
	OrderKey, Skipped string
}

// AttemptRecord is one attempt of an event at a destination.
type AttemptRecord struct {
	N           int
	Destination string
	At          time.Time
	// Status is the destination's HTTP status; 0 when it did not answer
	// (a timeout, a connection error) and for Go handlers.
	Status     int
	DurationMS int
	Error      string
}

// Events looks events up (hookline_events, their destinations, claims,
// dead items and attempts).
type Events struct {
	pool *pgxpool.Pool
}

// NewEvents returns the event lookup on pool.
func NewEvents(pool *pgxpool.Pool) *Events { return &Events{pool: pool} }

// Lookup returns the status of (source, eventID), or ErrEventNotFound.
//
// A destination's row is queued, completed or dead; a queued one is
// reported processing while its claim is processing under a live lease (the
// worker does not write "processing", so that counting an attempt stays a
// HOT update).
func (e *Events) Lookup(ctx context.Context, source, eventID string) (*EventStatus, error) {
	if _, err := idem.ComposeKey(Namespace, source, eventID); err != nil {
		return nil, ErrEventNotFound // a blank part names no event
	}
	ev := &EventStatus{Destinations: []DestinationStatus{}, AttemptsLog: []AttemptRecord{}}
	var traceParent string
	err := pgx.BeginTxFunc(ctx, e.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly, IsoLevel: pgx.RepeatableRead}, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, stmt.lookupEvent, source, eventID).
			Scan(&ev.Source, &ev.EventID, &ev.EventType, &ev.State, &ev.Deliveries, &ev.Attempts, &ev.ReceivedAt, &ev.CompletedAt, &ev.Origin, &traceParent)
		if err != nil {
			return err
		}
		ev.TraceID = tracing.TraceID(traceParent)
		if err := readDestinations(ctx, tx, ev); err != nil {
			return err
		}
		return readAttempts(ctx, tx, ev)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrEventNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("look up event: %w", err)
	}
	summarize(ev)
	return ev, nil
}

func readDestinations(ctx context.Context, tx pgx.Tx, ev *EventStatus) error {
	rows, err := tx.Query(ctx, stmt.lookupDestinations, ev.Source, ev.EventID, ClaimKeyPrefix(ev.Source))
	if err != nil {
		return err
	}
	var d DestinationStatus
	var live bool
	_, err = pgx.ForEachRow(rows, []any{&d.Name, &d.State, &d.Attempts, &d.LastError, &d.CompletedAt, &live, &d.DeadItemID, &d.OrderKey, &d.Skipped}, func() error {
		if d.State == EventQueued && live {
			d.State = EventProcessing
		}
		if d.State != EventCompleted {
			d.CompletedAt = nil
		}
		ev.Destinations = append(ev.Destinations, d)
		return nil
	})
	return err
}

func readAttempts(ctx context.Context, tx pgx.Tx, ev *EventStatus) error {
	rows, err := tx.Query(ctx, stmt.lookupAttempts, ev.Source, ev.EventID)
	if err != nil {
		return err
	}
	var a AttemptRecord
	_, err = pgx.ForEachRow(rows, []any{&a.N, &a.Destination, &a.At, &a.Status, &a.DurationMS, &a.Error}, func() error {
		ev.AttemptsLog = append(ev.AttemptsLog, a)
		return nil
	})
	return err
}

// summarize derives the event's state, last error and dead item from its
// destinations': dead over processing over queued over completed.
func summarize(ev *EventStatus) {
	rank := map[string]int{EventCompleted: 0, EventQueued: 1, EventProcessing: 2, EventDead: 3}
	state := EventCompleted
	for _, d := range ev.Destinations {
		if rank[d.State] > rank[state] {
			state = d.State
		}
		if d.DeadItemID != nil && (ev.DeadItemID == nil || d.State == EventDead) {
			ev.DeadItemID = d.DeadItemID
		}
		if d.LastError != nil && d.State != EventCompleted && ev.LastError == nil {
			ev.LastError = d.LastError
		}
	}
	for _, d := range ev.Destinations {
		if d.State == EventDead && d.LastError != nil {
			ev.LastError = d.LastError
			break
		}
	}
	ev.State = state
	if state != EventCompleted {
		ev.CompletedAt = nil
	}
	skipped := 0
	for _, d := range ev.Destinations {
		if d.OrderKey != "" {
			ev.OrderKey = d.OrderKey
		}
		if d.Skipped != "" {
			skipped++
		}
	}
	if skipped > 0 && skipped == len(ev.Destinations) {
		ev.Skipped = SkippedStale
	}
}

// Stats reads what the metrics report from the database: the dead set's
// size, the queue's depth and lag, and the destinations' states.
type Stats struct {
	Pool *pgxpool.Pool
	// Destinations are the configured destinations (Destinations reports
	// these).
	Destinations []DestinationName
}

// DestinationStates reads each configured destination's state, waiting
// events and attempts in flight.
func (s Stats) DestinationStates(ctx context.Context) ([]metrics.DestinationState, error) {
	list, err := NewDestinations(s.Pool, nil, s.Destinations).List(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]metrics.DestinationState, len(list))
	for i, d := range list {
		out[i] = metrics.DestinationState{Source: d.Source, Destination: d.Name, State: d.State, Queued: d.Queued, InFlight: d.InFlight}
	}
	return out, nil
}

// DeadItems counts the items in the dead set by (source, reason): every
// configured source (Destinations) with both reasons, 0 when it has none,
// and any other pair that has items (a source removed from the config).
func (s Stats) DeadItems(ctx context.Context) (map[[2]string]int64, error) {
	rows, err := s.Pool.Query(ctx, stmt.deadItemCounts)
	if err != nil {
		return nil, err
	}
	counts := map[[2]string]int64{}
	for _, d := range s.Destinations {
		counts[[2]string{d.Source, ReasonFailed}] = 0
		counts[[2]string{d.Source, ReasonDuplicate}] = 0
	}
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
