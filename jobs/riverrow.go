package jobs

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivershared/uniquestates"
	"github.com/riverqueue/river/rivertype"
)

// River's table format, as hookline reads and writes it directly.
//
// hookline goes through River's API where it can (InsertManyTx, InsertTx,
// JobRetryTx, JobCompleteTx). Where a statement of its own is cheaper — the
// group committer inserts a batch's jobs in the statement that stores the
// batch, the worker removes its job in the statement that completes the
// event — or where River has no API (queue depth, the sweep's anti-join),
// the SQL is built here and nowhere else: this file is the only one outside
// the migrations that names a River table, column or function.
// riverrow_test.go pins every piece to River's own behaviour for the River
// version in go.mod; upgrading River re-runs it.

// EventJob is an event's River job row as River's InsertManyTx writes it for
// EventArgs with InsertOptsFor.
type EventJob struct {
	Args        []byte // EventArgs as JSON, as River encodes them
	UniqueKey   []byte // River's unique key of the job
	MaxAttempts int16  // River's attempt cap (RiverMaxAttempts)
	Queue       string // the destination's queue (QueueFor)
}

// EventJobPriority is River's default priority, the one InsertOptsFor leaves.
const EventJobPriority = 1

// EventUniqueStates is UniqueStates as River stores them in a job row (a bitmask).
var EventUniqueStates = uniquestates.UniqueStatesToBitmask(UniqueStates)

// NewEventJob returns the job row of (source, eventID) at destination, whose
// max_attempts is maxAttempts. The unique key is the part River would
// otherwise compute: sha256 of "&kind=<kind>&args=<the unique args as a
// sorted JSON object>", a value River keeps stable across versions because
// existing rows hold it.
func NewEventJob(source, eventID, destination string, maxAttempts int) (EventJob, error) {
	capAttempts := riverAttemptCap(maxAttempts)
	if capAttempts > math.MaxInt16 {
		return EventJob{}, fmt.Errorf("job attempt cap %d (max_attempts %d) does not fit River's max_attempts column (smallint)", capAttempts, maxAttempts)
	}
	// Each string encoded once, as encoding/json encodes it (River encodes
	// args with json.Marshal); args and the unique key are built from them.
	src, _ := json.Marshal(source)       //nolint:errchkjson // a string always encodes
	id, _ := json.Marshal(eventID)       //nolint:errchkjson
	dest, _ := json.Marshal(destination) //nolint:errchkjson
	// args: json.Marshal(EventArgs{Source, EventID, Destination}).
	args := make([]byte, 0, 45+len(src)+len(id)+len(dest))
	args = append(args, `{"source":`...)
	args = append(args, src...)
	args = append(args, `,"event_id":`...)
	args = append(args, id...)
	args = append(args, `,"destination":`...)
	args = append(args, dest...)
	args = append(args, '}')
	// River's unique args: the fields tagged river:"unique", sorted by JSON
	// name, each with its value exactly as encoded in args.
	k := make([]byte, 0, 80+len(id)+len(src)+len(dest))
	k = append(k, uniqueKeyPrefix...)
	k = append(k, dest...)
	k = append(k, `,"event_id":`...)
	k = append(k, id...)
	k = append(k, `,"source":`...)
	k = append(k, src...)
	k = append(k, '}')
	sum := sha256.Sum256(k)
	return EventJob{Args: args, UniqueKey: sum[:], MaxAttempts: int16(capAttempts), Queue: QueueFor(source, destination)}, nil
}

var uniqueKeyPrefix = "&kind=" + EventArgs{}.Kind() + `&args={"destination":`

// InsertEventJobsSQL is a statement, for use as a data-modifying common
// table expression, that inserts event jobs as River's InsertManyTx would,
// with River's conflict rule: a job for an event's destination that already
// has one waiting or running (River's unique index, "until executed") is
// not inserted. rows is a query yielding (args, max_attempts, unique_key,
// queue, ord, waits): NewEventJob's fields, the insertion order (the order
// rows are locked in) and whether the job waits in its ordering line
// (River's 'pending' state, which River never runs on its own; see
// wakeLineSQL); p is the number of the first of the parameters
// EventJobParams returns. Each row answers (source, event_id, destination,
// queue, skipped): skipped is true for a job not inserted (a duplicate).
func InsertEventJobsSQL(rows string, p int) string {
	n := func(i int) string { return "$" + strconv.Itoa(p+i) }
	return `INSERT INTO river_job (args, created_at, kind, max_attempts, metadata, priority, queue, scheduled_at, state, tags, unique_key, unique_states)
	SELECT r.args, now(), ` + n(2) + `, r.max_attempts, '{}', ` + n(0) + `, r.queue, now(),
		(CASE WHEN r.waits THEN 'pending' ELSE 'available' END)::river_job_state, '{}', r.unique_key, ` + n(1) + `::int::bit(8)
	FROM (` + rows + `) AS r(args, max_attempts, unique_key, queue, ord, waits)
	ORDER BY r.ord
	ON CONFLICT (unique_key)
		WHERE unique_key IS NOT NULL AND unique_states IS NOT NULL AND river_job_state_in_bitmask(unique_states, state)
		DO UPDATE SET kind = river_job.kind
	RETURNING args->>'source' AS source, args->>'event_id' AS event_id, COALESCE(args->>'destination', '` + DefaultDestination + `') AS destination,
		queue, xmax <> 0 AS skipped`
}

// EventJobParams are InsertEventJobsSQL's parameters: priority, unique
// states and kind.
func EventJobParams() []any {
	return []any{EventJobPriority, int32(EventUniqueStates), EventArgs{}.Kind()}
}

// InsertNotifySQL tells River's workers listening in the current schema that
// jobs are available on queues, as River's insert does (River's insert
// topic, "<schema>.river_insert", with the queue as JSON payload). Without
// it a worker in another process still finds the jobs, at its next poll
// (FetchPollInterval). Postgres delivers it at COMMIT, and not at all if
// the transaction rolls back. Queue names are River-valid (QueueFor): they
// need no quoting.
func InsertNotifySQL(queues ...string) string {
	var b strings.Builder
	b.WriteString(`SELECT pg_notify(coalesce(current_schema() || '.', '') || 'river_insert', '{"queue": "' || q || '"}') FROM unnest(ARRAY[`)
	for i, q := range queues {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("'" + q + "'")
	}
	b.WriteString(`]::text[]) q`)
	return b.String()
}

// wakePendingJobSQL makes the pending job of the event's destination
// (source, eventID, destination: SQL expressions) available now, as River
// would schedule it; it answers the job's queue. Only hookline puts event
// jobs in 'pending' (a place in an ordering line that is not the head); River
// leaves such jobs alone until this statement moves them. It finds the job
// through River's unique index (activeJobSQL).
func wakePendingJobSQL(source, eventID, destination string) string {
	return wakePendingJobsSQL("", source, eventID, destination)
}

// wakePendingJobsSQL is wakePendingJobSQL for several events: from is a
// FROM item (empty: none) whose columns the expressions may name.
func wakePendingJobsSQL(from, source, eventID, destination string) string {
	if from != "" {
		from = ` FROM ` + from
	}
	return `UPDATE river_job j SET state = 'available', scheduled_at = now()` + from + `
		WHERE ` + activeJobSQL("j", uniqueKeySQL(source, eventID, destination)) + ` AND j.state::text = 'pending'
		RETURNING j.queue`
}

// notifyQueueSQL is the expression InsertNotifySQL evaluates per queue, for
// a queue name that is a SQL expression.
func notifyQueueSQL(queue string) string {
	return `pg_notify(coalesce(current_schema() || '.', '') || 'river_insert', '{"queue": "' || ` + queue + ` || '"}')`
}

// deleteRunningJobSQL removes job id, only while it is running, in the
// statement that completes its event's destination (completeSQL; guard
// adds conditions of the caller's). A completed event's record is
// hookline's (its destination row and attempts log), so River's row of the
// job would only be written once more (marked completed, a new version with
// an entry in each of River's indexes) and deleted by River's cleaner a day
// later; deleting it at once is the cheapest of the three. River's completer
// still reports the job after Work returns, finds no row, and does nothing:
// no EventKindJobCompleted is emitted for it, and River's UI does not list
// it among completed jobs. A job removed this way no longer holds its
// event's unique slot, exactly as a completed one would not (UniqueStates).
// The jobs of destinations that go dead are not removed: they are
// finished as River finishes them (JobCompleteTx), and a dead item's retry
// inserts a new job.
func deleteRunningJobSQL(id, guard string) string {
	return `DELETE FROM river_job j
		WHERE j.id = ` + id + ` AND j.state = 'running' AND ` + guard
}

// deleteRunningJobsSQL is deleteRunningJobSQL for the jobs whose ids are
// column id of the FROM item from.
func deleteRunningJobsSQL(from, id, guard string) string {
	return `DELETE FROM river_job j
		USING ` + from + ` WHERE j.id = ` + id + ` AND j.state = 'running' AND ` + guard
}

// riverSearchIndexes are River's GIN indexes on river_job's args and
// metadata. hookline's migration 012 drops them: nothing hookline or River
// UI runs searches jobs by containment, and each job row written paid for
// entries in both.
var riverSearchIndexes = []string{"river_job_args_index", "river_job_metadata_index"}

// reindexedRiverIndexes is the list of indexes River's reindexer rebuilds:
// River's own, without riverSearchIndexes (the reindexer would warn about
// each missing one on every run).
func reindexedRiverIndexes() []string {
	return slices.DeleteFunc(river.ReindexerIndexNamesDefault(), func(name string) bool {
		return slices.Contains(riverSearchIndexes, name)
	})
}

// joinJobSQL gives an active event job an operator's override: its args
// ($2, an RFC 3339 time as JSON) are read afresh by every attempt.
const joinJobSQL = `UPDATE river_job SET args = jsonb_set(args, '{override_before}', $2::jsonb) WHERE id = $1`

// unfinishedStates are UniqueStates as a SQL list: the states of a job that
// still counts as the event's active job.
var unfinishedStates = func() string {
	q := make([]string, len(UniqueStates))
	for i, s := range UniqueStates {
		q[i] = "'" + string(s) + "'"
	}
	return strings.Join(q, ", ")
}()

// hasActiveJobSQL is a condition true when the event's destination
// (source, eventID, destination: SQL expressions) has an active job; a job
// without a destination (written before destinations had names) counts for
// the default one. It probes River's unique index.
func hasActiveJobSQL(source, eventID, destination string) string {
	keys := `ARRAY[` + uniqueKeySQL(source, eventID, destination) + `, CASE WHEN ` + destination + ` = '` + DefaultDestination + `' THEN ` + legacyUniqueKeySQL(source, eventID) + ` END]`
	return `EXISTS (SELECT 1 FROM river_job j WHERE ` + activeJobSQL("j", "ANY("+keys+")") + `)`
}

// activeJobSQL is a condition on river_job row j: an event job whose unique
// key is key (an expression, or ANY(array)) and which still counts as its
// event's active job. It repeats the predicate of River's unique index
// (river_job_unique_idx) so that PostgreSQL can serve it from that index: one
// index probe per key, where a search of the args (GIN) index intersects
// posting lists as long as the queue (every job of a source shares its
// 'source' entry). It names no column another index of River's leads with
// (kind is part of the unique key; state is compared as text), so that even
// a plan made on empty statistics cannot walk every event job instead.
func activeJobSQL(j, key string) string {
	return j + `.unique_key = ` + key + ` AND ` + j + `.unique_states IS NOT NULL
		  AND river_job_state_in_bitmask(` + j + `.unique_states, ` + j + `.state)
		  AND ` + j + `.state::text IN (` + unfinishedStates + `)`
}

// uniqueKeySQL is NewEventJob's unique key computed by PostgreSQL from SQL
// expressions (text): the same bytes hashed, each string encoded as
// encoding/json encodes it (jsonStringSQL).
func uniqueKeySQL(source, eventID, destination string) string {
	return `sha256(convert_to(` + sqlString(uniqueKeyPrefix) + ` || ` + jsonStringSQL(destination) +
		` || ',"event_id":' || ` + jsonStringSQL(eventID) + ` || ',"source":' || ` + jsonStringSQL(source) + ` || '}', 'UTF8'))`
}

// legacyUniqueKeySQL is the unique key of a job written before destinations
// had names: its args were only source and event id.
func legacyUniqueKeySQL(source, eventID string) string {
	return `sha256(convert_to(` + sqlString("&kind="+EventArgs{}.Kind()+`&args={"event_id":`) + ` || ` + jsonStringSQL(eventID) +
		` || ',"source":' || ` + jsonStringSQL(source) + ` || '}', 'UTF8'))`
}

// jsonStringSQL encodes a text expression as a JSON string exactly as
// encoding/json does (River encodes args with json.Marshal): to_json's
// escapes (quote, backslash, control characters) are Go's, and Go also
// escapes <, >, & and U+2028, U+2029. Both produce valid UTF-8 only, which
// PostgreSQL text always is.
func jsonStringSQL(x string) string {
	return `replace(replace(replace(replace(replace(to_json((` + x + `)::text)::text,
		'<', '\u003c'), '>', '\u003e'), '&', '\u0026'), chr(8232), '\u2028'), chr(8233), '\u2029')`
}

// sqlString is s as a SQL string literal.
func sqlString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// QueueStats is the event queue's depth and lag.
type QueueStats struct {
	// ByState counts unfinished event jobs by River state (available,
	// pending, retryable, running, scheduled; 0 when none).
	ByState map[string]int64
	// OldestAvailableSeconds is how long the oldest available event job has
	// been ready to run without being taken (0 when none). Jobs of a paused
	// queue (a paused destination) are not ready to run: they wait on
	// purpose and are left out.
	OldestAvailableSeconds float64
}

// ReadQueueStats reads the event queue's depth and lag (run it in a
// read-only transaction for one snapshot). Finished jobs (River's history)
// are not counted: that would scan a large table.
func ReadQueueStats(ctx context.Context, q Querier) (QueueStats, error) {
	st := QueueStats{ByState: map[string]int64{}}
	for _, s := range UniqueStates {
		st.ByState[string(s)] = 0
	}
	rows, err := q.Query(ctx, `SELECT state::text, count(*) FROM river_job
		WHERE kind = $1 AND state IN (`+unfinishedStates+`) GROUP BY 1`, EventArgs{}.Kind())
	if err != nil {
		return st, err
	}
	var s string
	var n int64
	if _, err := pgx.ForEachRow(rows, []any{&s, &n}, func() error { st.ByState[s] = n; return nil }); err != nil {
		return st, err
	}
	err = q.QueryRow(ctx, `SELECT COALESCE(EXTRACT(EPOCH FROM now() - min(j.scheduled_at))::float8, 0) FROM river_job j
		WHERE j.kind = $1 AND j.state = 'available' AND j.scheduled_at <= now()
		  AND NOT EXISTS (SELECT 1 FROM river_queue q WHERE q.name = j.queue AND q.paused_at IS NOT NULL)`, EventArgs{}.Kind()).Scan(&st.OldestAvailableSeconds)
	st.OldestAvailableSeconds = max(st.OldestAvailableSeconds, 0)
	return st, err
}

// backlogLagSQL is the age of the oldest job ready to run on any of the
// queues $1 not paused (0 when none): per queue, the job River's fetch would
// take first, read from its fetch index.
const backlogLagSQL = `SELECT COALESCE(EXTRACT(EPOCH FROM now() - min(j.scheduled_at))::float8, 0)
	FROM unnest($1::text[]) AS q(name)
	CROSS JOIN LATERAL (SELECT scheduled_at FROM river_job
		WHERE state = 'available' AND queue = q.name AND kind = $2 AND scheduled_at <= now()
		ORDER BY priority, scheduled_at, id LIMIT 1) j
	WHERE NOT EXISTS (SELECT 1 FROM river_queue p WHERE p.name = q.name AND p.paused_at IS NOT NULL)`

// Querier runs a query: a pool, a connection or a transaction.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// JobStats describes the event jobs River holds, for harnesses that check
// hookline's promises from outside (the chaos test, the benchmark). The job
// of a completed event is not among them: it is removed when the event
// completes (deleteRunningJobSQL); those of dead events stay.
type JobStats struct {
	Total      int // every event job row left
	Unfinished int // available, pending, retryable, running or scheduled
	Abandoned  int // discarded or cancelled: River gave up on them
	// LatestAttempts is, per event destination
	// ("source:destination:event_id"), the attempt count River recorded on
	// its newest job.
	LatestAttempts map[string]int
}

// ReadJobStats reads JobStats; withAttempts also fills LatestAttempts (one
// row per event).
func ReadJobStats(ctx context.Context, q Querier, withAttempts bool) (JobStats, error) {
	var st JobStats
	err := q.QueryRow(ctx, `SELECT count(*),
			count(*) FILTER (WHERE state IN (`+unfinishedStates+`)),
			count(*) FILTER (WHERE state IN ('discarded', 'cancelled'))
		FROM river_job WHERE kind = $1`, EventArgs{}.Kind()).Scan(&st.Total, &st.Unfinished, &st.Abandoned)
	if err != nil || !withAttempts {
		return st, err
	}
	rows, err := q.Query(ctx, `SELECT DISTINCT ON (args->>'source', args->>'event_id', args->>'destination')
			args->>'source' || ':' || COALESCE(args->>'destination', '`+DefaultDestination+`') || ':' || (args->>'event_id'), attempt
		FROM river_job WHERE kind = $1 ORDER BY args->>'source', args->>'event_id', args->>'destination', id DESC`, EventArgs{}.Kind())
	if err != nil {
		return st, err
	}
	st.LatestAttempts = map[string]int{}
	var key string
	var n int
	_, err = pgx.ForEachRow(rows, []any{&key, &n}, func() error { st.LatestAttempts[key] = n; return nil })
	return st, err
}

// AnyUnfinishedJob reports whether an event job is still waiting or
// running. It probes each state on its own, each probe a walk of River's
// fetch index (which leads with the state) that stops at the first event
// job. A single IN list over the states let PostgreSQL scan the table,
// reading every finished job first; and kind is compared as an expression
// so that no plan intersects the probe with River's kind index, which lists
// every event job ever (measured: 17 ms a probe at 90,000 jobs).
func AnyUnfinishedJob(ctx context.Context, q Querier) (bool, error) {
	return AnyUnfinishedJobOfKind(ctx, q, EventArgs{}.Kind())
}

// AnyUnfinishedJobOfKind is AnyUnfinishedJob for the jobs of any kind
// (the benchmark's baseline worker waits on its own jobs with it).
func AnyUnfinishedJobOfKind(ctx context.Context, q Querier, kind string) (bool, error) {
	var any bool
	err := q.QueryRow(ctx, anyUnfinishedJobSQL, kind).Scan(&any)
	return any, err
}

// CountJobsOfKind counts the jobs of kind, and those of them not completed.
func CountJobsOfKind(ctx context.Context, q Querier, kind string) (total, notCompleted int, err error) {
	err = q.QueryRow(ctx, countJobsOfKindSQL, kind).Scan(&total, &notCompleted)
	return total, notCompleted, err
}

const countJobsOfKindSQL = `SELECT count(*), count(*) FILTER (WHERE state <> 'completed') FROM river_job WHERE kind = $1`

var anyUnfinishedJobSQL = func() string {
	probes := make([]string, len(UniqueStates))
	for i, s := range UniqueStates {
		probes[i] = `EXISTS (SELECT 1 FROM river_job WHERE state = '` + string(s) + `' AND kind || '' = $1)`
	}
	return `SELECT ` + strings.Join(probes, " OR ")
}()

// ensureQueueSQL creates a River queue's row ($1), as River's producer does
// when it starts, so that a destination's queue can be paused before any
// worker ran it. A queue created paused stays so when a worker starts it.
const ensureQueueSQL = `INSERT INTO river_queue (name, created_at, metadata, updated_at) VALUES ($1, now(), '{}', now()) ON CONFLICT (name) DO NOTHING`

// orphanStates are the states of an event job that waits (pending: for
// its place in an ordering line).
var orphanStates = []string{"available", "pending", "retryable", "scheduled"}

// waitingQueuesSQL lists the queues that have a job in a waiting state
// (orphanStates), by skipping through River's fetch index (state, queue,
// ...) one queue at a time: a probe per queue, however many jobs wait.
// Paused queues are left out: their jobs wait on purpose, for as long as an
// operator keeps the destination paused.
var waitingQueuesSQL = func() string {
	ctes := make([]string, len(orphanStates))
	selects := make([]string, len(orphanStates))
	for i, st := range orphanStates {
		q := "q" + strconv.Itoa(i)
		ctes[i] = q + `(queue) AS (SELECT min(queue) FROM river_job WHERE state = '` + st + `'
		UNION ALL SELECT (SELECT min(j.queue) FROM river_job j WHERE j.state = '` + st + `' AND j.queue > ` + q + `.queue) FROM ` + q + ` WHERE ` + q + `.queue IS NOT NULL)`
		selects[i] = `SELECT queue FROM ` + q + ` WHERE queue IS NOT NULL`
	}
	return `WITH RECURSIVE ` + strings.Join(ctes, ",\n\t") + "\nSELECT queue FROM (" + strings.Join(selects, " UNION ") + `) w
	WHERE NOT EXISTS (SELECT 1 FROM river_queue p WHERE p.name = w.queue AND p.paused_at IS NOT NULL)`
}()

// orphanJobsSQL lists up to 1,000 waiting event jobs (pending ones of an
// ordering line too) of the queues $1 queued more than $3 µs ago, or, for
// the queues also in $2, more than $4 µs ago; and whether the job's queue
// is in $2. The queues are those no instance keeps (orphans.go), $2 those
// a live instance configures without running them. Jobs of the queues $5
// (kept, but by no live instance running them) are listed once queued
// longer than their queue's cap in $6 (µs): their events' own bound.
var orphanJobsSQL = `SELECT id, args->>'source', args->>'event_id', COALESCE(args->>'destination', '` + DefaultDestination + `'),
		COALESCE(queue = ANY($2::text[]), false)
	FROM river_job
	WHERE state IN ('` + strings.Join(orphanStates, "', '") + `') AND kind = '` + EventArgs{}.Kind() + `'
		AND queue = ANY($1::text[] || $5::text[]) AND (
		(queue = ANY($1::text[])
			AND created_at < now() - CASE WHEN queue = ANY($2::text[]) THEN $4::bigint ELSE $3::bigint END * interval '1 microsecond')
		OR EXISTS (SELECT 1 FROM unnest($5::text[], $6::bigint[]) AS c(queue, cap_us)
			WHERE c.queue = river_job.queue AND river_job.created_at < now() - c.cap_us * interval '1 microsecond'))
	ORDER BY id LIMIT 1000`

// finishWaitingJobSQL completes a job that is waiting (not running): its
// event's outcome is recorded elsewhere.
const finishWaitingJobSQL = `UPDATE river_job SET state = 'completed', finalized_at = now()
	WHERE id = $1 AND state IN ('available', 'pending', 'retryable', 'scheduled')`

// takePendingJobsSQL is wakePendingJobsSQL for jobs the caller will run
// itself (an ordering line handed on to the worker that ended its last
// place): the pending job goes straight to running, as River's fetch would
// leave it once woken — attempt counted, attempted_at now, runner appended
// to attempted_by (River keeps the last 100) — so no other worker fetches
// it. runner is an SQL expression (River's client id). It answers the
// job's columns (takenColumns), then the expressions also. A worker that
// dies with such a job leaves it running, exactly as a job it had
// fetched: River's rescuer retries it.
func takePendingJobsSQL(from, source, eventID, destination, runner, also string) string {
	return `UPDATE river_job j SET state = 'running', scheduled_at = now(), ` + runningSetSQL(runner) + `
		FROM ` + from + `
		WHERE ` + activeJobSQL("j", uniqueKeySQL(source, eventID, destination)) + ` AND j.state::text = 'pending'
		RETURNING ` + takenColumnsSQL + `, ` + also
}

// pendingJobSQL is a scalar subquery: the pending event job of (source,
// eventID, destination), SQL expressions, as JSON {id, attempt, args}
// (pendingJob), NULL when it has none. The line's advance answers it for
// the place after the one it hands on, so that the worker can take that
// job's claim in the transaction that will take the job (takenHereSQL).
func pendingJobSQL(source, eventID, destination string) string {
	return `(SELECT jsonb_build_object('id', p.id, 'attempt', p.attempt, 'args', p.args) FROM river_job p
		WHERE ` + activeJobSQL("p", uniqueKeySQL(source, eventID, destination)) + ` AND p.state::text = 'pending')`
}

// pendingJob is a pendingJobSQL row.
type pendingJob struct {
	ID      int64           `json:"id"`
	Attempt int             `json:"attempt"`
	Args    json.RawMessage `json:"args"`
}

// taken is the job as takePendingJobsSQL will leave it (its attempt
// counted), for computing its claim before it is taken.
func (p *pendingJob) taken() (*river.Job[EventArgs], error) {
	job := &river.Job[EventArgs]{JobRow: &rivertype.JobRow{ID: p.ID, EncodedArgs: p.Args, Attempt: p.Attempt + 1, State: rivertype.JobStateRunning}}
	if err := json.Unmarshal(p.Args, &job.Args); err != nil {
		return nil, fmt.Errorf("decode the args of job %d: %w", p.ID, err)
	}
	return job, nil
}

// takenHereSQL is true when the job with id jobID (an SQL expression) was
// taken by this transaction for runner at the given attempt: running,
// attempted at the transaction's now(), by runner last.
func takenHereSQL(jobID, attempt, runner string) string {
	return `EXISTS (SELECT 1 FROM river_job t WHERE t.id = ` + jobID + ` AND t.state::text = 'running' AND t.attempt = ` + attempt + `
			AND t.attempted_at = now() AND t.attempted_by[array_length(t.attempted_by, 1)] = ` + runner + `)`
}

// runningSetSQL is the SET list of River's fetch for runner (an SQL
// expression): the attempt counted, attempted_at now, runner appended to
// attempted_by (River keeps the last 100).
func runningSetSQL(runner string) string {
	return `attempt = j.attempt + 1, attempted_at = now(),
		attempted_by = array_append(CASE WHEN array_length(j.attempted_by, 1) >= 100
			THEN j.attempted_by[array_length(j.attempted_by, 1) - 98:] ELSE j.attempted_by END, ` + runner + `)`
}

// takeAvailableJobsSQL and takeAvailableJobsAfterLinesSQL are
// takeAvailableJobs without and with afterLines.
var (
	takeAvailableJobsSQL           = takeAvailableJobs(false)
	takeAvailableJobsAfterLinesSQL = takeAvailableJobs(true)
)

// takeAvailableJobs is River's fetch for jobs the caller will run
// itself (chain.go): per queue of $1, up to the number in $2 of its
// available event jobs, in River's order (priority, scheduled_at, id)
// from after the queue's place in $4, $5, $6 (takeCursor: where the last
// take ended), skipping those another transaction holds, none from a
// paused queue, go to running for runner $3 as River's fetch leaves them.
// It answers each job's columns (takenColumnsSQL). With afterLines, the
// number is less the jobs this transaction already took from ordering
// lines for runner (takePendingJobsSQL: running, attempted now() by
// runner), which counts the running jobs of the queue: without lines in
// the transaction there are none to count.
func takeAvailableJobs(afterLines bool) string {
	want := `u.n`
	if afterLines {
		want = `u.n - (SELECT count(*) FROM river_job t
			WHERE t.state = 'running' AND t.queue = u.queue AND t.attempted_at = now()
			  AND t.attempted_by[array_length(t.attempted_by, 1)] = $3::text)`
	}
	return `WITH want AS (
		SELECT u.queue, ` + want + ` AS n, u.priority, u.scheduled_at, u.id
		FROM unnest($1::text[], $2::int[], $4::smallint[], $5::timestamptz[], $6::bigint[]) AS u(queue, n, priority, scheduled_at, id)),
	picked AS (
		SELECT p.id FROM want CROSS JOIN LATERAL (
			SELECT f.id FROM river_job f
			WHERE f.state = 'available' AND f.queue = want.queue
			  AND (f.priority, f.scheduled_at, f.id) > (want.priority, want.scheduled_at, want.id)
			  AND f.scheduled_at <= now() AND f.kind = '` + EventArgs{}.Kind() + `'
			ORDER BY f.priority, f.scheduled_at, f.id LIMIT greatest(want.n, 0) FOR UPDATE SKIP LOCKED) p
		WHERE NOT EXISTS (SELECT 1 FROM river_queue q WHERE q.name = want.queue AND q.paused_at IS NOT NULL))
	UPDATE river_job j SET state = 'running', ` + runningSetSQL("$3::text") + `
	FROM picked WHERE j.id = picked.id
	RETURNING ` + takenColumnsSQL
}

// takenColumns are a taken job's columns (river_job's), in the order of
// takenJob.targets: the takes answer them as columns, which cost less to
// send and read than the row as JSON.
const takenColumns = `id, queue, args, attempt, max_attempts, created_at, attempted_at, metadata, kind, priority, scheduled_at`

// takenColumnsSQL are takenColumns of the taken job j.
var takenColumnsSQL = "j." + strings.ReplaceAll(takenColumns, ", ", ", j.")

// noJobColumnsSQL stands for takenColumns in a row that took no job (a
// UNION with rows that did): values of their types, queue the SQL
// expression of the row's queue, the rest ignored by the reader.
func noJobColumnsSQL(queue string) string {
	return `0::bigint, ` + queue + `, NULL::jsonb, 0::smallint, 0::smallint, now(), now(), NULL::jsonb, ''::text, 0::smallint, now()`
}

// targets are the scan targets of takenColumns. The JSON columns are
// scanned as []byte, which pgx copies into a fresh slice for each row (a
// json.RawMessage target would go through encoding/json first).
func (t *takenJob) targets() []any {
	return []any{&t.ID, &t.Queue, (*[]byte)(&t.Args), &t.Attempt, &t.MaxAttempts, &t.CreatedAt, &t.AttemptedAt,
		(*[]byte)(&t.Metadata), &t.Kind, &t.Priority, &t.ScheduledAt}
}

// takenJob is a taken job's row (takenColumns), as takePendingJobsSQL and
// takeAvailableJobs answer it.
type takenJob struct {
	ID          int64
	Queue       string
	Args        json.RawMessage
	Attempt     int
	MaxAttempts int
	CreatedAt   time.Time
	AttemptedAt time.Time
	Metadata    json.RawMessage
	Kind        string
	Priority    int
	ScheduledAt time.Time
}

// job returns the running job as River hands it to a worker.
// It keeps no pointer into t, which may be scanned into again (each row
// scanned gives the JSON columns fresh slices).
func (t *takenJob) job() (*river.Job[EventArgs], error) {
	attemptedAt := t.AttemptedAt
	row := &rivertype.JobRow{ID: t.ID, Queue: t.Queue, EncodedArgs: t.Args, Attempt: t.Attempt, MaxAttempts: t.MaxAttempts,
		CreatedAt: t.CreatedAt, AttemptedAt: &attemptedAt, Metadata: t.Metadata, Kind: t.Kind, Priority: t.Priority,
		ScheduledAt: t.ScheduledAt, State: rivertype.JobStateRunning}
	job := &river.Job[EventArgs]{JobRow: row}
	if err := json.Unmarshal(t.Args, &job.Args); err != nil {
		return nil, fmt.Errorf("decode the args of job %d: %w", t.ID, err)
	}
	return job, nil
}

// finishRunningJob records the outcome of a job this worker took itself
// (takePendingJobsSQL) as River's executor records that of a job it ran:
// completed (err nil), snoozed (river.JobSnooze: the attempt given back),
// cancelled (river.JobCancel), discarded (attempts used up) or retried at
// retryAt; River's own statement, through its driver, and only while the
// job is still running. started is when the attempt began.
func finishRunningJob(ctx context.Context, pool *pgxpool.Pool, job *rivertype.JobRow, started time.Time, err error, retryAt time.Time) error {
	now := time.Now()
	var p *riverdriver.JobSetStateIfRunningParams
	var snooze *rivertype.JobSnoozeError
	var cancel *rivertype.JobCancelError
	errData := func() []byte {
		b, _ := json.Marshal(rivertype.AttemptError{At: started, Attempt: job.Attempt, Error: err.Error()}) //nolint:errchkjson // plain fields
		return b
	}
	switch {
	case err == nil:
		p = riverdriver.JobSetStateCompleted(job.ID, now, nil)
	case errors.As(err, &snooze):
		meta, _ := json.Marshal(map[string]any{"snoozes": gjsonInt(job.Metadata, "snoozes") + 1}) //nolint:errchkjson
		at := now.Add(snooze.Duration)
		if snooze.Duration <= riverSchedulerInterval {
			p = riverdriver.JobSetStateSnoozedAvailable(job.ID, at, job.Attempt-1, meta)
		} else {
			p = riverdriver.JobSetStateSnoozed(job.ID, at, job.Attempt-1, meta)
		}
	case errors.As(err, &cancel):
		p = riverdriver.JobSetStateCancelled(job.ID, now, errData(), nil)
	case job.Attempt >= job.MaxAttempts:
		p = riverdriver.JobSetStateDiscarded(job.ID, now, errData(), nil)
	case retryAt.Sub(now) <= riverSchedulerInterval:
		p = riverdriver.JobSetStateErrorAvailable(job.ID, retryAt, errData(), nil)
	default:
		p = riverdriver.JobSetStateErrorRetryable(job.ID, retryAt, errData(), nil)
	}
	_, setErr := riverpgxv5.New(pool).GetExecutor().JobSetStateIfRunningMany(ctx, &riverdriver.JobSetStateIfRunningManyParams{
		ID: []int64{p.ID}, Attempt: []*int{p.Attempt}, ErrData: [][]byte{p.ErrData}, FinalizedAt: []*time.Time{p.FinalizedAt},
		MetadataDoMerge: []bool{p.MetadataDoMerge}, MetadataUpdates: [][]byte{p.MetadataUpdates}, ScheduledAt: []*time.Time{p.ScheduledAt},
		State: []rivertype.JobState{p.State}, Now: &now,
	})
	return setErr
}

// riverSchedulerInterval is River's job scheduler interval (its default,
// which hookline keeps): a retry or snooze due within it is made available
// at once, with its time, rather than scheduled.
const riverSchedulerInterval = 5 * time.Second

// gjsonInt reads an integer field of a JSON object (0 when absent).
func gjsonInt(obj []byte, field string) int64 {
	var m map[string]json.RawMessage
	if json.Unmarshal(obj, &m) != nil {
		return 0
	}
	var n int64
	_ = json.Unmarshal(m[field], &n)
	return n
}
