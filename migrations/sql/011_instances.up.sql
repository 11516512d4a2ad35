-- Every running hookline instance, renewed every few seconds: the event
-- queues (one per source and destination) it configures, and those its
-- workers run; stopped_at once it stopped cleanly. An event waiting in a
-- queue that no instance configures any more belongs to a source or
-- destination removed from the configuration, and goes to the dead set
-- instead of waiting for ever.
CREATE TABLE hookline_instances (
    id         text PRIMARY KEY,
    configures text[] NOT NULL,
    runs       text[] NOT NULL,
    seen_at    timestamptz NOT NULL DEFAULT now(),
    stopped_at timestamptz
);
