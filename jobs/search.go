package jobs

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/hookline/hookline/idem"
)

// The reads behind the operator console and its JSON routes: the event
// search (GET /admin/events), an event's stored payload, the overview (GET
// /admin/overview) and the destinations' circuits and lag. Their statements
// are in this file. Every one runs in a read-only transaction under
// QueryTimeout, so a slow plan ends with ErrQueryTimeout instead of holding
// a connection; their costs on 1,000,000 events are in docs/console.md.

// QueryTimeout bounds each statement of the console's reads.
const QueryTimeout = 5 * time.Second

// ErrQueryTimeout: a read took longer than QueryTimeout (the search's
// filters matched too little of what its index walks; narrow it).
var ErrQueryTimeout = errors.New("the query took longer than " + QueryTimeout.String())

// ErrBadCursor: a cursor that no search returned.
var ErrBadCursor = errors.New("cursor: malformed; pass next_cursor from the previous page unchanged")

// EventFilter selects events; zero fields match everything.
type EventFilter struct {
	Source string
	// State is "" or an event state (EventQueued, EventProcessing,
	// EventCompleted, EventDead), as the lookup reports it.
	State string
	// Type is the exact event type.
	Type string
	// IDPrefix matches event ids that start with it (byte for byte).
	IDPrefix string
	Since    time.Time // first received at or after
	Until    time.Time // first received before
}

// Validate reports a bad field by its name.
func (f EventFilter) Validate() error {
	switch f.State {
	case "", EventQueued, EventProcessing, EventCompleted, EventDead:
	default:
		return fmt.Errorf("state: %q is not a state (want queued, processing, completed or dead)", f.State)
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Since.Before(f.Until) {
		return errors.New("since: must be before until")
	}
	// Postgres could not compare such text.
	return validText("source", f.Source, "type", f.Type, "id_prefix", f.IDPrefix)
}

// EventKey is a position in the search's order (first received, then
// source, then event id, all descending). The order is total, so keyset
// pages see every event present when paging started exactly once.
type EventKey struct {
	ReceivedAt time.Time
	Source     string
	EventID    string
}

// Cursor is k as an opaque cursor: base64url of ["e1", µs, source, id].
func (k EventKey) Cursor() string {
	raw, _ := json.Marshal([]any{"e1", k.ReceivedAt.UnixMicro(), k.Source, k.EventID})
	return base64.RawURLEncoding.EncodeToString(raw)
}

// ParseEventCursor reverses Cursor; anything else is ErrBadCursor, also a
// source or event id that no event can have (invalid UTF-8, a NUL byte),
// which Postgres could not compare.
func ParseEventCursor(s string) (*EventKey, error) {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, ErrBadCursor
	}
	var parts []json.RawMessage
	if json.Unmarshal(raw, &parts) != nil || len(parts) != 4 || string(parts[0]) != `"e1"` {
		return nil, ErrBadCursor
	}
	var us int64
	k := &EventKey{}
	if json.Unmarshal(parts[1], &us) != nil || json.Unmarshal(parts[2], &k.Source) != nil ||
		json.Unmarshal(parts[3], &k.EventID) != nil || k.Source == "" || k.EventID == "" ||
		!isText(k.Source) || !isText(k.EventID) {
		return nil, ErrBadCursor
	}
	var ok bool
	if k.ReceivedAt, ok = CursorTime(us); !ok {
		return nil, ErrBadCursor
	}
	return k, nil
}

// Bounds of a cursor's instant: the years 1 to 9999, which hold every time
// a row can have.
var (
	minCursorMicro = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	maxCursorMicro = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
)

// CursorTime is the instant of a cursor's microseconds since the Unix
// epoch; false outside the years 1 to 9999, which no cursor this package
// writes holds (such a number would overflow on its way to Postgres and
// page from the wrong place, so it is a malformed cursor).
func CursorTime(us int64) (time.Time, bool) {
	if us < minCursorMicro || us >= maxCursorMicro {
		return time.Time{}, false
	}
	return time.UnixMicro(us), true
}

// EventSummary is one event in a search's page.
type EventSummary struct {
	Source, EventID, EventType string
	// State as the lookup reports it (EventStatus.State).
	State        string
	Deliveries   int
	Attempts     int // summed over its destinations
	Destinations int // how many it was routed to
	ReceivedAt   time.Time
}

// Key is s's position in the search's order.
func (s *EventSummary) Key() EventKey {
	return EventKey{ReceivedAt: s.ReceivedAt, Source: s.Source, EventID: s.EventID}
}

// Search returns up to limit events matching f, newest first (by first
// receipt), starting after after (nil: the newest), and whether more follow.
func (e *Events) Search(ctx context.Context, f EventFilter, after *EventKey, limit int) ([]EventSummary, bool, error) {
	if limit <= 0 {
		return nil, false, errors.New("jobs: Search: limit must be positive")
	}
	if err := f.Validate(); err != nil {
		return nil, false, err
	}
	items := make([]EventSummary, 0, min(limit+1, 64))
	err := e.readOnly(ctx, func(tx pgx.Tx) error {
		drive, err := fewInState(ctx, tx, f)
		if err != nil {
			return err
		}
		q, args := searchSQL(f, after, limit+1, drive)
		// An unnamed statement is planned with its values: the planner sees
		// the id prefix and picks the index that matches least.
		rows, err := tx.Query(ctx, q, append([]any{pgx.QueryExecModeDescribeExec}, args...)...)
		if err != nil {
			return err
		}
		var s EventSummary
		_, err = pgx.ForEachRow(rows, []any{&s.Source, &s.EventID, &s.EventType, &s.Deliveries, &s.ReceivedAt, &s.State, &s.Attempts, &s.Destinations},
			func() error { items = append(items, s); return nil })
		return err
	})
	if err != nil {
		return nil, false, fmt.Errorf("search events: %w", err)
	}
	more := len(items) > limit
	if more {
		items = items[:limit]
	}
	return items, more, nil
}

// StoredPayload is an event's body as hookline keeps it.
type StoredPayload struct {
	ContentType string
	Headers     json.RawMessage // {"Name": ["value", ...]}, credentials never stored
	Body        []byte          // the exact raw bytes (a batch item's own bytes)
	// FromDeadItem: the delivery was pruned by retention and this is the
	// copy its newest dead item keeps.
	FromDeadItem bool
}

// Payload returns the payload of (source, eventID): the event's first
// stored delivery, else the delivery its destination forwards last, else
// its newest dead item's copy; nil when none is kept (pruned by retention).
func (e *Events) Payload(ctx context.Context, source, eventID string) (*StoredPayload, error) {
	var p StoredPayload
	err := e.readOnly(ctx, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, payloadSQL, source, eventID).Scan(&p.ContentType, &p.Headers, &p.Body, &p.FromDeadItem)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read payload: %w", err)
	}
	return &p, nil
}

// OverviewMinutes is the overview's span: the last hour, minute by minute.
const OverviewMinutes = 60

// Overview is what the console's first page shows: per source, deliveries
// per minute over the last hour, and the queue's lag.
type Overview struct {
	// Since is the start of the first minute; minute i of every series
	// starts at Since + i minutes, and the last one is the current minute.
	Since time.Time
	// CountedSince is where the counts start: the minutes before it are
	// not counted yet (an OverviewCache fills the hour in after a start)
	// and read 0.
	CountedSince time.Time
	Sources      []SourceActivity
	// Queue is River's view: unfinished event jobs by state, and the age of
	// the oldest job ready to run and not taken.
	Queue QueueStats
	// Destinations are the configured destinations' states and backlogs.
	Destinations []DestinationLag
}

// SourceActivity counts a source's deliveries and failed attempts per
// minute. A delivery is one verified HTTP request (a batch counts once, an
// operator retry counts too); it is accepted when it stored a new event or
// queued a destination again, else it was a duplicate; Received = Accepted +
// Duplicate. Failed counts destination attempts that did not succeed.
type SourceActivity struct {
	Source    string
	Received  [OverviewMinutes]int
	Accepted  [OverviewMinutes]int
	Duplicate [OverviewMinutes]int
	Failed    [OverviewMinutes]int
}

// DestinationLag is a destination's state with its circuit and backlog.
type DestinationLag struct {
	DestinationInfo
	// Circuit is the breaker's own state (closed, open, half_open), also
	// while the destination is paused.
	Circuit  string
	OpenedAt *time.Time
	// OldestQueuedAt is when its longest-waiting event was queued (waiting
	// includes a backoff, a pause or an open circuit); nil when none waits.
	OldestQueuedAt *time.Time
}

// Overview reads the overview: the activity of the sources in names and of
// any other source that had deliveries in the last hour, River's queue and
// the destinations in names. It counts the whole hour at once; an
// OverviewCache counts each minute once.
func (e *Events) Overview(ctx context.Context, names []DestinationName) (*Overview, error) {
	ov, _, err := e.overview(ctx, names, func(ctx context.Context, tx pgx.Tx, since time.Time) ([]minuteCount, time.Time, error) {
		counts, err := countMinutes(ctx, tx, since, time.Time{})
		return counts, since, err
	})
	return ov, err
}

// minuteCount is one source's counts in one minute.
type minuteCount struct {
	source                     string
	minute                     time.Time
	received, accepted, failed int
}

// countMinutes counts the minutes from from to to (zero: up to now).
func countMinutes(ctx context.Context, tx pgx.Tx, from, to time.Time) ([]minuteCount, error) {
	if to.IsZero() {
		to = from.Add(24 * time.Hour) // after now
	}
	rows, err := tx.Query(ctx, activitySQL, from, to)
	if err != nil {
		return nil, err
	}
	var m minuteCount
	var counts []minuteCount
	_, err = pgx.ForEachRow(rows, []any{&m.source, &m.minute, &m.received, &m.accepted, &m.failed}, func() error {
		counts = append(counts, m)
		return nil
	})
	return counts, err
}

// overview reads the overview; count counts what the caller does not have
// of the hour that starts at since, and says from where the hour is
// counted. It returns those counts too, Sources left for the caller.
func (e *Events) overview(ctx context.Context, names []DestinationName,
	count func(ctx context.Context, tx pgx.Tx, since time.Time) ([]minuteCount, time.Time, error)) (*Overview, []minuteCount, error) {
	ov := &Overview{}
	var counts []minuteCount
	err := e.readOnly(ctx, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, overviewSinceSQL).Scan(&ov.Since); err != nil {
			return err
		}
		var err error
		if counts, ov.CountedSince, err = count(ctx, tx, ov.Since); err != nil {
			return err
		}
		ov.Queue, err = ReadQueueStats(ctx, tx)
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("read overview: %w", err)
	}
	if ov.Destinations, err = e.DestinationLags(ctx, names); err != nil {
		return nil, nil, err
	}
	ov.Sources = activity(ov.Since, names, counts)
	return ov, counts, nil
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// activity is the per-minute series of the hour starting at since: the
// sources in names first (shown even when quiet), then the others in the
// order counts name them. Counts outside the hour are left out.
func activity(since time.Time, names []DestinationName, counts []minuteCount) []SourceActivity {
	bySource := map[string]*SourceActivity{}
	var order []string
	get := func(source string) *SourceActivity {
		if bySource[source] == nil {
			bySource[source] = &SourceActivity{Source: source}
			order = append(order, source)
		}
		return bySource[source]
	}
	for _, n := range names {
		get(n.Source)
	}
	for _, m := range counts {
		i := int(m.minute.Sub(since) / time.Minute)
		if i < 0 || i >= OverviewMinutes {
			continue // before the hour, or after now (clock skew)
		}
		a := get(m.source)
		a.Received[i] += m.received
		a.Accepted[i] += m.accepted
		a.Duplicate[i] += m.received - m.accepted
		a.Failed[i] += m.failed
	}
	out := make([]SourceActivity, len(order))
	for i, s := range order {
		out[i] = *bySource[s]
	}
	return out
}

// DestinationLags returns each destination in names (in that order) with
// its state, circuit and backlog.
func (e *Events) DestinationLags(ctx context.Context, names []DestinationName) ([]DestinationLag, error) {
	infos, err := NewDestinations(e.pool, nil, names).List(ctx)
	if err != nil {
		return nil, err
	}
	sources, dests := make([]string, len(infos)), make([]string, len(infos))
	for i, d := range infos {
		sources[i], dests[i] = d.Source, d.Name
	}
	out := make([]DestinationLag, len(infos))
	err = e.readOnly(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, destinationLagSQL, sources, dests)
		if err != nil {
			return err
		}
		i := 0
		var l DestinationLag
		_, err = pgx.ForEachRow(rows, []any{&l.Circuit, &l.OpenedAt, &l.OldestQueuedAt}, func() error {
			l.DestinationInfo = infos[i]
			out[i] = l
			i++
			return nil
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read destinations' lag: %w", err)
	}
	return out, nil
}

// OverviewCache shares one overview between the requests of ttl, and
// counts each minute of the hour once it has settled: however many
// operators keep the console open, the overview's statements run at most
// once per ttl, one read at a time, and each counts the minutes that have
// not settled (the last two). After a start, a read also counts the past
// backwards, OverviewStep per statement, at least one step and then for up
// to Budget; on a busy hour the rest fills in over the next reads
// (Overview.CountedSince says how far it has come). No statement counts
// more than OverviewStep of the past or the two unsettled minutes, each
// under QueryTimeout.
type OverviewCache struct {
	// Budget is how long a read may spend counting the past (default
	// OverviewBudget); a read counts at least one OverviewStep of it.
	Budget time.Duration

	events *Events
	names  []DestinationName
	ttl    time.Duration
	mu     sync.Mutex
	at     time.Time
	last   *Overview
	// settled holds the counts of the minutes in [lo, hi): minutes that
	// ended over settleAfter ago, whose deliveries have all committed.
	settled []minuteCount
	lo, hi  time.Time
}

// How an OverviewCache counts the past: in statements of OverviewStep, for
// up to OverviewBudget per read.
const (
	OverviewStep   = 5 * time.Minute
	OverviewBudget = time.Second
)

// settleAfter is how long after a minute's end its counts are final: a
// delivery is stored within seconds of its received_at, an attempt at its
// at (ingest's queue_timeout and the commit are far shorter).
const settleAfter = time.Minute

// NewOverviewCache reads e's overview of names at most once per ttl.
func NewOverviewCache(e *Events, names []DestinationName, ttl time.Duration) *OverviewCache {
	return &OverviewCache{events: e, names: names, ttl: ttl, Budget: OverviewBudget}
}

// Read returns an overview at most ttl old.
func (c *OverviewCache) Read(ctx context.Context) (*Overview, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last != nil && time.Since(c.at) < c.ttl {
		return c.last, nil
	}
	var hi time.Time // what this read leaves settled: [ov.CountedSince, hi)
	ov, fresh, err := c.events.overview(ctx, c.names, func(ctx context.Context, tx pgx.Tx, since time.Time) ([]minuteCount, time.Time, error) {
		// The current minute is since + 59 minutes; those before since +
		// 58 minutes ended over settleAfter ago.
		hi = since.Add((OverviewMinutes - 1) * time.Minute).Add(-settleAfter)
		from, lo := c.hi, maxTime(since, c.lo)
		if c.hi.IsZero() || hi.Before(c.hi) { // nothing counted yet, or the database's clock went back
			c.settled, c.lo, c.hi = nil, time.Time{}, time.Time{}
			from, lo = hi, hi
		}
		start := time.Now()
		counts, err := countMinutes(ctx, tx, from, time.Time{})
		for first := true; err == nil && lo.After(since) && (first || time.Since(start) < c.Budget); first = false {
			next := maxTime(since, lo.Add(-OverviewStep))
			var more []minuteCount
			more, err = countMinutes(ctx, tx, next, lo)
			counts, lo = append(counts, more...), next
		}
		return counts, lo, err
	})
	if err != nil {
		return nil, err
	}
	all := append(append([]minuteCount(nil), c.settled...), fresh...)
	ov.Sources = activity(ov.Since, c.names, all)
	c.settled = c.settled[:0:0]
	for _, m := range all {
		if !m.minute.Before(ov.CountedSince) && m.minute.Before(hi) {
			c.settled = append(c.settled, m)
		}
	}
	c.lo, c.hi = ov.CountedSince, hi
	c.last, c.at = ov, time.Now()
	return ov, nil
}

// readOnly runs fn in a read-only transaction whose statements end after
// QueryTimeout with ErrQueryTimeout.
func (e *Events) readOnly(ctx context.Context, fn func(tx pgx.Tx) error) error {
	err := pgx.BeginTxFunc(ctx, e.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly, IsoLevel: pgx.RepeatableRead}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL statement_timeout = "+strconv.FormatInt(QueryTimeout.Milliseconds(), 10)); err != nil {
			return err
		}
		return fn(tx)
	})
	var pgErr *pgconn.PgError
	if err != nil && ctx.Err() == nil && errors.As(err, &pgErr) && pgErr.Code == pgerrcode.QueryCanceled {
		return ErrQueryTimeout
	}
	return err
}

// claimKeySQL is the claim key of destination row r (idem.ComposeKey of
// Namespace, source, destination and event id, as ClaimKeyPrefix builds it).
func claimKeySQL(r string) string {
	sep := ` || '` + idem.KeySeparator + `' || `
	return `'` + Namespace + idem.KeySeparator + `' || ` + r + `.source` + sep + r + `.destination` + sep + r + `.event_id`
}

// liveClaimSQL is a condition on destination row r: a worker holds its
// claim under a live lease (the lookup's "processing").
func liveClaimSQL(r string) string {
	return `EXISTS (SELECT 1 FROM ` + ClaimsTable + ` c WHERE c.key = ` + claimKeySQL(r) +
		` AND c.state = 'processing' AND c.expires_at > now())`
}

// eventStateSQL is event e's state, summed attempts and number of
// destinations, by the lookup's rule: dead if a destination is dead, else
// processing if a waiting one's claim is processing under a live lease,
// else queued if one waits, else completed (also with no destination).
var eventStateSQL = `SELECT CASE WHEN bool_or(r.state = 'dead') THEN 'dead'
		WHEN bool_or(r.state = 'queued' AND ` + liveClaimSQL("r") + `) THEN 'processing'
		WHEN bool_or(r.state = 'queued') THEN 'queued'
		ELSE 'completed' END,
		COALESCE(sum(r.attempts), 0)::integer, count(*)::integer
	FROM hookline_event_destinations r WHERE r.source = e.source AND r.event_id = e.event_id`

// hasDestinationSQL is a condition on event e: one of its destinations'
// rows satisfies cond (over x). Written as EXISTS so that the planner may
// start from the rows (a partial index) when they are few.
func hasDestinationSQL(cond string) string {
	return `EXISTS (SELECT 1 FROM hookline_event_destinations x WHERE x.source = e.source AND x.event_id = e.event_id AND ` + cond + `)`
}

// stateSQL is the condition on event e that it is in state (eventStateSQL's
// rule, spelt out so that it needs no aggregate).
func stateSQL(state string) string {
	dead, live := hasDestinationSQL("x.state = 'dead'"), hasDestinationSQL("x.state = 'queued' AND "+liveClaimSQL("x"))
	switch state {
	case EventDead:
		return dead
	case EventProcessing:
		return live + " AND NOT " + dead
	case EventQueued:
		return hasDestinationSQL("x.state = 'queued'") + " AND NOT " + dead + " AND NOT " + live
	case EventCompleted:
		return "NOT " + hasDestinationSQL("x.state <> 'completed'")
	}
	return "true"
}

// DriveLimit is how many destination rows in a state (dead, or waiting)
// a search by that state starts from. Up to it, the search reads them all
// and sorts their events (a cost in proportion to their number); beyond it,
// it walks the events newest first and keeps those in the state, which
// finds a page quickly when so many are in it.
const DriveLimit = 20000

// fewInState reports whether the destination rows in f's state (of f's
// source) are at most DriveLimit, counting at most DriveLimit+1 of them in
// the partial index of that state. A search with an id prefix walks the
// prefix's index instead.
func fewInState(ctx context.Context, tx pgx.Tx, f EventFilter) (bool, error) {
	state := rowState(f.State)
	if state == "" || f.IDPrefix != "" {
		return false, nil
	}
	var n int
	err := tx.QueryRow(ctx, countInStateSQL(state), pgx.QueryExecModeDescribeExec, f.Source, DriveLimit+1).Scan(&n)
	return n <= DriveLimit, err
}

// countInStateSQL counts destination rows in state (a literal, so that
// the partial index of that state serves it) of source $1 (unless empty),
// at most $2 of them.
func countInStateSQL(state string) string {
	return `SELECT count(*) FROM (SELECT 1 FROM hookline_event_destinations
		WHERE state = '` + state + `' AND ($1 = '' OR source = $1) LIMIT $2) t`
}

// rowState is the destination rows' state an event state needs one of
// (processing is a queued row with a live claim); "" for completed, which
// needs all of them completed, and for no state.
func rowState(eventState string) string {
	switch eventState {
	case EventDead:
		return "dead"
	case EventQueued, EventProcessing:
		return "queued"
	}
	return ""
}

// likePrefix is a LIKE pattern matching the strings that start with p.
func likePrefix(p string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(p) + "%"
}

// searchSQL is one page of the search: at most n rows of f after after,
// newest first; each row's state is computed for the page only. With a
// source the order (and the keyset) leaves it out: the index on (source,
// first_received_at, event_id) serves it. With drive, the events are those
// of the destination rows in f's state, read first (the lateral subquery,
// fenced by OFFSET 0, cannot be planned before them); else the planner
// walks an index of the events.
func searchSQL(f EventFilter, after *EventKey, n int, drive bool) (string, []any) {
	conds := []string{stateSQL(f.State)}
	var args []any
	add := func(cond string, v any) {
		args = append(args, v)
		conds = append(conds, strings.ReplaceAll(cond, "$?", "$"+strconv.Itoa(len(args))))
	}
	from := "hookline_events e"
	if drive {
		src := ""
		if f.Source != "" {
			src = " AND x.source = $1"
		}
		from = `(SELECT DISTINCT x.source, x.event_id FROM hookline_event_destinations x WHERE x.state = '` + rowState(f.State) + `'` + src + `) c
		CROSS JOIN LATERAL (SELECT * FROM hookline_events e WHERE e.source = c.source AND e.event_id = c.event_id OFFSET 0) e`
	}
	if f.Source != "" {
		add("e.source = $?", f.Source) // $1, as drive expects
	}
	if f.Type != "" {
		add("e.event_type = $?", f.Type)
	}
	if f.IDPrefix != "" {
		add("e.event_id LIKE $?", likePrefix(f.IDPrefix))
	}
	if !f.Since.IsZero() {
		add("e.first_received_at >= $?", f.Since)
	}
	if !f.Until.IsZero() {
		add("e.first_received_at < $?", f.Until)
	}
	order := "e.first_received_at DESC, e.source DESC, e.event_id DESC"
	switch {
	case f.Source != "":
		order = "e.first_received_at DESC, e.event_id DESC"
		if after != nil {
			args = append(args, after.ReceivedAt, after.EventID)
			conds = append(conds, fmt.Sprintf("(e.first_received_at, e.event_id) < ($%d, $%d)", len(args)-1, len(args)))
		}
	case after != nil:
		args = append(args, after.ReceivedAt, after.Source, after.EventID)
		conds = append(conds, fmt.Sprintf("(e.first_received_at, e.source, e.event_id) < ($%d, $%d, $%d)", len(args)-2, len(args)-1, len(args)))
	}
	args = append(args, n)
	page := `SELECT e.source, e.event_id, e.event_type, e.deliveries, e.first_received_at FROM ` + from + `
		WHERE ` + strings.Join(conds, " AND ") + ` ORDER BY ` + order + ` LIMIT $` + strconv.Itoa(len(args))
	return `SELECT e.source, e.event_id, e.event_type, e.deliveries, e.first_received_at, s.state, s.attempts, s.destinations
	FROM (` + page + `) e CROSS JOIN LATERAL (` + eventStateSQL + `) s(state, attempts, destinations)
	ORDER BY ` + order, args
}

const (
	// payloadSQL reads event ($1, $2)'s payload: its first delivery (0), the
	// delivery a destination forwards last (1), its newest dead item (2).
	payloadSQL = `SELECT content_type, headers, body, from_dead FROM (
			SELECT d.content_type, d.headers, hookline_item(d.body, e.item_offset, e.item_length) AS body, false AS from_dead, 0 AS pref, d.id AS at
			FROM hookline_events e JOIN hookline_deliveries d ON d.id = e.delivery_id
			WHERE e.source = $1 AND e.event_id = $2
			UNION ALL
			SELECT d.content_type, d.headers, hookline_item(d.body, r.item_offset, r.item_length), false, 1, d.id
			FROM hookline_event_destinations r JOIN hookline_deliveries d ON d.id = r.delivery_id
			WHERE r.source = $1 AND r.event_id = $2
			UNION ALL
			SELECT x.content_type, x.headers, x.payload, true, 2, x.id
			FROM hookline_dead x WHERE x.source = $1 AND x.event_id = $2) p
		ORDER BY pref, at DESC LIMIT 1`

	// overviewSinceSQL is the start of the overview's first minute.
	overviewSinceSQL = `SELECT date_trunc('minute', now()) - interval '59 minutes'`

	// activitySQL counts, per source and minute from $1 to $2, the
	// deliveries, those accepted (they stored an event, or a destination
	// forwards them), and the failed attempts.
	activitySQL = `SELECT source, m, sum(received)::integer, sum(accepted)::integer, sum(failed)::integer FROM (
			SELECT d.source, date_trunc('minute', d.received_at) AS m, 1 AS received,
				(EXISTS (SELECT 1 FROM hookline_events e WHERE e.delivery_id = d.id)
				 OR EXISTS (SELECT 1 FROM hookline_event_destinations r WHERE r.delivery_id = d.id))::integer AS accepted,
				0 AS failed
			FROM hookline_deliveries d WHERE d.received_at >= $1 AND d.received_at < $2
			UNION ALL
			SELECT a.source, date_trunc('minute', a.at), 0, 0, 1
			FROM hookline_attempts a WHERE a.at >= $1 AND a.at < $2 AND a.error <> '') t
		GROUP BY source, m`

	// destinationLagSQL reads destinations ($1 sources, $2 names): the
	// circuit and when the oldest waiting event was queued.
	destinationLagSQL = `SELECT COALESCE(d.circuit, 'closed'), d.opened_at,
			(SELECT min(r.queued_at) FROM hookline_event_destinations r
			 WHERE r.source = c.source AND r.destination = c.name AND r.state = 'queued')
		FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS c(source, name, ord)
			LEFT JOIN hookline_destinations d ON d.source = c.source AND d.name = c.name
		ORDER BY c.ord`
)
