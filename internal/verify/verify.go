// Package verify replays every payment's timeline and checks it against the
// stored record (SPEC "Self-verification"): versions strictly increasing
// with no gaps, no transition the state machine forbids, one outbox record
// per real transition, every processed webhook reflected in the timeline,
// and a ledger that balances per currency. Outbox records purged after
// their retention are not asked for: a transition older than the store's
// purge horizon (pay.Tx.OutboxHorizon) may have lost its record; a
// younger one must have it. It reads one consistent snapshot and changes
// nothing. It is the engine of `paystate verify` (cli/verify.go, which
// adds the file and journal checks of the store); the simulation and the
// tests of other packages run it too.
package verify

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/paystate/paystate/pay"
)

// Mismatch is one problem found.
type Mismatch struct {
	PaymentID string // "" for a problem of the whole database (the ledger)
	Problem   string
}

// String formats a mismatch for the command line.
func (m Mismatch) String() string {
	if m.PaymentID == "" {
		return m.Problem
	}
	return m.PaymentID + ": " + m.Problem
}

// Report is the result of a verification.
type Report struct {
	Payments    int
	Steps       int
	Transitions int
	Mismatches  []Mismatch
}

// OK reports whether nothing was found.
func (r Report) OK() bool { return len(r.Mismatches) == 0 }

// verifyTx is what verify reads of a storage transaction.
type verifyTx interface {
	ListPayments(f pay.PaymentFilter) ([]pay.Payment, string, error)
	Steps(paymentID string) ([]pay.Step, error)
	OutboxForPayment(paymentID string) ([]pay.OutboxRecord, error)
	OutboxHorizon() (time.Time, error)
	InboxForPayment(paymentID string) ([]pay.InboxEvent, error)
	LedgerBalances() ([]pay.Balance, error)
}

// Run verifies the whole store in one read transaction.
func Run(ctx context.Context, s pay.Store) (Report, error) {
	var r Report
	err := s.View(ctx, func(tx pay.Tx) error {
		r = Report{}
		horizon, err := tx.OutboxHorizon()
		if err != nil {
			return fmt.Errorf("outbox horizon: %w", err)
		}
		cursor := ""
		for {
			page, next, err := tx.ListPayments(pay.PaymentFilter{Limit: 500, Cursor: cursor})
			if err != nil {
				return fmt.Errorf("list payments: %w", err)
			}
			for _, p := range page {
				if err := checkPayment(tx, p, horizon, &r); err != nil {
					return fmt.Errorf("payment %s: %w", p.ID, err)
				}
			}
			if next == "" {
				break
			}
			cursor = next
		}
		return checkLedger(tx, &r)
	})
	return r, err
}

func (r *Report) add(id, format string, args ...any) {
	r.Mismatches = append(r.Mismatches, Mismatch{PaymentID: id, Problem: fmt.Sprintf(format, args...)})
}

// checkPayment replays one payment's timeline. Transitions before horizon
// may have lost their outbox record to the purge.
func checkPayment(tx verifyTx, p pay.Payment, horizon time.Time, r *Report) error {
	r.Payments++
	steps, err := tx.Steps(p.ID)
	if err != nil {
		return err
	}
	outbox, err := tx.OutboxForPayment(p.ID)
	if err != nil {
		return err
	}
	events, err := tx.InboxForPayment(p.ID)
	if err != nil {
		return err
	}
	r.Steps += len(steps)

	// Replay: written versions 1..N without gaps, each transition allowed
	// from the status the replay has reached.
	var (
		version     uint64
		status      pay.Status
		transitions []pay.Step
		eventSteps  = map[string]bool{}
	)
	for i, s := range steps {
		if s.Seq != uint64(i+1) {
			r.add(p.ID, "timeline step %d has sequence %d", i+1, s.Seq)
		}
		if s.EventID != "" {
			eventSteps[s.EventID] = true
		}
		if !s.Wrote() {
			continue
		}
		if s.Version != version+1 {
			r.add(p.ID, "version gap: step %d wrote version %d after version %d", s.Seq, s.Version, version)
		}
		version = s.Version
		switch s.Kind {
		case pay.StepCreated:
			if i != 0 || s.Version != 1 {
				r.add(p.ID, "creation at step %d, version %d", s.Seq, s.Version)
			}
			status = s.To
		case pay.StepTransition:
			if s.From != status {
				r.add(p.ID, "step %d moves from %s, but the payment was %s", s.Seq, s.From, status)
			}
			if !pay.CanTransition(s.From, s.To) {
				r.add(p.ID, "step %d: transition %s → %s is forbidden", s.Seq, s.From, s.To)
			}
			status = s.To
			transitions = append(transitions, s)
		case pay.StepUpdate:
			if s.To != status {
				r.add(p.ID, "step %d updates status %s, but the payment was %s", s.Seq, s.To, status)
			}
		}
	}
	r.Transitions += len(transitions)
	if version != p.Version {
		r.add(p.ID, "timeline ends at version %d, record has version %d", version, p.Version)
	}
	if status != p.Status {
		r.add(p.ID, "timeline ends in status %s, record has %s", status, p.Status)
	}

	// One outbox record per real transition, in the same order, matched by
	// version; the records of transitions before the purge horizon may be
	// gone.
	byVersion := make(map[uint64]pay.Step, len(transitions))
	for _, t := range transitions {
		byVersion[t.Version] = t
	}
	matched := make(map[uint64]bool, len(outbox))
	var last uint64
	for _, o := range outbox {
		t, ok := byVersion[o.Version]
		switch {
		case !ok:
			r.add(p.ID, "outbox record %s (%s, version %d) matches no transition", o.ID, o.Type, o.Version)
		case matched[o.Version]:
			r.add(p.ID, "outbox record %s (%s, version %d) is a second record of its transition", o.ID, o.Type, o.Version)
		case o.Status != t.To || o.Type != pay.EventType(t.To):
			r.add(p.ID, "outbox record %s (%s, version %d) does not match transition to %s at version %d", o.ID, o.Type, o.Version, t.To, t.Version)
		}
		if o.Version < last {
			r.add(p.ID, "outbox record %s (version %d) comes after the record of version %d", o.ID, o.Version, last)
		}
		matched[o.Version], last = true, max(last, o.Version)
	}
	for _, t := range transitions {
		if !matched[t.Version] && !t.At.Before(horizon) {
			r.add(p.ID, "missing outbox record: transition to %s at version %d (step %d) has none", t.To, t.Version, t.Seq)
		}
	}

	// Every processed webhook of the payment has its timeline step.
	for _, e := range events {
		if !e.Processed {
			continue
		}
		if !eventSteps[e.EventID] {
			r.add(p.ID, "webhook %s/%s is processed but has no timeline step", e.Provider, e.EventID)
		}
	}
	return nil
}

// checkLedger checks that every currency balances.
func checkLedger(tx verifyTx, r *Report) error {
	bs, err := tx.LedgerBalances()
	if err != nil {
		return fmt.Errorf("ledger balances: %w", err)
	}
	sum := map[string]int64{}
	for _, b := range bs {
		sum[b.Currency] += b.Amount
	}
	curs := make([]string, 0, len(sum))
	for c := range sum {
		curs = append(curs, c)
	}
	sort.Strings(curs)
	for _, c := range curs {
		if sum[c] != 0 {
			r.add("", "ledger does not balance in %s: accounts sum to %d", c, sum[c])
		}
	}
	return nil
}
