DROP INDEX IF EXISTS hookline_event_destinations_dead;
DROP INDEX IF EXISTS hookline_events_id_prefix;
DROP INDEX IF EXISTS hookline_events_source_newest;
DROP INDEX IF EXISTS hookline_events_newest;
