package ripple

import (
	"context"

	"github.com/paystate/paystate/pay"
)

// SetAfterEffect installs fn to run after each attempt of an effect and
// before the delivery records it; an error from fn ends the attempt there,
// as a crash would. With it set, loyalty and retention take the path of one
// delivery at a time (effect, then record, as webhooks and receipts always
// do, and as a batch falls back to when its transaction fails), since a
// batch applies and records in one transaction where no crash can fall
// between the two.
func SetAfterEffect(s *Service, fn func(pay.Delivery) error) {
	s.afterEffect = fn
	for _, l := range s.lanes {
		l.inStore = false
	}
}

// InFlight returns how many deliveries to target are being attempted.
func InFlight(s *Service, target string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l, ok := s.lanes[target]; ok {
		return l.running
	}
	return 0
}

// Pass runs one pass as Run does, on the first pass and every Interval
// (the due index read, the other instances' fresh deliveries left to them
// for Config.Grace), and waits for its attempts as RunOnce does.
func Pass(ctx context.Context, s *Service) (int, error) { return s.runOnce(ctx, true) }
