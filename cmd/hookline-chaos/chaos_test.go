package main

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/internal/pgcluster"
)

// TestMain lets the test binary double as a hookline instance: the harness
// re-executes its own binary (here: the test binary) for "self" instances.
func TestMain(m *testing.M) {
	if os.Getenv(instanceEnv) != "" {
		os.Exit(instanceMain(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// TestChaosShort runs a shortened scenario: 300 events delivered twice over
// the three sources (http, ledger, fanout), 30 ordering keys of 4 events
// each on the ordered source (also delivered twice), 60 events in the fake
// events API of the reconciled source, 3 instances (hookline serve --role
// ingest, and two harness instances with the Go handlers), one instance
// kill, one Postgres restart with 5 s down, destinations that fail and
// time out at random. Every invariant of the full run is checked.
func TestChaosShort(t *testing.T) {
	if _, err := pgcluster.FindBinDir(); err != nil {
		t.Skipf("needs local PostgreSQL binaries: %v", err)
	}
	o := DefaultOptions()
	o.Events = 300
	o.Deliveries = 2
	o.Senders = 8
	o.OrderedKeys, o.OrderedPerKey = 30, 4
	o.ReconEvents = 60
	o.Rate = 60 // spread the sending (~920 steps) over ~15 s, so the faults land in it
	o.Kills = 1
	o.PGRestarts = 1
	o.PGDown = 5 * time.Second
	o.DoomedShare = 0.03
	o.Workers = 8
	o.PGFast = true
	o.Settle = 90 * time.Second
	o.Timeout = 3 * time.Minute
	if testing.Verbose() {
		o.Log = os.Stderr
	}
	rep, err := Run(context.Background(), o)
	require.NoError(t, err)
	var out bytes.Buffer
	rep.Print(&out)
	t.Log("\n" + out.String())
	require.Empty(t, rep.Violations)
	require.Zero(t, rep.Lost)
	require.Zero(t, rep.DoubleEffects)
	require.Zero(t, rep.Concurrent)
	require.Equal(t, rep.Events, rep.Completed+rep.Dead)
	require.Positive(t, rep.Dead, "doomed events end in the dead set")
	require.Positive(t, rep.CompletedLedger)
	require.Positive(t, rep.Outage503s, "ingest answered 503 during the outage")

	// The fan-out source: every destination got events, each filter kept
	// some out, and nothing was lost, doubled, concurrent or misrouted.
	f := rep.Fanout
	require.Positive(t, rep.CompletedFanout)
	for _, d := range fanoutDests {
		require.Positive(t, f.Completed[d], "fan-out destination %s completed events", d)
	}
	require.Equal(t, rep.EventsFanout, f.Routed[destSink], "sink takes every fan-out event")
	require.Positive(t, f.FilteredOut[destBooks], "books's types filter keeps some events out")
	require.Positive(t, f.FilteredOut[destFlaky], "flaky's where filter keeps some events out")
	require.Equal(t, f.Routed[destBooks], f.LedgerRows, "one books ledger row per routed event")
	require.Equal(t, f.Routed[destFlaky], f.Completed[destFlaky]+f.Dead[destFlaky])
	require.Zero(t, f.Lost+f.DoubleEffects+f.MissingEffects+f.Concurrent+f.Misrouted)

	// The ordered source: everything delivered, in order, one at a time
	// per key, stale events marked.
	or := rep.Ordered
	require.Equal(t, or.Events, or.Stored)
	require.Equal(t, or.Stored, or.Completed+or.Dead)
	require.Positive(t, or.StaleEvents, "some ordered events are older than one before them")
	require.Equal(t, or.Stored, or.LedgerRows, "one books effect per ordered event")
	require.Zero(t, or.Lost+or.Overlaps+or.OutOfOrder+or.FirstOutOfOrder+or.WrongHeaders+or.PlaceMismatch+
		or.LedgerOutOfOrder+or.HandlerOverlaps+or.DoubleEffects+or.MissingEffects)

	// The reconciled source: every listed event stored and processed once,
	// the API-only ones by reconciliation; runs recorded.
	rr := rep.Recon
	require.Equal(t, rr.Listed, rr.Stored)
	require.GreaterOrEqual(t, rr.ByReconcile, rr.APIOnly)
	require.Positive(t, rr.RunsFinished)
	require.Equal(t, rr.Stored, rr.LedgerRows, "one books effect per reconciled-source event")
	require.Zero(t, rr.Missing+rr.OldStored+rr.WrongOrigin+rr.WrongDelivery+rr.DoubleForwards+rr.DoubleEffects+rr.MissingEffects)
}

func TestCLIRejectsBadFlags(t *testing.T) {
	var out, errb bytes.Buffer
	require.Equal(t, 2, cli([]string{"-dest-timeout", "5s", "-lease", "3s"}, &out, &errb))
	require.Contains(t, errb.String(), "-dest-timeout")
	errb.Reset()
	require.Equal(t, 2, cli([]string{"-instances", "serve:all"}, &out, &errb))
	require.Contains(t, errb.String(), "cannot run the Go handlers")
	errb.Reset()
	o := DefaultOptions() // without Go handlers, hookline serve may run workers
	o.Instances, o.LedgerShare, o.FanoutShare, o.OrderedKeys, o.ReconEvents = []string{"serve:all"}, 0, 0, 0, 0
	require.NoError(t, o.validate())
	require.Equal(t, 2, cli([]string{"-ledger-share", "0.6", "-fanout-share", "0.6"}, &out, &errb))
	require.Contains(t, errb.String(), "-fanout-share")
}
