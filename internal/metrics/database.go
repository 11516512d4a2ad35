package metrics

import (
	"context"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// DatabaseStats is what the database metrics are read from (jobs.Stats).
type DatabaseStats interface {
	// DeadItems counts the dead set's items by (source, reason).
	DeadItems(ctx context.Context) (map[[2]string]int64, error)
	// Queue is the event queue's depth by state and the age in seconds of
	// its oldest available job.
	Queue(ctx context.Context) (byState map[string]int64, oldestAvailable float64, err error)
	// DestinationStates is every destination's state and load.
	DestinationStates(ctx context.Context) ([]DestinationState, error)
}

// DestinationState is one destination's state (one of DestinationStates)
// and load.
type DestinationState struct {
	Source, Destination, State string
	Queued, InFlight           int64
}

// DestinationStates are the values of hookline_destination_state's state
// label.
var DestinationStates = []string{"active", "paused", "open", "half_open"}

// scrapeTimeout bounds the database queries of one scrape, so a slow
// database cannot hang it.
const scrapeTimeout = 3 * time.Second

// NewDatabaseCollector returns the collector of the metrics read from the
// database, cached (NewCached: one set of queries at a time, reused for ttl;
// DatabaseTTL in production):
//
//   - hookline_dead_items{source,reason}: items in the dead set now, for
//     every pair DeadItems answers (the configured sources with both
//     reasons, 0 included). A pair seen on an earlier scrape is reported as
//     0 once its items are gone, so the gauge drops to zero instead of going
//     stale.
//   - hookline_queue_jobs{state}: unfinished event jobs by state.
//   - hookline_queue_oldest_available_seconds: how long the oldest event job
//     ready to run has waited (0: none).
//   - hookline_destination_state{source,destination,state}: 1 for the
//     destination's state now, 0 for the others;
//     hookline_destination_queued{source,destination} and
//     hookline_destination_in_flight{source,destination}: events waiting
//     for it, attempts running.
//
// A query that fails leaves its series out of the scrape (an absent series,
// not a wrong zero) and is logged; hookline_database_up, always present, is
// 0 in that scrape (1 when every query answered), so that an alert on the
// absent series has a series to fire on instead.
func NewDatabaseCollector(db DatabaseStats, logger *slog.Logger, ttl time.Duration) prometheus.Collector {
	if logger == nil {
		logger = slog.Default()
	}
	return NewCached(ttl, &databaseCollector{db: db, log: logger, seen: map[[2]string]bool{},
		dead: prometheus.NewDesc("hookline_dead_items", "Items in the dead set now, by source and reason.", []string{"source", "reason"}, nil),
		jobs: prometheus.NewDesc("hookline_queue_jobs", "Event jobs in River's queue by state (unfinished states only).", []string{"state"}, nil),
		lag:  prometheus.NewDesc("hookline_queue_oldest_available_seconds", "Age of the oldest event job ready to run and not yet taken (0: none).", nil, nil),
		state: prometheus.NewDesc("hookline_destination_state", "A destination's state: 1 for the current one (active, paused, open, half_open).",
			[]string{"source", "destination", "state"}, nil),
		queued:   prometheus.NewDesc("hookline_destination_queued", "Events waiting for a destination.", []string{"source", "destination"}, nil),
		inFlight: prometheus.NewDesc("hookline_destination_in_flight", "Attempts running at a destination.", []string{"source", "destination"}, nil),
		up:       prometheus.NewDesc("hookline_database_up", "1 when this scrape's database queries (dead items, queue, destinations) answered; 0 when one failed and its series are absent.", nil, nil),
	})
}

type databaseCollector struct {
	db                      DatabaseStats
	log                     *slog.Logger
	dead, jobs, lag         *prometheus.Desc
	state, queued, inFlight *prometheus.Desc
	up                      *prometheus.Desc

	mu   sync.Mutex
	seen map[[2]string]bool
}

func (c *databaseCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.dead
	ch <- c.jobs
	ch <- c.lag
	ch <- c.state
	ch <- c.queued
	ch <- c.inFlight
	ch <- c.up
}

func (c *databaseCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	up := 1.0
	defer func() { ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, up) }()
	if counts, err := c.db.DeadItems(ctx); err != nil {
		up = 0
		c.log.Warn("hookline_dead_items: query failed; series omitted from this scrape", "error", err.Error())
	} else {
		c.mu.Lock()
		for k := range counts {
			c.seen[k] = true
		}
		for k := range c.seen {
			ch <- prometheus.MustNewConstMetric(c.dead, prometheus.GaugeValue, float64(counts[k]), k[0], k[1])
		}
		c.mu.Unlock()
	}
	if !c.collectDestinations(ctx, ch) {
		up = 0
	}
	byState, lag, err := c.db.Queue(ctx)
	if err != nil {
		up = 0
		c.log.Warn("hookline_queue_jobs: query failed; series omitted from this scrape", "error", err.Error())
		return
	}
	states := make([]string, 0, len(byState))
	for s := range byState {
		states = append(states, s)
	}
	sort.Strings(states)
	for _, s := range states {
		ch <- prometheus.MustNewConstMetric(c.jobs, prometheus.GaugeValue, float64(byState[s]), s)
	}
	ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, lag)
}

// collectDestinations sends the destination series; false when their
// query failed.
func (c *databaseCollector) collectDestinations(ctx context.Context, ch chan<- prometheus.Metric) bool {
	dests, err := c.db.DestinationStates(ctx)
	if err != nil {
		c.log.Warn("hookline_destination_state: query failed; series omitted from this scrape", "error", err.Error())
		return false
	}
	for _, d := range dests {
		for _, s := range DestinationStates {
			v := 0.0
			if s == d.State {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(c.state, prometheus.GaugeValue, v, d.Source, d.Destination, s)
		}
		ch <- prometheus.MustNewConstMetric(c.queued, prometheus.GaugeValue, float64(d.Queued), d.Source, d.Destination)
		ch <- prometheus.MustNewConstMetric(c.inFlight, prometheus.GaugeValue, float64(d.InFlight), d.Source, d.Destination)
	}
	return true
}
