package ingest

import "github.com/hookline/hookline/jobs"

// The statements package ingest runs, in one place. River's job rows are
// written through jobs.InsertEventJobsSQL, which owns River's format; the
// rule that re-queues an event (hookline_requeues) is a SQL function of the
// migrations, shared with the workers.

// storeCTEs write a batch's deliveries, content keys, events and the
// events' destinations; storeSQL and storeJobsSQL end with them.
//
//   - d, ins, ids: the delivery ids drawn from the sequence, the deliveries
//     inserted (with their origin, $27: webhook or reconcile, and the W3C
//     traceparent of their ingest span, $28), and their ids in order. The bodies travel as one bytea ($14) cut by offset and
//     length ($5, $6): a bytea[] of n bodies costs the client several
//     copies of them.
//   - ck: the content keys ($15; NULL where the id is signed) of events whose
//     ids are not signed. A key owned by another event within its window
//     ($16 µs from acceptance) keeps its owner; an expired one is taken over.
//   - ev: one event row per distinct key ($7, $8), unless its content key is
//     owned by another event (a replay under a fresh id: the Go side reads
//     the missing row as a duplicate); fresh when it is new.
//   - cand: per event, every destination of its source ($17-$23: the
//     destination, the delivery and item it would forward, whether the event
//     matched its filter; $24-$26: its ordering key and ordering.by, NULL
//     when unordered).
//   - oc, ok, os: ordering. A new event's ordered destinations, and an
//     existing event's that this delivery queues again (rq), take the
//     next places in their key's line (hookline_order_keys, locked and
//     counted up in key order, so places follow commit order; within the
//     batch, arrival order). A place waits (its job is inserted pending)
//     unless it is the line's head: the first of the batch and nothing
//     before it still unfinished (done_seq, read from the locked row).
//   - nd: a new event's matched destinations, queued. rq: an existing
//     event's destinations that hookline_requeues (dead, or completed past
//     their window: a provider's retry), queued again with this delivery,
//     at the end of their key's line (os) like a new event's: a provider's
//     retry is accepted anew. (Should such a destination stop being
//     re-queueable between oc's look and rq's locked update, by an
//     operator's retry at that moment, its place stays empty: an advance
//     steps over places no row holds, and a line that stands still behind
//     one is advanced by the clean-up within a minute or two.)
//     wq: an existing event's destinations still waiting (locked, so that
//     one a worker completes meanwhile is seen completed); their job insert
//     is River's to decide, which restores a job that was lost (pending
//     again if its line has not reached it). Matching is decided once: an
//     existing event keeps the destinations it was routed to. q: all three,
//     each with whether its job waits.
//
// Lock order: workers lock an ordering key's row before the destination
// rows and jobs of its line (jobs/ordering.go), so here too the key rows
// (ok) are locked before rq and wq lock existing destination rows and
// before the job rows: the uncorrelated (SELECT count(*) FROM ok) in their
// WHERE is a one-time filter PostgreSQL evaluates, running ok to
// completion, before it scans.
//
// wq reads each row by its primary key (LATERAL). Its state test is
// written as coalesce(state, the empty string) = 'queued' so that the partial indexes on
// state = 'queued' cannot serve it: a plan cached while the table was
// small may otherwise read every waiting row of the destination per
// duplicate, and ingest slows down as the backlog grows.
//
// Rows are written in the order given (sorted by key in Go), so concurrent
// batches lock rows in the same order and never deadlock; an event's
// destination rows are written only under its event row's lock.
const storeCTEs = `
WITH d AS MATERIALIZED (
	SELECT nextval('hookline_deliveries_id_seq') AS id, u.*
	FROM unnest($1::text[], $2::timestamptz[], $3::text[], $4::jsonb[], $5::int[], $6::int[], $27::text[], $28::text[]) WITH ORDINALITY
		AS u(source, received_at, content_type, headers, body_at, body_len, origin, traceparent, ord)
), ins AS (
	INSERT INTO hookline_deliveries (id, source, received_at, content_type, headers, body, origin, traceparent)
	SELECT id, source, received_at, content_type, headers, substring($14::bytea FROM body_at FOR body_len), origin, NULLIF(traceparent, '') FROM d
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
		received_at = now()
	RETURNING e.source, e.event_id, e.xmax = 0 AS fresh, e.first_received_at
), cand AS MATERIALIZED (
	SELECT c.*, ev.fresh
	FROM unnest($17::text[], $18::text[], $19::text[], $20::int[], $21::int[], $22::int[], $23::bool[], $24::text[], $25::text[], $26::text[])
		WITH ORDINALITY AS c(source, event_id, destination, dord, item_offset, item_length, matched, order_key, order_by, order_by_kind, ord)
		JOIN ev ON ev.source = c.source AND ev.event_id = c.event_id
), oc AS MATERIALIZED (
	SELECT c.source, c.event_id, c.destination, c.order_key,
		row_number() OVER w AS rn, count(*) OVER (PARTITION BY c.source, c.destination, c.order_key) AS n
	FROM cand c WHERE c.order_key IS NOT NULL AND ((c.fresh AND c.matched) OR (NOT c.fresh AND EXISTS (
		SELECT 1 FROM hookline_event_destinations r
		WHERE r.source = c.source AND r.event_id = c.event_id AND r.destination = c.destination
			AND hookline_requeues(r.state, r.dedup_until))))
	WINDOW w AS (PARTITION BY c.source, c.destination, c.order_key ORDER BY c.dord, c.item_offset NULLS FIRST, c.ord)
), ok AS (
	INSERT INTO hookline_order_keys AS k (source, destination, key, last_seq)
	SELECT source, destination, order_key, max(n) FROM oc GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
	ON CONFLICT (source, destination, key) DO UPDATE SET last_seq = k.last_seq + excluded.last_seq, updated_at = now()
	RETURNING k.source, k.destination, k.key, k.last_seq, k.done_seq
), os AS MATERIALIZED (
	SELECT oc.source, oc.event_id, oc.destination, ok.last_seq - oc.n + oc.rn AS seq,
		oc.rn > 1 OR ok.done_seq < ok.last_seq - oc.n AS waits
	FROM oc JOIN ok ON ok.source = oc.source AND ok.destination = oc.destination AND ok.key = oc.order_key
), nd AS (
	INSERT INTO hookline_event_destinations (source, event_id, destination, delivery_id, item_offset, item_length,
		order_key, order_seq, order_by, order_by_kind)
	SELECT c.source, c.event_id, c.destination, ids.ids[c.dord], c.item_offset, c.item_length,
		c.order_key, os.seq, c.order_by::numeric, c.order_by_kind
	FROM cand c CROSS JOIN ids
		LEFT JOIN os ON os.source = c.source AND os.event_id = c.event_id AND os.destination = c.destination
	WHERE c.fresh AND c.matched
	ORDER BY c.ord
	ON CONFLICT DO NOTHING
	RETURNING source, event_id, destination
), rq AS (
	UPDATE hookline_event_destinations r SET state = 'queued', delivery_id = ids.ids[c.dord],
		item_offset = c.item_offset, item_length = c.item_length, queued_at = now(), completed_at = NULL, dedup_until = NULL,
		order_key = CASE WHEN os.seq IS NOT NULL THEN c.order_key ELSE r.order_key END, order_seq = os.seq,
		order_by = CASE WHEN os.seq IS NOT NULL THEN c.order_by::numeric ELSE r.order_by END,
		order_by_kind = CASE WHEN os.seq IS NOT NULL THEN c.order_by_kind ELSE r.order_by_kind END, skipped = NULL
	FROM cand c CROSS JOIN ids
		LEFT JOIN os ON os.source = c.source AND os.event_id = c.event_id AND os.destination = c.destination
	WHERE NOT c.fresh AND r.source = c.source AND r.event_id = c.event_id AND r.destination = c.destination
		AND hookline_requeues(r.state, r.dedup_until) AND (SELECT count(*) FROM ok) >= 0
	RETURNING r.source, r.event_id, r.destination, COALESCE(os.waits, false) AS waits
), wq AS (
	SELECT r.* FROM cand c CROSS JOIN LATERAL (
		SELECT r.source, r.event_id, r.destination,
			r.order_seq IS NOT NULL AND EXISTS (SELECT 1 FROM hookline_order_keys k
				WHERE k.source = r.source AND k.destination = r.destination AND k.key = r.order_key AND r.order_seq > k.done_seq + 1) AS waits
		FROM hookline_event_destinations r
		WHERE r.source = c.source AND r.event_id = c.event_id AND r.destination = c.destination
			AND coalesce(r.state, '') = 'queued'
		FOR UPDATE OF r) r
	WHERE NOT c.fresh AND (SELECT count(*) FROM ok) >= 0
), q AS (
	SELECT nd.source, nd.event_id, nd.destination, COALESCE(os.waits, false) AS waits
	FROM nd LEFT JOIN os ON os.source = nd.source AND os.event_id = nd.event_id AND os.destination = nd.destination
	UNION ALL SELECT * FROM rq
	UNION ALL SELECT * FROM wq
)`

// storeAnswer is the rows every store statement answers with: the delivery
// ids in order ('ids'), each event ('ev': fresh, first received), each
// destination queued ('q': in the fresh column, whether its job waits in
// its ordering line).
const storeAnswer = `
SELECT 'ids' AS kind, ids, NULL::text AS source, NULL::text AS event_id, NULL::text AS destination,
	NULL::bool AS fresh, NULL::timestamptz AS first, NULL::bool AS skipped FROM ids
UNION ALL
SELECT 'ev', NULL, source, event_id, NULL, fresh, first_received_at, NULL FROM ev
UNION ALL
SELECT 'q', NULL, source, event_id, destination, waits, NULL, NULL FROM q`

// storeSQL stores a batch in one statement (the naive mode; River's
// InsertManyTx then inserts the jobs of the destinations queued).
const storeSQL = storeCTEs + storeAnswer

// storeJobsSQL is storeSQL that also inserts the River jobs of the
// destinations queued: the group committer's whole transaction is one round
// trip. Each candidate has its job row ($29 args, $30 max_attempts, $31
// unique key, $32 queue: jobs.NewEventJob), pending when its line has not
// reached it; River's conflict rule decides (a job already waiting or
// running for the destination: nothing inserted, a duplicate). The job rows
// answer ('job': skipped); $33 on are jobs.EventJobParams.
var storeJobsSQL = storeCTEs + `, job AS (` + jobs.InsertEventJobsSQL(`
	SELECT j.args, j.max_attempts, j.unique_key, j.queue, j.ord, q.waits
	FROM unnest($17::text[], $18::text[], $19::text[], $29::jsonb[], $30::int2[], $31::bytea[], $32::text[]) WITH ORDINALITY
		AS j(source, event_id, destination, args, max_attempts, unique_key, queue, ord)
		JOIN q ON q.source = j.source AND q.event_id = j.event_id AND q.destination = j.destination`, 33) + `
)` + storeAnswer + `
UNION ALL
SELECT 'job', NULL, source, event_id, destination, NULL, NULL, skipped FROM job`

// contentOwnerSQL is the event whose signed content has the content key
// ($1 source, $2 key).
const contentOwnerSQL = `SELECT event_id FROM hookline_content_keys WHERE source = $1 AND content_key = $2`

// deadDuplicatesSQL writes the dead items (reason duplicate) of a reject
// source's duplicates, each with its own bytes.
const deadDuplicatesSQL = `INSERT INTO hookline_dead (source, event_id, destination, event_type, reason, last_error, delivery_id, content_type, headers, payload)
	SELECT s, i, dest, t, 'duplicate', 'duplicate delivery rejected (on_duplicate: reject)', d, c, h, p
	FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::jsonb[], $7::bytea[], $8::text[]) AS u(s, i, t, d, c, h, p, dest)`
