package ripple

import "github.com/paystate/paystate/pay"

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
