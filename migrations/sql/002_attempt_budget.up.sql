-- The attempt budget lives with the event, not in River's attempt counter
-- (which also counts fetches that never reached the destination: a crash
-- before the claim, a database error). job_attempts counts destination
-- attempts made by job_id; a new job (a provider's re-delivery of a dead
-- event, an operator retry) starts a fresh budget.
ALTER TABLE hookline_events ADD COLUMN job_id bigint;
ALTER TABLE hookline_events ADD COLUMN job_attempts integer NOT NULL DEFAULT 0;
-- For the sweep that re-enqueues events left without an active job.
CREATE INDEX hookline_events_unfinished ON hookline_events (queued_at) WHERE state IN ('queued', 'processing');
