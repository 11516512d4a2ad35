package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
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
}

type eventRow struct {
	d        *Delivery
	ev       DeliveryEvent
	di       int // index of the delivery in the call
	ei       int // index of the event in the delivery
	deliv    int64
	count    int  // receipts of this key in the call
	first    bool // first occurrence of its key in the call
	fresh    bool
	state    string
	received time.Time
	status   string
}

func key(source, id string) string { return source + "\x00" + id }

// commit stores ds in one transaction and returns each delivery's results.
// Duplicates within ds and against existing events are resolved exactly as
// they would be one by one: the first occurrence of a key decides, later ones
// are duplicates.
func (s *store) commit(ctx context.Context, ds []*Delivery) ([][]EventResult, error) {
	var out [][]EventResult
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		out, err = s.commitTx(ctx, tx, ds)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (s *store) commitTx(ctx context.Context, tx pgx.Tx, ds []*Delivery) ([][]EventResult, error) {
	// 1. Delivery ids, then the deliveries themselves.
	var ids []int64
	if err := tx.QueryRow(ctx, `SELECT array_agg(nextval('hookline_deliveries_id_seq')) FROM generate_series(1, $1)`, len(ds)).Scan(&ids); err != nil {
		return nil, fmt.Errorf("allocate delivery ids: %w", err)
	}
	src := make([]string, len(ds))
	recv := make([]time.Time, len(ds))
	cts := make([]string, len(ds))
	hdrs := make([]string, len(ds))
	bodies := make([][]byte, len(ds))
	for i, d := range ds {
		h, _ := json.Marshal(d.Headers)
		src[i], recv[i], cts[i], hdrs[i], bodies[i] = d.Source.Name, d.ReceivedAt, d.ContentType, string(h), d.Body
	}
	if _, err := tx.Exec(ctx, `INSERT INTO hookline_deliveries (id, source, received_at, content_type, headers, body)
		SELECT * FROM unnest($1::bigint[], $2::text[], $3::timestamptz[], $4::text[], $5::jsonb[], $6::bytea[])`,
		ids, src, recv, cts, hdrs, bodies); err != nil {
		return nil, fmt.Errorf("store deliveries: %w", err)
	}

	// 2. Events: one upsert row per distinct key, sorted to avoid deadlocks
	// between concurrent batches.
	var rows []*eventRow
	firstOf := map[string]*eventRow{}
	for di, d := range ds {
		for ei, ev := range d.Events {
			r := &eventRow{d: d, ev: ev, di: di, ei: ei, deliv: ids[di]}
			k := key(d.Source.Name, ev.ID)
			if f, ok := firstOf[k]; ok {
				f.count++
			} else {
				r.first, r.count = true, 1
				firstOf[k] = r
			}
			rows = append(rows, r)
		}
	}
	firsts := make([]*eventRow, 0, len(firstOf))
	for _, r := range rows {
		if r.first {
			firsts = append(firsts, r)
		}
	}
	slices.SortFunc(firsts, func(a, b *eventRow) int {
		if c := strings.Compare(a.d.Source.Name, b.d.Source.Name); c != 0 {
			return c
		}
		return strings.Compare(a.ev.ID, b.ev.ID)
	})
	n := len(firsts)
	eSrc, eID, eType := make([]string, n), make([]string, n), make([]string, n)
	eDeliv := make([]int64, n)
	eOff, eLen := make([]*int32, n), make([]*int32, n)
	eCount := make([]int32, n)
	for i, r := range firsts {
		eSrc[i], eID[i], eType[i], eDeliv[i], eCount[i] = r.d.Source.Name, r.ev.ID, r.ev.Type, r.deliv, int32(r.count)
		if r.ev.Length >= 0 {
			off, l := int32(r.ev.Offset), int32(r.ev.Length)
			eOff[i], eLen[i] = &off, &l
		}
	}
	// An event is re-queued (a provider retry) when it is dead, or completed
	// and past its dedup window; otherwise an existing event is a duplicate
	// candidate, confirmed by River's unique insert below.
	res, err := tx.Query(ctx, `
		INSERT INTO hookline_events AS e (source, event_id, event_type, delivery_id, item_offset, item_length, deliveries)
		SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::int[], $6::int[], $7::int[])
		ON CONFLICT (source, event_id) DO UPDATE SET
			deliveries  = e.deliveries + excluded.deliveries,
			received_at = now(),
			state       = CASE WHEN e.state = 'dead' OR (e.state = 'completed' AND e.dedup_until <= now()) THEN 'queued' ELSE e.state END,
			delivery_id = CASE WHEN e.state = 'dead' OR (e.state = 'completed' AND e.dedup_until <= now()) THEN excluded.delivery_id ELSE e.delivery_id END,
			item_offset = CASE WHEN e.state = 'dead' OR (e.state = 'completed' AND e.dedup_until <= now()) THEN excluded.item_offset ELSE e.item_offset END,
			item_length = CASE WHEN e.state = 'dead' OR (e.state = 'completed' AND e.dedup_until <= now()) THEN excluded.item_length ELSE e.item_length END,
			event_type  = CASE WHEN e.state = 'dead' OR (e.state = 'completed' AND e.dedup_until <= now()) THEN excluded.event_type ELSE e.event_type END,
			queued_at   = CASE WHEN e.state = 'dead' OR (e.state = 'completed' AND e.dedup_until <= now()) THEN now() ELSE e.queued_at END
		RETURNING source, event_id, state, (xmax = 0) OR queued_at = now(), first_received_at`,
		eSrc, eID, eType, eDeliv, eOff, eLen, eCount)
	if err != nil {
		return nil, fmt.Errorf("upsert events: %w", err)
	}
	for res.Next() {
		var source, id, state string
		var fresh bool
		var first time.Time
		if err := res.Scan(&source, &id, &state, &fresh, &first); err != nil {
			res.Close()
			return nil, err
		}
		r := firstOf[key(source, id)]
		r.state, r.fresh, r.received = state, fresh, first
	}
	res.Close()
	if err := res.Err(); err != nil {
		return nil, fmt.Errorf("upsert events: %w", err)
	}

	// 3. River jobs, unique until executed. An event completed within its
	// window never gets one; every other first occurrence asks River, whose
	// answer (UniqueSkippedAsDuplicate) decides between accepted and duplicate.
	var params []river.InsertManyParams
	var asked []*eventRow
	for _, r := range firsts {
		if !r.fresh && r.state == "completed" {
			r.status = StatusDuplicate
			continue
		}
		params = append(params, river.InsertManyParams{
			Args:       jobs.EventArgs{Source: r.d.Source.Name, EventID: r.ev.ID},
			InsertOpts: jobs.InsertOptsFor(r.d.Source.MaxAttempts),
		})
		asked = append(asked, r)
	}
	if len(params) > 0 {
		results, err := s.river.InsertManyTx(ctx, tx, params)
		if err != nil {
			return nil, fmt.Errorf("enqueue: %w", err)
		}
		for i, jr := range results {
			if jr.UniqueSkippedAsDuplicate {
				asked[i].status = StatusDuplicate
			} else {
				asked[i].status = StatusAccepted
			}
		}
	}
	// A job found for an event we thought new means it is already queued: keep
	// its state as it was (queued); nothing else to do.

	// 4. Results, and dead items for duplicates of reject sources.
	out := make([][]EventResult, len(ds))
	for i, d := range ds {
		out[i] = make([]EventResult, len(d.Events))
	}
	var dead []*eventRow
	for _, r := range rows {
		status := StatusDuplicate
		first := firstOf[key(r.d.Source.Name, r.ev.ID)]
		if r.first {
			status = r.status
		}
		out[r.di][r.ei] = EventResult{EventID: r.ev.ID, Status: status, firstSeen: first.received}
		if status == StatusDuplicate && r.d.Source.OnDuplicate == OnDuplicateReject {
			dead = append(dead, r)
		}
	}
	if len(dead) > 0 {
		n := len(dead)
		dSrc, dID, dType, dCT, dHdr := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		dDeliv := make([]int64, n)
		dPayload := make([][]byte, n)
		for i, r := range dead {
			h, _ := json.Marshal(r.d.Headers)
			dSrc[i], dID[i], dType[i], dCT[i], dHdr[i], dDeliv[i] = r.d.Source.Name, r.ev.ID, r.ev.Type, r.d.ContentType, string(h), r.deliv
			dPayload[i] = r.d.Body
			if r.ev.Length >= 0 {
				dPayload[i] = r.d.Body[r.ev.Offset : r.ev.Offset+r.ev.Length]
			}
		}
		if _, err := tx.Exec(ctx, `INSERT INTO hookline_dead (source, event_id, event_type, reason, last_error, delivery_id, content_type, headers, payload)
			SELECT s, i, t, 'duplicate', 'duplicate delivery rejected (on_duplicate: reject)', d, c, h, p
			FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::jsonb[], $7::bytea[]) AS u(s, i, t, d, c, h, p)`,
			dSrc, dID, dType, dDeliv, dCT, dHdr, dPayload); err != nil {
			return nil, fmt.Errorf("dead-set duplicates: %w", err)
		}
	}
	return out, nil
}

// IsUnavailable reports whether err means the database could not be reached
// or the transaction could not complete for reasons of the database, not of
// the data: the request is answered 503 and the provider retries.
func IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// Class 23 (integrity) and 22 (data) are the data's fault.
		return !strings.HasPrefix(pgErr.Code, "22") && !strings.HasPrefix(pgErr.Code, "23")
	}
	return true
}
