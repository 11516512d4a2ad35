package jobs

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Ordering lines, on the worker's side.
//
// Ingest gives each ordered (event, destination) a place in its key's line
// and inserts the job of every place but the head as River 'pending' (see
// ingest's store statement). So at most one event of a line runs at a
// time, and a failing head holds its line through its retries. When the
// head's place ends — completed (forwarded, or skipped as stale) or dead —
// the worker, in the transaction that ends it, first locks the line's row
// and last advances the line (advanceLineSQL), which makes the next
// place's job available. An ingest transaction adding to the line takes
// the same row lock first, so it either commits before the advance (which
// then sees its place) or after it (and then finds its place is the head).
// The clean-up advances lines that have not moved for a while, which
// repairs an advance lost to a bug and wakes a head whose job waits.

// linePlace is an event's place in its ordering line.
type linePlace struct {
	key        string
	by, byKind *string // ordering.by as a decimal and its kind; nil: none
}

// lineColumns are the ordering columns the claim statement loads.
type lineColumns struct {
	key, by, byKind *string
	inLine, stale   bool
}

// apply sets the event's ordering key, staleness and place.
func (o *lineColumns) apply(ev *Event) {
	if o.key == nil {
		return
	}
	ev.OrderKey = *o.key
	if o.inLine {
		ev.Stale = o.stale
		ev.line = &linePlace{key: *o.key, by: o.by, byKind: o.byKind}
	} else if o.by != nil && o.byKind != nil {
		ev.offLine = &linePlace{key: *o.key, by: o.by, byKind: o.byKind}
	}
}

// batchSender is a pool, a connection or a transaction.
type batchSender interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// endPlace runs end (sql with args, answering one count) between the
// lock of the event's line and its advance, in one round trip and one
// transaction (q's, or the implicit one of the batch), and returns end's
// count and whether the advance woke the line's next job. The advance
// raises the line's greatest ordering.by with the event's when end
// completed it with a forward (advanceLineSQL). Inside a transaction (q a
// pgx.Tx, committed by the caller) the advance notifies River itself;
// otherwise the batch has committed when endPlace returns, and a wake is
// the caller's to send (queueWaker).
func endPlace(ctx context.Context, q batchSender, source, dest, eventID string, place *linePlace, sql string, args []any) (n int64, woke bool, err error) {
	_, inTx := q.(pgx.Tx)
	b := &pgx.Batch{}
	b.Queue(lockLineSQL, source, dest, place.key)
	b.Queue(sql, args...)
	b.Queue(advanceLineSQL, source, dest, place.key, eventID, place.by, place.byKind, inTx)
	br := q.SendBatch(ctx, b)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return 0, false, fmt.Errorf("lock ordering line: %w", err)
	}
	if err := br.QueryRow().Scan(&n); err != nil {
		return 0, false, err
	}
	var wakes int64
	if err := br.QueryRow().Scan(&wakes); err != nil {
		return 0, false, fmt.Errorf("advance ordering line: %w", err)
	}
	return n, wakes > 0 && !inTx, br.Close()
}

// completeOffLine runs the completion sql (with args, answering one count)
// of an ordered event forwarded outside its line (an operator's retry)
// between the lock of its key's line and raiseBySQL, in one round trip and
// one transaction (q's, or the implicit one of the batch): an event
// forwarded with a 2xx raises its key's greatest by wherever it stands,
// so that a later event with a smaller by is stale.
func completeOffLine(ctx context.Context, q batchSender, source, dest, eventID string, place *linePlace, sql string, args []any) (n int64, err error) {
	b := &pgx.Batch{}
	b.Queue(lockLineSQL, source, dest, place.key)
	b.Queue(sql, args...)
	b.Queue(raiseBySQL, source, dest, place.key, eventID, place.by, place.byKind)
	br := q.SendBatch(ctx, b)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return 0, fmt.Errorf("lock ordering line: %w", err)
	}
	if err := br.QueryRow().Scan(&n); err != nil {
		return 0, err
	}
	if _, err := br.Exec(); err != nil {
		return 0, fmt.Errorf("raise the ordering line's greatest by: %w", err)
	}
	return n, br.Close()
}

// lockLine and advanceLine bracket, inside tx, statements that end a place
// in a line where one batch does not fit.
func lockLine(ctx context.Context, tx pgx.Tx, source, dest, key string) error {
	if _, err := tx.Exec(ctx, lockLineSQL, source, dest, key); err != nil {
		return fmt.Errorf("lock ordering line: %w", err)
	}
	return nil
}

func advanceLine(ctx context.Context, tx pgx.Tx, source, dest, key string) error {
	var woke int64
	if err := tx.QueryRow(ctx, advanceLineSQL, source, dest, key, "", nil, nil, true).Scan(&woke); err != nil {
		return fmt.Errorf("advance ordering line: %w", err)
	}
	return nil
}

// AdvanceLine moves the ordering line of (source, destination, key) on and
// wakes its head, in a transaction of its own; it does nothing to a line
// that is where it should be. The clean-up calls it for lines that have
// not moved for a while.
func AdvanceLine(ctx context.Context, db interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}, source, destination, key string) error {
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if err := lockLine(ctx, tx, source, destination, key); err != nil {
			return err
		}
		return advanceLine(ctx, tx, source, destination, key)
	})
}

// OrderKeyHeader renders an ordering key as a header value: bytes a
// header value cannot hold (control characters but tab) are
// percent-encoded, so are spaces and tabs at either end (which HTTP trims
// from a header value, so that " k" would arrive as the key "k"), and so
// is "%" when anything is.
func OrderKeyHeader(key string) string {
	isWS := func(c byte) bool { return c == ' ' || c == '\t' }
	lead, trail := 0, len(key)
	for lead < len(key) && isWS(key[lead]) {
		lead++
	}
	for trail > lead && isWS(key[trail-1]) {
		trail--
	}
	encode := func(i int) bool {
		c := key[i]
		return (c < 0x20 && c != '\t') || c == 0x7f || i < lead || i >= trail
	}
	clean := true
	for i := 0; i < len(key); i++ {
		if encode(i) {
			clean = false
			break
		}
	}
	if clean {
		return key
	}
	var b strings.Builder
	for i := 0; i < len(key); i++ {
		if c := key[i]; encode(i) || c == '%' {
			fmt.Fprintf(&b, "%%%02X", c)
			continue
		}
		b.WriteByte(key[i])
	}
	return b.String()
}
