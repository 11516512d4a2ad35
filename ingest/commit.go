package ingest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/hookline/hookline/jobs"
)

// Delivery is one verified HTTP delivery on its way to Postgres: the exact
// raw body, the headers a replay needs, and the events resolved from it (one,
// or one per batch item).
type Delivery struct {
	Source      *Source
	ReceivedAt  time.Time
	ContentType string
	Headers     map[string][]string
	Body        []byte
	Events      []DeliveryEvent
}

// DeliveryEvent is one event of a delivery. A batch item's bytes are
// Body[Offset:Offset+Length]; Length < 0 means the whole body.
type DeliveryEvent struct {
	ID     string
	Type   string
	Offset int
	Length int
	// ContentKey digests the signed content when the id is not signed
	// (providers.ContentKeyer); nil otherwise. Within the source's dedup
	// window a second event with the same content key is a duplicate.
	ContentKey []byte
}

// Status of an event at ingest.
const (
	StatusAccepted  = "accepted"
	StatusDuplicate = "duplicate"
)

// EventResult is what happened to one event of a delivery.
type EventResult struct {
	EventID string `json:"event_id"`
	Status  string `json:"status"`
	// firstSeen is when the event was first received (duplicates only), for
	// the redelivery-gap histogram.
	firstSeen time.Time
}

// commitFunc stores deliveries; results[i] answers deliveries[i].
type commitFunc func(ctx context.Context, ds []*Delivery) ([][]EventResult, error)

// store writes deliveries durably: deliveries, events, River jobs and dead
// items for rejected duplicates, all in one transaction per call.
type store struct {
	pool  *pgxpool.Pool
	river *river.Client[pgx.Tx]

	lastNotify atomic.Int64 // UnixNano of the last batch that notified River's workers
}

type eventRow struct {
	d     *Delivery
	ev    DeliveryEvent
	di    int // index of the delivery in the call
	ei    int // index of the event in the delivery
	deliv int64
	count int  // receipts of this key in the call
	first bool // first occurrence of its key in the call
	fresh bool
	// contentDup: the event replays the signed content of another event
	// (another id) accepted within the dedup window.
	contentDup bool
	state      string
	received   time.Time
	status     string
}

func key(source, id string) string { return source + "\x00" + id }

// commit stores ds in one transaction and returns each delivery's results.
// Duplicates within ds and against existing events are resolved exactly as
// they would be one by one: the first occurrence of a key decides, later ones
// are duplicates. This is the naive mode's transaction, the textbook one:
// pgx's BEGIN, the store statement, River's InsertManyTx, COMMIT, each its
// own round trip.
func (s *store) commit(ctx context.Context, ds []*Delivery) ([][]EventResult, error) {
	var out [][]EventResult
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		out, err = s.commitTx(ctx, ds, false, func(ctx context.Context, sql string, args ...any) (pgx.Tx, pgx.Rows, error) {
			rows, err := tx.Query(ctx, sql, args...)
			return tx, rows, err
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// commitPipelined is commit for the group committer, in one round trip: the
// River jobs are inserted by the store statement itself (storeJobsSQL), and
// BEGIN, that statement, River's insert notification and COMMIT go in one
// pipeline (pipeTx). A batch with a reject source, which may need dead items
// for its duplicates, sends COMMIT after them, in a second round trip.
func (s *store) commitPipelined(ctx context.Context, ds []*Delivery) ([][]EventResult, error) {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Release() // a connection left in a transaction is destroyed, not reused
	opts := pipeOpts{commit: !anyReject(ds)}
	if s.notifyDue(time.Now()) {
		opts.after = []string{jobs.InsertNotifySQL}
	}
	var tx *pipeTx
	out, err := s.commitTx(ctx, ds, true, func(ctx context.Context, sql string, args ...any) (pgx.Tx, pgx.Rows, error) {
		var rows pgx.Rows
		var err error
		tx, rows, err = beginPipelined(ctx, c.Conn(), sql, opts, args...)
		return tx, rows, err
	})
	if err != nil {
		if tx != nil {
			_ = tx.Rollback(ctx)
		}
		return nil, err
	}
	// COMMIT now, or, if it went with the store statement, its outcome.
	if err := tx.Commit(ctx); err != nil {
		return nil, err
	}
	return out, nil
}

// notifyEvery is how often at most the group committer wakes River's
// workers: River's own insert notifies a queue at most once per its client's
// FetchCooldown (jobs.NewClient: 20 ms). A notification holds a global lock
// while its transaction commits, so one per batch would serialize commits.
// As with River's, a turn is taken before the batch commits: if that batch
// fails, jobs of the next ones in the same 20 ms wait for the workers' poll
// (jobs.NewClient: FetchPollInterval 200 ms).
const notifyEvery = 20 * time.Millisecond

// notifyDue reports whether the batch committing at now sends River's insert
// notification, and if so takes the turn.
func (s *store) notifyDue(now time.Time) bool {
	last := s.lastNotify.Load()
	return now.UnixNano()-last >= int64(notifyEvery) && s.lastNotify.CompareAndSwap(last, now.UnixNano())
}

// storeSQL writes a batch in one statement (one round trip): it draws the
// delivery ids from the sequence, inserts the deliveries, and upserts one
// event row per distinct key, pointing at its delivery by ordinal ($10). The
// first row answers the delivery ids in order; the others the events.
//
// The bodies travel as one bytea ($14, last) cut by offset and length ($5, $6):
// encoding a bytea[] of n bodies costs the client several copies of them
// (the array is built in a growing buffer), which showed up as the largest
// allocation of the ingest path.
//
// An event is re-queued (a provider retry) when it is dead, or completed and
// past its dedup window; otherwise an existing event is a duplicate
// candidate, confirmed by River's unique insert (commitTx, step 2). Event
// rows are written in the order given (sorted by key in Go), so that
// concurrent batches lock rows in the same order and never deadlock.
const storeSQL = storeCTEs + `
SELECT ids, NULL, NULL, NULL, NULL, NULL, NULL::bool FROM ids
UNION ALL
SELECT NULL, source, event_id, state, fresh, first_received_at, NULL FROM ev`

// storeJobsSQL is storeSQL that also inserts the events' River jobs, the
// group committer's statement: the whole transaction is one round trip.
// Each first occurrence of a key ($7, $8) gets its job row ($17 args, $18
// max_attempts, $19 unique key: jobs.NewEventJob), unless its event is
// completed within its dedup window; River's own insert statement
// (JobInsertFastMany) decides the rest: on a job already waiting or running
// for the event (River's unique index, until executed) nothing is inserted,
// and the event is a duplicate. The job rows answer (source, event_id,
// skipped as duplicate). $20–$23 are the jobs' priority, queue, unique
// states and kind.
const storeJobsSQL = storeCTEs + `, job AS (
	INSERT INTO river_job (args, created_at, kind, max_attempts, metadata, priority, queue, scheduled_at, state, tags, unique_key, unique_states)
	SELECT j.args, now(), $23, j.max_attempts, '{}', $20, $21, now(), 'available', '{}', j.unique_key, $22::int::bit(8)
	FROM unnest($7::text[], $8::text[], $17::jsonb[], $18::int2[], $19::bytea[]) WITH ORDINALITY
		AS j(source, event_id, args, max_attempts, unique_key, ord)
		JOIN ev ON ev.source = j.source AND ev.event_id = j.event_id
	WHERE ev.fresh OR ev.state <> 'completed'
	ORDER BY j.ord
	ON CONFLICT (unique_key)
		WHERE unique_key IS NOT NULL AND unique_states IS NOT NULL AND river_job_state_in_bitmask(unique_states, state)
		DO UPDATE SET kind = river_job.kind
	RETURNING args->>'source' AS source, args->>'event_id' AS event_id, xmax <> 0 AS skipped
)
SELECT ids, NULL, NULL, NULL, NULL, NULL, NULL::bool FROM ids
UNION ALL
SELECT NULL, source, event_id, state, fresh, first_received_at, NULL FROM ev
UNION ALL
SELECT NULL, source, event_id, NULL, NULL, NULL, skipped FROM job`

// storeCTEs are the statements storeSQL and storeJobsSQL share.
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
		state       = CASE WHEN e.state = 'dead' OR (e.state = 'completed' AND e.dedup_until <= now()) THEN 'queued' ELSE e.state END,
		delivery_id = CASE WHEN e.state = 'dead' OR (e.state = 'completed' AND e.dedup_until <= now()) THEN excluded.delivery_id ELSE e.delivery_id END,
		item_offset = CASE WHEN e.state = 'dead' OR (e.state = 'completed' AND e.dedup_until <= now()) THEN excluded.item_offset ELSE e.item_offset END,
		item_length = CASE WHEN e.state = 'dead' OR (e.state = 'completed' AND e.dedup_until <= now()) THEN excluded.item_length ELSE e.item_length END,
		event_type  = CASE WHEN e.state = 'dead' OR (e.state = 'completed' AND e.dedup_until <= now()) THEN excluded.event_type ELSE e.event_type END,
		queued_at   = CASE WHEN e.state = 'dead' OR (e.state = 'completed' AND e.dedup_until <= now()) THEN now() ELSE e.queued_at END
	RETURNING e.source, e.event_id, e.state, (e.xmax = 0) OR e.queued_at = now() AS fresh, e.first_received_at
)`

// commitTx runs the statements of commit; first runs the first one and
// returns the transaction the others run in (pgx's, or beginPipelined's).
//
// With direct, the store statement inserts the River jobs (storeJobsSQL);
// otherwise River's InsertManyTx does, in a statement of its own.
func (s *store) commitTx(ctx context.Context, ds []*Delivery, direct bool, first func(context.Context, string, ...any) (pgx.Tx, pgx.Rows, error)) ([][]EventResult, error) {
	bodyBuf, hdrBuf := getBuf(), getBuf()
	defer putBuf(bodyBuf)
	defer putBuf(hdrBuf)
	b := layoutBatch(ds, bodyBuf, hdrBuf)

	// 1. Deliveries, content keys, events (and with direct, River jobs) in
	// one statement.
	args, err := b.storeArgs(direct)
	if err != nil {
		return nil, err
	}
	sql := storeSQL
	if direct {
		sql = storeJobsSQL
	}
	tx, res, err := first(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("store deliveries: %w", err)
	}
	if err := b.scanStore(res, direct); err != nil {
		return nil, fmt.Errorf("store deliveries: %w", err)
	}

	// 2. River jobs, unique until executed (without direct).
	if !direct {
		if err := s.enqueue(ctx, tx, b.firsts); err != nil {
			return nil, err
		}
	}

	// 3. Results, and dead items for duplicates of reject sources.
	out, dead := b.results()
	if len(dead) > 0 {
		if err := deadDuplicates(ctx, tx, b, dead); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// batch is one call's deliveries laid out for the store statement: their
// bodies in one buffer, their headers' JSON in another, and one row per
// event, the first occurrence of each key deciding for the others.
type batch struct {
	ds      []*Delivery
	rows    []*eventRow          // every event of every delivery, in order
	firstOf map[string]*eventRow // by key(source, event_id)
	firsts  []*eventRow          // one per key, sorted by key: the lock order
	src     []string
	recv    []time.Time
	cts     []string
	hdrs    [][]byte
	bodyAt  []int32
	bodyLen []int32
	bodies  []byte
}

// layoutBatch lays ds out in the two reused buffers (per batch they are
// tens of kilobytes) and resolves duplicates within the call: a later
// occurrence of a key, or of a content key under another id, is a duplicate
// of the first.
func layoutBatch(ds []*Delivery, bodyBuf, hdrBuf *[]byte) *batch {
	n := len(ds)
	b := &batch{ds: ds, src: make([]string, n), recv: make([]time.Time, n), cts: make([]string, n), hdrs: make([][]byte, n),
		bodyAt: make([]int32, n), bodyLen: make([]int32, n), firstOf: map[string]*eventRow{}}
	bodies, hjson := (*bodyBuf)[:0], (*hdrBuf)[:0]
	hAt := make([]int, n+1)
	for i, d := range ds {
		b.src[i], b.recv[i], b.cts[i] = d.Source.Name, d.ReceivedAt, d.ContentType
		hjson = appendHeadersJSON(hjson, d.Headers)
		hAt[i+1] = len(hjson)
		b.bodyAt[i], b.bodyLen[i] = int32(len(bodies)+1), int32(len(d.Body)) // substring counts from 1
		bodies = append(bodies, d.Body...)
	}
	for i := range ds {
		b.hdrs[i] = hjson[hAt[i]:hAt[i+1]:hAt[i+1]]
	}
	*bodyBuf, *hdrBuf = bodies, hjson
	b.bodies = bodies

	var contentOwner map[string]string // source + content key → event id
	for di, d := range ds {
		for ei, ev := range d.Events {
			r := &eventRow{d: d, ev: ev, di: di, ei: ei}
			b.rows = append(b.rows, r)
			k := key(d.Source.Name, ev.ID)
			if f, ok := b.firstOf[k]; ok {
				f.count++
				continue
			}
			r.first, r.count = true, 1
			b.firstOf[k] = r
			if ev.ContentKey != nil {
				ck := key(d.Source.Name, string(ev.ContentKey))
				if owner, seen := contentOwner[ck]; seen && owner != ev.ID {
					r.contentDup = true // a replay of an event earlier in this call
					continue
				}
				if contentOwner == nil {
					contentOwner = map[string]string{}
				}
				contentOwner[ck] = ev.ID
			}
			b.firsts = append(b.firsts, r)
		}
	}
	slices.SortFunc(b.firsts, func(x, y *eventRow) int {
		if c := strings.Compare(x.d.Source.Name, y.d.Source.Name); c != 0 {
			return c
		}
		return strings.Compare(x.ev.ID, y.ev.ID)
	})
	return b
}

// storeArgs are the store statement's parameters (storeSQL, or with direct
// storeJobsSQL).
func (b *batch) storeArgs(direct bool) ([]any, error) {
	n := len(b.firsts)
	eSrc, eID, eType := make([]string, n), make([]string, n), make([]string, n)
	eDeliv := make([]int32, n)
	eOff, eLen := make([]*int32, n), make([]*int32, n)
	eCount := make([]int32, n)
	eCKey, eWindow := make([][]byte, n), make([]int64, n)
	for i, r := range b.firsts {
		eSrc[i], eID[i], eType[i], eDeliv[i], eCount[i] = r.d.Source.Name, r.ev.ID, r.ev.Type, int32(r.di+1), int32(r.count)
		if r.ev.Length >= 0 {
			off, l := int32(r.ev.Offset), int32(r.ev.Length)
			eOff[i], eLen[i] = &off, &l
		}
		eCKey[i], eWindow[i] = r.ev.ContentKey, r.d.Source.DedupWindow.Microseconds()
	}
	args := []any{b.src, b.recv, b.cts, b.hdrs, b.bodyAt, b.bodyLen, eSrc, eID, eType, eDeliv, eOff, eLen, eCount, b.bodies, eCKey, eWindow}
	if !direct {
		return args, nil
	}
	jArgs, jKeys, jMax := make([][]byte, n), make([][]byte, n), make([]int16, n)
	for i, r := range b.firsts {
		j, err := jobs.NewEventJob(r.d.Source.Name, r.ev.ID, r.d.Source.MaxAttempts)
		if err != nil {
			return nil, err
		}
		jArgs[i], jKeys[i], jMax[i] = j.Args, j.UniqueKey, j.MaxAttempts
	}
	return append(args, jArgs, jMax, jKeys, jobs.EventJobPriority, jobs.Queue, int32(jobs.EventUniqueStates), jobs.EventArgs{}.Kind()), nil
}

// scanStore reads the store statement's answer: the delivery ids, each
// event's state, and (direct) each job insert's outcome. An event that got
// no row is a replay of another event's signed content (its content key is
// owned by another id): a duplicate.
func (b *batch) scanStore(res pgx.Rows, direct bool) error {
	defer res.Close()
	var ids []int64
	for res.Next() {
		var dids []int64
		var source, id, state *string
		var fresh, skipped *bool
		var first *time.Time
		if err := res.Scan(&dids, &source, &id, &state, &fresh, &first, &skipped); err != nil {
			return err
		}
		switch {
		case source == nil:
			ids = dids
		case state == nil: // a job row (storeJobsSQL)
			r := b.firstOf[key(*source, *id)]
			if r == nil {
				return fmt.Errorf("a job for an event not in the batch (%q, %q)", *source, *id)
			}
			r.status = StatusAccepted
			if *skipped {
				r.status = StatusDuplicate
			}
		default:
			r := b.firstOf[key(*source, *id)]
			r.state, r.fresh, r.received = *state, *fresh, *first
		}
	}
	res.Close()
	if err := res.Err(); err != nil {
		return err
	}
	if len(ids) != len(b.ds) {
		return fmt.Errorf("%d ids for %d deliveries", len(ids), len(b.ds))
	}
	for _, r := range b.rows {
		r.deliv = ids[r.di]
	}
	for _, r := range b.firsts {
		switch {
		case r.state == "": // replays another event's content
			r.contentDup, r.status = true, StatusDuplicate
		case !r.fresh && r.state == "completed": // within its dedup window: no job
			r.status = StatusDuplicate
		case direct && r.status == "":
			return fmt.Errorf("no job answer for event %q of source %q", r.ev.ID, r.d.Source.Name)
		}
	}
	return nil
}

// enqueue asks River for the jobs of the events that need one (the naive
// mode): River's unique insert (until executed) decides between accepted and
// duplicate. A job found for an event we thought new means it is already
// queued: it stays so.
func (s *store) enqueue(ctx context.Context, tx pgx.Tx, firsts []*eventRow) error {
	var params []river.InsertManyParams
	var asked []*eventRow
	var opts map[int]*river.InsertOpts // by MaxAttempts; River only reads them
	for _, r := range firsts {
		if r.status != "" {
			continue // decided by the store statement
		}
		o := opts[r.d.Source.MaxAttempts]
		if o == nil {
			if opts == nil {
				opts = map[int]*river.InsertOpts{}
			}
			o = jobs.InsertOptsFor(r.d.Source.MaxAttempts)
			opts[r.d.Source.MaxAttempts] = o
		}
		params = append(params, river.InsertManyParams{
			Args:       jobs.EventArgs{Source: r.d.Source.Name, EventID: r.ev.ID},
			InsertOpts: o,
		})
		asked = append(asked, r)
	}
	if len(params) == 0 {
		return nil
	}
	results, err := s.river.InsertManyTx(ctx, tx, params)
	if err != nil {
		return fmt.Errorf("enqueue: %w", err)
	}
	for i, jr := range results {
		asked[i].status = StatusAccepted
		if jr.UniqueSkippedAsDuplicate {
			asked[i].status = StatusDuplicate
		}
	}
	return nil
}

// results answers each delivery, and lists the duplicates that go to the
// dead set (reject sources).
func (b *batch) results() ([][]EventResult, []*eventRow) {
	out := make([][]EventResult, len(b.ds))
	for i, d := range b.ds {
		out[i] = make([]EventResult, len(d.Events))
	}
	var dead []*eventRow
	for _, r := range b.rows {
		status := StatusDuplicate
		first := b.firstOf[key(r.d.Source.Name, r.ev.ID)]
		if r.first && !r.contentDup {
			status = r.status
		}
		out[r.di][r.ei] = EventResult{EventID: r.ev.ID, Status: status, firstSeen: first.received}
		if status == StatusDuplicate && r.d.Source.OnDuplicate == OnDuplicateReject {
			dead = append(dead, r)
		}
	}
	return out, dead
}

// deadDuplicates writes the dead items (reason duplicate) of a reject
// source's duplicates, each with its own bytes (a batch item's).
func deadDuplicates(ctx context.Context, tx pgx.Tx, b *batch, dead []*eventRow) error {
	n := len(dead)
	dSrc, dID, dType, dCT := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	dHdr := make([][]byte, n)
	dDeliv := make([]int64, n)
	dPayload := make([][]byte, n)
	for i, r := range dead {
		dSrc[i], dID[i], dType[i], dCT[i], dHdr[i], dDeliv[i] = r.d.Source.Name, r.ev.ID, r.ev.Type, r.d.ContentType, b.hdrs[r.di], r.deliv
		dPayload[i] = r.d.Body
		if r.ev.Length >= 0 {
			dPayload[i] = r.d.Body[r.ev.Offset : r.ev.Offset+r.ev.Length]
		}
	}
	if _, err := tx.Exec(ctx, `INSERT INTO hookline_dead (source, event_id, event_type, reason, last_error, delivery_id, content_type, headers, payload)
		SELECT s, i, t, 'duplicate', 'duplicate delivery rejected (on_duplicate: reject)', d, c, h, p
		FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::jsonb[], $7::bytea[]) AS u(s, i, t, d, c, h, p)`,
		dSrc, dID, dType, dDeliv, dCT, dHdr, dPayload); err != nil {
		return fmt.Errorf("dead-set duplicates: %w", err)
	}
	return nil
}

// anyReject reports whether a delivery comes from an on_duplicate: reject source.
func anyReject(ds []*Delivery) bool {
	for _, d := range ds {
		if d.Source.OnDuplicate == OnDuplicateReject {
			return true
		}
	}
	return false
}

// bufPool holds the buffers commitTx lays a batch's bodies and headers out
// in. Buffers past maxPooledBuf (a batch of large bodies) are left to the GC.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}

const maxPooledBuf = 4 << 20

func getBuf() *[]byte { return bufPool.Get().(*[]byte) }

func putBuf(b *[]byte) {
	if cap(*b) <= maxPooledBuf {
		*b = (*b)[:0]
		bufPool.Put(b)
	}
}

// appendHeadersJSON appends h as a JSON object (keys sorted, each value an
// array of strings), as encoding/json would write it minus HTML escaping,
// which jsonb does not keep anyway. Invalid UTF-8 becomes U+FFFD, as with
// encoding/json. It is several times cheaper than json.Marshal.
func appendHeadersJSON(dst []byte, h map[string][]string) []byte {
	var stack [32]string
	keys := stack[:0]
	for k := range h {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, k)
		dst = append(dst, ':')
		vs := h[k]
		if vs == nil {
			dst = append(dst, "null"...)
			continue
		}
		dst = append(dst, '[')
		for j, v := range vs {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, v)
		}
		dst = append(dst, ']')
	}
	return append(dst, '}')
}

const hexDigits = "0123456789abcdef"

func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, "\\ufffd"...)
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
