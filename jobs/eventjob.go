package jobs

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math"

	"github.com/riverqueue/river/rivershared/uniquestates"
)

// EventJob is an event's River job row as River's InsertManyTx writes it for
// EventArgs with InsertOptsFor, for a writer that inserts job rows in its own
// statement: the group committer (ingest) stores a batch's deliveries,
// events and jobs in one statement, one round trip.
//
// The row format is River's, pinned to the River version in go.mod by
// tests that insert the same jobs both ways and compare them
// (TestEventJobMatchesRiver here; ingest's TestBatchedJobsAreRiversJobs,
// every column, and the conflict rule); upgrading River re-runs them. The unique key is the
// part River would otherwise compute: sha256 of
// "&kind=<kind>&args=<the unique args as a sorted JSON object>", a value
// River keeps stable across versions because it is stored in existing rows.
type EventJob struct {
	Args        []byte // EventArgs as JSON, as River encodes them
	UniqueKey   []byte // river_job.unique_key
	MaxAttempts int16
}

// EventJobPriority is River's default priority, the one InsertOptsFor leaves.
const EventJobPriority = 1

// EventUniqueStates is UniqueStates as river_job.unique_states stores it.
var EventUniqueStates = uniquestates.UniqueStatesToBitmask(UniqueStates)

// NewEventJob returns the job row of (source, eventID) for a source whose
// destination allows maxAttempts attempts.
func NewEventJob(source, eventID string, maxAttempts int) (EventJob, error) {
	capAttempts := riverAttemptCap(maxAttempts)
	if capAttempts > math.MaxInt16 {
		return EventJob{}, fmt.Errorf("job attempt cap %d (max_attempts %d) does not fit river_job.max_attempts (smallint)", capAttempts, maxAttempts)
	}
	// Each string encoded once, as encoding/json encodes it (River encodes
	// args with json.Marshal); args and the unique key are built from them.
	src, _ := json.Marshal(source) //nolint:errchkjson // a string always encodes
	id, _ := json.Marshal(eventID) //nolint:errchkjson
	// args: json.Marshal(EventArgs{Source: source, EventID: eventID}).
	args := make([]byte, 0, 26+len(src)+len(id))
	args = append(args, `{"source":`...)
	args = append(args, src...)
	args = append(args, `,"event_id":`...)
	args = append(args, id...)
	args = append(args, '}')
	// River's unique args: the fields tagged river:"unique", sorted by JSON
	// name, each with its value exactly as encoded in args.
	k := make([]byte, 0, 64+len(id)+len(src))
	k = append(k, uniqueKeyPrefix...)
	k = append(k, id...)
	k = append(k, `,"source":`...)
	k = append(k, src...)
	k = append(k, '}')
	sum := sha256.Sum256(k)
	return EventJob{Args: args, UniqueKey: sum[:], MaxAttempts: int16(capAttempts)}, nil
}

var uniqueKeyPrefix = "&kind=" + EventArgs{}.Kind() + `&args={"event_id":`

// InsertNotifySQL tells River's workers listening in the current schema that
// jobs are available on the event queue, as River's insert does (River's
// insert topic, "<schema>.river_insert", with the queue as JSON payload).
// Without it a worker in another process still finds the jobs, at its next
// poll (FetchPollInterval). Postgres delivers it at COMMIT, and not at all
// if the transaction rolls back.
const InsertNotifySQL = `SELECT pg_notify(coalesce(current_schema() || '.', '') || 'river_insert', '{"queue": "` + Queue + `"}')`
