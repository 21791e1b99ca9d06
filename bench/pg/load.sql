-- Puts the tables back to the start of a run: empty, but for :payments
-- payments pay_k, k = 10000000 ... 10000000 + :payments - 1, in status
-- created (version 1, one created step each, amount 1000 + k % 9000 EUR,
-- the formula webhook.sql uses too) and :shards zero balances per account. Run by run.sh with psql -v payments=N -v shards=S.

TRUNCATE payments, timeline, inbox, processed, leases, outbox, ledger, balances RESTART IDENTITY;

INSERT INTO payments (id, order_id, amount, currency, customer_id, customer_email, provider, provider_ref,
                      status, version, client_secret, return_url, created_at, updated_at)
SELECT 'pay_' || k, 'ord_' || k, 1000 + k % 9000, 'EUR', 'cus_' || k % 50000, 'c' || k % 50000 || '@example.com',
       'standard', 'ref_' || k, 'created', 1, 'pay_' || k || '_secret_' || md5(k::text),
       'https://shop.example.com/return', now() - interval '1 minute', now() - interval '1 minute'
FROM generate_series(10000000, 10000000 + :payments - 1) AS k;

INSERT INTO timeline (payment_id, seq, at, source, kind, to_status, version)
SELECT 'pay_' || k, 1, now() - interval '1 minute', 'api', 'created', 'created', 1
FROM generate_series(10000000, 10000000 + :payments - 1) AS k;

INSERT INTO balances (account, currency, shard, balance)
SELECT a, 'EUR', s, 0
FROM unnest(ARRAY['psp_receivable', 'merchant_revenue']) AS a, generate_series(0, :shards - 1) AS s;

VACUUM ANALYZE;
CHECKPOINT;
