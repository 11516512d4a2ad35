// Package dberr classifies database errors, in one place, by what the caller
// should do about them:
//
//   - Unavailable: the database could not be reached or could not finish the
//     work for reasons of its own (connection lost, shut down, out of
//     resources, cancelled, timed out). Nothing is wrong with the request:
//     answer 503, or try again later.
//   - Transient: a serialization failure or a deadlock. Running the same
//     transaction again may simply succeed.
//   - anything else (a constraint, a value Postgres refuses, an index entry
//     too large, a missing table) is the data's or the code's: running it
//     again fails the same way.
//
// Internal: no stability promise.
package dberr

import (
	"errors"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"
)

// Unavailable reports whether err means the database could not be reached
// or could not complete the work for reasons of its own, not of the data.
// An error that is not a Postgres error at all (a connection reset, a
// timeout, the pool closing) counts as unavailable.
func Unavailable(err error) bool {
	if err == nil {
		return false
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return true
	}
	code := pgErr.Code
	return len(code) < 5 ||
		pgerrcode.IsConnectionException(code) ||
		pgerrcode.IsTransactionRollback(code) ||
		pgerrcode.IsInsufficientResources(code) ||
		pgerrcode.IsOperatorIntervention(code) ||
		pgerrcode.IsSystemError(code) ||
		pgerrcode.IsInternalError(code)
}

// Transient reports whether a transaction that failed with err may succeed
// if simply run again: a serialization failure or a deadlock.
func Transient(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) &&
		(pgErr.Code == pgerrcode.SerializationFailure || pgErr.Code == pgerrcode.DeadlockDetected)
}
