package psptest

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
	"github.com/paystate/paystate/store/bolt"
	"github.com/paystate/paystate/store/bolt/bolttest"
)

// paystate is the part of paystate the Apply tests run the provider in:
// a bbolt file in t.TempDir(), the Finalizer, the create service and the
// webhook inbox with its pull worker (finalize.Pull: triggers are
// fetched under the payment's lease), with the provider under test as the
// only one.
type paystate struct {
	s     *suite
	db    *bolt.DB
	pays  *finalize.Payments
	inbox *finalize.Inbox
}

func newPaystate(t *testing.T, s *suite) *paystate {
	t.Helper()
	db := bolttest.MustOpen(t, nil)
	fin := finalize.New(db)
	provs := map[string]pay.Provider{s.Provider.Name(): s.Provider}
	pull := &finalize.Pull{
		Store: db, Finalizer: fin, Providers: provs, Now: s.now,
		Leases: &finalize.Leases{Store: db, Holder: "pull/psptest", TTL: time.Minute, Now: s.now},
	}
	return &paystate{
		s: s, db: db,
		pays:  &finalize.Payments{Store: db, Finalizer: fin, Providers: provs, DefaultProvider: s.Provider.Name()},
		inbox: &finalize.Inbox{Store: db, Finalizer: fin, Providers: provs, Pull: pull, Now: s.now},
	}
}

// work runs the inbox worker until nothing is due: the stored triggers
// are fetched and finalized (an error fails the test: the fake answers).
func (ps *paystate) work(t *testing.T) {
	t.Helper()
	for range 10 {
		n, err := ps.inbox.RunOnce(context.Background())
		if err != nil {
			t.Fatalf("inbox worker: %v", err)
		}
		if n == 0 {
			return
		}
	}
	t.Fatal("the inbox worker still has events due after 10 passes")
}

// trigger delivers, twice, a signed webhook of row m about p (a trigger:
// the fetch it causes tells the state).
func (ps *paystate) trigger(t *testing.T, m Mapping, p pay.Payment) {
	t.Helper()
	body, h := ps.s.sign(t, ps.s.event(m, p))
	for try := range 2 {
		if err := ps.deliver(t, body, h); err != nil {
			t.Fatalf("trigger %s delivery %d: %v", m.Type, try+1, err)
		}
	}
}

// hold makes the PSP hold p in the state kind k stands for, with p's
// amount, currency and reference.
func (ps *paystate) hold(t *testing.T, p pay.Payment, k Kind) {
	t.Helper()
	e := ps.s.event(Mapping{Kind: k}, p)
	ps.s.Trigger.Set(t, p.ProviderRef, e)
}

// create creates an open payment through finalize.Payments, as a
// merchant's POST /v1/payments does (the PSP called with the key derived
// from the payment).
func (ps *paystate) create(t *testing.T) pay.Payment {
	t.Helper()
	p := ps.s.openPayment()
	got, err := ps.pays.Create(context.Background(), finalize.CreateRequest{
		OrderID: p.OrderID, Amount: p.Amount, Currency: p.Currency, Customer: p.Customer,
		ReturnURL: p.ReturnURL, Flow: p.Flow, Description: p.Description,
	})
	if err != nil {
		t.Fatalf("create through finalize: %v", err)
	}
	ps.s.key(finalize.CreateKey(got))
	if got.Status.Terminal() || got.Status == pay.FinalizePending {
		t.Fatalf("payment %s is %s after create, want it open (Harness.OpenPayment)", got.ID, got.Status)
	}
	return got
}

// deliver hands a signed webhook to the inbox as POST /webhooks/<name>
// does, and returns Accept's error.
func (ps *paystate) deliver(t *testing.T, body []byte, h http.Header) error {
	t.Helper()
	_, _, err := ps.inbox.Accept(context.Background(), ps.s.Provider.Name(), body, h)
	return err
}

// record is what the store holds about a payment.
type record struct {
	p        pay.Payment
	steps    []pay.Step
	outbox   []pay.OutboxRecord
	reviewed bool
}

func (ps *paystate) record(t *testing.T, id string) record {
	t.Helper()
	var r record
	err := ps.db.View(context.Background(), func(tx store.Tx) (err error) {
		if r.p, err = tx.Payment(id); err != nil {
			return err
		}
		if r.steps, err = tx.Steps(id); err != nil {
			return err
		}
		if r.outbox, err = tx.OutboxForPayment(id); err != nil {
			return err
		}
		_, err = tx.Review(id)
		r.reviewed = err == nil
		if pay.ErrorCode(err) == pay.ENOTFOUND {
			err = nil
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// transitions counts the steps into st.
func (r record) transitions(st pay.Status) int {
	n := 0
	for _, s := range r.steps {
		if s.Kind == pay.StepTransition && s.To == st {
			n++
		}
	}
	return n
}

// announced counts the outbox records of status st.
func (r record) announced(st pay.Status) int {
	n := 0
	for _, o := range r.outbox {
		if o.Status == st {
			n++
		}
	}
	return n
}

// capturedOnce checks that the payment is captured by one transition
// with one outbox record, and not on the review queue, after what says.
func (r record) capturedOnce(t *testing.T, after string) {
	t.Helper()
	if got, want := r.p.Status, pay.Captured; got != want {
		t.Fatalf("Status=%s after %s, want %s", got, after, want)
	}
	if got := r.transitions(pay.Captured); got != 1 {
		t.Fatalf("%d transitions to captured, want 1 (%s)", got, after)
	}
	if got := r.announced(pay.Captured); got != 1 {
		t.Fatalf("%d outbox records of the capture, want 1 (%s)", got, after)
	}
	if r.reviewed {
		t.Fatalf("the payment went on the review queue (%s)", after)
	}
}

// testApplyOnce delivers every event of the mapping that announces the
// capture (and one that reports the payment open, where the wire format
// has one) for a payment created through finalize, in order and in
// reverse, each twice: one transition to captured and one outbox record
// of it, whatever the number and order.
func testApplyOnce(t *testing.T, s *suite) {
	if s.Trigger != nil {
		testApplyOncePulled(t, s)
		return
	}
	seq := s.rows(KindCaptured)
	for _, k := range []Kind{KindProcessing, KindRequiresAction} {
		if rows := s.rows(k); len(rows) > 0 {
			seq = append([]Mapping{rows[0]}, seq...)
			break
		}
	}
	for _, order := range []string{"InOrder", "Reversed"} {
		t.Run(order, func(t *testing.T) {
			ps := newPaystate(t, s)
			p := ps.create(t)
			rows := slices.Clone(seq)
			if order == "Reversed" {
				slices.Reverse(rows)
			}
			base := s.event(rows[0], p) // the references every event shares
			for i, m := range rows {
				e := s.event(m, p)
				e.ProviderRef, e.SecondRef = base.ProviderRef, base.SecondRef
				// Events carry their own time: the capture's is the latest.
				if m.Kind != KindCaptured {
					e.At = e.At.Add(-time.Minute)
				}
				body, h := s.sign(t, e)
				for try := range 2 {
					if err := ps.deliver(t, body, h); err != nil {
						t.Fatalf("event %d (%s) delivery %d: %v", i, m.Type, try+1, err)
					}
				}
			}
			ps.record(t, p.ID).capturedOnce(t, fmt.Sprintf("events %v, each twice", rows))
		})
	}
}

// testApplyOncePulled is testApplyOnce for a trigger-only wire format:
// the PSP holds the payment processing and a trigger is delivered (twice)
// and worked; then it holds it captured and every trigger row is
// delivered twice, in order and reversed, the worker run after each, and
// all of them once more. The fetches make one transition to captured and
// one outbox record of it.
func testApplyOncePulled(t *testing.T, s *suite) {
	for _, order := range []string{"InOrder", "Reversed"} {
		t.Run(order, func(t *testing.T) {
			ps := newPaystate(t, s)
			p := ps.create(t)
			rows := slices.Clone(s.rows(KindPull))
			if order == "Reversed" {
				slices.Reverse(rows)
			}
			ps.hold(t, p, KindProcessing)
			ps.trigger(t, rows[0], p)
			ps.work(t)
			if got := ps.record(t, p.ID).p.Status; got != pay.Processing {
				t.Fatalf("Status=%s after a trigger while the PSP holds the payment processing, want processing", got)
			}
			ps.hold(t, p, KindCaptured)
			for _, m := range rows {
				ps.trigger(t, m, p)
				ps.work(t)
			}
			for _, m := range rows {
				ps.trigger(t, m, p)
			}
			ps.work(t)
			ps.record(t, p.ID).capturedOnce(t, fmt.Sprintf("triggers %v, each four times", rows))
		})
	}
}

// testApplyEvidence delivers a capture whose amount, currency or provider
// reference is not the payment's: the payment goes on the review queue
// and is not captured, and nothing is announced.
func testApplyEvidence(t *testing.T, s *suite) {
	captured := s.rows(s.announces())[0]
	for _, tc := range []struct {
		name string
		edit func(*Event)
	}{
		{"Amount", func(e *Event) { e.Amount++ }},
		{"Currency", func(e *Event) {
			if e.Currency == "USD" {
				e.Currency = "GBP"
			} else {
				e.Currency = "USD"
			}
		}},
		{"Reference", func(e *Event) { e.ProviderRef += "x" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps := newPaystate(t, s)
			p := ps.create(t)
			if p.ProviderRef == "" {
				// Nothing known yet to contradict: an event tells it.
				p = ps.know(t, p)
			}
			e := s.event(captured, p)
			tc.edit(&e)
			if s.Trigger != nil {
				// The fetch after a trigger answers the contradiction.
				held := e
				held.Kind = KindCaptured
				s.Trigger.Set(t, p.ProviderRef, held)
				ps.trigger(t, captured, p)
				ps.work(t)
			} else {
				body, h := s.sign(t, e)
				if err := ps.deliver(t, body, h); err != nil {
					t.Fatal(err)
				}
			}
			r := ps.record(t, p.ID)
			if r.p.Status == pay.Captured || r.announced(pay.Captured) != 0 {
				t.Fatalf("a capture of %d %s, reference %s, captured payment %s (%d %s, %s)",
					e.Amount, e.Currency, e.ProviderRef, p.ID, p.Amount, p.Currency, p.ProviderRef)
			}
			if !r.reviewed {
				t.Fatalf("payment %s is %s and not on the review queue", p.ID, r.p.Status)
			}
		})
	}
}

// know delivers an event that reports p open with a reference, for a
// provider whose create gives none (report mode), and returns p with it.
func (ps *paystate) know(t *testing.T, p pay.Payment) pay.Payment {
	t.Helper()
	var open []Mapping
	for _, k := range []Kind{KindProcessing, KindRequiresAction} {
		open = append(open, ps.s.rows(k)...)
	}
	if len(open) == 0 {
		t.Fatal("psptest: the create gave no reference and the Mapping has no processing or requires_action row to give one")
	}
	e := ps.s.event(open[0], p)
	body, h := ps.s.sign(t, e)
	if err := ps.deliver(t, body, h); err != nil {
		t.Fatal(err)
	}
	r := ps.record(t, p.ID)
	if r.p.ProviderRef == "" {
		t.Fatalf("payment %s has no reference after event %s", p.ID, e.Type)
	}
	return r.p
}

// testApplyRefused hands the inbox a capture with one byte changed, and
// one signed longer ago than the tolerance: both are ESIGNATURE, and
// nothing is stored (no inbox record, the payment unchanged, nothing
// announced).
func testApplyRefused(t *testing.T, s *suite) {
	captured, ok := s.signedRow(t)
	if !ok {
		return
	}
	for _, name := range []string{"Forged", "Stale"} {
		t.Run(name, func(t *testing.T) {
			if name == "Stale" && s.Trigger != nil {
				t.Log("the wire format signs no time (Harness.Trigger): an old trigger is only asked about (WebhookErrTooOld)")
				return
			}
			ps := newPaystate(t, s)
			p := ps.create(t)
			before := ps.record(t, p.ID)
			e := s.event(captured, p)
			if name == "Stale" {
				e.At = e.At.Add(-s.tolerance() - time.Minute)
			}
			body, h := s.sign(t, e)
			if name == "Forged" {
				body = tamper(body)
			}
			wantCode(t, ps.deliver(t, body, h), pay.ESIGNATURE)

			after := ps.record(t, p.ID)
			if after.p.Version != before.p.Version || after.p.Status != before.p.Status ||
				len(after.steps) != len(before.steps) || len(after.outbox) != len(before.outbox) || after.reviewed {
				t.Fatalf("a refused webhook changed payment %s: %+v → %+v", p.ID, before, after)
			}
			err := ps.db.View(context.Background(), func(tx store.Tx) error {
				_, err := tx.InboxEvent(s.Provider.Name(), e.ID)
				return err
			})
			wantCode(t, err, pay.ENOTFOUND)
		})
	}
}
