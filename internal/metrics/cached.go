package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// DatabaseTTL is how long the metrics read from the database are reused
// between scrapes.
const DatabaseTTL = 5 * time.Second

// NewCached wraps collectors whose Collect runs database queries, so that a
// scrape flood cannot starve the pool: at most one Collect of the whole set
// runs at a time (other scrapes wait for it and take its result), and its
// metrics are reused for ttl.
func NewCached(ttl time.Duration, cs ...prometheus.Collector) prometheus.Collector {
	return &cached{ttl: ttl, cs: cs}
}

type cached struct {
	ttl time.Duration
	cs  []prometheus.Collector

	mu   sync.Mutex // held while collecting: one set of queries at a time
	at   time.Time
	last []prometheus.Metric
}

func (c *cached) Describe(ch chan<- *prometheus.Desc) {
	for _, x := range c.cs {
		x.Describe(ch)
	}
}

func (c *cached) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	if c.at.IsZero() || time.Since(c.at) >= c.ttl {
		c.last = c.collect()
		c.at = time.Now()
	}
	last := c.last
	c.mu.Unlock()
	for _, m := range last {
		ch <- m
	}
}

func (c *cached) collect() []prometheus.Metric {
	ch := make(chan prometheus.Metric, 64)
	var out []prometheus.Metric
	done := make(chan struct{})
	go func() {
		for m := range ch {
			out = append(out, m)
		}
		close(done)
	}()
	for _, x := range c.cs {
		x.Collect(ch)
	}
	close(ch)
	<-done
	return out
}
