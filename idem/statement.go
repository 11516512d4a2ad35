package idem

import (
	"fmt"
	"time"
)

// Statement is one SQL statement of a Store with its arguments, numbered $1
// to $len(Args). It is for callers that fold a claim step into a statement
// of their own, typically as a data-modifying common table expression
// (WITH claim AS (…) …): the claim and the caller's writes then run in one
// round trip and commit atomically without an explicit transaction. Number
// the caller's own parameters from len(Args)+1.
//
// The SQL text depends only on the Store's table, so a caller that builds its
// statement once per Store gets a constant string that drivers can prepare
// and cache; only Args change between calls.
type Statement struct {
	SQL  string
	Args []any
}

// ClaimStatement returns the statement Claim runs to take the key
// ComposeKey(opts.Namespace, opts.Scope, opts.Segment): a single
// INSERT … ON CONFLICT DO UPDATE … WHERE … RETURNING token, expires_at. It
// returns one row (token bigint, expires_at timestamptz) when the claim was
// taken, as a new row or a takeover of an expired one (or of a completed one
// allowed by opts.OverrideCompletedBefore), and no row when it was refused.
// The concurrency guarantees are those of Claim: of many concurrent claimers
// exactly one gets a row.
//
// Turn the returned row into a *Claim with ClaimFromRow. When no row comes
// back, call Claim to learn why: it returns the *DuplicateError describing
// the holder, or takes the key if it became free in between.
//
// Errors are those of Options validation (ErrEmptySegment, bad durations).
func (s *Store) ClaimStatement(opts Options) (Statement, error) {
	sp, err := opts.resolve()
	if err != nil {
		return Statement{}, err
	}
	return Statement{SQL: s.sql.claim, Args: sp.claimArgs()}, nil
}

func (sp spec) claimArgs() []any {
	return []any{sp.key, sp.holder, sp.lease.Microseconds(), sp.overrideBefore}
}

// ClaimFromRow returns the *Claim described by a row that
// ClaimStatement(opts) returned, and fires Telemetry.Claimed. Pass the same
// opts. Call it once per returned row; the claim is held (and visible to
// others) once the statement's transaction commits.
func (s *Store) ClaimFromRow(opts Options, token int64, expiresAt time.Time) (*Claim, error) {
	sp, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	c := &Claim{store: s, spec: sp, token: token, expiresAt: expiresAt}
	emit(s.telemetry.Claimed, c.event(StateProcessing))
	return c, nil
}

// CompleteStatement returns the statement Complete runs, with a
// RETURNING token clause so that it can be embedded as a data-modifying
// common table expression: it marks the row completed (expires_at =
// now()+DedupWindow) only while it is processing under this claim's token,
// and returns one row if it did, none otherwise. Its parameters are $1 to
// $3.
//
// After running it, pass the number of rows it returned (or affected) to
// ReportCompleted, which fires Telemetry.Completed or returns ErrLeaseLost.
// To make other writes depend on the completion, have them select from the
// CTE (… FROM claim WHERE …): when the lease was lost they then change
// nothing either.
func (c *Claim) CompleteStatement() Statement {
	return Statement{
		SQL:  c.store.sql.completeReturning,
		Args: []any{c.spec.key, c.token, c.spec.dedupWindow.Microseconds()},
	}
}

// ReportCompleted records the outcome of a CompleteStatement the caller ran
// itself: rows is the number of rows it returned. With 1 it fires
// Telemetry.Completed and returns nil, like Complete; with 0 it returns an
// error wrapping ErrLeaseLost (the key was taken over, cleaned up, released
// or completed already), and the caller should roll back whatever depended
// on the completion.
func (c *Claim) ReportCompleted(rows int64) error {
	switch rows {
	case 1:
		emit(c.store.telemetry.Completed, c.event(StateCompleted))
		return nil
	case 0:
		return fmt.Errorf("idem: complete %q (token %d): %w", c.spec.key, c.token, ErrLeaseLost)
	}
	return fmt.Errorf("idem: complete %q (token %d): the statement returned %d rows, want 0 or 1", c.spec.key, c.token, rows)
}

// ClaimManySQL returns a statement, for use as a data-modifying common table
// expression, that claims many keys in one round trip: input is a query
// yielding (key, holder, lease_us) rows — a ClaimStatement's Args[0:3] for
// each claim, with distinct keys and no OverrideCompletedBefore (claim
// those one at a time). Keys are taken in key order, so that concurrent
// batches lock rows in one order. It returns (key, token, expires_at) for
// each claim taken; a key that is held returns no row (ask Claim why). The
// guarantees per key are ClaimStatement's; turn each row into a *Claim with
// ClaimFromRow.
func (s *Store) ClaimManySQL(input string) string {
	n := names(s.table)
	return fmt.Sprintf(`INSERT INTO %[1]s AS c
    (key, state, token, holder, expires_at, claimed_at, completed_at, created_at, updated_at)
SELECT q.key, 'processing', nextval(%[2]s), q.holder, now() + q.lease_us * interval '1 microsecond', now(), NULL, now(), now()
FROM (%[3]s) AS q(key, holder, lease_us)
ORDER BY q.key
`+takeOverSQL+`
RETURNING c.key, c.token, c.expires_at`, n.table, n.seqLit, input)
}

// CompleteManySQL returns a statement, for use as a data-modifying common
// table expression, that completes many claims in one round trip: input is
// a query yielding (key, token, dedup_us) rows, each a CompleteStatement's
// Args. Like CompleteStatement it completes a row only while it is
// processing under that token, and returns the key of each row it
// completed; report each claim's outcome with ReportCompleted (1 if its key
// came back, else 0).
func (s *Store) CompleteManySQL(input string) string {
	return fmt.Sprintf(`UPDATE %[1]s AS c
SET state = 'completed', expires_at = now() + q.dedup_us * interval '1 microsecond',
    completed_at = now(), updated_at = now()
FROM (%[2]s) AS q(key, token, dedup_us)
WHERE c.key = q.key AND c.token = q.token AND c.state = 'processing'
RETURNING c.key`, names(s.table).table, input)
}
