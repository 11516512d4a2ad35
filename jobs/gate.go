package jobs

import (
	"context"
	"errors"
	"math"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The gate decides whether a destination may be called now. What the
// instances share lives in one row of hookline_destinations per
// destination, so that Postgres is the only coordinator:
//
//   - the operator's pause (paused_at): no attempt starts while it is set;
//     every destination's jobs check it (read at most once a second per
//     process; River's paused queue stops them being fetched at all);
//   - the circuit breaker: after Circuit.Failures consecutive failed
//     attempts (counted in the order answers arrive) the circuit opens; no
//     attempt for CoolDown (counted from the answer that opened it), then
//     one probe (half_open): a 2xx closes it, a failure opens it again;
//   - the rate limit: a token bucket refilled at RateLimit per second, up to
//     a burst of min(RateLimit, 5) (at least 1), so that any 10 s window
//     sees at most burst + 10 × RateLimit attempts;
//   - the in-flight cap: MaxInFlight slots, each leased by an attempt for
//     its timeout and freed when it ends (a crashed worker's slot frees
//     itself when the lease runs out).
//
// A job the gate holds back snoozes (River: no attempt spent) until the
// gate may open. Destinations without a rate limit, a cap or a breaker do
// not touch the row on the way in.
type gate struct {
	pool *pgxpool.Pool

	mu        sync.Mutex
	paused    map[[2]string]bool
	refreshed time.Time
	refresh   sync.Mutex // held by the goroutine refreshing paused
}

func newGate(pool *pgxpool.Pool) *gate {
	return &gate{pool: pool, paused: map[[2]string]bool{}}
}

// pauseRefresh is how stale the paused set may be.
const pauseRefresh = time.Second

// pausedWait is how long a job of a paused destination snoozes.
const pausedWait = 3 * time.Second

// enter returns 0 when the attempt may start (holding a slot or a probe if
// the destination has them), or how long to wait.
func (g *gate) enter(ctx context.Context, r *run) (time.Duration, error) {
	if g.isPaused(ctx, r.src.Name, r.t.Name) {
		return pausedWait, nil
	}
	if !r.t.flowControlled() {
		return 0, nil
	}
	args := gateArgs(r)
	for range 2 {
		tag, err := g.pool.Exec(ctx, gateSQL, args...)
		if err != nil {
			return 0, err
		}
		if tag.RowsAffected() == 1 {
			return 0, nil
		}
		wait, found, err := g.waitFor(ctx, args)
		if err != nil || found {
			return wait, err
		}
		// The destination's row does not exist yet: create it, try again.
		if _, err := g.pool.Exec(ctx, ensureDestinationSQL, r.src.Name, r.t.Name); err != nil {
			return 0, err
		}
	}
	return time.Second, nil
}

// gateArgs are gateSQL's and gateWaitSQL's parameters.
func gateArgs(r *run) []any {
	var failures int
	var coolDown time.Duration
	if c := r.t.Circuit; c != nil {
		failures, coolDown = c.Failures, c.CoolDown
	}
	burst := max(1, math.Min(r.t.RateLimit, 5))
	return []any{r.src.Name, r.t.Name, holder(r.job), r.t.Timeout.Microseconds(),
		r.t.RateLimit, burst, r.t.MaxInFlight, failures > 0, coolDown.Microseconds()}
}

// waitFor reads why the gate stayed shut and how long to wait; found is
// false when the destination has no row.
func (g *gate) waitFor(ctx context.Context, args []any) (time.Duration, bool, error) {
	var waitUS *float64
	err := g.pool.QueryRow(ctx, gateWaitSQL, args...).Scan(&waitUS)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, true, err
	}
	wait := 100 * time.Millisecond
	if waitUS != nil {
		wait = max(time.Duration(*waitUS)*time.Microsecond, 10*time.Millisecond)
	}
	return min(wait, time.Minute), true, nil
}

// leave frees the attempt's in-flight slot, if it took one, and the
// circuit's probe, if it took it and recorded no outcome (result): an
// attempt that never reached the destination (a stale event skipped, a
// claim not taken, an attempt interrupted) leaves the probe to the next
// attempt instead of holding the circuit half open until its lease ends.
func (g *gate) leave(r *run) {
	probe := r.t.Circuit != nil && !r.gateResult
	if r.t.MaxInFlight <= 0 && !probe {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if r.t.MaxInFlight > 0 {
		_, _ = g.pool.Exec(ctx, gateLeaveSQL, r.src.Name, r.t.Name, holder(r.job))
	}
	if probe {
		_, _ = g.pool.Exec(ctx, gateReleaseProbeSQL, r.src.Name, r.t.Name, holder(r.job))
	}
}

// result records an attempt's outcome where the destination's state needs
// it: a failure adds to the failure streak (and may open the circuit), a
// success of a probe closes the circuit. A success of a closed destination
// ends its streak in the completion statement itself.
func (g *gate) result(ctx context.Context, r *run, workErr error) {
	r.gateResult = true
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if workErr == nil {
		if r.t.Circuit != nil {
			_, _ = g.pool.Exec(ctx, gateSuccessSQL, r.src.Name, r.t.Name)
		}
		return
	}
	failures := 0
	if r.t.Circuit != nil {
		failures = r.t.Circuit.Failures
	}
	_, _ = g.pool.Exec(ctx, gateFailureSQL, r.src.Name, r.t.Name, CleanText(workErr.Error(), maxErrorBytes), failures)
}

// errPausedMeanwhile is an attempt whose destination was paused after its
// gate let it through: it did not start, and does not count.
var errPausedMeanwhile = errors.New("the destination was paused before the attempt reached it; not counted, will retry once resumed")

// isPaused reports whether the operator paused the destination, from a set
// read at most pauseRefresh ago.
func (g *gate) isPaused(ctx context.Context, source, dest string) bool {
	g.mu.Lock()
	stale := time.Since(g.refreshed) > pauseRefresh
	g.mu.Unlock()
	if stale && g.refresh.TryLock() {
		paused, err := readPaused(ctx, g.pool)
		if err == nil {
			g.mu.Lock()
			g.paused, g.refreshed = paused, time.Now()
			g.mu.Unlock()
		}
		g.refresh.Unlock()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.paused[[2]string{source, dest}]
}

func readPaused(ctx context.Context, pool *pgxpool.Pool) (map[[2]string]bool, error) {
	rows, err := pool.Query(ctx, `SELECT source, name FROM hookline_destinations WHERE paused_at IS NOT NULL`)
	if err != nil {
		return nil, err
	}
	paused := map[[2]string]bool{}
	var k [2]string
	_, err = pgx.ForEachRow(rows, []any{&k[0], &k[1]}, func() error { paused[k] = true; return nil })
	return paused, err
}

// The gate's statements. Parameters: $1 source, $2 destination, $3 holder,
// $4 lease (µs: the attempt's timeout), $5 rate (per second, 0: none), $6
// burst, $7 in-flight slots (0: none), $8 circuit configured, $9 cool-down
// (µs). Each use is cast: a parameter's type is what its first use says.
const (
	// gateOpenSQL is the condition under which an attempt may start.
	gateOpenSQL = `paused_at IS NULL
		AND (NOT $8::bool OR circuit = 'closed'
			OR (circuit = 'open' AND opened_at + $9::bigint * interval '1 microsecond' <= now())
			OR (circuit = 'half_open' AND (probe_until IS NULL OR probe_until < now())))
		AND ($5::float8 = 0 OR hookline_tokens(tokens, refilled_at, $5::float8, $6::float8) >= 1)
		AND ($7::int = 0 OR hookline_free_slot(slot_expiries, $7::int) IS NOT NULL)`

	// gateSQL lets one attempt through, taking a token, a slot and (when
	// the circuit is not closed) the probe. Every SET expression reads the
	// row as the lock found it, so concurrent gates never over-commit.
	gateSQL = `UPDATE hookline_destinations SET
		tokens = CASE WHEN $5::float8 = 0 THEN tokens ELSE hookline_tokens(tokens, refilled_at, $5::float8, $6::float8) - 1 END,
		refilled_at = CASE WHEN $5::float8 = 0 THEN refilled_at ELSE now() END,
		slot_holders = CASE WHEN $7::int = 0 THEN slot_holders ELSE hookline_set_at(slot_holders, hookline_free_slot(slot_expiries, $7::int), $3::text) END,
		slot_expiries = CASE WHEN $7::int = 0 THEN slot_expiries
			ELSE hookline_set_at(slot_expiries, hookline_free_slot(slot_expiries, $7::int), now() + $4::bigint * interval '1 microsecond') END,
		circuit = CASE WHEN $8::bool AND circuit <> 'closed' THEN 'half_open' ELSE circuit END,
		probe_holder = CASE WHEN $8::bool AND circuit <> 'closed' THEN $3::text ELSE probe_holder END,
		probe_until = CASE WHEN $8::bool AND circuit <> 'closed' THEN now() + $4::bigint * interval '1 microsecond' ELSE probe_until END
	WHERE source = $1 AND name = $2 AND ` + gateOpenSQL

	// gateWaitSQL is how long (µs) until the gate may open, NULL when it
	// can only be polled (a slot to free up).
	gateWaitSQL = `SELECT CASE
		WHEN paused_at IS NOT NULL THEN 3e6
		WHEN $8::bool AND circuit = 'open' AND opened_at + $9::bigint * interval '1 microsecond' > now()
			THEN extract(epoch FROM opened_at + $9::bigint * interval '1 microsecond' - now()) * 1e6
		WHEN $8::bool AND circuit = 'half_open' AND probe_until >= now() THEN 1e6
		WHEN $5::float8 > 0 AND hookline_tokens(tokens, refilled_at, $5::float8, $6::float8) < 1
			THEN (1 - hookline_tokens(tokens, refilled_at, $5::float8, $6::float8)) / $5::float8 * 1e6
		ELSE NULL END
	FROM hookline_destinations WHERE source = $1 AND name = $2 AND $3::text IS NOT NULL AND $4::bigint IS NOT NULL AND $7::int IS NOT NULL`

	// ensureDestinationSQL creates a destination's row.
	ensureDestinationSQL = `INSERT INTO hookline_destinations (source, name) VALUES ($1, $2) ON CONFLICT DO NOTHING`

	// gateReleaseProbeSQL gives up the probe holder $3 took without an
	// outcome: the circuit stays half open, and the next attempt probes.
	gateReleaseProbeSQL = `UPDATE hookline_destinations SET probe_holder = NULL, probe_until = NULL
		WHERE source = $1 AND name = $2 AND circuit = 'half_open' AND probe_holder = $3::text`

	// gateLeaveSQL frees holder $3's slot.
	gateLeaveSQL = `UPDATE hookline_destinations
		SET slot_expiries = hookline_set_at(slot_expiries, array_position(slot_holders, $3::text), NULL::timestamptz)
		WHERE source = $1 AND name = $2 AND array_position(slot_holders, $3::text) IS NOT NULL`

	// gateSuccessSQL closes the circuit after a successful probe (or any
	// success while it is not closed).
	gateSuccessSQL = `UPDATE hookline_destinations
		SET circuit = 'closed', failure_streak = 0, opened_at = NULL, probe_holder = NULL, probe_until = NULL
		WHERE source = $1 AND name = $2 AND (circuit <> 'closed' OR failure_streak > 0)`

	// gateFailureSQL adds a failed attempt ($3: its error) to the streak
	// and opens the circuit at $4 failures (0: no breaker), or again after
	// a failed probe.
	gateFailureSQL = `INSERT INTO hookline_destinations AS d (source, name, failure_streak, last_error) VALUES ($1, $2, 1, $3::text)
		ON CONFLICT (source, name) DO UPDATE SET
			failure_streak = d.failure_streak + 1,
			last_error = $3::text,
			circuit = CASE WHEN $4::int > 0 AND (d.circuit = 'half_open' OR (d.circuit = 'closed' AND d.failure_streak + 1 >= $4::int)) THEN 'open' ELSE d.circuit END,
			opened_at = CASE WHEN $4::int > 0 AND (d.circuit = 'half_open' OR (d.circuit = 'closed' AND d.failure_streak + 1 >= $4::int)) THEN now() ELSE d.opened_at END,
			probe_holder = NULL, probe_until = NULL`
)
