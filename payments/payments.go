// Package payments holds the merchant operations on a payment — create,
// report (the merchant's own PSP answer), refund and the resumption of a
// create that crashed midway — built on the providers and finalize.
//
// A create stores the payment first (status created, version 1), then calls
// the PSP with a key derived from the payment ("charge-<payment_id>"), then
// finalizes the PSP's answer with the version read before the call. If the
// answer is lost (timeout, PSP error) the payment becomes finalize_pending:
// the PSP may have charged, and only PSP evidence (webhook, sweeper) or a
// human decides. A retry of the same request resumes from the stored
// payment and repeats the PSP call with the same key, so the PSP cannot
// charge twice.
package payments

import (
	"context"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/ids"
	"github.com/paystate/paystate/pay"
)

// Service runs the merchant operations.
type Service struct {
	Store           pay.Store
	Finalizer       *finalize.Finalizer
	Providers       map[string]pay.Provider
	DefaultProvider string
	PSPTimeout      time.Duration // bound on one PSP call; default 20s
	Logger          zerolog.Logger
}

// CreateRequest is a validated request to create a payment.
type CreateRequest struct {
	OrderID   string
	Amount    int64
	Currency  string
	Customer  pay.Customer
	Provider  string // "" = the default provider
	ReturnURL string
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
	return nil
}

// Check validates a create request against this service: its fields and
// its provider.
func (s *Service) Check(req CreateRequest) error {
	if err := req.Validate(); err != nil {
		return err
	}
	_, err := s.provider(req.Provider)
	return err
}

// pspContext bounds one PSP call by PSPTimeout (default 20 s).
func (s *Service) pspContext(ctx context.Context) (context.Context, context.CancelFunc) {
	timeout := s.PSPTimeout
	if timeout <= 0 {
		timeout = 20 * time.Second
	}
	return context.WithTimeout(ctx, timeout)
}

// ChargeKey is the PSP idempotency key of a payment's charge.
func ChargeKey(paymentID string) string { return "charge-" + paymentID }

// RefundKey is the PSP idempotency key of a payment's refund.
func RefundKey(paymentID string) string { return "refund-" + paymentID }

func (s *Service) provider(name string) (pay.Provider, error) {
	if name == "" {
		name = s.DefaultProvider
	}
	p, ok := s.Providers[name]
	if !ok {
		return nil, pay.Errorf(pay.EINVALID, "provider %q is not configured", name)
	}
	return p, nil
}

// Create stores a new payment, calls its provider and finalizes the answer.
// link, if not nil, runs in the transaction that stores the payment (the
// idempotency key records the payment id there, so a retry after a crash
// finds it).
func (s *Service) Create(ctx context.Context, req CreateRequest, link func(tx pay.Tx, p pay.Payment) error) (pay.Payment, error) {
	if err := s.Check(req); err != nil {
		return pay.Payment{}, err
	}
	prov, err := s.provider(req.Provider)
	if err != nil {
		return pay.Payment{}, err
	}

	// Store the payment before anything leaves the process.
	var p pay.Payment
	err = s.Store.Update(ctx, func(tx pay.Tx) error {
		now := tx.Now()
		p = pay.Payment{
			ID: ids.Payment(now), OrderID: req.OrderID, Amount: req.Amount, Currency: req.Currency,
			Customer: req.Customer, Provider: prov.Name(), ReturnURL: req.ReturnURL,
			Status: pay.Created, Version: 1, CreatedAt: now, UpdatedAt: now,
		}
		if err := tx.InsertPayment(p); err != nil {
			return err
		}
		if err := tx.AppendStep(pay.Step{PaymentID: p.ID, At: now, Source: pay.SourceAPI, Kind: pay.StepCreated, To: pay.Created, Version: 1}); err != nil {
			return err
		}
		if link != nil {
			return link(tx, p)
		}
		return nil
	})
	if err != nil {
		return pay.Payment{}, err
	}
	s.Logger.Info().Str("payment_id", p.ID).Str("order_id", p.OrderID).Str("provider", p.Provider).Int64("amount", p.Amount).Str("currency", p.Currency).Msg("payment created")
	return s.charge(ctx, prov, p)
}

// Resume finishes a create whose request stopped midway: a payment still
// created or finalize_pending is charged again with the same key (the PSP
// answers the first charge instead of making a second); any other payment
// is returned as it is.
func (s *Service) Resume(ctx context.Context, paymentID string) (pay.Payment, error) {
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
	return s.charge(ctx, prov, p)
}

// charge calls the PSP for p (read at p.Version) and finalizes its answer.
func (s *Service) charge(ctx context.Context, prov pay.Provider, p pay.Payment) (pay.Payment, error) {
	cctx, cancel := s.pspContext(ctx)
	ans, err := prov.Create(cctx, p, ChargeKey(p.ID))
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
		obs.Status, obs.ProviderRef = ans.Status, ans.ProviderRef
		obs.ClientSecret, obs.RedirectURL = ans.ClientSecret, ans.RedirectURL
		if obs.Status == p.Status && obs.ProviderRef == "" && obs.ClientSecret == "" && obs.RedirectURL == "" {
			return p, nil // report mode: nothing happened at a PSP
		}
	}
	res, err := s.Finalizer.Finalize(ctx, obs)
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

// Report finalizes a PSP answer the merchant's own code received.
func (s *Service) Report(ctx context.Context, paymentID string, r ReportRequest) (pay.Result, error) {
	if !r.Status.Valid() {
		return pay.Result{}, pay.Errorf(pay.EINVALID, "status %q is not a payment status", r.Status)
	}
	if err := pay.ValidateText("provider_ref", r.ProviderRef, 255); err != nil {
		return pay.Result{}, err
	}
	return s.Finalizer.Finalize(ctx, pay.Observation{
		PaymentID: paymentID, Source: pay.SourceReport, Status: r.Status,
		ProviderRef: r.ProviderRef, ClientSecret: r.ClientSecret, RedirectURL: r.RedirectURL,
		ExpectedVersion: r.ExpectedVersion,
	})
}

// Get returns one payment.
func (s *Service) Get(ctx context.Context, id string) (p pay.Payment, err error) {
	err = s.Store.View(ctx, func(tx pay.Tx) error {
		p, err = tx.Payment(id)
		return err
	})
	return p, err
}

// Refund refunds a captured payment in full through its provider, with the
// key "refund-<payment_id>", and finalizes the answer. A payment already
// refunded is returned as it is; any other status is a conflict.
func (s *Service) Refund(ctx context.Context, paymentID string) (pay.Payment, error) {
	p, err := s.Get(ctx, paymentID)
	if err != nil {
		return pay.Payment{}, err
	}
	switch p.Status {
	case pay.Refunded:
		return p, nil
	case pay.Captured:
	default:
		return pay.Payment{}, pay.Errorf(pay.ECONFLICT, "payment %s is %s; only a captured payment can be refunded", p.ID, p.Status)
	}
	prov, err := s.provider(p.Provider)
	if err != nil {
		return pay.Payment{}, err
	}
	cctx, cancel := s.pspContext(ctx)
	ans, err := prov.Refund(cctx, p, RefundKey(p.ID))
	cancel()
	if err != nil {
		if c := pay.ErrorCode(err); c == pay.EUNSUPPORTED || c == pay.EINVALID || c == pay.ECONFLICT {
			return pay.Payment{}, err
		}
		// The refund may have happened; its webhook or a retry with the
		// same key will tell. The payment stays captured until then.
		if rerr := s.Store.Update(ctx, func(tx pay.Tx) error {
			return finalize.Record(tx, p.ID, pay.SourceSync, pay.StepPSPError, "", "", "refund answer lost: "+pay.ErrorMessage(err))
		}); rerr != nil {
			s.Logger.Warn().Err(rerr).Str("payment_id", p.ID).Msg("record refund error")
		}
		return pay.Payment{}, pay.Errorf(pay.EPSP, "the PSP did not confirm the refund: %s", pay.ErrorMessage(err))
	}
	res, err := s.Finalizer.Finalize(ctx, pay.Observation{
		PaymentID: p.ID, Source: pay.SourceSync, Status: ans.Status, ProviderRef: ans.ProviderRef,
		ExpectedVersion: p.Version, Note: "refund",
	})
	if err != nil {
		return pay.Payment{}, fmt.Errorf("finalize refund: %w", err)
	}
	return res.Payment, nil
}
