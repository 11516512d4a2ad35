package jobs

import (
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// Queue is the River queue hookline's event jobs run on.
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

// EventArgs is the River job for one event: process (source, event_id).
// Only Source and EventID take part in uniqueness.
type EventArgs struct {
	Source  string `json:"source" river:"unique"`
	EventID string `json:"event_id" river:"unique"`
	// OverrideBefore is set by an operator retry: a completed claim whose
	// completion is older than this may be taken over, once.
	OverrideBefore time.Time `json:"override_before,omitzero"`
}

// Kind implements river.JobArgs.
func (EventArgs) Kind() string { return "hookline.event" }

// InsertOpts implements river.JobArgsWithInsertOpts: the hookline queue and
// until-executed uniqueness on (source, event_id).
func (EventArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{
		Queue:      Queue,
		UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: UniqueStates},
	}
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
// source's destination.max_attempts, is enforced by the worker against
// hookline's own count (see RiverMaxAttempts); River gets a cap high enough
// never to end a job that still has budget.
func InsertOptsFor(maxAttempts int) *river.InsertOpts {
	o := EventArgs{}.InsertOpts()
	o.MaxAttempts = riverAttemptCap(maxAttempts)
	return &o
}

// riverAttemptCap is River's cap on the attempts of an event job whose
// destination allows maxAttempts (see RiverMaxAttempts).
func riverAttemptCap(maxAttempts int) int { return max(RiverMaxAttempts, maxAttempts*4) }
