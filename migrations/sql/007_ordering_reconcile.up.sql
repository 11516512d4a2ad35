-- Ordering: per destination, the events of a source that share an ordering
-- key are forwarded one at a time, in acceptance order.
--
-- Each ordered (event, destination) takes the next place in its key's line
-- (order_seq) in the ingest transaction that stores it, under the key row's
-- lock, so places follow commit order. The line is a queue: only its head,
-- place done_seq + 1, has a runnable job; the others' jobs wait in River's
-- 'pending' state, which River never runs on its own. When the head ends
-- (completed or dead), the worker moves done_seq past every place that is
-- no longer queued and makes the next place's job available.
ALTER TABLE hookline_event_destinations
    ADD COLUMN order_key     text,    -- the resolved ordering key; NULL: unordered
    ADD COLUMN order_seq     bigint,  -- the place in the key's line; NULL: outside the line (unordered, or an operator's retry)
    ADD COLUMN order_by      numeric, -- ordering.by: a number, or an RFC 3339 time as epoch seconds
    ADD COLUMN order_by_kind text CHECK (order_by_kind IN ('number', 'time')),
    ADD COLUMN skipped       text;    -- 'stale': completed without being forwarded
CREATE INDEX hookline_event_destinations_line ON hookline_event_destinations (source, destination, order_key, order_seq)
    WHERE state = 'queued' AND order_seq IS NOT NULL;

-- One row per (source, destination, ordering key) that has had an event.
CREATE TABLE hookline_order_keys (
    source      text        NOT NULL,
    destination text        NOT NULL,
    key         text        NOT NULL,
    last_seq    bigint      NOT NULL DEFAULT 0, -- the last place given
    done_seq    bigint      NOT NULL DEFAULT 0, -- every place up to here has ended
    -- The greatest ordering.by among the key's events forwarded with a 2xx
    -- (compared within one kind: numbers as numbers, times as instants).
    max_by      numeric,
    max_by_kind text,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (source, destination, key)
);
-- The clean-up's sweep over lines that should have moved on.
CREATE INDEX hookline_order_keys_behind ON hookline_order_keys (updated_at) WHERE done_seq < last_seq;

-- Reconciliation: where a delivery came from (a provider's webhook, or a
-- reconciliation run that found the event in the provider's events API).
ALTER TABLE hookline_deliveries ADD COLUMN origin text NOT NULL DEFAULT 'webhook' CHECK (origin IN ('webhook', 'reconcile'));

-- The last reconciliation run of each source, shared by all instances: a
-- periodic run starts only when the last one started `every` ago.
CREATE TABLE hookline_reconcile_runs (
    source      text        PRIMARY KEY,
    started_at  timestamptz NOT NULL,
    finished_at timestamptz,
    checked     integer     NOT NULL DEFAULT 0,
    missing     integer     NOT NULL DEFAULT 0,
    error       text
);
