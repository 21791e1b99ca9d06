-- schema: paystate
-- One signed webhook that captures one payment, as paystate on PostgreSQL
-- sent it before its writes were batched (main at 7548011): the same
-- tables and values as webhook.sql, the statements of that tree's
-- statement log, one round trip each: BEGIN; the payment locked by its
-- row; the inbox entry; the lease's advisory lock and the lease; the
-- payment again; the processed id; the compare-and-set; the timeline
-- step; the outbox record with its deliveries; the ledger posting; the
-- processed id and the inbox entry marked; the inbox entry; COMMIT.
-- pgbench -n -M prepared -D n=0 -D stride=S -D ns=NOW; see webhook.sql.
--
-- This file holds the reads; run.sh appends the writes, webhook.sql's
-- (the same statements), each sent alone, the inbox entry's insert with
-- the ON CONFLICT DO NOTHING of that tree, and COMMIT (before).
--
-- No literal below holds a colon followed by a letter or digit: pgbench
-- would read it as a variable.
\set n :n + 1
\set k 10000000 + :client_id * :stride + :n - 1
\set amount 1000 + :k % 9000
\set cus :k % 100
BEGIN ISOLATION LEVEL READ COMMITTED READ WRITE;
SELECT id, order_id, amount, currency, customer_id, customer_email, provider, provider_ref,
	status, version, client_secret, redirect_url, return_url, created_at, updated_at, amount_refunded, amount_refund_pending, dispute,
	flow, description, second_ref FROM payments WHERE id = 'pay_' || :k FOR NO KEY UPDATE;
SELECT provider, event_id, type, payment_id, provider_ref, status, step_kind, amount, currency,
	occurred_at, received_at, body, attempts, next_attempt_at, last_error, processed, detail, second_ref FROM inbox WHERE provider = 'standard' AND event_id = 'evt_' || :k;
SELECT pg_advisory_xact_lock(hashtextextended('lease:' || 'pay_' || :k, 0));
SELECT holder, token, expires_at FROM leases WHERE payment_id = 'pay_' || :k;
SELECT id, order_id, amount, currency, customer_id, customer_email, provider, provider_ref,
	status, version, client_secret, redirect_url, return_url, created_at, updated_at, amount_refunded, amount_refund_pending, dispute,
	flow, description, second_ref FROM payments WHERE id = 'pay_' || :k;
SELECT EXISTS (SELECT 1 FROM processed WHERE provider = 'standard' AND event_id = 'evt_' || :k);
