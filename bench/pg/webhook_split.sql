-- The model's webhook in two commits, as paystate committed it once: two write
-- transactions. Inbox.Accept reads (is the payment ours, is the event new?)
-- and inserts the inbox record, pending; Inbox.RunOnce reads the due event
-- and applies it in a second transaction that checks the lease, marks the
-- event processed and does model.sql's payment, timeline, outbox, ledger
-- and balance writes. One pgbench "transaction" here is one webhook, two
-- commits. Variables as in model.sql.
\set n :n + 1
\set k 10000000 + :client_id * :stride + :n - 1
\set amount 1000 + :k % 9000
\set shard :k % :shards
-- Accept: the read transaction, then the insert.
SELECT provider AS prov FROM payments WHERE id = 'pay_' || :k
\gset
SELECT count(*) AS seen FROM inbox WHERE provider = 'standard' AND event_id = 'evt_' || :k
\gset
BEGIN;
SELECT provider AS prov FROM payments WHERE id = 'pay_' || :k
\gset
INSERT INTO inbox (provider, event_id, type, payment_id, provider_ref, status, step_kind, amount, currency,
                   occurred_at, received_at, body, attempts, next_attempt_at, processed)
VALUES ('standard', 'evt_' || :k, 'payment.succeeded', 'pay_' || :k, 'ref_' || :k, 'captured', 'transition',
        :amount, 'EUR', now(), now(),
        convert_to('{"type": "payment.succeeded", "timestamp": 1764590400, "data": {"id": "evt_' || :k
          || '", "object": "payment_event", "payment_id": "pay_' || :k || '", "provider_ref": "ref_' || :k
          || '", "status": "succeeded", "amount": ' || :amount || ', "currency": "EUR", "metadata": {"order_id": "ord_'
          || :k || '", "paystate_payment_id": "pay_' || :k || '"}, "livemode": false}}', 'UTF8'),
        0, now(), false);
COMMIT;
-- RunOnce: the due event (read), then Apply in one transaction.
SELECT payment_id AS pid, attempts AS att FROM inbox WHERE provider = 'standard' AND event_id = 'evt_' || :k
\gset
BEGIN;
SELECT count(*) AS leased FROM leases WHERE payment_id = 'pay_' || :k AND expires_at > now()
\gset
SELECT count(*) AS done FROM processed WHERE provider = 'standard' AND event_id = 'evt_' || :k
\gset
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
INSERT INTO processed (provider, event_id, processed_at) VALUES ('standard', 'evt_' || :k, now());
UPDATE inbox SET processed = true, attempts = attempts + 1
WHERE provider = 'standard' AND event_id = 'evt_' || :k AND NOT processed
RETURNING attempts AS att2
\gset
UPDATE balances SET balance = balance + :amt
WHERE account = 'psp_receivable' AND currency = :cur AND shard = :shard
RETURNING balance AS b1
\gset
UPDATE balances SET balance = balance - :amt
WHERE account = 'merchant_revenue' AND currency = :cur AND shard = :shard
RETURNING balance AS b2
\gset
COMMIT;
