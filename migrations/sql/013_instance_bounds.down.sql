ALTER TABLE hookline_instances DROP COLUMN bounds;
