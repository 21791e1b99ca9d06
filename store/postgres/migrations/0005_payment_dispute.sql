-- Schema 5: a payment carries the status of its dispute (pay.Payment.Dispute:
-- an open one if any is open, else lost, else won; '' for none), which the
-- refund decision reads in the transaction of a refund. Existing payments
-- take it from their disputes.
ALTER TABLE payments
    ADD COLUMN dispute text COLLATE "C" NOT NULL DEFAULT '';

UPDATE payments p SET dispute = d.status
FROM (
    SELECT DISTINCT ON (payment_id) payment_id, status
    FROM disputes
    ORDER BY payment_id, CASE status
        WHEN 'needs_response' THEN 4 WHEN 'under_review' THEN 3 WHEN 'lost' THEN 2 WHEN 'won' THEN 1 ELSE 0 END DESC
) d
WHERE d.payment_id = p.id;
