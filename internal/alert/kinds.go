package alert

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// outcome is what deliver did with a key.
type outcome int

const (
	skipped outcome = iota // not claimed (throttled, or another scan's), or nothing left to report
	sent
	failed // claimed, the POST failed, the claim released
)

// buildFunc makes the message of a claimed key: at is the claim's time,
// prev the key's previous sent_at (nil: none). A nil message means there is
// nothing to report any more; the claim is then released.
type buildFunc func(ctx context.Context, at time.Time, prev *time.Time) (*message, error)

// deliver claims kind for k, builds its message and POSTs it. A failed POST
// releases the claim (pullBack: see release) and marks the rule broken for
// the rest of the scan; it is logged, not returned.
func (a *Alerter) deliver(ctx context.Context, rs *ruleScan, kind string, k key, pullBack *time.Time, build buildFunc) (outcome, error) {
	at, prev, ok, err := a.claim(ctx, rs.key, kind, k, rs.MinInterval)
	if err != nil || !ok {
		return skipped, err
	}
	msg, err := build(ctx, at, prev)
	if err != nil || msg == nil {
		a.release(ctx, rs.key, kind, k, at, prev, pullBack)
		return skipped, err
	}
	msg.Kind, msg.Source, msg.Destination = kind, k.source, k.destination
	msg.At = at.UTC().Format(time.RFC3339)
	attrs := []any{"url", redact(rs.URL), "kind", kind, "source", k.source, "destination", k.destination, "count", msg.Count}
	if err := a.send(ctx, rs.URL, msg); err != nil {
		rs.broken = true
		a.release(ctx, rs.key, kind, k, at, prev, pullBack)
		a.logger.Warn("alert not sent; the next scan retries it", append(attrs, "err", err)...)
		return failed, nil
	}
	a.logger.Info("alert sent", attrs...)
	return sent, nil
}

// us turns a bigint parameter of microseconds into an interval.
const us = `::bigint * interval '1 microsecond'`

// deadCandidatesSQL: the keys with failed dead items in [$2 (the
// watermark), $3 (the cut)] that their last alert did not cover, with the
// earliest such item and whether the key is within min_interval ($4).
// $5: settle.
const deadCandidatesSQL = `SELECT d.source, d.destination, min(d.dead_at),
		coalesce(a.sent_at > now() - $4` + us + `, false)
	FROM hookline_dead d
	LEFT JOIN hookline_alerts a
		ON a.url = $1 AND a.kind = '` + KindDead + `' AND a.source = d.source AND a.destination = d.destination
	WHERE d.reason = 'failed' AND d.dead_at >= $2 AND d.dead_at <= $3
		AND (a.sent_at IS NULL OR d.dead_at > a.sent_at - $5` + us + `)
	GROUP BY d.source, d.destination, a.sent_at
	ORDER BY d.source, d.destination`

type deadCandidate struct {
	key
	earliest  time.Time
	throttled bool
}

// scanDead alerts the keys with new failed dead items, then advances the
// watermark to the earliest item still unreported (or the cut).
func (a *Alerter) scanDead(ctx context.Context, rs *ruleScan) error {
	c0, now, err := a.watermark(ctx, rs.key)
	if err != nil {
		return err
	}
	cut := now.Add(-settle)
	rows, _ := a.pool.Query(ctx, deadCandidatesSQL, rs.key, c0, cut, micros(rs.MinInterval), micros(settle))
	cands, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (c deadCandidate, err error) {
		err = r.Scan(&c.source, &c.destination, &c.earliest, &c.throttled)
		return c, err
	})
	if err != nil {
		return err
	}
	next := cut
	for _, c := range cands {
		pending := c.throttled || rs.broken
		if !pending {
			o, err := a.deliver(ctx, rs, KindDead, c.key, &c0, func(ctx context.Context, at time.Time, prev *time.Time) (*message, error) {
				return a.deadMessage(ctx, rs.key, c.key, c0, at, prev)
			})
			if err != nil {
				return err
			}
			pending = o == failed
		}
		if pending && c.earliest.Before(next) {
			next = c.earliest
		}
	}
	if next.After(c0) {
		return a.advanceWatermark(ctx, rs.key, c0, next)
	}
	return nil
}

// The failed dead items of a key up to the claim's cover (the claim's time
// minus settle). deadCountAfterSQL: after the previous alert's cover, for
// source $1, destination $2, claim $3, settle $4, previous sent_at $5.
// deadCountFirstSQL, for a key never alerted: from the lower of the scan's
// watermark and the current one, for url $1, source $2, destination $3,
// claim $4, settle $5, the scan's watermark $6.
const (
	deadCountAfterSQL = `SELECT count(*) FROM hookline_dead
		WHERE reason = 'failed' AND source = $1 AND destination = $2
			AND dead_at <= $3::timestamptz - $4` + us + ` AND dead_at > $5::timestamptz - $4` + us
	deadCountFirstSQL = `SELECT count(*) FROM hookline_dead
		WHERE reason = 'failed' AND source = $2 AND destination = $3
			AND dead_at <= $4::timestamptz - $5` + us + `
			AND dead_at >= least($6::timestamptz, (SELECT sent_at FROM hookline_alerts
				WHERE url = $1 AND kind = '` + scanKind + `' AND source = '' AND destination = ''))`
)

func (a *Alerter) deadMessage(ctx context.Context, url string, k key, c0, at time.Time, prev *time.Time) (*message, error) {
	var n int64
	var err error
	if prev != nil {
		err = a.pool.QueryRow(ctx, deadCountAfterSQL, k.source, k.destination, at, micros(settle), *prev).Scan(&n)
	} else {
		err = a.pool.QueryRow(ctx, deadCountFirstSQL, url, k.source, k.destination, at, micros(settle), c0).Scan(&n)
	}
	if err != nil || n == 0 {
		return nil, err
	}
	return &message{Count: n, Text: deadText(k, n)}, nil
}

// circuitCandidatesSQL: destinations whose circuit is not closed and opened
// after their last alert, which is at least min_interval ($2) old.
const circuitCandidatesSQL = `SELECT d.source, d.name
	FROM hookline_destinations d
	LEFT JOIN hookline_alerts a
		ON a.url = $1 AND a.kind = '` + KindCircuitOpen + `' AND a.source = d.source AND a.destination = d.name
	WHERE d.circuit <> 'closed' AND d.opened_at IS NOT NULL
		AND (a.sent_at IS NULL OR (d.opened_at > a.sent_at AND a.sent_at <= now() - $2` + us + `))
	ORDER BY d.source, d.name`

// circuitSQL re-reads a candidate under its claim: still not closed, and
// opened after the previous alert ($3; NULL: none).
const circuitSQL = `SELECT failure_streak, coalesce(last_error, '') FROM hookline_destinations
	WHERE source = $1 AND name = $2 AND circuit <> 'closed' AND opened_at > coalesce($3, '-infinity'::timestamptz)`

func (a *Alerter) scanCircuits(ctx context.Context, rs *ruleScan) error {
	return a.scanKeys(ctx, rs, KindCircuitOpen, circuitCandidatesSQL, []any{rs.key, micros(rs.MinInterval)},
		func(ctx context.Context, k key, at time.Time, prev *time.Time) (*message, error) {
			var streak int
			var lastErr string
			err := a.pool.QueryRow(ctx, circuitSQL, k.source, k.destination, prev).Scan(&streak, &lastErr)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil, nil
			}
			if err != nil {
				return nil, err
			}
			return &message{Count: 1, Text: circuitText(k, streak, lastErr)}, nil
		})
}

// lagCandidatesSQL: the (source, destination) pairs with queued events,
// found by skipping through the queued index one pair at a time, whose
// oldest queued event is older than lag_threshold ($2) and whose last
// alert is at least min_interval ($3) old.
const lagCandidatesSQL = `WITH RECURSIVE k AS (
		(SELECT source, destination FROM hookline_event_destinations
			WHERE state = 'queued' ORDER BY source, destination LIMIT 1)
		UNION ALL
		SELECT n.source, n.destination FROM k CROSS JOIN LATERAL (
			SELECT e.source, e.destination FROM hookline_event_destinations e
			WHERE e.state = 'queued' AND (e.source, e.destination) > (k.source, k.destination)
			ORDER BY e.source, e.destination LIMIT 1) n)
	SELECT k.source, k.destination FROM k
	CROSS JOIN LATERAL (
		SELECT e.queued_at FROM hookline_event_destinations e
		WHERE e.state = 'queued' AND e.source = k.source AND e.destination = k.destination
		ORDER BY e.queued_at LIMIT 1) o
	LEFT JOIN hookline_alerts a
		ON a.url = $1 AND a.kind = '` + KindLag + `' AND a.source = k.source AND a.destination = k.destination
	WHERE o.queued_at <= now() - $2` + us + `
		AND (a.sent_at IS NULL OR a.sent_at <= now() - $3` + us + `)`

// lagSQL counts a pair's events queued before the claim ($3) minus
// lag_threshold ($4), with the oldest one's queued_at and whether the
// destination is paused.
const lagSQL = `SELECT count(*), min(queued_at),
		EXISTS (SELECT 1 FROM hookline_destinations WHERE source = $1 AND name = $2 AND paused_at IS NOT NULL)
	FROM hookline_event_destinations
	WHERE state = 'queued' AND source = $1 AND destination = $2 AND queued_at <= $3::timestamptz - $4` + us

func (a *Alerter) scanLag(ctx context.Context, rs *ruleScan) error {
	return a.scanKeys(ctx, rs, KindLag, lagCandidatesSQL, []any{rs.key, micros(rs.LagThreshold), micros(rs.MinInterval)},
		func(ctx context.Context, k key, at time.Time, _ *time.Time) (*message, error) {
			var n int64
			var oldest *time.Time
			var paused bool
			err := a.pool.QueryRow(ctx, lagSQL, k.source, k.destination, at, micros(rs.LagThreshold)).Scan(&n, &oldest, &paused)
			if err != nil || n == 0 || oldest == nil {
				return nil, err
			}
			return &message{Count: n, Text: lagText(k, n, rs.LagThreshold, at.Sub(*oldest), paused)}, nil
		})
}

// scanKeys delivers kind to every key the candidates query returns (source,
// destination), until the rule breaks.
func (a *Alerter) scanKeys(ctx context.Context, rs *ruleScan, kind, candidates string, args []any,
	build func(ctx context.Context, k key, at time.Time, prev *time.Time) (*message, error)) error {
	if rs.broken {
		return nil
	}
	rows, _ := a.pool.Query(ctx, candidates, args...)
	keys, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (k key, err error) {
		err = r.Scan(&k.source, &k.destination)
		return k, err
	})
	if err != nil {
		return err
	}
	for _, k := range keys {
		if rs.broken {
			return nil
		}
		_, err := a.deliver(ctx, rs, kind, k, nil, func(ctx context.Context, at time.Time, prev *time.Time) (*message, error) {
			return build(ctx, k, at, prev)
		})
		if err != nil {
			return err
		}
	}
	return nil
}
