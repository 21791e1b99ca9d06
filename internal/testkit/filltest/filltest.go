// Package filltest is for the tests of `paystate copy`, which moves a
// bbolt database into PostgreSQL: Fill writes records of every family
// through store.Tx, the odd ones included (orphan webhooks, a processed id
// whose event was never stored, a released lease, a purged outbox record,
// dead letters); Records is an export sink that keeps what an export
// hands it; ReadExtra reads through store.Tx, by the keys of such an
// export, the records that storetest.ReadDump does not (the journal, the
// mock PSP's charges, processed ids, every inbox event and lease), so that
// a test compares two stores record by record. It imports no store: both
// backends' tests use it.
package filltest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
	"github.com/paystate/paystate/store/storetest"
)

// Payment ids Fill writes.
var (
	PaymentIDs = []string{"pay_01KB0000000000000000000001", "pay_01KB0000000000000000000002", "pay_01KB0000000000000000000003"}
)

// Fill writes records of every family into s through store.Tx, in several
// transactions, at s's own clock (Tx.Now), and purges the first outbox
// record, so that the store has a purge horizon and an outbox Seq gap.
// The records are not one consistent payment history (verify would find
// mismatches): they are there to be copied.
func Fill(ctx context.Context, s store.Store) error {
	ids := PaymentIDs
	step := func(tx store.Tx, id, kind string, from, to pay.Status, v uint64, ev, note string) error {
		return tx.AppendStep(pay.Step{PaymentID: id, Source: pay.SourceSync, Kind: kind, From: from, To: to, Version: v, EventID: ev, Note: note})
	}
	// Payments, their first steps and an outbox record that will be
	// purged.
	err := s.Update(ctx, func(tx store.Tx) error {
		now := tx.Now()
		for i, id := range ids {
			p := pay.Payment{
				ID: id, OrderID: fmt.Sprintf("order-%d", i), Amount: int64(1500 + i), Currency: "EUR",
				Customer: pay.Customer{ID: "cus_1", Email: "c@example.com"}, Provider: "mock",
				Status: pay.Created, Version: 1, CreatedAt: now.Add(time.Duration(i) * time.Millisecond), UpdatedAt: now,
			}
			if i == 1 {
				p.ClientSecret, p.RedirectURL, p.ReturnURL = "cs_secret_2", "https://psp.example/3ds/2", "https://shop.example/back"
			}
			if err := tx.InsertPayment(p); err != nil {
				return err
			}
			if err := step(tx, id, pay.StepCreated, "", pay.Created, 1, "", "caf\u00e9"); err != nil {
				return err
			}
		}
		return tx.AppendOutbox(pay.OutboxRecord{ID: "evt_0", Type: "payment.processing", PaymentID: ids[0], Status: pay.Processing,
			From: pay.Created, Version: 1, OrderID: "order-0", Amount: 1500, Currency: "EUR", Provider: "mock"})
	})
	if err != nil {
		return fmt.Errorf("fill payments: %w", err)
	}
	err = s.Update(ctx, func(tx store.Tx) error {
		now := tx.Now()
		p, err := tx.Payment(ids[0])
		if err != nil {
			return err
		}
		p.Status, p.Version, p.ProviderRef, p.UpdatedAt = pay.Captured, 2, "psp_ref_1", now
		p.AmountRefunded, p.AmountRefundPending = 500, 200
		if err := tx.UpdatePayment(p, 1); err != nil {
			return err
		}
		if err := step(tx, p.ID, pay.StepTransition, pay.Created, pay.Captured, 2, "evt_psp_1", "webhook"); err != nil {
			return err
		}
		q, err := tx.Payment(ids[2])
		if err != nil {
			return err
		}
		q.Status, q.Version, q.UpdatedAt = pay.Failed, 2, now
		if err := tx.UpdatePayment(q, 1); err != nil {
			return err
		}
		// Inbox: an applied event, a deferred one, two orphans (one
		// processed, one pending) and a processed id with no event.
		for _, ev := range []pay.InboxEvent{
			{Provider: "mock", EventID: "evt_psp_1", Type: "payment.captured", PaymentID: p.ID, ProviderRef: "psp_ref_1",
				Status: pay.Captured, Amount: 1500, Currency: "EUR", OccurredAt: now.Add(-time.Second), ReceivedAt: now,
				Body: []byte("{\"id\":\"evt_psp_1\",\"data\":{\"note\":\"caf\xc3\xa9\"}}\n")},
			{Provider: "mock", EventID: "evt_psp_2", Type: "payment.failed", PaymentID: ids[1], StepKind: pay.StepFailedAttempt,
				OccurredAt: now, ReceivedAt: now, Body: []byte(`{"id":"evt_psp_2"}`)},
			{Provider: "standard", EventID: "evt_orphan_1", Type: "payment.captured", ProviderRef: "psp_unknown_1",
				Status: pay.Captured, ReceivedAt: now, Body: []byte(`{"id":"evt_orphan_1"}`)},
			{Provider: "standard", EventID: "evt_orphan_2", Type: "payment.captured", ProviderRef: "psp_unknown_2",
				Status: pay.Captured, ReceivedAt: now},
			{Provider: "standard", EventID: "evt_refund_1", Type: "payment.refund.succeeded", PaymentID: p.ID, ReceivedAt: now,
				Refund: &pay.RefundChange{ID: "re_1", ProviderRef: "psp_re_1", Amount: 500, Reason: "requested", Status: pay.RefundSucceeded}},
			{Provider: "standard", EventID: "evt_dispute_1", Type: "payment.dispute.created", PaymentID: p.ID, ReceivedAt: now,
				Dispute: &pay.DisputeChange{ID: "dp_1", Amount: 300, Currency: "EUR", Reason: "fraudulent", Status: pay.DisputeNeedsResponse,
					EvidenceDueBy: now.Add(7 * 24 * time.Hour)}},
		} {
			if _, err := tx.PutInbox(ev); err != nil {
				return err
			}
		}
		for _, ev := range [][2]string{{"mock", "evt_psp_1"}, {"standard", "evt_orphan_1"}, {"stripe", "evt_never_stored"}} {
			if err := tx.MarkProcessed(ev[0], ev[1]); err != nil {
				return err
			}
		}
		if err := tx.DeferInbox("mock", "evt_psp_2", now.Add(time.Minute), "payment busy"); err != nil {
			return err
		}
		// Leases: one in force, one released, one taken twice.
		if _, err := tx.AcquireLease(ids[1], "sweeper/a1", 30*time.Second); err != nil {
			return err
		}
		l, err := tx.AcquireLease(ids[2], "review/b2", 30*time.Second)
		if err != nil {
			return err
		}
		if err := tx.ReleaseLease(ids[2], l.Token); err != nil {
			return err
		}
		if l, err = tx.AcquireLease(ids[2], "review/b2", 30*time.Second); err != nil {
			return err
		}
		if err := tx.ReleaseLease(ids[2], l.Token); err != nil {
			return err
		}
		// Outbox, fanned out up to the second record, and deliveries.
		for i, typ := range []string{"payment.captured", "payment.failed", "payment.refund.succeeded"} {
			pid := []string{ids[0], ids[2], ids[0]}[i]
			r := pay.OutboxRecord{
				ID: fmt.Sprintf("evt_%d", i+1), Type: typ, PaymentID: pid, Status: pay.Captured, From: pay.Created,
				Version: 2, OrderID: "order-0", Amount: 1500, Currency: "EUR", Customer: pay.Customer{ID: "cus_1", Email: "c@example.com"},
				Provider: "mock", CreatedAt: now.Add(time.Second),
			}
			if i == 2 {
				r.RefundID, r.ObjectAmount, r.ObjectStatus, r.AmountRefunded = "re_1", 500, string(pay.RefundSucceeded), 500
			}
			if err := tx.AppendOutbox(r); err != nil {
				return err
			}
		}
		if err := tx.SetRippleCursor(3); err != nil {
			return err
		}
		for i, eff := range []string{pay.EffectLoyalty, pay.EffectRetention, pay.EffectWebhook, pay.EffectReceipt} {
			d := pay.Delivery{
				ID: fmt.Sprintf("dlv_%d", i+1), Effect: eff, EventID: "evt_1", EventType: "payment.captured", EventSeq: 2,
				EventAt: now.Add(time.Second), PaymentID: ids[0], State: pay.DeliveryPending, NextAttemptAt: now.Add(time.Duration(i) * time.Second),
				CreatedAt: now, UpdatedAt: now,
			}
			if eff == pay.EffectWebhook {
				d.Endpoint = "ep_1"
			}
			if err := tx.InsertDelivery(d); err != nil {
				return err
			}
		}
		if err := tx.AppendLedger([]pay.LedgerEntry{
			{PaymentID: ids[0], EventID: "evt_1", Account: pay.AccountPSPReceivable, Currency: "EUR", Amount: 1500},
			{PaymentID: ids[0], EventID: "evt_1", Account: pay.AccountMerchantRevenue, Currency: "EUR", Amount: -1500},
		}); err != nil {
			return err
		}
		if err := tx.AppendLedger([]pay.LedgerEntry{
			{PaymentID: ids[0], EventID: "evt_9", Account: pay.AccountPSPReceivable, Currency: "USD", Amount: 7},
			{PaymentID: ids[0], EventID: "evt_9", Account: pay.AccountMerchantRevenue, Currency: "USD", Amount: -7},
		}); err != nil {
			return err
		}
		for _, item := range []pay.ReviewItem{
			{ID: ids[1], PaymentID: ids[1], Reason: pay.ReasonUnresolved, Provider: "mock", ProviderRef: "psp_ref_2",
				EventID: "evt_psp_2", Observed: pay.Failed, Note: "the PSP does not know it", LastPSP: "not found"},
			{ID: "orphan_standard_evt_orphan_1", Reason: pay.ReasonOrphan, Provider: "standard", ProviderRef: "psp_unknown_1",
				EventID: "evt_orphan_1", Observed: pay.Captured},
		} {
			if err := tx.PutReview(item); err != nil {
				return err
			}
		}
		for i, k := range []string{"create:k1", "refund:k2"} {
			r := pay.IdemRecord{Key: k, Fingerprint: "f0e1d2c3", State: pay.IdemDone, PaymentID: ids[0], StatusCode: 201,
				Body: []byte(`{"id":"` + ids[0] + `"}`), ExpiresAt: now.Add(24 * time.Hour)}
			if i == 1 {
				r.State, r.Owner, r.LockedUntil, r.StatusCode, r.Body = pay.IdemInFlight, "proc-1", now.Add(time.Minute), 0, nil
			}
			if err := tx.PutIdemKey(r); err != nil {
				return err
			}
		}
		if err := tx.PutCustomerAccount(store.CustomerAccount{ID: "cus_1", Points: 15, LastVisitAt: now}); err != nil {
			return err
		}
		if err := tx.PutCustomerAccount(store.CustomerAccount{ID: "cus_2", Points: -3}); err != nil {
			return err
		}
		for i, k := range []string{"loyalty:evt_1", "retention:evt_1", "payment_receipt:" + ids[0]} {
			if err := tx.PutEffect(store.EffectRecord{Key: k, DeliveryID: fmt.Sprintf("dlv_%d", i+1), Points: int64(15 * (1 - i))}); err != nil {
				return err
			}
		}
		if err := tx.PutWebhookEndpoint(store.WebhookEndpoint{ID: "ep_1", URL: "https://merchant.example/hook", FailingSince: now, LastSuccessAt: now.Add(-time.Hour)}); err != nil {
			return err
		}
		if err := tx.PutWebhookEndpoint(store.WebhookEndpoint{ID: "ep_2", URL: "https://gone.example/hook", Disabled: true, DisabledAt: now, DisabledReason: "HTTP 410"}); err != nil {
			return err
		}
		if err := tx.PutPSPAnswer(pay.PSPAnswer{PaymentID: ids[2], Provider: "mock", Status: pay.Failed, Found: true, Raw: "status=failed"}); err != nil {
			return err
		}
		if err := tx.PutPSPCharge(store.PSPCharge{Key: "charge-" + ids[0], PaymentID: ids[0], ProviderRef: "psp_ref_1", Amount: 1500,
			Currency: "EUR", Status: pay.Captured, ClientSecret: "cs_charge_1", RedirectURL: "https://psp.example/r/1", Calls: 2,
			RefundKey: "refund-re_1", Refunds: 1, AmountRefunded: 500}); err != nil {
			return err
		}
		// Refunds of every status, and disputes with and without a
		// deadline.
		for i, r := range []pay.Refund{
			{ID: "re_1", Amount: 500, Reason: "requested", Status: pay.RefundSucceeded, ProviderRef: "psp_re_1", IdemKey: "refund:k2", EventID: "evt_3"},
			{ID: "re_2", Amount: 200, Status: pay.RefundPending},
			{ID: "re_3", Amount: 100, Reason: "duplicate", Status: pay.RefundFailed, ProviderRef: "psp_re_3"},
		} {
			r.PaymentID, r.Provider, r.Currency = ids[0], "mock", "EUR"
			r.CreatedAt, r.UpdatedAt = now.Add(time.Duration(i)*time.Millisecond), now.Add(time.Duration(i)*time.Second)
			if err := tx.InsertRefund(r); err != nil {
				return err
			}
		}
		for _, d := range []pay.Dispute{
			{Provider: "standard", ID: "dp_1", Amount: 300, Reason: "fraudulent", Status: pay.DisputeNeedsResponse, EvidenceDueBy: now.Add(7 * 24 * time.Hour)},
			{Provider: "mock", ID: "dp_2", Amount: 1500, Status: pay.DisputeLost},
		} {
			d.PaymentID, d.Currency, d.CreatedAt, d.UpdatedAt = ids[0], "EUR", now, now.Add(time.Second)
			if err := tx.PutDispute(d); err != nil {
				return err
			}
		}
		// A settlement of a payment and one of none, and a run.
		for _, st := range []pay.Settlement{
			{Provider: "stripe", ID: "txn_1", Kind: pay.SettleCharge, PaymentID: ids[0], ProviderRef: "psp_ref_1", Amount: 1500, Fee: 45, PayoutID: "po_1"},
			{Provider: "stripe", ID: "txn_fee", Kind: pay.SettleFee, Fee: 250},
		} {
			st.Currency, st.RunID, st.CreatedAt, st.UpdatedAt = "EUR", "rr_1", now, now.Add(time.Second)
			if err := tx.PutSettlement(st); err != nil {
				return err
			}
		}
		if err := tx.PutReconRun(pay.ReconRun{ID: "rr_1", Provider: "stripe", Source: "import:stripe:report.csv", Lines: 3, Matched: 2,
			MissingLocally: 1, Posted: 2, CreatedAt: now, Items: []pay.ReconItem{{Kind: pay.ReconMissingLocally, Line: 4, LineID: "txn_x",
				ProviderRef: "pi_x", Amount: 700, Currency: "EUR", Note: "no payment"}}}); err != nil {
			return err
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("fill records: %w", err)
	}
	// Deliveries finish; the first outbox record, which has none, is
	// purged.
	return s.Update(ctx, func(tx store.Tx) error {
		for _, u := range []struct {
			id, state, note, lastErr string
			attempts                 int
		}{{"dlv_1", pay.DeliveryDone, "credited 15 points", "", 1}, {"dlv_3", pay.DeliveryDead, "", "HTTP 500", 15}} {
			d, err := tx.Delivery(u.id)
			if err != nil {
				return err
			}
			d.State, d.Attempts, d.Note, d.LastError = u.state, u.attempts, u.note, u.lastErr
			if err := tx.UpdateDelivery(d); err != nil {
				return err
			}
		}
		n, err := tx.PurgeOutbox(tx.Now().Add(time.Hour), 1)
		if err == nil && n != 1 {
			err = fmt.Errorf("purged %d outbox records, want 1", n)
		}
		return err
	})
}

// Records is an export sink (store's ExportSink) that keeps everything it
// is handed, in order.
type Records struct {
	Source        uint64
	Payments      []pay.Payment
	Steps         []pay.Step
	Inbox         []pay.InboxEvent
	ProcessedIDs  []ProcessedID
	Leases        []pay.Lease
	OutboxRecords []pay.OutboxRecord
	Deliveries    []pay.Delivery
	Ledger        []pay.LedgerEntry
	Balances      []pay.Balance
	ReviewItems   []pay.ReviewItem
	IdemKeys      []pay.IdemRecord
	Customers     []store.CustomerAccount
	Effects       []store.EffectRecord
	Endpoints     []store.WebhookEndpoint
	PSPAnswers    []pay.PSPAnswer
	PSPCharges    []store.PSPCharge
	Refunds       []pay.Refund
	Disputes      []pay.Dispute
	Settlements   []pay.Settlement
	ReconRuns     []pay.ReconRun
	Single        *Counters // the counters; nil until the export reached them
}

// ProcessedID is a processed event id and its time.
type ProcessedID struct {
	Provider, EventID string
	At                time.Time
}

// Counters are an export's single values.
type Counters struct {
	OutboxSeq, LedgerSeq, RippleCursor uint64
	OutboxHorizon                      time.Time
}

// Begin keeps the source.
func (r *Records) Begin(_ context.Context, source uint64) error { r.Source = source; return nil }

// Payment keeps p.
func (r *Records) Payment(p pay.Payment) error { r.Payments = append(r.Payments, p); return nil }

// Step keeps s.
func (r *Records) Step(s pay.Step) error { r.Steps = append(r.Steps, s); return nil }

// InboxEvent keeps e.
func (r *Records) InboxEvent(e pay.InboxEvent) error { r.Inbox = append(r.Inbox, e); return nil }

// Processed keeps a processed id.
func (r *Records) Processed(provider, eventID string, at time.Time) error {
	r.ProcessedIDs = append(r.ProcessedIDs, ProcessedID{provider, eventID, at})
	return nil
}

// Lease keeps l.
func (r *Records) Lease(l pay.Lease) error { r.Leases = append(r.Leases, l); return nil }

// Outbox keeps o.
func (r *Records) Outbox(o pay.OutboxRecord) error {
	r.OutboxRecords = append(r.OutboxRecords, o)
	return nil
}

// Delivery keeps d.
func (r *Records) Delivery(d pay.Delivery) error { r.Deliveries = append(r.Deliveries, d); return nil }

// LedgerEntry keeps e.
func (r *Records) LedgerEntry(e pay.LedgerEntry) error { r.Ledger = append(r.Ledger, e); return nil }

// Balance keeps b.
func (r *Records) Balance(b pay.Balance) error { r.Balances = append(r.Balances, b); return nil }

// Review keeps i.
func (r *Records) Review(i pay.ReviewItem) error {
	r.ReviewItems = append(r.ReviewItems, i)
	return nil
}

// IdemKey keeps k.
func (r *Records) IdemKey(k pay.IdemRecord) error { r.IdemKeys = append(r.IdemKeys, k); return nil }

// Customer keeps c.
func (r *Records) Customer(c store.CustomerAccount) error {
	r.Customers = append(r.Customers, c)
	return nil
}

// Effect keeps e.
func (r *Records) Effect(e store.EffectRecord) error { r.Effects = append(r.Effects, e); return nil }

// Endpoint keeps e.
func (r *Records) Endpoint(e store.WebhookEndpoint) error {
	r.Endpoints = append(r.Endpoints, e)
	return nil
}

// PSPAnswer keeps a.
func (r *Records) PSPAnswer(a pay.PSPAnswer) error {
	r.PSPAnswers = append(r.PSPAnswers, a)
	return nil
}

// PSPCharge keeps c.
func (r *Records) PSPCharge(c store.PSPCharge) error {
	r.PSPCharges = append(r.PSPCharges, c)
	return nil
}

// Refund keeps f.
func (r *Records) Refund(f pay.Refund) error { r.Refunds = append(r.Refunds, f); return nil }

// Dispute keeps d.
func (r *Records) Dispute(d pay.Dispute) error { r.Disputes = append(r.Disputes, d); return nil }

// Settlement keeps s.
func (r *Records) Settlement(s pay.Settlement) error {
	r.Settlements = append(r.Settlements, s)
	return nil
}

// ReconRun keeps x.
func (r *Records) ReconRun(x pay.ReconRun) error { r.ReconRuns = append(r.ReconRuns, x); return nil }

// Counters keeps the single values.
func (r *Records) Counters(outboxSeq, ledgerSeq, rippleCursor uint64, outboxHorizon time.Time) error {
	r.Single = &Counters{outboxSeq, ledgerSeq, rippleCursor, outboxHorizon}
	return nil
}

// Len is the number of records kept (the counters aside).
func (r *Records) Len() int {
	return len(r.Payments) + len(r.Steps) + len(r.Inbox) + len(r.ProcessedIDs) + len(r.Leases) + len(r.OutboxRecords) +
		len(r.Deliveries) + len(r.Ledger) + len(r.Balances) + len(r.ReviewItems) + len(r.IdemKeys) + len(r.Customers) +
		len(r.Effects) + len(r.Endpoints) + len(r.PSPAnswers) + len(r.PSPCharges) + len(r.Refunds) + len(r.Disputes) +
		len(r.Settlements) + len(r.ReconRuns)
}

// Keys are the keys of the records ReadDump fetches one by one.
func (r *Records) Keys() storetest.Keys {
	var k storetest.Keys
	for _, x := range r.IdemKeys {
		k.IdemKeys = append(k.IdemKeys, x.Key)
	}
	for _, x := range r.Customers {
		k.Customers = append(k.Customers, x.ID)
	}
	for _, x := range r.Effects {
		k.Effects = append(k.Effects, x.Key)
	}
	for _, x := range r.Endpoints {
		k.Endpoints = append(k.Endpoints, x.ID)
	}
	return k
}

// Extra is what ReadExtra reads.
type Extra struct {
	Inbox      map[string]pay.InboxEvent  `json:"inbox"`     // by provider/event id
	Processed  map[string]bool            `json:"processed"` // by provider/event id
	Leases     map[string]pay.Lease       `json:"leases"`
	PSPAnswers map[string]pay.PSPAnswer   `json:"psp_answers"`
	PSPCharges map[string]store.PSPCharge `json:"psp_charges"`
	Ledger     []pay.LedgerEntry          `json:"ledger"`
	Outbox     []pay.OutboxRecord         `json:"outbox"`
	Refunds    map[string][]pay.Refund    `json:"refunds"`  // by payment
	Disputes   map[string][]pay.Dispute   `json:"disputes"` // by payment
}

// ReadExtra reads from s, through store.Tx and by the keys of the export r,
// what storetest.ReadDump does not: every inbox event (orphans included),
// whether every processed id is processed, every lease, PSP answer and
// mock charge, every payment's refunds and disputes, the whole journal and
// outbox, in one read transaction.
func ReadExtra(ctx context.Context, s store.Store, r *Records) (Extra, error) {
	x := Extra{Inbox: map[string]pay.InboxEvent{}, Processed: map[string]bool{}, Leases: map[string]pay.Lease{},
		PSPAnswers: map[string]pay.PSPAnswer{}, PSPCharges: map[string]store.PSPCharge{},
		Refunds: map[string][]pay.Refund{}, Disputes: map[string][]pay.Dispute{}}
	err := s.View(ctx, func(tx store.Tx) error {
		var errs []error
		for _, e := range r.Inbox {
			ev, err := tx.InboxEvent(e.Provider, e.EventID)
			errs = append(errs, err)
			x.Inbox[e.Provider+"/"+e.EventID] = ev
		}
		for _, p := range r.ProcessedIDs {
			done, err := tx.IsProcessed(p.Provider, p.EventID)
			errs = append(errs, err)
			x.Processed[p.Provider+"/"+p.EventID] = done
		}
		for _, l := range r.Leases {
			got, err := tx.Lease(l.PaymentID)
			errs = append(errs, err)
			x.Leases[l.PaymentID] = got
		}
		for _, a := range r.PSPAnswers {
			got, err := tx.PSPAnswer(a.PaymentID)
			errs = append(errs, err)
			x.PSPAnswers[a.PaymentID] = got
		}
		for _, c := range r.PSPCharges {
			got, err := tx.PSPCharge(c.Key)
			errs = append(errs, err)
			x.PSPCharges[c.Key] = got
		}
		for _, p := range r.Payments {
			rs, err := tx.RefundsForPayment(p.ID)
			errs = append(errs, err)
			x.Refunds[p.ID] = rs
			ds, err := tx.DisputesForPayment(p.ID)
			errs = append(errs, err)
			x.Disputes[p.ID] = ds
		}
		var err error
		if x.Ledger, err = tx.LedgerEntries(0, 1<<30); err != nil {
			errs = append(errs, fmt.Errorf("ledger: %w", err))
		}
		if x.Outbox, err = tx.OutboxAfter(0, 1<<30); err != nil {
			errs = append(errs, fmt.Errorf("outbox: %w", err))
		}
		return errors.Join(errs...)
	})
	return x, err
}

// Compare reads both stores through store.Tx, storetest.ReadDump and
// ReadExtra by the keys of the export r, and returns an error showing
// both if they differ. An empty list and no list are the same (the
// backends return either for a payment without inbox events).
func Compare(ctx context.Context, want, got store.Store, r *Records) error {
	for _, read := range []func(store.Store) (any, error){
		func(s store.Store) (any, error) { return storetest.ReadDump(ctx, s, r.Keys()) },
		func(s store.Store) (any, error) { return ReadExtra(ctx, s, r) },
	} {
		w, err := read(want)
		if err != nil {
			return err
		}
		g, err := read(got)
		if err != nil {
			return err
		}
		wb, gb := normalized(w), normalized(g)
		if wb != gb {
			return fmt.Errorf("the stores differ:\n got  %s\n want %s", gb, wb)
		}
	}
	return nil
}

// normalized prints v as indented JSON with empty lists as null.
func normalized(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	var generic any
	if err := json.Unmarshal(b, &generic); err != nil {
		return err.Error()
	}
	var walk func(any) any
	walk = func(v any) any {
		switch v := v.(type) {
		case []any:
			if len(v) == 0 {
				return nil
			}
			for i := range v {
				v[i] = walk(v[i])
			}
		case map[string]any:
			for k := range v {
				v[k] = walk(v[k])
			}
		}
		return v
	}
	b, _ = json.MarshalIndent(walk(generic), "", " ")
	return string(b)
}
