package postgres

// Refunds (the refunds table) and their indexes: refunds_by_payment,
// refunds_by_ref (unique per provider) and refunds_pending (the sweeper's
// candidates); and the detail of inbox events about a refund or dispute.

import (
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// refundCols are the columns scanRefund reads, in its order.
const refundCols = `id, payment_id, provider, amount, currency, reason, status, provider_ref, idem_key, event_id, created_at, updated_at`

// scanRefund reads the refundCols of a row.
func scanRefund(r pgx.Row) (pay.Refund, error) {
	var (
		f                pay.Refund
		created, updated int64
	)
	err := r.Scan(&f.ID, &f.PaymentID, &f.Provider, &f.Amount, &f.Currency, &f.Reason, &f.Status, &f.ProviderRef,
		&f.IdemKey, &f.EventID, &created, &updated)
	f.CreatedAt, f.UpdatedAt = fromNS(created), fromNS(updated)
	return f, err
}

// counts reports whether a refund in status s holds part of its
// payment's amount: pending and succeeded refunds do, failed ones not.

// InsertRefund stores a new refund (see store.Tx.InsertRefund). It takes
// the payment's lock first, so the sum of the payment's refunds it checks
// cannot change before the commit: concurrent refunds of one payment
// take turns, as under bbolt's single writer.
func (t *tx) InsertRefund(r pay.Refund) error {
	if err := store.CheckStoredRefund(r); err != nil {
		return err
	}
	r, err := t.refundOfPayment(r, true)
	if err != nil {
		return err
	}
	e := enc{what: "refund " + r.ID}
	args := []any{r.ID, r.PaymentID, r.Provider, r.Amount, r.Currency, r.Reason, string(r.Status), r.ProviderRef,
		r.IdemKey, r.EventID, e.stamp(r.CreatedAt), e.stamp(r.UpdatedAt)}
	if e.err != nil {
		return e.err
	}
	n, err := t.exec("insert refund", `INSERT INTO refunds (`+refundCols+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) ON CONFLICT DO NOTHING`, args...)
	if err != nil || n == 1 {
		return err
	}
	if _, found, err := queryOne(t, "read refund", `SELECT id FROM refunds WHERE id = $1`, scalar[string], r.ID); err != nil {
		return err
	} else if found {
		return pay.Errorf(pay.ECONFLICT, "refund %s already exists", r.ID)
	}
	return t.refundRefConflict(r)
}

// UpdateRefund writes the status, provider reference and event id of a
// stored refund, UpdatedAt becoming Tx.Now; its other fields stay as
// stored.
func (t *tx) UpdateRefund(r pay.Refund) error {
	_, nr, err := store.UpdatedRefund(r, t.now, t.Refund)
	if err != nil {
		return err
	}
	if nr, err = t.refundOfPayment(nr, false); err != nil {
		return err
	}
	e := enc{what: "refund " + r.ID}
	updated := e.stamp(nr.UpdatedAt)
	if e.err != nil {
		return e.err
	}
	n, err := t.exec("update refund", `UPDATE refunds SET status = $2, provider_ref = $3, event_id = $4, updated_at = $5
		WHERE id = $1 AND ($3 = '' OR NOT EXISTS (
			SELECT 1 FROM refunds o WHERE o.provider = $6 AND o.provider_ref = $3 AND o.id <> $1))`,
		nr.ID, string(nr.Status), nr.ProviderRef, nr.EventID, updated, nr.Provider)
	if err != nil || n == 1 {
		return err
	}
	return t.refundRefConflict(nr)
}

// refundOfPayment checks r against its payment, read under the
// payment's lock, and the payment's other refunds: the same currency and
// provider, and no more refunded and pending than the payment's amount.
// It returns r with the payment's currency and provider filled in.
func (t *tx) refundOfPayment(r pay.Refund, insert bool) (pay.Refund, error) {
	p, err := t.Payment(r.PaymentID)
	if pay.ErrorCode(err) == pay.ENOTFOUND {
		return r, pay.Errorf(pay.ENOTFOUND, "refund %s: payment %s not found", r.ID, r.PaymentID)
	} else if err != nil {
		return r, err
	}
	if r, err = store.RefundOfPayment(r, p, insert, t.DisputesForPayment); err != nil {
		return r, err
	}
	var othersHeld int64
	if pay.RefundHolds(r.Status) {
		othersHeld, _, err = queryOne(t, "sum refunds", `SELECT COALESCE(SUM(amount), 0)::bigint FROM refunds
			WHERE payment_id = $1 AND id <> $2 AND status IN ('pending', 'succeeded')`, scalar[int64], p.ID, r.ID)
		if err != nil {
			return r, err
		}
	}
	return r, pay.CheckRefundFits(r, p, othersHeld)
}

// refundRefConflict returns the ECONFLICT of r's provider reference, held
// by another refund.
func (t *tx) refundRefConflict(r pay.Refund) error {
	other, _, err := queryOne(t, "read refund by reference",
		`SELECT id FROM refunds WHERE provider = $1 AND provider_ref = $2 AND provider_ref <> ''`, scalar[string], r.Provider, r.ProviderRef)
	if err != nil {
		return err
	}
	return pay.Errorf(pay.ECONFLICT, "%s refund reference %s already belongs to refund %s", r.Provider, r.ProviderRef, other)
}

// Refund returns one refund, or ENOTFOUND.
func (t *tx) Refund(id string) (pay.Refund, error) {
	r, found, err := queryOne(t, "read refund", `SELECT `+refundCols+` FROM refunds WHERE id = $1`, scanRefund, id)
	return orNotFound(r, found, err, "refund %s not found", id)
}

// RefundByRef finds a refund by its provider and the PSP's reference, or
// ENOTFOUND.
func (t *tx) RefundByRef(provider, ref string) (pay.Refund, error) {
	var (
		r     pay.Refund
		found bool
		err   error
	)
	if ref != "" {
		r, found, err = queryOne(t, "read refund by reference",
			`SELECT `+refundCols+` FROM refunds WHERE provider = $1 AND provider_ref = $2 AND provider_ref <> ''`, scanRefund, provider, ref)
	}
	return orNotFound(r, found, err, "refund with %s reference %s not found", provider, ref)
}

// RefundsForPayment returns a payment's refunds, oldest first (refund ids
// are ULIDs).
func (t *tx) RefundsForPayment(paymentID string) ([]pay.Refund, error) {
	if err := checkPart("payment id", paymentID, false); err != nil {
		return nil, err
	}
	return queryAll(t, "read refunds of payment", `SELECT `+refundCols+` FROM refunds WHERE payment_id = $1 ORDER BY id`, scanRefund, paymentID)
}

// PendingRefunds returns pending refunds updated before f.UpdatedBefore,
// oldest first after (f.AfterUpdated, f.AfterID), through refunds_pending.
func (t *tx) PendingRefunds(f pay.RefundFilter) ([]pay.Refund, error) {
	if err := checkLimit(f.Limit); err != nil {
		return nil, err
	}
	if err := checkPart("refund id", f.AfterID, false); err != nil {
		return nil, err
	}
	return queryAll(t, "read pending refunds", `SELECT `+refundCols+` FROM refunds
		WHERE status = 'pending' AND updated_at < $1 AND (updated_at, id) > ($2, $3)
		ORDER BY updated_at, id LIMIT $4`, scanRefund, keyNS(f.UpdatedBefore), keyNS(f.AfterUpdated), f.AfterID, f.Limit)
}

// detail is the JSON of the inbox's detail column: what an event says of
// a refund or a dispute.
type detail struct {
	Refund  *refundDetail  `json:"refund,omitempty"`
	Dispute *disputeDetail `json:"dispute,omitempty"`
}

type refundDetail struct {
	ID          string `json:"id,omitempty"`
	ProviderRef string `json:"provider_ref,omitempty"`
	Amount      int64  `json:"amount,omitempty"`
	Reason      string `json:"reason,omitempty"`
	Status      string `json:"status,omitempty"`
}

type disputeDetail struct {
	ID            string `json:"id,omitempty"`
	Amount        int64  `json:"amount,omitempty"`
	Currency      string `json:"currency,omitempty"`
	Reason        string `json:"reason,omitempty"`
	Status        string `json:"status,omitempty"`
	EvidenceDueBy int64  `json:"evidence_due_by,omitempty"` // nanoseconds
}

// encodeDetail returns the detail column of an inbox event: "null" for an
// event about a payment's status.
func encodeDetail(r *pay.RefundChange, d *pay.DisputeChange) (string, error) {
	if r == nil && d == nil {
		return "null", nil
	}
	var v detail
	if r != nil {
		v.Refund = &refundDetail{ID: r.ID, ProviderRef: r.ProviderRef, Amount: r.Amount, Reason: r.Reason, Status: string(r.Status)}
	}
	if d != nil {
		e := enc{what: "dispute " + d.ID}
		v.Dispute = &disputeDetail{ID: d.ID, Amount: d.Amount, Currency: d.Currency, Reason: d.Reason, Status: string(d.Status),
			EvidenceDueBy: e.stamp(d.EvidenceDueBy)}
		if e.err != nil {
			return "", e.err
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("encode event detail: %w", err)
	}
	return string(b), nil
}

// detailOrNull is encodeDetail for the importer, keeping the first error
// in e.
func detailOrNull(r *pay.RefundChange, d *pay.DisputeChange, e *enc) string {
	s, err := encodeDetail(r, d)
	if err != nil && e.err == nil {
		e.err = err
	}
	if s == "" {
		return "null"
	}
	return s
}

// decodeDetail reads the detail column of an inbox event.
func decodeDetail(b []byte) (*pay.RefundChange, *pay.DisputeChange, error) {
	if len(b) == 0 || string(b) == "null" {
		return nil, nil, nil
	}
	var v detail
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, nil, fmt.Errorf("decode event detail: %w", err)
	}
	var (
		r *pay.RefundChange
		d *pay.DisputeChange
	)
	if v.Refund != nil {
		r = &pay.RefundChange{ID: v.Refund.ID, ProviderRef: v.Refund.ProviderRef, Amount: v.Refund.Amount, Reason: v.Refund.Reason, Status: pay.RefundStatus(v.Refund.Status)}
	}
	if v.Dispute != nil {
		d = &pay.DisputeChange{ID: v.Dispute.ID, Amount: v.Dispute.Amount, Currency: v.Dispute.Currency, Reason: v.Dispute.Reason,
			Status: pay.DisputeStatus(v.Dispute.Status), EvidenceDueBy: fromNS(v.Dispute.EvidenceDueBy)}
	}
	return r, d, nil
}
