DROP INDEX hookline_event_destinations_line;
CREATE INDEX hookline_event_destinations_line ON hookline_event_destinations (source, destination, order_key, order_seq)
    WHERE state = 'queued' AND order_seq IS NOT NULL;
