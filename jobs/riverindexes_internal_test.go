package jobs

import (
	"context"
	"testing"

	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/internal/pgtest"
)

// A migrated database has every index River's reindexer is given (else it
// warns on each run) and not River's two GIN indexes, which migration 012
// drops; River's default list still names both, so the filter is needed.
func TestReindexedRiverIndexesExist(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	exists := func(name string) bool {
		var ok bool
		require.NoError(t, pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, name).Scan(&ok))
		return ok
	}
	names := reindexedRiverIndexes()
	require.NotEmpty(t, names)
	for _, name := range names {
		require.True(t, exists(name), "River's reindexer is given %s, which the migrated schema does not have", name)
	}
	for _, name := range riverSearchIndexes {
		require.False(t, exists(name), "%s is still there after the migrations", name)
		require.NotContains(t, names, name)
		require.Contains(t, river.ReindexerIndexNamesDefault(), name,
			"River's reindexer no longer names %s by default: the filter can go", name)
	}
}
