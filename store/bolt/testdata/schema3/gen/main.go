// Command gen writes store/testdata/schema3/paystate.db, a database of
// schema 3 (webhook bodies stored as they came, every processed id in
// processed), and beside it dump.json, what that version's store read
// back from it (storetest.ReadDump), money.json, the refunds, disputes and
// mock PSP charges it read back (which the dump does not hold), and
// processed.json, the processed ids with their times as its Export gave
// them. It fills the file as the schema 2 generator does, then adds a
// Stripe event's body (testdata/stripe/payment_intent.succeeded.json,
// processed) and a processed id whose event is not in the inbox. It lives
// under testdata, which the go command leaves out of ./..., because it
// must be built against the store of schema 3: commit 08850d2. (Its
// refund, unlike schema 2's, has a provider reference: an entry of
// refunds_by_ref.)
//
//	git worktree add /tmp/schema3 08850d2
//	cp -r store/bolt/testdata/schema3 /tmp/schema3/store/testdata/
//	(cd /tmp/schema3 && go run ./store/testdata/schema3/gen -out "$PWD/store/testdata/schema3")
//
// TestMigrate_Schema3 opens a copy with the current store, which migrates
// it, and compares what it reads with these files.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/paystate/paystate/internal/testkit/filltest"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
	"github.com/paystate/paystate/store/storetest"
)

func main() {
	out := flag.String("out", ".", "directory for paystate.db and dump.json")
	flag.Parse()
	if err := run(*out); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	path := filepath.Join(dir, "paystate.db")
	_ = os.Remove(path)
	clock := storetest.NewClock(time.Date(2026, 11, 30, 12, 0, 0, 123456789, time.UTC))
	db, err := store.Open(path, &store.Options{Now: clock.Now})
	if err != nil {
		return err
	}
	ctx := context.Background()
	keys, err := Fill(ctx, db, clock)
	if err != nil {
		return err
	}
	d, err := storetest.ReadDump(ctx, db, keys)
	if err != nil {
		return err
	}
	m, err := ReadMoney(ctx, db)
	if err != nil {
		return err
	}
	var x filltest.Records
	if err := db.Export(ctx, &x); err != nil {
		return err
	}
	sort.Slice(x.ProcessedIDs, func(i, j int) bool { return x.ProcessedIDs[i].EventID < x.ProcessedIDs[j].EventID })
	if err := db.Close(); err != nil {
		return err
	}
	for name, v := range map[string]any{"dump.json": d, "money.json": m, "processed.json": x.ProcessedIDs} {
		data, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, name), append(data, '\n'), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// Money is what the schema 3 file holds of refunds, disputes and the mock
// PSP's charges, as the store reads them back.
type Money struct {
	Refunds  []pay.Refund    `json:"refunds"`
	Disputes []pay.Dispute   `json:"disputes"`
	Charges  []pay.PSPCharge `json:"charges"`
}

// Payment ids, refund id, dispute and charge keys of the file.
const (
	refundID  = "re_01KB0000000000000000000001"
	disputeID = "dp_1"
	chargeKey = "charge-pay_01KB0000000000000000000001"
	refundKey = "refund-re_01KB0000000000000000000001"
)

// ReadMoney reads the refunds, disputes and charges that Fill wrote.
func ReadMoney(ctx context.Context, s pay.Store) (Money, error) {
	var m Money
	err := s.View(ctx, func(tx pay.Tx) error {
		var err error
		if m.Refunds, err = tx.RefundsForPayment("pay_01KB0000000000000000000001"); err != nil {
			return err
		}
		if m.Disputes, err = tx.DisputesForPayment("pay_01KB0000000000000000000001"); err != nil {
			return err
		}
		for _, k := range []string{chargeKey, refundKey} {
			c, err := tx.PSPCharge(k)
			if err != nil {
				return err
			}
			m.Charges = append(m.Charges, c)
		}
		return nil
	})
	return m, err
}

// Fill writes records of every family, through pay.Tx only, and returns
// the keys of those no Tx method lists.
func Fill(ctx context.Context, s pay.Store, clock *storetest.Clock) (storetest.Keys, error) {
	t0 := clock.Now()
	ids := []string{"pay_01KB0000000000000000000001", "pay_01KB0000000000000000000002", "pay_01KB0000000000000000000003"}
	body := []byte("{\"id\":\"evt_psp_1\",\"type\":\"payment.captured\",\"data\":{\"amount\":1500,\"note\":\"caf\xc3\xa9 \\u00e9\"}}\n")
	keys := storetest.Keys{
		IdemKeys:  []string{"create:k1", "refund:k2", "create:k3"},
		Customers: []string{"cus_1"},
		Effects:   []string{"loyalty:evt_01KB0000000000000000000001", "retention:evt_01KB0000000000000000000001", "receipt:evt_1"},
		Endpoints: []string{"ep_1"},
	}
	step := func(tx pay.Tx, id, kind string, from, to pay.Status, v uint64, ev, note string) error {
		return tx.AppendStep(pay.Step{PaymentID: id, Source: pay.SourceSync, Kind: kind, From: from, To: to, Version: v, EventID: ev, Note: note})
	}
	err := s.Update(ctx, func(tx pay.Tx) error {
		for i, id := range ids {
			p := pay.Payment{
				ID: id, OrderID: fmt.Sprintf("order-%d", i), Amount: int64(1500 + i), Currency: "EUR",
				Customer: pay.Customer{ID: "cus_1", Email: "c@example.com"}, Provider: "mock",
				Status: pay.Created, Version: 1, CreatedAt: t0, UpdatedAt: t0,
			}
			if i == 1 {
				p.ClientSecret, p.RedirectURL, p.ReturnURL = "cs_secret_2", "https://psp.example/3ds/2", "https://shop.example/back"
			}
			if err := tx.InsertPayment(p); err != nil {
				return err
			}
			if err := step(tx, id, pay.StepCreated, "", pay.Created, 1, "", ""); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return keys, err
	}
	clock.Add(1500 * time.Millisecond)
	err = s.Update(ctx, func(tx pay.Tx) error {
		now := tx.Now()
		p, err := tx.Payment(ids[0])
		if err != nil {
			return err
		}
		prev := p.Version
		p.Status, p.Version, p.ProviderRef, p.UpdatedAt = pay.Captured, prev+1, "psp_ref_1", now
		if err := tx.UpdatePayment(p, prev); err != nil {
			return err
		}
		if err := step(tx, p.ID, pay.StepTransition, pay.Created, pay.Captured, p.Version, "evt_psp_1", "webhook"); err != nil {
			return err
		}
		q, err := tx.Payment(ids[2])
		if err != nil {
			return err
		}
		q.Status, q.Version, q.UpdatedAt = pay.Failed, q.Version+1, now
		if err := tx.UpdatePayment(q, 1); err != nil {
			return err
		}
		if _, err := tx.PutInbox(pay.InboxEvent{
			Provider: "mock", EventID: "evt_psp_1", Type: "payment.captured", PaymentID: p.ID, ProviderRef: "psp_ref_1",
			Status: pay.Captured, Amount: 1500, Currency: "EUR", OccurredAt: now.Add(-time.Second), ReceivedAt: now, Body: body,
		}); err != nil {
			return err
		}
		if err := tx.MarkProcessed("mock", "evt_psp_1"); err != nil {
			return err
		}
		if _, err := tx.PutInbox(pay.InboxEvent{
			Provider: "mock", EventID: "evt_psp_2", Type: "payment.failed", PaymentID: ids[1], StepKind: pay.StepFailedAttempt,
			OccurredAt: now, ReceivedAt: now, Body: []byte(`{"id":"evt_psp_2"}`),
		}); err != nil {
			return err
		}
		if err := tx.DeferInbox("mock", "evt_psp_2", now.Add(time.Minute), "payment busy"); err != nil {
			return err
		}
		if _, err := tx.AcquireLease(ids[1], "worker-a", 30*time.Second); err != nil {
			return err
		}
		l, err := tx.AcquireLease(ids[2], "worker-b", 30*time.Second)
		if err != nil {
			return err
		}
		if err := tx.ReleaseLease(ids[2], l.Token); err != nil {
			return err
		}
		for i, typ := range []string{"payment.captured", "payment.failed"} {
			pid := []string{ids[0], ids[2]}[i]
			if err := tx.AppendOutbox(pay.OutboxRecord{
				ID: fmt.Sprintf("evt_01KB00000000000000000000%02d", i+1), Type: typ, PaymentID: pid, Status: pay.Captured, From: pay.Created,
				Version: 2, OrderID: "order-0", Amount: 1500, Currency: "EUR", Customer: pay.Customer{ID: "cus_1", Email: "c@example.com"},
				Provider: "mock", CreatedAt: now,
			}); err != nil {
				return err
			}
		}
		if err := tx.SetRippleCursor(1); err != nil {
			return err
		}
		for i, eff := range []string{pay.EffectLoyalty, pay.EffectRetention, pay.EffectWebhook} {
			d := pay.Delivery{
				ID: fmt.Sprintf("dlv_01KB00000000000000000000%02d", i+1), Effect: eff, EventID: "evt_01KB0000000000000000000001", EventType: "payment.captured", EventSeq: 1,
				EventAt: now, PaymentID: ids[0], State: pay.DeliveryPending, NextAttemptAt: now, CreatedAt: now, UpdatedAt: now,
			}
			if eff == pay.EffectWebhook {
				d.Endpoint = "ep_1"
			}
			if err := tx.InsertDelivery(d); err != nil {
				return err
			}
		}
		if err := tx.AppendLedger([]pay.LedgerEntry{
			{PaymentID: ids[0], EventID: "evt_01KB0000000000000000000001", Account: pay.AccountPSPReceivable, Currency: "EUR", Amount: 1500, At: now},
			{PaymentID: ids[0], EventID: "evt_01KB0000000000000000000001", Account: pay.AccountMerchantRevenue, Currency: "EUR", Amount: -1500, At: now},
		}); err != nil {
			return err
		}
		if err := tx.PutReview(pay.ReviewItem{
			ID: ids[1], PaymentID: ids[1], Reason: pay.ReasonUnresolved, Provider: "mock", ProviderRef: "psp_ref_2",
			EventID: "evt_psp_2", Observed: pay.Failed, Note: "the PSP does not know it", LastPSP: "not found", CreatedAt: now,
		}); err != nil {
			return err
		}
		for i, k := range keys.IdemKeys[:2] {
			r := pay.IdemRecord{Key: k, Fingerprint: "f0e1d2", State: pay.IdemDone, PaymentID: ids[0], StatusCode: 201,
				CreatedAt: now, ExpiresAt: now.Add(24 * time.Hour)}
			if i == 1 {
				r.State, r.Owner, r.LockedUntil, r.StatusCode = pay.IdemInFlight, "proc-1", now.Add(time.Minute), 0
				r.Body = []byte(`{"error":{"code":"conflict"}}`)
			}
			if err := tx.PutIdemKey(r); err != nil {
				return err
			}
		}
		if err := tx.PutCustomerAccount(pay.CustomerAccount{ID: "cus_1", Points: 15, LastVisitAt: now}); err != nil {
			return err
		}
		for i, k := range keys.Effects {
			if err := tx.PutEffect(pay.EffectRecord{Key: k, DeliveryID: fmt.Sprintf("dlv_01KB00000000000000000000%02d", i+1), Points: int64(15 * (1 - i)), At: now}); err != nil {
				return err
			}
		}
		if err := tx.PutWebhookEndpoint(pay.WebhookEndpoint{ID: "ep_1", URL: "https://merchant.example/hook", FailingSince: now, LastSuccessAt: now.Add(-time.Hour)}); err != nil {
			return err
		}
		return tx.PutPSPAnswer(pay.PSPAnswer{PaymentID: ids[2], Provider: "mock", Status: pay.Failed, Found: true, Raw: "status=failed", At: now})
	})
	if err != nil {
		return keys, err
	}
	clock.Add(time.Second)
	err = s.Update(ctx, func(tx pay.Tx) error {
		now := tx.Now()
		if err := tx.InsertRefund(pay.Refund{
			ID: refundID, PaymentID: ids[0], Provider: "mock", ProviderRef: "mock_re_1", Amount: 500, Currency: "EUR", Reason: "requested_by_customer",
			Status: pay.RefundPending, IdemKey: "refund:k2", CreatedAt: now, UpdatedAt: now,
		}); err != nil {
			return err
		}
		if err := tx.PutDispute(pay.Dispute{
			Provider: "mock", ID: disputeID, PaymentID: ids[0], Amount: 1000, Currency: "EUR", Reason: "fraudulent",
			Status: pay.DisputeNeedsResponse, EvidenceDueBy: now.Add(7 * 24 * time.Hour), CreatedAt: now, UpdatedAt: now,
		}); err != nil {
			return err
		}
		if err := tx.PutPSPCharge(pay.PSPCharge{
			Key: chargeKey, PaymentID: ids[0], ProviderRef: "psp_ref_1", Amount: 1500, Currency: "EUR", Status: pay.Captured,
			RefundKey: refundKey, AmountRefunded: 500, Calls: 1, Refunds: 1, CreatedAt: now,
		}); err != nil {
			return err
		}
		if err := tx.PutPSPCharge(pay.PSPCharge{
			Key: refundKey, PaymentID: ids[0], Amount: 500, Currency: "EUR", Status: pay.Refunded, CreatedAt: now,
		}); err != nil {
			return err
		}
		return tx.PutIdemKey(pay.IdemRecord{Key: "create:k3", Fingerprint: "a1b2", State: pay.IdemInFlight, Owner: "00419e716f52",
			LockedUntil: now.Add(time.Minute), PaymentID: ids[1], CreatedAt: now, ExpiresAt: now.Add(24 * time.Hour)})
	})
	if err != nil {
		return keys, err
	}
	return keys, s.Update(ctx, func(tx pay.Tx) error {
		d, err := tx.Delivery("dlv_01KB0000000000000000000001")
		if err != nil {
			return err
		}
		d.State, d.Attempts, d.Note, d.UpdatedAt = pay.DeliveryDone, 1, "credited 15 points", tx.Now()
		if err := tx.UpdateDelivery(d); err != nil {
			return err
		}
		d, err = tx.Delivery("dlv_01KB0000000000000000000003")
		if err != nil {
			return err
		}
		d.State, d.Attempts, d.LastError, d.UpdatedAt = pay.DeliveryDead, 15, "HTTP 500", tx.Now()
		if err := tx.UpdateDelivery(d); err != nil {
			return err
		}
		stripeBody, err := os.ReadFile(filepath.Join("testdata", "stripe", "payment_intent.succeeded.json"))
		if err != nil {
			return err
		}
		now := tx.Now()
		if _, err := tx.PutInbox(pay.InboxEvent{
			Provider: "stripe", EventID: "evt_3QkBA6J2eZvKYlo21aHn0sXb", Type: "payment_intent.succeeded", PaymentID: ids[0],
			ProviderRef: "psp_ref_1", Status: pay.Captured, Amount: 1500, Currency: "EUR", OccurredAt: now, ReceivedAt: now, Body: stripeBody,
		}); err != nil {
			return err
		}
		if err := tx.MarkProcessed("stripe", "evt_3QkBA6J2eZvKYlo21aHn0sXb"); err != nil {
			return err
		}
		return tx.MarkProcessed("mock", "evt_psp_never_stored")
	})
}
