-- The reference run beside each webhook run: one commit that inserts one
-- payment (its row and four indexes), like BenchmarkLone/RawUpdate's one
-- store Update. The rows are gone at the next reload.
\set n :n + 1
INSERT INTO payments (id, order_id, amount, currency, provider, provider_ref, status, version, created_at, updated_at)
VALUES ('raw_' || :client_id || '_' || :n, 'raw_' || :client_id || '_' || :n, 1000, 'EUR', 'mock',
        'raw_' || :client_id || '_' || :n, 'created', 1, now(), now());
