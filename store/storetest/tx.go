package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

var errBoom = errors.New("boom")

func testTx(t *testing.T, open Opener) {
	t.Run("Now", func(t *testing.T) {
		t.Parallel()
		c := NewClock(t0)
		cet := time.FixedZone("CET", 3600)
		s := open(t, func() time.Time { return c.Now().In(cet) })

		var first, second time.Time
		err := s.Update(context.Background(), func(tx store.Tx) error {
			first = tx.Now()
			c.Add(time.Hour)
			second = tx.Now()
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if !first.Equal(t0) {
			t.Fatalf("Now=%s, want %s", first, t0)
		}
		if got, want := first.Location(), time.UTC; got != want {
			t.Fatalf("Now().Location()=%s, want %s", got, want)
		}
		if !second.Equal(first) {
			t.Fatalf("Now moved within a transaction: %s, then %s", first, second)
		}

		var next time.Time
		if err := s.View(context.Background(), func(tx store.Tx) error { next = tx.Now(); return nil }); err != nil {
			t.Fatal(err)
		}
		if want := t0.Add(time.Hour); !next.Equal(want) {
			t.Fatalf("Now of the next transaction=%s, want %s", next, want)
		}
	})

	t.Run("OnCommit", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		var calls []string
		e.update(func(tx store.Tx) error {
			tx.OnCommit(func() { calls = append(calls, "a") })
			tx.OnCommit(func() { calls = append(calls, "b") })
			if len(calls) != 0 {
				return errors.New("a callback ran before the commit")
			}
			return tx.InsertPayment(newPayment(1, tx.Now()))
		})
		if got, want := strings.Join(calls, ","), "a,b"; got != want {
			t.Fatalf("calls=%q, want %q", got, want)
		}
	})

	t.Run("OnCommitNotOnError", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		ran := false
		err := e.tryUpdate(func(tx store.Tx) error {
			tx.OnCommit(func() { ran = true })
			if err := tx.InsertPayment(newPayment(1, tx.Now())); err != nil {
				return err
			}
			return errBoom
		})
		if !errors.Is(err, errBoom) {
			t.Fatalf("Update error=%v, want %v", err, errBoom)
		}
		if ran {
			t.Fatal("OnCommit callback ran for a rolled-back transaction")
		}
		e.view(func(tx store.Tx) error {
			_, err := tx.Payment(paymentID(1))
			wantCode(t, err, pay.ENOTFOUND)
			return nil
		})
	})

	t.Run("OnCommitNotOnConflict", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		e.insert(newPayment(1, t0))
		ran := false
		err := e.tryUpdate(func(tx store.Tx) error {
			tx.OnCommit(func() { ran = true })
			p, err := tx.Payment(paymentID(1))
			if err != nil {
				return err
			}
			p.Version = 3
			return tx.UpdatePayment(p, 2)
		})
		wantCode(t, err, pay.ECONFLICT)
		if ran {
			t.Fatal("OnCommit callback ran after a failed compare-and-set")
		}
	})

	t.Run("OnCommitView", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		ran := 0
		e.view(func(tx store.Tx) error {
			tx.OnCommit(func() { ran++ })
			return nil
		})
		if got, want := ran, 1; got != want {
			t.Fatalf("callbacks after a View=%d, want %d", got, want)
		}
		err := e.s.View(context.Background(), func(tx store.Tx) error {
			tx.OnCommit(func() { ran++ })
			return errBoom
		})
		if !errors.Is(err, errBoom) {
			t.Fatalf("View error=%v, want %v", err, errBoom)
		}
		if got, want := ran, 1; got != want {
			t.Fatalf("callbacks after a failed View=%d, want %d", got, want)
		}
	})

	t.Run("Rollback", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		id := paymentID(1)
		err := e.tryUpdate(func(tx store.Tx) error {
			p := newPayment(1, tx.Now())
			p.ProviderRef = "pi_1"
			p.Status = pay.Processing
			for _, err := range []error{
				tx.InsertPayment(p),
				tx.AppendStep(pay.Step{PaymentID: id, Kind: pay.StepCreated, Source: pay.SourceAPI, To: pay.Created, Version: 1}),
				putInbox(tx, pay.InboxEvent{Provider: "mock", EventID: "evt_1", PaymentID: id}),
				putInbox(tx, pay.InboxEvent{Provider: "mock", EventID: "evt_2", PaymentID: id}),
				tx.MarkProcessed("mock", "evt_2"),
				tx.MarkProcessed("mock", "evt_3"),
				acquire(tx, id),
				tx.AppendOutbox(pay.OutboxRecord{ID: "evt_o1", Type: "payment.captured", PaymentID: id, Status: pay.Captured}),
				tx.AppendLedger(posting(id, "EUR", 1000)),
				tx.PutReview(pay.ReviewItem{ID: id, PaymentID: id, Reason: pay.ReasonUnresolved}),
				tx.PutIdemKey(pay.IdemRecord{Key: "k1", State: pay.IdemInFlight}),
			} {
				if err != nil {
					return err
				}
			}
			return errBoom
		})
		if !errors.Is(err, errBoom) {
			t.Fatalf("Update error=%v, want %v", err, errBoom)
		}

		e.view(func(tx store.Tx) error {
			_, err := tx.Payment(id)
			wantCode(t, err, pay.ENOTFOUND)
			_, err = tx.PaymentByRef("mock", "pi_1")
			wantCode(t, err, pay.ENOTFOUND)
			if ps, _, err := tx.ListPayments(pay.PaymentFilter{}); err != nil || len(ps) != 0 {
				t.Fatalf("ListPayments=%d payments, %v; want none", len(ps), err)
			}
			if ps, err := tx.Candidates([]pay.Status{pay.Processing}, t0.Add(time.Hour), 10); err != nil || len(ps) != 0 {
				t.Fatalf("Candidates=%d payments, %v; want none", len(ps), err)
			}
			if steps, err := tx.Steps(id); err != nil || len(steps) != 0 {
				t.Fatalf("Steps=%d steps, %v; want none", len(steps), err)
			}
			_, err = tx.InboxEvent("mock", "evt_1")
			wantCode(t, err, pay.ENOTFOUND)
			if evs, err := tx.PendingInbox(t0.Add(time.Hour), 10); err != nil || len(evs) != 0 {
				t.Fatalf("PendingInbox=%d events, %v; want none", len(evs), err)
			}
			if evs, err := tx.InboxForPayment(id); err != nil || len(evs) != 0 {
				t.Fatalf("InboxForPayment=%d events, %v; want none", len(evs), err)
			}
			for _, ev := range []string{"evt_2", "evt_3"} {
				if ok, err := tx.IsProcessed("mock", ev); err != nil || ok {
					t.Fatalf("IsProcessed(%s)=%t, %v; want false", ev, ok, err)
				}
			}
			if l, err := tx.Lease(id); err != nil || l.Token != 0 {
				t.Fatalf("Lease.Token=%d, %v; want 0", l.Token, err)
			}
			if rs, err := tx.OutboxForPayment(id); err != nil || len(rs) != 0 {
				t.Fatalf("OutboxForPayment=%d records, %v; want none", len(rs), err)
			}
			if bs, err := tx.LedgerBalances(); err != nil || len(bs) != 0 {
				t.Fatalf("LedgerBalances=%v, %v; want none", bs, err)
			}
			_, err = tx.Review(id)
			wantCode(t, err, pay.ENOTFOUND)
			if items, err := tx.ListReview(); err != nil || len(items) != 0 {
				t.Fatalf("ListReview=%d items, %v; want none", len(items), err)
			}
			_, err = tx.IdemKey("k1")
			wantCode(t, err, pay.ENOTFOUND)
			return nil
		})
	})

	t.Run("ContextCanceled", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		ran := false
		if err := e.s.Update(ctx, func(tx store.Tx) error { ran = true; return nil }); !errors.Is(err, context.Canceled) {
			t.Fatalf("Update error=%v, want %v", err, context.Canceled)
		}
		if err := e.s.View(ctx, func(tx store.Tx) error { ran = true; return nil }); !errors.Is(err, context.Canceled) {
			t.Fatalf("View error=%v, want %v", err, context.Canceled)
		}
		if ran {
			t.Fatal("fn ran with a canceled context")
		}
	})

	t.Run("ValuesOutliveTx", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		body := bytes.Repeat([]byte(`{"id":"evt_1"}`), 100)
		e.insert(newPayment(1, t0))
		e.update(func(tx store.Tx) error {
			return putInbox(tx, pay.InboxEvent{Provider: "mock", EventID: "evt_1", Body: body})
		})
		var (
			ev pay.InboxEvent
			p  pay.Payment
		)
		e.view(func(tx store.Tx) (err error) {
			if ev, err = tx.InboxEvent("mock", "evt_1"); err != nil {
				return err
			}
			p, err = tx.Payment(paymentID(1))
			return err
		})
		// Grow the file so that the store remaps it and rewrites pages.
		big := bytes.Repeat([]byte("x"), 64<<10)
		for i := range 40 {
			e.update(func(tx store.Tx) error {
				return putInbox(tx, pay.InboxEvent{Provider: "mock", EventID: fmt.Sprintf("evt_big_%d", i), Body: big})
			})
		}
		e.move(paymentID(1), pay.Processing, t0.Add(time.Minute))
		if !bytes.Equal(ev.Body, body) {
			t.Fatalf("Body changed after the transaction ended: %.40q", ev.Body)
		}
		if got, want := p.Status, pay.Created; got != want {
			t.Fatalf("Status=%s, want %s", got, want)
		}
	})

	t.Run("Concurrent", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		id := paymentID(1)
		e.insert(newPayment(1, t0))
		const workers, writes = 8, 25
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for range writes {
					for {
						err := e.tryUpdate(func(tx store.Tx) error {
							p, err := tx.Payment(id)
							if err != nil {
								return err
							}
							prev := p.Version
							p.Version++
							p.UpdatedAt = tx.Now()
							if err := tx.UpdatePayment(p, prev); err != nil {
								return err
							}
							return tx.AppendStep(pay.Step{PaymentID: id, Kind: pay.StepUpdate, Version: p.Version, Note: fmt.Sprint(w)})
						})
						if pay.ErrorCode(err) == pay.ECONFLICT {
							continue // lost the compare-and-set: read again
						}
						if err != nil {
							t.Errorf("Update: %v", err)
							return
						}
						break
					}
				}
			})
		}
		wg.Wait()
		if got, want := e.payment(id).Version, uint64(1+workers*writes); got != want {
			t.Fatalf("Version=%d, want %d (lost updates)", got, want)
		}
		e.view(func(tx store.Tx) error {
			steps, err := tx.Steps(id)
			if err != nil {
				return err
			}
			if got, want := len(steps), workers*writes; got != want {
				t.Fatalf("len(Steps)=%d, want %d", got, want)
			}
			for i, s := range steps {
				if got, want := s.Seq, uint64(i+1); got != want {
					t.Fatalf("Steps[%d].Seq=%d, want %d", i, got, want)
				}
				if got, want := s.Version, uint64(i+2); got != want {
					t.Fatalf("Steps[%d].Version=%d, want %d", i, got, want)
				}
			}
			return nil
		})
	})
}

// putInbox stores a new event and fails if it was there already.
func putInbox(tx store.Tx, ev pay.InboxEvent) error {
	ok, err := tx.PutInbox(ev)
	if err == nil && !ok {
		err = fmt.Errorf("event %s/%s was already in the inbox", ev.Provider, ev.EventID)
	}
	return err
}

// acquire takes a payment's lease for 30 s.
func acquire(tx store.Tx, id string) error {
	_, err := tx.AcquireLease(id, "test", 30*time.Second)
	return err
}

// posting returns the ledger lines of a capture of amount.
func posting(paymentID, currency string, amount int64) []pay.LedgerEntry {
	return []pay.LedgerEntry{
		{PaymentID: paymentID, EventID: "evt_" + paymentID, Account: pay.AccountPSPReceivable, Currency: currency, Amount: amount},
		{PaymentID: paymentID, EventID: "evt_" + paymentID, Account: pay.AccountMerchantRevenue, Currency: currency, Amount: -amount},
	}
}
