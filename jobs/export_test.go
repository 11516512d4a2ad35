package jobs

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"
)

// CompleteRunningJobForTest runs the worker's completion of job id on its
// own (in the worker it is a part of completeSQL).
func CompleteRunningJobForTest(ctx context.Context, pool *pgxpool.Pool, id int64) error {
	_, err := pool.Exec(ctx, completeRunningJobSQL("$1", "true"), id)
	return err
}

// UniqueKeySQL and LegacyUniqueKeySQL are the unique keys PostgreSQL computes
// from parameters $1 (source), $2 (event id) and $3 (destination).
var (
	UniqueKeySQL       = uniqueKeySQL("$1", "$2", "$3")
	LegacyUniqueKeySQL = legacyUniqueKeySQL("$1", "$2")
	HasActiveJobSQL    = hasActiveJobSQL("$1", "$2", "$3")
)

// AdvanceLineSQL is the statement that hands an ordering line on.
var AdvanceLineSQL = advanceLineSQL
