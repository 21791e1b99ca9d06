-- Schema 7: no outbox counter. A new record's Seq is 2^47 + its
-- transaction's id (xid8) · 2^16 + its number within the transaction:
-- no row is shared by the appends of different transactions, and
-- OutboxAfter reads only the records of transactions that had ended
-- before its snapshot (pg_snapshot_xmin), so a record can never appear
-- behind a reader's cursor. Records stored before keep their Seq, all
-- below 2^47.
DELETE FROM meta WHERE key = 'outbox_seq';
