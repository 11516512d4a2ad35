// Package defaults is hookline's table of default settings, the one place
// config, ingest and jobs read them from. docs/operations.md lists them for
// users.
//
// Internal: no stability promise.
package defaults

import "time"

// Server.
const (
	Listen          = ":8080"
	MaxBodyBytes    = 1 << 20
	Workers         = 50
	ShutdownTimeout = 30 * time.Second
	PoolSize        = 20
)

// Ingest.
const (
	BatchSize       = 32
	BatchWait       = 2 * time.Millisecond
	Committers      = 4
	QueueTimeout    = 3 * time.Second
	BodyTimeout     = 10 * time.Second
	MaxPendingBytes = 256 << 20 // or 4 × MaxBodyBytes, if more
	// Pacing (--role all): answers slow down, by at most PaceMaxDelay,
	// while the workers' oldest ready event has waited more than PaceLag.
	PaceLag      = 250 * time.Millisecond
	PaceMaxDelay = 20 * time.Millisecond
)

// Sources and destinations.
const (
	OnDuplicate = "skip"
	Lease       = 5 * time.Minute
	DedupWindow = 720 * time.Hour
	DestTimeout = 10 * time.Second
	MaxAttempts = 10
	// MaxMaxAttempts is the largest max_attempts: River stores a job's
	// attempt cap, 4 × max_attempts, as a smallint.
	MaxMaxAttempts = 8000
	BackoffMin     = time.Second
	BackoffMax     = time.Hour
)

// Reconciliation.
const ReconcileLookback = 72 * time.Hour

// ServiceName is the service.name of exported spans.
const ServiceName = "hookline"

// Clean-up.
const (
	DeliveryRetention = 7 * 24 * time.Hour
	CleanupInterval   = time.Minute
)
