package pacing

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"
)

func TestNext(t *testing.T) {
	const target, maxD = 100 * time.Millisecond, 20 * time.Millisecond
	for _, c := range []struct {
		name     string
		cur, lag time.Duration
		want     time.Duration
	}{
		{"no lag, no delay", 0, 0, 0},
		{"twice the target: a tenth of the most", 0, 200 * time.Millisecond, 2 * time.Millisecond},
		{"far above: still a tenth", 4 * time.Millisecond, 10 * time.Second, 6 * time.Millisecond},
		{"1.5 × the target: a twentieth", 0, 150 * time.Millisecond, time.Millisecond},
		{"at the target: unchanged", 7 * time.Millisecond, target, 7 * time.Millisecond},
		{"half the target: down a twentieth", 7 * time.Millisecond, 50 * time.Millisecond, 6 * time.Millisecond},
		{"no lag: down a tenth", 7 * time.Millisecond, 0, 5 * time.Millisecond},
		{"never below 0", time.Millisecond, 0, 0},
		{"never above the most", 19 * time.Millisecond, time.Second, maxD},
	} {
		if got := next(c.cur, c.lag, target, maxD); got != c.want {
			t.Errorf("%s: next(%s, lag %s) = %s, want %s", c.name, c.cur, c.lag, got, c.want)
		}
	}
}

// script is a Measure that answers lags from a channel, one per measure.
type script chan measure

type measure struct {
	lag time.Duration
	err error
}

func (s script) measure(ctx context.Context) (time.Duration, error) {
	select {
	case m := <-s:
		return m.lag, m.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// TestRun drives a Pacer through measures: the delay climbs to MaxDelay
// while the lag stays above Lag, a failed measure counts as no lag, and
// Run leaves the delay at 0 when it returns.
func TestRun(t *testing.T) {
	s := script(make(chan measure))
	observed := make(chan time.Duration, 100)
	p := New(Config{Measure: s.measure, Lag: 100 * time.Millisecond, MaxDelay: 10 * time.Millisecond, Every: time.Millisecond,
		Observe: func(d time.Duration) { observed <- d }, Logger: slog.New(slog.DiscardHandler)})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.Run(ctx) }()

	// Each send is taken by one measure; the measure's delay is observed
	// before the next send is taken.
	for i := 1; i <= 12; i++ {
		s <- measure{lag: time.Second}
		want := min(time.Duration(i)*time.Millisecond, 10*time.Millisecond)
		if i <= 10 {
			if got := <-observed; got != want {
				t.Fatalf("measure %d above the lag: delay %s, want %s", i, got, want)
			}
		}
	}
	s <- measure{err: errors.New("database down")} // counts as no lag: down a tenth
	if got := <-observed; got != 9*time.Millisecond {
		t.Fatalf("after a failed measure: delay %s, want 9ms", got)
	}
	if got := p.Delay(); got != 9*time.Millisecond {
		t.Fatalf("Delay() = %s, want 9ms", got)
	}
	cancel()
	<-done
	if got := p.Delay(); got != 0 {
		t.Fatalf("after Run: Delay() = %s, want 0", got)
	}
}
