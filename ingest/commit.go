package ingest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/hookline/hookline/internal/dberr"
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
	// Origin is where the delivery came from: OriginWebhook (also when
	// empty) or OriginReconcile.
	Origin string
	// TraceParent is the W3C traceparent of the span that received the
	// delivery; the workers' spans continue its trace. "": none.
	TraceParent string
}

// Origins of a delivery.
const (
	OriginWebhook   = "webhook"
	OriginReconcile = "reconcile"
)

func (d *Delivery) origin() string {
	if d.Origin == "" {
		return OriginWebhook
	}
	return d.Origin
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
	// Matched lists, by index into the source's destinations, those whose
	// filter the event matches: where a new event goes.
	Matched []int
	// OrderKey is the event's ordering key ("" when unordered); OrderBy its
	// ordering.by as a decimal ("" when none), of kind OrderByKind
	// (ByNumber or ByTime).
	OrderKey, OrderBy, OrderByKind string
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

	lastNotify sync.Map // queue → *atomic.Int64: UnixNano of the last batch that notified its workers
}

type eventRow struct {
	d     *Delivery
	ev    DeliveryEvent
	di    int // index of the delivery in the call
	ei    int // index of the event in the delivery
	deliv int64
	count int  // receipts of this key in the call
	first bool // first occurrence of its key in the call
	// contentDup: the event replays the signed content of another event
	// (another id) accepted within the dedup window; owner is that event's
	// id when it is earlier in this call ("": look it up).
	contentDup bool
	owner      string
	stored     bool // the store statement answered for it
	fresh      bool // a new event
	received   time.Time
	queued     []string // destinations the statement queued
	waits      []bool   // per queued destination: its job waits in its ordering line (pending)
	jobs       int      // jobs inserted (not skipped as duplicates)
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

// uncommittedError is a batch's failure that is known to have committed
// nothing: the server ended the session where the answer of a statement
// before COMMIT was due (dberr.SessionEnded), so it never reached COMMIT,
// and the batch may be sent again on another connection.
type uncommittedError struct{ err error }

func (e uncommittedError) Error() string { return e.err.Error() }
func (e uncommittedError) Unwrap() error { return e.err }

// uncommittedIfSessionEnded marks err, read in place of an answer before
// COMMIT's, as uncommitted when the server ended the session. An error in
// place of COMMIT's own answer is never passed here: the transaction may
// have committed and its answer been lost.
func uncommittedIfSessionEnded(err error) error {
	if dberr.SessionEnded(err) {
		return uncommittedError{err}
	}
	return err
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
	if qs := s.notifyDue(ds, time.Now()); len(qs) > 0 {
		opts.after = []string{jobs.InsertNotifySQL(qs...)}
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
		return nil, uncommittedIfSessionEnded(err)
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

// notifyDue returns the queues of ds's destinations whose turn to be
// notified has come, taking the turns.
func (s *store) notifyDue(ds []*Delivery, now time.Time) []string {
	var due []string
	for _, d := range ds {
		for _, ev := range d.Events {
			for _, i := range ev.Matched {
				q := d.Source.Destinations[i].queue
				if !slices.Contains(due, q) && s.takeNotifyTurn(q, now) {
					due = append(due, q)
				}
			}
		}
	}
	return due
}

func (s *store) takeNotifyTurn(queue string, now time.Time) bool {
	v, _ := s.lastNotify.LoadOrStore(queue, new(atomic.Int64))
	last := v.(*atomic.Int64)
	prev := last.Load()
	return now.UnixNano()-prev >= int64(notifyEvery) && last.CompareAndSwap(prev, now.UnixNano())
}

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
	if err := b.scanStore(res); err != nil {
		return nil, fmt.Errorf("store deliveries: %w", err)
	}

	// 2. River jobs, unique until executed (without direct).
	if !direct {
		if err := s.enqueue(ctx, tx, b.firsts); err != nil {
			return nil, err
		}
	}
	b.decide()

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
	origins []string
	traces  []string
}

// layoutBatch lays ds out in the two reused buffers (per batch they are
// tens of kilobytes) and resolves duplicates within the call: a later
// occurrence of a key, or of a content key under another id, is a duplicate
// of the first.
func layoutBatch(ds []*Delivery, bodyBuf, hdrBuf *[]byte) *batch {
	n := len(ds)
	b := &batch{ds: ds, src: make([]string, n), recv: make([]time.Time, n), cts: make([]string, n), hdrs: make([][]byte, n),
		bodyAt: make([]int32, n), bodyLen: make([]int32, n), origins: make([]string, n), traces: make([]string, n), firstOf: map[string]*eventRow{}}
	bodies, hjson := (*bodyBuf)[:0], (*hdrBuf)[:0]
	total := 0
	for _, d := range ds {
		total += len(d.Body)
	}
	if cap(bodies) < total { // sized once: growing by appends would copy large bodies several times
		bodies = make([]byte, 0, total)
	}
	hAt := make([]int, n+1)
	for i, d := range ds {
		b.src[i], b.recv[i], b.cts[i], b.origins[i], b.traces[i] = d.Source.Name, d.ReceivedAt, d.ContentType, d.origin(), d.TraceParent
		h, _ := json.Marshal(d.Headers) //nolint:errchkjson // strings always encode
		hjson = append(hjson, h...)
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
					r.contentDup, r.owner = true, owner // a replay of an event earlier in this call
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
		eOff[i], eLen[i] = itemOf(r.ev)
		eCKey[i], eWindow[i] = r.ev.ContentKey, r.d.Source.DedupWindow.Microseconds()
	}
	args := []any{b.src, b.recv, b.cts, b.hdrs, b.bodyAt, b.bodyLen, eSrc, eID, eType, eDeliv, eOff, eLen, eCount, b.bodies, eCKey, eWindow}
	c, err := b.candidates(direct)
	if err != nil {
		return nil, err
	}
	args = append(args, c.src, c.id, c.dest, c.deliv, c.off, c.len, c.matched, c.orderKey, c.orderBy, c.orderByKind, b.origins, b.traces)
	if !direct {
		return args, nil
	}
	return append(append(args, c.jobArgs, c.jobMax, c.jobKeys, c.jobQueue), jobs.EventJobParams()...), nil
}

// itemOf is an event's batch item (offset, length), nil for a whole body.
func itemOf(ev DeliveryEvent) (*int32, *int32) {
	if ev.Length < 0 {
		return nil, nil
	}
	off, l := int32(ev.Offset), int32(ev.Length)
	return &off, &l
}

// candidates are, per event, every destination of its source: where a new
// event may go (matched) and which destinations of an existing one a
// re-delivery may queue again, with the job each would get.
type candidates struct {
	src, id, dest    []string
	deliv            []int32
	off, len         []*int32
	matched          []bool
	orderKey         []*string
	orderBy          []*string
	orderByKind      []*string
	jobArgs, jobKeys [][]byte
	jobMax           []int16
	jobQueue         []string
}

func (b *batch) candidates(withJobs bool) (*candidates, error) {
	c := &candidates{}
	for _, r := range b.firsts {
		off, l := itemOf(r.ev)
		for i, dst := range r.d.Source.Destinations {
			c.src, c.id, c.dest = append(c.src, r.d.Source.Name), append(c.id, r.ev.ID), append(c.dest, dst.Name)
			c.deliv, c.off, c.len = append(c.deliv, int32(r.di+1)), append(c.off, off), append(c.len, l)
			c.matched = append(c.matched, slices.Contains(r.ev.Matched, i))
			c.orderKey, c.orderBy, c.orderByKind = append(c.orderKey, orNull(r.ev.OrderKey)), append(c.orderBy, orNull(r.ev.OrderBy)),
				append(c.orderByKind, orNull(r.ev.OrderByKind))
			if !withJobs {
				continue
			}
			j, err := jobs.NewEventJob(r.d.Source.Name, r.ev.ID, dst.Name, dst.MaxAttempts)
			if err != nil {
				return nil, err
			}
			c.jobArgs, c.jobKeys = append(c.jobArgs, j.Args), append(c.jobKeys, j.UniqueKey)
			c.jobMax, c.jobQueue = append(c.jobMax, j.MaxAttempts), append(c.jobQueue, j.Queue)
		}
	}
	return c, nil
}

// orNull is s, or SQL NULL when s is empty.
func orNull(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// scanStore reads the store statement's answer: the delivery ids, each
// event (new or not), the destinations queued and (direct) each job
// insert's outcome. An event that got no row is a replay of another
// event's signed content (its content key is owned by another id): a
// duplicate.
func (b *batch) scanStore(res pgx.Rows) error {
	defer res.Close()
	var ids []int64
	for res.Next() {
		var kind string
		var dids []int64
		var source, id, dest *string
		var fresh, skipped *bool
		var first *time.Time
		if err := res.Scan(&kind, &dids, &source, &id, &dest, &fresh, &first, &skipped); err != nil {
			return err
		}
		if kind == "ids" {
			ids = dids
			continue
		}
		r := b.firstOf[key(*source, *id)]
		if r == nil {
			return fmt.Errorf("an answer for an event not in the batch (%q, %q)", *source, *id)
		}
		switch kind {
		case "ev":
			r.stored, r.fresh, r.received = true, *fresh, *first
		case "q":
			r.queued = append(r.queued, *dest)
			r.waits = append(r.waits, fresh != nil && *fresh)
		case "job":
			if !*skipped {
				r.jobs++
			}
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
	return nil
}

// decide sets each event's status: accepted when a job was inserted for one
// of its destinations, or when it is new and matched none (it is complete
// as it stands); otherwise a duplicate.
func (b *batch) decide() {
	for _, r := range b.firsts {
		switch {
		case !r.stored: // replays another event's content
			r.contentDup, r.status = true, StatusDuplicate
		case r.jobs > 0 || (r.fresh && len(r.ev.Matched) == 0):
			r.status = StatusAccepted
		default:
			r.status = StatusDuplicate
		}
	}
}

// enqueue asks River for the jobs of the destinations queued (the naive
// mode): River's unique insert (until executed) decides whether each is
// new. A job found for a destination we thought waiting means it is already
// queued: it stays so.
func (s *store) enqueue(ctx context.Context, tx pgx.Tx, firsts []*eventRow) error {
	var params []river.InsertManyParams
	var asked []*eventRow
	for _, r := range firsts {
		for i, dest := range r.queued {
			opts := jobs.InsertOptsFor(r.d.Source.maxAttempts(dest))
			opts.Pending = r.waits[i]
			params = append(params, river.InsertManyParams{
				Args:       jobs.EventArgs{Source: r.d.Source.Name, EventID: r.ev.ID, Destination: dest},
				InsertOpts: opts,
			})
			asked = append(asked, r)
		}
	}
	if len(params) == 0 {
		return nil
	}
	results, err := s.river.InsertManyTx(ctx, tx, params)
	if err != nil {
		return fmt.Errorf("enqueue: %w", err)
	}
	for i, jr := range results {
		if !jr.UniqueSkippedAsDuplicate {
			asked[i].jobs++
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
// source's duplicates, each with its own bytes (a batch item's). An item
// names the first destination the event matched (the source's first when
// it matched none): retrying it runs that destination again. A replay of
// another event's signed content under a fresh id is that event's
// duplicate, and its item names that event: retrying it runs the event it
// replays (with that event's Idempotency-Key), never a second event made
// of the same content.
func deadDuplicates(ctx context.Context, tx pgx.Tx, b *batch, dead []*eventRow) error {
	n := len(dead)
	dSrc, dID, dType, dCT, dDest := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	dHdr := make([][]byte, n)
	dDeliv := make([]int64, n)
	dPayload := make([][]byte, n)
	for i, r := range dead {
		id := r.ev.ID
		if r.contentDup {
			owner, err := contentOwner(ctx, tx, b, r)
			if err != nil {
				return err
			}
			id = owner
		}
		dSrc[i], dID[i], dType[i], dCT[i], dHdr[i], dDeliv[i] = r.d.Source.Name, id, r.ev.Type, r.d.ContentType, b.hdrs[r.di], r.deliv
		dDest[i] = r.d.Source.Destinations[0].Name
		if len(r.ev.Matched) > 0 {
			dDest[i] = r.d.Source.Destinations[r.ev.Matched[0]].Name
		}
		dPayload[i] = r.d.Body
		if r.ev.Length >= 0 {
			dPayload[i] = r.d.Body[r.ev.Offset : r.ev.Offset+r.ev.Length]
		}
	}
	if _, err := tx.Exec(ctx, deadDuplicatesSQL, dSrc, dID, dType, dDeliv, dCT, dHdr, dPayload, dDest); err != nil {
		return fmt.Errorf("dead-set duplicates: %w", err)
	}
	return nil
}

// contentOwner is the id of the event whose signed content r replays: an
// earlier event of the same call (unless that one is a replay too), or the
// one the content key names (the store statement has just confirmed it, in
// this transaction).
func contentOwner(ctx context.Context, tx pgx.Tx, b *batch, r *eventRow) (string, error) {
	if r.owner != "" {
		if o := b.firstOf[key(r.d.Source.Name, r.owner)]; o == nil || o.stored {
			return r.owner, nil
		}
	}
	var owner string
	if err := tx.QueryRow(ctx, contentOwnerSQL, r.d.Source.Name, r.ev.ContentKey).Scan(&owner); err != nil {
		return "", fmt.Errorf("look up the event a replay duplicates: %w", err)
	}
	return owner, nil
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
