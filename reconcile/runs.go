package reconcile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// Runs reads the stored reconciliation runs (GET
// /v1/reconciliation/runs) and imports a report sent to the server (POST
// /v1/reconciliation/runs).
type Runs struct {
	Store store.Store
	// SettleWithin is reconcile.settle_within (Engine.SettleWithin).
	SettleWithin time.Duration
	// TempDir holds an uploaded report while it is imported; "" is the
	// system's.
	TempDir string
}

// Formats are the report formats Import reads, by name.
var Formats = map[string]func(io.Reader, func(pay.SettlementLine) error) error{
	"generic": ScanGeneric,
	"stripe":  ScanStripe,
	"paypal":  ScanPayPal,
	"mollie":  ScanMollie,
}

// Import imports a report in format ("stripe", "paypal", "mollie", "generic") of
// provider ("" for a PSP format: the PSP's own), read from body, as the run of source: body is
// copied to a temporary file first (the engine reads a report twice:
// checked whole, then posted), so memory does not grow with it, and the
// file is removed at the end. A malformed report is EINVALID, with its
// line; ctx ending stops the import between two transactions
// (ErrInterrupted).
func (r Runs) Import(ctx context.Context, format, provider, source string, body io.Reader) (pay.ReconRun, error) {
	scan, ok := Formats[format]
	switch {
	case !ok:
		return pay.ReconRun{}, pay.Invalidf("format", "format %q: want stripe, paypal, mollie or generic", format)
	case provider == "" && format != "generic":
		provider = format // a PSP's own report settles its own payments
	case provider == "":
		return pay.ReconRun{}, pay.Invalidf("provider", "provider is required with format generic")
	}
	if err := pay.ValidateText("provider", provider, pay.MaxStoredPart); err != nil {
		return pay.ReconRun{}, err
	}
	f, err := os.CreateTemp(r.TempDir, "paystate-report-*.csv")
	if err != nil {
		return pay.ReconRun{}, fmt.Errorf("reconcile: %w", err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if _, err := io.Copy(f, body); err != nil {
		return pay.ReconRun{}, fmt.Errorf("reconcile: receive the report: %w", err)
	}
	eng := &Engine{Store: r.Store, SettleWithin: r.SettleWithin}
	run, err := eng.Import(ctx, provider, source, FileLines(f, scan))
	if errors.Is(err, ErrInterrupted) {
		return run, &pay.Error{Code: pay.EUNAVAILABLE, Message: "the server is stopping: " + err.Error()}
	}
	return run, err
}

// List returns up to limit runs older than the run beforeID ("" = from
// the newest), newest first.
func (r Runs) List(ctx context.Context, beforeID string, limit int) ([]pay.ReconRun, error) {
	var out []pay.ReconRun
	err := finalize.ReadTx(ctx, r.Store, func(tx finalize.Tx) (err error) { out, err = tx.ListReconRuns(beforeID, limit); return err })
	return out, err
}

// Get returns one run with its unmatched items, or ENOTFOUND.
func (r Runs) Get(ctx context.Context, id string) (pay.ReconRun, error) {
	var out pay.ReconRun
	err := finalize.ReadTx(ctx, r.Store, func(tx finalize.Tx) (err error) { out, err = tx.ReconRun(id); return err })
	return out, err
}
