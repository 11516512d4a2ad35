DROP INDEX hookline_events_unfinished;
CREATE INDEX hookline_events_unfinished ON hookline_events (queued_at) WHERE state IN ('queued', 'processing');
ALTER TABLE hookline_events DROP CONSTRAINT hookline_events_state_check;
ALTER TABLE hookline_events ADD CONSTRAINT hookline_events_state_check CHECK (state IN ('queued', 'processing', 'completed', 'dead'));
DROP FUNCTION hookline_requeues(text, timestamptz);
DROP FUNCTION hookline_item(bytea, integer, integer);
