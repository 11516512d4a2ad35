package idem

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// Defaults for Options.
const (
	// DefaultLease is the processing lifetime of a claim when Options.Lease
	// is zero.
	DefaultLease = 5 * time.Minute
	// DefaultDedupWindow is how long a completed key stays a duplicate when
	// Options.DedupWindow is zero.
	DefaultDedupWindow = 720 * time.Hour
)

// minPeriod is the shortest Lease and RenewEvery accepted: a shorter lease
// could not outlive a database round trip.
const minPeriod = time.Millisecond

// maxClaimAttempts bounds Claim's retries when the row that refused a claim
// vanishes (or expires) before it can be read back.
const maxClaimAttempts = 10

// State is the state of a claim row.
type State string

// Claim row states.
const (
	// StateProcessing: a holder claimed the key and is doing the work.
	StateProcessing State = "processing"
	// StateCompleted: the work finished; the key stays a duplicate until
	// the dedup window passes.
	StateCompleted State = "completed"
)

// OnDuplicate chooses what Run and RunExternal report for a duplicate.
type OnDuplicate int

const (
	// Skip treats a duplicate as "already done": Result.Status is
	// StatusSkipped and the error is nil (think HTTP 2xx). The zero value.
	Skip OnDuplicate = iota
	// Fail treats a duplicate as a refusal: Result.Status is StatusFailed and
	// the *DuplicateError is returned too (think HTTP 409).
	Fail
)

// String implements fmt.Stringer.
func (o OnDuplicate) String() string {
	switch o {
	case Skip:
		return "skip"
	case Fail:
		return "fail"
	}
	return fmt.Sprintf("OnDuplicate(%d)", int(o))
}

// Options describe one claim. The key is ComposeKey(Namespace, Scope,
// Segment).
type Options struct {
	// Namespace is the first key part, e.g. "hookline". Required.
	Namespace string
	// Scope is the second key part, usually the kind of work, e.g.
	// "stripe.charge". Required.
	Scope string
	// Segment is the third key part, taken from the payload, e.g. an event
	// or payment id. If it is blank, Run and RunExternal step aside: the
	// work runs without a claim and nothing is stored (StatusSteppedAside).
	// Claim with a blank Segment returns ErrEmptySegment.
	Segment string

	// Holder names who holds the claim, e.g. "job:123:attempt:2". Free
	// text, stored on the row and reported to duplicates.
	//
	// Default: "" (anonymous).
	Holder string

	// Lease is how long a processing claim blocks others before it may be
	// taken over, counted from the claim or the last renewal. Choose it
	// longer than the worst pause of a healthy holder (GC, deploy, network),
	// not just the expected run time: it is also how long a crashed
	// holder's key stays blocked.
	//
	// Default: DefaultLease (5m). Must not be negative; if set, at least 1ms.
	Lease time.Duration

	// DedupWindow is how long a completed key stays a duplicate, counted
	// from completion. After it the key may be claimed again.
	//
	// Default: DefaultDedupWindow (720h). Must not be negative.
	DedupWindow time.Duration

	// OnDuplicate chooses Skip (default) or Fail for duplicates in Run and
	// RunExternal. Claim always returns a *DuplicateError.
	OnDuplicate OnDuplicate

	// OverrideCompletedBefore, when non-zero, lets this claim take over a
	// completed row whose completed_at is before it (an operator replay of
	// work done before the cutoff). It never takes over a processing row
	// whose lease is live.
	//
	// Default: zero (completed rows are honoured for their whole window).
	OverrideCompletedBefore time.Time

	// RenewEvery is the period at which KeepAlive (and so Run and
	// RunExternal) extends the lease to now()+Lease. If set, it must be at
	// least 1ms and shorter than Lease. A negative value turns renewal off,
	// so the claim lapses after Lease whatever the work is doing.
	//
	// Default: Lease/3.
	RenewEvery time.Duration
}

// spec is Options resolved and validated.
type spec struct {
	key, namespace, scope, holder  string
	lease, dedupWindow, renewEvery time.Duration
	overrideBefore                 any // nil or time.Time, bound as $4
	onDuplicate                    OnDuplicate
}

// resolve validates o and fills defaults. A blank Segment is reported as
// ErrEmptySegment like any other blank part; Run checks it first.
func (o Options) resolve() (spec, error) {
	key, err := ComposeKey(o.Namespace, o.Scope, o.Segment)
	if err != nil {
		return spec{}, err
	}
	sp, err := o.resolveDurations()
	if err != nil {
		return spec{}, err
	}
	sp.key = key
	return sp, nil
}

func (o Options) resolveDurations() (spec, error) {
	sp := spec{
		namespace:   o.Namespace,
		scope:       o.Scope,
		holder:      o.Holder,
		lease:       o.Lease,
		dedupWindow: o.DedupWindow,
		renewEvery:  o.RenewEvery,
		onDuplicate: o.OnDuplicate,
	}
	switch {
	case sp.lease < 0:
		return spec{}, fmt.Errorf("idem: Options.Lease: must not be negative (got %s)", sp.lease)
	case sp.lease == 0:
		sp.lease = DefaultLease
	case sp.lease < minPeriod:
		return spec{}, fmt.Errorf("idem: Options.Lease: must be at least %s (got %s)", minPeriod, sp.lease)
	}
	switch {
	case sp.dedupWindow < 0:
		return spec{}, fmt.Errorf("idem: Options.DedupWindow: must not be negative (got %s)", sp.dedupWindow)
	case sp.dedupWindow == 0:
		sp.dedupWindow = DefaultDedupWindow
	}
	switch {
	case sp.renewEvery == 0:
		sp.renewEvery = sp.lease / 3
	case sp.renewEvery > 0 && sp.renewEvery < minPeriod:
		return spec{}, fmt.Errorf("idem: Options.RenewEvery: must be at least %s or negative (got %s)", minPeriod, sp.renewEvery)
	case sp.renewEvery >= sp.lease:
		return spec{}, fmt.Errorf("idem: Options.RenewEvery: must be shorter than Lease (%s), got %s; use a negative value to turn renewal off", sp.lease, sp.renewEvery)
	}
	if sp.onDuplicate != Skip && sp.onDuplicate != Fail {
		return spec{}, fmt.Errorf("idem: Options.OnDuplicate: unknown value %d (use idem.Skip or idem.Fail)", int(sp.onDuplicate))
	}
	if !o.OverrideCompletedBefore.IsZero() {
		sp.overrideBefore = o.OverrideCompletedBefore
	}
	return sp, nil
}

// Claim is a held idempotency claim: the row for Key is processing under
// Token. Its methods are fenced by Token: they act only while the row still
// carries it, and return ErrLeaseLost otherwise. A Claim is safe for
// concurrent use.
type Claim struct {
	store *Store
	spec  spec
	token int64

	mu        sync.Mutex
	expiresAt time.Time
}

// Key returns the full composed key.
func (c *Claim) Key() string { return c.spec.key }

// Token returns the fencing token. Tokens come from a database sequence: each
// claim or takeover gets a larger one than every claim before it, and a token
// is never reused, even after the row is released or cleaned up and claimed
// again. Pass it to downstream systems that can reject stale writers.
func (c *Claim) Token() int64 { return c.token }

// Holder returns the holder recorded on the claim.
func (c *Claim) Holder() string { return c.spec.holder }

// ExpiresAt returns when the lease ends by the database clock, as of the
// claim or the last successful renewal.
func (c *Claim) ExpiresAt() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.expiresAt
}

func (c *Claim) setExpiresAt(t time.Time) {
	c.mu.Lock()
	c.expiresAt = t
	c.mu.Unlock()
}

func (c *Claim) event(state State) Event {
	return Event{Key: c.spec.key, Namespace: c.spec.namespace, Scope: c.spec.scope, Holder: c.spec.holder, State: state, Token: c.token}
}

// Claim claims the key ComposeKey(opts.Namespace, opts.Scope, opts.Segment)
// for opts.Lease. In one statement it inserts the row, or takes over a row
// whose lease or dedup window has expired (expires_at <= now()), or a
// completed row allowed by opts.OverrideCompletedBefore; so of many
// concurrent claimers exactly one wins.
//
// If the key is held, Claim returns a *DuplicateError describing the existing
// row (errors.Is(err, ErrDuplicate) is true). A blank part returns an error
// wrapping ErrEmptySegment.
//
// q runs the statements; nil means the Store's DB. q may be a transaction of
// the caller's: then the claim becomes visible to others when it commits,
// now() is the transaction's start time, and even a refused claim keeps the
// existing row locked until the transaction ends (which delays the holder's
// Complete), so keep such transactions short.
func (s *Store) Claim(ctx context.Context, q DB, opts Options) (*Claim, error) {
	sp, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	return s.claim(ctx, q, sp)
}

func (s *Store) claim(ctx context.Context, q DB, sp spec) (*Claim, error) {
	if q == nil {
		q = s.db
	}
	for range maxClaimAttempts {
		var (
			token     int64
			expiresAt time.Time
		)
		err := q.QueryRow(ctx, s.sql.claim, sp.claimArgs()...).Scan(&token, &expiresAt)
		if err == nil {
			c := &Claim{store: s, spec: sp, token: token, expiresAt: expiresAt}
			emit(s.telemetry.Claimed, c.event(StateProcessing))
			return c, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("idem: claim %q: %w", sp.key, err)
		}

		// Refused: read the row that refused us to report it.
		dup := &DuplicateError{Key: sp.key}
		var (
			state     string
			claimable bool
		)
		err = q.QueryRow(ctx, s.sql.lookup, sp.key, sp.overrideBefore).Scan(&state, &dup.Holder, &dup.ExpiresAt, &dup.Token, &claimable)
		if errors.Is(err, pgx.ErrNoRows) || (err == nil && claimable) {
			// Released, cleaned up or expired in between: try again.
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("idem: claim %q: read existing claim: %w", sp.key, err)
		}
		dup.State = State(state)
		emit(s.telemetry.Duplicate, Event{
			Key: sp.key, Namespace: sp.namespace, Scope: sp.scope,
			Holder: dup.Holder, State: dup.State, Token: dup.Token,
		})
		return nil, dup
	}
	return nil, fmt.Errorf("idem: claim %q: the existing row kept changing; gave up after %d attempts", sp.key, maxClaimAttempts)
}

// Complete marks the claim completed: the key then stays a duplicate for
// DedupWindow (expires_at = now()+DedupWindow, completed_at = now()). It acts
// only while the row is processing under this claim's token; otherwise it
// returns ErrLeaseLost. A lease that ran out but was not taken over can still
// be completed.
//
// q runs the statement; nil means the Store's DB. Pass the transaction that
// holds the work's writes to make the work and its completion commit
// together (transactional mode, what Run does): if the key was taken over
// meanwhile, Complete returns ErrLeaseLost and the caller rolls back.
func (c *Claim) Complete(ctx context.Context, q DB) error {
	if err := c.complete(ctx, q); err != nil {
		return err
	}
	emit(c.store.telemetry.Completed, c.event(StateCompleted))
	return nil
}

func (c *Claim) complete(ctx context.Context, q DB) error {
	if q == nil {
		q = c.store.db
	}
	tag, err := q.Exec(ctx, c.store.sql.complete, c.spec.key, c.token, c.spec.dedupWindow.Microseconds())
	if err != nil {
		return fmt.Errorf("idem: complete %q: %w", c.spec.key, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("idem: complete %q (token %d): %w", c.spec.key, c.token, ErrLeaseLost)
	}
	return nil
}

// Release deletes the claim so the key can be claimed again at once, for
// example after the work failed and should be retried. It acts only while
// the row is processing under this claim's token (it never undoes a
// completion); otherwise it returns ErrLeaseLost. q nil means the Store's DB.
func (c *Claim) Release(ctx context.Context, q DB) error {
	if q == nil {
		q = c.store.db
	}
	tag, err := q.Exec(ctx, c.store.sql.release, c.spec.key, c.token)
	if err != nil {
		return fmt.Errorf("idem: release %q: %w", c.spec.key, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("idem: release %q (token %d): %w", c.spec.key, c.token, ErrLeaseLost)
	}
	return nil
}

// Renew extends the lease to now()+Lease on the Store's DB. It acts only
// while the row is processing under this claim's token; otherwise it returns
// ErrLeaseLost.
func (c *Claim) Renew(ctx context.Context) error {
	var expiresAt time.Time
	err := c.store.db.QueryRow(ctx, c.store.sql.renew, c.spec.key, c.token, c.spec.lease.Microseconds()).Scan(&expiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("idem: renew %q (token %d): %w", c.spec.key, c.token, ErrLeaseLost)
	}
	if err != nil {
		return fmt.Errorf("idem: renew %q: %w", c.spec.key, err)
	}
	c.setExpiresAt(expiresAt)
	return nil
}

// KeepAlive renews the lease every RenewEvery on a goroutine it owns, until
// stop is called or ctx ends. Run the work under workCtx, a child of ctx.
//
// If a renewal finds the lease lost, KeepAlive cancels workCtx with cause
// ErrLeaseLost (see context.Cause) so the work can stop early, and stops
// renewing. Other renewal errors (a dropped connection, a timeout) are
// retried on the next tick; each attempt is bounded by Lease. Renewal is
// best effort: the fencing in Complete is what guarantees that a lost claim
// cannot be completed.
//
// stop stops renewing, waits for the goroutine to exit and cancels workCtx.
// It returns an error wrapping ErrLeaseLost if a renewal found the lease
// lost, else nil. It may be called more than once. With a negative
// RenewEvery no goroutine is started and stop only cancels workCtx.
func (c *Claim) KeepAlive(ctx context.Context) (workCtx context.Context, stop func() error) {
	workCtx, cancel := context.WithCancelCause(ctx)
	if c.spec.renewEvery < 0 {
		return workCtx, func() error {
			cancel(nil)
			return nil
		}
	}

	stopCh := make(chan struct{})
	done := make(chan struct{})
	var lost error // written by the goroutine before done is closed
	go func() {
		defer close(done)
		ticker := time.NewTicker(c.spec.renewEvery)
		defer ticker.Stop()
		for {
			select {
			case <-stopCh:
				return
			case <-workCtx.Done():
				return
			case <-ticker.C:
			}
			attemptCtx, cancelAttempt := context.WithTimeout(workCtx, c.spec.lease)
			err := c.Renew(attemptCtx)
			cancelAttempt()
			if errors.Is(err, ErrLeaseLost) {
				lost = err
				cancel(ErrLeaseLost)
				return
			}
			// nil: renewed. Other errors are transient: retry next tick.
		}
	}()

	var once sync.Once
	return workCtx, func() error {
		once.Do(func() {
			close(stopCh)
			<-done
			cancel(nil)
		})
		return lost
	}
}
