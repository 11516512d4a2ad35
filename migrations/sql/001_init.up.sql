-- hookline's own tables. River's tables come from rivermigrate.

-- One row per HTTP delivery that created or re-queued work: the exact raw
-- body and the headers a replay needs. Batch deliveries (Adyen, GoCardless)
-- are stored once; their events point into the body by offset and length.
CREATE TABLE hookline_deliveries (
    id           bigserial   PRIMARY KEY,
    source       text        NOT NULL,
    received_at  timestamptz NOT NULL DEFAULT now(),
    content_type text        NOT NULL DEFAULT '',
    headers      jsonb       NOT NULL DEFAULT '{}',
    body         bytea       NOT NULL
);
CREATE INDEX hookline_deliveries_received_at ON hookline_deliveries (received_at);

-- One row per (source, event_id): the event's life, for dedupe at ingest and
-- the admin event lookup. state: queued | processing | completed | dead.
CREATE TABLE hookline_events (
    source            text        NOT NULL,
    event_id          text        NOT NULL,
    event_type        text        NOT NULL DEFAULT '',
    state             text        NOT NULL DEFAULT 'queued'
                      CHECK (state IN ('queued', 'processing', 'completed', 'dead')),
    delivery_id       bigint      NOT NULL,
    item_offset       integer,    -- batch item: position of its bytes in the delivery body
    item_length       integer,
    deliveries        integer     NOT NULL DEFAULT 1,
    attempts          integer     NOT NULL DEFAULT 0,
    first_received_at timestamptz NOT NULL DEFAULT now(),
    received_at       timestamptz NOT NULL DEFAULT now(),
    queued_at         timestamptz NOT NULL DEFAULT now(),
    completed_at      timestamptz,
    dedup_until       timestamptz, -- completed_at + the source's dedup_window
    last_error        text,
    PRIMARY KEY (source, event_id)
);
CREATE INDEX hookline_events_completed ON hookline_events (completed_at) WHERE state = 'completed';
CREATE INDEX hookline_events_delivery ON hookline_events (delivery_id);

-- The dead set: deliveries rejected as duplicates (reason duplicate) and
-- events whose attempts ran out (reason failed). Kept until deleted.
CREATE TABLE hookline_dead (
    id           bigserial   PRIMARY KEY,
    source       text        NOT NULL,
    event_id     text        NOT NULL,
    event_type   text        NOT NULL DEFAULT '',
    reason       text        NOT NULL CHECK (reason IN ('duplicate', 'failed')),
    attempts     integer     NOT NULL DEFAULT 0,
    last_error   text        NOT NULL DEFAULT '',
    dead_at      timestamptz NOT NULL DEFAULT now(),
    delivery_id  bigint,
    content_type text        NOT NULL DEFAULT '',
    headers      jsonb       NOT NULL DEFAULT '{}',
    payload      bytea       NOT NULL
);
CREATE INDEX hookline_dead_newest ON hookline_dead (dead_at DESC, id DESC);
CREATE INDEX hookline_dead_event ON hookline_dead (source, event_id);

-- Idempotency claims (package idem; the same DDL as idem.TableDDL("hookline_claims")):
-- processing -> completed, fenced by a token from a sequence that never repeats.
CREATE SEQUENCE hookline_claims_token_seq AS bigint;
CREATE TABLE hookline_claims (
    key          text        PRIMARY KEY,
    state        text        NOT NULL CHECK (state IN ('processing', 'completed')),
    token        bigint      NOT NULL DEFAULT nextval('hookline_claims_token_seq'::regclass),
    holder       text        NOT NULL DEFAULT '',
    expires_at   timestamptz NOT NULL,
    claimed_at   timestamptz NOT NULL DEFAULT now(),
    completed_at timestamptz,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX hookline_claims_expires_at_idx ON hookline_claims (expires_at);
