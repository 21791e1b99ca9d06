package httpd

import (
	"context"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"

	"github.com/paystate/paystate/pay"
)

// Ledger is what GET /v1/ledger/balances calls (finalize.Payments).
type Ledger interface {
	// Balances returns the balance of every account and currency.
	Balances(ctx context.Context) ([]pay.Balance, error)
}

func (s *Server) handleHealthz(rc *fasthttp.RequestCtx, _ []string) error {
	writeJSON(rc, fasthttp.StatusOK, map[string]string{"status": "ok"})
	return nil
}

func (s *Server) handleReadyz(rc *fasthttp.RequestCtx, _ []string) error {
	if s.Ready != nil {
		if err := s.Ready(); err != nil {
			return pay.Errorf(pay.EUNAVAILABLE, "not ready: %s", err.Error())
		}
	}
	writeJSON(rc, fasthttp.StatusOK, map[string]string{"status": "ready"})
	return nil
}

// handleMetrics exposes every metric in the Prometheus text format. It needs
// no API key: metrics carry counts, never payment data or secrets.
func (s *Server) handleMetrics(rc *fasthttp.RequestCtx, _ []string) error {
	rc.Response.Header.SetContentType("text/plain; version=0.0.4; charset=utf-8")
	metrics.WritePrometheus(rc, true)
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
