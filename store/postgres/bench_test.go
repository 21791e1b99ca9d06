package postgres_test

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
	"github.com/paystate/paystate/store/bolt"
	"github.com/paystate/paystate/store/bolt/bolttest"
	"github.com/paystate/paystate/store/postgres"
)

// BenchmarkTransition is the write of one webhook that captures a
// payment (read, compare-and-set, timeline step, processed id, outbox
// record, ledger posting: one Update), each op on a payment of its own, on
// the bbolt store (the reference) and on PostgreSQL, from one goroutine
// and from 16 at once. All of them post to the same two balances and take
// the same outbox counter, so on PostgreSQL concurrent transitions
// serialize, the losers after a retry: retries/op counts those, and
// wal_syncs/op the WAL flushes of the whole cluster (pg_stat_wal) per op.
// Compare the backends' ns/op as a ratio within one run.
//
//	go test -run '^$' -bench BenchmarkTransition -benchtime 2000x ./store/postgres/
func BenchmarkTransition(b *testing.B) {
	backends := []struct {
		name string
		open func(b *testing.B) (store.Store, func() postgres.Stats)
	}{
		{"bolt", func(b *testing.B) (store.Store, func() postgres.Stats) {
			return bolttest.MustOpen(b, &bolt.Options{}), nil
		}},
		{"postgres", func(b *testing.B) (store.Store, func() postgres.Stats) {
			db := mustOpen(b, newSchema(b), &postgres.Options{MaxConns: 16})
			return db, db.Stats
		}},
	}
	for _, be := range backends {
		for _, clients := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s/clients=%d", be.name, clients), func(b *testing.B) {
				s, stats := be.open(b)
				at := time.Now().UTC()
				err := s.Update(context.Background(), func(tx store.Tx) error {
					for i := range b.N {
						p := pay.Payment{ID: fmt.Sprintf("pay_%08d", i), OrderID: "order", Amount: 1000, Currency: "EUR",
							Provider: "mock", Status: pay.Processing, Version: 1, CreatedAt: at, UpdatedAt: at}
						if err := tx.InsertPayment(p); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
				syncs := walSyncs(b)
				var before postgres.Stats
				if stats != nil {
					before = stats()
				}
				var next atomic.Int64
				// RunParallel starts parallelism × GOMAXPROCS goroutines.
				b.SetParallelism(max(1, clients/runtime.GOMAXPROCS(0)))
				b.ResetTimer()
				run := func() error { return capture(s, fmt.Sprintf("pay_%08d", next.Add(1)-1)) }
				if clients == 1 {
					for range b.N {
						if err := run(); err != nil {
							b.Fatal(err)
						}
					}
				} else {
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							if err := run(); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				b.StopTimer()
				if stats != nil {
					after := stats()
					b.ReportMetric(float64(after.Retries-before.Retries)/float64(b.N), "retries/op")
					b.ReportMetric(float64(walSyncs(b)-syncs)/float64(b.N), "wal_syncs/op")
				}
			})
		}
	}
}

// capture is the webhook's transaction on payment id.
func capture(s store.Store, id string) error {
	return s.Update(context.Background(), func(tx store.Tx) error {
		p, err := tx.Payment(id)
		if err != nil {
			return err
		}
		prev := p.Version
		p.Status, p.Version, p.UpdatedAt = pay.Captured, prev+1, tx.Now()
		if err := tx.UpdatePayment(p, prev); err != nil {
			return err
		}
		evt := "evt_" + id
		for _, err := range []error{
			tx.AppendStep(pay.Step{PaymentID: id, Source: pay.SourceWebhook, Kind: pay.StepTransition, From: pay.Processing, To: pay.Captured, Version: p.Version, EventID: evt}),
			tx.MarkProcessed("mock", evt),
			tx.AppendOutbox(pay.OutboxRecord{ID: evt, Type: pay.EventType(pay.Captured), PaymentID: id, Status: pay.Captured, From: pay.Processing, Version: p.Version, Amount: p.Amount, Currency: p.Currency}),
			tx.AppendLedger([]pay.LedgerEntry{
				{PaymentID: id, EventID: evt, Account: pay.AccountPSPReceivable, Currency: "EUR", Amount: p.Amount},
				{PaymentID: id, EventID: evt, Account: pay.AccountMerchantRevenue, Currency: "EUR", Amount: -p.Amount},
			}),
		} {
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// walSyncs returns the WAL flushes of the cluster so far.
func walSyncs(b *testing.B) int64 {
	var n int64
	if err := admin.QueryRow(context.Background(), `SELECT wal_sync FROM pg_stat_wal`).Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}
