// Command gen writes store/testdata/schema1/paystate.db, a database of
// schema 1 (JSON values) holding every record family, and dump.json, what
// that version's store read back from it (storetest.ReadDump). It lives
// under testdata, which the go command leaves out of ./..., because it must
// be built against the store of schema 1: commit 5db086a, with
// store/storetest/dump.go of the migration's commit copied in.
//
//	git archive 5db086a | tar -x -C /tmp/schema1
//	cp store/storetest/dump.go /tmp/schema1/store/storetest/
//	cp -r store/bolt/testdata/schema1 /tmp/schema1/store/testdata/
//	(cd /tmp/schema1 && go run ./store/testdata/schema1/gen -out "$PWD/store/testdata/schema1")
//
// TestMigrate_Schema1 opens a copy with the current store, which migrates
// it, and compares its dump with dump.json.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

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
	if err := db.Close(); err != nil {
		return err
	}
	data, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "dump.json"), append(data, '\n'), 0o644)
}

// Fill writes records of every family, through pay.Tx only, and returns
// the keys of those no Tx method lists.
func Fill(ctx context.Context, s pay.Store, clock *storetest.Clock) (storetest.Keys, error) {
	t0 := clock.Now()
	ids := []string{"pay_01KB0000000000000000000001", "pay_01KB0000000000000000000002", "pay_01KB0000000000000000000003"}
	body := []byte("{\"id\":\"evt_psp_1\",\"type\":\"payment.captured\",\"data\":{\"amount\":1500,\"note\":\"caf\xc3\xa9 \\u00e9\"}}\n")
	keys := storetest.Keys{
		IdemKeys:  []string{"create:k1", "refund:k2"},
		Customers: []string{"cus_1"},
		Effects:   []string{"loyalty:evt_1", "retention:evt_1"},
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
				ID: fmt.Sprintf("evt_%d", i+1), Type: typ, PaymentID: pid, Status: pay.Captured, From: pay.Created,
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
				ID: fmt.Sprintf("dlv_%d", i+1), Effect: eff, EventID: "evt_1", EventType: "payment.captured", EventSeq: 1,
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
			{PaymentID: ids[0], EventID: "evt_1", Account: pay.AccountPSPReceivable, Currency: "EUR", Amount: 1500, At: now},
			{PaymentID: ids[0], EventID: "evt_1", Account: pay.AccountMerchantRevenue, Currency: "EUR", Amount: -1500, At: now},
		}); err != nil {
			return err
		}
		if err := tx.PutReview(pay.ReviewItem{
			ID: ids[1], PaymentID: ids[1], Reason: pay.ReasonUnresolved, Provider: "mock", ProviderRef: "psp_ref_2",
			EventID: "evt_psp_2", Observed: pay.Failed, Note: "the PSP does not know it", LastPSP: "not found", CreatedAt: now,
		}); err != nil {
			return err
		}
		for i, k := range keys.IdemKeys {
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
			if err := tx.PutEffect(pay.EffectRecord{Key: k, DeliveryID: fmt.Sprintf("dlv_%d", i+1), Points: int64(15 * (1 - i)), At: now}); err != nil {
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
	return keys, s.Update(ctx, func(tx pay.Tx) error {
		d, err := tx.Delivery("dlv_1")
		if err != nil {
			return err
		}
		d.State, d.Attempts, d.Note, d.UpdatedAt = pay.DeliveryDone, 1, "credited 15 points", tx.Now()
		if err := tx.UpdateDelivery(d); err != nil {
			return err
		}
		d, err = tx.Delivery("dlv_3")
		if err != nil {
			return err
		}
		d.State, d.Attempts, d.LastError, d.UpdatedAt = pay.DeliveryDead, 15, "HTTP 500", tx.Now()
		return tx.UpdateDelivery(d)
	})
}
