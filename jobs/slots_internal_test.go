package jobs

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/internal/metrics"
)

// TestForwardSlotWaitLeavesTheForwardItsTimeout: a forward waits for a slot
// only while its job's deadline still leaves it its whole timeout; past
// that it does not start (errNoSlot), and a stop ends the wait with the
// stop's cause.
func TestForwardSlotWaitLeavesTheForwardItsTimeout(t *testing.T) {
	t.Parallel()
	dest := &Target{Name: "d", HTTP: &Destination{URL: "http://127.0.0.1:1", Timeout: time.Second}}
	reg := prometheus.NewRegistry()
	slots := newAttemptSlots([]*Source{{Name: "s", Targets: []*Target{dest}}}, 1, metrics.For(reg).SlotWait)
	posted := 0
	post := func() (int, error) { posted++; return 200, nil }

	// A free slot: the forward runs even with little time left.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	status, err := slots.forward(ctx, dest, post)
	cancel()
	require.NoError(t, err)
	require.Equal(t, 200, status)

	// The only slot held: a job with 1.1 s left may wait 0.1 s for it.
	slots[dest].busy <- struct{}{}
	ctx, cancel = context.WithTimeout(context.Background(), 1100*time.Millisecond)
	_, err = slots.forward(ctx, dest, post)
	require.ErrorIs(t, err, errNoSlot)
	require.NoError(t, ctx.Err(), "gave up before the job's deadline")
	cancel()

	// A slot freed during the wait is taken.
	ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	time.AfterFunc(20*time.Millisecond, func() { <-slots[dest].busy })
	_, err = slots.forward(ctx, dest, post)
	require.NoError(t, err)
	cancel()

	// A stop ends the wait with its cause.
	slots[dest].busy <- struct{}{}
	stop := errors.New("stopping")
	ctx, cancelCause := context.WithCancelCause(context.Background())
	time.AfterFunc(20*time.Millisecond, func() { cancelCause(stop) })
	_, err = slots.forward(ctx, dest, post)
	require.ErrorIs(t, err, stop)
	<-slots[dest].busy

	require.Equal(t, 2, posted)

	// Each forward's wait was observed for its source and destination:
	// none, the 0.1 s it gave up after, and the two of ~20 ms.
	mfs, err := reg.Gather()
	require.NoError(t, err)
	found := false
	for _, mf := range mfs {
		if mf.GetName() == "hookline_forward_slot_wait_seconds" {
			m := mf.GetMetric()[0]
			require.Equal(t, "destination=d source=s", m.GetLabel()[0].GetName()+"="+m.GetLabel()[0].GetValue()+" "+m.GetLabel()[1].GetName()+"="+m.GetLabel()[1].GetValue())
			h := m.GetHistogram()
			require.EqualValues(t, 4, h.GetSampleCount())
			require.GreaterOrEqual(t, h.GetSampleSum(), 0.14)
			require.EqualValues(t, 1, h.GetBucket()[0].GetCumulativeCount(), "only the first forward found its slot free")
			found = true
		}
	}
	require.True(t, found, "no hookline_forward_slot_wait_seconds")
}

// TestPausedSinceTheGateIsNotCalled: an attempt whose destination was
// paused after its gate let it through (before its claim, maybe before a
// wait for a forward slot) sends nothing.
func TestPausedSinceTheGateIsNotCalled(t *testing.T) {
	t.Parallel()
	dest := &Target{Name: "d", HTTP: &Destination{URL: "http://127.0.0.1:1"}}
	w := &EventWorker{gate: &gate{paused: map[[2]string]bool{{"s", "d"}: true}, refreshed: time.Now()}}
	_, err := w.postIfOpen(context.Background(), &run{src: &Source{Name: "s"}, t: dest})
	require.ErrorIs(t, err, errPausedMeanwhile)
}
