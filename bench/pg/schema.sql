-- The tables of paystate's durable webhook path, one per bbolt record
-- family that the path writes (store/doc.go), with the indexes that stand
-- for bbolt's index buckets. Run by run.sh with psql; safe to re-run.

DROP TABLE IF EXISTS payments, timeline, inbox, processed, leases, outbox, ledger, balances;

-- payments, payments_by_status, payments_by_created, payments_by_order,
-- payments_by_ref.
CREATE TABLE payments (
    id             text PRIMARY KEY,
    order_id       text NOT NULL,
    amount         bigint NOT NULL,
    currency       text NOT NULL,
    customer_id    text,
    customer_email text,
    provider       text NOT NULL,
    provider_ref   text,
    status         text NOT NULL,
    version        bigint NOT NULL,
    client_secret  text,
    redirect_url   text,
    return_url     text,
    created_at     timestamptz NOT NULL,
    updated_at     timestamptz NOT NULL
);
CREATE INDEX payments_by_status ON payments (status, updated_at, id);
CREATE INDEX payments_by_created ON payments (created_at, id);
CREATE INDEX payments_by_order ON payments (order_id, created_at, id);
CREATE UNIQUE INDEX payments_by_ref ON payments (provider, provider_ref);

-- timeline: str(payment id) ‖ be64(seq).
CREATE TABLE timeline (
    payment_id  text NOT NULL,
    seq         bigint NOT NULL,
    at          timestamptz NOT NULL,
    source      text NOT NULL,
    kind        text NOT NULL,
    from_status text,
    to_status   text,
    version     bigint NOT NULL,
    event_id    text,
    note        text,
    PRIMARY KEY (payment_id, seq)
);

-- inbox (unique on provider and event id), inbox_by_payment, inbox_pending.
CREATE TABLE inbox (
    provider        text NOT NULL,
    event_id        text NOT NULL,
    type            text,
    payment_id      text,
    provider_ref    text,
    status          text,
    step_kind       text,
    amount          bigint,
    currency        text,
    occurred_at     timestamptz NOT NULL,
    received_at     timestamptz NOT NULL,
    body            bytea,
    attempts        int NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL,
    last_error      text,
    processed       boolean NOT NULL DEFAULT false,
    PRIMARY KEY (provider, event_id)
);
CREATE INDEX inbox_by_payment ON inbox (payment_id, received_at);
CREATE INDEX inbox_pending ON inbox (next_attempt_at) WHERE NOT processed;

-- processed, processed_by_time.
CREATE TABLE processed (
    provider     text NOT NULL,
    event_id     text NOT NULL,
    processed_at timestamptz NOT NULL,
    PRIMARY KEY (provider, event_id)
);
CREATE INDEX processed_by_time ON processed (processed_at);

-- leases (read by the two-commit script only; no payment holds one).
CREATE TABLE leases (
    payment_id text PRIMARY KEY,
    holder     text NOT NULL,
    token      bigint NOT NULL,
    expires_at timestamptz NOT NULL
);

-- outbox: be64(seq), outbox_by_payment.
CREATE TABLE outbox (
    seq            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id             text NOT NULL,
    type           text NOT NULL,
    payment_id     text NOT NULL,
    status         text NOT NULL,
    from_status    text,
    version        bigint NOT NULL,
    order_id       text,
    amount         bigint NOT NULL,
    currency       text,
    customer_id    text,
    customer_email text,
    provider       text,
    created_at     timestamptz NOT NULL
);
CREATE INDEX outbox_by_payment ON outbox (payment_id, seq);

-- ledger: be64(seq).
CREATE TABLE ledger (
    seq        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    payment_id text,
    event_id   text,
    account    text NOT NULL,
    currency   text NOT NULL,
    amount     bigint NOT NULL,
    at         timestamptz NOT NULL
);

-- balances: str(account) ‖ currency. paystate keeps one balance per
-- account and currency (shard 0 only, the default); with more shards a
-- posting updates the shard of its payment and a balance is the sum of its
-- shards, so concurrent postings do not all wait for the same two rows.
CREATE TABLE balances (
    account  text NOT NULL,
    currency text NOT NULL,
    shard    int NOT NULL,
    balance  bigint NOT NULL,
    PRIMARY KEY (account, currency, shard)
);

-- model.sql's transaction as one function, for webhook_fn.sql: the same
-- statements in the same order, run in the server, so a webhook costs one
-- round trip instead of eleven.
CREATE OR REPLACE FUNCTION webhook_capture(k bigint, amount bigint, shard int) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    pid text := 'pay_' || k;
    eid text := 'evt_' || k;
    obx text := 'obx_' || k;
    p   payments%ROWTYPE;
    nv  bigint;
BEGIN
    INSERT INTO inbox (provider, event_id, type, payment_id, provider_ref, status, step_kind, amount, currency,
                       occurred_at, received_at, body, attempts, next_attempt_at, processed)
    VALUES ('standard', eid, 'payment.succeeded', pid, 'ref_' || k, 'captured', 'transition',
            webhook_capture.amount, 'EUR', now(), now(),
            convert_to('{"type": "payment.succeeded", "timestamp": 1764590400, "data": {"id": "' || eid
              || '", "object": "payment_event", "payment_id": "' || pid || '", "provider_ref": "ref_' || k
              || '", "status": "succeeded", "amount": ' || webhook_capture.amount
              || ', "currency": "EUR", "metadata": {"order_id": "ord_' || k || '", "paystate_payment_id": "'
              || pid || '"}, "livemode": false}}', 'UTF8'),
            1, now(), true);
    INSERT INTO processed (provider, event_id, processed_at) VALUES ('standard', eid, now());
    SELECT * INTO STRICT p FROM payments WHERE id = pid;
    UPDATE payments SET status = 'captured', version = version + 1, client_secret = NULL, redirect_url = NULL,
                        updated_at = now()
    WHERE id = pid AND version = p.version
    RETURNING version INTO nv;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'compare-and-set lost on %', pid;
    END IF;
    INSERT INTO timeline (payment_id, seq, at, source, kind, from_status, to_status, version, event_id)
    SELECT pid, coalesce(max(seq), 0) + 1, now(), 'webhook', 'transition', 'created', 'captured', nv, eid
    FROM timeline WHERE payment_id = pid;
    INSERT INTO outbox (id, type, payment_id, status, from_status, version, order_id, amount, currency,
                        customer_id, customer_email, provider, created_at)
    VALUES (obx, 'payment.captured', pid, 'captured', 'created', nv, p.order_id, p.amount, p.currency,
            p.customer_id, p.customer_email, p.provider, now());
    INSERT INTO ledger (payment_id, event_id, account, currency, amount, at)
    VALUES (pid, obx, 'psp_receivable', p.currency, p.amount, now()),
           (pid, obx, 'merchant_revenue', p.currency, -p.amount, now());
    UPDATE balances b SET balance = b.balance + p.amount
    WHERE b.account = 'psp_receivable' AND b.currency = p.currency AND b.shard = webhook_capture.shard;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no balance psp_receivable %', p.currency;
    END IF;
    UPDATE balances b SET balance = b.balance - p.amount
    WHERE b.account = 'merchant_revenue' AND b.currency = p.currency AND b.shard = webhook_capture.shard;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no balance merchant_revenue %', p.currency;
    END IF;
    RETURN nv;
END
$$;
