// Package defaults fills in a setting left unset: a zero or negative
// count, size or duration means "use the default".
package defaults

// Or returns v, or def if v is zero or less.
func Or[T ~int | ~int32 | ~int64 | ~float64](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}
