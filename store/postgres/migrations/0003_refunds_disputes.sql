-- Schema 3: partial refunds and disputes. Payments carry what their
-- refunds hold; outbox records of a refund or dispute name it; inbox
-- events keep what they say of one (detail: JSON, 'null' for an event
-- about a payment's status); the mock PSP's charges know what they
-- refunded. Existing rows read as before: nothing refunded, no detail.
ALTER TABLE payments
    ADD COLUMN amount_refunded       bigint NOT NULL DEFAULT 0,
    ADD COLUMN amount_refund_pending bigint NOT NULL DEFAULT 0;

ALTER TABLE outbox
    ADD COLUMN refund_id       text NOT NULL DEFAULT '',
    ADD COLUMN dispute_id      text NOT NULL DEFAULT '',
    ADD COLUMN object_amount   bigint NOT NULL DEFAULT 0,
    ADD COLUMN object_status   text NOT NULL DEFAULT '',
    ADD COLUMN amount_refunded bigint NOT NULL DEFAULT 0;

ALTER TABLE inbox
    ADD COLUMN detail jsonb NOT NULL DEFAULT 'null';

ALTER TABLE psp_charges
    ADD COLUMN amount_refunded bigint NOT NULL DEFAULT 0;

-- Refunds and their indexes.
CREATE TABLE refunds (
    id           text COLLATE "C" PRIMARY KEY,
    payment_id   text COLLATE "C" NOT NULL,
    provider     text COLLATE "C" NOT NULL,
    amount       bigint NOT NULL,
    currency     text NOT NULL,
    reason       text NOT NULL,
    status       text COLLATE "C" NOT NULL,
    provider_ref text COLLATE "C" NOT NULL, -- '' while unknown
    idem_key     text NOT NULL,
    event_id     text NOT NULL,
    created_at   bigint NOT NULL,
    updated_at   bigint NOT NULL
);
CREATE INDEX refunds_by_payment ON refunds (payment_id, id);
CREATE UNIQUE INDEX refunds_by_ref ON refunds (provider, provider_ref) WHERE provider_ref <> '';
CREATE INDEX refunds_pending ON refunds (updated_at, id) WHERE status = 'pending';

-- Disputes and their indexes. due_key is the evidence deadline, or the
-- largest bigint when there is none, so that those sort last.
CREATE TABLE disputes (
    provider        text COLLATE "C" NOT NULL,
    id              text COLLATE "C" NOT NULL,
    payment_id      text COLLATE "C" NOT NULL,
    amount          bigint NOT NULL,
    currency        text NOT NULL,
    reason          text NOT NULL,
    status          text COLLATE "C" NOT NULL,
    evidence_due_by bigint NOT NULL,
    due_key         bigint NOT NULL
        GENERATED ALWAYS AS (CASE WHEN evidence_due_by = 0 THEN 9223372036854775807 ELSE evidence_due_by END) STORED,
    created_at      bigint NOT NULL,
    updated_at      bigint NOT NULL,
    PRIMARY KEY (provider, id)
);
CREATE INDEX disputes_by_payment ON disputes (payment_id, octet_length(provider), provider, id);
CREATE INDEX disputes_by_due ON disputes (status, due_key, octet_length(provider), provider, id);
