// Package pacing slows ingest's answers while the same process's workers
// fall behind: admission control for `serve --role all`, where ingest and
// the workers share the cores.
//
// Senders that wait for each answer before sending again (most providers
// hold a few connections per endpoint, and so does a load test) then send
// at the rate the workers process, and the queue stops growing. A sender
// that does not wait is only answered later: nothing is refused, and a
// delivery's wait is at most MaxDelay.
//
// The Pacer measures the backlog's lag every Every and moves the delay a
// delivery waits before it is read: up while the lag is above Lag, down
// while it is below, by at most a tenth of MaxDelay per measure (an
// integral controller, which settles where ingest's rate meets the
// workers'). A failed measure counts as no lag, so a database outage never
// holds deliveries.
package pacing

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/hookline/hookline/internal/defaults"
)

// Defaults of Config fields left zero.
const (
	DefaultLag      = defaults.PaceLag
	DefaultMaxDelay = defaults.PaceMaxDelay
	DefaultEvery    = 200 * time.Millisecond
)

// Config configures a Pacer.
type Config struct {
	// Measure returns the workers' lag: how long the oldest event ready to
	// run has waited.
	Measure func(ctx context.Context) (time.Duration, error)
	// Lag is the lag above which deliveries are slowed (default 250ms).
	Lag time.Duration
	// MaxDelay is the most a delivery waits (default 20ms).
	MaxDelay time.Duration
	// Every is how often the lag is measured (default 200ms).
	Every time.Duration
	// Observe, when set, is told each new delay.
	Observe func(time.Duration)
	Logger  *slog.Logger // nil: slog.Default()
}

// Pacer holds the delay deliveries wait before they are read.
type Pacer struct {
	cfg   Config
	delay atomic.Int64 // nanoseconds
}

// New returns a Pacer; Run starts its measures.
func New(cfg Config) *Pacer {
	if cfg.Lag <= 0 {
		cfg.Lag = DefaultLag
	}
	if cfg.MaxDelay <= 0 {
		cfg.MaxDelay = DefaultMaxDelay
	}
	if cfg.Every <= 0 {
		cfg.Every = DefaultEvery
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Pacer{cfg: cfg}
}

// Delay is how long a delivery arriving now waits before it is read.
func (p *Pacer) Delay() time.Duration { return time.Duration(p.delay.Load()) }

// Run measures the lag and moves the delay until ctx is done; it leaves
// the delay at 0.
func (p *Pacer) Run(ctx context.Context) {
	t := time.NewTicker(p.cfg.Every)
	defer t.Stop()
	defer p.set(0, 0)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		mctx, cancel := context.WithTimeout(ctx, p.cfg.Every)
		lag, err := p.cfg.Measure(mctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			p.cfg.Logger.Debug("pacing: could not measure the workers' lag; counting it as none", "error", err.Error())
			lag = 0
		}
		p.set(next(p.Delay(), lag, p.cfg.Lag, p.cfg.MaxDelay), lag)
	}
}

// set stores delay, logging when pacing starts and ends.
func (p *Pacer) set(delay, lag time.Duration) {
	was := time.Duration(p.delay.Swap(int64(delay)))
	switch {
	case was == 0 && delay > 0:
		p.cfg.Logger.Info("the workers are behind: ingest answers are slowed so that senders keep to their pace",
			"lag", lag.Round(time.Millisecond).String(), "pace_lag", p.cfg.Lag.String(), "max_delay", p.cfg.MaxDelay.String())
	case was > 0 && delay == 0:
		p.cfg.Logger.Info("the workers have caught up: ingest answers are no longer slowed", "lag", lag.Round(time.Millisecond).String())
	}
	if p.cfg.Observe != nil && delay != was {
		p.cfg.Observe(delay)
	}
}

// next is the delay after a measure of lag, from cur: moved by the lag's
// distance from target, in units of target and at most one either way,
// times a tenth of maxDelay; kept within [0, maxDelay].
func next(cur, lag, target, maxDelay time.Duration) time.Duration {
	e := float64(lag-target) / float64(target)
	e = min(max(e, -1), 1)
	d := cur + time.Duration(e*float64(maxDelay)/10)
	return min(max(d, 0), maxDelay)
}
