package finalize

// Settlement postings: what a matched line of the PSP's settlement
// report moves in the ledger, posted once per balance transaction:
//
//	its fee          psp_receivable → psp_fees   (fee > 0: the PSP took it;
//	                                              a fee line's whole net)
//	its payout       psp_receivable → payouts    (the line's net, once it names a payout)
//
// A refund's or a dispute's net is negative, so its payout posting runs
// the other way. Each posting is a balanced pair (move), as every other
// posting of Apply's; the PSP's balance-transaction id is its event id and
// the key of the settlement record that makes a line seen again post
// nothing. A line first seen without a payout posts its fee; seen again
// with one, its payout only.

import (
	"time"

	"github.com/paystate/paystate/pay"
)

// SettleTx is what PostSettlement needs of a storage transaction.
type SettleTx interface {
	Now() time.Time
	AppendLedger(entries []pay.LedgerEntry) error
	Settlement(provider, id string) (pay.Settlement, error)
	PutSettlement(s pay.Settlement) error
}

// PostSettlement posts a matched settlement line l of provider, for the
// payment paymentID ("" for a fee of no payment), as the run runID: its
// fee and, when it names a payout, its payout, each once. It reports
// whether it posted anything. It has no effect outside tx.
func PostSettlement(tx SettleTx, provider, runID, paymentID string, l pay.SettlementLine) (bool, error) {
	now := tx.Now()
	old, err := tx.Settlement(provider, l.ID)
	found := err == nil
	if err != nil && pay.ErrorCode(err) != pay.ENOTFOUND {
		return false, err
	}
	if found && (old.PayoutID != "" || l.PayoutID == "") {
		return false, nil // posted before: nothing new
	}
	rec := pay.OutboxRecord{ID: l.ID, PaymentID: paymentID, Currency: l.Currency, CreatedAt: now}
	fee := l.Fee
	if l.Kind == pay.SettleFee {
		fee = -l.Net() // a fee of its own: all it takes is a fee
	}
	var entries []pay.LedgerEntry
	if !found && fee != 0 {
		entries = append(entries, move(rec, pay.AccountPSPFees, pay.AccountPSPReceivable, fee)...)
	}
	if l.PayoutID != "" && l.Kind != pay.SettlePayout && l.Net() != 0 { // a payout line is the sum of the others
		entries = append(entries, move(rec, pay.AccountPayouts, pay.AccountPSPReceivable, l.Net())...)
	}
	s := old
	if !found {
		s = pay.Settlement{
			Provider: provider, ID: l.ID, Kind: l.Kind, PaymentID: paymentID, ProviderRef: l.ProviderRef,
			Amount: l.Amount, Fee: l.Fee, Currency: l.Currency, RunID: runID, CreatedAt: now,
		}
	}
	s.PayoutID, s.UpdatedAt = l.PayoutID, now
	if err := tx.PutSettlement(s); err != nil {
		return false, err
	}
	if len(entries) == 0 {
		return !found, nil
	}
	return true, tx.AppendLedger(entries)
}
