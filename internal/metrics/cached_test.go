package metrics

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

// countingCollector stands for a collector that queries the database: it
// counts its runs and how many overlap.
type countingCollector struct {
	desc           *prometheus.Desc
	runs, inFlight atomic.Int32
	maxInFlight    atomic.Int32
	block          chan struct{}
}

func (c *countingCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *countingCollector) Collect(ch chan<- prometheus.Metric) {
	n := c.inFlight.Add(1)
	defer c.inFlight.Add(-1)
	for {
		m := c.maxInFlight.Load()
		if n <= m || c.maxInFlight.CompareAndSwap(m, n) {
			break
		}
	}
	runs := c.runs.Add(1)
	<-c.block
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(runs))
}

// A scrape flood runs the wrapped collectors once at a time, and reuses
// their result within the TTL.
func TestCachedRunsOneSetAtATime(t *testing.T) {
	t.Parallel()
	cc := &countingCollector{desc: prometheus.NewDesc("x", "x", nil, nil), block: make(chan struct{})}
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCached(time.Hour, cc))
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() { _, _ = reg.Gather() })
	}
	require.Eventually(t, func() bool { return cc.runs.Load() == 1 }, 5*time.Second, time.Millisecond)
	close(cc.block)
	wg.Wait()
	require.EqualValues(t, 1, cc.runs.Load(), "50 concurrent scrapes, one run")
	require.EqualValues(t, 1, cc.maxInFlight.Load())
	require.Equal(t, 1, testutil.CollectAndCount(NewCached(time.Hour, cc)))
}

// After the TTL the next scrape runs the queries again.
func TestCachedExpires(t *testing.T) {
	t.Parallel()
	cc := &countingCollector{desc: prometheus.NewDesc("x", "x", nil, nil), block: make(chan struct{})}
	close(cc.block)
	// A TTL far longer than two back-to-back scrapes take, even on a
	// loaded machine (10 ms was not: the second scrape ran the set again).
	c := NewCached(500*time.Millisecond, cc)
	testutil.CollectAndCount(c)
	testutil.CollectAndCount(c)
	require.EqualValues(t, 1, cc.runs.Load())
	time.Sleep(600 * time.Millisecond)
	testutil.CollectAndCount(c)
	require.EqualValues(t, 2, cc.runs.Load())
}
