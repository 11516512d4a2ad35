DROP TABLE hookline_reconcile_runs;
ALTER TABLE hookline_deliveries DROP COLUMN origin;
DROP TABLE hookline_order_keys;
DROP INDEX hookline_event_destinations_line;
ALTER TABLE hookline_event_destinations
    DROP COLUMN order_key, DROP COLUMN order_seq, DROP COLUMN order_by, DROP COLUMN order_by_kind, DROP COLUMN skipped;
