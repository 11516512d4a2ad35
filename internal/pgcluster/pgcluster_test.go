package pgcluster_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/internal/pgcluster"
)

// TestStartRefusesARunningServersDirectory: a second Start on a data
// directory a live server holds (a second hookline dev in the same
// directory) fails naming the server, and leaves that server running; a
// pid file its server left behind when it died does not stop a start.
func TestStartRefusesARunningServersDirectory(t *testing.T) {
	if _, err := pgcluster.FindBinDir(); errors.Is(err, pgcluster.ErrNoBinaries) {
		t.Skip(err) // make test installs them: CI runs this
	}
	t.Parallel()
	ctx := context.Background()
	// Not t.TempDir: run as root, the server runs as postgres, which must
	// reach the directory.
	parent, err := os.MkdirTemp("", "pgcluster-test")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(parent, 0o755))
	t.Cleanup(func() { _ = os.RemoveAll(parent) })
	dir := filepath.Join(parent, "pg")
	first, err := pgcluster.Start(ctx, pgcluster.Options{Dir: dir, Fast: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = first.Stop() })

	_, err = pgcluster.Start(ctx, pgcluster.Options{Dir: dir, Fast: true})
	require.ErrorIs(t, err, pgcluster.ErrInUse)
	require.ErrorContains(t, err, "another hookline dev")

	// The first server still holds its lock file and answers.
	_, err = os.Stat(filepath.Join(dir, "data", "postmaster.pid"))
	require.NoError(t, err, "the running server's lock file is left alone")
	conn, err := pgx.Connect(ctx, first.URL("postgres"))
	require.NoError(t, err)
	var one int
	require.NoError(t, conn.QueryRow(ctx, "SELECT 1").Scan(&one))
	require.NoError(t, conn.Close(ctx))

	// Killed, its server leaves the lock file behind: the next start
	// takes the directory over.
	first.Kill()
	select {
	case <-first.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the killed server did not exit")
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "data", "postmaster.pid"), []byte("999999999\n"), 0o600))
	again, err := pgcluster.Start(ctx, pgcluster.Options{Dir: dir, Fast: true})
	require.NoError(t, err)
	require.NoError(t, again.Stop())
}
