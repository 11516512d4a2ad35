package jobs

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
)

// ExplainForTest returns PostgreSQL's plan of query (EXPLAIN …) on conn,
// one line per plan node, as text.
func ExplainForTest(ctx context.Context, conn *pgxpool.Conn, query string) (string, error) {
	rows, err := conn.Query(ctx, "EXPLAIN "+query)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var plan strings.Builder
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return "", err
		}
		plan.WriteString(line + "\n")
	}
	return plan.String(), rows.Err()
}

// DeleteRunningJobForTest runs the worker's removal of job id on its own
// (in the worker it is a part of completeSQL).
func DeleteRunningJobForTest(ctx context.Context, pool *pgxpool.Pool, id int64) error {
	_, err := pool.Exec(ctx, deleteRunningJobSQL("$1", "true"), id)
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
