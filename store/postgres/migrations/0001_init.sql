-- Schema 1: one table per record family of pay.Tx, in the order of the
-- table in doc.go, with the indexes that stand for the bbolt store's index
-- buckets. Times are bigint nanoseconds since 1970 in UTC (0 = the zero
-- time), as the bbolt store keeps them; strings that are keys or sort keys
-- are COLLATE "C", so that they order by bytes, as bbolt keys do, whatever
-- the database's locale. Migrate runs this file in one transaction.

-- Counters and single values: outbox_seq and ledger_seq (the last Seq
-- given out), ripple_cursor, outbox_horizon (nanoseconds).
CREATE TABLE meta (
    key   text COLLATE "C" PRIMARY KEY,
    value bigint NOT NULL
);
INSERT INTO meta (key, value) VALUES
    ('outbox_seq', 0), ('ledger_seq', 0), ('ripple_cursor', 0), ('outbox_horizon', 0);

-- Payments and their indexes.
CREATE TABLE payments (
    id             text COLLATE "C" PRIMARY KEY,
    order_id       text COLLATE "C" NOT NULL,
    amount         bigint NOT NULL,
    currency       text NOT NULL,
    customer_id    text NOT NULL,
    customer_email text NOT NULL,
    provider       text COLLATE "C" NOT NULL,
    provider_ref   text COLLATE "C" NOT NULL, -- '' while unknown
    status         text COLLATE "C" NOT NULL,
    version        bigint NOT NULL,
    client_secret  text NOT NULL,
    redirect_url   text NOT NULL,
    return_url     text NOT NULL,
    created_at     bigint NOT NULL,
    updated_at     bigint NOT NULL
);
CREATE INDEX payments_by_status ON payments (status, updated_at, id);
CREATE INDEX payments_by_created ON payments (created_at, id);
CREATE INDEX payments_by_order ON payments (order_id, created_at, id);
CREATE UNIQUE INDEX payments_by_ref ON payments (provider, provider_ref) WHERE provider_ref <> '';

-- The timeline.
CREATE TABLE timeline (
    payment_id  text COLLATE "C" NOT NULL,
    seq         bigint NOT NULL,
    at          bigint NOT NULL,
    source      text NOT NULL,
    kind        text NOT NULL,
    from_status text NOT NULL,
    to_status   text NOT NULL,
    version     bigint NOT NULL,
    event_id    text NOT NULL,
    note        text NOT NULL,
    PRIMARY KEY (payment_id, seq)
);

-- The inbox and processed event ids. Lists order events by time, then
-- (octet_length(provider), provider, event_id): the order of the bbolt
-- keys str(provider) ‖ event id.
CREATE TABLE inbox (
    provider        text COLLATE "C" NOT NULL,
    event_id        text COLLATE "C" NOT NULL,
    type            text NOT NULL,
    payment_id      text COLLATE "C" NOT NULL, -- '' while unknown
    provider_ref    text NOT NULL,
    status          text NOT NULL,
    step_kind       text NOT NULL,
    amount          bigint NOT NULL,
    currency        text NOT NULL,
    occurred_at     bigint NOT NULL,
    received_at     bigint NOT NULL,
    body            bytea NOT NULL,
    attempts        bigint NOT NULL,
    next_attempt_at bigint NOT NULL,
    last_error      text NOT NULL,
    processed       boolean NOT NULL,
    PRIMARY KEY (provider, event_id)
);
CREATE INDEX inbox_by_payment ON inbox (payment_id, received_at, octet_length(provider), provider, event_id)
    WHERE payment_id <> '';
CREATE INDEX inbox_pending ON inbox (next_attempt_at, octet_length(provider), provider, event_id)
    WHERE NOT processed;

CREATE TABLE processed (
    provider text COLLATE "C" NOT NULL,
    event_id text COLLATE "C" NOT NULL,
    at       bigint NOT NULL,
    PRIMARY KEY (provider, event_id)
);
CREATE INDEX processed_by_time ON processed (at, octet_length(provider), provider, event_id);

-- Leases: a row per payment ever leased; the token only grows.
CREATE TABLE leases (
    payment_id text COLLATE "C" PRIMARY KEY,
    holder     text NOT NULL,
    token      bigint NOT NULL,
    expires_at bigint NOT NULL
);

-- The outbox and its deliveries.
CREATE TABLE outbox (
    seq            bigint PRIMARY KEY,
    id             text COLLATE "C" NOT NULL,
    type           text NOT NULL,
    payment_id     text COLLATE "C" NOT NULL,
    status         text NOT NULL,
    from_status    text NOT NULL,
    version        bigint NOT NULL,
    order_id       text NOT NULL,
    amount         bigint NOT NULL,
    currency       text NOT NULL,
    customer_id    text NOT NULL,
    customer_email text NOT NULL,
    provider       text NOT NULL,
    created_at     bigint NOT NULL
);
CREATE INDEX outbox_by_payment ON outbox (payment_id, seq);

CREATE TABLE deliveries (
    id              text COLLATE "C" PRIMARY KEY,
    effect          text COLLATE "C" NOT NULL,
    endpoint        text COLLATE "C" NOT NULL,
    target          text COLLATE "C" NOT NULL
        GENERATED ALWAYS AS (CASE WHEN endpoint <> '' THEN effect || ':' || endpoint ELSE effect END) STORED,
    event_id        text COLLATE "C" NOT NULL,
    event_type      text NOT NULL,
    event_seq       bigint NOT NULL,
    event_at        bigint NOT NULL,
    payment_id      text COLLATE "C" NOT NULL,
    state           text COLLATE "C" NOT NULL,
    attempts        bigint NOT NULL,
    next_attempt_at bigint NOT NULL,
    last_error      text NOT NULL,
    note            text NOT NULL,
    created_at      bigint NOT NULL,
    updated_at      bigint NOT NULL,
    -- When the delivery entered its state: a pending one has waited since
    -- its event, a done or dead one since its last update.
    state_at        bigint NOT NULL
        GENERATED ALWAYS AS (CASE WHEN state = 'pending' THEN event_at ELSE updated_at END) STORED
);
CREATE INDEX deliveries_due ON deliveries (next_attempt_at, id) WHERE state = 'pending';
CREATE UNIQUE INDEX deliveries_open ON deliveries (target, payment_id, event_seq) WHERE state = 'pending';
CREATE INDEX deliveries_by_state ON deliveries (state, state_at, id);

-- The ledger.
CREATE TABLE ledger (
    seq        bigint PRIMARY KEY,
    payment_id text NOT NULL,
    event_id   text NOT NULL,
    account    text COLLATE "C" NOT NULL,
    currency   text COLLATE "C" NOT NULL,
    amount     bigint NOT NULL,
    at         bigint NOT NULL
);

CREATE TABLE balances (
    account  text COLLATE "C" NOT NULL,
    currency text COLLATE "C" NOT NULL,
    amount   bigint NOT NULL,
    PRIMARY KEY (account, currency)
);

-- The review queue.
CREATE TABLE review (
    id           text COLLATE "C" PRIMARY KEY,
    payment_id   text NOT NULL,
    reason       text NOT NULL,
    provider     text NOT NULL,
    provider_ref text NOT NULL,
    event_id     text NOT NULL,
    observed     text NOT NULL,
    note         text NOT NULL,
    last_psp     text NOT NULL,
    created_at   bigint NOT NULL
);
CREATE INDEX review_by_created ON review (created_at, id);

-- Idempotency keys.
CREATE TABLE idempotency_keys (
    key          text COLLATE "C" PRIMARY KEY,
    fingerprint  text NOT NULL,
    state        text NOT NULL,
    owner        text NOT NULL,
    locked_until bigint NOT NULL,
    payment_id   text NOT NULL,
    status_code  bigint NOT NULL,
    body         bytea NOT NULL,
    created_at   bigint NOT NULL,
    expires_at   bigint NOT NULL
);
CREATE INDEX idempotency_keys_by_expiry ON idempotency_keys (expires_at, key);

-- The state of the ripple effects.
CREATE TABLE customers (
    id            text COLLATE "C" PRIMARY KEY,
    points        bigint NOT NULL,
    last_visit_at bigint NOT NULL,
    updated_at    bigint NOT NULL
);

CREATE TABLE effects (
    key         text COLLATE "C" PRIMARY KEY,
    delivery_id text NOT NULL,
    points      bigint NOT NULL,
    at          bigint NOT NULL
);

CREATE TABLE webhook_endpoints (
    id              text COLLATE "C" PRIMARY KEY,
    url             text NOT NULL,
    disabled        boolean NOT NULL,
    disabled_at     bigint NOT NULL,
    disabled_reason text NOT NULL,
    failing_since   bigint NOT NULL,
    last_success_at bigint NOT NULL,
    updated_at      bigint NOT NULL
);

-- PSP answers.
CREATE TABLE psp_answers (
    payment_id text COLLATE "C" PRIMARY KEY,
    provider   text NOT NULL,
    status     text NOT NULL,
    found      boolean NOT NULL,
    raw        text NOT NULL,
    error      text NOT NULL,
    at         bigint NOT NULL
);
