DROP FUNCTION hookline_set_at(anyarray, integer, anyelement);
DROP FUNCTION hookline_free_slot(timestamptz[], integer);
DROP FUNCTION hookline_tokens(double precision, timestamptz, double precision, double precision);
-- Back to one destination per event: the "default" destination's state is
-- the event's again (other destinations' are dropped).
DROP VIEW hookline_event_states;
ALTER TABLE hookline_events
    ADD COLUMN state text NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'completed', 'dead')),
    ADD COLUMN attempts integer NOT NULL DEFAULT 0,
    ADD COLUMN queued_at timestamptz NOT NULL DEFAULT now(),
    ADD COLUMN completed_at timestamptz,
    ADD COLUMN dedup_until timestamptz,
    ADD COLUMN last_error text,
    ADD COLUMN job_id bigint,
    ADD COLUMN job_attempts integer NOT NULL DEFAULT 0;
ALTER TABLE hookline_events DROP CONSTRAINT hookline_events_state_check;
ALTER TABLE hookline_events ADD CONSTRAINT hookline_events_state_check CHECK (state IN ('queued', 'completed', 'dead'));
UPDATE hookline_events e SET state = d.state, attempts = d.attempts, queued_at = d.queued_at, completed_at = d.completed_at,
    dedup_until = d.dedup_until, last_error = d.last_error, job_id = d.job_id, job_attempts = d.job_attempts
FROM hookline_event_destinations d
WHERE d.source = e.source AND d.event_id = e.event_id AND d.destination = 'default';
CREATE INDEX hookline_events_completed ON hookline_events (completed_at) WHERE state = 'completed';
CREATE INDEX hookline_events_unfinished ON hookline_events (queued_at) WHERE state = 'queued';
UPDATE hookline_claims SET key = regexp_replace(key, '^hookline:([^:]*):default:', 'hookline:\1:')
WHERE key LIKE 'hookline:%:default:%';
DROP INDEX hookline_dead_event;
ALTER TABLE hookline_dead DROP COLUMN destination;
CREATE INDEX hookline_dead_event ON hookline_dead (source, event_id);
DROP TABLE hookline_alerts;
DROP TABLE hookline_destinations;
DROP TABLE hookline_attempts;
DROP TABLE hookline_event_destinations;
