package dberr

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
)

func TestUnavailable(t *testing.T) {
	t.Parallel()
	for code, want := range map[string]bool{
		"08006": true, "40001": true, "40P01": true, "53100": true, "57P01": true, "57014": true, "58030": true, "XX000": true,
		"22021": false, "22P05": false, "23505": false, "54000": false, "42P01": false,
	} {
		require.Equal(t, want, Unavailable(fmt.Errorf("wrapped: %w", &pgconn.PgError{Code: code})), code)
	}
	require.True(t, Unavailable(context.DeadlineExceeded))
	require.True(t, Unavailable(&pgconn.PgError{}), "no SQLSTATE: not known to be the data's")
	require.False(t, Unavailable(nil))
	require.True(t, SessionEnded(fmt.Errorf("wrapped: %w", &pgconn.PgError{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: "57P01"})))
	require.True(t, SessionEnded(&pgconn.PgError{Severity: "FATAL", Code: "57P05"}), "no unlocalized severity: the localized one")
	require.False(t, SessionEnded(&pgconn.PgError{Severity: "ERROR", SeverityUnlocalized: "ERROR", Code: "57014"}), "a cancelled statement: the session goes on")
	require.False(t, SessionEnded(&pgconn.PgError{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: "08P01"}))
	require.False(t, SessionEnded(context.DeadlineExceeded))
	require.True(t, Transient(&pgconn.PgError{Code: "40P01"}))
	require.False(t, Transient(&pgconn.PgError{Code: "23505"}))
}
