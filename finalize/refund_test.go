package finalize_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	testbackends "github.com/paystate/paystate/internal/testkit/backends"
	"github.com/paystate/paystate/store"

	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/internal/testkit"
	"github.com/paystate/paystate/internal/verify"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/psp/mock"
	"github.com/paystate/paystate/psp/standard"
	"github.com/paystate/paystate/psp/stdwebhook"
	"github.com/paystate/paystate/ripple"
	"github.com/paystate/paystate/store/storetest"
)

// backends are the two stores the tests run on.
var backends = testbackends.All

// balances returns the ledger's balances as account → amount (EUR).
func balances(t *testing.T, db store.Store) map[string]int64 {
	t.Helper()
	var bs []pay.Balance
	if err := db.View(context.Background(), func(tx store.Tx) (err error) { bs, err = tx.LedgerBalances(); return err }); err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	sum := int64(0)
	for _, b := range bs {
		out[b.Account] += b.Amount
		sum += b.Amount
	}
	if sum != 0 {
		t.Fatalf("ledger sums to %d: %+v", sum, bs)
	}
	return out
}

// verified fails the test unless paystate verify finds nothing.
func verified(t *testing.T, db store.Store) verify.Report {
	t.Helper()
	rep, err := verify.Run(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range rep.Mismatches {
		t.Errorf("verify: %s", m)
	}
	return rep
}

// TestRefunds_Concurrent sends 20 partial refunds of one captured payment
// at once, each under its own idempotency key, whose amounts add up to
// more than the payment, on both backends, with the mock PSP and the
// loyalty effect: the refunds that fit succeed and the others are
// refused (refund_exceeds_amount), so pending and succeeded never exceed
// the amount; each succeeded refund has one posting and the ledger
// balances; the loyalty points are clawed back exactly in proportion to
// what was refunded; verify finds nothing.
func TestRefunds_Concurrent(t *testing.T) {
	t.Parallel()
	for _, be := range backends {
		t.Run(be.Name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			clock := storetest.NewClock(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))
			db := be.Open(t, clock.Now)
			psp, err := mock.New(mock.Config{}, mock.WithRetry(1, 0), mock.WithStore(db), mock.WithNow(clock.Now))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = psp.Close() })
			fin := finalize.New(db)
			svc := &finalize.Payments{Store: db, Finalizer: fin, Providers: map[string]pay.Provider{"mock": psp}, DefaultProvider: "mock",
				Idempotency: &finalize.Idempotency{Store: db, Owner: "test"}}
			loyalty, err := ripple.New(db, ripple.Config{PointsPerUnit: 7})
			if err != nil {
				t.Fatal(err)
			}
			loyalty.Now = clock.Now
			t.Cleanup(loyalty.Close)

			const amount = 10_000 // 100.00 EUR: 700 points at 7 a unit
			p, err := svc.Create(ctx, finalize.CreateRequest{OrderID: "o-20", Amount: amount, Currency: "EUR", Customer: pay.Customer{ID: "cus_20"}})
			if err != nil || p.Status != pay.Captured {
				t.Fatalf("create: %s (%v), want captured", p.Status, err)
			}

			// 20 parts adding up to 14,930: not all of them fit.
			parts := make([]int64, 20)
			total := int64(0)
			for i := range parts {
				parts[i] = int64(333 + 41*i)
				total += parts[i]
			}
			if total <= amount {
				t.Fatalf("parts add up to %d, want more than %d", total, amount)
			}
			var (
				wg       sync.WaitGroup
				mu       sync.Mutex
				accepted int64
				refused  int
			)
			for i, part := range parts {
				wg.Add(1)
				go func() {
					defer wg.Done()
					key := finalize.IdemKey{Key: fmt.Sprintf("refund:test:%d", i), Fingerprint: fmt.Sprintf("fp-%d", i), Status: http.StatusCreated}
					r, err := svc.RefundOnce(ctx, p.ID, finalize.RefundRequest{Amount: part}, key)
					mu.Lock()
					defer mu.Unlock()
					switch pay.ErrorCode(err) {
					case "":
						if r.Refund.Status != pay.RefundSucceeded || r.Refund.Amount != part {
							t.Errorf("refund %d: %+v, want %d succeeded", i, r.Refund, part)
						}
						accepted += part
					case pay.ERefundExceeds, pay.ECONFLICT: // did not fit; or the ones before refunded it in full
						refused++
					default:
						t.Errorf("refund %d of %d: %v", i, part, err)
					}
				}()
			}
			wg.Wait()
			if refused == 0 || accepted == 0 {
				t.Fatalf("accepted %d, refused %d: want some of each", accepted, refused)
			}

			p, err = svc.Get(ctx, p.ID)
			if err != nil {
				t.Fatal(err)
			}
			refunds, err := svc.Refunds(ctx, p.ID)
			if err != nil {
				t.Fatal(err)
			}
			held := int64(0)
			for _, r := range refunds {
				if r.Status != pay.RefundFailed {
					held += r.Amount
				}
			}
			if held > amount || p.AmountRefunded != accepted || held != accepted || p.AmountRefundPending != 0 {
				t.Fatalf("refunds hold %d, amount_refunded %d, accepted %d, pending %d; want at most %d, all equal", held, p.AmountRefunded, accepted, p.AmountRefundPending, amount)
			}
			if c, _ := psp.Charge(finalize.ChargeKey(p.ID)); c.AmountRefunded != accepted {
				t.Fatalf("the PSP refunded %d, paystate %d", c.AmountRefunded, accepted)
			}
			if want := map[bool]pay.Status{true: pay.Refunded, false: pay.Captured}[accepted == amount]; p.Status != want {
				t.Fatalf("status %s with %d of %d refunded, want %s", p.Status, accepted, amount, want)
			}

			// The ledger: revenue is what is left, each refund posted once.
			b := balances(t, db)
			if got, want := b[pay.AccountMerchantRevenue], -(amount - accepted); got != want {
				t.Fatalf("merchant_revenue=%d, want %d", got, want)
			}
			if got, want := b[pay.AccountPSPReceivable], amount-accepted; got != want {
				t.Fatalf("psp_receivable=%d, want %d", got, want)
			}

			// Loyalty: 700 points credited, the refunds' exact share taken back.
			for range 50 {
				n, err := loyalty.RunOnce(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if n == 0 {
					break
				}
			}
			c, err := loyalty.Customer(ctx, "cus_20")
			if err != nil {
				t.Fatal(err)
			}
			if got, want := c.Points, int64(700)-700*accepted/amount; got != want {
				t.Fatalf("points=%d, want %d: 700 less the share of %d of %d", got, want, accepted, amount)
			}
			if rep := verified(t, db); rep.Refunds != len(refunds) {
				t.Fatalf("verify checked %d refunds, want %d", rep.Refunds, len(refunds))
			}
		})
	}
}

// moneyEnv is a paystate on one backend with the standard provider (report
// mode: its refunds wait for their webhooks), fed signed webhooks.
type moneyEnv struct {
	t     *testing.T
	db    store.Store
	clock *storetest.Clock
	svc   *finalize.Payments
	inbox *finalize.Inbox
	p     pay.Payment
}

const moneySecret = "whsec_cGF5c3RhdGUtZGV2ZWxvcG1lbnQtc2VjcmV0LTAwMDA="

func newMoneyEnv(t *testing.T, open func(*testing.T, func() time.Time) store.Store) *moneyEnv {
	ctx := context.Background()
	clock := storetest.NewClock(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))
	db := open(t, clock.Now)
	std, err := standard.New(standard.Config{WebhookSecret: moneySecret})
	if err != nil {
		t.Fatal(err)
	}
	providers := map[string]pay.Provider{"standard": std}
	fin := finalize.New(db)
	e := &moneyEnv{
		t: t, db: db, clock: clock,
		svc:   &finalize.Payments{Store: db, Finalizer: fin, Providers: providers, DefaultProvider: "standard"},
		inbox: &finalize.Inbox{Store: db, Finalizer: fin, Providers: providers, Now: clock.Now},
	}
	p, err := e.svc.Create(ctx, finalize.CreateRequest{OrderID: "o-money", Amount: 1000, Currency: "EUR"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Report(ctx, p.ID, finalize.ReportRequest{Status: pay.Captured, ProviderRef: "pi_money"}); err != nil {
		t.Fatal(err)
	}
	e.p = p
	return e
}

// send signs and accepts one webhook; later stores it for the inbox
// worker instead of applying it at once.
func (e *moneyEnv) send(ev stdwebhook.Event, later bool) {
	e.t.Helper()
	ev.Created = e.clock.Now()
	if ev.PaymentID == "" && ev.ProviderRef == "" {
		ev.PaymentID = e.p.ID
	}
	body, err := stdwebhook.EncodeEvent(ev)
	if err != nil {
		e.t.Fatal(err)
	}
	e.inbox.ApplyLater = later
	if _, _, err := e.inbox.Accept(context.Background(), "standard", body, testkit.StandardHeader(e.t, moneySecret, ev.ID, e.clock.Now(), body)); err != nil {
		e.t.Fatalf("webhook %s: %v", ev.ID, err)
	}
	if later {
		if _, err := e.inbox.RunOnce(context.Background()); err != nil {
			e.t.Fatal(err)
		}
	}
	e.clock.Add(time.Second)
}

func (e *moneyEnv) refund(amount int64, key string) pay.Refund {
	e.t.Helper()
	r, err := e.svc.RefundOnce(context.Background(), e.p.ID, finalize.RefundRequest{Amount: amount},
		finalize.IdemKey{Key: "refund:" + key, Fingerprint: key, Status: http.StatusCreated})
	if err != nil {
		e.t.Fatalf("refund %d: %v", amount, err)
	}
	return r.Refund
}

func (e *moneyEnv) payment() pay.Payment {
	e.t.Helper()
	p, err := e.svc.Get(context.Background(), e.p.ID)
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

func (e *moneyEnv) refundOf(id string) pay.Refund {
	e.t.Helper()
	var r pay.Refund
	if err := e.db.View(context.Background(), func(tx store.Tx) (err error) { r, err = tx.Refund(id); return err }); err != nil {
		e.t.Fatal(err)
	}
	return r
}

func (e *moneyEnv) dispute(id string) pay.Dispute {
	e.t.Helper()
	var d pay.Dispute
	if err := e.db.View(context.Background(), func(tx store.Tx) (err error) { d, err = tx.Dispute("standard", id); return err }); err != nil {
		e.t.Fatal(err)
	}
	return d
}

// ledgerLines counts the journal lines of the payment.
func (e *moneyEnv) ledgerLines() int {
	e.t.Helper()
	n := 0
	err := e.db.View(context.Background(), func(tx store.Tx) error {
		ls, err := tx.LedgerEntries(0, 1000)
		for _, l := range ls {
			if l.PaymentID == e.p.ID {
				n++
			}
		}
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

// outboxTypes counts the payment's outbox records by type.
func (e *moneyEnv) outboxTypes() map[string]int {
	e.t.Helper()
	out := map[string]int{}
	err := e.db.View(context.Background(), func(tx store.Tx) error {
		rs, err := tx.OutboxForPayment(e.p.ID)
		for _, r := range rs {
			out[r.Type]++
		}
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

// TestRefunds_EventsLateTwiceOutOfOrder feeds the refund and dispute
// webhooks of one payment late, twice and out of order, on both backends,
// half of them through the inbox worker: a refund's failure before its
// acceptance, a success delivered twice and again under another event id,
// a success contradicted by a failure (review), a refund made at the PSP
// and reported by its reference only, a dispute closed before it was
// opened, a closed dispute reported open again and then won. The final
// state is right and each ledger movement is there once.
func TestRefunds_EventsLateTwiceOutOfOrder(t *testing.T) {
	t.Parallel()
	for _, be := range backends {
		for _, later := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/later=%v", be.Name, later), func(t *testing.T) {
				t.Parallel()
				e := newMoneyEnv(t, be.Open)
				refund := func(id, typ string, amount int64) stdwebhook.Event {
					return stdwebhook.Event{ID: id, Type: typ, Refund: &stdwebhook.Refund{ID: id[len("evt_"):], Amount: amount}}
				}

				// A: 300, its failure arrives twice, then a late success
				// under another event id contradicts it.
				a := e.refund(300, "a")
				if a.Status != pay.RefundPending {
					t.Fatalf("refund A is %s, want pending (report mode)", a.Status)
				}
				fail := stdwebhook.Event{ID: "evt_a_failed", Type: stdwebhook.TypeRefundFailed, Refund: &stdwebhook.Refund{ID: a.ID, Amount: 300}}
				e.send(fail, later)
				e.send(fail, later)
				if got := e.refundOf(a.ID); got.Status != pay.RefundFailed {
					t.Fatalf("refund A is %s after its failure, want failed", got.Status)
				}
				if p := e.payment(); p.AmountRefundPending != 0 || p.AmountRefunded != 0 || p.Refundable() != 1000 {
					t.Fatalf("payment %+v: the failed refund's amount is not free", p)
				}
				// The PSP's acceptance of A, after its failure: stale.
				res, err := e.svc.Finalizer.Finalize(context.Background(), pay.Observation{PaymentID: e.p.ID, Source: pay.SourceSync,
					Refund: &pay.RefundChange{ID: a.ID, ProviderRef: "psp_re_a", Status: pay.RefundPending}})
				if err != nil || !res.Stale || res.Refund.Status != pay.RefundFailed {
					t.Fatalf("acceptance after the failure: %+v (%v), want stale, failed", res, err)
				}
				e.send(stdwebhook.Event{ID: "evt_a_ok", Type: stdwebhook.TypeRefundSucceeded, Refund: &stdwebhook.Refund{ID: a.ID, Amount: 300}}, later)
				if got := e.refundOf(a.ID); got.Status != pay.RefundFailed {
					t.Fatalf("refund A is %s after a contradicting success, want failed (and a human)", got.Status)
				}

				// B: 400 succeeds, delivered twice, then again under
				// another event id (the bridge's duplicate).
				b := e.refund(400, "b")
				ok := stdwebhook.Event{ID: "evt_b_ok", Type: stdwebhook.TypeRefundSucceeded, Refund: &stdwebhook.Refund{ID: b.ID, ProviderRef: "psp_re_b", Amount: 400}}
				e.send(ok, later)
				e.send(ok, later)
				ok.ID = "evt_b_ok_again"
				e.send(ok, later)
				if got := e.refundOf(b.ID); got.Status != pay.RefundSucceeded || got.ProviderRef != "psp_re_b" {
					t.Fatalf("refund B=%+v, want succeeded with the PSP's reference", got)
				}

				// C: made at the PSP (its dashboard), reported by its
				// reference only: its failure, twice under two event ids.
				e.send(refund("evt_psp_re_c", stdwebhook.TypeRefundFailed, 100), later)
				e.send(stdwebhook.Event{ID: "evt_c_failed_again", Type: stdwebhook.TypeRefundFailed, Refund: &stdwebhook.Refund{ID: "psp_re_c", Amount: 100}}, later)
				// D: at the PSP too, succeeded: 200 of what is left.
				e.send(refund("evt_psp_re_d", stdwebhook.TypeRefundSucceeded, 200), later)

				p := e.payment()
				if p.Status != pay.Captured || p.AmountRefunded != 600 || p.AmountRefundPending != 0 {
					t.Fatalf("payment %s refunded %d pending %d, want captured with 600 refunded", p.Status, p.AmountRefunded, p.AmountRefundPending)
				}

				// A dispute closed (lost) before it was opened; its opening
				// then comes late and twice; a win contradicts the loss.
				dp := &stdwebhook.Dispute{ID: "dp_1", Amount: 250, Reason: "fraudulent", Status: pay.DisputeLost}
				e.send(stdwebhook.Event{ID: "evt_dp_closed", Type: stdwebhook.TypeDisputeClosed, Dispute: dp}, later)
				opened := &stdwebhook.Dispute{ID: "dp_1", Amount: 250, Status: pay.DisputeNeedsResponse, EvidenceDueBy: e.clock.Now().Add(7 * 24 * time.Hour)}
				e.send(stdwebhook.Event{ID: "evt_dp_created", Type: stdwebhook.TypeDisputeCreated, Dispute: opened}, later)
				e.send(stdwebhook.Event{ID: "evt_dp_created", Type: stdwebhook.TypeDisputeCreated, Dispute: opened}, later)
				won := *dp
				won.Status = pay.DisputeWon
				e.send(stdwebhook.Event{ID: "evt_dp_won", Type: stdwebhook.TypeDisputeClosed, Dispute: &won}, later)
				if d := e.dispute("dp_1"); d.Status != pay.DisputeLost || d.Amount != 250 {
					t.Fatalf("dispute 1=%+v, want lost: a closed dispute never reopens", d)
				}

				// A second dispute: opened, under review, won.
				two := &stdwebhook.Dispute{ID: "dp_2", Amount: 150, Status: pay.DisputeNeedsResponse}
				e.send(stdwebhook.Event{ID: "evt_dp2_created", Type: stdwebhook.TypeDisputeCreated, Dispute: two}, later)
				review := *two
				review.Status = pay.DisputeUnderReview
				e.send(stdwebhook.Event{ID: "evt_dp2_review", Type: stdwebhook.TypeDisputeCreated, Dispute: &review}, later)
				e.send(stdwebhook.Event{ID: "evt_dp2_created_late", Type: stdwebhook.TypeDisputeCreated, Dispute: two}, later) // stale
				if d := e.dispute("dp_2"); d.Status != pay.DisputeUnderReview {
					t.Fatalf("dispute 2=%+v, want under_review", d)
				}
				b2 := balances(t, e.db)
				if b2[pay.AccountDisputes] != 150 {
					t.Fatalf("disputes=%d while dispute 2 is open, want 150", b2[pay.AccountDisputes])
				}
				won2 := *two
				won2.Status = pay.DisputeWon
				e.send(stdwebhook.Event{ID: "evt_dp2_won", Type: stdwebhook.TypeDisputeClosed, Dispute: &won2}, later)

				// Each movement once: the capture; refunds B and D; dispute
				// 1 opened and lost; dispute 2 opened and won. Two lines each.
				if got, want := e.ledgerLines(), 2*(1+2+2+2); got != want {
					t.Fatalf("journal lines=%d, want %d", got, want)
				}
				bal := balances(t, e.db)
				for acct, want := range map[string]int64{
					pay.AccountMerchantRevenue: -(1000 - 600),
					pay.AccountPSPReceivable:   1000 - 600 - 250,
					pay.AccountDisputes:        0,
					pay.AccountDisputeLosses:   250,
				} {
					if got := bal[acct]; got != want {
						t.Errorf("%s=%d, want %d", acct, got, want)
					}
				}
				types := e.outboxTypes()
				for typ, want := range map[string]int{
					pay.EventRefundSucceeded: 2, pay.EventRefundFailed: 2, // B and D; A and C
					pay.EventDisputeCreated: 2, pay.EventDisputeClosed: 2, pay.EventType(pay.Refunded): 0,
				} {
					if got := types[typ]; got != want {
						t.Errorf("outbox %s=%d, want %d", typ, got, want)
					}
				}
				// The contradictions are on the review queue.
				var items []pay.ReviewItem
				if err := e.db.View(context.Background(), func(tx store.Tx) (err error) { items, err = tx.ListReview(); return err }); err != nil {
					t.Fatal(err)
				}
				if len(items) != 1 || items[0].Reason != pay.ReasonConflictingTerminal {
					t.Fatalf("review queue %+v, want the payment as conflicting_terminal", items)
				}
				if rep := verified(t, e.db); rep.Refunds != 4 || rep.Disputes != 2 {
					t.Fatalf("verify checked %d refunds and %d disputes, want 4 and 2", rep.Refunds, rep.Disputes)
				}
			})
		}
	}
}

// TestRefunds_RefundedInFull: a captured payment reported refunded in
// full (a human on the review queue, a bridge's payment.refunded) settles
// its pending refund and refunds the rest with a refund of its own, each
// with its event and posting; refunds that come after are duplicates.
func TestRefunds_RefundedInFull(t *testing.T) {
	t.Parallel()
	e := newMoneyEnv(t, backends[0].Open)
	pending := e.refund(300, "pending")
	e.send(stdwebhook.Event{ID: "evt_full", Type: stdwebhook.TypeRefunded}, false)
	p := e.payment()
	if p.Status != pay.Refunded || p.AmountRefunded != 1000 || p.AmountRefundPending != 0 {
		t.Fatalf("payment %s refunded %d pending %d, want refunded in full", p.Status, p.AmountRefunded, p.AmountRefundPending)
	}
	if got := e.refundOf(pending.ID); got.Status != pay.RefundSucceeded {
		t.Fatalf("the pending refund is %s, want succeeded", got.Status)
	}
	// Both refunds are made at the test's one instant, so their order (by
	// id within one time) is not the order they were made in: the rest is
	// the one that is not the pending refund.
	refunds, err := e.svc.Refunds(context.Background(), p.ID)
	rest := slices.IndexFunc(refunds, func(r pay.Refund) bool { return r.ID != pending.ID })
	if err != nil || len(refunds) != 2 || rest < 0 || refunds[rest].Amount != 700 || refunds[rest].Status != pay.RefundSucceeded {
		t.Fatalf("refunds %+v (%v), want the 300 and the rest, 700, succeeded", refunds, err)
	}
	e.send(stdwebhook.Event{ID: "evt_late", Type: stdwebhook.TypeRefundSucceeded, Refund: &stdwebhook.Refund{ID: pending.ID, Amount: 300}}, false)
	if got, want := e.ledgerLines(), 2*3; got != want {
		t.Fatalf("journal lines=%d, want %d (the capture and two refunds)", got, want)
	}
	if b := balances(t, e.db); b[pay.AccountMerchantRevenue] != 0 || b[pay.AccountPSPReceivable] != 0 {
		t.Fatalf("balances %v, want all back", b)
	}
	verified(t, e.db)
}
