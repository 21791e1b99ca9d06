// Package defaults fills in a setting left unset: a zero or negative
// count, size or duration means "use the default", and a nil clock
// time.Now.
package defaults

import "time"

// Or returns v, or def if v is zero or less.
func Or[T ~int | ~int32 | ~int64 | ~float64](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// Clock returns now, or time.Now if now is nil: the clock of a component
// whose Now was not injected.
func Clock(now func() time.Time) func() time.Time {
	if now == nil {
		return time.Now
	}
	return now
}
