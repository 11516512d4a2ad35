-- Routing: an event goes to each destination it matched at ingest, and each
-- (event, destination) has its own state, attempts, budget and dead item.
-- A source with a single `destination:` has one destination, "default".

-- One row per (event, destination) the event was routed to (matching is
-- decided once, at ingest). The state machine of a delivery:
-- queued -> completed | dead; dead or completed-past-window -> queued again.
CREATE TABLE hookline_event_destinations (
    source       text        NOT NULL,
    event_id     text        NOT NULL,
    destination  text        NOT NULL,
    state        text        NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'completed', 'dead')),
    -- The delivery (and batch item) that queued it last: what is forwarded.
    delivery_id  bigint      NOT NULL,
    item_offset  integer,
    item_length  integer,
    -- attempts counts over the whole life; job_attempts within job_id's
    -- budget (a new job, a provider's re-delivery or an operator retry,
    -- starts a fresh budget).
    attempts     integer     NOT NULL DEFAULT 0,
    job_id       bigint,
    job_attempts integer     NOT NULL DEFAULT 0,
    queued_at    timestamptz NOT NULL DEFAULT now(),
    completed_at timestamptz,
    dedup_until  timestamptz, -- completed_at + the source's dedup_window
    last_error   text,
    PRIMARY KEY (source, event_id, destination)
) WITH (fillfactor = 80);
CREATE INDEX hookline_event_destinations_queued ON hookline_event_destinations (source, destination, queued_at) WHERE state = 'queued';
CREATE INDEX hookline_event_destinations_delivery ON hookline_event_destinations (delivery_id);

-- Every destination attempt's outcome, for the event lookup's attempts log.
CREATE TABLE hookline_attempts (
    id          bigserial   PRIMARY KEY,
    source      text        NOT NULL,
    event_id    text        NOT NULL,
    destination text        NOT NULL,
    n           integer     NOT NULL, -- the attempt's number over the (event, destination)'s life
    at          timestamptz NOT NULL DEFAULT now(),
    status      integer     NOT NULL DEFAULT 0, -- HTTP status; 0: no answer (timeout, connection error) or a Go handler
    duration_ms integer     NOT NULL DEFAULT 0,
    error       text        NOT NULL DEFAULT ''
);
CREATE INDEX hookline_attempts_event ON hookline_attempts (source, event_id, destination, n);
CREATE INDEX hookline_attempts_at ON hookline_attempts (at);

-- Per destination, what instances share: the operator's pause, the circuit
-- breaker, the rate limit's token bucket and the in-flight slots. A row is
-- created when a worker first starts with the destination configured.
CREATE TABLE hookline_destinations (
    source         text        NOT NULL,
    name           text        NOT NULL,
    paused_at      timestamptz,
    circuit        text        NOT NULL DEFAULT 'closed' CHECK (circuit IN ('closed', 'open', 'half_open')),
    failure_streak integer     NOT NULL DEFAULT 0,
    opened_at      timestamptz, -- the answer that opened the circuit
    probe_holder   text,        -- half_open: the attempt probing, until probe_until
    probe_until    timestamptz,
    last_error     text,
    tokens         double precision NOT NULL DEFAULT 0,
    refilled_at    timestamptz NOT NULL DEFAULT now(),
    slot_holders   text[]      NOT NULL DEFAULT '{}',
    slot_expiries  timestamptz[] NOT NULL DEFAULT '{}',
    PRIMARY KEY (source, name)
);

-- Alerts sent, so that every (kind, source, destination) alerts at most once
-- per min_interval across instances, and each run knows where the last one
-- stopped.
CREATE TABLE hookline_alerts (
    url         text        NOT NULL, -- "sha256:" + the hex SHA-256 of the alert URL (it holds a token)
    kind        text        NOT NULL,
    source      text        NOT NULL,
    destination text        NOT NULL,
    sent_at     timestamptz NOT NULL,
    PRIMARY KEY (url, kind, source, destination)
);

ALTER TABLE hookline_dead ADD COLUMN destination text NOT NULL DEFAULT 'default';
DROP INDEX hookline_dead_event;
CREATE INDEX hookline_dead_event ON hookline_dead (source, event_id, destination);

-- The events of the previous release, each with its one destination.
INSERT INTO hookline_event_destinations (source, event_id, destination, state, delivery_id, item_offset, item_length,
    attempts, job_id, job_attempts, queued_at, completed_at, dedup_until, last_error)
SELECT source, event_id, 'default', state, delivery_id, item_offset, item_length,
    attempts, job_id, job_attempts, queued_at, completed_at, dedup_until, last_error
FROM hookline_events;

-- Claims name their destination: hookline:{source}:{destination}:{event_id}.
UPDATE hookline_claims SET key = regexp_replace(key, '^hookline:([^:]*):', 'hookline:\1:default:')
WHERE key LIKE 'hookline:%';

-- The event row keeps what is the event's own: its identity, type, first
-- delivery and counts. Its state is its destinations' (hookline_event_states).
DROP INDEX hookline_events_unfinished;
DROP INDEX hookline_events_completed;
ALTER TABLE hookline_events
    DROP COLUMN state, DROP COLUMN attempts, DROP COLUMN queued_at, DROP COLUMN completed_at,
    DROP COLUMN dedup_until, DROP COLUMN last_error, DROP COLUMN job_id, DROP COLUMN job_attempts;

-- An event's state from its destinations': dead if any is dead, queued if
-- any is waiting, else completed (also when it matched no destination).
-- attempts sums theirs; completed_at is the last completion.
CREATE VIEW hookline_event_states AS
SELECT e.source, e.event_id, e.event_type,
    CASE WHEN bool_or(d.state = 'dead') THEN 'dead'
         WHEN bool_or(d.state = 'queued') THEN 'queued'
         ELSE 'completed' END AS state,
    COALESCE(sum(d.attempts), 0)::integer AS attempts,
    CASE WHEN bool_and(d.state = 'completed') THEN max(d.completed_at)
         WHEN count(d.*) = 0 THEN e.first_received_at END AS completed_at,
    e.deliveries, e.first_received_at, e.received_at, e.delivery_id,
    count(d.*)::integer AS destinations
FROM hookline_events e LEFT JOIN hookline_event_destinations d ON d.source = e.source AND d.event_id = e.event_id
GROUP BY e.source, e.event_id;

-- The gate's arithmetic (jobs/gate.go), as plain SQL the gate statement
-- inlines. Tokens of a bucket refilled at rate per second up to burst:
CREATE FUNCTION hookline_tokens(tokens double precision, refilled_at timestamptz, rate double precision, burst double precision)
RETURNS double precision LANGUAGE sql STABLE PARALLEL SAFE
AS $$ SELECT least(burst, tokens + greatest(extract(epoch FROM now() - refilled_at), 0) * rate) $$;
-- The first of n in-flight slots whose lease is free (NULL when none is).
CREATE FUNCTION hookline_free_slot(expiries timestamptz[], n integer) RETURNS integer
LANGUAGE sql STABLE PARALLEL SAFE
AS $$ SELECT min(i) FROM generate_series(1, n) AS i WHERE expiries[i] IS NULL OR expiries[i] < now() $$;
-- arr with element i set to v (arr unchanged when i is NULL).
CREATE FUNCTION hookline_set_at(arr anyarray, i integer, v anyelement) RETURNS anyarray
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT CASE WHEN i IS NULL THEN arr ELSE arr[1:i-1] || v || arr[i+1:] END $$;
