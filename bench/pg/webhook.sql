-- schema: paystate
-- One signed webhook that captures one payment, as paystate on PostgreSQL
-- sends it now: the statements of the daemon's statement log for one
-- `payment.captured` of the standard provider (loyalty on, so the outbox
-- record's loyalty and retention deliveries are written with it), with
-- the values of the load (load_paystate.sql) where paystate sends
-- parameters, in the round trips paystate uses (pgx.Batch, here pgbench
-- pipelines): four.
--   1. BEGIN and the payment, locked by its row, read with its lease;
--   2. the inbox entry, read with the processed id;
--   3. the compare-and-set, the timeline step, the outbox record with its
--      deliveries, the ledger posting with its balance shard;
--   4. the processed id (and the inbox entry marked), the inbox entry,
--      COMMIT.
-- The tables are paystate's own (store/postgres/migrations, applied by
-- run.sh). pgbench -n -M prepared -D n=0 -D stride=S -D ns=NOW.
--
-- Each client captures its own payments, pay_10000000 up to
-- pay_(10000000 + N - 1), as in model.sql: its n-th transaction takes
-- k = 10000000 + client_id * stride + n - 1. A client that runs past its
-- stride collides with another's event ids (the inbox's primary key) and
-- aborts, which run.sh reports. The balance shard is the backend's pid
-- modulo 64, as paystate's connection pid is.
--
-- No literal below holds a colon followed by a letter or digit: pgbench
-- would read it as a variable.
\set n :n + 1
\set k 10000000 + :client_id * :stride + :n - 1
\set amount 1000 + :k % 9000
\set cus :k % 100
\startpipeline
BEGIN ISOLATION LEVEL READ COMMITTED READ WRITE;
SELECT coalesce(l.holder, ''), coalesce(l.token, 0), coalesce(l.expires_at, 0),
			id, order_id, amount, currency, customer_id, customer_email, provider, provider_ref,
	status, version, client_secret, redirect_url, return_url, created_at, updated_at, amount_refunded, amount_refund_pending, dispute,
	flow, description, second_ref
		FROM payments LEFT JOIN leases l ON l.payment_id = payments.id WHERE payments.id = 'pay_' || :k
		FOR NO KEY UPDATE OF payments;
\endpipeline
WITH i AS (SELECT provider, event_id, type, payment_id, provider_ref, status, step_kind, amount, currency,
	occurred_at, received_at, body, attempts, next_attempt_at, last_error, processed, detail, second_ref FROM inbox WHERE provider = 'standard' AND event_id = 'evt_' || :k),
			d AS (SELECT EXISTS (SELECT 1 FROM processed WHERE provider = 'standard' AND event_id = 'evt_' || :k) AS done)
		SELECT true, d.done, i.* FROM i, d
		UNION ALL SELECT false, d.done, '', '', '', '', '', '', '', 0, '', 0, 0, ''::bytea, 0, 0, '', false, NULL::jsonb, '' FROM d WHERE NOT EXISTS (SELECT 1 FROM i);
\startpipeline
UPDATE payments SET order_id = 'ord_' || :k, amount = :amount, currency = 'EUR', customer_id = 'cus_' || :cus,
			customer_email = '', provider = 'standard', provider_ref = '', status = 'captured', version = 2, client_secret = '',
			redirect_url = '', return_url = '', created_at = :ns - 60000000000, updated_at = :ns,
			amount_refunded = 0, amount_refund_pending = 0, dispute = '', flow = '', description = '', second_ref = ''
			WHERE id = 'pay_' || :k AND version = 1 AND ('' = '' OR NOT EXISTS (
				SELECT 1 FROM payments o WHERE o.provider = 'standard' AND (o.provider_ref = '' OR o.second_ref = '') AND o.id <> 'pay_' || :k))
			AND ('' = '' OR NOT EXISTS (
				SELECT 1 FROM payments o WHERE o.provider = 'standard' AND (o.provider_ref = '' OR o.second_ref = '') AND o.id <> 'pay_' || :k));
INSERT INTO timeline (payment_id, seq, at, source, kind, from_status, to_status, version, event_id, note)
		VALUES ('pay_' || :k, (SELECT coalesce(max(seq), 0) + 1 FROM timeline WHERE payment_id = 'pay_' || :k), :ns, 'webhook', 'transition', 'created', 'captured', 1, 'evt_' || :k, '');
WITH o AS (INSERT INTO outbox (seq, id, type, payment_id, status, from_status, version, order_id, amount, currency,
	customer_id, customer_email, provider, created_at, refund_id, dispute_id, object_amount, object_status, amount_refunded, fanned)
		VALUES (140737488355328::bigint + (pg_current_xact_id()::text::bigint << 16), 'obx_' || :k, 'payment.captured', 'pay_' || :k, 'captured', 'created', 2::bigint, 'ord_' || :k, :amount::bigint, 'EUR', 'cus_' || :cus, '', 'standard',
			:ns::bigint, '', '', 0::bigint, '', 0::bigint, true) RETURNING seq)
			INSERT INTO deliveries (id, effect, endpoint, event_id, event_type, event_seq, event_at, payment_id, state,
	attempts, next_attempt_at, last_error, note, created_at, updated_at)
			SELECT d.id, d.effect, d.endpoint, 'obx_' || :k, 'payment.captured', o.seq, :ns::bigint, 'pay_' || :k, 'pending', 0, :ns::bigint, '', '', :ns::bigint, :ns::bigint
			FROM o, unnest(ARRAY['dlv_l' || :k, 'dlv_r' || :k]::text[], ARRAY['loyalty', 'retention']::text[], ARRAY['', '']::text[]) AS d(id, effect, endpoint);
WITH lines AS (
			SELECT * FROM unnest(ARRAY['pay_' || :k, 'pay_' || :k]::text[], ARRAY['obx_' || :k, 'obx_' || :k]::text[],
				ARRAY['psp_receivable', 'merchant_revenue']::text[], ARRAY['EUR', 'EUR']::text[], ARRAY[:amount::bigint, -(:amount::bigint)], ARRAY[:ns::bigint, :ns::bigint])
				WITH ORDINALITY AS l(payment_id, event_id, account, currency, amount, at, ord)),
		moves AS (
			SELECT account, currency, sum(amount) AS amount, min(ord) AS first FROM lines GROUP BY account, currency),
		over AS (
			SELECT m.account, m.currency FROM moves m
			WHERE m.amount + coalesce((SELECT sum(b.amount) FROM balances b WHERE b.account = m.account AND b.currency = m.currency), 0)
				NOT BETWEEN -9223372036854775808 AND 9223372036854775807
			ORDER BY m.first LIMIT 1),
		put AS (
			INSERT INTO ledger (payment_id, event_id, account, currency, amount, at)
			SELECT payment_id, event_id, account, currency, amount, at FROM lines
			WHERE NOT EXISTS (SELECT 1 FROM over) ORDER BY ord
			RETURNING seq),
		moved AS (
			INSERT INTO balances (account, currency, shard, amount)
			SELECT account, currency, pg_backend_pid() % 64, amount FROM moves
			WHERE NOT EXISTS (SELECT 1 FROM over) ORDER BY account, currency
			ON CONFLICT (account, currency, shard) DO UPDATE SET amount = balances.amount + excluded.amount)
		SELECT seq, '', '' FROM put UNION ALL SELECT 0, account, currency FROM over;
\endpipeline
\startpipeline
WITH p AS (
			INSERT INTO processed (provider, event_id, at) VALUES ('standard', 'evt_' || :k, :ns) ON CONFLICT DO NOTHING)
		UPDATE inbox SET processed = true WHERE provider = 'standard' AND event_id = 'evt_' || :k AND NOT processed;
INSERT INTO inbox (provider, event_id, type, payment_id, provider_ref, status, step_kind, amount, currency,
	occurred_at, received_at, body, attempts, next_attempt_at, last_error, processed, detail, second_ref)
		VALUES ('standard', 'evt_' || :k, 'payment.captured', 'pay_' || :k, '', 'captured', '', :amount, 'EUR', :ns, :ns,
			convert_to('{"id": "evt_' || :k || '", "type": "payment.captured", "created": 1764590400, "data": {"payment_id": "pay_'
			  || :k || '", "amount": ' || :amount || ', "currency": "EUR", "order_id": "ord_' || :k
			  || '", "metadata": {"source": "bench"}}}', 'UTF8'), 0, :ns, '',
			EXISTS (SELECT 1 FROM processed WHERE provider = 'standard' AND event_id = 'evt_' || :k), 'null'::jsonb, '');
COMMIT;
\endpipeline
