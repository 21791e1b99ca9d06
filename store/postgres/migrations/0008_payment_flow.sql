-- Schema 8, Stripe Checkout: how the provider takes a payment when it offers more than one
-- way (pay.Payment.Flow: Stripe's 'payment_intent' or 'checkout'; '' for a
-- provider with one) and the merchant's description of what is paid for.
-- Existing payments have neither.
ALTER TABLE payments
    ADD COLUMN flow text COLLATE "C" NOT NULL DEFAULT '',
    ADD COLUMN description text NOT NULL DEFAULT '';

-- A payment on a page the PSP hosts (a Stripe Checkout Session, its
-- provider_ref) has a second reference that also finds it: the PSP's
-- object holding the money (the session's PaymentIntent). payments_by_ref
-- holds each column unique; a reference in one column of a payment and
-- the other of another is refused by the store's own check.
ALTER TABLE payments
    ADD COLUMN second_ref text COLLATE "C" NOT NULL DEFAULT '';
CREATE UNIQUE INDEX payments_by_second_ref ON payments (provider, second_ref) WHERE second_ref <> '';

-- And the inbox keeps it with each event (pay.InboxEvent.SecondRef).
ALTER TABLE inbox
    ADD COLUMN second_ref text COLLATE "C" NOT NULL DEFAULT '';
