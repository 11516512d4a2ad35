-- Rules the statements share, defined once. Both are plain SQL expressions,
-- which PostgreSQL inlines into the statements that call them: no call cost.

-- An event's own bytes in its delivery's body: the whole body, or a batch
-- item's slice (item_offset counts from 0).
CREATE FUNCTION hookline_item(body bytea, item_offset integer, item_length integer) RETURNS bytea
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT CASE WHEN item_offset IS NULL THEN body ELSE substring(body FROM item_offset + 1 FOR item_length) END $$;

-- Whether a new delivery of an event in this state is processed again (a
-- provider's retry) rather than a duplicate: the event is dead, or
-- completed and past its dedup window.
CREATE FUNCTION hookline_requeues(state text, dedup_until timestamptz) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
AS $$ SELECT state = 'dead' OR (state = 'completed' AND dedup_until <= now()) $$;

-- "processing" is what an event's live claim says (the admin lookup reads
-- it from hookline_claims); the event row itself is only ever queued,
-- completed or dead.
UPDATE hookline_events SET state = 'queued' WHERE state = 'processing';
ALTER TABLE hookline_events DROP CONSTRAINT hookline_events_state_check;
ALTER TABLE hookline_events ADD CONSTRAINT hookline_events_state_check CHECK (state IN ('queued', 'completed', 'dead'));
DROP INDEX hookline_events_unfinished;
CREATE INDEX hookline_events_unfinished ON hookline_events (queued_at) WHERE state = 'queued';
