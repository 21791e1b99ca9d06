-- Schema 6: how the provider takes a payment when it offers more than one
-- way (pay.Payment.Flow: Stripe's 'payment_intent' or 'checkout'; '' for a
-- provider with one) and the merchant's description of what is paid for.
-- Existing payments have neither.
ALTER TABLE payments
    ADD COLUMN flow text COLLATE "C" NOT NULL DEFAULT '',
    ADD COLUMN description text NOT NULL DEFAULT '';
