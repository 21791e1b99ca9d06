package reconcile

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	stripego "github.com/stripe/stripe-go/v85"

	"github.com/paystate/paystate/pay"
)

// StripePageSize is how many balance transactions Stripe is asked for a
// page.
const StripePageSize = 100

// Stripe reads settlement lines from Stripe's balance transactions API
// (GET /v1/balance_transactions, through stripe-go, paged).
type Stripe struct {
	SecretKey string // sk_...; never logged
	APIBase   string // "" = Stripe's own; stripe-mock in tests
	// HTTPClient is the client of the calls; default one with a 30 s
	// timeout.
	HTTPClient *http.Client
}

// Lines returns the balance transactions created at or after since, in
// the order Stripe lists them (newest first), each read as a settlement
// line: amounts as Stripe gives them (minor units), the charge matched
// by its PaymentIntent (the source charge is expanded to learn it).
// Balance transactions name no payout, so a line read here posts its fee
// only; a payout reconciliation report imported later posts its payout.
func (s Stripe) Lines(ctx context.Context, since time.Time) ([]pay.SettlementLine, error) {
	if s.SecretKey == "" {
		return nil, pay.Invalidf("providers.stripe.secret_key", "a Stripe secret key is required")
	}
	hc := s.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	bc := &stripego.BackendConfig{HTTPClient: hc, LeveledLogger: &stripego.LeveledLogger{Level: stripego.LevelNull}}
	if s.APIBase != "" {
		bc.URL = stripego.String(s.APIBase)
	}
	client := stripego.NewClient(s.SecretKey, stripego.WithBackends(&stripego.Backends{API: stripego.GetBackendWithConfig(stripego.APIBackend, bc)}))
	params := &stripego.BalanceTransactionListParams{CreatedRange: &stripego.RangeQueryParams{GreaterThanOrEqual: since.Unix()}}
	params.Limit = stripego.Int64(StripePageSize)
	params.AddExpand("data.source")
	var out []pay.SettlementLine
	for bt, err := range client.V1BalanceTransactions.List(ctx, params).All(ctx) {
		if err != nil {
			return nil, fmt.Errorf("stripe balance transactions: %w", err)
		}
		l, err := stripeTxLine(bt)
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, nil
}

// stripeTxLine reads one balance transaction.
func stripeTxLine(bt *stripego.BalanceTransaction) (pay.SettlementLine, error) {
	l := pay.SettlementLine{
		ID: bt.ID, Category: string(bt.ReportingCategory), Currency: strings.ToUpper(string(bt.Currency)),
		Amount: bt.Amount, Fee: bt.Fee,
	}
	l.Kind = stripeKinds[l.Category]
	if bt.AvailableOn > 0 {
		l.AvailableOn = time.Unix(bt.AvailableOn, 0).UTC()
	}
	switch {
	case l.ID == "":
		return l, pay.Invalidf("id", "stripe balance transaction without an id")
	case len(l.Currency) != 3:
		return l, pay.Invalidf("currency", "stripe balance transaction %s: currency %q", l.ID, bt.Currency)
	case bt.Net != l.Net():
		return l, pay.Invalidf("net", "stripe balance transaction %s: net %s is not amount %s minus fee %s", l.ID,
			pay.FormatAmount(bt.Net, l.Currency), pay.FormatAmount(bt.Amount, l.Currency), pay.FormatAmount(bt.Fee, l.Currency))
	}
	if src := bt.Source; src != nil {
		l.ProviderRef = src.ID
		if l.Kind == pay.SettleCharge && src.Charge != nil && src.Charge.PaymentIntent != nil && src.Charge.PaymentIntent.ID != "" {
			l.ProviderRef = src.Charge.PaymentIntent.ID
		}
	}
	return l, nil
}
