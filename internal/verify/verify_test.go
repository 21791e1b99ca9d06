package verify_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/paystate/paystate/internal/verify"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
	"github.com/paystate/paystate/store/bolt"
	"github.com/paystate/paystate/store/bolt/bolttest"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// captured stores payment id, created and captured at at, with its
// timeline and, if withRecord, the capture's outbox record.
func captured(tx store.Tx, id string, at time.Time, withRecord bool) error {
	p := pay.Payment{
		ID: id, OrderID: "order-" + id, Amount: 1000, Currency: "EUR", Provider: "mock",
		Status: pay.Created, Version: 1, CreatedAt: at, UpdatedAt: at,
	}
	if err := tx.InsertPayment(p); err != nil {
		return err
	}
	if err := tx.AppendStep(pay.Step{PaymentID: id, At: at, Source: pay.SourceAPI, Kind: pay.StepCreated, To: pay.Created, Version: 1}); err != nil {
		return err
	}
	p.Status, p.Version = pay.Captured, 2
	if err := tx.UpdatePayment(p, 1); err != nil {
		return err
	}
	if err := tx.AppendStep(pay.Step{PaymentID: id, At: at, Source: pay.SourceAPI, Kind: pay.StepTransition, From: pay.Created, To: pay.Captured, Version: 2}); err != nil {
		return err
	}
	if !withRecord {
		return nil
	}
	return tx.AppendOutbox(pay.OutboxRecord{
		ID: "evt_" + id, Type: pay.EventType(pay.Captured), PaymentID: id, Status: pay.Captured, From: pay.Created,
		Version: 2, Amount: 1000, Currency: "EUR", Provider: "mock", CreatedAt: at,
	})
}

// TestRun_OutboxHorizon: verify does not ask for the outbox records the
// store purged (older than its purge horizon), and stays strict for every
// transition after it.
func TestRun_OutboxHorizon(t *testing.T) {
	t.Parallel()
	db := bolttest.MustOpen(t, &bolt.Options{Now: func() time.Time { return t0 }})
	ctx := context.Background()
	const (
		old, young, broken = "pay_old", "pay_young", "pay_broken"
	)
	err := db.Update(ctx, func(tx store.Tx) error {
		if err := captured(tx, old, t0, true); err != nil {
			return err
		}
		if err := captured(tx, young, t0.Add(10*24*time.Hour), true); err != nil {
			return err
		}
		// A transition after the horizon whose record was never written.
		if err := captured(tx, broken, t0.Add(10*24*time.Hour), false); err != nil {
			return err
		}
		recs, err := tx.OutboxAfter(0, 10)
		if err != nil {
			return err
		}
		return tx.SetRippleCursor(recs[len(recs)-1].Seq) // fanned out, to no effect
	})
	if err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		rep, err := verify.Run(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Mismatches) != 1 || rep.Mismatches[0].PaymentID != broken || !strings.Contains(rep.Mismatches[0].Problem, "missing outbox record") {
			t.Fatalf("%s: mismatches %v, want one: %s has no outbox record", when, rep.Mismatches, broken)
		}
	}
	check("before the purge")

	var n int
	err = db.Update(ctx, func(tx store.Tx) (err error) { n, err = tx.PurgeOutbox(t0.Add(24*time.Hour), 10); return err })
	if err != nil || n != 1 {
		t.Fatalf("PurgeOutbox=%d, %v; want the old record purged", n, err)
	}
	check("after the purge")
	if err := db.View(ctx, func(tx store.Tx) error {
		if rs, err := tx.OutboxForPayment(old); err != nil || len(rs) != 0 {
			return fmt.Errorf("old payment's records: %v, %v; want purged", rs, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestRun_Secrets: verify reports a final payment that still holds a
// client secret or a redirect URL (finalize clears both when a payment
// becomes final) and a stored secret that is not printable text, without
// putting the values into the report; an open payment's printable secret
// is fine.
func TestRun_Secrets(t *testing.T) {
	t.Parallel()
	db := bolttest.MustOpen(t, &bolt.Options{Now: func() time.Time { return t0 }})
	ctx := context.Background()
	const (
		secret = "pi_final_secret_b5f0"
		url    = "https://bank.example/3ds/final"
	)
	// set stores payment id's new client secret and redirect URL with
	// its timeline step, as an update that did not clear them would.
	set := func(tx store.Tx, id, secret, url string) error {
		p, err := tx.Payment(id)
		if err != nil {
			return err
		}
		prev := p.Version
		p.ClientSecret, p.RedirectURL, p.Version = secret, url, prev+1
		if err := tx.UpdatePayment(p, prev); err != nil {
			return err
		}
		return tx.AppendStep(pay.Step{PaymentID: id, At: t0, Source: pay.SourceAPI, Kind: pay.StepUpdate, To: p.Status, Version: p.Version})
	}
	err := db.Update(ctx, func(tx store.Tx) error {
		for _, id := range []string{"pay_ok", "pay_final_secret", "pay_final_url"} {
			if err := captured(tx, id, t0, true); err != nil {
				return err
			}
		}
		if err := set(tx, "pay_final_secret", secret, ""); err != nil {
			return err
		}
		if err := set(tx, "pay_final_url", "", url); err != nil {
			return err
		}
		// Open payments: one with printable values, one whose secret
		// holds a NUL (as a report could store before such fields were
		// checked).
		for _, id := range []string{"pay_open", "pay_open_nul"} {
			p := pay.Payment{
				ID: id, OrderID: "order-" + id, Amount: 1000, Currency: "EUR", Provider: "mock",
				Status: pay.Created, Version: 1, CreatedAt: t0, UpdatedAt: t0,
				ClientSecret: "pi_open_secret", RedirectURL: "https://bank.example/3ds/open",
			}
			if id == "pay_open_nul" {
				p.ClientSecret = "pi_open\x00secret"
			}
			if err := tx.InsertPayment(p); err != nil {
				return err
			}
			if err := tx.AppendStep(pay.Step{PaymentID: id, At: t0, Source: pay.SourceAPI, Kind: pay.StepCreated, To: pay.Created, Version: 1}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rep := mustVerify(t, db)
	got := map[string]string{}
	for _, m := range rep.Mismatches {
		got[m.PaymentID] += m.Problem + "; "
		if strings.Contains(m.Problem, "secret_b5f0") || strings.Contains(m.Problem, "3ds/final") || strings.Contains(m.Problem, "pi_open") {
			t.Errorf("the report holds a stored value: %s", m)
		}
	}
	want := map[string]string{
		"pay_final_secret": "the payment is captured, a final status, and still holds a client secret or redirect URL; ",
		"pay_final_url":    "the payment is captured, a final status, and still holds a client secret or redirect URL; ",
		"pay_open_nul":     "stored client_secret contains a control, format or bidirectional character (U+0000); ",
	}
	if len(got) != len(want) {
		t.Errorf("mismatches %v; want %v", got, want)
	}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("%s: %q; want %q", id, got[id], w)
		}
	}
}
