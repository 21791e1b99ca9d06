package finalize

import (
	"time"

	"github.com/paystate/paystate/pay"
)

// View is the client view of a payment: what the merchant API and the
// dashboard may show. It is the one place that decides whether a client
// secret or redirect URL leaves paystate: they are kept only while the
// payment is created, processing or requires_action, and every response
// about a payment is built from a View.
type View struct {
	ID          string
	OrderID     string
	Amount      int64
	Currency    string
	Status      pay.Status
	Terminal    bool
	Version     uint64
	Provider    string
	ProviderRef string
	Flow        string // pay.Payment.Flow
	Customer    pay.Customer
	// AmountRefunded is the sum of the succeeded refunds;
	// AmountRefundable what may still be refunded (the amount less the
	// succeeded and pending refunds; 0 unless captured, and 0 while its
	// dispute is open or lost).
	AmountRefunded   int64
	AmountRefundable int64
	// Dispute is the status of the payment's dispute, "" if it has none.
	Dispute   pay.DisputeStatus
	CreatedAt time.Time
	UpdatedAt time.Time

	clientSecret string
	redirectURL  string
}

// NewView returns the client view of p.
func NewView(p pay.Payment) View {
	v := View{
		ID: p.ID, OrderID: p.OrderID, Amount: p.Amount, Currency: p.Currency,
		Status: p.Status, Terminal: p.Status.Terminal(), Version: p.Version,
		Provider: p.Provider, ProviderRef: p.ProviderRef, Flow: p.Flow, Customer: p.Customer,
		CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt,
		AmountRefunded: p.AmountRefunded, Dispute: p.Dispute,
	}
	if p.Status == pay.Captured {
		v.AmountRefundable = p.Refundable()
	}
	if p.Status.ShowsSecrets() {
		v.clientSecret, v.redirectURL = p.ClientSecret, p.RedirectURL
	}
	return v
}

// ClientSecret returns the client secret and whether it may be shown. It is
// never shown for a payment outside created, processing and requires_action.
func (v View) ClientSecret() (string, bool) {
	return v.clientSecret, v.clientSecret != "" && v.Status.ShowsSecrets()
}

// RedirectURL returns the redirect URL and whether it may be shown, under
// the same rule as ClientSecret.
func (v View) RedirectURL() (string, bool) {
	return v.redirectURL, v.redirectURL != "" && v.Status.ShowsSecrets()
}
