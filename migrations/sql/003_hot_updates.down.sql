ALTER TABLE hookline_events RESET (fillfactor);
