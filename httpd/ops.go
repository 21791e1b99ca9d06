package httpd

import (
	"context"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/paystate/paystate/pay"
)

// Ledger is what GET /v1/ledger/balances and GET /v1/ledger/revenue call
// (finalize.Payments).
type Ledger interface {
	// Balances returns the balance of every account and currency.
	Balances(ctx context.Context) ([]pay.Balance, error)
	// Revenue returns the captures, refunds and net of each UTC day in
	// [from, before) per currency, oldest first (GET /v1/ledger/revenue).
	Revenue(ctx context.Context, from, before time.Time) ([]pay.DayRevenue, error)
}

func (s *Server) handleHealthz(rc *fasthttp.RequestCtx, _ []string) error {
	writeJSON(rc, fasthttp.StatusOK, map[string]string{"status": "ok"})
	return nil
}

func (s *Server) handleLedgerBalances(rc *fasthttp.RequestCtx, _ []string) error {
	ctx, cancel := s.requestContext()
	defer cancel()
	bs, err := s.Ledger.Balances(ctx)
	if err != nil {
		return err
	}
	type balanceJSON struct {
		Account  string `json:"account"`
		Currency string `json:"currency"`
		Amount   int64  `json:"amount"`
	}
	writeList(rc, bs, func(b pay.Balance) balanceJSON { return balanceJSON{b.Account, b.Currency, b.Amount} })
	return nil
}
