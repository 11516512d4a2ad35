package alert

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// State in hookline_alerts, per webhook URL:
//
//   - (url, kind, source, destination), kind a Kind: sent_at is when the
//     last alert of that key was claimed. It throttles the key (the next
//     claim needs sent_at <= now() - min_interval) and, for dead, is the
//     key's cursor: that alert covered the key's dead items with dead_at <=
//     sent_at - settle.
//   - (url, '_scan', '', ''): the URL's dead-set watermark C. Every failed
//     dead item with dead_at < C is accounted for: covered by an alert of
//     its key, or died before the URL's first scan (history, never
//     alerted). It starts at the first scan's now(), so enabling alerts does
//     not report history, and a scan only reads dead items with dead_at >=
//     C, so its cost follows recent deaths, not the size of the dead set.
//
// Claim: one statement reads the key's row (old) and upserts sent_at =
// now() where the row's current sent_at is both old enough and equal to
// what old read. The upsert locks the row, so of concurrent claimers
// exactly one succeeds, and the winner knows the exact previous sent_at
// (none when it inserted the row): its dead count starts where the previous
// alert stopped.
//
// Release (the POST failed): the key's row goes back to its previous
// sent_at (deleted if it had none), if it still holds the claim, so the next
// scan retries it. For dead, the same transaction first moves C back to at
// most the C that scan started from, and by at least a microsecond, so that
// a concurrent scan which took the claim as sent cannot advance C past the
// released items (its advance is a compare-and-set on the C it read).

// settle is how old a dead item must be before a scan counts it. dead_at is
// its transaction's start, so an item can commit after a scan whose now()
// is later than its dead_at; waiting settle lets such a transaction commit
// before the cursor passes it.
const settle = 5 * time.Second

// scanKind is the kind of the per-URL watermark row.
const scanKind = "_scan"

// micros is d in microseconds, the unit SQL parameters carry durations in.
func micros(d time.Duration) int64 { return d.Microseconds() }

type key struct{ source, destination string }

const claimSQL = `WITH old AS (
		SELECT sent_at FROM hookline_alerts
		WHERE url = $1 AND kind = $2 AND source = $3 AND destination = $4)
	INSERT INTO hookline_alerts AS a (url, kind, source, destination, sent_at)
	VALUES ($1, $2, $3, $4, now())
	ON CONFLICT (url, kind, source, destination) DO UPDATE SET sent_at = excluded.sent_at
		WHERE a.sent_at <= now() - $5::bigint * interval '1 microsecond'
			AND a.sent_at = (SELECT sent_at FROM old)
	RETURNING a.sent_at, (SELECT sent_at FROM old)`

// claim takes the right to send kind for k now. ok is false when the key's
// last alert is younger than interval or another scan claimed it first. at
// is the claim's time; prev the key's sent_at before it (nil: none).
func (a *Alerter) claim(ctx context.Context, url, kind string, k key, interval time.Duration) (at time.Time, prev *time.Time, ok bool, err error) {
	err = a.pool.QueryRow(ctx, claimSQL, url, kind, k.source, k.destination, micros(interval)).Scan(&at, &prev)
	if errors.Is(err, pgx.ErrNoRows) {
		return at, nil, false, nil
	}
	return at, prev, err == nil, err
}

const (
	restoreSQL = `UPDATE hookline_alerts SET sent_at = $6
		WHERE url = $1 AND kind = $2 AND source = $3 AND destination = $4 AND sent_at = $5`
	unclaimSQL = `DELETE FROM hookline_alerts
		WHERE url = $1 AND kind = $2 AND source = $3 AND destination = $4 AND sent_at = $5`
	pullBackSQL = `UPDATE hookline_alerts SET sent_at = least(sent_at, $2) - interval '1 microsecond'
		WHERE url = $1 AND kind = '` + scanKind + `' AND source = '' AND destination = ''`
)

// releaseTimeout bounds a release, which runs even when the scan's context
// is done (a claim left behind would silence its key for min_interval).
const releaseTimeout = 5 * time.Second

// release undoes the claim at of kind for k (see the State comment);
// pullBack, for dead, is the watermark the scan started from. A failure is
// logged: the claim then expires after min_interval.
func (a *Alerter) release(ctx context.Context, url, kind string, k key, at time.Time, prev, pullBack *time.Time) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	err := pgx.BeginFunc(ctx, a.pool, func(tx pgx.Tx) error {
		if pullBack != nil {
			if _, err := tx.Exec(ctx, pullBackSQL, url, *pullBack); err != nil {
				return err
			}
		}
		var err error
		if prev != nil {
			_, err = tx.Exec(ctx, restoreSQL, url, kind, k.source, k.destination, at, *prev)
		} else {
			_, err = tx.Exec(ctx, unclaimSQL, url, kind, k.source, k.destination, at)
		}
		return err
	})
	if err != nil {
		a.logger.Error("alert claim not released; the key stays silent for min_interval",
			"url", redact(url), "kind", kind, "source", k.source, "destination", k.destination, "err", err)
	}
}

const (
	watermarkSQL = `SELECT sent_at, now() FROM hookline_alerts
		WHERE url = $1 AND kind = '` + scanKind + `' AND source = '' AND destination = ''`
	startWatermarkSQL = `INSERT INTO hookline_alerts (url, kind, source, destination, sent_at)
		VALUES ($1, '` + scanKind + `', '', '', now()) ON CONFLICT DO NOTHING`
	advanceWatermarkSQL = `UPDATE hookline_alerts SET sent_at = $3
		WHERE url = $1 AND kind = '` + scanKind + `' AND source = '' AND destination = '' AND sent_at = $2`
)

// watermark returns url's watermark C, set to now() on its first scan, and
// the database's now().
func (a *Alerter) watermark(ctx context.Context, url string) (c, now time.Time, err error) {
	err = a.pool.QueryRow(ctx, watermarkSQL, url).Scan(&c, &now)
	if !errors.Is(err, pgx.ErrNoRows) {
		return c, now, err
	}
	if _, err := a.pool.Exec(ctx, startWatermarkSQL, url); err != nil {
		return c, now, err
	}
	err = a.pool.QueryRow(ctx, watermarkSQL, url).Scan(&c, &now)
	return c, now, err
}

// advanceWatermark moves url's watermark from c0 to c, unless it changed
// since it was read as c0 (then the newer value stands).
func (a *Alerter) advanceWatermark(ctx context.Context, url string, c0, c time.Time) error {
	_, err := a.pool.Exec(ctx, advanceWatermarkSQL, url, c0, c)
	return err
}
