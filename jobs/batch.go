package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/hookline/hookline/idem"
	"github.com/hookline/hookline/internal/groupcommit"
)

// Group commit on the worker side. The jobs running at once hand their
// claims to one committer and their completions to another; each committer
// runs whatever is waiting as one statement (claimManyStartSQL,
// completeManySQL: one round trip, one COMMIT) while the next batch forms,
// and answers each job after that COMMIT. The effects per event are those
// of the per-event statements (claimStartSQL, completeSQL), which remain
// the way for what a batch does not take: a claim with an operator's
// override, a completion inside a Go handler's transaction, a key (or an
// ordering line) twice in one batch, and any batch that failed as a whole
// (each of its jobs then runs its own statement, which reports its own
// outcome). Completions that end places in ordering lines share the batch:
// its transaction locks their lines first and hands them on last.
//
// The statements are prepared once per connection like every other: a plan
// made on a young table's statistics is replaced when autovacuum analyzes
// it. Planning each batch anew (an unnamed statement) cost a quarter of
// Postgres's CPU in the drain benchmark.

// maxWorkerBatch caps the jobs of one claim or completion batch.
const maxWorkerBatch = 256

// workerCommitters is how many claim (and completion) batches may be in
// flight at once: two, so that a batch runs while another commits. With
// one, the committer's connection was the drain's wall (a batch's
// statements run one after another in one backend, then its COMMIT's
// flush) while a third of the two cores stood idle. Batches in flight at
// once lock their rows in the orders those of separate instances do
// (claims and lines in key order).
const workerCommitters = 2

// workerOverlap is groupcommit's Overlap for a process running workers
// jobs at once: a batch starts beside a running one only once half the
// workers wait for it; fewer join the batch that forms meanwhile. Batches
// stay about as large as with one committer, and two run at once only
// when most workers wait on the committer. Measured on 2 cores (make
// bench, processing, 50 workers, builds taking turns), 20,000 events: one
// committer 3,543-4,147 events/s; two with any overlap 4,352-5,362 at
// 0.31-0.33 ms of CPU per event (worker and Postgres); two with an overlap
// of 24 jobs 4,642-5,931 at 0.24-0.32 ms; of 32 or 40, 3,788-4,438; three
// or four committers did no better than two. 100,000 events: one committer
// 3,481-3,973, two with an overlap of 25 4,384 and 5,370.
func workerOverlap(workers int) int { return max(1, workers/2) }

// batches are the worker's two committers.
type batches struct {
	claims      *groupcommit.Committer[claimItem, *startRow]
	completions *groupcommit.Committer[completeItem, completed]
}

// runner is the id the worker's jobs carry in River's attempted_by; wake
// is told the queues of jobs the completions made available; claimFor
// gives the claim of a job taken into a chain, false when it must be
// claimed the usual way (nil: none is claimed ahead).
func newBatches(pool *pgxpool.Pool, claims *idem.Store, workers int, runner func() string, wake func(queue string), observe func(kind string, n int),
	claimFor func(*river.Job[EventArgs]) (claimItem, bool)) *batches {
	claimSQL := claimManyStartSQL(claims.ClaimManySQL)
	completeSQL := completeManySQL(claims.CompleteManySQL)
	ahead := &claimAhead{sql: claimSQL, takenSQL: claimTakenManyStartSQL(claims.ClaimManySQL), item: claimFor, cursor: newTakeCursor()}
	options := func(kind string) groupcommit.Options {
		return groupcommit.Options{MaxBatch: maxWorkerBatch, Committers: workerCommitters, Overlap: workerOverlap(workers),
			Observe: func(n int) { observe(kind, n) }}
	}
	return &batches{
		claims: groupcommit.New(func(ctx context.Context, items []claimItem) ([]*startRow, error) {
			return claimMany(ctx, pool, claimSQL, items)
		}, options("claim")),
		completions: groupcommit.New(func(ctx context.Context, items []completeItem) ([]completed, error) {
			return completeMany(ctx, pool, completeSQL, items, runner(), wake, ahead)
		}, options("complete")),
	}
}

// claimAhead takes, in the transaction that hands a line on, the claims of
// the jobs taken into chains: sql is claimManyStartSQL, takenSQL
// claimTakenManyStartSQL (for claims computed before their jobs are
// taken), item the claim of a job (false: none ahead; the job claims the
// usual way).
type claimAhead struct {
	sql, takenSQL string
	item          func(*river.Job[EventArgs]) (claimItem, bool)
	cursor        *takeCursor
}

// claimItem is one job's claim: idem's claim arguments (key, holder, lease)
// and the destination row it starts.
type claimItem struct {
	key, holder           string
	leaseUS               int64
	source, eventID, dest string
	jobID                 int64
	attempt               int32 // the job's attempt (River's count) the claim is for
}

// startRow is a claim taken and the attempt it started: the claim's token
// and expiry and, when the event's destination and delivery were found,
// the attempt's numbers and the payload (attempts nil otherwise).
type startRow struct {
	token       int64
	expiresAt   time.Time
	attempts    *int
	eventType   *string
	deliveryID  *int64
	contentType *string
	receivedAt  *time.Time
	origin      *string
	line        lineColumns
	ev          Event
}

// targets are the scan targets of startColumns.
func (s *startRow) targets() []any {
	return []any{&s.token, &s.expiresAt, &s.attempts, &s.ev.budgetAttempt, &s.eventType, &s.deliveryID, &s.contentType,
		&s.ev.rawHeaders, &s.receivedAt, &s.ev.Body, &s.origin, &s.line.key, &s.line.inLine, &s.line.by, &s.line.byKind,
		&s.line.stale, &s.ev.traceParent}
}

// event returns the event the attempt works on, false when there was none
// to start (no destination row, or its delivery is gone).
func (s *startRow) event(r *run) (*Event, bool) {
	if s.attempts == nil {
		return nil, false
	}
	ev := &s.ev
	ev.Source, ev.ID, ev.Destination = r.src.Name, r.job.Args.EventID, r.t.Name
	ev.Attempt, ev.Type, ev.DeliveryID, ev.ContentType, ev.ReceivedAt, ev.Origin = *s.attempts, *s.eventType, *s.deliveryID, *s.contentType, *s.receivedAt, *s.origin
	s.line.apply(ev)
	return ev, true
}

// claimMany runs one claim batch: a row per claim taken, nil for a claim
// refused (held) and for a key already in the batch.
func claimMany(ctx context.Context, pool *pgxpool.Pool, sql string, items []claimItem) ([]*startRow, error) {
	args, at := claimManyArgs(items)
	b := &pgx.Batch{}
	for _, q := range batchPlansSQL {
		b.Queue(q)
	}
	b.Queue(sql, args...)
	for _, q := range defaultPlansSQL {
		b.Queue(q)
	}
	br := pool.SendBatch(ctx, b)
	defer br.Close()
	for range batchPlansSQL {
		if _, err := br.Exec(); err != nil {
			return nil, err
		}
	}
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	out, err := scanClaims(rows, at, len(items))
	if err != nil {
		return nil, err
	}
	return out, closeBatch(br, true)
}

// Postgres plans a prepared statement again at every execution for as long
// as it judges a plan for the actual arguments cheaper than a generic one
// (plan_cache_mode auto). For the batch statements, whose arrays hold one
// element when jobs run one at a time (a hot ordering key), that was every
// execution, and planning cost more than running: 0.73 ms against 0.2 ms
// for a claim. The batches run under force_generic_plan — each statement
// planned once per connection, and again when ANALYZE renews a table's
// statistics.
//
// A plan made once is kept while its tables grow, until autovacuum
// analyzes them (a minute or more later). Made while a table is young —
// a fresh database, the first batches of a drain — it may read the whole
// table where the key's index would do: the completion's claim update
// then scanned hookline_claims in every batch, 2-4 ms a batch at 13,000
// claims and more as the table grew (measured: 165 µs per completed event
// on a 100,000-event drain, 72 µs with the index). Every batch statement
// finds its rows by key, so the batches also run with enable_seqscan off,
// which makes the planner take an index wherever one applies whatever the
// statistics say (TestBatchStatementsGenericPlansUseIndexes).
//
// Both settings hold for the batch only: session-wide after the
// statements (reset last, in the same implicit transaction, so that a
// failed batch rolls them back with it), or for its transaction.
var (
	batchPlansSQL      = []string{"SET plan_cache_mode = force_generic_plan", "SET enable_seqscan = off"}
	batchPlansLocalSQL = []string{"SET LOCAL plan_cache_mode = force_generic_plan", "SET LOCAL enable_seqscan = off"}
	defaultPlansSQL    = []string{"RESET plan_cache_mode", "RESET enable_seqscan"}
)

// closeBatch reads a batch's last results (the settings' RESETs, when
// reset) and closes it.
func closeBatch(br pgx.BatchResults, reset bool) error {
	if reset {
		for range defaultPlansSQL {
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
	}
	return br.Close()
}

// claimManyArgs are claimManyStartSQL's arguments for items, and the index
// of the item each key stands for (a key twice: its first item).
func claimManyArgs(items []claimItem) ([]any, map[string]int) {
	at := make(map[string]int, len(items))
	n := len(items)
	keys, holders, sources, ids, dests := make([]string, 0, n), make([]string, 0, n), make([]string, 0, n), make([]string, 0, n), make([]string, 0, n)
	leases, jobIDs := make([]int64, 0, n), make([]int64, 0, n)
	for i, it := range items {
		if _, dup := at[it.key]; dup {
			continue // the long way tells this one it is held
		}
		at[it.key] = i
		keys, holders, leases = append(keys, it.key), append(holders, it.holder), append(leases, it.leaseUS)
		sources, ids, dests, jobIDs = append(sources, it.source), append(ids, it.eventID), append(dests, it.dest), append(jobIDs, it.jobID)
	}
	return []any{keys, holders, leases, sources, ids, dests, jobIDs}, at
}

// scanClaims reads claimManyStartSQL's rows: a row per item whose claim was
// taken, nil for the others.
func scanClaims(rows pgx.Rows, at map[string]int, n int) ([]*startRow, error) {
	defer rows.Close()
	out := make([]*startRow, n)
	for rows.Next() {
		var key string
		row := &startRow{}
		if err := rows.Scan(append([]any{&key}, row.targets()...)...); err != nil {
			return nil, err
		}
		if i, ok := at[key]; ok {
			out[i] = row
		}
	}
	return out, rows.Err()
}

// completeItem is one job's completion: idem's (key, token, dedup window),
// the destination row, its job and the attempt's record.
type completeItem struct {
	key                   string
	token, dedupUS        int64
	source, eventID, dest string
	destDedupUS, jobID    int64
	n, status             int32
	durationMS            int32
	skipped               *string
	line                  *linePlace // the event's place in its ordering line; nil: none
	chain                 bool       // take the line's next job to run it here (chain.go)
	claimNext             bool       // and take its claim too (claimAhead)
	// predicted is the claim of the job the line's advance is expected to
	// take (the place after this one, answered by the advance that took
	// this event's job), taken in the same round trip when it is; nil: none.
	predicted *claimItem
}

// completion is the outcome of one item of a completion batch.
type completion uint8

const (
	completionSkipped completion = iota // not run: a key already in the batch (its own statement decides)
	completionDone                      // completed: the token still held
	completionLost                      // not completed: the token no longer holds (idem.ErrLeaseLost)
)

// completed is an item's completion and, for an item that asked to chain,
// the next job of its line, taken to run by the item's worker (nil: none),
// with its claim taken and attempt started when the item asked for that
// too and the claim was free (nil: the job claims the usual way), and the
// pending job of the place after next's as it will be once taken (after:
// its claim may ride with next's completion; nil: none known).
type completed struct {
	completion
	next      *river.Job[EventArgs]
	nextStart *startRow
	after     *river.Job[EventArgs]
}

// completeMany runs one completion batch. Completions that end a place in
// an ordering line are bracketed, in the same transaction and round trip,
// by the lock of their lines (first, in key order, as ingest takes them)
// and the lines' advance (last), as endPlace does for one; wake is told
// the queue of every job the advance made available, once committed, and
// an item that asked to chain gets its line's next job, taken for runner,
// and, if it asked for that too, the job's claim taken and attempt started
// (ahead; completeClaimingAhead).
func completeMany(ctx context.Context, pool *pgxpool.Pool, sql string, items []completeItem, runner string, wake func(queue string),
	ahead *claimAhead) ([]completed, error) {
	c := newCompletionBatch(items, ahead)
	b := c.batch(sql, runner)
	var woke []string
	var err error
	switch {
	case c.single:
		err = onConn(ctx, pool, func(conn *pgxpool.Conn) (err error) {
			woke, err = c.read(conn.SendBatch(ctx, b))
			return err
		})
	case c.withClaims:
		woke, err = completeClaimingAhead(ctx, pool, b, c.read, c.out, items, ahead)
	default:
		woke, err = c.read(pool.SendBatch(ctx, b))
	}
	c.moveCursor(err)
	if err != nil {
		return nil, err
	}
	for _, q := range woke {
		wake(q)
	}
	return c.out, nil
}

// lineID names an ordering line: a key of a source's destination.
type lineID struct{ source, dest, key string }

// completionBatch is one completion batch being built, sent and read: its
// items, their outcomes, and the arguments of its statements.
type completionBatch struct {
	items []completeItem
	ahead *claimAhead
	out   []completed
	at    map[string]int // the item each claim key stands for
	args  []any          // the completion statement's arguments

	lines    map[lineID]int // the item that ends a place in each line
	lineArgs lineArgs

	// withClaims: some item's next job is to be claimed in this
	// transaction, which is then explicit. wanting holds, per queue (in
	// wantQueues' order), the items that take one of its available jobs.
	withClaims bool
	wantQueues []string
	wanting    map[string][]int

	// single: the predicted claims ride in the first round trip, which
	// commits; predictedAt is the index of each predicted claim's key.
	single      bool
	predicted   []claimItem
	predictedAt map[string]int
	lead        []string           // the statements before the batch's own
	took        map[string]takePos // per queue, the last available job taken
}

// lineArgs are lockLinesSQL's and advanceLinesSQL's arrays, one element
// per line in the batch.
type lineArgs struct {
	sources, dests, keys, events, kinds []string
	bys                                 []*string
	chains                              []bool
}

// newCompletionBatch gathers items into a batch: a key already in it, or a
// second place of one ordering line, is left to its own statement
// (completionSkipped).
func newCompletionBatch(items []completeItem, ahead *claimAhead) *completionBatch {
	n := len(items)
	c := &completionBatch{items: items, ahead: ahead, out: make([]completed, n), at: make(map[string]int, n),
		lines: map[lineID]int{}, wanting: map[string][]int{}}
	keys, sources, ids, dests, skipped := make([]string, 0, n), make([]string, 0, n), make([]string, 0, n), make([]string, 0, n), make([]*string, 0, n)
	tokens, dedups, destDedups, jobIDs := make([]int64, 0, n), make([]int64, 0, n), make([]int64, 0, n), make([]int64, 0, n)
	ns, statuses, durations := make([]int32, 0, n), make([]int32, 0, n), make([]int32, 0, n)
	for i, it := range items {
		if _, dup := c.at[it.key]; dup {
			continue // completionSkipped
		}
		c.want(i)
		if it.line != nil && !c.addLine(i) {
			continue // completionSkipped: one place per line and batch
		}
		c.at[it.key] = i
		c.out[i].completion = completionLost // unless its key comes back
		keys, tokens, dedups = append(keys, it.key), append(tokens, it.token), append(dedups, it.dedupUS)
		sources, ids, dests = append(sources, it.source), append(ids, it.eventID), append(dests, it.dest)
		destDedups, jobIDs = append(destDedups, it.destDedupUS), append(jobIDs, it.jobID)
		ns, statuses, durations, skipped = append(ns, it.n), append(statuses, it.status), append(durations, it.durationMS), append(skipped, it.skipped)
	}
	c.args = []any{keys, tokens, dedups, sources, ids, dests, destDedups, jobIDs, ns, statuses, durations, skipped}
	return c
}

// want records that item i takes an available job of its queue, an
// ordered one when its line has no next job to give, if it may chain and
// claim ahead.
func (c *completionBatch) want(i int) {
	it := c.items[i]
	if !it.chain || !it.claimNext || c.ahead == nil || c.ahead.item == nil {
		return
	}
	q := QueueFor(it.source, it.dest)
	if _, ok := c.wanting[q]; !ok {
		c.wantQueues = append(c.wantQueues, q)
	}
	c.wanting[q] = append(c.wanting[q], i)
	c.withClaims = true
}

// addLine adds item i's place to its line's arguments; false when the
// batch already ends a place of that line.
func (c *completionBatch) addLine(i int) bool {
	it := c.items[i]
	id := lineID{it.source, it.dest, it.line.key}
	if _, dup := c.lines[id]; dup {
		return false
	}
	c.lines[id] = i
	kind := ""
	if it.line.byKind != nil {
		kind = *it.line.byKind
	}
	l := &c.lineArgs
	l.sources, l.dests, l.keys = append(l.sources, it.source), append(l.dests, it.dest), append(l.keys, it.line.key)
	l.events, l.bys, l.kinds, l.chains = append(l.events, it.eventID), append(l.bys, it.line.by), append(l.kinds, kind), append(l.chains, it.chain)
	return true
}

// lined tells whether the batch ends places in ordering lines.
func (c *completionBatch) lined() bool { return len(c.lineArgs.keys) > 0 }

// batch queues the batch's statements: the plans' setting (and BEGIN when
// claims are taken), the lines' lock, the completion (sql), the lines'
// advance, the available jobs taken, and, when every item that takes a
// job knows its claim beforehand, the claims and the COMMIT.
func (c *completionBatch) batch(sql, runner string) *pgx.Batch {
	b := &pgx.Batch{}
	c.lead = batchPlansSQL
	if c.withClaims {
		c.lead = append([]string{"BEGIN"}, batchPlansLocalSQL...)
	}
	for _, q := range c.lead {
		b.Queue(q)
	}
	l := c.lineArgs
	if c.lined() {
		b.Queue(lockLinesSQL, l.sources, l.dests, l.keys)
	}
	b.Queue(sql, c.args...)
	if c.lined() {
		b.Queue(advanceLinesSQL, l.sources, l.dests, l.keys, l.events, l.bys, l.kinds, l.chains, runner)
	}
	if len(c.wantQueues) > 0 {
		counts := make([]int32, 0, len(c.wantQueues))
		for _, q := range c.wantQueues {
			counts = append(counts, int32(len(c.wanting[q])))
		}
		take := takeAvailableJobsSQL
		if c.lined() {
			take = takeAvailableJobsAfterLinesSQL
		}
		priorities, scheduledAts, ids := c.ahead.cursor.args(c.wantQueues)
		b.Queue(take, c.wantQueues, counts, runner, priorities, scheduledAts, ids)
	}
	if c.queuePredicted(b, runner) {
		b.Queue("COMMIT")
	}
	if !c.withClaims {
		for _, q := range defaultPlansSQL {
			b.Queue(q)
		}
	}
	return b
}

// queuePredicted queues the predicted claims when every item that takes a
// next job knows the job its line is to hand on: their claims ride in this
// round trip, which then commits, and the next job of a busy line costs one
// round trip, not two. A prediction that no longer holds (the job was not
// taken here) claims nothing, and the job, if one was taken, claims the
// usual way. The COMMIT is sent with the rest: a statement that fails rolls
// the whole transaction back, but an answer this worker fails to read (a
// taken job's JSON) no longer can; the batch then reports the error, its
// items find their claims completed (lease lost: nothing is forwarded
// twice), and the jobs it took are left to River's rescuer.
func (c *completionBatch) queuePredicted(b *pgx.Batch, runner string) bool {
	c.single = c.withClaims
	for _, is := range c.wanting {
		for _, i := range is {
			c.single = c.single && c.items[i].predicted != nil
		}
	}
	if !c.single {
		return false
	}
	for i, it := range c.items {
		if it.predicted != nil && c.at[it.key] == i {
			c.predicted = append(c.predicted, *it.predicted)
		}
	}
	var args []any
	args, c.predictedAt = claimTakenArgs(c.predicted, runner)
	b.Queue(c.ahead.takenSQL, args...)
	return true
}

// read reads the batch's results, in the order batch queued them, into
// c.out; it returns the queues of the jobs the lines' advance made
// available.
func (c *completionBatch) read(br pgx.BatchResults) ([]string, error) {
	defer br.Close()
	for range c.lead {
		if _, err := br.Exec(); err != nil {
			return nil, err
		}
	}
	if c.lined() {
		if _, err := br.Exec(); err != nil {
			return nil, fmt.Errorf("lock ordering lines: %w", err)
		}
	}
	if err := c.readCompleted(br); err != nil {
		return nil, err
	}
	var woke []string
	var err error
	if c.lined() {
		if woke, err = c.readAdvance(br); err != nil {
			return nil, err
		}
	}
	if len(c.wantQueues) > 0 {
		if err := c.readTaken(br); err != nil {
			return nil, err
		}
	}
	if c.single {
		if err := readPredicted(br, c.out, c.predicted, c.predictedAt); err != nil {
			return nil, err
		}
		if _, err := br.Exec(); err != nil {
			return nil, fmt.Errorf("commit: %w", err)
		}
	}
	return woke, closeBatch(br, !c.withClaims)
}

// readCompleted reads the completion statement's rows: the key of each
// item completed.
func (c *completionBatch) readCompleted(br pgx.BatchResults) error {
	rows, err := br.Query()
	if err != nil {
		return err
	}
	var key string
	_, err = pgx.ForEachRow(rows, []any{&key}, func() error {
		if i, ok := c.at[key]; ok {
			c.out[i].completion = completionDone
		}
		return nil
	})
	return err
}

// readTaken reads the available jobs taken and gives each to the next
// item of its queue that has no next job yet.
func (c *completionBatch) readTaken(br pgx.BatchResults) error {
	rows, err := br.Query()
	if err != nil {
		return fmt.Errorf("take available jobs: %w", err)
	}
	var taken takenJob
	_, err = pgx.ForEachRow(rows, taken.targets(), func() error {
		next, err := taken.job()
		if err != nil {
			return err
		}
		queue := taken.Queue
		c.tookAt(queue, next.JobRow)
		for len(c.wanting[queue]) > 0 {
			i := c.wanting[queue][0]
			c.wanting[queue] = c.wanting[queue][1:]
			if c.out[i].next == nil {
				c.out[i].next = next
				return nil
			}
		}
		return fmt.Errorf("job %d was taken for a queue no item wanted", next.ID)
	})
	if err != nil {
		return fmt.Errorf("take available jobs: %w", err)
	}
	return nil
}

// tookAt notes that the batch took job from queue (c.took: the last one
// in River's order).
func (c *completionBatch) tookAt(queue string, job *rivertype.JobRow) {
	p := takePos{priority: int16(job.Priority), scheduledAt: job.ScheduledAt, id: job.ID}
	if c.took == nil {
		c.took = map[string]takePos{}
	}
	if last, ok := c.took[queue]; !ok || p.after(last) {
		c.took[queue] = p
	}
}

// moveCursor records the batch's take of available jobs in the take
// cursor once the batch committed (err nil); one that may not have leaves
// the cursor where it was, before the jobs it took.
func (c *completionBatch) moveCursor(err error) {
	if err != nil {
		return
	}
	for _, q := range c.wantQueues { // none without ahead (want)
		last, took := c.took[q]
		c.ahead.cursor.advance(q, last, !took || c.unserved(q))
	}
}

// unserved tells whether an item of the batch wanted an available job of
// queue and got no job (readTaken ran out of rows for it).
func (c *completionBatch) unserved(queue string) bool {
	for _, i := range c.wanting[queue] {
		if c.out[i].next == nil {
			return true
		}
	}
	return false
}

// readAdvance reads the lines' advance: a queue to wake per job made
// available, and per job taken to chain, the job and the pending job of
// the place after it.
func (c *completionBatch) readAdvance(br pgx.BatchResults) ([]string, error) {
	rows, err := br.Query()
	if err != nil {
		return nil, fmt.Errorf("advance ordering lines: %w", err)
	}
	var woke []string
	var key *string
	var taken takenJob
	var after []byte
	targets := append(append([]any{&key}, taken.targets()...), &after)
	_, err = pgx.ForEachRow(rows, targets, func() error {
		if key == nil {
			woke = append(woke, taken.Queue)
			return nil
		}
		return c.takeLineNext(*key, &taken, after)
	})
	if err != nil {
		return nil, fmt.Errorf("advance ordering lines: %w", err)
	}
	return woke, nil
}

// takeLineNext gives the job a line's advance took (taken) to the item
// that ended the line's place, with the job after it (after; nil: none).
func (c *completionBatch) takeLineNext(key string, taken *takenJob, after []byte) error {
	next, err := taken.job()
	if err != nil {
		return err
	}
	i, ok := c.lines[lineID{next.Args.Source, next.Args.Dest(), key}]
	if !ok {
		return fmt.Errorf("job %d was taken for a line not in the batch", next.ID)
	}
	c.out[i].next = next
	if after == nil {
		return nil
	}
	var p pendingJob
	if err := json.Unmarshal(after, &p); err != nil {
		return fmt.Errorf("read the job after job %d: %w", next.ID, err)
	}
	c.out[i].after, err = p.taken()
	return err
}

// completeClaimingAhead runs a completion batch b (which begins an explicit
// transaction) and then, in the same transaction, takes the claims of the
// jobs it took into chains and starts their attempts, with the COMMIT in
// that second round trip: the next job of a line costs no claim statement
// and commit of its own. read reads b's results into out. The claims are
// taken after the lines moved on, so a claim sees the line as this
// transaction left it (its greatest ordering.by: stale).
func completeClaimingAhead(ctx context.Context, pool *pgxpool.Pool, b *pgx.Batch, read func(pgx.BatchResults) ([]string, error),
	out []completed, items []completeItem, ahead *claimAhead) (woke []string, err error) {
	err = onConn(ctx, pool, func(conn *pgxpool.Conn) error {
		woke, err = claimAheadOn(ctx, conn, b, read, out, items, ahead)
		return err
	})
	return woke, err
}

// onConn runs f on a connection of pool that f may leave in a transaction
// only by failing: the transaction is then rolled back.
func onConn(ctx context.Context, pool *pgxpool.Pool, f func(*pgxpool.Conn) error) (err error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release() // a connection left in a transaction is closed, not reused
	defer func() {
		if err != nil && conn.Conn().PgConn().TxStatus() != 'I' {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), completeTimeout)
			_, _ = conn.Exec(rctx, "ROLLBACK")
			cancel()
		}
	}()
	return f(conn)
}

// claimAheadOn is completeClaimingAhead on conn.
func claimAheadOn(ctx context.Context, conn *pgxpool.Conn, b *pgx.Batch, read func(pgx.BatchResults) ([]string, error),
	out []completed, items []completeItem, ahead *claimAhead) (woke []string, err error) {
	if woke, err = read(conn.SendBatch(ctx, b)); err != nil {
		return nil, err
	}
	var claims []claimItem
	var of []int // the item of each claim
	for i := range out {
		if !items[i].claimNext || out[i].next == nil {
			continue
		}
		if it, ok := ahead.item(out[i].next); ok {
			claims, of = append(claims, it), append(of, i)
		}
	}
	b2 := &pgx.Batch{}
	args, at := claimManyArgs(claims)
	if len(claims) > 0 {
		b2.Queue(ahead.sql, args...)
	}
	b2.Queue("COMMIT")
	br := conn.SendBatch(ctx, b2)
	defer br.Close()
	if len(claims) > 0 {
		rows, err := br.Query()
		if err != nil {
			return nil, fmt.Errorf("claim the chained jobs: %w", err)
		}
		starts, err := scanClaims(rows, at, len(claims))
		if err != nil {
			return nil, fmt.Errorf("claim the chained jobs: %w", err)
		}
		for j, st := range starts {
			out[of[j]].nextStart = st
		}
	}
	if _, err := br.Exec(); err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	return woke, br.Close()
}

// claimTakenArgs are claimTakenManyStartSQL's arguments for items (claims
// of jobs to be taken for runner).
func claimTakenArgs(items []claimItem, runner string) ([]any, map[string]int) {
	args, at := claimManyArgs(items)
	attempts := make([]int32, 0, len(at))
	for i, it := range items {
		if at[it.key] == i {
			attempts = append(attempts, it.attempt)
		}
	}
	return append(args, attempts, runner), at
}

// readPredicted reads claimTakenManyStartSQL's rows for the predicted
// claims (at: claimTakenArgs' index of their keys) and gives each claim
// taken to the item whose next job it is.
func readPredicted(br pgx.BatchResults, out []completed, predicted []claimItem, at map[string]int) error {
	rows, err := br.Query()
	if err != nil {
		return fmt.Errorf("claim the predicted jobs: %w", err)
	}
	starts, err := scanClaims(rows, at, len(predicted))
	if err != nil {
		return fmt.Errorf("claim the predicted jobs: %w", err)
	}
	byJob := make(map[int64]*startRow, len(starts))
	for j, st := range starts {
		if st != nil {
			byJob[predicted[j].jobID] = st
		}
	}
	// Every claim taken is for a job this transaction took (takenHereSQL),
	// so for some item's next job.
	for i := range out {
		if out[i].next == nil {
			continue
		}
		if st, ok := byJob[out[i].next.ID]; ok {
			out[i].nextStart = st
		}
	}
	return nil
}
