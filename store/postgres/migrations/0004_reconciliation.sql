-- Schema 4: settlement reconciliation. settlements are the matched and
-- posted lines of the PSP's settlement reports, keyed by the PSP's
-- balance-transaction id (a line seen again posts nothing); recon_runs
-- the runs, with their unmatched items (items: a JSON array).
CREATE TABLE settlements (
    provider     text COLLATE "C" NOT NULL,
    id           text COLLATE "C" NOT NULL,
    kind         text COLLATE "C" NOT NULL,
    payment_id   text COLLATE "C" NOT NULL, -- '' for a fee line
    provider_ref text COLLATE "C" NOT NULL,
    amount       bigint NOT NULL,
    fee          bigint NOT NULL,
    currency     text NOT NULL,
    payout_id    text COLLATE "C" NOT NULL,
    run_id       text COLLATE "C" NOT NULL,
    created_at   bigint NOT NULL,
    updated_at   bigint NOT NULL,
    PRIMARY KEY (provider, id)
);
CREATE INDEX settlements_by_payment ON settlements (payment_id, octet_length(provider), provider, id) WHERE payment_id <> '';
CREATE INDEX settlements_by_key ON settlements (octet_length(provider), provider, id);

CREATE TABLE recon_runs (
    id              text COLLATE "C" PRIMARY KEY,
    provider        text COLLATE "C" NOT NULL,
    source          text NOT NULL,
    lines           bigint NOT NULL,
    matched         bigint NOT NULL,
    mismatched      bigint NOT NULL,
    missing_locally bigint NOT NULL,
    missing_at_psp  bigint NOT NULL,
    posted          bigint NOT NULL,
    items           jsonb NOT NULL,
    created_at      bigint NOT NULL
);
