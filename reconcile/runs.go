package reconcile

import (
	"context"

	"github.com/paystate/paystate/pay"
)

// Runs reads the stored reconciliation runs (GET
// /v1/reconciliation/runs).
type Runs struct {
	Store pay.Store
}

// List returns up to limit runs older than the run beforeID ("" = from
// the newest), newest first.
func (r Runs) List(ctx context.Context, beforeID string, limit int) ([]pay.ReconRun, error) {
	var out []pay.ReconRun
	err := r.Store.View(ctx, func(tx pay.Tx) (err error) { out, err = tx.ListReconRuns(beforeID, limit); return err })
	return out, err
}

// Get returns one run with its unmatched items, or ENOTFOUND.
func (r Runs) Get(ctx context.Context, id string) (pay.ReconRun, error) {
	var out pay.ReconRun
	err := r.Store.View(ctx, func(tx pay.Tx) (err error) { out, err = tx.ReconRun(id); return err })
	return out, err
}
