package config

import (
	"os"
	"reflect"
	"testing"
)

// FuzzLoad feeds arbitrary bytes to Parse. It must never panic, and a
// configuration it accepts must be valid and survive TOML and Parse again
// unchanged. The seed corpus is in testdata/fuzz/FuzzLoad.
func FuzzLoad(f *testing.F) {
	for _, path := range []string{"../config.example.toml", "testdata/webhooks.toml"} {
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data, nil)
		if err != nil {
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("Parse accepted an invalid config: %v", err)
		}
		out, err := c.TOML()
		if err != nil {
			t.Fatalf("TOML: %v", err)
		}
		back, err := Parse(out, nil)
		if err != nil {
			t.Fatalf("Parse(TOML()): %v\n%s", err, out)
		}
		if !reflect.DeepEqual(back, c) {
			t.Fatalf("Parse(TOML())=%+v, want %+v\n%s", back, c, out)
		}
		if _, err := c.Masked().TOML(); err != nil {
			t.Fatalf("Masked().TOML: %v", err)
		}
	})
}
