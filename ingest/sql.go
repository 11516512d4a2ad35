package ingest

import "github.com/hookline/hookline/jobs"

// The statements package ingest runs, in one place. River's job rows are
// written through jobs.InsertEventJobsSQL, which owns River's format; the
// rule that re-queues an event (hookline_requeues) is a SQL function of the
// migrations, shared with the workers.

// storeCTEs write a batch's deliveries, content keys and events; storeSQL
// and storeJobsSQL end with them.
//
//   - d, ins, ids: the delivery ids drawn from the sequence, the deliveries
//     inserted, and their ids in order. The bodies travel as one bytea ($14)
//     cut by offset and length ($5, $6): a bytea[] of n bodies costs the
//     client several copies of them.
//   - ck: the content keys ($15; NULL where the id is signed) of events whose
//     ids are not signed. A key owned by another event within its window
//     ($16 µs from acceptance) keeps its owner; an expired one is taken over.
//   - ev: one event row per distinct key ($7, $8, pointing at its delivery by
//     ordinal $10), unless its content key is owned by another event (a
//     replay under a fresh id: the Go side reads the missing row as a
//     duplicate). An existing event is re-queued (a provider retry) when
//     hookline_requeues says so; otherwise it is a duplicate candidate,
//     confirmed by the job insert.
//
// Rows are written in the order given (sorted by key in Go), so concurrent
// batches lock rows in the same order and never deadlock.
const storeCTEs = `
WITH d AS MATERIALIZED (
	SELECT nextval('hookline_deliveries_id_seq') AS id, u.*
	FROM unnest($1::text[], $2::timestamptz[], $3::text[], $4::jsonb[], $5::int[], $6::int[]) WITH ORDINALITY
		AS u(source, received_at, content_type, headers, body_at, body_len, ord)
), ins AS (
	INSERT INTO hookline_deliveries (id, source, received_at, content_type, headers, body)
	SELECT id, source, received_at, content_type, headers, substring($14::bytea FROM body_at FOR body_len) FROM d
), ids AS (
	SELECT array_agg(id ORDER BY ord) AS ids FROM d
), ck AS (
	INSERT INTO hookline_content_keys AS k (source, content_key, event_id, expires_at)
	SELECT c.source, c.content_key, c.event_id, now() + c.window_us * interval '1 microsecond'
	FROM unnest($7::text[], $8::text[], $15::bytea[], $16::bigint[]) AS c(source, event_id, content_key, window_us)
	WHERE c.content_key IS NOT NULL
	ORDER BY c.source, c.content_key
	ON CONFLICT (source, content_key) DO UPDATE SET
		event_id   = CASE WHEN k.expires_at <= now() THEN excluded.event_id ELSE k.event_id END,
		expires_at = CASE WHEN k.expires_at <= now() THEN excluded.expires_at ELSE k.expires_at END
	RETURNING k.source, k.content_key, k.event_id
), ev AS (
	INSERT INTO hookline_events AS e (source, event_id, event_type, delivery_id, item_offset, item_length, deliveries)
	SELECT x.source, x.event_id, x.event_type, ids.ids[x.dord], x.item_offset, x.item_length, x.deliveries
	FROM unnest($7::text[], $8::text[], $9::text[], $10::int[], $11::int[], $12::int[], $13::int[], $15::bytea[]) WITH ORDINALITY
		AS x(source, event_id, event_type, dord, item_offset, item_length, deliveries, content_key, ord)
		CROSS JOIN ids
	WHERE NOT EXISTS (SELECT 1 FROM ck WHERE ck.source = x.source AND ck.content_key = x.content_key AND ck.event_id <> x.event_id)
	ORDER BY x.ord
	ON CONFLICT (source, event_id) DO UPDATE SET
		deliveries  = e.deliveries + excluded.deliveries,
		received_at = now(),
		state       = CASE WHEN hookline_requeues(e.state, e.dedup_until) THEN 'queued' ELSE e.state END,
		delivery_id = CASE WHEN hookline_requeues(e.state, e.dedup_until) THEN excluded.delivery_id ELSE e.delivery_id END,
		item_offset = CASE WHEN hookline_requeues(e.state, e.dedup_until) THEN excluded.item_offset ELSE e.item_offset END,
		item_length = CASE WHEN hookline_requeues(e.state, e.dedup_until) THEN excluded.item_length ELSE e.item_length END,
		event_type  = CASE WHEN hookline_requeues(e.state, e.dedup_until) THEN excluded.event_type ELSE e.event_type END,
		queued_at   = CASE WHEN hookline_requeues(e.state, e.dedup_until) THEN now() ELSE e.queued_at END
	RETURNING e.source, e.event_id, e.state, (e.xmax = 0) OR e.queued_at = now() AS fresh, e.first_received_at
)`

// storeSQL stores a batch in one statement (the naive mode; River's
// InsertManyTx then inserts the jobs). The first row answers the delivery
// ids in order; the others the events.
const storeSQL = storeCTEs + `
SELECT ids, NULL, NULL, NULL, NULL, NULL, NULL::bool FROM ids
UNION ALL
SELECT NULL, source, event_id, state, fresh, first_received_at, NULL FROM ev`

// storeJobsSQL is storeSQL that also inserts the events' River jobs: the
// group committer's whole transaction is one round trip. Each first
// occurrence of a key gets its job row ($17 args, $18 max_attempts, $19
// unique key: jobs.NewEventJob), unless its event is completed within its
// dedup window; River's conflict rule decides the rest (a job already
// waiting or running for the event: nothing inserted, a duplicate). The job
// rows answer (source, event_id, skipped); $20 on are jobs.EventJobParams.
var storeJobsSQL = storeCTEs + `, job AS (` + jobs.InsertEventJobsSQL(`
	SELECT j.args, j.max_attempts, j.unique_key, j.ord
	FROM unnest($7::text[], $8::text[], $17::jsonb[], $18::int2[], $19::bytea[]) WITH ORDINALITY
		AS j(source, event_id, args, max_attempts, unique_key, ord)
		JOIN ev ON ev.source = j.source AND ev.event_id = j.event_id
	WHERE ev.fresh OR ev.state <> 'completed'`, 20) + `
)
SELECT ids, NULL, NULL, NULL, NULL, NULL, NULL::bool FROM ids
UNION ALL
SELECT NULL, source, event_id, state, fresh, first_received_at, NULL FROM ev
UNION ALL
SELECT NULL, source, event_id, NULL, NULL, NULL, skipped FROM job`

// deadDuplicatesSQL writes the dead items (reason duplicate) of a reject
// source's duplicates, each with its own bytes.
const deadDuplicatesSQL = `INSERT INTO hookline_dead (source, event_id, event_type, reason, last_error, delivery_id, content_type, headers, payload)
	SELECT s, i, t, 'duplicate', 'duplicate delivery rejected (on_duplicate: reject)', d, c, h, p
	FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::jsonb[], $7::bytea[]) AS u(s, i, t, d, c, h, p)`
