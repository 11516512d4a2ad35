// Package metrics defines hookline's Prometheus metrics (CONTRACT.md §4) in
// one place, on a registry of their own so tests and several instances in one
// process never collide.
//
// Internal: no stability promise.
package metrics

import (
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

// Metrics holds every collector.
type Metrics struct {
	Registry *prometheus.Registry

	Received      *prometheus.CounterVec   // source, outcome
	Idempotency   *prometheus.CounterVec   // source, event: claimed|completed|duplicate
	Deliveries    *prometheus.CounterVec   // source, result: success|failure|dead
	IngestSeconds *prometheus.HistogramVec // source
	BatchSize     prometheus.Histogram
	RedeliveryGap *prometheus.HistogramVec // source: time between first and repeated delivery
	ClaimHold     *prometheus.HistogramVec // source: how long a claim was held
	DestSeconds   *prometheus.HistogramVec // source
}

// New creates the metrics on a fresh registry (with Go and process collectors).
func New() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		Received: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookline_webhooks_received_total",
			Help: "Webhook deliveries received, by source and outcome (batch items count one each for accepted/duplicate).",
		}, []string{"source", "outcome"}),
		Idempotency: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookline_idempotency_events_total",
			Help: "Idempotency events: claimed and completed by workers, duplicate once per duplicate delivery wherever caught.",
		}, []string{"source", "event"}),
		Deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookline_deliveries_total",
			Help: "Destination attempts by result: success, failure (will retry), dead (attempts ran out).",
		}, []string{"source", "result"}),
		IngestSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hookline_ingest_seconds",
			Help:    "Time from request start to answer on the ingest route.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"source"}),
		BatchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "hookline_ingest_batch_size",
			Help:    "Deliveries committed per ingest transaction.",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256},
		}),
		RedeliveryGap: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hookline_redelivery_gap_seconds",
			Help:    "Time between an event's first delivery and a repeated delivery of it.",
			Buckets: prometheus.ExponentialBuckets(0.01, 4, 12),
		}, []string{"source"}),
		ClaimHold: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hookline_claim_hold_seconds",
			Help:    "How long a worker held an event's processing claim.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 12),
		}, []string{"source"}),
		DestSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hookline_destination_seconds",
			Help:    "Destination request duration.",
			Buckets: prometheus.DefBuckets,
		}, []string{"source"}),
	}
	m.Registry.MustRegister(m.Received, m.Idempotency, m.Deliveries, m.IngestSeconds, m.BatchSize,
		m.RedeliveryGap, m.ClaimHold, m.DestSeconds,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}
