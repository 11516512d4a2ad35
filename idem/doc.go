// Package idem makes work run at most once per key, using claims stored as
// rows in a PostgreSQL table.
//
// A webhook is delivered twice, a job is retried because its worker died
// mid-flight: for work that must happen at most once (charge a card, send an
// email, reserve stock) take a stable key from the payload and claim it
// before the work runs. The second caller finds the claim and stops.
//
// idem works on its own, with or without River: it needs a *pgxpool.Pool and
// a table (CreateTable, or TableDDL in a migration).
//
// # Keys
//
// A key has three parts joined by ":" (ComposeKey): a Namespace (e.g.
// "hookline"), a Scope naming the kind of work (e.g. "stripe.charge") and a
// Segment taken from the payload (e.g. the event id), giving
// "hookline:stripe.charge:evt_123". An empty or blank part is an error
// wrapping ErrEmptySegment, except that Run and RunExternal treat a blank
// Segment as "this run has no key": they step aside, run the work every
// time and store nothing (StatusSteppedAside).
//
// # Claim, complete, release
//
// A row is processing while a holder works on the key, and completed after
// the work succeeded:
//
//	claim, err := store.Claim(ctx, nil, idem.Options{
//		Namespace: "hookline", Scope: "stripe.charge", Segment: eventID,
//		Holder: "job:123:attempt:2",
//	})
//	if errors.Is(err, idem.ErrDuplicate) {
//		return nil // already done, or being done right now
//	}
//	...
//	if err := doWork(ctx); err != nil {
//		_ = claim.Release(ctx, nil) // let a retry claim it again
//		return err
//	}
//	return claim.Complete(ctx, nil)
//
// Store.Claim inserts the row in the processing state with expires_at =
// now()+Lease. It is a single INSERT ... ON CONFLICT DO UPDATE ... WHERE
// statement, so there is no read-then-write race: of any number of
// concurrent claimers exactly one wins, and the others get a *DuplicateError
// (errors.Is(err, ErrDuplicate)) that reports the existing row's State
// (processing or completed), Holder and ExpiresAt.
//
// Claim.Complete marks the row completed with expires_at = now()+DedupWindow
// (default 30 days): until then the key is a duplicate with State completed,
// afterwards it can be claimed again. Options.OverrideCompletedBefore lets an
// operator replay work completed before a cutoff; it never takes over a live
// processing claim.
//
// Claim.Release deletes the row, for when the work failed and a retry should
// be able to run it. Store.Cleanup deletes rows whose expires_at has passed;
// call it periodically to keep the table small.
//
// All lease arithmetic uses the database clock (now()), never the clock of
// the machine running Go, so holders on hosts with skewed clocks agree.
//
// # Fencing tokens
//
// Every successful claim gets a token from a database sequence: a takeover
// always gets a larger token than the claim it replaced, and a token is never
// handed out twice, even after the row was released or cleaned up and the key
// claimed again. Complete, Release and
// Renew act only while the row is processing under the claim's own token;
// otherwise they return ErrLeaseLost. So a holder that stalled past its
// lease, and whose key was taken over, cannot complete or release the new
// holder's claim. Downstream systems that store the token can likewise
// reject writes from a stale holder.
//
// # Leases, renewal and crashes
//
// A processing claim is a lease: once expires_at passes, the next Claim takes
// the row over (with a new token), on the assumption that the holder died.
// A holder that crashes (killed process, lost machine) leaves its claim
// processing; nothing is released, so the key stays blocked until Lease
// expires and only then runs again. Pick Lease for the worst pause of a
// healthy holder, deploys included, not just the typical run time.
//
// Work that may run longer than Lease keeps the claim alive with
// Claim.KeepAlive (Run and RunExternal do this for you): every RenewEvery
// (default Lease/3) it extends expires_at to now()+Lease. A short Lease with
// renewal gives both fast takeover after a crash and no takeover during long
// work. If a renewal finds the lease lost, KeepAlive cancels the work's
// context with cause ErrLeaseLost; transient renewal errors are retried on
// the next tick.
//
// # Two ways to run work
//
// Store.Run is transactional mode, for work whose effects are writes to the
// same database. The claim commits on its own first (so other callers see
// it), then fn runs inside a transaction, and the completed mark is written
// in that same transaction:
//
//	claim (own tx) → KeepAlive → BEGIN → fn(ctx, tx) → Complete(tx) → COMMIT
//
// The work's writes and the completion commit together or not at all. If
// the lease was lost and the key taken over while fn ran, Complete finds a
// different token, the transaction rolls back and Run returns ErrLeaseLost:
// a stale holder's writes never become visible, whatever the timing.
//
// Store.RunExternal is external mode, for effects outside the database (an
// HTTP call, an email). The claim is committed before fn runs and completed
// after it returns. Fencing still stops a stale holder from completing, but
// its effects already happened, so give the side effect its own idempotency
// key (many APIs accept one; Claim.Token or the composed key serve well) or
// choose a Lease a healthy holder never outlives.
//
// In both modes, if fn returns an error or panics the claim is released so a
// retry can run the work; a duplicate is reported as StatusSkipped (nil
// error, OnDuplicate Skip, the default: "already done") or StatusFailed
// (with the *DuplicateError, OnDuplicate Fail: "you may not run this
// again"), both with Result.Code "duplicate" and the full key.
//
// # Telemetry
//
// Config.Telemetry takes callbacks for claimed, completed and duplicate
// events (the last with the existing row's state), for metrics and logs.
//
// # Table
//
// The table (default "idem_claims") holds one row per key: key, state,
// token, holder, expires_at, claimed_at, completed_at, created_at and
// updated_at, with an index on expires_at and a sequence for tokens. See
// TableDDL for the exact statements.
package idem
