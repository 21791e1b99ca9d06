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
	ClaimSettlement(s pay.Settlement) (pay.Settlement, bool, error)
	ClaimSettlementPayout(provider, id, payoutID string, at time.Time) (bool, error)
}

// Settled is what PostSettlement did with a line.
type Settled struct {
	// Posted: the line posted something new (its fee on its first
	// sight, its payout when it first names one).
	Posted bool
	// Changed: the line's id was posted before with other figures
	// (pay.Settlement.Differs); nothing was posted, Prev is what was.
	Changed bool
	Prev    pay.Settlement
}

// PostSettlement posts a matched settlement line l of provider, for the
// payment paymentID ("" for a fee of no payment), as the run runID: its
// fee and, when it names a payout, its payout, each once. The line's
// balance-transaction id is claimed (Tx.ClaimSettlement) in tx, before
// anything is posted, so that of two imports of one line at the same
// time one posts it. A line whose id was posted with other figures posts
// nothing (Changed). It has no effect outside tx.
func PostSettlement(tx SettleTx, provider, runID, paymentID string, l pay.SettlementLine) (Settled, error) {
	now := tx.Now()
	rec := pay.OutboxRecord{ID: l.ID, PaymentID: paymentID, Currency: l.Currency, CreatedAt: now}
	prev, claimed, err := tx.ClaimSettlement(pay.Settlement{
		Provider: provider, ID: l.ID, Kind: l.Kind, PaymentID: paymentID, ProviderRef: l.ProviderRef,
		Amount: l.Amount, Fee: l.Fee, Currency: l.Currency, PayoutID: l.PayoutID, RunID: runID, CreatedAt: now, UpdatedAt: now,
	})
	if err != nil {
		return Settled{}, err
	}
	var entries []pay.LedgerEntry
	switch {
	case claimed:
		if fee := pay.SettlementFee(l.Kind, l.Amount, l.Fee); fee != 0 {
			entries = append(entries, move(rec, pay.AccountPSPFees, pay.AccountPSPReceivable, fee)...)
		}
		entries = append(entries, payoutMove(rec, l)...)
	case prev.Differs(l):
		return Settled{Changed: true, Prev: prev}, nil
	case prev.PayoutID == "" && l.PayoutID != "":
		set, err := tx.ClaimSettlementPayout(provider, l.ID, l.PayoutID, now)
		if err != nil || !set {
			return Settled{}, err
		}
		rec.PaymentID = prev.PaymentID
		entries = payoutMove(rec, l)
	default:
		return Settled{}, nil // posted before: nothing new
	}
	if len(entries) > 0 {
		if err := tx.AppendLedger(entries); err != nil {
			return Settled{}, err
		}
	}
	return Settled{Posted: true}, nil
}

// payoutMove is the payout posting of line l, none if it names no
// payout or moves nothing.
func payoutMove(rec pay.OutboxRecord, l pay.SettlementLine) []pay.LedgerEntry {
	net := pay.SettlementPayout(l.Kind, l.Amount, l.Fee)
	if l.PayoutID == "" || net == 0 {
		return nil
	}
	return move(rec, pay.AccountPayouts, pay.AccountPSPReceivable, net)
}
