package postgres

// The review queue (review), in order of creation (review_by_created).

import (
	"github.com/jackc/pgx/v5"

	"github.com/paystate/paystate/pay"
)

// reviewCols are the columns scanReview reads, in its order.
const reviewCols = `id, payment_id, reason, provider, provider_ref, event_id, observed, note, last_psp, created_at`

// scanReview reads the reviewCols of a row.
func scanReview(r pgx.Row) (pay.ReviewItem, error) {
	var (
		i       pay.ReviewItem
		created int64
	)
	err := r.Scan(&i.ID, &i.PaymentID, &i.Reason, &i.Provider, &i.ProviderRef, &i.EventID, &i.Observed, &i.Note, &i.LastPSP, &created)
	i.CreatedAt = fromNS(created)
	return i, err
}

// PutReview adds or replaces a review item. A zero CreatedAt keeps the
// stored item's time, or becomes Tx.Now for a new item. One upsert and no
// other lock: the callers that read an item to write it hold its
// payment's row lock (finalize.QueueReview, under Apply's).
func (t *tx) PutReview(item pay.ReviewItem) error {
	if err := checkPart("review id", item.ID, true); err != nil {
		return err
	}
	keep := item.CreatedAt.IsZero()
	if keep {
		item.CreatedAt = t.now
	}
	e := enc{what: "review item " + item.ID}
	created := e.stamp(item.CreatedAt)
	if e.err != nil {
		return e.err
	}
	_, err := t.exec("put review", `INSERT INTO review (`+reviewCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
		ON CONFLICT (id) DO UPDATE SET payment_id = excluded.payment_id, reason = excluded.reason, provider = excluded.provider,
			provider_ref = excluded.provider_ref, event_id = excluded.event_id, observed = excluded.observed, note = excluded.note,
			last_psp = excluded.last_psp, created_at = CASE WHEN $11 THEN review.created_at ELSE excluded.created_at END`,
		item.ID, item.PaymentID, item.Reason, item.Provider, item.ProviderRef, item.EventID, string(item.Observed), item.Note, item.LastPSP,
		created, keep)
	return err
}

// Review returns one review item, or ENOTFOUND. In a write transaction
// the item is locked by its row (lockedRow).
func (t *tx) Review(id string) (pay.ReviewItem, error) {
	i, found, err := lockedRow(t, "review", id, "read review", `SELECT `+reviewCols+` FROM review WHERE id = $1`, scanReview, id)
	return orNotFound(i, found, err, "review item %s not found", id)
}

// ListReview returns every review item, oldest CreatedAt first (ties by
// id).
func (t *tx) ListReview() ([]pay.ReviewItem, error) {
	return queryAll(t, "list review", `SELECT `+reviewCols+` FROM review ORDER BY created_at, id`, scanReview)
}

// DeleteReview removes a review item; ENOTFOUND if there is none.
func (t *tx) DeleteReview(id string) error {
	n, err := t.exec("delete review", `DELETE FROM review WHERE id = $1`, id)
	if err != nil {
		return err
	} else if n == 0 {
		return pay.Errorf(pay.ENOTFOUND, "review item %s not found", id)
	}
	return nil
}
