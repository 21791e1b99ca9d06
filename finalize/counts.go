package finalize

import (
	"context"

	"github.com/paystate/paystate/pay"
)

// CountByStatus returns how many payments are in each status, every
// status included (0 for none): the paystate_payments gauge of /metrics.
func (s *Payments) CountByStatus(ctx context.Context) (map[pay.Status]int, error) {
	var counts map[pay.Status]int
	err := s.Store.View(ctx, func(tx pay.Tx) (err error) {
		counts, err = tx.PaymentCounts()
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make(map[pay.Status]int, len(pay.Statuses))
	for _, st := range pay.Statuses {
		out[st] = counts[st]
	}
	return out, nil
}
