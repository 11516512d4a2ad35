package main

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// orderCheck is the verdict on an ordered run's lines.
type orderCheck struct {
	lines      int    // lines (destination, key) with at least one place
	violations int    // lines whose forwards did not follow their places
	inversions int    // places out of the senders' real-time order
	missing    int    // places the destination never saw in their line (not forwarded, or without Hookline-Order-Key)
	example    string // the first violation, for the report
}

// checkOrder compares, per line, the order in which the destination saw
// the forwards begin (got) with the line's places in Postgres (want: event
// ids by order_seq), and the places with what the senders saw (spans): a
// place must not come before that of an event whose answer the senders
// had before they sent it. A line forwarded only in part (a prefix of its
// places) is not out of order: its missing places count as missing (and
// as LOST). An event forwarded again before the next one of its line (a
// retry holding its key: DOUBLE counts it) is in order; forwarded again
// after a later one, it is not. Lines are keyed by lineKey.
func checkOrder(got, want map[string][]string, spans map[string]span) orderCheck {
	var c orderCheck
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		w, g := want[k], slices.Compact(slices.Clone(got[k]))
		c.lines++
		c.inversions += realTimeInversions(w, spans)
		seen := make(map[string]bool, len(g))
		for _, id := range g {
			seen[id] = true
		}
		for _, id := range w {
			if !seen[id] {
				c.missing++
			}
		}
		if len(g) > len(w) || !slices.Equal(g, w[:len(g)]) {
			c.violations++
			if c.example == "" {
				c.example = fmt.Sprintf("line %q: places %s, forwarded %s", k, abbrev(w), abbrev(g))
			}
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			c.violations++
			if c.example == "" {
				c.example = fmt.Sprintf("line %q: forwarded %s, no places in Postgres", k, abbrev(g))
			}
		}
	}
	return c
}

// realTimeInversions counts the events of a line (ids in place order)
// that were sent after an event placed later than them had been answered:
// the later event's transaction committed before theirs began, so it
// should have the earlier place. Events without a span (not accepted by
// the senders' account) are passed over.
func realTimeInversions(ids []string, spans map[string]span) int {
	n := 0
	var minAck time.Time // the earliest answer among the events placed after the current one
	for i := len(ids) - 1; i >= 0; i-- {
		sp, ok := spans[ids[i]]
		if !ok {
			continue
		}
		if !minAck.IsZero() && minAck.Before(sp.sent) {
			n++
		}
		if minAck.IsZero() || sp.acked.Before(minAck) {
			minAck = sp.acked
		}
	}
	return n
}

func abbrev(ids []string) string {
	if len(ids) > 6 {
		return fmt.Sprintf("%v … (%d)", ids[:6], len(ids))
	}
	return fmt.Sprint(ids)
}

// readLines reads every ordering line's places from Postgres: lineKey →
// event ids by place.
func readLines(ctx context.Context, pool *pgxpool.Pool) (map[string][]string, error) {
	rows, err := pool.Query(ctx, `SELECT destination, order_key, event_id FROM hookline_event_destinations
		WHERE source = 'stripe' AND order_key IS NOT NULL AND order_seq IS NOT NULL
		ORDER BY destination, order_key, order_seq`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	lines := map[string][]string{}
	for rows.Next() {
		var dest, key, id string
		if err := rows.Scan(&dest, &key, &id); err != nil {
			return nil, err
		}
		lines[lineKey(dest, key)] = append(lines[lineKey(dest, key)], id)
	}
	return lines, rows.Err()
}
