package testkit

import (
	"context"
	"sync/atomic"

	"github.com/paystate/paystate/store"
)

// CommitCounter is a real store that counts the write transactions
// (Update calls) that committed, for tests that assert commits per
// operation.
type CommitCounter struct {
	store.Store
	N atomic.Int64
}

// Update runs fn in the store's Update and counts the commit.
func (c *CommitCounter) Update(ctx context.Context, fn func(store.Tx) error) error {
	return c.Store.Update(ctx, func(tx store.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		tx.OnCommit(func() { c.N.Add(1) })
		return nil
	})
}

// Commits runs fn and returns the write transactions committed meanwhile.
func (c *CommitCounter) Commits(fn func()) int64 {
	before := c.N.Load()
	fn()
	return c.N.Load() - before
}
