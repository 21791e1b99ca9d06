-- Puts paystate's own tables (store/postgres/migrations) back to the start
-- of a run of webhook.sql or webhook_before.sql: empty, but for :payments
-- payments pay_k, k = 10000000 ... 10000000 + :payments - 1, of the
-- standard provider, in status created (version 1, amount 1000 + k % 9000
-- EUR, customer cus_(k % 100): the values the scripts send). Run by run.sh
-- with psql -v payments=N -v ns=NOW.

TRUNCATE payments, timeline, inbox, processed, leases, outbox, deliveries, ledger, balances RESTART IDENTITY;

INSERT INTO payments (id, order_id, amount, currency, customer_id, customer_email, provider, provider_ref,
                      status, version, client_secret, redirect_url, return_url, created_at, updated_at)
SELECT 'pay_' || k, 'ord_' || k, 1000 + k % 9000, 'EUR', 'cus_' || k % 100, '', 'standard', '',
       'created', 1, '', '', '', :ns - 60000000000, :ns - 60000000000
FROM generate_series(10000000, 10000000 + :payments - 1) AS k;

VACUUM ANALYZE;
CHECKPOINT;
