package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// Errors of the dead set, for callers to branch on (the admin API maps them
// to HTTP statuses).
var (
	// ErrDeadItemNotFound: no dead item has that id (never existed, deleted,
	// or retried already).
	ErrDeadItemNotFound = errors.New("dead item not found")
	// ErrEventNotFound: no event has that (source, event_id).
	ErrEventNotFound = errors.New("event not found")
	// ErrUnknownSource: the dead item's source or destination is not
	// configured here, so its attempt budget is unknown and no worker would
	// take the job.
	ErrUnknownSource = errors.New("source is not configured on this server")
)

// DefaultBulkBatch is how many dead items a bulk retry or delete handles per
// transaction when DeadSetConfig.BulkBatch is zero.
const DefaultBulkBatch = 100

// DeadSetConfig configures a DeadSet.
type DeadSetConfig struct {
	// Pool is required.
	Pool *pgxpool.Pool
	// River inserts the retry jobs; an insert-only client is enough.
	// Required for Retry and RetryAll.
	River *river.Client[pgx.Tx]
	// MaxAttempts returns a destination's max_attempts, the fresh
	// budget an operator retry gets; false means the source is not
	// configured (Retry returns ErrUnknownSource). Required for Retry.
	MaxAttempts func(source, destination string) (int, bool)
	// BulkBatch is the number of items per transaction in RetryAll and
	// DeleteAll. Default DefaultBulkBatch.
	BulkBatch int
}

// DeadSet reads and changes the dead set (hookline_dead) and looks up events:
// the database side of the admin API.
type DeadSet struct {
	cfg DeadSetConfig
}

// NewDeadSet returns a DeadSet.
func NewDeadSet(cfg *DeadSetConfig) (*DeadSet, error) {
	if cfg == nil || cfg.Pool == nil {
		return nil, errors.New("jobs: DeadSetConfig.Pool is required")
	}
	c := *cfg
	if c.BulkBatch <= 0 {
		c.BulkBatch = DefaultBulkBatch
	}
	return &DeadSet{cfg: c}, nil
}

// DeadItem is one item of the dead set.
type DeadItem struct {
	ID      int64
	Source  string
	EventID string
	// Destination is the destination that failed, or whose duplicate was
	// rejected.
	Destination string
	EventType   string
	// Reason is "failed" (attempts ran out) or "duplicate" (rejected).
	Reason    string
	Attempts  int
	LastError string
	DeadAt    time.Time

	// Filled by Get only.
	ContentType string
	Headers     json.RawMessage // {"Name": ["value", ...]}
	Payload     []byte          // the exact raw bytes (a batch item's own bytes)
	DeliveryID  *int64          // the delivery it came in with (may be pruned since)
}

// Dead item reasons.
const (
	ReasonFailed    = "failed"
	ReasonDuplicate = "duplicate"
)

// DeadFilter selects dead items; zero fields match everything, so the zero
// DeadFilter is the whole dead set.
type DeadFilter struct {
	Source      string
	Reason      string // "", ReasonFailed or ReasonDuplicate
	EventType   string
	Destination string
	Since       time.Time // dead_at >= Since
	Until       time.Time // dead_at < Until
}

// Validate reports a bad field by its name (the names of the admin API's
// parameters: source, destination, reason, event_type, since).
func (f DeadFilter) Validate() error {
	if err := validText("source", f.Source, "destination", f.Destination, "event_type", f.EventType); err != nil {
		return err
	}
	if f.Reason != "" && f.Reason != ReasonFailed && f.Reason != ReasonDuplicate {
		return fmt.Errorf("reason: %q is not a reason (want failed or duplicate)", f.Reason)
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Since.Before(f.Until) {
		return errors.New("since: must be before until")
	}
	return nil
}

// validText reports the first of the (name, value) pairs whose value is
// not text Postgres can compare: invalid UTF-8 or a NUL byte. No stored
// source, destination, event id or type holds either (ingest refuses
// them), so such a value can only be a client's mistake.
func validText(pairs ...string) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		if !isText(pairs[i+1]) {
			return fmt.Errorf("%s: not valid UTF-8 text", pairs[i])
		}
	}
	return nil
}

// isText reports whether v is valid UTF-8 without a NUL byte.
func isText(v string) bool {
	return utf8.ValidString(v) && !strings.ContainsRune(v, 0)
}

// where renders f as SQL conditions over hookline_dead, appending its
// arguments to args.
func (f DeadFilter) where(args []any) (string, []any) {
	conds := []string{"true"}
	add := func(cond string, v any) {
		args = append(args, v)
		conds = append(conds, fmt.Sprintf(cond, len(args)))
	}
	if f.Source != "" {
		add("source = $%d", f.Source)
	}
	if f.Reason != "" {
		add("reason = $%d", f.Reason)
	}
	if f.EventType != "" {
		add("event_type = $%d", f.EventType)
	}
	if f.Destination != "" {
		add("destination = $%d", f.Destination)
	}
	if !f.Since.IsZero() {
		add("dead_at >= $%d", f.Since)
	}
	if !f.Until.IsZero() {
		add("dead_at < $%d", f.Until)
	}
	return strings.Join(conds, " AND "), args
}

// DeadKey is a position in the dead set's order (dead_at DESC, id DESC), for
// keyset pagination: the next page starts after it. Because the order is
// total (id breaks ties), every item present when paging starts is seen
// exactly once however many items are added or removed meanwhile.
type DeadKey struct {
	DeadAt time.Time
	ID     int64
}

func scanItem(row pgx.Row, it *DeadItem, extra ...any) error {
	return row.Scan(append([]any{&it.ID, &it.Source, &it.EventID, &it.Destination, &it.EventType, &it.Reason, &it.Attempts, &it.LastError, &it.DeadAt}, extra...)...)
}

// List returns up to limit items matching f, newest first, starting after
// after (nil: from the newest), and whether more follow. A filter that
// Validate refuses is its error, before any query (as for Count, RetryAll
// and DeleteAll).
func (d *DeadSet) List(ctx context.Context, f DeadFilter, after *DeadKey, limit int) ([]DeadItem, bool, error) {
	if limit <= 0 {
		return nil, false, errors.New("jobs: List: limit must be positive")
	}
	if err := f.Validate(); err != nil {
		return nil, false, err
	}
	where, args := f.where(nil)
	if after != nil {
		args = append(args, after.DeadAt, after.ID)
		where += fmt.Sprintf(" AND (dead_at, id) < ($%d, $%d)", len(args)-1, len(args))
	}
	args = append(args, limit+1)
	rows, err := d.cfg.Pool.Query(ctx, listDeadSQL(where, len(args)), args...)
	if err != nil {
		return nil, false, fmt.Errorf("list dead items: %w", err)
	}
	defer rows.Close()
	items := make([]DeadItem, 0, min(limit, 64))
	for rows.Next() {
		var it DeadItem
		if err := scanItem(rows, &it); err != nil {
			return nil, false, err
		}
		items = append(items, it)
	}
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("list dead items: %w", err)
	}
	more := len(items) > limit
	if more {
		items = items[:limit]
	}
	return items, more, nil
}

// Get returns one item with its payload and headers, or ErrDeadItemNotFound.
func (d *DeadSet) Get(ctx context.Context, id int64) (*DeadItem, error) {
	var it DeadItem
	err := scanItem(d.cfg.Pool.QueryRow(ctx, stmt.getDeadItem, id), &it, &it.ContentType, &it.Headers, &it.Payload, &it.DeliveryID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrDeadItemNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get dead item %d: %w", id, err)
	}
	return &it, nil
}

// Delete removes one item, or returns ErrDeadItemNotFound.
func (d *DeadSet) Delete(ctx context.Context, id int64) error {
	tag, err := d.cfg.Pool.Exec(ctx, stmt.deleteDeadItem, id)
	if err != nil {
		return fmt.Errorf("delete dead item %d: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return ErrDeadItemNotFound
	}
	return nil
}

// Count returns the number of items matching f.
func (d *DeadSet) Count(ctx context.Context, f DeadFilter) (int, error) {
	if err := f.Validate(); err != nil {
		return 0, err
	}
	where, args := f.where(nil)
	var n int
	if err := d.cfg.Pool.QueryRow(ctx, countDeadSQL(where), args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("count dead items: %w", err)
	}
	return n, nil
}

// Retried is the outcome of an operator retry.
type Retried struct {
	DeadID      int64
	Source      string
	EventID     string
	Destination string
	Reason      string
	// JobID is the River job that will process the event: a new one, or
	// the job already active for the event (Joined).
	JobID int64
	// Joined is true when a job for the event was already pending, scheduled,
	// retryable or running, so no second job was inserted (River's unique
	// insert). That job was given the operator override and a fresh budget
	// and, unless running, made available at once.
	Joined bool
	// OverrideBefore is the job's OverrideBefore: a completed claim older
	// than this is taken over once.
	OverrideBefore time.Time
}

// Retry re-queues a dead item's event at the item's destination (that
// destination only) as an operator override, in one transaction:
//
//   - the item is locked (gone: ErrDeadItemNotFound) and deleted;
//   - its payload, content type and headers become a new delivery, so the
//     retry works even after the original delivery was pruned;
//   - the event's destination (created if missing) points at that delivery
//     and is queued again, its attempts and last error kept (they count its
//     whole life);
//   - a River job with OverrideBefore = now (the database clock) and a fresh
//     budget of the destination's max_attempts is inserted. The override
//     lets the worker take over a completed claim once, so a retried
//     duplicate of a completed event is processed again.
//
// If a job for the event is already active, River's unique insert skips the
// new one (the failure mode of River UI's retry of unique jobs,
// riverqueue/riverui#622); Retry then joins that job instead of failing: it
// gives it the override and a fresh budget and makes it available now. A job
// that is running at that moment keeps the arguments it started with; if
// that run finds the event completed it does not process it again — retry
// once more after it finishes.
func (d *DeadSet) Retry(ctx context.Context, id int64) (*Retried, error) {
	if err := d.canRetry(); err != nil {
		return nil, err
	}
	var out *Retried
	err := pgx.BeginFunc(ctx, d.cfg.Pool, func(tx pgx.Tx) error {
		var err error
		out, err = d.retryTx(ctx, tx, id)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (d *DeadSet) canRetry() error {
	if d.cfg.River == nil {
		return errors.New("jobs: DeadSetConfig.River is required to retry")
	}
	if d.cfg.MaxAttempts == nil {
		return errors.New("jobs: DeadSetConfig.MaxAttempts is required to retry")
	}
	return nil
}

// retryTx is Retry inside the caller's transaction.
func (d *DeadSet) retryTx(ctx context.Context, tx pgx.Tx, id int64) (*Retried, error) {
	r := &Retried{DeadID: id}
	err := tx.QueryRow(ctx, stmt.lockDeadItem, id).
		Scan(&r.Source, &r.EventID, &r.Destination, &r.Reason, &r.OverrideBefore)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrDeadItemNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("lock dead item %d: %w", id, err)
	}
	maxAttempts, ok := d.cfg.MaxAttempts(r.Source, r.Destination)
	if !ok {
		return nil, fmt.Errorf("%w: %q, destination %q (dead item %d)", ErrUnknownSource, r.Source, r.Destination, id)
	}
	if _, err := tx.Exec(ctx, stmt.requeueDeadItem, id); err != nil {
		return nil, fmt.Errorf("re-queue dead item %d: %w", id, err)
	}
	res, err := d.cfg.River.InsertTx(ctx, tx, EventArgs{Source: r.Source, EventID: r.EventID, Destination: r.Destination, OverrideBefore: r.OverrideBefore},
		InsertOptsFor(maxAttempts))
	if err != nil {
		return nil, fmt.Errorf("enqueue retry of dead item %d: %w", id, err)
	}
	r.JobID = res.Job.ID
	if !res.UniqueSkippedAsDuplicate {
		return r, nil
	}
	// Join the active job: the override travels in its args (read afresh by
	// every attempt), the budget starts afresh (hookline counts it in
	// the destination's job_attempts), and River's own retry makes a scheduled
	// or retryable job available now (it leaves a running job alone).
	r.Joined = true
	override, _ := json.Marshal(r.OverrideBefore)
	if _, err := tx.Exec(ctx, joinJobSQL, r.JobID, string(override)); err != nil {
		return nil, fmt.Errorf("join job %d: %w", r.JobID, err)
	}
	if _, err := tx.Exec(ctx, stmt.restartBudget, r.Source, r.EventID, r.Destination); err != nil {
		return nil, fmt.Errorf("join job %d: %w", r.JobID, err)
	}
	if res.Job.State != rivertype.JobStateRunning {
		if _, err := d.cfg.River.JobRetryTx(ctx, tx, r.JobID); err != nil {
			return nil, fmt.Errorf("join job %d: %w", r.JobID, err)
		}
	}
	return r, nil
}

// BulkResult is the outcome of RetryAll or DeleteAll.
type BulkResult struct {
	// Matched is the number of items that matched when the call started.
	Matched int
	// Done is the number retried or deleted. It can be below Matched when
	// items left the dead set meanwhile (completed, deleted, retried by
	// someone else), or were skipped.
	Done int
	// Skipped counts items RetryAll left in place because their source is
	// not configured here.
	Skipped int
}

// RetryAll retries every item matching f that exists when it starts (items
// that die while it runs are left for the next call), in bounded batches of
// BulkBatch items per transaction, each item as Retry does.
// Items locked by a concurrent retry or delete are skipped. On error, the
// batches committed so far stay committed and res counts them.
func (d *DeadSet) RetryAll(ctx context.Context, f DeadFilter) (res BulkResult, err error) {
	if err := d.canRetry(); err != nil {
		return res, err
	}
	maxID, matched, err := d.snapshot(ctx, f)
	if err != nil || matched == 0 {
		return BulkResult{Matched: matched}, err
	}
	res.Matched = matched
	var after int64
	for {
		var ids []int64
		var done, skipped int
		err := pgx.BeginFunc(ctx, d.cfg.Pool, func(tx pgx.Tx) error {
			done, skipped = 0, 0
			where, args := f.where([]any{after, maxID, d.cfg.BulkBatch})
			rows, err := tx.Query(ctx, bulkRetryBatchSQL(where), args...)
			if err != nil {
				return err
			}
			ids, err = pgx.CollectRows(rows, pgx.RowTo[int64])
			if err != nil {
				return err
			}
			for _, id := range ids {
				_, err := d.retryTx(ctx, tx, id)
				switch {
				case errors.Is(err, ErrUnknownSource):
					skipped++
				case errors.Is(err, ErrDeadItemNotFound):
				case err != nil:
					return err
				default:
					done++
				}
			}
			return nil
		})
		if err != nil {
			return res, fmt.Errorf("bulk retry (after %d retried): %w", res.Done, err)
		}
		res.Done += done
		res.Skipped += skipped
		if len(ids) < d.cfg.BulkBatch {
			return res, nil
		}
		after = ids[len(ids)-1]
	}
}

// DeleteAll deletes every item matching f that exists when it starts, in
// bounded batches of BulkBatch items per transaction.
func (d *DeadSet) DeleteAll(ctx context.Context, f DeadFilter) (res BulkResult, err error) {
	maxID, matched, err := d.snapshot(ctx, f)
	if err != nil || matched == 0 {
		return BulkResult{Matched: matched}, err
	}
	res.Matched = matched
	where, args := f.where([]any{maxID, d.cfg.BulkBatch})
	q := bulkDeleteSQL(where)
	for {
		tag, err := d.cfg.Pool.Exec(ctx, q, args...)
		if err != nil {
			return res, fmt.Errorf("bulk delete (after %d deleted): %w", res.Done, err)
		}
		n := int(tag.RowsAffected())
		res.Done += n
		if n == 0 {
			return res, nil
		}
	}
}

// snapshot returns the highest id and the number of items matching f now.
func (d *DeadSet) snapshot(ctx context.Context, f DeadFilter) (maxID int64, n int, err error) {
	if err := f.Validate(); err != nil {
		return 0, 0, err
	}
	where, args := f.where(nil)
	err = d.cfg.Pool.QueryRow(ctx, snapshotDeadSQL(where), args...).Scan(&maxID, &n)
	if err != nil {
		return 0, 0, fmt.Errorf("count dead items: %w", err)
	}
	return maxID, n, nil
}
