package postgres

// Disputes (the disputes table) and their indexes: disputes_by_payment
// and disputes_by_due (the list by status, soonest evidence deadline
// first).

import (
	"github.com/jackc/pgx/v5"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// disputeCols are the columns scanDispute reads, in its order.
const disputeCols = `provider, id, payment_id, amount, currency, reason, status, evidence_due_by, created_at, updated_at`

// disputeOrder orders disputes of one deadline as the bbolt store's keys
// str(provider) ‖ dispute id do.
const disputeOrder = `octet_length(provider), provider, id`

// scanDispute reads the disputeCols of a row.
func scanDispute(r pgx.Row) (pay.Dispute, error) {
	var (
		d                     pay.Dispute
		due, created, updated int64
	)
	err := r.Scan(&d.Provider, &d.ID, &d.PaymentID, &d.Amount, &d.Currency, &d.Reason, &d.Status, &due, &created, &updated)
	d.EvidenceDueBy, d.CreatedAt, d.UpdatedAt = fromNS(due), fromNS(created), fromNS(updated)
	return d, err
}

// PutDispute stores d under (d.Provider, d.ID), replacing the one before.
// Its payment must be stored (ENOTFOUND) and, for a dispute stored
// before, be the same (ECONFLICT); an empty Currency is the payment's.
func (t *tx) PutDispute(d pay.Dispute) error {
	if err := store.CheckStoredKeys("provider", d.Provider, "dispute id", d.ID, "payment id", d.PaymentID); err != nil {
		return err
	}
	p, err := t.Payment(d.PaymentID)
	if pay.ErrorCode(err) == pay.ENOTFOUND {
		return pay.Errorf(pay.ENOTFOUND, "dispute %s: payment %s not found", d.ID, d.PaymentID)
	} else if err != nil {
		return err
	}
	if d.Currency == "" {
		d.Currency = p.Currency
	}
	if err := pay.ValidateDispute(d); err != nil {
		return err
	}
	e := enc{what: "dispute " + d.ID}
	args := []any{d.Provider, d.ID, d.PaymentID, d.Amount, d.Currency, d.Reason, string(d.Status),
		e.stamp(d.EvidenceDueBy), e.stamp(d.CreatedAt), e.stamp(d.UpdatedAt)}
	if e.err != nil {
		return e.err
	}
	n, err := t.exec("put dispute", `INSERT INTO disputes (`+disputeCols+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
		ON CONFLICT (provider, id) DO UPDATE SET amount = excluded.amount, currency = excluded.currency,
			reason = excluded.reason, status = excluded.status, evidence_due_by = excluded.evidence_due_by,
			created_at = excluded.created_at, updated_at = excluded.updated_at
		WHERE disputes.payment_id = excluded.payment_id`, args...)
	if err != nil || n == 1 {
		return err
	}
	old, _ := t.Dispute(d.Provider, d.ID)
	return pay.Errorf(pay.ECONFLICT, "dispute %s/%s belongs to payment %s, not %s", d.Provider, d.ID, old.PaymentID, d.PaymentID)
}

// Dispute returns one dispute, or ENOTFOUND.
func (t *tx) Dispute(provider, id string) (pay.Dispute, error) {
	d, found, err := queryOne(t, "read dispute", `SELECT `+disputeCols+` FROM disputes WHERE provider = $1 AND id = $2`, scanDispute, provider, id)
	return orNotFound(d, found, err, "dispute %s/%s not found", provider, id)
}

// DisputesForPayment returns a payment's disputes by provider and id.
func (t *tx) DisputesForPayment(paymentID string) ([]pay.Dispute, error) {
	if err := checkPart("payment id", paymentID, false); err != nil {
		return nil, err
	}
	return queryAll(t, "read disputes of payment", `SELECT `+disputeCols+` FROM disputes WHERE payment_id = $1
		ORDER BY `+disputeOrder, scanDispute, paymentID)
}

// ListDisputes returns up to f.Limit disputes in f.Status (every status
// when empty), soonest evidence deadline first, those without one last.
func (t *tx) ListDisputes(f pay.DisputeFilter) ([]pay.Dispute, error) {
	if f.Limit < 1 || f.Limit > pay.MaxListLimit {
		return nil, pay.Invalidf("limit", "limit must be from 1 to %d, got %d", pay.MaxListLimit, f.Limit)
	}
	if f.Status != "" {
		if !f.Status.Valid() {
			return nil, pay.Invalidf("status", "dispute status %q is not one of needs_response, under_review, won, lost", f.Status)
		}
		return queryAll(t, "list disputes", `SELECT `+disputeCols+` FROM disputes WHERE status = $1
			ORDER BY due_key, `+disputeOrder+` LIMIT $2`, scanDispute, string(f.Status), f.Limit)
	}
	return queryAll(t, "list disputes", `SELECT `+disputeCols+` FROM disputes
		ORDER BY due_key, `+disputeOrder+` LIMIT $1`, scanDispute, f.Limit)
}

// CountOpenDisputes returns how many disputes are needs_response or
// under_review.
func (t *tx) CountOpenDisputes() (int, error) {
	n, _, err := queryOne(t, "count open disputes", `SELECT count(*) FROM disputes WHERE status IN ('needs_response', 'under_review')`, scalar[int64])
	return int(n), err
}
