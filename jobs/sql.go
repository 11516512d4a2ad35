package jobs

import "strconv"

// The statements package jobs runs on hookline's own tables, in one place.
// River's tables: riverrow.go. The claims table: package idem, whose claim
// and completion statements the worker's wrap (claimStartSQL, completeSQL)
// so that one round trip claims and starts, or completes, an event.
//
// Shared rules are SQL functions of the migrations, defined once:
// hookline_item (an event's own bytes in its delivery's body) and
// hookline_requeues (whether a new delivery re-queues an event).

// param renders parameter n+i.
func param(n, i int) string { return "$" + strconv.Itoa(n+i) }

// startAttemptSQL counts an attempt of event (source, eventID) by job — over
// the event's whole life (attempts) and within the job's budget
// (job_attempts, which a new job restarts) — and loads its payload. from
// names more FROM items that must yield a row for anything to happen (the
// claim). The event keeps its state: "processing" is what its claim says,
// and leaving state (a column of the partial indexes) alone makes this an
// update of non-indexed columns only, which PostgreSQL can do as a HOT
// update. An event without a stored delivery is not touched.
func startAttemptSQL(source, eventID, job, from string) string {
	return `UPDATE hookline_events e SET attempts = e.attempts + 1,
			job_attempts = CASE WHEN e.job_id = ` + job + ` THEN e.job_attempts + 1 ELSE 1 END, job_id = ` + job + `
		FROM hookline_deliveries d` + from + `
		WHERE e.source = ` + source + ` AND e.event_id = ` + eventID + ` AND d.id = e.delivery_id
		RETURNING e.attempts, e.job_attempts, e.event_type, e.delivery_id, d.content_type, d.headers, d.received_at,
			hookline_item(d.body, e.item_offset, e.item_length) AS body`
}

// claimStartSQL wraps idem's claim statement (parameters $1..$n; one row
// iff the claim was taken) so that the attempt is counted and the payload
// loaded only when the claim was taken. The event's columns are NULL when
// there is no event or no delivery; then nothing but the claim changed.
// Parameters after idem's: source, event_id, job id.
func claimStartSQL(claimSQL string, n int) string {
	return `WITH claim AS (` + claimSQL + `),
	ev AS (` + startAttemptSQL(param(n, 1), param(n, 2), param(n, 3), ", claim") + `)
	SELECT claim.token, claim.expires_at, ev.attempts, COALESCE(ev.job_attempts, 0), ev.event_type, ev.delivery_id,
		ev.content_type, ev.headers, ev.received_at, ev.body
	FROM claim LEFT JOIN ev ON true`
}

// startSQL is startAttemptSQL on its own, for a claim taken by an earlier
// statement of the same transaction: source $1, event_id $2, job id $3.
var startSQL = `WITH ev AS (` + startAttemptSQL("$1", "$2", "$3", "") + `)
	SELECT attempts, job_attempts, event_type, delivery_id, content_type, headers, received_at, body FROM ev`

// completeSQL wraps idem's complete statement (parameters $1..$n, one row
// iff our token still holds) so that everything else depends on it:
//
//   - the event becomes completed (its dedup window starts now);
//   - its dead item of reason failed leaves the dead set;
//   - the River job is marked completed (completeRunningJobSQL).
//
// The job's completion stays in the same statement as the event's: left to
// River's batched completer after Work returns, the job would stay running
// for a moment after the event completed, and a unique insert for the event
// in that moment (an operator's retry joins the active job) would join a job
// that never runs again.
//
// Lock order: ingest locks the event row (its upsert) and then the job row
// (the unique insert), so this statement must lock the event before the job,
// or the two deadlock. Data-modifying CTEs run in no promised order, and a
// join does not force one either (a join whose other side is empty never
// reads the CTE). What does: an uncorrelated scalar subquery in the job
// update's WHERE, (SELECT count(*) FROM ev), is a one-time filter that
// PostgreSQL evaluates — running the event update to completion — before it
// scans the job table. The event update joins the claim, so nothing is
// locked unless the claim was ours.
//
// Parameters after idem's: source, event_id, dedup window (µs), job id.
func completeSQL(claimSQL string, n int) string {
	src, id := param(n, 1), param(n, 2)
	return `WITH claim AS (` + claimSQL + `),
	ev AS (
		UPDATE hookline_events e SET state = 'completed', completed_at = now(),
			dedup_until = now() + ` + param(n, 3) + `::bigint * interval '1 microsecond', last_error = NULL
		FROM claim WHERE e.source = ` + src + ` AND e.event_id = ` + id + `
		RETURNING 1),
	dead AS (
		DELETE FROM hookline_dead x
		WHERE x.source = ` + src + ` AND x.event_id = ` + id + ` AND x.reason = 'failed'
			AND EXISTS (SELECT 1 FROM claim)
		RETURNING 1),
	job AS (` + completeRunningJobSQL(param(n, 4), `(SELECT count(*) FROM ev) >= 0 AND EXISTS (SELECT 1 FROM claim)`) + `)
	SELECT count(*) FROM claim`
}

// deadFromEventSQL moves an event that is still waiting to the dead set
// (reason $reason, last error $3), copying its stored payload (empty if
// retention pruned it). Source $1, event_id $2.
func deadFromEventSQL(reason string) string {
	return `WITH e AS (
			UPDATE hookline_events SET state = 'dead', last_error = $3
			WHERE source = $1 AND event_id = $2 AND state = 'queued'
			RETURNING source, event_id, event_type, attempts, delivery_id, item_offset, item_length)
		INSERT INTO hookline_dead (source, event_id, event_type, reason, attempts, last_error, delivery_id, content_type, headers, payload)
		SELECT e.source, e.event_id, e.event_type, '` + reason + `', e.attempts, $3, e.delivery_id,
			COALESCE(d.content_type, ''), COALESCE(d.headers, '{}'), COALESCE(hookline_item(d.body, e.item_offset, e.item_length), '')
		FROM e LEFT JOIN hookline_deliveries d ON d.id = e.delivery_id`
}

// stmt are the worker's, the clean-up's and the dead set's fixed statements.
var stmt = struct {
	// Worker: an attempt failed (source $1, event_id $2, error $3).
	markRetry string
	// Worker: the last attempt failed: the event and its dead item
	// ($4 type, $5 attempts, $6 delivery id, $7 content type, $8 headers,
	// $9 payload).
	markDead string
	// Worker: an event no worker can claim goes dead (deadFromEventSQL).
	deadUnclaimed string
	eventExists   string
	// Worker: a job found its event completed, under on_duplicate: reject.
	deadDuplicate string

	// Clean-up.
	pruneDeliveries, pruneContentKeys string

	// Dead set.
	deadItemColumns, getDeadItem, deleteDeadItem, lockDeadItem, requeueDeadItem, restartBudget string

	// Event lookup ($3: the event's claim key).
	lookupEvent string
	// Metrics: items in the dead set by source and reason.
	deadItemCounts string
}{
	markRetry: `UPDATE hookline_events SET state = 'queued', last_error = $3 WHERE source = $1 AND event_id = $2`,
	markDead: `WITH e AS (
			UPDATE hookline_events SET state = 'dead', last_error = $3 WHERE source = $1 AND event_id = $2)
		INSERT INTO hookline_dead (source, event_id, event_type, reason, attempts, last_error, delivery_id, content_type, headers, payload)
		VALUES ($1, $2, $4, 'failed', $5, $3, $6, $7, $8, $9)`,
	deadUnclaimed: deadFromEventSQL(ReasonFailed),
	eventExists:   `SELECT EXISTS (SELECT 1 FROM hookline_events WHERE source = $1 AND event_id = $2)`,
	deadDuplicate: `INSERT INTO hookline_dead (source, event_id, event_type, reason, attempts, last_error, delivery_id, content_type, headers, payload)
		SELECT e.source, e.event_id, e.event_type, 'duplicate', e.attempts,
			CASE WHEN d.id IS NULL THEN 'event already completed (on_duplicate: reject); its payload was pruned by retention'
				ELSE 'event already completed (on_duplicate: reject)' END,
			e.delivery_id, COALESCE(d.content_type, ''), COALESCE(d.headers, '{}'),
			COALESCE(hookline_item(d.body, e.item_offset, e.item_length), '')
		FROM hookline_events e LEFT JOIN hookline_deliveries d ON d.id = e.delivery_id
		WHERE e.source = $1 AND e.event_id = $2`,

	// The stored bodies of completed events past retention ($1 µs), and
	// expired content keys, 1,000 rows per statement.
	pruneDeliveries: `DELETE FROM hookline_deliveries WHERE id IN (
			SELECT d.id FROM hookline_deliveries d
			WHERE d.received_at < now() - $1::bigint * interval '1 microsecond'
			  AND NOT EXISTS (SELECT 1 FROM hookline_events e WHERE e.delivery_id = d.id AND e.state <> 'completed')
			LIMIT 1000)`,
	pruneContentKeys: `DELETE FROM hookline_content_keys WHERE (source, content_key) IN (
			SELECT source, content_key FROM hookline_content_keys WHERE expires_at < now() LIMIT 1000)`,

	deadItemColumns: `id, source, event_id, event_type, reason, attempts, last_error, dead_at`,
	getDeadItem: `SELECT id, source, event_id, event_type, reason, attempts, last_error, dead_at, content_type, headers, payload, delivery_id
		FROM hookline_dead WHERE id = $1`,
	deleteDeadItem: `DELETE FROM hookline_dead WHERE id = $1`,
	lockDeadItem:   `SELECT source, event_id, reason, clock_timestamp() FROM hookline_dead WHERE id = $1 FOR UPDATE`,
	// The item leaves the dead set; its payload becomes a new delivery (so a
	// retry works after the original was pruned); the event (created if
	// missing) points at it and is queued again, its counts kept.
	requeueDeadItem: `WITH dead AS (
			DELETE FROM hookline_dead WHERE id = $1
			RETURNING source, event_id, event_type, content_type, headers, payload),
		deliv AS (
			INSERT INTO hookline_deliveries (source, content_type, headers, body)
			SELECT source, content_type, headers, payload FROM dead
			RETURNING id)
		INSERT INTO hookline_events AS e (source, event_id, event_type, delivery_id)
		SELECT dead.source, dead.event_id, dead.event_type, deliv.id FROM dead, deliv
		ON CONFLICT (source, event_id) DO UPDATE SET
			state        = 'queued',
			delivery_id  = excluded.delivery_id,
			item_offset  = NULL,
			item_length  = NULL,
			event_type   = CASE WHEN excluded.event_type <> '' THEN excluded.event_type ELSE e.event_type END,
			queued_at    = now(),
			completed_at = NULL,
			dedup_until  = NULL`,
	restartBudget: `UPDATE hookline_events SET job_attempts = 0 WHERE source = $1 AND event_id = $2`,

	lookupEvent: `SELECT e.source, e.event_id, e.event_type, e.state, e.deliveries, e.attempts,
			e.first_received_at, e.completed_at, e.last_error,
			COALESCE((SELECT c.state = 'processing' AND c.expires_at > now() FROM ` + ClaimsTable + ` c WHERE c.key = $3), false),
			(SELECT d.id FROM hookline_dead d WHERE d.source = e.source AND d.event_id = e.event_id
			 ORDER BY d.reason = 'failed' DESC, d.dead_at DESC, d.id DESC LIMIT 1)
		FROM hookline_events e WHERE e.source = $1 AND e.event_id = $2`,
	deadItemCounts: `SELECT source, reason, count(*) FROM hookline_dead GROUP BY 1, 2`,
}

// strandedSQL finds, in one window of waiting events (queue order, after
// the cursor ($2, $3, $4), at most $5, queued more than $1 µs ago), those
// without an active job, then one row for the window's last event (the next
// cursor) with the window's size. The anti-join is in a WHERE so that
// PostgreSQL probes the job table's args index per event.
var strandedSQL = `WITH cand AS MATERIALIZED (
		SELECT e.source, e.event_id, e.queued_at FROM hookline_events e
		WHERE e.state = 'queued' AND e.queued_at < now() - $1::bigint * interval '1 microsecond'
		  AND (e.queued_at, e.source, e.event_id) > ($2::timestamptz, $3::text, $4::text)
		ORDER BY e.queued_at, e.source, e.event_id LIMIT $5)
	SELECT c.source, c.event_id, c.queued_at, false AS last, 0::bigint AS seen FROM cand c
	WHERE NOT ` + hasActiveJobSQL("c.source", "c.event_id") + `
	UNION ALL
	SELECT * FROM (SELECT source, event_id, queued_at, true, count(*) OVER () FROM cand
		ORDER BY queued_at DESC, source DESC, event_id DESC LIMIT 1) l`

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
