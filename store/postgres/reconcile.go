package postgres

// Settlement reconciliation: the settlements table (matched and posted
// lines of settlement reports) and recon_runs (the runs, their unmatched
// items as a JSON array).

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// settlementCols are the columns scanSettlement reads, in its order.
const settlementCols = `provider, id, kind, payment_id, provider_ref, amount, fee, currency, payout_id, run_id, created_at, updated_at`

// settlementOrder orders settlements as the bbolt store's keys
// str(provider) ‖ id do.
const settlementOrder = `octet_length(provider), provider, id`

// scanSettlement reads the settlementCols of a row.
func scanSettlement(r pgx.Row) (pay.Settlement, error) {
	var (
		s                pay.Settlement
		created, updated int64
	)
	err := r.Scan(&s.Provider, &s.ID, &s.Kind, &s.PaymentID, &s.ProviderRef, &s.Amount, &s.Fee, &s.Currency, &s.PayoutID, &s.RunID, &created, &updated)
	s.CreatedAt, s.UpdatedAt = fromNS(created), fromNS(updated)
	return s, err
}

// PutSettlement stores s under (s.Provider, s.ID), replacing the one
// before; a settlement of a payment needs the payment stored.
func (t *tx) PutSettlement(s pay.Settlement) error {
	if err := checkSettlement(t, s); err != nil {
		return err
	}
	e := enc{what: "settlement " + s.ID}
	args := []any{s.Provider, s.ID, string(s.Kind), s.PaymentID, s.ProviderRef, s.Amount, s.Fee, s.Currency, s.PayoutID, s.RunID,
		e.stamp(s.CreatedAt), e.stamp(s.UpdatedAt)}
	if e.err != nil {
		return e.err
	}
	_, err := t.exec("put settlement", `INSERT INTO settlements (`+settlementCols+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
		ON CONFLICT (provider, id) DO UPDATE SET kind = excluded.kind, payment_id = excluded.payment_id,
			provider_ref = excluded.provider_ref, amount = excluded.amount, fee = excluded.fee, currency = excluded.currency,
			payout_id = excluded.payout_id, run_id = excluded.run_id, created_at = excluded.created_at, updated_at = excluded.updated_at`, args...)
	return err
}

// ClaimSettlement stores s if nothing is stored under (s.Provider, s.ID)
// and reports true, else returns the stored settlement. The claim is
// the insert itself (ON CONFLICT DO NOTHING): a transaction that
// inserts the same key waits for the one that inserted it first and,
// if that one commits, inserts nothing; under READ COMMITTED the read
// that follows sees what it committed. A read before the write (the
// upsert of PutSettlement) would let both post.
func (t *tx) ClaimSettlement(s pay.Settlement) (pay.Settlement, bool, error) {
	if err := checkSettlement(t, s); err != nil {
		return pay.Settlement{}, false, err
	}
	e := enc{what: "settlement " + s.ID}
	args := []any{s.Provider, s.ID, string(s.Kind), s.PaymentID, s.ProviderRef, s.Amount, s.Fee, s.Currency, s.PayoutID, s.RunID,
		e.stamp(s.CreatedAt), e.stamp(s.UpdatedAt)}
	if e.err != nil {
		return pay.Settlement{}, false, e.err
	}
	_, inserted, err := queryOne(t, "claim settlement", `INSERT INTO settlements (`+settlementCols+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
		ON CONFLICT (provider, id) DO NOTHING RETURNING id`, func(r pgx.Row) (id string, err error) { return id, r.Scan(&id) }, args...)
	if err != nil {
		return pay.Settlement{}, false, err
	}
	if inserted {
		return s, true, nil
	}
	old, err := t.Settlement(s.Provider, s.ID)
	return old, false, err
}

// ClaimSettlementPayout sets the stored settlement's payout if it has
// none: one UPDATE whose condition PostgreSQL checks again on the row a
// concurrent transaction changed, so of two claims one sets it.
func (t *tx) ClaimSettlementPayout(provider, id, payoutID string, at time.Time) (bool, error) {
	if payoutID == "" {
		return false, nil
	}
	if err := pay.ValidateText("payout_id", payoutID, pay.MaxStoredPart); err != nil {
		return false, err
	}
	e := enc{what: "settlement " + id}
	stamp := e.stamp(at)
	if e.err != nil {
		return false, e.err
	}
	_, set, err := queryOne(t, "claim settlement payout", `UPDATE settlements SET payout_id = $3, updated_at = $4
		WHERE provider = $1 AND id = $2 AND payout_id = '' RETURNING id`, func(r pgx.Row) (id string, err error) { return id, r.Scan(&id) },
		provider, id, payoutID, stamp)
	if err != nil || set {
		return set, err
	}
	if _, err := t.Settlement(provider, id); err != nil {
		return false, err
	}
	return false, nil
}

// checkSettlement checks s before it is stored (store.CheckSettlement).
func checkSettlement(t *tx, s pay.Settlement) error {
	return store.CheckSettlement(s, func(id string) (bool, error) {
		_, err := t.Payment(id)
		if pay.ErrorCode(err) == pay.ENOTFOUND {
			return false, nil
		}
		return err == nil, err
	})
}

// Settlement returns one settlement, or ENOTFOUND.
func (t *tx) Settlement(provider, id string) (pay.Settlement, error) {
	s, found, err := queryOne(t, "read settlement", `SELECT `+settlementCols+` FROM settlements WHERE provider = $1 AND id = $2`, scanSettlement, provider, id)
	return orNotFound(s, found && id != "", err, "settlement %s/%s not found", provider, id)
}

// SettlementsForPayment returns a payment's settlements by provider and
// id.
func (t *tx) SettlementsForPayment(paymentID string) ([]pay.Settlement, error) {
	if err := checkPart("payment id", paymentID, false); err != nil {
		return nil, err
	}
	if paymentID == "" {
		return nil, nil
	}
	return queryAll(t, "read settlements of payment", `SELECT `+settlementCols+` FROM settlements WHERE payment_id = $1
		ORDER BY `+settlementOrder, scanSettlement, paymentID)
}

// ListSettlements returns up to limit settlements after (afterProvider,
// afterID), by provider and id.
func (t *tx) ListSettlements(afterProvider, afterID string, limit int) ([]pay.Settlement, error) {
	if limit < 1 || limit > pay.MaxListLimit {
		return nil, pay.Invalidf("limit", "limit must be from 1 to %d, got %d", pay.MaxListLimit, limit)
	}
	if afterProvider == "" && afterID == "" {
		return queryAll(t, "list settlements", `SELECT `+settlementCols+` FROM settlements ORDER BY `+settlementOrder+` LIMIT $1`, scanSettlement, limit)
	}
	return queryAll(t, "list settlements", `SELECT `+settlementCols+` FROM settlements
		WHERE (octet_length(provider), provider, id) > (octet_length($1::text), $1::text COLLATE "C", $2::text COLLATE "C")
		ORDER BY `+settlementOrder+` LIMIT $3`, scanSettlement, afterProvider, afterID, limit)
}

// reconItemJSON is a run's unmatched item as the items column holds it.
type reconItemJSON struct {
	Kind        string `json:"kind"`
	Line        int    `json:"line,omitempty"`
	LineID      string `json:"line_id,omitempty"`
	ProviderRef string `json:"provider_ref,omitempty"`
	PaymentID   string `json:"payment_id,omitempty"`
	Amount      int64  `json:"amount,omitempty"`
	Expected    int64  `json:"expected,omitempty"`
	Currency    string `json:"currency,omitempty"`
	Note        string `json:"note,omitempty"`
}

// encodeReconItems is a run's items as the items column holds them, for
// PutReconRun and the import alike.
func encodeReconItems(items []pay.ReconItem) ([]byte, error) {
	js := make([]reconItemJSON, len(items))
	for i, it := range items {
		js[i] = reconItemJSON(it)
	}
	return json.Marshal(js)
}

// reconRunCols are the columns scanReconRun reads, in its order.
const reconRunCols = `id, provider, source, lines, matched, mismatched, missing_locally, missing_at_psp, posted, items, created_at`

// scanReconRun reads the reconRunCols of a row.
func scanReconRun(r pgx.Row) (pay.ReconRun, error) {
	var (
		run                                                    pay.ReconRun
		lines, matched, mismatched, missLocal, missPSP, posted int64
		items                                                  []byte
		created                                                int64
	)
	if err := r.Scan(&run.ID, &run.Provider, &run.Source, &lines, &matched, &mismatched, &missLocal, &missPSP, &posted, &items, &created); err != nil {
		return run, err
	}
	run.Lines, run.Matched, run.Mismatched, run.MissingLocally, run.MissingAtPSP, run.Posted =
		int(lines), int(matched), int(mismatched), int(missLocal), int(missPSP), int(posted)
	run.CreatedAt = fromNS(created)
	var js []reconItemJSON
	if err := json.Unmarshal(items, &js); err != nil {
		return run, fmt.Errorf("decode items of run %s: %w", run.ID, err)
	}
	for _, it := range js {
		run.Items = append(run.Items, pay.ReconItem(it))
	}
	return run, nil
}

// PutReconRun stores a reconciliation run, replacing one with its id.
func (t *tx) PutReconRun(r pay.ReconRun) error {
	if err := checkPart("run id", r.ID, true); err != nil {
		return err
	}
	if err := pay.ValidateReconRun(r); err != nil {
		return err
	}
	for _, it := range r.Items {
		for _, s := range []string{it.Kind, it.LineID, it.ProviderRef, it.PaymentID, it.Currency, it.Note} {
			if err := storableText(s); err != nil {
				return err
			}
		}
	}
	items, err := encodeReconItems(r.Items)
	if err != nil {
		return fmt.Errorf("encode items of run %s: %w", r.ID, err)
	}
	e := enc{what: "reconciliation run " + r.ID}
	created := e.stamp(r.CreatedAt)
	if e.err != nil {
		return e.err
	}
	_, err = t.exec("put reconciliation run", `INSERT INTO recon_runs (`+reconRunCols+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
		ON CONFLICT (id) DO UPDATE SET provider = excluded.provider, source = excluded.source, lines = excluded.lines,
			matched = excluded.matched, mismatched = excluded.mismatched, missing_locally = excluded.missing_locally,
			missing_at_psp = excluded.missing_at_psp, posted = excluded.posted, items = excluded.items, created_at = excluded.created_at`,
		r.ID, r.Provider, r.Source, r.Lines, r.Matched, r.Mismatched, r.MissingLocally, r.MissingAtPSP, r.Posted, string(items), created)
	return err
}

// ReconRun returns one reconciliation run, or ENOTFOUND.
func (t *tx) ReconRun(id string) (pay.ReconRun, error) {
	r, found, err := queryOne(t, "read reconciliation run", `SELECT `+reconRunCols+` FROM recon_runs WHERE id = $1`, scanReconRun, id)
	return orNotFound(r, found && id != "", err, "reconciliation run %q not found", id)
}

// ListReconRuns returns up to limit runs with an id below beforeID (all
// when empty), newest first.
func (t *tx) ListReconRuns(beforeID string, limit int) ([]pay.ReconRun, error) {
	if limit < 1 || limit > pay.MaxListLimit {
		return nil, pay.Invalidf("limit", "limit must be from 1 to %d, got %d", pay.MaxListLimit, limit)
	}
	if beforeID == "" {
		return queryAll(t, "list reconciliation runs", `SELECT `+reconRunCols+` FROM recon_runs ORDER BY id DESC LIMIT $1`, scanReconRun, limit)
	}
	return queryAll(t, "list reconciliation runs", `SELECT `+reconRunCols+` FROM recon_runs WHERE id < $1 ORDER BY id DESC LIMIT $2`,
		scanReconRun, beforeID, limit)
}

// Settlement buffers a settlement.
func (im *Importer) Settlement(s pay.Settlement) error {
	e := enc{what: "settlement"}
	return im.add("settlements", "settlement "+s.Provider+"/"+s.ID, &e,
		s.Provider, s.ID, string(s.Kind), s.PaymentID, s.ProviderRef, s.Amount, s.Fee, s.Currency, s.PayoutID, s.RunID,
		e.stamp(s.CreatedAt), e.stamp(s.UpdatedAt))
}

// ReconRun buffers a reconciliation run.
func (im *Importer) ReconRun(r pay.ReconRun) error {
	e := enc{what: "reconciliation run"}
	items, err := encodeReconItems(r.Items)
	if err != nil {
		return fmt.Errorf("copy reconciliation run %s: %w", r.ID, err)
	}
	return im.add("recon_runs", "reconciliation run "+r.ID, &e,
		r.ID, r.Provider, r.Source, int64(r.Lines), int64(r.Matched), int64(r.Mismatched), int64(r.MissingLocally),
		int64(r.MissingAtPSP), int64(r.Posted), string(items), e.stamp(r.CreatedAt))
}
