package ingest_test

import (
	"context"

	"github.com/hookline/hookline/internal/pgcluster"
)

// restart starts the stopped cluster again on the same directory and port.
func restart(c *pgcluster.Cluster) (*pgcluster.Cluster, error) {
	return pgcluster.Start(context.Background(), pgcluster.Options{Dir: c.Dir, Port: c.Port, Fast: true})
}
