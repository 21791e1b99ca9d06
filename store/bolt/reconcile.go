package bolt

// Settlement reconciliation: the matched and posted lines of settlement
// reports (settlements, with settlements_by_payment for those of a
// payment) and the runs (recon_runs, keyed by their time-ordered id).
// The record types are here rather than in codec.go: they are read and
// written by this file only.

import (
	"bytes"
	"fmt"
	"time"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// settlementRecord is the value of settlements; provider and id are the
// key.
type settlementRecord struct {
	Kind        string `cbor:"1,keyasint,omitempty"`
	PaymentID   string `cbor:"2,keyasint,omitempty"`
	ProviderRef string `cbor:"3,keyasint,omitempty"`
	Amount      int64  `cbor:"4,keyasint,omitempty"`
	Fee         int64  `cbor:"5,keyasint,omitempty"`
	Currency    string `cbor:"6,keyasint,omitempty"`
	PayoutID    string `cbor:"7,keyasint,omitempty"`
	RunID       string `cbor:"8,keyasint,omitempty"`
	CreatedAt   stamp  `cbor:"9,keyasint,omitzero"`
	UpdatedAt   stamp  `cbor:"10,keyasint,omitzero"`
}

func fromSettlement(s pay.Settlement) settlementRecord {
	return settlementRecord{
		Kind: string(s.Kind), PaymentID: s.PaymentID, ProviderRef: s.ProviderRef, Amount: s.Amount, Fee: s.Fee,
		Currency: s.Currency, PayoutID: s.PayoutID, RunID: s.RunID, CreatedAt: at(s.CreatedAt), UpdatedAt: at(s.UpdatedAt),
	}
}

func (r settlementRecord) settlement(provider, id string) pay.Settlement {
	return pay.Settlement{
		Provider: provider, ID: id, Kind: pay.SettlementKind(r.Kind), PaymentID: r.PaymentID, ProviderRef: r.ProviderRef,
		Amount: r.Amount, Fee: r.Fee, Currency: r.Currency, PayoutID: r.PayoutID, RunID: r.RunID,
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
	}
}

// reconItemRecord is one unmatched item of a run.
type reconItemRecord struct {
	Kind        string `cbor:"1,keyasint,omitempty"`
	Line        int    `cbor:"2,keyasint,omitempty"`
	LineID      string `cbor:"3,keyasint,omitempty"`
	ProviderRef string `cbor:"4,keyasint,omitempty"`
	PaymentID   string `cbor:"5,keyasint,omitempty"`
	Amount      int64  `cbor:"6,keyasint,omitempty"`
	Expected    int64  `cbor:"7,keyasint,omitempty"`
	Currency    string `cbor:"8,keyasint,omitempty"`
	Note        string `cbor:"9,keyasint,omitempty"`
}

// reconRunRecord is the value of recon_runs; the id is the key.
type reconRunRecord struct {
	Provider       string            `cbor:"1,keyasint,omitempty"`
	Source         string            `cbor:"2,keyasint,omitempty"`
	Lines          int               `cbor:"3,keyasint,omitempty"`
	Matched        int               `cbor:"4,keyasint,omitempty"`
	Mismatched     int               `cbor:"5,keyasint,omitempty"`
	MissingLocally int               `cbor:"6,keyasint,omitempty"`
	MissingAtPSP   int               `cbor:"7,keyasint,omitempty"`
	Posted         int               `cbor:"8,keyasint,omitempty"`
	Items          []reconItemRecord `cbor:"9,keyasint,omitempty"`
	CreatedAt      stamp             `cbor:"10,keyasint,omitzero"`
}

func fromReconRun(r pay.ReconRun) reconRunRecord {
	rec := reconRunRecord{
		Provider: r.Provider, Source: r.Source, Lines: r.Lines, Matched: r.Matched, Mismatched: r.Mismatched,
		MissingLocally: r.MissingLocally, MissingAtPSP: r.MissingAtPSP, Posted: r.Posted, CreatedAt: at(r.CreatedAt),
	}
	for _, it := range r.Items {
		rec.Items = append(rec.Items, reconItemRecord(it))
	}
	return rec
}

func (r reconRunRecord) run(id string) pay.ReconRun {
	run := pay.ReconRun{
		ID: id, Provider: r.Provider, Source: r.Source, Lines: r.Lines, Matched: r.Matched, Mismatched: r.Mismatched,
		MissingLocally: r.MissingLocally, MissingAtPSP: r.MissingAtPSP, Posted: r.Posted, CreatedAt: r.CreatedAt.UTC(),
	}
	for _, it := range r.Items {
		run.Items = append(run.Items, pay.ReconItem(it))
	}
	return run
}

// PutSettlement stores s under (s.Provider, s.ID), replacing the one
// before, and keeps settlements_by_payment in step.
func (t *tx) PutSettlement(s pay.Settlement) error {
	if err := store.CheckSettlement(s, t.paymentStored); err != nil {
		return err
	}
	old, err := t.Settlement(s.Provider, s.ID)
	switch {
	case err == nil && old.PaymentID != "":
		if err := t.del(bucketSettlementsByPayment, settlementPaymentKey(old.PaymentID, old.Provider, old.ID)); err != nil {
			return err
		}
	case err != nil && pay.ErrorCode(err) != pay.ENOTFOUND:
		return err
	}
	if err := t.putRecord(bucketSettlements, settlementKey(s.Provider, s.ID), fromSettlement(s)); err != nil {
		return err
	}
	if s.PaymentID != "" {
		return t.put(bucketSettlementsByPayment, settlementPaymentKey(s.PaymentID, s.Provider, s.ID), nil)
	}
	return nil
}

// ClaimSettlement stores s if nothing is stored under (s.Provider, s.ID)
// and reports true, else returns the stored settlement. bbolt has one
// writer at a time: the read and the write cannot be interleaved with
// another transaction's.
func (t *tx) ClaimSettlement(s pay.Settlement) (pay.Settlement, bool, error) {
	old, err := t.Settlement(s.Provider, s.ID)
	switch {
	case err == nil:
		return old, false, nil
	case pay.ErrorCode(err) != pay.ENOTFOUND:
		return pay.Settlement{}, false, err
	}
	if err := t.PutSettlement(s); err != nil {
		return pay.Settlement{}, false, err
	}
	return s, true, nil
}

// ClaimSettlementPayout sets the stored settlement's payout if it has
// none.
func (t *tx) ClaimSettlementPayout(provider, id, payoutID string, at time.Time) (bool, error) {
	s, err := t.Settlement(provider, id)
	if err != nil {
		return false, err
	}
	if s.PayoutID != "" || payoutID == "" {
		return false, nil
	}
	s.PayoutID, s.UpdatedAt = payoutID, at.UTC()
	return true, t.PutSettlement(s)
}

// Settlement returns one settlement, or ENOTFOUND.
func (t *tx) Settlement(provider, id string) (pay.Settlement, error) {
	var r settlementRecord
	if id == "" {
		return pay.Settlement{}, pay.Errorf(pay.ENOTFOUND, "settlement %s/%s not found", provider, id)
	}
	if err := t.getFound(bucketSettlements, settlementKey(provider, id), &r, "settlement %s/%s not found", provider, id); err != nil {
		return pay.Settlement{}, err
	}
	return r.settlement(provider, id), nil
}

// SettlementsForPayment returns a payment's settlements by provider and
// id, through settlements_by_payment.
func (t *tx) SettlementsForPayment(paymentID string) ([]pay.Settlement, error) {
	if err := checkPart("payment id", paymentID, false); err != nil {
		return nil, err
	}
	prefix := paymentPrefix(paymentID)
	var out []pay.Settlement
	c := t.bucket(bucketSettlementsByPayment).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		provider, id, ok := readStr(k[len(prefix):])
		if !ok {
			return nil, corrupt(bucketSettlementsByPayment, "key %x", k)
		}
		s, err := t.Settlement(provider, string(id))
		if err != nil {
			return nil, missing(err, bucketSettlementsByPayment, "key %x points to missing settlement %s/%s", k, provider, id)
		}
		out = append(out, s)
	}
	return out, nil
}

// ListSettlements returns up to limit settlements after (afterProvider,
// afterID) in key order: by provider, then id.
func (t *tx) ListSettlements(afterProvider, afterID string, limit int) ([]pay.Settlement, error) {
	if limit < 1 || limit > pay.MaxListLimit {
		return nil, pay.Invalidf("limit", "limit must be from 1 to %d, got %d", pay.MaxListLimit, limit)
	}
	c := t.bucket(bucketSettlements).Cursor()
	var k, v []byte
	if afterProvider == "" && afterID == "" {
		k, v = c.First()
	} else {
		after := settlementKey(afterProvider, afterID)
		k, v = c.Seek(after)
		if k != nil && bytes.Equal(k, after) {
			k, v = c.Next()
		}
	}
	var out []pay.Settlement
	for ; k != nil && len(out) < limit; k, v = c.Next() {
		provider, id, ok := readStr(k)
		if !ok {
			return nil, corrupt(bucketSettlements, "key %x", k)
		}
		var r settlementRecord
		if err := decode("settlement", v, &r); err != nil {
			return nil, err
		}
		out = append(out, r.settlement(provider, string(id)))
	}
	return out, nil
}

// PutReconRun stores a reconciliation run, replacing one with its id.
func (t *tx) PutReconRun(r pay.ReconRun) error {
	if err := checkPart("run id", r.ID, true); err != nil {
		return err
	}
	if err := pay.ValidateReconRun(r); err != nil {
		return err
	}
	return t.putRecord(bucketReconRuns, []byte(r.ID), fromReconRun(r))
}

// ReconRun returns one reconciliation run, or ENOTFOUND.
func (t *tx) ReconRun(id string) (pay.ReconRun, error) {
	var r reconRunRecord
	if id == "" {
		return pay.ReconRun{}, pay.Errorf(pay.ENOTFOUND, "reconciliation run %q not found", id)
	}
	if err := t.getFound(bucketReconRuns, []byte(id), &r, "reconciliation run %s not found", id); err != nil {
		return pay.ReconRun{}, err
	}
	return r.run(id), nil
}

// ListReconRuns returns up to limit runs with an id below beforeID (all
// when empty), newest first: run ids are time-ordered, so a backward scan
// of recon_runs.
func (t *tx) ListReconRuns(beforeID string, limit int) ([]pay.ReconRun, error) {
	if limit < 1 || limit > pay.MaxListLimit {
		return nil, pay.Invalidf("limit", "limit must be from 1 to %d, got %d", pay.MaxListLimit, limit)
	}
	c := t.bucket(bucketReconRuns).Cursor()
	var k, v []byte
	if beforeID == "" {
		k, v = c.Last()
	} else {
		k, _ = c.Seek([]byte(beforeID))
		if k == nil {
			k, v = c.Last()
		} else {
			k, v = c.Prev()
		}
	}
	var out []pay.ReconRun
	for ; k != nil && len(out) < limit; k, v = c.Prev() {
		var r reconRunRecord
		if err := decode("reconciliation run", v, &r); err != nil {
			return nil, err
		}
		out = append(out, r.run(string(k)))
	}
	return out, nil
}

// settlements exports every settlement, in key order.
func (e *exporter) settlements() error {
	provider, id := "", ""
	for {
		ss, err := e.t.ListSettlements(provider, id, exportPage)
		if err != nil {
			return err
		}
		for _, s := range ss {
			if err := e.sink.Settlement(s); err != nil {
				return err
			}
		}
		if len(ss) < exportPage {
			return nil
		}
		provider, id = ss[len(ss)-1].Provider, ss[len(ss)-1].ID
	}
}

// reconRuns exports every reconciliation run, newest first.
func (e *exporter) reconRuns() error {
	before := ""
	for {
		rs, err := e.t.ListReconRuns(before, exportPage)
		if err != nil {
			return err
		}
		for _, r := range rs {
			if err := e.sink.ReconRun(r); err != nil {
				return err
			}
		}
		if len(rs) < exportPage {
			return nil
		}
		before = rs[len(rs)-1].ID
	}
}

// checkSettlements reports settlements without their index entry, index
// entries without a settlement, and runs that do not decode.
func (c *checker) checkSettlements() {
	n := 0
	_ = c.bucket(bucketSettlements).ForEach(func(k, v []byte) error {
		provider, id, ok := readStr(k)
		var rec settlementRecord
		if err := decode("settlement", v, &rec); err != nil || !ok {
			c.report(fmt.Errorf("settlement %x: %v", k, err))
			return nil
		}
		if rec.PaymentID != "" {
			n++
			c.want(bucketSettlementsByPayment, settlementPaymentKey(rec.PaymentID, provider, string(id)), "settlement "+provider+"/"+string(id))
		}
		return nil
	})
	c.wantCount(bucketSettlementsByPayment, n, "settlements of payments")
	c.decodeEach(bucketReconRuns, &reconRunRecord{})
}

// paymentStored reports whether a payment is stored (store.CheckSettlement).
func (t *tx) paymentStored(id string) (bool, error) {
	_, ok, err := t.payment(id)
	return ok, err
}
