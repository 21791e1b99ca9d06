package config

import (
	"fmt"
	"strings"
	"time"
)

// Duration is a time.Duration written in TOML as a Go duration string, such
// as "30s" or "1h". A bare number other than 0 is refused rather than read
// as nanoseconds.
type Duration struct{ time.Duration }

// String returns d as a Go duration string without zero trailing units:
// "1h" rather than "1h0m0s", "10m" rather than "10m0s".
func (d Duration) String() string {
	s := d.Duration.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// MarshalText writes d as String does.
func (d Duration) MarshalText() ([]byte, error) {
	return []byte(d.String()), nil
}

// UnmarshalText parses a Go duration string. The TOML decoder adds the key
// to the error.
func (d *Duration) UnmarshalText(text []byte) error {
	v, err := time.ParseDuration(string(text))
	if err != nil {
		return fmt.Errorf("invalid duration %q: want a Go duration such as \"30s\" or \"1h\"", text)
	}
	d.Duration = v
	return nil
}
