-- The operator console and GET /admin/events: keyset-paginated searches,
-- newest first, that stay bounded on a large table (docs/console.md has the
-- plans and their costs on 1,000,000 events). IF NOT EXISTS: on a large
-- table, create them beforehand with CREATE INDEX CONCURRENTLY (same names
-- and definitions), and this step keeps them.

-- Newest first over every source; (source, event_id) completes the order so
-- that a page boundary between events received in the same transaction (one
-- group commit shares its timestamp) is exact.
CREATE INDEX IF NOT EXISTS hookline_events_newest ON hookline_events (first_received_at, source, event_id);
-- Newest first within one source.
CREATE INDEX IF NOT EXISTS hookline_events_source_newest ON hookline_events (source, first_received_at, event_id);
-- Event id prefixes (LIKE 'evt_1Pb%'), whatever the database's collation.
CREATE INDEX IF NOT EXISTS hookline_events_id_prefix ON hookline_events (event_id text_pattern_ops);
-- Events with a dead destination (state=dead): few rows, and only rows that
-- are dead get an entry, so the workers' updates of waiting rows never touch it.
CREATE INDEX IF NOT EXISTS hookline_event_destinations_dead ON hookline_event_destinations (source, event_id) WHERE state = 'dead';
