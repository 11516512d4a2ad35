-- Per queue an instance configures (same order as configures), the longest
-- an accepted event of that queue may wait before it completes or goes to
-- the dead set, in microseconds: max_attempts × (timeout + backoff.max) +
-- lease + 60 s. A queue kept only by a killed instance's record, or
-- configured by a live instance that runs no worker for it, is kept no
-- longer than that. Records written before this column have none.
ALTER TABLE hookline_instances ADD COLUMN bounds bigint[] NOT NULL DEFAULT '{}';
