-- The mock PSP's charges, by charge key.
CREATE TABLE psp_charges (
    key           text COLLATE "C" PRIMARY KEY,
    payment_id    text NOT NULL,
    provider_ref  text NOT NULL,
    amount        bigint NOT NULL,
    currency      text NOT NULL,
    status        text NOT NULL,
    client_secret text NOT NULL,
    redirect_url  text NOT NULL,
    refund_key    text NOT NULL,
    calls         integer NOT NULL,
    refunds       integer NOT NULL,
    created_at    bigint NOT NULL
);
