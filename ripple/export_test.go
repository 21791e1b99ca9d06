package ripple

import "github.com/paystate/paystate/pay"

// SetAfterEffect installs fn to run after each attempt of an effect and
// before the delivery records it; an error from fn ends the attempt there,
// as a crash would.
func SetAfterEffect(s *Service, fn func(pay.Delivery) error) { s.afterEffect = fn }

// InFlight returns how many deliveries to target are being attempted.
func InFlight(s *Service, target string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l, ok := s.lanes[target]; ok {
		return l.running
	}
	return 0
}
