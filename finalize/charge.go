package finalize

import (
	"context"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/paystate/paystate/internal/defaults"
	"github.com/paystate/paystate/internal/ids"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// Payments runs the merchant operations on a payment — create, report (the
// merchant's own PSP answer), refund and the resumption of a create that
// crashed midway — on the providers and the Finalizer, and answers the
// merchant's reads: one payment, the list, a payment's timeline and the
// ledger balances.
//
// A create stores the payment first (status created, version 1), then calls
// the PSP with a key derived from the payment ("charge-<payment_id>"), then
// finalizes the PSP's answer with the version read before the call. If the
// answer is lost (timeout, PSP error) the payment becomes finalize_pending:
// the PSP may have charged, and only PSP evidence (webhook, sweeper) or a
// human decides. The same holds for any failure after the PSP was called:
// if the answer cannot be finalized (a storage error, a ledger that
// refuses the posting) or contradicts the payment (finalize put it on the
// review queue), the payment becomes finalize_pending, never stays
// created. A retry of the same request resumes from the stored payment and
// repeats the PSP call with the same key, so the PSP cannot charge twice.
//
// A report (/sync) of a final status (captured, failed, refunded) is
// checked against the provider's status API first, when it has one: the
// report is applied only if the PSP says the same status. Otherwise nothing
// is applied, the payment goes on the review queue as sync_contradicted
// with the PSP's answer as evidence, and Report answers ECONFLICT (409): the
// merchant's code and the PSP disagree, and the PSP's word alone does not
// settle it either, so a human does. A status call that fails answers EPSP
// (502) and applies nothing. A report-mode provider (standard: Status is
// EUNSUPPORTED) has no other evidence, and its report is applied as it is.
type Payments struct {
	Store           store.Store
	Finalizer       *Finalizer
	Providers       map[string]pay.Provider
	DefaultProvider string
	PSPTimeout      time.Duration // bound on one PSP call; default 20s
	// Idempotency runs CreateOnce and RefundOnce under their keys; nil
	// means one over Store with the defaults.
	Idempotency *Idempotency
	Logger      zerolog.Logger
}

// CreateRequest is a request to create a payment.
type CreateRequest struct {
	OrderID   string
	Amount    int64
	Currency  string
	Customer  pay.Customer
	Provider  string // "" = the default provider
	ReturnURL string
	// Flow is how the provider is to take the payment ("" = its default;
	// see pay.Provider.Flow), Description what is paid for (optional).
	Flow        string
	Description string

	prov pay.Provider // set by Check: the request is valid for this provider
}

// Validate checks every field and names the first wrong one.
func (r CreateRequest) Validate() error {
	if err := pay.ValidateOrderID(r.OrderID); err != nil {
		return err
	}
	if err := pay.ValidateAmount(r.Amount); err != nil {
		return err
	}
	if err := pay.ValidateCurrency(r.Currency); err != nil {
		return err
	}
	if err := pay.ValidateText("customer.id", r.Customer.ID, 128); err != nil {
		return err
	}
	if err := pay.ValidateEmail("customer.email", r.Customer.Email); err != nil {
		return err
	}
	if err := pay.ValidateText("return_url", r.ReturnURL, 2048); err != nil {
		return err
	}
	if err := pay.ValidateText("description", r.Description, pay.MaxDescription); err != nil {
		return err
	}
	return pay.ValidateText("flow", r.Flow, 64)
}

// Check validates a create request against this service, its fields and
// its provider, and returns it ready for Create. It is the one validation
// of a create request: the HTTP adapter runs it before it claims the
// request's idempotency key (a request that cannot run consumes no key)
// and hands the result to Create, which checks only a request that did not
// come from Check. Change no field in between.
func (s *Payments) Check(req CreateRequest) (CreateRequest, error) {
	if err := req.Validate(); err != nil {
		return req, err
	}
	prov, err := s.provider(req.Provider)
	if err != nil {
		return req, err
	}
	// The flow is resolved once, here, and stored with the payment: a
	// resumed create takes the payment the same way after a restart with
	// another default.
	p := pay.Payment{OrderID: req.OrderID, Amount: req.Amount, Currency: req.Currency, Customer: req.Customer,
		Provider: prov.Name(), ReturnURL: req.ReturnURL, Flow: req.Flow, Description: req.Description}
	if req.Flow, err = prov.Flow(p); err != nil {
		return req, err
	}
	req.prov = prov
	return req, nil
}

// pspContext bounds one PSP call by PSPTimeout (default 20 s).
func (s *Payments) pspContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, defaults.Or(s.PSPTimeout, 20*time.Second))
}

// ChargeKey is the PSP idempotency key of a payment's charge.
func ChargeKey(paymentID string) string { return "charge-" + paymentID }

// CreateKey is the PSP idempotency key of p's create: CheckoutKey for a
// payment on a hosted page (pay.FlowCheckout), else ChargeKey.
func CreateKey(p pay.Payment) string {
	if p.Flow == pay.FlowCheckout {
		return CheckoutKey(p.ID)
	}
	return ChargeKey(p.ID)
}

// CheckoutKey is the PSP idempotency key of a payment's hosted checkout
// page (a Stripe Checkout Session).
func CheckoutKey(paymentID string) string { return "checkout-" + paymentID }

func (s *Payments) provider(name string) (pay.Provider, error) {
	if name == "" {
		name = s.DefaultProvider
	}
	p, ok := s.Providers[name]
	if !ok {
		return nil, pay.Errorf(pay.EUNKNOWNPROVIDER, "provider %q is not configured", name)
	}
	return p, nil
}

// Create stores a new payment, calls its provider and finalizes the answer.
// A request that did not come from Check is checked first. The HTTP API
// uses CreateOnce, the same under an idempotency key.
func (s *Payments) Create(ctx context.Context, req CreateRequest) (pay.Payment, error) {
	req, err := s.checked(req)
	if err != nil {
		return pay.Payment{}, err
	}
	var p pay.Payment
	if err := WriteTx(ctx, s.Store, func(tx Tx) (err error) { p, err = insertPayment(tx, req); return err }); err != nil {
		return pay.Payment{}, err
	}
	s.logCreated(p)
	return s.charge(ctx, req.prov, p, nil)
}

// checked is req checked (Check), unless it came from Check.
func (s *Payments) checked(req CreateRequest) (CreateRequest, error) {
	if req.prov != nil {
		return req, nil
	}
	return s.Check(req)
}

// Created is what CreateOnce did under its idempotency key: the payment
// created or resumed (not set for a replay), the claim and the key's
// record (for a replay, the answer to give again).
type Created struct {
	Payment pay.Payment
	Done
}

// CreateOnce is Create under an idempotency key (Idempotency.Do), in two
// commits. The first claims the key and stores the payment together (the
// key's record names the payment); the second finalizes the PSP's answer
// and stores the key's answer (status code and payment id, no body: a
// replay shows the payment's current view) with the payment's new
// version. A crash between the two leaves the key in flight with the
// payment on it, and the retry that takes the key over resumes the
// payment with the same PSP key.
func (s *Payments) CreateOnce(ctx context.Context, req CreateRequest, key IdemKey) (Created, error) {
	req, err := s.checked(req)
	if err != nil {
		return Created{}, err
	}
	var out Created
	var made pay.Payment // stored by Start, charged by Run
	out.Done, err = s.keys().Do(ctx, key, Op{
		Start: func(tx Tx, _, resumed string) (_ string, err error) {
			if made = (pay.Payment{}); resumed != "" {
				return resumed, nil
			}
			made, err = insertPayment(tx, req)
			return made.ID, err
		},
		Run: func(ctx context.Context, paymentID string, finish func(Tx) error) (err error) {
			// The key's answer goes into the transaction that finalizes
			// the PSP's answer; an answer that is not applied (review)
			// is not the request's.
			then := func(tx Tx, res pay.Result) error {
				if res.Rejected != "" {
					return nil
				}
				return finish(tx)
			}
			if made.ID == "" {
				out.Payment, err = s.resume(ctx, paymentID, then)
				return err
			}
			s.logCreated(made)
			out.Payment, err = s.charge(ctx, req.prov, made, then)
			return err
		},
	})
	return out, err
}

// keys is the idempotency key store of CreateOnce and RefundOnce.
func (s *Payments) keys() *Idempotency {
	if s.Idempotency != nil {
		return s.Idempotency
	}
	return &Idempotency{Store: s.Store}
}

// insertPayment stores a new payment from a checked request: status
// created, version 1, and its first timeline step.
func insertPayment(tx Tx, req CreateRequest) (pay.Payment, error) {
	now := tx.Now()
	p := pay.Payment{
		ID: ids.Payment(now), OrderID: req.OrderID, Amount: req.Amount, Currency: req.Currency,
		Customer: req.Customer, Provider: req.prov.Name(), ReturnURL: req.ReturnURL,
		Flow: req.Flow, Description: req.Description,
		Status: pay.Created, Version: 1, CreatedAt: now, UpdatedAt: now,
	}
	if err := tx.InsertPayment(p); err != nil {
		return pay.Payment{}, err
	}
	if err := tx.AppendStep(pay.Step{PaymentID: p.ID, At: now, Source: pay.SourceAPI, Kind: pay.StepCreated, To: pay.Created, Version: 1}); err != nil {
		return pay.Payment{}, err
	}
	return p, nil
}

func (s *Payments) logCreated(p pay.Payment) {
	s.Logger.Info().Str("payment_id", p.ID).Str("order_id", p.OrderID).Str("provider", p.Provider).Int64("amount", p.Amount).Str("currency", p.Currency).Msg("payment created")
}

// resume finishes a create whose request stopped midway: a payment still
// created or finalize_pending is charged again with the same key (the PSP
// answers the first charge instead of making a second), with then run in
// the transaction that finalizes the PSP's answer (see charge); any other
// payment is returned as it is.
func (s *Payments) resume(ctx context.Context, paymentID string, then func(Tx, pay.Result) error) (pay.Payment, error) {
	p, err := s.Get(ctx, paymentID)
	if err != nil {
		return pay.Payment{}, err
	}
	if p.Status != pay.Created && p.Status != pay.FinalizePending {
		return p, nil
	}
	prov, err := s.provider(p.Provider)
	if err != nil {
		return pay.Payment{}, err
	}
	s.Logger.Info().Str("payment_id", p.ID).Uint64("version", p.Version).Msg("resuming create")
	return s.charge(ctx, prov, p, then)
}

// charge calls the PSP for p (read at p.Version) and finalizes its answer.
// then, if not nil, runs in the transaction that finalizes it (or, if the
// answer could not be applied, the one that makes the payment
// finalize_pending), after Apply; its error rolls that transaction back.
func (s *Payments) charge(ctx context.Context, prov pay.Provider, p pay.Payment, then func(Tx, pay.Result) error) (pay.Payment, error) {
	cctx, cancel := s.pspContext(ctx)
	ans, err := prov.Create(cctx, p, CreateKey(p))
	cancel()

	obs := pay.Observation{PaymentID: p.ID, Source: pay.SourceSync, ExpectedVersion: p.Version}
	if pay.ErrorCode(err) == pay.EINVALID {
		// The PSP answered and refused the request (HTTP 400): that is
		// evidence that nothing was charged.
		s.Logger.Warn().Str("payment_id", p.ID).Str("error", pay.ErrorMessage(err)).Msg("charge refused by the PSP")
		obs.Status = pay.Failed
		obs.Note = "charge refused by the PSP: " + pay.ErrorMessage(err)
	} else if err != nil {
		// The charge may have happened: only PSP evidence may finish it.
		s.Logger.Warn().Str("payment_id", p.ID).Str("error", pay.ErrorMessage(err)).Msg("charge answer lost")
		obs.Status = pay.FinalizePending
		obs.Note = "charge answer lost: " + pay.ErrorMessage(err)
	} else {
		obs.Status, obs.ProviderRef, obs.SecondRef = ans.Status, ans.ProviderRef, ans.SecondRef
		obs.ClientSecret, obs.RedirectURL = ans.ClientSecret, ans.RedirectURL
		obs.Amount, obs.Currency = ans.Amount, ans.Currency
		if obs.Status == p.Status && obs.ProviderRef == "" && obs.ClientSecret == "" && obs.RedirectURL == "" {
			return p, nil // report mode: nothing happened at a PSP
		}
	}
	res, err := s.Finalizer.finalize(ctx, obs, nil, then)
	switch {
	case err != nil:
		// The PSP was called; what it did is not recorded. The payment
		// must not stay created: finalize_pending makes it the sweeper's.
		s.Logger.Error().Err(err).Str("payment_id", p.ID).Str("observed", string(obs.Status)).Msg("finalize charge answer")
		return s.pending(ctx, p, "the PSP's answer could not be recorded: "+pay.ErrorMessage(err), then)
	case res.Rejected != "":
		// The answer contradicts the payment (on the review queue now):
		// the PSP may have charged, so the payment waits for evidence.
		return s.pending(ctx, res.Payment, "the PSP's answer was not applied: "+res.Rejected, then)
	}
	return res.Payment, nil
}

// pending finalizes p as finalize_pending after a PSP call whose answer was
// not applied. A payment that has moved on meanwhile (a webhook finished
// it) is left as it is: finalize_pending is stale then.
func (s *Payments) pending(ctx context.Context, p pay.Payment, note string, then func(Tx, pay.Result) error) (pay.Payment, error) {
	res, err := s.Finalizer.finalize(ctx, pay.Observation{
		PaymentID: p.ID, Source: pay.SourceSync, Status: pay.FinalizePending, ExpectedVersion: p.Version, Note: note,
	}, nil, then)
	if err != nil {
		return pay.Payment{}, fmt.Errorf("finalize charge: %w", err)
	}
	return res.Payment, nil
}

// ReportRequest is the merchant's report of a PSP answer (/sync).
type ReportRequest struct {
	Status          pay.Status
	ProviderRef     string
	ClientSecret    string
	RedirectURL     string
	ExpectedVersion uint64
}

// Report finalizes a PSP answer the merchant's own code received. A final
// status is first checked against the provider's status API (see the
// package documentation): a contradiction is ECONFLICT and puts the payment
// on the review queue; a failed status call is EPSP. A report that
// finalize rejects (a provider_ref bound to another payment) is ECONFLICT
// too, the payment being on the review queue.
func (s *Payments) Report(ctx context.Context, paymentID string, r ReportRequest) (pay.Result, error) {
	if !r.Status.Valid() {
		return pay.Result{}, pay.Invalidf("status", "status %q is not a payment status", r.Status)
	}
	// What the report carries is stored as it is and shown to the
	// merchant's client: text, as for a create's fields (a NUL, a control
	// character or bytes not UTF-8 would be stored by bbolt and refused by
	// PostgreSQL).
	for _, f := range []struct {
		name, v string
		max     int
	}{{"provider_ref", r.ProviderRef, 255}, {"client_secret", r.ClientSecret, 2048}, {"redirect_url", r.RedirectURL, 2048}} {
		if err := pay.ValidateText(f.name, f.v, f.max); err != nil {
			return pay.Result{}, err
		}
	}
	obs := pay.Observation{
		PaymentID: paymentID, Source: pay.SourceReport, Status: r.Status,
		ProviderRef: r.ProviderRef, ClientSecret: r.ClientSecret, RedirectURL: r.RedirectURL,
		ExpectedVersion: r.ExpectedVersion,
	}
	if r.Status.Terminal() {
		ans, checked, err := s.checkReport(ctx, paymentID, r.Status)
		if err != nil {
			return pay.Result{}, err
		}
		if checked {
			// The PSP confirmed the status: what it says the payment is
			// for is evidence too.
			obs.Amount, obs.Currency = ans.Amount, ans.Currency
			if obs.ProviderRef == "" {
				obs.ProviderRef = ans.ProviderRef
			}
			obs.Note = "confirmed by the PSP: " + ans.Raw
		}
	}
	res, err := s.Finalizer.Finalize(ctx, obs)
	if err != nil {
		return pay.Result{}, err
	}
	if res.Rejected != "" {
		return pay.Result{}, pay.Errorf(pay.ECONFLICT, "the report contradicts payment %s (%s): nothing applied, the payment is on the review queue", paymentID, res.Rejected)
	}
	return res, nil
}

// checkReport asks the payment's provider for its status before a report of
// the final status st is applied. It returns the PSP's answer and true if
// the PSP says st; false with no error if the provider has no status API
// (report mode); EPSP if the call fails; and ECONFLICT, after putting the
// payment on the review queue (sync_contradicted) with the answer as
// evidence, if the PSP says anything else.
func (s *Payments) checkReport(ctx context.Context, paymentID string, st pay.Status) (pay.PSPResult, bool, error) {
	p, err := s.Get(ctx, paymentID)
	if err != nil {
		return pay.PSPResult{}, false, err
	}
	prov, err := s.provider(p.Provider)
	if err != nil {
		return pay.PSPResult{}, false, err
	}
	cctx, cancel := s.pspContext(ctx)
	ans, err := prov.Status(cctx, p)
	cancel()
	switch code := pay.ErrorCode(err); {
	case code == pay.EUNSUPPORTED:
		return pay.PSPResult{}, false, nil // report mode: the report is the evidence
	case err != nil:
		s.Logger.Warn().Str("payment_id", p.ID).Str("error", pay.ErrorMessage(err)).Msg("status check of a report failed")
		return pay.PSPResult{}, false, pay.Errorf(pay.EPSP, "the PSP's status API did not answer, so the report of %s was not applied: %s", st, pay.ErrorMessage(err))
	case ans.Found && ans.Status == st:
		return ans, true, nil
	}

	// The PSP contradicts the report: a human decides.
	said := "does not know the payment"
	if ans.Found {
		said = "says " + string(ans.Status)
	}
	note := fmt.Sprintf("the merchant reported %s; the PSP's status API %s", st, said)
	err = WriteTx(ctx, s.Store, func(tx Tx) error {
		cur, err := tx.Payment(p.ID)
		if err != nil {
			return err
		}
		a := pay.PSPAnswer{PaymentID: cur.ID, Provider: cur.Provider, Status: ans.Status, Found: ans.Found, Raw: ans.Raw}
		if err := tx.PutPSPAnswer(a); err != nil {
			return err
		}
		_, err = QueueReview(tx, pay.ReviewItem{
			PaymentID: cur.ID, Reason: pay.ReasonSyncContradicted, Provider: cur.Provider, ProviderRef: cur.ProviderRef,
			Observed: st, Note: note, LastPSP: AnswerText(a),
		}, pay.SourceReport)
		return err
	})
	if err != nil {
		return pay.PSPResult{}, false, fmt.Errorf("review contradicted report: %w", err)
	}
	s.Logger.Warn().Str("payment_id", p.ID).Str("reported", string(st)).Str("psp_status", string(ans.Status)).Bool("found", ans.Found).
		Str("reason", pay.ReasonSyncContradicted).Msg("report contradicted by the PSP: on the review queue")
	return pay.PSPResult{}, false, pay.Errorf(pay.ECONFLICT, "the PSP contradicts the report: it %s, not %s; nothing applied, payment %s is on the review queue (%s)", said, st, p.ID, pay.ReasonSyncContradicted)
}

// Get returns one payment.
func (s *Payments) Get(ctx context.Context, id string) (p pay.Payment, err error) {
	err = ReadTx(ctx, s.Store, func(tx Tx) error {
		p, err = tx.Payment(id)
		return err
	})
	return p, err
}

// List returns a page of payments, newest first, and the cursor of the
// next page ("" at the end).
func (s *Payments) List(ctx context.Context, f pay.PaymentFilter) (list []pay.Payment, next string, err error) {
	err = ReadTx(ctx, s.Store, func(tx Tx) error {
		list, next, err = tx.ListPayments(f)
		return err
	})
	return list, next, err
}

// Timeline returns a payment's timeline in order; ENOTFOUND for an unknown
// payment.
func (s *Payments) Timeline(ctx context.Context, id string) (steps []pay.Step, err error) {
	err = ReadTx(ctx, s.Store, func(tx Tx) error {
		if _, err := tx.Payment(id); err != nil {
			return err
		}
		steps, err = tx.Steps(id)
		return err
	})
	return steps, err
}

// Balances returns the ledger balance of every account and currency, as
// the transitions of payments posted them.
func (s *Payments) Balances(ctx context.Context) (bs []pay.Balance, err error) {
	err = ReadTx(ctx, s.Store, func(tx Tx) error {
		bs, err = tx.LedgerBalances()
		return err
	})
	return bs, err
}
