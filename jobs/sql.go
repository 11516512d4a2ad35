package jobs

import "strconv"

// The statements package jobs runs on hookline's own tables, in one place.
// River's tables: riverrow.go. The claims table: package idem, whose claim
// and completion statements the worker's wrap (claimStartSQL, completeSQL)
// so that one round trip claims and starts, or completes, an event.
//
// An event (hookline_events) goes to destinations; each (event,
// destination) is a row of hookline_event_destinations with its own state,
// attempts and budget, and every attempt's outcome is a row of
// hookline_attempts. Shared rules are SQL functions of the migrations,
// defined once: hookline_item (an event's own bytes in its delivery's body)
// and hookline_requeues (whether a new delivery re-queues a destination).

// param renders parameter n+i.
func param(n, i int) string { return "$" + strconv.Itoa(n+i) }

// startAttemptSQL counts an attempt of the event's destination (source,
// eventID, dest) by job — over its whole life (attempts) and within the
// job's budget (job_attempts, which a new job restarts) — and loads the
// payload it forwards. from names more FROM items that must yield a row
// for anything to happen (the claim); returning, if not empty, are more
// columns (with a trailing comma) to return first. The row keeps its state:
// "processing" is what its claim says, and leaving state (a column of the
// partial index) alone makes this an update PostgreSQL can do as a HOT
// update. A destination whose delivery is gone is not touched.
func startAttemptSQL(source, eventID, dest, job, from, returning string) string {
	return `UPDATE hookline_event_destinations r SET attempts = r.attempts + 1,
			job_attempts = CASE WHEN r.job_id = ` + job + ` THEN r.job_attempts + 1 ELSE 1 END, job_id = ` + job + `
		FROM hookline_deliveries d, hookline_events e` + from + `
		WHERE r.source = ` + source + ` AND r.event_id = ` + eventID + ` AND r.destination = ` + dest + `
			AND d.id = r.delivery_id AND e.source = r.source AND e.event_id = r.event_id
		RETURNING ` + returning + ` r.source AS lost_source, r.event_id AS lost_event_id, r.destination AS lost_destination,
			r.attempts, r.job_attempts, e.event_type, r.delivery_id, d.content_type, d.headers, d.received_at,
			hookline_item(d.body, r.item_offset, r.item_length) AS body, d.origin,
			r.order_key, r.order_seq IS NOT NULL AS in_line, r.order_by::text AS order_by, r.order_by_kind,
			` + staleSQL + ` AS stale, ` + eventTraceSQL + ` AS traceparent`
}

// LostAttemptPrefix starts the error of an attempt logged as lost
// (lostAttemptSQL): one whose worker stopped, lost the database or outlived
// its lease before recording the outcome.
const LostAttemptPrefix = "lost:"

// lostAttemptSQL, a CTE after ev (a startAttemptSQL), logs the attempt
// before the one ev started when that attempt has no outcome in the log:
// its worker died (SIGKILL, a lost host), lost the database between
// counting it and recording what the destination said, or outlived its
// lease (whose new holder owns the outcome). Every other way an attempt
// ends logs it in the statement that ends it, and this claim could only be
// taken once the earlier attempt's lease had run out or been released, so
// the earlier attempt will never log itself. Its row says LostAttemptPrefix, timed
// when the next attempt found it missing. A first attempt looks nothing up.
const lostAttemptSQL = `lost AS (INSERT INTO hookline_attempts (source, event_id, destination, n, error)
		SELECT ev.lost_source, ev.lost_event_id, ev.lost_destination, ev.attempts - 1,
			'` + LostAttemptPrefix + ` no outcome was recorded (its worker stopped, lost the database or let its lease run out during the attempt); found when attempt ' || ev.attempts || ' started'
		FROM ev WHERE ev.attempts > 1 AND NOT EXISTS (SELECT 1 FROM hookline_attempts a
			WHERE a.source = ev.lost_source AND a.event_id = ev.lost_event_id AND a.destination = ev.lost_destination AND a.n = ev.attempts - 1))`

// eventTraceSQL is the traceparent an attempt of destination row r
// continues: the event's trace, that of its first delivery (event e's; the
// one the event lookup shows), also when r works from a later one (a
// provider's re-delivery after the event died, an operator's retry); the
// delivery d of r when the first one has none or is gone. The subquery
// runs only for such later deliveries.
const eventTraceSQL = `CASE WHEN r.delivery_id = e.delivery_id THEN d.traceparent
			ELSE COALESCE((SELECT f.traceparent FROM hookline_deliveries f WHERE f.id = e.delivery_id), d.traceparent) END`

// staleSQL is true when the destination row r is in its ordering line and
// its ordering.by is less than the greatest one among the line's events
// already forwarded with a 2xx (same kind: numbers with numbers, times with
// times). Equal is not stale; no by is never stale.
const staleSQL = `(r.order_seq IS NOT NULL AND r.order_by IS NOT NULL AND EXISTS (SELECT 1 FROM hookline_order_keys k
				WHERE k.source = r.source AND k.destination = r.destination AND k.key = r.order_key
				  AND k.max_by_kind = r.order_by_kind AND k.max_by > r.order_by))`

// claimStartSQL wraps idem's claim statement (parameters $1..$n; one row
// iff the claim was taken) so that the attempt is counted and the payload
// loaded only when the claim was taken. The event's columns are NULL when
// there is no such destination row or no delivery; then nothing but the
// claim changed. Parameters after idem's: source, event_id, destination,
// job id.
func claimStartSQL(claimSQL string, n int) string {
	return `WITH claim AS (` + claimSQL + `),
	ev AS (` + startAttemptSQL(param(n, 1), param(n, 2), param(n, 3), param(n, 4), ", claim", "") + `),
	` + lostAttemptSQL + `
	SELECT ` + startColumns + ` FROM claim LEFT JOIN ev ON true`
}

// startColumns are what claimStartSQL and claimManyStartSQL answer for a
// claim taken (startRow's columns).
const startColumns = `claim.token, claim.expires_at, ev.attempts, COALESCE(ev.job_attempts, 0), ev.event_type, ev.delivery_id,
		ev.content_type, ev.headers, ev.received_at, ev.body, ev.origin, ev.order_key, COALESCE(ev.in_line, false),
		ev.order_by, ev.order_by_kind, COALESCE(ev.stale, false), ev.traceparent`

// claimManyStartSQL is claimStartSQL for a batch of jobs (group commit):
// claimMany is idem's ClaimManySQL. Parameters, arrays with one element
// per job (distinct keys): $1 claim keys, $2 holders, $3 leases (µs), $4
// sources, $5 event ids, $6 destinations, $7 job ids. One row per claim
// taken: its key, then startColumns.
func claimManyStartSQL(claimMany func(input string) string) string {
	return claimManyStart(claimMany, `unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::bigint[])
			AS u(key, holder, lease_us, source, event_id, destination, job_id)`)
}

// claimTakenManyStartSQL is claimManyStartSQL for jobs this transaction is
// to have taken for runner $9, each at its attempt in $8 (an array like
// $7): a job that was not taken so (takenHereSQL) is not claimed. The
// worker computes these claims before the line's advance takes the jobs
// (a prediction), so that the claims ride in the advance's round trip.
func claimTakenManyStartSQL(claimMany func(input string) string) string {
	return claimManyStart(claimMany, `unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::bigint[], $8::int[])
			AS u(key, holder, lease_us, source, event_id, destination, job_id, attempt)
		WHERE `+takenHereSQL("u.job_id", "u.attempt", "$9::text"))
}

// claimManyStart is the claim batch over the jobs of from (a FROM list
// yielding u).
func claimManyStart(claimMany func(input string) string, from string) string {
	return `WITH q AS MATERIALIZED (
		SELECT u.key, u.holder, u.lease_us, u.source, u.event_id, u.destination, u.job_id FROM ` + from + `),
	claim AS (` + claimMany("SELECT key, holder, lease_us FROM q") + `),
	ev AS (` + startAttemptSQL("q.source", "q.event_id", "q.destination", "q.job_id", ", q JOIN claim ON claim.key = q.key", "q.key,") + `),
	` + lostAttemptSQL + `
	SELECT claim.key, ` + startColumns + ` FROM claim LEFT JOIN ev ON ev.key = claim.key`
}

// startSQL is startAttemptSQL on its own, for a claim taken by an earlier
// statement of the same transaction: source $1, event_id $2, destination
// $3, job id $4.
var startSQL = `WITH ev AS (` + startAttemptSQL("$1", "$2", "$3", "$4", "", "") + `),
	` + lostAttemptSQL + `
	SELECT attempts, job_attempts, event_type, delivery_id, content_type, headers, received_at, body, origin,
		order_key, in_line, order_by, order_by_kind, stale, traceparent FROM ev`

// attemptLogSQL records an attempt's outcome: source, event_id,
// destination, then n, status, duration (ms) and error at $p.. $p+3; from
// (a FROM clause, or "") must yield a row for it to be written.
func attemptLogSQL(source, eventID, dest string, p int, from string) string {
	return `INSERT INTO hookline_attempts (source, event_id, destination, n, status, duration_ms, error)
		SELECT ` + source + `, ` + eventID + `, ` + dest + `, ` + param(p, 0) + `, ` + param(p, 1) + `, ` + param(p, 2) + `, ` + param(p, 3) + from
}

// completeSQL wraps idem's complete statement (parameters $1..$n, one row
// iff our token still holds) so that everything else depends on it:
//
//   - the event's destination becomes completed (its dedup window starts
//     now) and the attempt is logged;
//   - its dead item of reason failed leaves the dead set;
//   - the destination's failure streak, if any, ends;
//   - the River job is removed (deleteRunningJobSQL).
//
// The job's completion stays in the same statement: left to River's
// batched completer after Work returns, the job would stay running for a
// moment after the destination completed, and a unique insert for it in
// that moment (an operator's retry joins the active job) would join a job
// that never runs again.
//
// Lock order: ingest locks the destination row and then the job row (the
// unique insert), so this statement must lock the destination row before
// the job, or the two deadlock. Data-modifying CTEs run in no promised
// order, and a join does not force one either. What does: an uncorrelated
// scalar subquery in the job update's WHERE, (SELECT count(*) FROM ev), is a
// one-time filter that PostgreSQL evaluates — running the destination
// update to completion — before it scans the job table. The destination
// update joins the claim, so nothing is locked unless the claim was ours.
//
// Parameters after idem's: source, event_id, destination, dedup window
// (µs), job id, then the attempt's n, status, duration (ms) and error, then
// why it was not forwarded (skipped: 'stale', or NULL).
func completeSQL(claimSQL string, n int) string {
	src, id, dest := param(n, 1), param(n, 2), param(n, 3)
	return `WITH claim AS (` + claimSQL + `),
	ev AS (
		UPDATE hookline_event_destinations r SET state = 'completed', completed_at = now(),
			dedup_until = now() + ` + param(n, 4) + `::bigint * interval '1 microsecond', last_error = NULL,
			skipped = ` + param(n, 10) + `::text, ` + unspentSQL(param(n, 10)+"::text") + `
		FROM claim WHERE r.source = ` + src + ` AND r.event_id = ` + id + ` AND r.destination = ` + dest + `
		RETURNING 1),
	att AS (` + attemptLogSQL(src, id, dest, n+6, " FROM claim WHERE "+param(n, 10)+"::text IS NULL") + `),
	dead AS (
		DELETE FROM hookline_dead x
		WHERE x.source = ` + src + ` AND x.event_id = ` + id + ` AND x.destination = ` + dest + ` AND x.reason = 'failed'
			AND EXISTS (SELECT 1 FROM claim)
		RETURNING 1),
	streak AS (
		UPDATE hookline_destinations SET failure_streak = 0
		WHERE source = ` + src + ` AND name = ` + dest + ` AND failure_streak > 0 AND circuit = 'closed'
			AND EXISTS (SELECT 1 FROM claim)),
	job AS (` + deleteRunningJobSQL(param(n, 5), `(SELECT count(*) FROM ev) >= 0 AND EXISTS (SELECT 1 FROM claim)`) + `)
	SELECT count(*) FROM claim`
}

// unspentSQL is the SET list that gives back the attempt a completion
// counted when it did not forward (skipped, an SQL text expression, is not
// NULL: a stale event under stale: skip): nothing was attempted, so neither
// the destination's attempts nor its budget count it, and the attempts log
// has no row for it.
func unspentSQL(skipped string) string {
	return `attempts = greatest(r.attempts - CASE WHEN ` + skipped + ` IS NULL THEN 0 ELSE 1 END, 0),
			job_attempts = greatest(r.job_attempts - CASE WHEN ` + skipped + ` IS NULL THEN 0 ELSE 1 END, 0)`
}

// completeManySQL is completeSQL for a batch of completions (group
// commit), with the same effects per event and the same lock order (every
// destination row before any job row): completeMany is idem's
// CompleteManySQL. Parameters, arrays with one element per completion
// (distinct keys): $1 claim keys, $2 tokens, $3 the claims' dedup windows
// (µs), $4 sources, $5 event ids, $6 destinations, $7 the destinations'
// dedup windows (µs), $8 job ids, then the attempts' $9 n, $10 status, $11
// duration (ms), and $12 why each was not forwarded (NULL elements: it
// was). It answers the key of every completion whose token still held.
func completeManySQL(completeMany func(input string) string) string {
	return `WITH q AS MATERIALIZED (
		SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::bigint[], $8::bigint[],
				$9::int[], $10::int[], $11::int[], $12::text[])
			AS u(key, token, dedup_us, source, event_id, destination, dest_dedup_us, job_id, n, status, duration_ms, skipped)),
	claim AS (` + completeMany("SELECT key, token, dedup_us FROM q") + `),
	done AS MATERIALIZED (SELECT q.* FROM q JOIN claim ON claim.key = q.key),
	ev AS (
		UPDATE hookline_event_destinations r SET state = 'completed', completed_at = now(),
			dedup_until = now() + done.dest_dedup_us * interval '1 microsecond', last_error = NULL, skipped = done.skipped,
			` + unspentSQL("done.skipped") + `
		FROM done WHERE r.source = done.source AND r.event_id = done.event_id AND r.destination = done.destination
		RETURNING 1),
	att AS (INSERT INTO hookline_attempts (source, event_id, destination, n, status, duration_ms, error)
		SELECT source, event_id, destination, n, status, duration_ms, '' FROM done WHERE done.skipped IS NULL),
	dead AS (
		DELETE FROM hookline_dead x USING done
		WHERE x.source = done.source AND x.event_id = done.event_id AND x.destination = done.destination AND x.reason = 'failed'),
	streak AS (
		UPDATE hookline_destinations s SET failure_streak = 0
		FROM (SELECT DISTINCT source, destination FROM done) f
		WHERE s.source = f.source AND s.name = f.destination AND s.failure_streak > 0 AND s.circuit = 'closed'),
	job AS (` + deleteRunningJobsSQL("done", "done.job_id", "(SELECT count(*) FROM ev) >= 0") + `)
	SELECT key FROM claim`
}

// deleteEarlierDeathSQL deletes the dead items of reason failed of an
// event's destination (SQL expressions): a destination that dies again (a
// provider's re-delivery of a dead event failed as well) keeps one such
// item, the newest. Items of reason duplicate are each a delivery and stay.
func deleteEarlierDeathSQL(source, eventID, destination string) string {
	return `DELETE FROM hookline_dead WHERE source = ` + source + ` AND event_id = ` + eventID +
		` AND destination = ` + destination + ` AND reason = 'failed'`
}

// deadFromEventSQL moves a waiting destination of an event to the dead set
// (reason failed, last error $4), copying its stored payload (empty if
// retention pruned it). Source $1, event_id $2, destination $3.
var deadFromEventSQL = `WITH r AS (
		UPDATE hookline_event_destinations SET state = 'dead', last_error = $4
		WHERE source = $1 AND event_id = $2 AND destination = $3 AND state = 'queued'
		RETURNING source, event_id, destination, attempts, delivery_id, item_offset, item_length)
	, earlier AS (` + deleteEarlierDeathSQL("$1", "$2", "$3") + ` AND EXISTS (SELECT 1 FROM r))
	INSERT INTO hookline_dead (source, event_id, destination, event_type, reason, attempts, last_error, delivery_id, content_type, headers, payload)
	SELECT r.source, r.event_id, r.destination, COALESCE(e.event_type, ''), 'failed', r.attempts, $4, r.delivery_id,
		COALESCE(d.content_type, ''), COALESCE(d.headers, '{}'), COALESCE(hookline_item(d.body, r.item_offset, r.item_length), '')
	FROM r LEFT JOIN hookline_deliveries d ON d.id = r.delivery_id
		LEFT JOIN hookline_events e ON e.source = r.source AND e.event_id = r.event_id`

// stmt are the worker's, the clean-up's and the dead set's fixed statements.
var stmt = struct {
	// Worker: an attempt failed (source $1, event_id $2, destination $3,
	// last error $4; the attempt's n $5, status $6, duration $7, error $8).
	markRetry string
	// Worker: an attempt was cut short by this worker's own stop, or never
	// started: as markRetry, and the attempt is given back to the budget
	// (job_attempts); $9 false (it never reached the destination) gives it
	// back to the destination's count (attempts) too, so the next attempt
	// carries the same Hookline-Attempt.
	markInterrupted string
	// Worker: the last attempt failed: the destination and its dead item
	// (as markRetry, then $9 type, $10 delivery id, $11 content type, $12
	// headers, $13 payload).
	markDead string
	// Worker: a destination no worker can claim goes dead (deadFromEventSQL).
	deadUnclaimed string
	// Worker: whether the event's destination row exists ($1, $2, $3).
	destinationExists string
	// Worker: a job found its destination completed, under on_duplicate:
	// reject ($1 source, $2 event_id, $3 destination).
	deadDuplicate string

	// Clean-up.
	pruneDeliveries, pruneContentKeys, pruneAttempts, pruneLines, pruneInstances string

	// Instances (orphans.go): an instance's record written ($1 id, $2 the
	// queues it configures, $3 those its workers run, $4 the configured
	// queues' bounds in µs) and marked stopped
	// ($1); every record, with whether it is live (renewed within $1 µs,
	// not stopped) and, if not, whether its queues are still its own
	// (stopped less than $2 µs ago, or killed: last renewed less than $3
	// µs ago).
	seeInstance, leaveInstance, instances string

	// Dead set.
	deadItemColumns, getDeadItem, deleteDeadItem, lockDeadItem, requeueDeadItem, restartBudget string

	// Event lookup: the event ($1, $2; $3 is unused), its destinations
	// (with whether each has a live claim; $3 is the claim key prefix),
	// its attempts log.
	lookupEvent, lookupDestinations, lookupAttempts string
	// Metrics: items in the dead set by source and reason; waiting
	// deliveries by source and destination.
	deadItemCounts, queuedCounts string
}{
	markRetry: `WITH r AS (
			UPDATE hookline_event_destinations SET state = 'queued', last_error = $4
			WHERE source = $1 AND event_id = $2 AND destination = $3)
		` + attemptLogSQL("$1", "$2", "$3", 5, ""),
	markInterrupted: `WITH r AS (
			UPDATE hookline_event_destinations SET state = 'queued', last_error = $4, job_attempts = greatest(job_attempts - 1, 0),
				attempts = CASE WHEN $9::boolean THEN attempts ELSE greatest(attempts - 1, 0) END
			WHERE source = $1 AND event_id = $2 AND destination = $3)
		` + attemptLogSQL("$1", "$2", "$3", 5, ""),
	markDead: `WITH r AS (
			UPDATE hookline_event_destinations SET state = 'dead', last_error = $4
			WHERE source = $1 AND event_id = $2 AND destination = $3),
		att AS (` + attemptLogSQL("$1", "$2", "$3", 5, "") + `),
		earlier AS (` + deleteEarlierDeathSQL("$1", "$2", "$3") + `)
		INSERT INTO hookline_dead (source, event_id, destination, event_type, reason, attempts, last_error, delivery_id, content_type, headers, payload)
		VALUES ($1, $2, $3, $9, 'failed', $5, $4, $10, $11, $12, $13)`,
	deadUnclaimed:     deadFromEventSQL,
	destinationExists: `SELECT EXISTS (SELECT 1 FROM hookline_event_destinations WHERE source = $1 AND event_id = $2 AND destination = $3)`,
	deadDuplicate: `INSERT INTO hookline_dead (source, event_id, destination, event_type, reason, attempts, last_error, delivery_id, content_type, headers, payload)
		SELECT r.source, r.event_id, r.destination, e.event_type, 'duplicate', r.attempts,
			CASE WHEN d.id IS NULL THEN 'event already completed (on_duplicate: reject); its payload was pruned by retention'
				ELSE 'event already completed (on_duplicate: reject)' END,
			r.delivery_id, COALESCE(d.content_type, ''), COALESCE(d.headers, '{}'),
			COALESCE(hookline_item(d.body, r.item_offset, r.item_length), '')
		FROM hookline_event_destinations r JOIN hookline_events e ON e.source = r.source AND e.event_id = r.event_id
			LEFT JOIN hookline_deliveries d ON d.id = r.delivery_id
		WHERE r.source = $1 AND r.event_id = $2 AND r.destination = $3`,

	// The stored bodies no waiting destination needs, past retention ($1
	// µs); expired content keys; the attempts log of destinations
	// completed before the retention. 1,000 rows per statement.
	pruneDeliveries: `DELETE FROM hookline_deliveries WHERE id IN (
			SELECT d.id FROM hookline_deliveries d
			WHERE d.received_at < now() - $1::bigint * interval '1 microsecond'
			  AND NOT EXISTS (SELECT 1 FROM hookline_event_destinations r WHERE r.delivery_id = d.id AND r.state <> 'completed')
			LIMIT 1000)`,
	// Ordering lines with nothing waiting that have not moved for $1 µs
	// (their greatest ordering.by is forgotten). The conditions on k are
	// checked again on a row an ingest transaction changed meanwhile.
	pruneLines: `DELETE FROM hookline_order_keys k USING (
			SELECT source, destination, key FROM hookline_order_keys
			WHERE done_seq = last_seq AND updated_at < now() - $1::bigint * interval '1 microsecond' LIMIT 1000) c
		WHERE k.source = c.source AND k.destination = c.destination AND k.key = c.key
		  AND k.done_seq = k.last_seq AND k.updated_at < now() - $1::bigint * interval '1 microsecond'`,
	// The records of instances not renewed, or stopped, $1 µs ago.
	pruneInstances: `DELETE FROM hookline_instances WHERE greatest(seen_at, stopped_at) < now() - $1::bigint * interval '1 microsecond'`,
	seeInstance: `INSERT INTO hookline_instances (id, configures, runs, bounds, seen_at) VALUES ($1, $2, $3, $4, now())
		ON CONFLICT (id) DO UPDATE SET configures = excluded.configures, runs = excluded.runs, bounds = excluded.bounds,
			seen_at = excluded.seen_at, stopped_at = NULL`,
	leaveInstance: `UPDATE hookline_instances SET stopped_at = now() WHERE id = $1`,
	instances: `SELECT configures, runs, bounds,
			stopped_at IS NULL AND seen_at > now() - $1::bigint * interval '1 microsecond' AS live,
			CASE WHEN stopped_at IS NOT NULL THEN stopped_at > now() - $2::bigint * interval '1 microsecond'
				ELSE seen_at > now() - $3::bigint * interval '1 microsecond' END AS protects
		FROM hookline_instances`,
	pruneContentKeys: `DELETE FROM hookline_content_keys WHERE (source, content_key) IN (
			SELECT source, content_key FROM hookline_content_keys WHERE expires_at < now() LIMIT 1000)`,
	pruneAttempts: `DELETE FROM hookline_attempts WHERE id IN (
			SELECT a.id FROM hookline_attempts a
			WHERE a.at < now() - $1::bigint * interval '1 microsecond'
			  AND NOT EXISTS (SELECT 1 FROM hookline_event_destinations r
				WHERE r.source = a.source AND r.event_id = a.event_id AND r.destination = a.destination AND r.state <> 'completed')
			LIMIT 1000)`,

	deadItemColumns: `id, source, event_id, destination, event_type, reason, attempts, last_error, dead_at`,
	getDeadItem: `SELECT id, source, event_id, destination, event_type, reason, attempts, last_error, dead_at, content_type, headers, payload, delivery_id
		FROM hookline_dead WHERE id = $1`,
	deleteDeadItem: `DELETE FROM hookline_dead WHERE id = $1`,
	lockDeadItem:   `SELECT source, event_id, destination, reason, clock_timestamp() FROM hookline_dead WHERE id = $1 FOR UPDATE`,
	// The item leaves the dead set and its destination is queued again, its
	// counts kept; the event is created if missing. What is forwarded is
	// the item's payload, from the delivery it came in with (its
	// Hookline-Delivery-Id) while that delivery is stored and holds those
	// bytes (the whole body, or a batch item found in it: kept); else from
	// a copy of the payload (so a retry works after retention pruned the
	// original), stored under the original's id when that id is free and
	// no other event's batch item points into it, else under a new id, of
	// the origin and in the trace of the original when it is still stored.
	requeueDeadItem: `WITH dead AS (
			DELETE FROM hookline_dead WHERE id = $1
			RETURNING source, event_id, destination, event_type, content_type, headers, payload, delivery_id),
		kept AS (
			SELECT o.id,
				CASE WHEN o.body = dead.payload THEN NULL ELSE position(dead.payload IN o.body) - 1 END AS item_offset,
				CASE WHEN o.body = dead.payload THEN NULL ELSE length(dead.payload) END AS item_length
			FROM dead JOIN hookline_deliveries o ON o.id = dead.delivery_id
			WHERE o.body = dead.payload OR (length(dead.payload) > 0 AND position(dead.payload IN o.body) > 0)),
		copy AS (
			INSERT INTO hookline_deliveries (id, source, content_type, headers, body, origin, traceparent)
			SELECT CASE WHEN o.id IS NULL AND dead.delivery_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM hookline_event_destinations x
					WHERE x.delivery_id = dead.delivery_id AND x.item_offset IS NOT NULL)
				THEN dead.delivery_id ELSE nextval(pg_get_serial_sequence('hookline_deliveries', 'id')) END,
				dead.source, dead.content_type, dead.headers, dead.payload, COALESCE(o.origin, 'webhook'), o.traceparent
			FROM dead LEFT JOIN hookline_deliveries o ON o.id = dead.delivery_id
			WHERE NOT EXISTS (SELECT 1 FROM kept)
			RETURNING id, NULL::integer AS item_offset, NULL::integer AS item_length),
		deliv AS (SELECT * FROM kept UNION ALL SELECT * FROM copy),
		ev AS (
			INSERT INTO hookline_events AS e (source, event_id, event_type, delivery_id)
			SELECT dead.source, dead.event_id, dead.event_type, deliv.id FROM dead, deliv
			ON CONFLICT (source, event_id) DO UPDATE SET
				event_type = CASE WHEN excluded.event_type <> '' THEN excluded.event_type ELSE e.event_type END
			RETURNING 1)
		INSERT INTO hookline_event_destinations AS r (source, event_id, destination, delivery_id, item_offset, item_length)
		SELECT dead.source, dead.event_id, dead.destination, deliv.id, deliv.item_offset, deliv.item_length FROM dead, deliv
		WHERE (SELECT count(*) FROM ev) >= 0
		ON CONFLICT (source, event_id, destination) DO UPDATE SET
			state        = 'queued',
			delivery_id  = excluded.delivery_id,
			item_offset  = excluded.item_offset,
			item_length  = excluded.item_length,
			queued_at    = now(),
			completed_at = NULL,
			dedup_until  = NULL,
			order_seq    = NULL,
			skipped      = NULL`,
	restartBudget: `UPDATE hookline_event_destinations SET job_attempts = 0 WHERE source = $1 AND event_id = $2 AND destination = $3`,

	lookupEvent: `SELECT e.source, e.event_id, e.event_type, e.state, e.deliveries, e.attempts, e.first_received_at, e.completed_at,
			COALESCE(d.origin, 'webhook'), COALESCE(d.traceparent, '')
		FROM hookline_event_states e LEFT JOIN hookline_deliveries d ON d.id = e.delivery_id
		WHERE e.source = $1 AND e.event_id = $2`,
	lookupDestinations: `SELECT r.destination, r.state, r.attempts, r.last_error, r.completed_at,
			COALESCE((SELECT c.state = 'processing' AND c.expires_at > now() FROM ` + ClaimsTable + ` c
				WHERE c.key = $3 || r.destination || ':' || r.event_id), false),
			(SELECT x.id FROM hookline_dead x WHERE x.source = r.source AND x.event_id = r.event_id AND x.destination = r.destination
			 ORDER BY x.reason = 'failed' DESC, x.dead_at DESC, x.id DESC LIMIT 1),
			COALESCE(r.order_key, ''), COALESCE(r.skipped, '')
		FROM hookline_event_destinations r WHERE r.source = $1 AND r.event_id = $2 ORDER BY r.destination`,
	lookupAttempts: `SELECT n, destination, at, status, duration_ms, error FROM hookline_attempts
		WHERE source = $1 AND event_id = $2 ORDER BY at, id LIMIT 1000`,
	deadItemCounts: `SELECT source, reason, count(*) FROM hookline_dead GROUP BY 1, 2`,
	queuedCounts:   `SELECT source, destination, count(*) FROM hookline_event_destinations WHERE state = 'queued' GROUP BY 1, 2`,
}

// strandedSQL finds, in one window of waiting destinations (queue order,
// after the cursor ($2, $3, $4, $5), at most $6, queued more than $1 µs
// ago), those without an active job, then one row for the window's last
// one (the next cursor) with the window's size. The anti-join is in a WHERE
// so that PostgreSQL probes River's unique index per row.
//
// A destination with a place in an ordering line answers its key
// (line_key): its job is re-enqueued pending, and the line advanced, which
// wakes it if it is the head.
var strandedSQL = `WITH cand AS MATERIALIZED (
		SELECT r.source, r.event_id, r.destination, r.queued_at, CASE WHEN r.order_seq IS NOT NULL THEN r.order_key END AS line_key
		FROM hookline_event_destinations r
		WHERE r.state = 'queued' AND r.queued_at < now() - $1::bigint * interval '1 microsecond'
		  AND (r.queued_at, r.source, r.event_id, r.destination) > ($2::timestamptz, $3::text, $4::text, $5::text)
		ORDER BY r.queued_at, r.source, r.event_id, r.destination LIMIT $6)
	SELECT c.source, c.event_id, c.destination, c.queued_at, c.line_key, false AS last, 0::bigint AS seen FROM cand c
	WHERE NOT ` + hasActiveJobSQL("c.source", "c.event_id", "c.destination") + `
	UNION ALL
	SELECT * FROM (SELECT source, event_id, destination, queued_at, NULL::text, true, count(*) OVER () FROM cand
		ORDER BY queued_at DESC, source DESC, event_id DESC, destination DESC LIMIT 1) l`

// The dead set's statements over a filter: where is DeadFilter.where's
// condition, whose parameters come first.

// listDeadSQL is one page, newest first; $n is the page size.
func listDeadSQL(where string, n int) string {
	return `SELECT ` + stmt.deadItemColumns + ` FROM hookline_dead WHERE ` + where +
		` ORDER BY dead_at DESC, id DESC LIMIT $` + strconv.Itoa(n)
}

func countDeadSQL(where string) string {
	return `SELECT count(*) FROM hookline_dead WHERE ` + where
}

// snapshotDeadSQL is the highest id and the count of the matching items.
func snapshotDeadSQL(where string) string {
	return `SELECT COALESCE(max(id), 0), count(*) FROM hookline_dead WHERE ` + where
}

// bulkRetryBatchSQL locks the next batch: ids after $1, up to $2, at most $3.
func bulkRetryBatchSQL(where string) string {
	return `SELECT id FROM hookline_dead WHERE id > $1 AND id <= $2 AND ` + where + `
		ORDER BY id LIMIT $3 FOR UPDATE SKIP LOCKED`
}

// bulkDeleteSQL deletes the next batch: ids up to $1, at most $2.
func bulkDeleteSQL(where string) string {
	return `DELETE FROM hookline_dead WHERE id IN (
		SELECT id FROM hookline_dead WHERE id <= $1 AND ` + where + `
		ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED)`
}

// Ordering lines (hookline_order_keys; ordering.go). Every statement that
// ends an event's place in a line runs in a transaction that first locks
// the line's row (lockLineSQL) and last moves the line on
// (advanceLineSQL): the lock waits for any ingest transaction adding to
// the line, so the advance, a later statement with a fresh snapshot, sees
// every place given so far.

// lockLineSQL locks a line's row: source $1, destination $2, key $3.
const lockLineSQL = `SELECT 1 FROM hookline_order_keys WHERE source = $1 AND destination = $2 AND key = $3 FOR UPDATE`

// advanceLineSQL moves a line (source $1, destination $2, key $3) on:
// done_seq becomes the place before the first one still queued (every
// place when none is), and the job of the place after it, the new head, if
// it waits (pending), becomes available; River's insert notification wakes
// a worker. When event $4 was forwarded with a 2xx in this very
// transaction (completed at now(), not skipped), its ordering.by ($5, a
// decimal, of kind $6) raises the line's greatest by. With $7 the
// notification goes in this transaction; without, the caller sends it once
// committed (queueWaker). It answers the number of jobs made available (0
// or 1).
var advanceLineSQL = `WITH line AS (
		UPDATE hookline_order_keys k SET ` + lineMovesSQL("$4", "$5::numeric", "$6::text") + `
		WHERE k.source = $1 AND k.destination = $2 AND k.key = $3
		RETURNING k.done_seq),
	head AS (
		SELECT r.event_id FROM hookline_event_destinations r, line
		WHERE r.source = $1 AND r.destination = $2 AND r.order_key = $3 AND r.order_seq = line.done_seq + 1 AND ` + waitingPlaceSQL + `),
	woke AS (` + wakePendingJobSQL("$1", "(SELECT event_id FROM head)", "$2") + `)
	SELECT count(*) FROM (SELECT CASE WHEN $7::bool THEN ` + notifyQueueSQL("woke.queue") + ` END FROM woke) n`

// advanceLinesSQL is advanceLineSQL for several lines at once, each ended
// by one event of a completion batch (distinct lines): arrays $1 sources,
// $2 destinations, $3 keys, $4 event ids, $5 their ordering.by (decimal
// text, NULL elements: none) and $6 its kind, and $7 whether the worker
// that ended the place runs the line's next job itself (chain.go). The
// caller has locked the lines (lockLinesSQL) earlier in the transaction.
// It answers, per job handed on, a row: for a job taken (running, for
// runner $8), its line's key, its columns (takenColumns) and the pending
// job of the place after it, if any (pendingJobSQL, whose claim the next
// completion may take with it: claimTakenManyStartSQL); for a job made
// available, no key and only its queue among the columns
// (noJobColumnsSQL), the caller's to notify once committed.
var advanceLinesSQL = `WITH l AS MATERIALIZED (
		SELECT u.source, u.destination, u.key, u.event_id, u.by::numeric AS by, u.by_kind, u.chain
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bool[])
			AS u(source, destination, key, event_id, by, by_kind, chain)),
	line AS (
		UPDATE hookline_order_keys k SET ` + lineMovesSQL("l.event_id", "l.by", "l.by_kind") + `
		FROM l WHERE k.source = l.source AND k.destination = l.destination AND k.key = l.key
		RETURNING k.source, k.destination, k.key, k.done_seq, l.chain),
	head AS MATERIALIZED (
		SELECT r.source, r.event_id, r.destination, r.order_seq, line.key, line.chain FROM hookline_event_destinations r JOIN line
			ON r.source = line.source AND r.destination = line.destination AND r.order_key = line.key AND r.order_seq = line.done_seq + 1
		WHERE ` + waitingPlaceSQL + `),
	woke AS (` + wakePendingJobsSQL("(SELECT * FROM head WHERE NOT chain) h", "h.source", "h.event_id", "h.destination") + `),
	took AS (` + takePendingJobsSQL("(SELECT * FROM head WHERE chain) h", "h.source", "h.event_id", "h.destination", "$8::text",
	"h.key, (SELECT "+pendingJobSQL("r.source", "r.event_id", "r.destination")+` FROM hookline_event_destinations r
			WHERE r.source = h.source AND r.destination = h.destination AND r.order_key = h.key AND r.order_seq > h.order_seq
			  AND `+waitingPlaceSQL+`
			ORDER BY r.order_seq LIMIT 1) AS after`) + `)
	SELECT NULL::text AS key, ` + noJobColumnsSQL("queue") + `, NULL::jsonb AS after FROM woke
	UNION ALL SELECT key, ` + takenColumns + `, after FROM took`

// lockLinesSQL locks the rows of several lines (arrays $1 sources, $2
// destinations, $3 keys) in key order, the order ingest takes them in.
const lockLinesSQL = `SELECT 1 FROM hookline_order_keys k
	JOIN unnest($1::text[], $2::text[], $3::text[]) AS u(source, destination, key)
		ON k.source = u.source AND k.destination = u.destination AND k.key = u.key
	ORDER BY k.source, k.destination, k.key FOR UPDATE OF k`

// lineMovesSQL is the SET list that moves line k on (see advanceLineSQL):
// eventID, by and kind are SQL expressions for the event that ended its
// place (by: numeric, kind: text). The first waiting place is looked for
// after done_seq only: every place up to it has ended, and an ended place
// never waits again (a re-queued event leaves its line). The line's index
// keeps the entries of ended places until vacuum removes them; a search
// from the line's start stepped over all of them, on a hot key more at
// every advance.
func lineMovesSQL(eventID, by, kind string) string {
	raises := raisesBySQL(eventID, by, kind)
	return `done_seq = COALESCE((SELECT min(r.order_seq) - 1 FROM hookline_event_destinations r
				WHERE r.source = k.source AND r.destination = k.destination AND r.order_key = k.key
				  AND r.order_seq > k.done_seq AND ` + waitingPlaceSQL + `), k.last_seq),
			max_by      = CASE WHEN ` + raises + ` THEN ` + by + ` ELSE k.max_by END,
			max_by_kind = CASE WHEN ` + raises + ` THEN ` + kind + ` ELSE k.max_by_kind END,
			updated_at  = now()`
}

// waitingPlaceSQL is true for a row r that holds a place in its line and
// is queued, written as the predicate of the line's index
// (hookline_event_destinations_line, migration 010) and without
// state = 'queued', so that no plan, however stale its statistics, reads
// the destination's whole queue through hookline_event_destinations_queued.
const waitingPlaceSQL = `r.order_seq IS NOT NULL AND r.state <> 'completed' AND r.state <> 'dead'`

// raisesBySQL: the event (eventID) was forwarded in this transaction and
// its by (kind) is greater than line k's (or the line has none).
func raisesBySQL(eventID, by, kind string) string {
	return `(` + by + ` IS NOT NULL AND (k.max_by IS NULL OR (k.max_by_kind = ` + kind + ` AND ` + by + ` > k.max_by))
				AND EXISTS (SELECT 1 FROM hookline_event_destinations r
					WHERE r.source = k.source AND r.event_id = ` + eventID + ` AND r.destination = k.destination AND r.state = 'completed'
					  AND r.completed_at = now() AND r.skipped IS NULL))`
}

// raiseBySQL raises the greatest by of line (source $1, destination $2,
// key $3) with that of event $4 ($5, a decimal, of kind $6) when the event
// was forwarded with a 2xx in this very transaction without holding a
// place in the line (an operator's retry); the line does not move.
var raiseBySQL = `UPDATE hookline_order_keys k SET max_by = $5::numeric, max_by_kind = $6::text
	WHERE k.source = $1 AND k.destination = $2 AND k.key = $3 AND ` + raisesBySQL("$4", "$5::numeric", "$6::text")

// lineOfSQL is the line a destination row holds a place in (source $1,
// event_id $2, destination $3): its key, or no row.
const lineOfSQL = `SELECT order_key FROM hookline_event_destinations
	WHERE source = $1 AND event_id = $2 AND destination = $3 AND order_seq IS NOT NULL`

// behindLinesSQL lists up to $2 lines with places not yet ended that have
// not moved for $1 µs, least recently moved first: the clean-up advances
// them, which repairs a line whose advance was lost and wakes a head whose
// job waits.
const behindLinesSQL = `SELECT source, destination, key FROM hookline_order_keys
	WHERE done_seq < last_seq AND updated_at < now() - $1::bigint * interval '1 microsecond'
	ORDER BY updated_at LIMIT $2`
