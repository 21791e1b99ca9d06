package mock

import (
	"context"
	"fmt"
	"strings"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/psp/stdwebhook"
	"github.com/paystate/paystate/store"
)

// refund is the PSP's record of one refund, by its key, guarded by
// Provider.mu.
type refund struct {
	key       string // "refund-<refund id>"
	id        string // paystate's refund id
	paymentID string
	ref       string // the PSP's id of the refund
	amount    int64
	currency  string
	status    pay.RefundStatus
}

// result is the PSP's answer about rf.
func (rf *refund) result() pay.RefundResult {
	return pay.RefundResult{
		Status: rf.status, ProviderRef: rf.ref, Found: true,
		Raw: fmt.Sprintf("mock refund=%s status=%s amount=%d", rf.ref, rf.status, rf.amount),
	}
}

// Refund statuses as the store keeps a refund of the mock (a PSPCharge
// under the refund's key).
var refundAsCharge = map[pay.RefundStatus]pay.Status{
	pay.RefundPending:   pay.Processing,
	pay.RefundSucceeded: pay.Refunded,
	pay.RefundFailed:    pay.Failed,
}

// record is rf as the store keeps it.
func (rf *refund) record() store.PSPCharge {
	return store.PSPCharge{
		Key: rf.key, PaymentID: rf.paymentID, ProviderRef: rf.ref, Amount: rf.amount, Currency: rf.currency,
		Status: refundAsCharge[rf.status],
	}
}

// refundOf is the refund a stored record of the mock holds.
func refundOf(rec store.PSPCharge) *refund {
	rf := &refund{
		key: rec.Key, id: strings.TrimPrefix(rec.Key, "refund-"), paymentID: rec.PaymentID, ref: rec.ProviderRef,
		amount: rec.Amount, currency: rec.Currency, status: pay.RefundPending,
	}
	for st, cs := range refundAsCharge {
		if cs == rec.Status {
			rf.status = st
		}
	}
	return rf
}

// loadRefund reads the refund of key from the store into memory, if the
// store has it and memory does not.
func (p *Provider) loadRefund(ctx context.Context, key string) error {
	p.mu.Lock()
	_, ok := p.refunds[key]
	p.mu.Unlock()
	if ok || p.store == nil {
		return nil
	}
	rec, found, err := p.stored(ctx, key, "refund")
	if err != nil || !found {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.refunds[key]; !ok {
		p.refunds[key] = refundOf(rec)
	}
	return nil
}

// later runs fn in a goroutine after the webhook delay, counted in
// inflight (Wait); nothing runs after Close.
func (p *Provider) later(fn func()) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.inflight++
	p.mu.Unlock()
	go func() {
		defer p.done()
		if p.sleep(p.cfg.WebhookDelay) {
			fn()
		}
	}()
}

// scheduleRefund sends the webhook of rf's outcome after the webhook
// delay: a pending refund (amount ending in 06) fails then, and its
// amount is the charge's again.
func (p *Provider) scheduleRefund(c *charge, rf *refund) {
	p.later(func() {
		p.mu.Lock()
		typ := stdwebhook.TypeRefundSucceeded
		var recs []store.PSPCharge
		if rf.status == pay.RefundPending {
			rf.status = pay.RefundFailed
			c.AmountRefunded -= rf.amount
			if c.Status == pay.Refunded {
				c.Status = pay.Captured
			}
			recs = append(recs, c.record(), rf.record())
		}
		if rf.status == pay.RefundFailed {
			typ = stdwebhook.TypeRefundFailed
		}
		sends := p.copiesLocked(p.refundEvent(c, rf, typ))
		p.mu.Unlock()
		for _, rec := range recs {
			if err := p.save(context.Background(), rec); err != nil {
				p.Logger.Warn().Err(err).Str("payment_id", rec.PaymentID).Msg("mock: record the refund's failure")
			}
		}
		for _, e := range sends {
			if !p.deliver(e) {
				return
			}
		}
	})
}

// scheduleDispute opens a dispute of what is left of c (its amount less
// its refunds; none if it was refunded in full) after the webhook
// delay and closes it lost after dispute_after.
func (p *Provider) scheduleDispute(c *charge) {
	p.later(func() {
		p.mu.Lock()
		now := p.Now()
		amount := c.Amount - c.AmountRefunded
		if amount <= 0 {
			p.mu.Unlock()
			return // the customer has all of it back: nothing to dispute
		}
		p.disputed[c.Key] = true
		d := &stdwebhook.Dispute{
			ID: "mock_dp_" + digest(c.Key), Amount: amount, Reason: "fraudulent",
			Status: pay.DisputeNeedsResponse, EvidenceDueBy: now.Add(disputeEvidenceWindow).UTC(),
		}
		opened := p.copiesLocked(p.disputeEvent(c, d, stdwebhook.TypeDisputeCreated))
		p.mu.Unlock()
		for _, e := range opened {
			if !p.deliver(e) {
				return
			}
		}
		if !p.sleep(p.cfg.DisputeAfter) {
			return
		}
		p.mu.Lock()
		closed := *d
		closed.Status = pay.DisputeLost
		sends := p.copiesLocked(p.disputeEvent(c, &closed, stdwebhook.TypeDisputeClosed))
		p.mu.Unlock()
		for _, e := range sends {
			if !p.deliver(e) {
				return
			}
		}
	})
}

// copiesLocked is e, and a second copy of it by duplicate_rate. p.mu
// must be held.
func (p *Provider) copiesLocked(e stdwebhook.Event) []stdwebhook.Event {
	out := []stdwebhook.Event{e}
	if p.rnd.Float64() < p.cfg.DuplicateRate {
		out = append(out, e)
		p.stats.WebhooksDuplicated++
	}
	return out
}

// refundEvent is the webhook of type typ about refund rf of c. Its id is
// derived from the refund and the type, so a redelivery carries the same.
func (p *Provider) refundEvent(c *charge, rf *refund, typ string) stdwebhook.Event {
	e := p.eventAt(c, typ, p.Now())
	e.ID = "evt_mock_" + digest(rf.key+"/"+typ)
	e.Amount = 0 // the refund's amount is in data.refund
	e.Refund = &stdwebhook.Refund{ID: rf.id, ProviderRef: rf.ref, Amount: rf.amount}
	return e
}

// disputeEvent is the webhook of type typ about dispute d of c.
func (p *Provider) disputeEvent(c *charge, d *stdwebhook.Dispute, typ string) stdwebhook.Event {
	e := p.eventAt(c, typ, p.Now())
	e.ID = "evt_mock_" + digest(d.ID+"/"+typ)
	e.Amount = 0
	e.Dispute = d
	return e
}
