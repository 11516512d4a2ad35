// Package dberr classifies database errors, in one place, by what the caller
// should do about them:
//
//   - Unavailable: the database could not be reached or could not finish the
//     work for reasons of its own (connection lost, shut down, out of
//     resources, cancelled, timed out). Nothing is wrong with the request:
//     answer 503, or try again later.
//   - Transient: a serialization failure or a deadlock. Running the same
//     transaction again may simply succeed.
//   - SessionEnded (a kind of Unavailable): the server ended the session
//     (pg_terminate_backend, idle_session_timeout, a shutdown); another
//     connection may work at once.
//   - anything else (a constraint, a value Postgres refuses, an index entry
//     too large, a missing table) is the data's or the code's: running it
//     again fails the same way.
//
// Internal: no stability promise.
package dberr

import (
	"errors"
	"strings"

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

// SessionEnded reports whether err is the server ending the session: a
// FATAL of class 57, operator intervention. Where it stands in place of an
// answer the server owed before COMMIT's, the transaction did not commit
// (the server answers in order, and sends what it answered before its
// FATAL). A broken socket is not one: its answers may have been lost.
func SessionEnded(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || !strings.HasPrefix(pgErr.Code, "57") {
		return false
	}
	severity := pgErr.SeverityUnlocalized // the English word, whatever lc_messages is
	if severity == "" {
		severity = pgErr.Severity
	}
	return severity == "FATAL"
}
