-- The W3C traceparent of the span that received a delivery: the workers'
-- spans for its events continue that trace, and the event lookup shows its
-- trace id. NULL for deliveries stored before tracing and for those no
-- request brought (reconciliation).
ALTER TABLE hookline_deliveries ADD COLUMN traceparent text;
