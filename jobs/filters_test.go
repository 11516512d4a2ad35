package jobs_test

import (
	"context"
	"encoding/base64"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookline/hookline/jobs"
)

// A dead-set filter whose text no stored item can hold (a NUL byte,
// invalid UTF-8) is refused naming the field, as the events search's is,
// before any statement: Postgres could not compare it.
func TestDeadFilterRefusesTextNoItemHas(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"\x00", "a\x00b", "\xff", "evt_\xc3"} {
		for want, f := range map[string]jobs.DeadFilter{
			"source: not valid UTF-8 text":      {Source: bad},
			"destination: not valid UTF-8 text": {Destination: bad},
			"event_type: not valid UTF-8 text":  {EventType: bad},
		} {
			require.EqualError(t, f.Validate(), want, "%q", bad)
		}
		for want, f := range map[string]jobs.EventFilter{
			"source: not valid UTF-8 text":    {Source: bad},
			"type: not valid UTF-8 text":      {Type: bad},
			"id_prefix: not valid UTF-8 text": {IDPrefix: bad},
		} {
			require.EqualError(t, f.Validate(), want, "%q", bad)
		}
	}
	require.NoError(t, jobs.DeadFilter{Source: "stripé", Destination: "default", EventType: "charge.succeeded"}.Validate())

	// The dead set's reads and bulk actions refuse it too, with nothing done.
	ctx := context.Background()
	b := dsSetup(t, 0)
	b.deadEvents(t, "s", "evt_", 3)
	f := jobs.DeadFilter{Source: "s", EventType: "\x00"}
	_, _, err := b.dead.List(ctx, f, nil, 10)
	require.EqualError(t, err, "event_type: not valid UTF-8 text")
	_, err = b.dead.Count(ctx, f)
	require.EqualError(t, err, "event_type: not valid UTF-8 text")
	_, err = b.dead.RetryAll(ctx, f)
	require.ErrorContains(t, err, "event_type: not valid UTF-8 text")
	_, err = b.dead.DeleteAll(ctx, jobs.DeadFilter{Destination: "\xff"})
	require.ErrorContains(t, err, "destination: not valid UTF-8 text")
	n, err := b.dead.Count(ctx, jobs.DeadFilter{Source: "s"})
	require.NoError(t, err)
	require.Equal(t, 3, n, "nothing was touched")
}

// An events cursor holding a source or id that no event can have is
// malformed (ErrBadCursor), like any cursor no search returned; a cursor a
// search returned still parses back to its key.
func TestEventCursorRefusesTextNoEventHas(t *testing.T) {
	t.Parallel()
	cursor := func(raw string) string { return base64.RawURLEncoding.EncodeToString([]byte(raw)) }
	for _, raw := range []string{
		`["e1",1796226727644590,"s","\u0000"]`,
		`["e1",1796226727644590,"\u0000","evt_1"]`,
		`["e1",1796226727644590,"s","evt\u0000_1"]`,
		`["e1",1796226727644590,"s\u0000",""]`,
	} {
		_, err := jobs.ParseEventCursor(cursor(raw))
		require.ErrorIs(t, err, jobs.ErrBadCursor, raw)
	}
	k := jobs.EventKey{ReceivedAt: time.UnixMicro(1796226727644590), Source: "s", EventID: "évt/1 %"}
	got, err := jobs.ParseEventCursor(k.Cursor())
	require.NoError(t, err)
	require.Equal(t, k.Source, got.Source)
	require.Equal(t, k.EventID, got.EventID)
	require.True(t, k.ReceivedAt.Equal(got.ReceivedAt))
}
