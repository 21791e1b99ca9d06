package bolt

import (
	"time"

	"go.etcd.io/bbolt"
)

// BucketSize is what one top-level bucket of a file holds (BucketSizes).
type BucketSize struct {
	Name                       string
	Keys, KeyBytes, ValueBytes int
	Alloc, Inuse               int // bytes of the bucket's pages, and of them in use (bbolt's BucketStats)
}

// BucketSizes walks every top-level bucket of the file at path,
// read-only, and counts the pages in use: below the high-water mark and
// not free. bench/footprint reports it.
func BucketSizes(path string) (out []BucketSize, inUse int, err error) {
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		return nil, 0, err
	}
	defer db.Close()
	err = db.View(func(tx *bbolt.Tx) error {
		inUse = int(tx.Size()/int64(db.Info().PageSize)) - db.Stats().FreePageN
		return tx.ForEach(func(name []byte, b *bbolt.Bucket) error {
			st := b.Stats()
			s := BucketSize{Name: string(name), Alloc: st.BranchAlloc + st.LeafAlloc, Inuse: st.BranchInuse + st.LeafInuse}
			err := b.ForEach(func(k, v []byte) error {
				s.Keys++
				s.KeyBytes += len(k)
				s.ValueBytes += len(v)
				return nil
			})
			out = append(out, s)
			return err
		})
	})
	return out, inUse, err
}
