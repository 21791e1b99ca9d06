package cli

import (
	"encoding/binary"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fxamacker/cbor/v2"
	"go.etcd.io/bbolt"

	"github.com/paystate/paystate/internal/testkit"
	"github.com/paystate/paystate/internal/testkit/daemontest"
)

func TestVerify_CleanAndCorrupt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clean := filepath.Join(dir, "clean.db")
	daemontest.History(t, clean)
	if out, err := runCmd("verify", "-db", clean); err != nil {
		t.Fatalf("clean database: %v\n%s", err, out)
	} else if !strings.Contains(out, "20 payments") || !strings.Contains(out, " 0 mismatches") {
		t.Fatalf("clean database: %s", out)
	}

	for _, tc := range []struct {
		name    string
		corrupt func(tx *bbolt.Tx) error
		want    string
	}{
		{"version gap", func(tx *bbolt.Tx) error {
			// Drop the last transition step of the last timeline that
			// has one. A timeline is a CBOR array of steps
			// (store/timeline.go), a step a CBOR map; field 5 is its
			// kind (store/codec.go, stepRecord), "transition" stored as
			// symbol code 23 (store/symbol.go).
			c := tx.Bucket([]byte("timeline")).Cursor()
			for k, v := c.Last(); k != nil; k, v = c.Prev() {
				var steps []map[uint64]any
				if err := cbor.Unmarshal(v, &steps); err != nil {
					return err
				}
				for i := len(steps) - 1; i >= 0; i-- {
					if steps[i][5] == uint64(23) {
						nv, err := cbor.Marshal(append(steps[:i], steps[i+1:]...))
						if err != nil {
							return err
						}
						return c.Bucket().Put(k, nv)
					}
				}
			}
			return fmt.Errorf("no transition step")
		}, "timeline ends at version"},
		{"unbalanced ledger", func(tx *bbolt.Tx) error {
			b := tx.Bucket([]byte("balances"))
			k, v := b.Cursor().First()
			if k == nil {
				return fmt.Errorf("no balances")
			}
			n := int64(binary.BigEndian.Uint64(v)) + 1
			return b.Put(k, binary.BigEndian.AppendUint64(nil, uint64(n)))
		}, "ledger does not balance in EUR"},
		{"journal line changed", func(tx *bbolt.Tx) error {
			// Double one journal line's amount, balances untouched.
			b := tx.Bucket([]byte("ledger"))
			k, v := b.Cursor().First()
			if k == nil {
				return fmt.Errorf("no ledger lines")
			}
			// A ledger value is a CBOR map; field 6 is the amount
			// (store/codec.go, ledgerRecord).
			var line map[uint64]any
			if err := cbor.Unmarshal(v, &line); err != nil {
				return err
			}
			switch a := line[6].(type) {
			case uint64:
				line[6] = 2 * a
			case int64:
				line[6] = 2 * a
			default:
				return fmt.Errorf("ledger line %x: amount is %T", k, line[6])
			}
			nv, err := cbor.Marshal(line)
			if err != nil {
				return err
			}
			return b.Put(k, nv)
		}, "ledger in EUR"},
		{"journal line undecodable", func(tx *bbolt.Tx) error {
			// One bit flipped in one journal line: its CBOR map header
			// becomes an array's, which does not decode.
			b := tx.Bucket([]byte("ledger"))
			k, v := b.Cursor().First()
			if k == nil || v[0]&0xe0 != 0xa0 {
				return fmt.Errorf("no ledger line that is a CBOR map")
			}
			nv := append([]byte(nil), v...)
			nv[0] ^= 0x20
			return b.Put(k, nv)
		}, "ledger entry"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "bad.db")
			testkit.CopyFile(t, clean, path)
			db, err := bbolt.Open(path, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := db.Update(tc.corrupt); err != nil {
				t.Fatal(err)
			}
			db.Close()
			out, err := runCmd("verify", "-db", path)
			if err == nil {
				t.Fatalf("verify passed a corrupt database:\n%s", out)
			}
			if !strings.Contains(out, tc.want) || !strings.Contains(out, "MISMATCH") {
				t.Fatalf("output does not report %q:\n%s", tc.want, out)
			}
			// Every finding is reported, then the summary, and exit 3.
			if got, want := ExitCode(err), ExitVerify; got != want {
				t.Errorf("exit code %d, want %d (%v)", got, want, err)
			}
			if !strings.Contains(out, "20 payments, ") || !strings.Contains(out, " mismatches") {
				t.Errorf("no summary line:\n%s", out)
			}
		})
	}
}
