package bolt

import (
	"path/filepath"
	"testing"

	"go.etcd.io/bbolt"
)

// TestChooseFill walks chooseFill's cases in one bbolt transaction at a
// time: keys that go to the end fill to appendFill, a key between others
// or a value that grows keeps bbolt's default for the rest of the
// transaction, and an update in place that does not grow changes nothing.
func TestChooseFill(t *testing.T) {
	t.Parallel()
	db, err := bbolt.Open(filepath.Join(t.TempDir(), "fill.db"), 0o600, &bbolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	put := func(b *bbolt.Bucket, k, v string) {
		t.Helper()
		chooseFill(b, []byte(k), []byte(v))
		if err := b.Put([]byte(k), []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		name string
		puts [][2]string
		want float64
	}{
		{"Appends", [][2]string{{"b", "1"}, {"d", "1"}}, appendFill},
		{"InPlace", [][2]string{{"d", "2"}}, bbolt.DefaultFillPercent},
		{"AppendThenInPlace", [][2]string{{"e", "1"}, {"b", "3"}}, appendFill},
		{"Between", [][2]string{{"f", "1"}, {"c", "1"}, {"g", "1"}}, mixedFill},
		{"Grows", [][2]string{{"h", "1"}, {"f", "longer"}}, mixedFill},
	}
	for _, s := range steps {
		err := db.Update(func(btx *bbolt.Tx) error {
			b, err := btx.CreateBucketIfNotExists([]byte("k"))
			if err != nil {
				return err
			}
			for _, p := range s.puts {
				put(b, p[0], p[1])
			}
			if got := b.FillPercent; got != s.want {
				t.Errorf("%s: FillPercent=%v, want %v", s.name, got, s.want)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
