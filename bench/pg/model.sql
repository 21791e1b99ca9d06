-- One signed webhook that captures one payment, committed as ONE
-- transaction: the inbox record, the processed event id, the payment read
-- and its compare-and-set on version (created -> captured, version + 1),
-- a timeline step, an outbox record, a balanced pair of ledger entries and
-- the two balances. pgbench -n -M prepared -D n=0 -D stride=S -D shards=H.
--
-- Each client captures its own payments of load.sql, pay_10000000 up to
-- pay_(10000000 + N - 1): its n-th transaction takes
-- k = 10000000 + client_id * stride + n - 1 (pgbench keeps :n from one
-- transaction to the next), so every payment is captured once, and ids of
-- one width sort like numbers, as paystate's time-ordered ids do, so that
-- consecutive payments share index pages. A client that runs past its
-- stride collides with the next client's event ids and aborts (the
-- processed primary key), which run.sh reports. Every \gset expects one
-- row: a lost compare-and-set or a missing row aborts the client too.
--
-- No literal below holds a colon followed by a letter or digit: pgbench
-- would read it as a variable.
\set n :n + 1
\set k 10000000 + :client_id * :stride + :n - 1
\set amount 1000 + :k % 9000
\set shard :k % :shards
BEGIN;
INSERT INTO inbox (provider, event_id, type, payment_id, provider_ref, status, step_kind, amount, currency,
                   occurred_at, received_at, body, attempts, next_attempt_at, processed)
VALUES ('standard', 'evt_' || :k, 'payment.succeeded', 'pay_' || :k, 'ref_' || :k, 'captured', 'transition',
        :amount, 'EUR', now(), now(),
        convert_to('{"type": "payment.succeeded", "timestamp": 1764590400, "data": {"id": "evt_' || :k
          || '", "object": "payment_event", "payment_id": "pay_' || :k || '", "provider_ref": "ref_' || :k
          || '", "status": "succeeded", "amount": ' || :amount || ', "currency": "EUR", "metadata": {"order_id": "ord_'
          || :k || '", "paystate_payment_id": "pay_' || :k || '"}, "livemode": false}}', 'UTF8'),
        1, now(), true);
INSERT INTO processed (provider, event_id, processed_at) VALUES ('standard', 'evt_' || :k, now());
SELECT version AS v, amount AS amt, currency AS cur, order_id AS ord, customer_id AS cus,
       customer_email AS email, provider AS prov
FROM payments WHERE id = 'pay_' || :k
\gset
UPDATE payments SET status = 'captured', version = version + 1, client_secret = NULL, redirect_url = NULL,
                    updated_at = now()
WHERE id = 'pay_' || :k AND version = :v
RETURNING version AS nv
\gset
INSERT INTO timeline (payment_id, seq, at, source, kind, from_status, to_status, version, event_id)
SELECT 'pay_' || :k, coalesce(max(seq), 0) + 1, now(), 'webhook', 'transition', 'created', 'captured', :nv, 'evt_' || :k
FROM timeline WHERE payment_id = 'pay_' || :k;
INSERT INTO outbox (id, type, payment_id, status, from_status, version, order_id, amount, currency,
                    customer_id, customer_email, provider, created_at)
VALUES ('obx_' || :k, 'payment.captured', 'pay_' || :k, 'captured', 'created', :nv, :ord, :amt, :cur,
        :cus, :email, :prov, now());
INSERT INTO ledger (payment_id, event_id, account, currency, amount, at)
VALUES ('pay_' || :k, 'obx_' || :k, 'psp_receivable', :cur, :amt, now()),
       ('pay_' || :k, 'obx_' || :k, 'merchant_revenue', :cur, -(:amt::bigint), now());
UPDATE balances SET balance = balance + :amt
WHERE account = 'psp_receivable' AND currency = :cur AND shard = :shard
RETURNING balance AS b1
\gset
UPDATE balances SET balance = balance - :amt
WHERE account = 'merchant_revenue' AND currency = :cur AND shard = :shard
RETURNING balance AS b2
\gset
COMMIT;
