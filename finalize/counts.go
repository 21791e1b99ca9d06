package finalize

import (
	"context"

	"github.com/paystate/paystate/pay"
)

// CountByStatus returns how many payments are in each status, every
// status included (0 for none): the paystate_payments gauge of /metrics.
func (s *Payments) CountByStatus(ctx context.Context) (map[pay.Status]int, error) {
	c, err := s.CountStored(ctx)
	return c.ByStatus, err
}

// StoredCounts are the figures of stored state that /metrics exposes as
// gauges (paystate_payments, paystate_review_queue_size,
// paystate_disputes_open) and the dashboard's badges show.
type StoredCounts struct {
	// ByStatus is how many payments are in each status, every status
	// included (0 for none).
	ByStatus map[pay.Status]int
	// ReviewQueue is how many items wait on the review queue.
	ReviewQueue int
	// OpenDisputes is how many disputes are needs_response or
	// under_review.
	OpenDisputes int
}

// CountStored counts the stored state in one read transaction, when asked:
// a figure that is read at each scrape is never older than the scrape (a
// worker's pass would leave it up to an interval behind).
func (s *Payments) CountStored(ctx context.Context) (StoredCounts, error) {
	var (
		counts map[pay.Status]int
		out    StoredCounts
	)
	err := ReadTx(ctx, s.Store, func(tx Tx) error {
		var err error
		if counts, err = tx.PaymentCounts(); err != nil {
			return err
		}
		review, err := tx.ListReview()
		if err != nil {
			return err
		}
		out.ReviewQueue = len(review)
		out.OpenDisputes, err = tx.CountOpenDisputes()
		return err
	})
	if err != nil {
		return StoredCounts{}, err
	}
	out.ByStatus = make(map[pay.Status]int, len(pay.Statuses))
	for _, st := range pay.Statuses {
		out.ByStatus[st] = counts[st]
	}
	return out, nil
}
