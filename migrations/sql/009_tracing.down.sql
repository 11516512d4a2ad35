ALTER TABLE hookline_deliveries DROP COLUMN traceparent;
