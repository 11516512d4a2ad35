-- The ordering line's index, with a predicate that does not mention
-- state = 'queued': the statement that hands a line on (its places still
-- waiting, in order) then matches this index and not the index of every
-- waiting row of the destination (hookline_event_destinations_queued),
-- which a plan cached while the table was small would otherwise pick,
-- reading every waiting row of the destination per hand-over. A place
-- that is neither completed nor dead is queued (the state's CHECK).
DROP INDEX hookline_event_destinations_line;
CREATE INDEX hookline_event_destinations_line ON hookline_event_destinations (source, destination, order_key, order_seq)
    WHERE order_seq IS NOT NULL AND state <> 'completed' AND state <> 'dead';
