DROP INDEX IF EXISTS hookline_events_unfinished;
ALTER TABLE hookline_events DROP COLUMN IF EXISTS job_attempts;
ALTER TABLE hookline_events DROP COLUMN IF EXISTS job_id;
