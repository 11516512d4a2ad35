package jobs

import (
	"context"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookline/hookline/internal/defaults"
)

// Source is one webhook sender as the workers see it.
type Source struct {
	// Name is the source name (the first half of the event key).
	Name string
	// Reject: a job whose event is already completed goes to the dead set
	// (reason duplicate) instead of being skipped.
	Reject bool
	// Lease is the processing claim's lifetime, renewed while work runs.
	Lease time.Duration
	// DedupWindow is how long a completed event stays completed.
	DedupWindow time.Duration
	// Destination receives each event by HTTP, unless Handler is set.
	Destination *Destination
	// Handler processes events in Go, in transactional mode: its writes and
	// the claim's completed mark commit in one transaction (promise 4).
	// When set, Destination is not used.
	Handler Handler
	// Timeout is how long one attempt may run before River cancels it and,
	// if its worker is gone, rescues the job. Default: Lease. A crashed
	// worker's event is retried within max(Lease, Timeout) + River's rescuer
	// interval (30 s), so keep it at the lease unless a Go handler really
	// needs longer (its claim is renewed meanwhile, see idem.Claim.KeepAlive).
	Timeout time.Duration
	// MaxAttempts per budget (destination.max_attempts); default 10.
	MaxAttempts int
	// BackoffMin and BackoffMax bound the exponential, jittered delay
	// between attempts (defaults 1s and 1h).
	BackoffMin, BackoffMax time.Duration
}

// Destination is an HTTP endpoint events are forwarded to.
type Destination struct {
	URL string
	// Timeout bounds one attempt (default 10s).
	Timeout time.Duration
	// Secret, when set, signs forwards with Standard Webhooks headers
	// (whsec_ + base64).
	Secret string
}

// Event is what a handler receives.
type Event struct {
	Source      string
	ID          string
	Type        string
	ContentType string
	// Body is the exact raw bytes received (a batch item's own bytes).
	Body []byte
	// Headers are the stored request headers.
	Headers http.Header
	// Attempt counts attempts over the event's whole life (1-based).
	Attempt int
	// budgetAttempt counts the attempts of the current job (its budget).
	budgetAttempt int
	// DeliveryID is hookline's id of the HTTP delivery the event came in with.
	DeliveryID int64
	// ReceivedAt is when that delivery was received.
	ReceivedAt time.Time
	// rawHeaders are the stored headers as JSON, as loaded; Headers is
	// decoded from them only for handlers (the HTTP destination does not
	// forward them).
	rawHeaders []byte
}

// IdempotencyKey is "{source}:{event_id}", the same on every attempt.
func (e *Event) IdempotencyKey() string { return e.Source + ":" + e.ID }

// Handler processes one event inside tx. Returning an error rolls tx back,
// releases the claim and retries the event with backoff.
type Handler interface {
	Handle(ctx context.Context, tx pgx.Tx, ev *Event) error
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, tx pgx.Tx, ev *Event) error

// Handle implements Handler.
func (f HandlerFunc) Handle(ctx context.Context, tx pgx.Tx, ev *Event) error { return f(ctx, tx, ev) }

// TypeMux routes events to handlers by event type; "" matches any type not
// registered otherwise. An event with no matching handler is completed
// without effect.
type TypeMux map[string]Handler

// Handle implements Handler.
func (m TypeMux) Handle(ctx context.Context, tx pgx.Tx, ev *Event) error {
	if h, ok := m[ev.Type]; ok {
		return h.Handle(ctx, tx, ev)
	}
	if h, ok := m[""]; ok {
		return h.Handle(ctx, tx, ev)
	}
	return nil
}

// withDefaults fills the fields left zero from the defaults table.
func (s *Source) withDefaults() {
	if s.MaxAttempts <= 0 {
		s.MaxAttempts = defaults.MaxAttempts
	}
	if s.Lease <= 0 {
		s.Lease = defaults.Lease
	}
	if s.DedupWindow <= 0 {
		s.DedupWindow = defaults.DedupWindow
	}
	if s.Timeout <= 0 {
		s.Timeout = s.Lease
	}
	if s.BackoffMin <= 0 {
		s.BackoffMin = defaults.BackoffMin
	}
	if s.BackoffMax <= 0 {
		s.BackoffMax = defaults.BackoffMax
	}
}
