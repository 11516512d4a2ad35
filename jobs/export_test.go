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
