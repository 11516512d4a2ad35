package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
)

// DestinationName names one destination of a source.
type DestinationName struct {
	Source, Name string
}

// Destination states as the admin API reports them.
const (
	DestinationActive   = "active"
	DestinationPaused   = "paused"
	DestinationOpen     = "open"      // circuit open: no attempts until its cool-down ends
	DestinationHalfOpen = "half_open" // circuit probing with one attempt
)

// DestinationInfo is one destination's state, shared by every instance.
type DestinationInfo struct {
	Source, Name string
	// State is DestinationPaused (the operator's pause wins), else the
	// circuit: DestinationOpen, DestinationHalfOpen or DestinationActive.
	State string
	// Queued counts the events waiting for the destination: not yet
	// completed or dead, and not in an attempt now (those are InFlight).
	Queued int64
	// InFlight counts the attempts running now (live claims).
	InFlight      int64
	FailureStreak int
	LastError     *string
	PausedAt      *time.Time
}

// ErrUnknownDestination: no such destination is configured.
var ErrUnknownDestination = errors.New("destination not found")

// Destinations reads and changes the destinations' shared state: the
// operator's pause and resume, and what GET /admin/destinations shows.
type Destinations struct {
	pool       *pgxpool.Pool
	river      *river.Client[pgx.Tx]
	configured map[DestinationName]bool
	order      []DestinationName
}

// NewDestinations returns the destinations configured here; river (an
// insert-only client is enough) pauses and resumes their queues.
func NewDestinations(pool *pgxpool.Pool, client *river.Client[pgx.Tx], configured []DestinationName) *Destinations {
	d := &Destinations{pool: pool, river: client, configured: map[DestinationName]bool{}}
	for _, n := range configured {
		if !d.configured[n] {
			d.configured[n] = true
			d.order = append(d.order, n)
		}
	}
	return d
}

// List returns every configured destination's state, in configuration
// order.
func (d *Destinations) List(ctx context.Context) ([]DestinationInfo, error) {
	sources, names := make([]string, len(d.order)), make([]string, len(d.order))
	prefixes := make([]string, len(d.order))
	for i, n := range d.order {
		sources[i], names[i] = n.Source, n.Name
		prefixes[i] = ClaimKeyPrefix(n.Source) + n.Name + ":"
	}
	rows, err := d.pool.Query(ctx, listDestinationsSQL, sources, names, prefixes)
	if err != nil {
		return nil, fmt.Errorf("list destinations: %w", err)
	}
	out := make([]DestinationInfo, 0, len(d.order))
	var di DestinationInfo
	var circuit string
	_, err = pgx.ForEachRow(rows, []any{&di.Source, &di.Name, &circuit, &di.FailureStreak, &di.LastError, &di.PausedAt, &di.Queued, &di.InFlight},
		func() error {
			di.State = destinationState(di.PausedAt != nil, circuit)
			// A destination row stays queued during its attempt (the
			// worker never writes "processing"), and every live claim is
			// such a row: counted once, as in flight.
			di.Queued = max(di.Queued-di.InFlight, 0)
			out = append(out, di)
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("list destinations: %w", err)
	}
	return out, nil
}

func destinationState(paused bool, circuit string) string {
	switch {
	case paused:
		return DestinationPaused
	case circuit == "open":
		return DestinationOpen
	case circuit == "half_open":
		return DestinationHalfOpen
	}
	return DestinationActive
}

// Pause stops every instance starting attempts at the destination (within
// the gate's refresh, a second); events keep being accepted and wait. The
// pause lives in Postgres: it survives restarts until Resume. Its River
// queue is paused too, so that its jobs are not even fetched.
func (d *Destinations) Pause(ctx context.Context, source, name string) error {
	return d.setPaused(ctx, source, name, true)
}

// Resume lets the destination's waiting events be delivered again. A
// destination no longer configured here can still be resumed while it is
// paused (else ErrUnknownDestination): its events then go to the dead set
// with the orphan sweep, as those of any removed destination do.
func (d *Destinations) Resume(ctx context.Context, source, name string) error {
	return d.setPaused(ctx, source, name, false)
}

func (d *Destinations) setPaused(ctx context.Context, source, name string, pause bool) error {
	unknown := fmt.Errorf("%w: %q of source %q", ErrUnknownDestination, name, source)
	configured := d.configured[DestinationName{source, name}]
	if !configured && pause {
		return unknown
	}
	queue := QueueFor(source, name)
	return pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error {
		if !configured {
			// A paused destination since removed from the configuration:
			// its events are exempt from the orphan sweep only while the
			// pause lasts, so resuming it is how they reach the dead set.
			tag, err := tx.Exec(ctx, resumeRemovedSQL, source, name)
			if err != nil {
				return err
			}
			if tag.RowsAffected() == 0 {
				return unknown
			}
		} else if _, err := tx.Exec(ctx, setPausedSQL, source, name, pause); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, ensureQueueSQL, queue); err != nil {
			return err
		}
		if pause {
			return d.river.QueuePauseTx(ctx, tx, queue, nil)
		}
		return d.river.QueueResumeTx(ctx, tx, queue, nil)
	})
}

const (
	// setPausedSQL pauses ($3 true) or resumes destination ($1, $2); a
	// pause keeps the time of the first.
	setPausedSQL = `INSERT INTO hookline_destinations AS d (source, name, paused_at) VALUES ($1, $2, CASE WHEN $3 THEN now() END)
		ON CONFLICT (source, name) DO UPDATE SET paused_at = CASE WHEN $3 THEN COALESCE(d.paused_at, now()) END`

	// resumeRemovedSQL resumes destination ($1, $2) only if it is paused.
	resumeRemovedSQL = `UPDATE hookline_destinations SET paused_at = NULL WHERE source = $1 AND name = $2 AND paused_at IS NOT NULL`

	// listDestinationsSQL reads the destinations ($1 sources, $2 names, $3
	// their claim key prefixes), with their waiting events and live claims.
	listDestinationsSQL = `SELECT c.source, c.name, COALESCE(d.circuit, 'closed'), COALESCE(d.failure_streak, 0), d.last_error, d.paused_at,
			(SELECT count(*) FROM hookline_event_destinations r WHERE r.source = c.source AND r.destination = c.name AND r.state = 'queued'),
			(SELECT count(*) FROM ` + ClaimsTable + ` k WHERE k.key LIKE replace(replace(replace(c.prefix, '\', '\\'), '%', '\%'), '_', '\_') || '%'
				AND k.state = 'processing' AND k.expires_at > now())
		FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS c(source, name, prefix, ord)
			LEFT JOIN hookline_destinations d ON d.source = c.source AND d.name = c.name
		ORDER BY c.ord`
)
