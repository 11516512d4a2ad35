package idem

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// CodeDuplicate is Result.Code for a duplicate, skipped or failed.
const CodeDuplicate = "duplicate"

// cleanupTimeout bounds the rollback and release that follow a failed run.
// They run even if the caller's ctx is cancelled, since a claim left behind
// would block retries until its lease expires.
const cleanupTimeout = 10 * time.Second

// Status is the outcome of Run or RunExternal.
type Status int

const (
	// StatusCompleted: the claim was taken, the work ran and the key is
	// now completed.
	StatusCompleted Status = iota + 1
	// StatusSkipped: the key was a duplicate and OnDuplicate is Skip; the
	// work did not run.
	StatusSkipped
	// StatusFailed: the key was a duplicate and OnDuplicate is Fail; the
	// work did not run and the *DuplicateError is returned too.
	StatusFailed
	// StatusSteppedAside: Segment was blank, so the work ran without a
	// claim and nothing was stored.
	StatusSteppedAside
)

// String implements fmt.Stringer.
func (s Status) String() string {
	switch s {
	case StatusCompleted:
		return "completed"
	case StatusSkipped:
		return "skipped"
	case StatusFailed:
		return "failed"
	case StatusSteppedAside:
		return "stepped_aside"
	}
	return fmt.Sprintf("Status(%d)", int(s))
}

// Result reports what Run or RunExternal did. When they return an error other
// than a *DuplicateError, Status is zero and only Key, Holder and Token (of
// the claim that was taken, if any) are set.
type Result struct {
	// Status is the outcome.
	Status Status
	// Code is CodeDuplicate ("duplicate") for StatusSkipped and
	// StatusFailed, else "".
	Code string
	// Key is the full composed key; "" when stepped aside.
	Key string
	// State is StateCompleted after a completed run, or the existing row's
	// state for a duplicate.
	State State
	// Holder is the run's holder, or the existing row's for a duplicate.
	Holder string
	// Token is the run's fencing token, or the existing row's for a
	// duplicate.
	Token int64
}

// Run runs fn at most once per key, in transactional mode: the work's writes
// and the completed mark commit in one transaction, so they happen together
// or not at all.
//
//  1. Claim the key on the Store's DB; the claim commits on its own, so
//     concurrent runs see it at once. A duplicate returns without running fn
//     (see OnDuplicate).
//  2. Keep the lease alive (KeepAlive) while fn runs.
//  3. BEGIN; fn(workCtx, tx); mark the claim completed in tx; COMMIT.
//
// If the lease was lost meanwhile (it expired and another holder took the key
// over), the transaction is rolled back, fn's writes vanish, and Run returns
// an error wrapping ErrLeaseLost. If fn returns an error or panics, the
// transaction is rolled back and the claim released so a retry can run; the
// error is returned (joined with any release error) and a panic continues
// after the cleanup. fn must not commit or roll back tx itself. workCtx is
// cancelled with cause ErrLeaseLost if a renewal finds the lease lost.
//
// A blank opts.Segment steps aside: fn still runs in a transaction, but
// nothing is claimed or stored (StatusSteppedAside).
//
// The Store's DB must be a pool (see DB).
func (s *Store) Run(ctx context.Context, opts Options, fn func(ctx context.Context, tx pgx.Tx) error) (Result, error) {
	if fn == nil {
		return Result{}, errors.New("idem: Run: fn is nil")
	}
	if isBlank(opts.Segment) {
		if err := opts.validateStepAside(); err != nil {
			return Result{}, err
		}
		if err := s.inTx(ctx, fn); err != nil {
			return Result{}, err
		}
		return Result{Status: StatusSteppedAside}, nil
	}

	claim, res, err := s.claimForRun(ctx, opts)
	if claim == nil {
		return res, err
	}

	workCtx, stop := claim.KeepAlive(ctx)
	// From here until the outcome is settled, a panic or runtime.Goexit in
	// fn must not leave the claim behind: the deferred cleanup releases it
	// and the panic then continues unchanged.
	var tx pgx.Tx
	settled := false
	defer func() {
		if !settled {
			_ = stop()
			s.abandon(ctx, claim, tx)
		}
	}()

	tx, err = s.db.Begin(ctx)
	if err != nil {
		settled = true
		_ = stop()
		return res, s.fail(ctx, claim, nil, fmt.Errorf("idem: run %q: begin: %w", claim.Key(), err))
	}
	fnErr := fn(workCtx, tx)
	settled = true
	lost := stop()
	if fnErr != nil {
		return res, s.fail(ctx, claim, tx, fnErr)
	}
	if lost != nil {
		s.rollback(ctx, tx)
		return res, fmt.Errorf("idem: run %q: %w", claim.Key(), lost)
	}
	if err := claim.complete(ctx, tx); err != nil {
		if errors.Is(err, ErrLeaseLost) {
			s.rollback(ctx, tx)
			return res, err
		}
		return res, s.fail(ctx, claim, tx, err)
	}
	if err := tx.Commit(ctx); err != nil {
		// The commit may or may not have happened. Release is safe either
		// way: it only deletes a row that is still processing.
		return res, s.fail(ctx, claim, tx, fmt.Errorf("idem: run %q: commit: %w", claim.Key(), err))
	}
	emit(s.telemetry.Completed, claim.event(StateCompleted))
	res.Status = StatusCompleted
	res.State = StateCompleted
	return res, nil
}

// RunExternal runs fn at most once per key, in external mode, for work whose
// effects live outside this database (an API call, an email):
//
//  1. Claim the key on the Store's DB, committed before fn starts. A
//     duplicate returns without running fn (see OnDuplicate).
//  2. Keep the lease alive while fn runs; workCtx is cancelled with cause
//     ErrLeaseLost if a renewal finds the lease lost.
//  3. Mark the claim completed on the Store's DB.
//
// If fn returns an error or panics, the claim is released so a retry can run,
// and the error is returned (a panic continues after the release). If the
// lease was lost, Run returns an error wrapping ErrLeaseLost: fn's effects
// already happened and may also be done by the new holder, so pass
// Result.Token or Claim.Token to systems that can reject stale writers, or
// pick a Lease that a healthy holder never outlives. A crash between fn and
// the completion leaves the claim processing until its lease expires; the
// work then runs again.
//
// A blank opts.Segment steps aside: fn runs, nothing is stored.
func (s *Store) RunExternal(ctx context.Context, opts Options, fn func(ctx context.Context) error) (Result, error) {
	if fn == nil {
		return Result{}, errors.New("idem: RunExternal: fn is nil")
	}
	if isBlank(opts.Segment) {
		if err := opts.validateStepAside(); err != nil {
			return Result{}, err
		}
		if err := fn(ctx); err != nil {
			return Result{}, err
		}
		return Result{Status: StatusSteppedAside}, nil
	}

	claim, res, err := s.claimForRun(ctx, opts)
	if claim == nil {
		return res, err
	}

	workCtx, stop := claim.KeepAlive(ctx)
	settled := false
	defer func() {
		if !settled {
			_ = stop()
			s.abandon(ctx, claim, nil)
		}
	}()
	fnErr := fn(workCtx)
	settled = true
	lost := stop()
	if fnErr != nil {
		return res, s.fail(ctx, claim, nil, fnErr)
	}
	if lost != nil {
		return res, fmt.Errorf("idem: run %q: %w", claim.Key(), lost)
	}
	if err := claim.complete(ctx, s.db); err != nil {
		if errors.Is(err, ErrLeaseLost) {
			return res, err
		}
		return res, s.fail(ctx, claim, nil, err)
	}
	emit(s.telemetry.Completed, claim.event(StateCompleted))
	res.Status = StatusCompleted
	res.State = StateCompleted
	return res, nil
}

// validateStepAside checks what can be checked without a segment.
func (o Options) validateStepAside() error {
	if _, err := ComposeKey(o.Namespace, o.Scope); err != nil {
		return err
	}
	_, err := o.resolveDurations()
	return err
}

// claimForRun claims for Run and RunExternal. It returns the claim, or a nil
// claim with the Result and error to return.
func (s *Store) claimForRun(ctx context.Context, opts Options) (*Claim, Result, error) {
	sp, err := opts.resolve()
	if err != nil {
		return nil, Result{}, err
	}
	claim, err := s.claim(ctx, s.db, sp)
	if err != nil {
		var dup *DuplicateError
		if !errors.As(err, &dup) {
			return nil, Result{Key: sp.key, Holder: sp.holder}, err
		}
		res := Result{Status: StatusSkipped, Code: CodeDuplicate, Key: dup.Key, State: dup.State, Holder: dup.Holder, Token: dup.Token}
		if sp.onDuplicate == Fail {
			res.Status = StatusFailed
			return nil, res, dup
		}
		return nil, res, nil
	}
	return claim, Result{Key: claim.Key(), Holder: claim.Holder(), Token: claim.Token()}, nil
}

// inTx runs fn in a transaction on the Store's DB, for a stepped-aside Run.
func (s *Store) inTx(ctx context.Context, fn func(ctx context.Context, tx pgx.Tx) error) error {
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("idem: run: begin: %w", err)
	}
	settled := false
	defer func() {
		if !settled {
			s.rollback(ctx, tx)
		}
	}()
	err = fn(ctx, tx)
	settled = true
	if err != nil {
		s.rollback(ctx, tx)
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("idem: run: commit: %w", err)
	}
	return nil
}

// fail rolls back tx (if any), releases the claim so a retry can run, and
// returns err joined with the release error, if any (an ErrLeaseLost there
// tells the caller the claim had been lost as well).
func (s *Store) fail(ctx context.Context, claim *Claim, tx pgx.Tx, err error) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if tx != nil {
		_ = tx.Rollback(cctx)
	}
	if relErr := claim.Release(cctx, s.db); relErr != nil {
		return errors.Join(err, relErr)
	}
	return err
}

// abandon cleans up after a panic or runtime.Goexit in fn.
func (s *Store) abandon(ctx context.Context, claim *Claim, tx pgx.Tx) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if tx != nil {
		_ = tx.Rollback(cctx)
	}
	_ = claim.Release(cctx, s.db)
}

func (s *Store) rollback(ctx context.Context, tx pgx.Tx) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	_ = tx.Rollback(cctx)
}
