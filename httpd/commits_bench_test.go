package httpd_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	svix "github.com/svix/svix-webhooks/go"

	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/httpd"
	"github.com/paystate/paystate/internal/ids"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/psp/mock"
	"github.com/paystate/paystate/psp/standard"
	"github.com/paystate/paystate/store"
	"github.com/paystate/paystate/store/bolt/bolttest"
)

// BenchmarkLone measures one client, one request at a time, over real HTTP
// on loopback and a real bbolt file: a create with the mock PSP captured
// in its answer, a duplicate signed webhook, and as the reference in the
// same run one store Update inserting a payment (one commit). It reports
// the write transactions per operation (commits/op).
func BenchmarkLone(b *testing.B) {
	psp, err := mock.New(mock.Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = psp.Close() })
	sp, err := standard.New(standard.Config{WebhookSecret: standardSecret})
	if err != nil {
		b.Fatal(err)
	}
	db := bolttest.MustOpen(b, nil)
	cs := &commitCounter{Store: db}
	fin := finalize.New(cs)
	providers := map[string]pay.Provider{"standard": sp, "mock": psp}
	payments := &finalize.Payments{Store: cs, Finalizer: fin, Providers: providers, DefaultProvider: "mock"}
	srv := &httpd.Server{
		Addr: "127.0.0.1:0", Payments: payments, Events: payments, Ledger: payments,
		Webhooks: &finalize.Inbox{Store: cs, Finalizer: fin, Providers: providers},
	}
	if err := srv.Open(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	hc := &http.Client{Timeout: 10 * time.Second}
	post := func(path, body string, hdr map[string]string) {
		req, _ := http.NewRequest("POST", srv.URL()+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		res, err := hc.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode/100 != 2 {
			b.Fatalf("%s: status %d", path, res.StatusCode)
		}
	}
	per := func(b *testing.B, before int64) {
		b.ReportMetric(float64(cs.N.Load()-before)/float64(b.N), "commits/op")
	}

	b.Run("RawUpdate", func(b *testing.B) {
		before := cs.N.Load()
		for i := 0; b.Loop(); i++ {
			err := cs.Update(context.Background(), func(tx store.Tx) error {
				now := tx.Now()
				return tx.InsertPayment(pay.Payment{ID: ids.Payment(now), OrderID: fmt.Sprint("raw-", i), Amount: 1000, Currency: "EUR",
					Provider: "mock", Status: pay.Created, Version: 1, CreatedAt: now, UpdatedAt: now})
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		per(b, before)
	})
	b.Run("Create", func(b *testing.B) {
		before := cs.N.Load()
		for i := 0; b.Loop(); i++ {
			post("/v1/payments", fmt.Sprintf(`{"order_id":"o-%d","amount":1000,"currency":"EUR"}`, i),
				map[string]string{"Idempotency-Key": fmt.Sprint("bench-", i)})
		}
		per(b, before)
	})
	b.Run("DuplicateWebhook", func(b *testing.B) {
		var id string
		if err := db.View(context.Background(), func(tx store.Tx) error {
			list, _, err := tx.ListPayments(pay.PaymentFilter{Limit: 1})
			if len(list) > 0 {
				id = list[0].ID
			}
			return err
		}); err != nil || id == "" {
			b.Fatalf("no payment to send a webhook about (%v)", err)
		}
		now := time.Now()
		body := fmt.Sprintf(`{"id":"evt_bench","type":"payment.processing","created":%d,"data":{"payment_id":%q,"amount":1000,"currency":"EUR"}}`, now.Unix(), id)
		wh, _ := svix.NewWebhook(standardSecret)
		sig, _ := wh.Sign("evt_bench", now, []byte(body))
		hdr := map[string]string{"webhook-id": "evt_bench", "webhook-timestamp": fmt.Sprint(now.Unix()), "webhook-signature": sig}
		post("/webhooks/standard", body, hdr) // the first delivery
		before := cs.N.Load()
		for b.Loop() {
			post("/webhooks/standard", body, hdr)
		}
		per(b, before)
	})
}
