package jobs

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// Queue is the River queue of event jobs written before destinations had
// queues of their own (QueueFor); workers keep draining it.
const Queue = "hookline"

// UniqueStates are the job states in which a second job for the same event is
// refused: "until executed". completed, cancelled and discarded are left out,
// so a finished event can be enqueued again (after its dedup window, or as a
// provider retry of a dead event).
var UniqueStates = []rivertype.JobState{
	rivertype.JobStateAvailable,
	rivertype.JobStatePending,
	rivertype.JobStateRetryable,
	rivertype.JobStateRunning,
	rivertype.JobStateScheduled,
}

// EventArgs is the River job for one event at one destination: process
// (source, event_id) for destination. Only Source, EventID and Destination
// take part in uniqueness.
type EventArgs struct {
	Source  string `json:"source" river:"unique"`
	EventID string `json:"event_id" river:"unique"`
	// Destination is the destination's name; empty in jobs written before
	// destinations had names, which mean DefaultDestination.
	Destination string `json:"destination,omitempty" river:"unique"`
	// OverrideBefore is set by an operator retry: a completed claim whose
	// completion is older than this may be taken over, once.
	OverrideBefore time.Time `json:"override_before,omitzero"`
}

// DefaultDestination is the name of a source's single destination.
const DefaultDestination = "default"

// Dest is the job's destination name.
func (a EventArgs) Dest() string {
	if a.Destination == "" {
		return DefaultDestination
	}
	return a.Destination
}

// Kind implements river.JobArgs.
func (EventArgs) Kind() string { return "hookline.event" }

// InsertOpts implements river.JobArgsWithInsertOpts: the destination's queue
// (QueueFor) and until-executed uniqueness on (source, event_id,
// destination).
func (a EventArgs) InsertOpts() river.InsertOpts {
	q := Queue
	if a.Source != "" {
		q = QueueFor(a.Source, a.Dest())
	}
	return river.InsertOpts{
		Queue:      q,
		UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: UniqueStates},
	}
}

// QueueFor is the River queue of a destination's jobs: one queue per
// destination, so that a slow or paused destination holds only its own
// workers. The name is River-valid (at most 64 characters of a-z and 0-9
// in groups joined by - or _), readable, and unique per (source,
// destination) through a hash suffix.
func QueueFor(source, destination string) string {
	sum := sha256.Sum256([]byte(source + "\x00" + destination))
	suffix := hex.EncodeToString(sum[:4])
	room := (64 - len("hookline---") - len(suffix)) / 2
	return "hookline-" + queuePart(source, room) + "-" + queuePart(destination, room) + "-" + suffix
}

// queuePart is name made River-valid (lower-case letters and digits; any
// run of other characters becomes one _, none at either end) and cut to at
// most n characters.
func queuePart(name string, n int) string {
	var b strings.Builder
	sep := false
	for _, r := range strings.ToLower(name) {
		if ('a' <= r && r <= 'z') || ('0' <= r && r <= '9') {
			if sep && b.Len() > 0 {
				b.WriteByte('_')
			}
			sep = false
			b.WriteRune(r)
			continue
		}
		sep = true
	}
	out := b.String()
	if len(out) > n {
		out = strings.TrimRight(out[:n], "_")
	}
	if out == "" {
		out = "x"
	}
	return out
}

// RiverMaxAttempts is River's own cap on an event job's attempts. It is not
// the destination's max_attempts: River counts every fetch of the job, also
// those that never reached the destination (a worker killed before its
// claim, a database error, a snooze after a crash). hookline counts
// destination attempts itself (hookline_events.job_attempts) and moves the
// event to the dead set when the source's max_attempts is used up; River's
// cap only stops a job that could never make progress, and the clean-up
// sweep re-enqueues an event whose job ended without an outcome.
const RiverMaxAttempts = 1000

// InsertOptsFor returns the insert options of an event job. maxAttempts, the
// destination's max_attempts, is enforced by the worker against hookline's
// own count (see RiverMaxAttempts); River gets a cap high enough never to
// end a job that still has budget. The queue is left to the job's args
// (EventArgs.InsertOpts: the destination's queue).
func InsertOptsFor(maxAttempts int) *river.InsertOpts {
	return &river.InsertOpts{
		MaxAttempts: riverAttemptCap(maxAttempts),
		UniqueOpts:  river.UniqueOpts{ByArgs: true, ByState: UniqueStates},
	}
}

// riverAttemptCap is River's cap on the attempts of an event job whose
// destination allows maxAttempts (see RiverMaxAttempts).
func riverAttemptCap(maxAttempts int) int { return max(RiverMaxAttempts, maxAttempts*4) }
