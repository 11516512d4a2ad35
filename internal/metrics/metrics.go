// Package metrics defines hookline's Prometheus metrics in one place (the
// list is in docs/operations.md). Each App registers them on a registry of
// its own, so tests and several instances in one process never collide.
//
// Internal: no stability promise.
package metrics

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Outcomes of hookline_webhooks_received_total.
const (
	Accepted         = "accepted"
	Duplicate        = "duplicate"
	InvalidSignature = "invalid_signature"
	BadRequest       = "bad_request"
	TooLarge         = "too_large"
	Unavailable      = "unavailable"
)

// Metrics holds hookline's own collectors.
type Metrics struct {
	Received      *prometheus.CounterVec   // source, outcome
	Idempotency   *prometheus.CounterVec   // source, event: claimed|completed|duplicate
	Deliveries    *prometheus.CounterVec   // source, destination, result: success|failure|dead
	IngestSeconds *prometheus.HistogramVec // source
	BatchSize     prometheus.Histogram
	WorkerBatch   *prometheus.HistogramVec // statement: claim|complete
	RedeliveryGap *prometheus.HistogramVec // source: time between first and repeated delivery
	ClaimHold     *prometheus.HistogramVec // source: how long a claim was held
	DestSeconds   *prometheus.HistogramVec // source
	SlotWait      *prometheus.HistogramVec // source, destination: a forward's wait for a workers slot
	Reconciled    *prometheus.CounterVec   // source
	PaceDelay     prometheus.Gauge         // how long a delivery now waits before it is read (pacing)
}

// NewRegistry returns a registry with the Go runtime and process
// collectors, for For and for serving /metrics.
func NewRegistry() *prometheus.Registry {
	r := prometheus.NewRegistry()
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return r
}

// For returns hookline's collectors registered on reg (nil: a fresh
// registry nobody serves). ingest and jobs each call it with the same
// registerer and share one set: a collector already registered there is
// reused.
func For(reg prometheus.Registerer) *Metrics {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	return &Metrics{
		Received: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookline_webhooks_received_total",
			Help: "Webhook deliveries received, by source and outcome (batch items count one each for accepted/duplicate).",
		}, []string{"source", "outcome"})),
		Idempotency: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookline_idempotency_events_total",
			Help: "Idempotency events: claimed and completed by workers, duplicate once per duplicate delivery wherever caught.",
		}, []string{"source", "event"})),
		Deliveries: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookline_deliveries_total",
			Help: "Destination attempts by destination and result: success, failure (will retry), dead (attempts ran out).",
		}, []string{"source", "destination", "result"})),
		IngestSeconds: register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hookline_ingest_seconds",
			Help:    "Time from request start to answer on the ingest route.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"source"})),
		BatchSize: register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "hookline_ingest_batch_size",
			Help:    "Deliveries committed per ingest transaction.",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256},
		})),
		WorkerBatch: register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hookline_worker_batch_size",
			Help:    "Jobs served per worker statement (group commit): claim or complete.",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256},
		}, []string{"statement"})),
		RedeliveryGap: register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hookline_redelivery_gap_seconds",
			Help:    "Time between an event's first delivery and a repeated delivery of it.",
			Buckets: prometheus.ExponentialBuckets(0.01, 4, 12),
		}, []string{"source"})),
		ClaimHold: register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hookline_claim_hold_seconds",
			Help:    "How long a worker held an event's processing claim.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 12),
		}, []string{"source"})),
		DestSeconds: register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hookline_destination_seconds",
			Help:    "Destination request duration.",
			Buckets: prometheus.DefBuckets,
		}, []string{"source"})),
		SlotWait: register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hookline_forward_slot_wait_seconds",
			Help:    "How long a forward waited for one of its destination's workers slots in this process before its request (0: one was free).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"source", "destination"})),
		Reconciled: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookline_reconciled_total",
			Help: "Events a reconciliation run found in the provider's events API, never accepted by hookline, and stored.",
		}, []string{"source"})),
		PaceDelay: register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hookline_ingest_pace_delay_seconds",
			Help: "How long a delivery arriving now waits before it is read, while this process's workers are behind (ingest.pace, --role all); 0: not slowed.",
		})),
	}
}

// register registers c on reg, or returns the equal collector registered
// there before.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		panic(fmt.Sprintf("metrics: %v", err))
	}
	return c
}
