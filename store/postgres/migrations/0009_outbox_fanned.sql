-- Schema 9: no fan-out cursor. An outbox record says whether its
-- deliveries exist (fanned): the transaction that appends a record writes
-- its deliveries itself when the store knows the targets (DB.SetFanOut),
-- and ripple workers on any instance fan out the other records by
-- claiming them (FOR UPDATE SKIP LOCKED), not by moving one cursor row
-- under one lock. The records up to the old cursor were fanned out.
ALTER TABLE outbox ADD COLUMN fanned boolean NOT NULL DEFAULT true;
UPDATE outbox SET fanned = false WHERE seq > (SELECT value FROM meta WHERE key = 'ripple_cursor');
ALTER TABLE outbox ALTER COLUMN fanned SET DEFAULT false;
CREATE INDEX outbox_unfanned ON outbox (seq) WHERE NOT fanned;
