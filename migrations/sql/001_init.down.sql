DROP TABLE IF EXISTS hookline_claims;
DROP SEQUENCE IF EXISTS hookline_claims_token_seq;
DROP TABLE IF EXISTS hookline_dead;
DROP TABLE IF EXISTS hookline_events;
DROP TABLE IF EXISTS hookline_deliveries;
