-- Room for HOT updates of hookline_events. A worker updates an event row
-- twice: counting the attempt (non-indexed columns only, so PostgreSQL can
-- keep the new row version on the same page without new index entries, if
-- the page has room) and recording the outcome. With the default fillfactor
-- of 100 the pages ingest fills leave no room, so every update moved the row
-- and added an entry to each index. New pages are filled to 80 %; existing
-- pages keep their rows until they are updated or vacuumed.
ALTER TABLE hookline_events SET (fillfactor = 80);
