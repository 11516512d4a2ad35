-- The signed content of events whose ids are not signed (GitHub, Shopify,
-- Razorpay, Twilio): a delivery that replays the content of an event of the
-- same source under a fresh id, before expires_at (acceptance + the
-- source's dedup_window), is a duplicate of that event. Written by the
-- ingest statement; expired rows are taken over by the next event with the
-- same content and deleted by the clean-up.
CREATE TABLE hookline_content_keys (
    source      text        NOT NULL,
    content_key bytea       NOT NULL, -- sha256 of what the signature covers
    event_id    text        NOT NULL, -- the event that owns the content
    expires_at  timestamptz NOT NULL,
    PRIMARY KEY (source, content_key)
);
CREATE INDEX hookline_content_keys_expires_at ON hookline_content_keys (expires_at);

-- Credentials are never kept: rows stored before this release lose the
-- headers that carry them (hookline now drops them at ingest).
UPDATE hookline_deliveries SET headers = headers - 'Authorization' - 'Proxy-Authorization' - 'Cookie' - 'X-Callback-Token'
WHERE headers ?| array['Authorization', 'Proxy-Authorization', 'Cookie', 'X-Callback-Token'];
UPDATE hookline_dead SET headers = headers - 'Authorization' - 'Proxy-Authorization' - 'Cookie' - 'X-Callback-Token'
WHERE headers ?| array['Authorization', 'Proxy-Authorization', 'Cookie', 'X-Callback-Token'];
