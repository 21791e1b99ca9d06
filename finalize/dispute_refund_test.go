package finalize_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/psp/stdwebhook"
	"github.com/paystate/paystate/store"
)

// TestRefunds_Disputed refuses a refund of a payment whose dispute is open
// (needs_response, under_review) or lost: 409 charge_disputed, decided in
// the transaction that would create the refund, so nothing is written, and
// amount_refundable is 0 meanwhile; a won dispute makes the payment
// refundable again. On every backend.
func TestRefunds_Disputed(t *testing.T) {
	t.Parallel()
	for _, be := range backends {
		t.Run(be.Name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			for _, tc := range []struct {
				name    string
				steps   []pay.DisputeStatus
				blocked bool
			}{
				{"NeedsResponse", []pay.DisputeStatus{pay.DisputeNeedsResponse}, true},
				{"UnderReview", []pay.DisputeStatus{pay.DisputeNeedsResponse, pay.DisputeUnderReview}, true},
				{"Lost", []pay.DisputeStatus{pay.DisputeNeedsResponse, pay.DisputeLost}, true},
				{"LostFirst", []pay.DisputeStatus{pay.DisputeLost}, true},
				{"Won", []pay.DisputeStatus{pay.DisputeNeedsResponse, pay.DisputeUnderReview, pay.DisputeWon}, false},
			} {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					e := newMoneyEnv(t, be.Open)
					// A partial refund before the dispute: it stands.
					first := e.refund(100, "before")
					e.send(stdwebhook.Event{ID: "evt_first_ok", Type: stdwebhook.TypeRefundSucceeded, Refund: &stdwebhook.Refund{ID: first.ID, Amount: 100}}, false)
					for i, st := range tc.steps {
						typ := stdwebhook.TypeDisputeCreated
						if st.Closed() {
							typ = stdwebhook.TypeDisputeClosed
						}
						e.send(stdwebhook.Event{ID: fmt.Sprintf("evt_dp_%d", i), Type: typ,
							Dispute: &stdwebhook.Dispute{ID: "dp_1", Amount: 900, Reason: "fraudulent", Status: st}}, false)
					}
					last := tc.steps[len(tc.steps)-1]
					p := e.payment()
					if p.Dispute != last {
						t.Fatalf("payment's dispute=%q, want %q", p.Dispute, last)
					}
					v := finalize.NewView(p)
					if v.Dispute != last {
						t.Errorf("view's dispute=%q, want %q", v.Dispute, last)
					}
					lines, types := e.ledgerLines(), e.outboxTypes()
					for _, amount := range []int64{100, 0} {
						key := fmt.Sprintf("after-%d", amount)
						r, err := e.svc.RefundOnce(ctx, e.p.ID, finalize.RefundRequest{Amount: amount},
							finalize.IdemKey{Key: "refund:" + key, Fingerprint: key, Status: http.StatusCreated})
						if !tc.blocked {
							if err != nil || r.Refund.Amount == 0 {
								t.Fatalf("refund of %d after a won dispute: %+v (%v), want a refund", amount, r.Refund, err)
							}
							continue
						}
						if got, want := pay.ErrorCode(err), pay.EChargeDisputed; got != want {
							t.Fatalf("refund of %d while the dispute is %s: %+v (%v), want %s", amount, last, r.Refund, err, want)
						}
						if err := e.svc.Store.View(ctx, func(tx store.Tx) error { _, err := tx.IdemKey("refund:" + key); return err }); pay.ErrorCode(err) != pay.ENOTFOUND {
							t.Fatalf("a refused refund left its key stored (%v)", err)
						}
					}
					if !tc.blocked {
						if got, want := v.AmountRefundable, int64(900); got != want {
							t.Fatalf("amount_refundable after a won dispute=%d, want %d", got, want)
						}
						return
					}
					if v.AmountRefundable != 0 {
						t.Fatalf("amount_refundable while the dispute is %s=%d, want 0", last, v.AmountRefundable)
					}
					if p := e.payment(); p.AmountRefunded != 100 || p.AmountRefundPending != 0 {
						t.Fatalf("payment refunded %d pending %d after refused refunds, want 100 and 0", p.AmountRefunded, p.AmountRefundPending)
					}
					if got := e.ledgerLines(); got != lines {
						t.Fatalf("ledger lines %d after refused refunds, want %d", got, lines)
					}
					if got := e.outboxTypes(); fmt.Sprint(got) != fmt.Sprint(types) {
						t.Fatalf("outbox %v after refused refunds, want %v", got, types)
					}

					// The decision is the transaction's, not only the
					// read's: a request that read the payment before
					// the dispute is refused when it is applied.
					_, err := e.svc.Finalizer.Finalize(ctx, pay.Observation{PaymentID: e.p.ID, Source: pay.SourceAPI,
						Refund: &pay.RefundChange{Request: true, Amount: 50, Status: pay.RefundPending, IdemKey: "refund:direct"}})
					if got, want := pay.ErrorCode(err), pay.EChargeDisputed; got != want {
						t.Fatalf("refund applied while the dispute is %s: %v, want %s", last, err, want)
					}
					// A refund the PSP reports (made at its dashboard)
					// happened: it is not refused, it goes where a
					// reported refund goes.
					if _, err := e.svc.Finalizer.Finalize(ctx, pay.Observation{PaymentID: e.p.ID, Source: pay.SourceWebhook,
						Refund: &pay.RefundChange{ProviderRef: "psp_re_dash", Amount: 50, Status: pay.RefundSucceeded}}); err != nil {
						t.Fatalf("a refund the PSP reports while the dispute is %s: %v", last, err)
					}
				})
			}
		})
	}
}

// TestRefunds_DisputeMessages writes the amounts of refund and dispute
// messages and timeline notes in major units with the currency's own
// decimals.
func TestRefunds_DisputeMessages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMoneyEnv(t, backends[0].Open)
	_, err := e.svc.RefundOnce(ctx, e.p.ID, finalize.RefundRequest{Amount: 4000},
		finalize.IdemKey{Key: "refund:big", Fingerprint: "big", Status: http.StatusCreated})
	if got, want := pay.ErrorMessage(err), "refund of 40.00 EUR exceeds what is left to refund of payment "+e.p.ID+": 10.00 EUR (0.00 EUR refunded, 0.00 EUR pending)"; got != want {
		t.Errorf("refund too large: %q, want %q", got, want)
	}
	r := e.refund(250, "part")
	e.send(stdwebhook.Event{ID: "evt_dp", Type: stdwebhook.TypeDisputeCreated,
		Dispute: &stdwebhook.Dispute{ID: "dp_9", Amount: 705, Status: pay.DisputeNeedsResponse, EvidenceDueBy: e.clock.Now().Add(72 * time.Hour)}}, false)
	steps, err := e.svc.Timeline(ctx, e.p.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"refund " + r.ID + " of 2.50 EUR: pending": false, "dispute dp_9 of 7.05 EUR: needs_response": false}
	for _, s := range steps {
		for w := range want {
			if s.Note == w || len(s.Note) > len(w) && s.Note[len(s.Note)-len(w):] == w {
				want[w] = true
			}
		}
	}
	for w, seen := range want {
		if !seen {
			t.Errorf("no timeline note ends %q: %+v", w, steps)
		}
	}
}
