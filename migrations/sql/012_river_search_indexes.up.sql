-- River's two GIN indexes on river_job (args and metadata) serve only
-- containment searches (args @> …, metadata @> …), which neither hookline
-- nor River UI runs: River finds a duplicate job by unique_key and a job by
-- id, state, queue and kind, each with a b-tree of its own. Every job row
-- written (inserted at ingest, moved to running when taken) paid for an
-- entry in each. hookline's river_job table is its own, so both go; River's
-- reindexer is told not to look for them (jobs/riverrow.go). A
-- deployment that searches its jobs by args or metadata can create them
-- again: the down migration shows how.
DROP INDEX IF EXISTS river_job_args_index;
DROP INDEX IF EXISTS river_job_metadata_index;
