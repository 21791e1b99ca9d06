package httpd

import (
	"time"

	"github.com/valyala/fasthttp"

	"github.com/paystate/paystate/pay"
)

// Revenue: GET /v1/ledger/revenue?from=YYYY-MM-DD&to=YYYY-MM-DD answers,
// per UTC day and currency, what the ledger's journal says was captured,
// refunded, lost to disputes and taken in PSP fees that day and the net
// (captured - refunded - dispute losses - fees), in minor units, oldest
// day first. Both dates are UTC days and inclusive; to
// defaults to today, from to 29 days before to, and a range holds at most
// MaxRevenueDays days. Days with none of these are left out. It reads the whole journal (finalize.Payments.Revenue): it is for
// a person looking at the dashboard, not for polling.

// MaxRevenueDays is the longest range GET /v1/ledger/revenue answers.
const MaxRevenueDays = 366

// revenueJSON is the answer of GET /v1/ledger/revenue.
type revenueJSON struct {
	From string           `json:"from"`
	To   string           `json:"to"`
	Data []revenueDayJSON `json:"data"`
}

// revenueDayJSON is one day and currency.
type revenueDayJSON struct {
	Date     string `json:"date"`
	Currency string `json:"currency"`
	Captured int64  `json:"captured"`
	Refunded int64  `json:"refunded"`
	// DisputeLosses and Fees are counted positive; Net subtracts them.
	DisputeLosses int64 `json:"dispute_losses"`
	Fees          int64 `json:"fees"`
	Net           int64 `json:"net"`
}

func (s *Server) handleRevenue(rc *fasthttp.RequestCtx, _ []string) error {
	now := s.Now().UTC()
	to, err := queryDay(rc, "to", time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC))
	if err != nil {
		return err
	}
	from, err := queryDay(rc, "from", to.AddDate(0, 0, -29))
	if err != nil {
		return err
	}
	switch days := int(to.Sub(from)/(24*time.Hour)) + 1; {
	case days < 1:
		return pay.Invalidf("from", "from (%s) is after to (%s)", from.Format(time.DateOnly), to.Format(time.DateOnly))
	case days > MaxRevenueDays:
		return pay.Invalidf("from", "the range holds %d days, at most %d are answered", days, MaxRevenueDays)
	}
	ctx, cancel := s.requestContext()
	defer cancel()
	rs, err := s.Ledger.Revenue(ctx, from, to.AddDate(0, 0, 1))
	if err != nil {
		return err
	}
	out := revenueJSON{From: from.Format(time.DateOnly), To: to.Format(time.DateOnly), Data: make([]revenueDayJSON, 0, len(rs))}
	for _, r := range rs {
		out.Data = append(out.Data, revenueDayJSON{
			Date: r.Day.Format(time.DateOnly), Currency: r.Currency,
			Captured: r.Captured, Refunded: r.Refunded, DisputeLosses: r.DisputeLosses, Fees: r.Fees, Net: r.Net,
		})
	}
	writeJSON(rc, fasthttp.StatusOK, out)
	return nil
}

// queryDay reads a UTC day (YYYY-MM-DD) from the query parameter param,
// def when it is absent.
func queryDay(rc *fasthttp.RequestCtx, param string, def time.Time) (time.Time, error) {
	v := string(rc.QueryArgs().Peek(param))
	if v == "" {
		return def, nil
	}
	d, err := time.Parse(time.DateOnly, v)
	if err != nil {
		return time.Time{}, pay.Invalidf(param, "%s must be a date like 2025-03-01, got %q", param, truncate(v, 64))
	}
	return d, nil
}
