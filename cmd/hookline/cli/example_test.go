package cli_test

import (
	"context"
	"os"

	"github.com/jackc/pgx/v5"

	"github.com/hookline/hookline/cmd/hookline/cli"
	"github.com/hookline/hookline/jobs"
)

// A program of your own that is the hookline command plus a Go handler:
// a configuration's `handler: ledger` destinations run it in transactional
// mode (its writes commit with the event's completed mark).
func ExampleMain() {
	ledger := jobs.HandlerFunc(func(ctx context.Context, tx pgx.Tx, ev *jobs.Event) error {
		_, err := tx.Exec(ctx, `INSERT INTO ledger (event_id, body) VALUES ($1, $2)`, ev.ID, ev.Body)
		return err
	})
	os.Exit(cli.Main(os.Args[1:], cli.Options{Handlers: map[string]jobs.Handler{"ledger": ledger}}))
}
