// Command hookline is a self-hosted webhook ingestion service with
// exactly-once processing: it verifies each provider's signature, stores the
// delivery durably in Postgres, enqueues one River job per event and runs the
// work inside a Postgres-row idempotency claim. Its commands are package cli
// (`hookline -h` lists them); a Go program that registers Go handlers runs
// cli.Main itself.
package main

import (
	"os"

	"github.com/hookline/hookline/cmd/hookline/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], cli.Options{}))
}
