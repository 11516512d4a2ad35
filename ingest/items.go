package ingest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/hookline/hookline/internal/tracing"
	"github.com/hookline/hookline/providers"
)

// Items: events that reach hookline other than as a webhook delivery (a
// reconciliation run finds them in the provider's events API). They are
// stored through the same path as a verified delivery — resolution,
// routing, ordering, the group committer's dedupe — so an item and a
// webhook of the same event are one event, whichever commits first.

// Item is one event body, as the provider's API gave it (the same JSON a
// webhook carries for the event, or a batch webhook's item), with the type
// the API names (used when the source's resolution finds none).
type Item struct {
	Body []byte
	Type string
}

// itemsQuery reports which (source, event_id) hookline has ever accepted.
const itemsQuery = `SELECT e.event_id FROM hookline_events e WHERE e.source = $1 AND e.event_id = ANY($2::text[])`

// itemEvent resolves an item as a delivery of source would be: the
// source's event_id and event_type resolvers where configured, else the
// provider's (a batch provider's item-level default id).
func itemEvent(src *Source, it Item) (DeliveryEvent, error) {
	pr := &providers.Request{Body: it.Body, Header: http.Header{"Content-Type": {"application/json"}}}
	var ev providers.Event
	var err error
	_, batch := src.Provider.(providers.Splitter)
	if batch && src.EventID == nil {
		ev, err = itemDefaultID(src, pr)
	} else {
		ev, err = resolveOne(src, pr)
	}
	if err != nil {
		return DeliveryEvent{}, err
	}
	if src.EventType != nil {
		if ev.Type, err = src.EventType(pr); err != nil {
			return DeliveryEvent{}, err
		}
	}
	if ev.Type == "" {
		ev.Type = it.Type
	}
	// The type is required where a webhook's would be: a batch's items
	// need none, a single event does when its source resolves a type.
	if err := checkEvent(src, ev, !batch && (src.EventType != nil || src.defaultType != "")); err != nil {
		return DeliveryEvent{}, err
	}
	de := DeliveryEvent{ID: ev.ID, Type: ev.Type, Length: -1, Matched: match(src, ev.Type, it.Body)}
	return de, orderEvent(src.Ordering, pr, &de)
}

// itemDefaultID resolves the id of a batch provider's item with the
// provider's documented default (relative to the item).
func itemDefaultID(src *Source, pr *providers.Request) (providers.Event, error) {
	d, ok := src.Provider.(providers.Describer)
	if !ok {
		return providers.Event{}, fmt.Errorf("source %s: the provider names no default event id; configure event_id", src.Name)
	}
	resolve, err := providers.ParseKeyResolver(d.Describe().DefaultEventID)
	if err != nil {
		return providers.Event{}, fmt.Errorf("source %s: the provider's default event id cannot read an item (%v); configure event_id", src.Name, err)
	}
	id, err := resolve(pr)
	return providers.Event{ID: id}, err
}

// Accepted reports, per item, whether hookline has ever accepted its event
// (in any state), and refused[i] why item i can never be stored: its event
// id or type is refused as a webhook carrying it would be (blank, too
// long, a control character, …); such an item is not accepted.
func (s *Server) Accepted(ctx context.Context, source string, items []Item) (accepted []bool, refused []error, err error) {
	src, ok := s.sources[source]
	if !ok {
		return nil, nil, fmt.Errorf("ingest: unknown source %q", source)
	}
	ids := make([]string, 0, len(items))
	refused = make([]error, len(items))
	for i, it := range items {
		ev, err := itemEvent(src, it)
		if err != nil {
			refused[i] = err
			continue
		}
		ids = append(ids, ev.ID)
	}
	rows, err := s.cfg.Pool.Query(ctx, itemsQuery, source, ids)
	if err != nil {
		return nil, nil, fmt.Errorf("look up events: %w", err)
	}
	defer rows.Close()
	known := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, nil, err
		}
		known[id] = true
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("look up events: %w", err)
	}
	accepted = make([]bool, len(items))
	for i := range items {
		if refused[i] == nil {
			accepted[i], ids = known[ids[0]], ids[1:]
		}
	}
	return accepted, refused, nil
}

// StoreItems stores items of source, in the order given, each as a
// delivery of origin (OriginReconcile) through the ingest path: each is
// committed before the next is submitted, so ordered keys see them in the
// order given. Each item's delivery gets a trace (storeItem), which its
// event's attempts continue. It returns each item's result (accepted, or a duplicate of
// an event already accepted); on an error, the items before it stay stored.
func (s *Server) StoreItems(ctx context.Context, source string, items []Item, origin string) ([]EventResult, error) {
	src, ok := s.sources[source]
	if !ok {
		return nil, fmt.Errorf("ingest: unknown source %q", source)
	}
	if origin != OriginWebhook && origin != OriginReconcile {
		return nil, fmt.Errorf("ingest: unknown origin %q", origin)
	}
	out := make([]EventResult, 0, len(items))
	for i, it := range items {
		ev, err := itemEvent(src, it)
		if err != nil {
			return out, fmt.Errorf("item %d: %w", i, err)
		}
		now := time.Now().UTC()
		d := &Delivery{Source: src, ReceivedAt: now, ContentType: "application/json", Body: it.Body, Origin: origin,
			Headers: map[string][]string{"Content-Type": {"application/json"}}, Events: []DeliveryEvent{ev}}
		res, err := s.storeItem(ctx, d)
		if err != nil {
			return out, fmt.Errorf("store item %d (event %s): %w", i, ev.ID, err)
		}
		out = append(out, res...)
	}
	return out, nil
}

// storeItem stores one item's delivery d under a span of its own, whose
// trace becomes the event's trace as a webhook request's does: it
// continues ctx's trace if ctx has one, else it starts one per item.
func (s *Server) storeItem(ctx context.Context, d *Delivery) ([]EventResult, error) {
	ctx, span := s.cfg.Tracer.Start(ctx, "store "+d.Origin+" event", trace.WithSpanKind(trace.SpanKindProducer))
	defer span.End()
	if span.IsRecording() {
		span.SetAttributes(attribute.String("hookline.source", d.Source.Name), attribute.String("hookline.origin", d.Origin),
			attribute.String("hookline.event_id", d.Events[0].ID))
	}
	d.TraceParent = tracing.TraceParent(ctx)
	res, err := s.store(ctx, d, d.ReceivedAt.Add(s.cfg.QueueTimeout))
	if errors.Is(err, ErrBusy) {
		// The committer is saturated by webhooks: they go first; wait and retry.
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		res, err = s.store(ctx, d, time.Now().Add(s.cfg.QueueTimeout))
	}
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	return res, err
}
