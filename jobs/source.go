package jobs

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookline/hookline/internal/defaults"
)

// Source is one webhook sender as the workers see it.
type Source struct {
	// Name is the source name (the first part of the event key).
	Name string
	// Reject: a job whose destination is already completed goes to the dead
	// set (reason duplicate) instead of being skipped.
	Reject bool
	// StaleSkip: an event whose ordering.by is older than one already
	// forwarded for its ordering key completes without being forwarded
	// (ordering.stale: skip); otherwise it is forwarded with
	// Hookline-Stale: true.
	StaleSkip bool
	// Lease is the processing claim's lifetime, renewed while work runs.
	Lease time.Duration
	// DedupWindow is how long a completed destination stays completed.
	DedupWindow time.Duration
	// Targets are the source's destinations by name. A Source without
	// Targets has one, DefaultDestination, made of the fields below (the
	// one-destination form).
	Targets []*Target

	// Destination receives each event by HTTP, unless Handler is set.
	Destination *Destination
	// Handler processes events in Go, in transactional mode: its writes and
	// the claim's completed mark commit in one transaction.
	Handler Handler
	// Timeout, MaxAttempts, BackoffMin and BackoffMax: as in Target.
	Timeout                time.Duration
	MaxAttempts            int
	BackoffMin, BackoffMax time.Duration

	targets map[string]*Target
}

// Target is one destination of a source as the workers see it: an HTTP
// destination or a Go handler, with its own attempts, backoff and flow
// control.
type Target struct {
	// Name is unique within the source ([a-z0-9_-]{1,64}).
	Name string
	// HTTP receives each event, unless Handler is set.
	HTTP *Destination
	// Handler processes events in Go, in transactional mode: its writes and
	// the claim's completed mark commit in one transaction.
	Handler Handler
	// Timeout is how long one attempt may run before River cancels it and,
	// if its worker is gone, rescues the job. Default: the source's Lease. A
	// crashed worker's event is retried within max(Lease, Timeout) + River's
	// rescuer interval (30 s), so keep it at the lease unless a Go handler
	// really needs longer (its claim is renewed meanwhile).
	Timeout time.Duration
	// MaxAttempts per budget (max_attempts); default 10.
	MaxAttempts int
	// BackoffMin and BackoffMax bound the exponential, jittered delay
	// between attempts (defaults 1s and 1h).
	BackoffMin, BackoffMax time.Duration
	// RateLimit is the most attempts per second across all instances (0:
	// none); MaxInFlight the most concurrent attempts across all instances
	// (0: the workers of each process).
	RateLimit   float64
	MaxInFlight int
	// Circuit opens the destination after Failures consecutive failed
	// attempts, for CoolDown (nil: no breaker).
	Circuit *Circuit
}

// Circuit configures a destination's circuit breaker.
type Circuit struct {
	Failures int
	CoolDown time.Duration
}

// flowControlled reports whether attempts go through the destination's
// shared gate (rate limit, in-flight slots, circuit breaker).
func (t *Target) flowControlled() bool {
	return t.RateLimit > 0 || t.MaxInFlight > 0 || t.Circuit != nil
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
	Source string
	ID     string
	// Destination is the name of the destination the event is delivered
	// to now (DefaultDestination for a source's single destination).
	Destination string
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
	// Origin is where the event came from: "webhook", or "reconcile" (found
	// by a reconciliation run in the provider's events API).
	Origin string
	// OrderKey is the event's ordering key; "" when the event is unordered.
	OrderKey string
	// Stale: the event's ordering.by is older than that of an event of the
	// same key already forwarded (stale: deliver forwards it all the same).
	Stale bool
	// rawHeaders are the stored headers as JSON, as loaded; Headers is
	// decoded from them only for handlers (the HTTP destination does not
	// forward them).
	rawHeaders []byte
	// line is the event's place in its ordering line, nil when it has none
	// (unordered, or an operator's retry outside the order).
	line *linePlace
	// offLine is the ordering key and by of an ordered event forwarded
	// outside its line (an operator's retry), whose forward still raises
	// its key's greatest by; nil otherwise.
	offLine *linePlace
	// traceParent is the W3C traceparent its delivery was received under
	// (nil: none); the attempt's spans continue that trace.
	traceParent *string
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

// withDefaults fills the fields left zero from the defaults table and
// indexes the targets; a source without Targets gets its one-destination
// target.
func (s *Source) withDefaults() error {
	if s.Lease <= 0 {
		s.Lease = defaults.Lease
	}
	if s.DedupWindow <= 0 {
		s.DedupWindow = defaults.DedupWindow
	}
	s.Targets = s.destinations()
	s.targets = make(map[string]*Target, len(s.Targets))
	for _, t := range s.Targets {
		if t.HTTP == nil && t.Handler == nil {
			return fmt.Errorf("jobs: destination %q of source %q has neither a URL nor a handler", t.Name, s.Name)
		}
		if _, dup := s.targets[t.Name]; dup {
			return fmt.Errorf("jobs: destination %q of source %q given twice", t.Name, s.Name)
		}
		if t.MaxAttempts <= 0 {
			t.MaxAttempts = defaults.MaxAttempts
		}
		if t.Timeout <= 0 {
			t.Timeout = s.Lease
		}
		if t.BackoffMin <= 0 {
			t.BackoffMin = defaults.BackoffMin
		}
		if t.BackoffMax <= 0 {
			t.BackoffMax = defaults.BackoffMax
		}
		s.targets[t.Name] = t
	}
	return nil
}

// destinations are the source's Targets, or, when it has none, its single
// destination (Destination or Handler, named DefaultDestination).
func (s *Source) destinations() []*Target {
	if len(s.Targets) > 0 {
		return s.Targets
	}
	return []*Target{{Name: DefaultDestination, HTTP: s.Destination, Handler: s.Handler, Timeout: s.Timeout,
		MaxAttempts: s.MaxAttempts, BackoffMin: s.BackoffMin, BackoffMax: s.BackoffMax}}
}

// target returns the source's destination named name, or nil.
func (s *Source) target(name string) *Target { return s.targets[name] }
