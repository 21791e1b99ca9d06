package postgres

// Payments (the payments table) and their indexes: payments_by_status (the
// sweeper's candidates), payments_by_created and payments_by_order (lists)
// and payments_by_ref (unique: one payment per provider reference).

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// List limits of ListPayments, those of the bbolt store.
const (
	DefaultListLimit = pay.DefaultListLimit
	MaxListLimit     = pay.MaxListLimit
)

// paymentCols are the columns scanPayment reads, in its order.
const paymentCols = `id, order_id, amount, currency, customer_id, customer_email, provider, provider_ref,
	status, version, client_secret, redirect_url, return_url, created_at, updated_at, amount_refunded, amount_refund_pending, dispute,
	flow, description, second_ref`

// scanPayment reads the paymentCols of a row.
func scanPayment(r pgx.Row) (pay.Payment, error) {
	var (
		p                pay.Payment
		version          int64
		created, updated int64
	)
	err := r.Scan(&p.ID, &p.OrderID, &p.Amount, &p.Currency, &p.Customer.ID, &p.Customer.Email, &p.Provider, &p.ProviderRef,
		&p.Status, &version, &p.ClientSecret, &p.RedirectURL, &p.ReturnURL, &created, &updated, &p.AmountRefunded, &p.AmountRefundPending, &p.Dispute,
		&p.Flow, &p.Description, &p.SecondRef)
	p.Version, p.CreatedAt, p.UpdatedAt = uint64(version), fromNS(created), fromNS(updated)
	return p, err
}

// Payment returns the payment with the given id, or ENOTFOUND.
//
// In a write transaction the payment is locked by its own row, in the
// statement that reads it (FOR NO KEY UPDATE), and stays locked to the
// end; the compare-and-set and the timeline then take no other lock. The
// same statement reads the payment's lease (Lease), and the transaction
// keeps both: reading the payment again costs no statement (no other
// transaction can change it while the row is locked; UpdatePayment keeps
// the copy current).
func (t *tx) Payment(id string) (pay.Payment, error) {
	if p, ok := t.payments[id]; ok {
		return p, nil
	}
	if !t.writable {
		p, found, err := queryOne(t, "read payment", `SELECT `+paymentCols+` FROM payments WHERE id = $1`, scanPayment, id)
		return orNotFound(p, found, err, "payment %s not found", id)
	}
	type withLease struct {
		p pay.Payment
		l pay.Lease
	}
	// The lease's row is not locked (a nullable side cannot be): see
	// Lease for why a lease read without a lock is enough.
	x, found, err := queryOne(t, "read payment", `SELECT coalesce(l.holder, ''), coalesce(l.token, 0), coalesce(l.expires_at, 0),
			`+paymentCols+`
		FROM payments LEFT JOIN leases l ON l.payment_id = payments.id WHERE payments.id = $1
		FOR NO KEY UPDATE OF payments`, func(r pgx.Row) (withLease, error) {
		var (
			x              withLease
			token, expires int64
		)
		p, err := scanPayment(prefixed{r, []any{&x.l.Holder, &token, &expires}})
		x.p, x.l.PaymentID, x.l.Token, x.l.ExpiresAt = p, id, uint64(token), fromNS(expires)
		return x, err
	}, id)
	if err != nil {
		return pay.Payment{}, err
	} else if !found {
		return pay.Payment{}, pay.Errorf(pay.ENOTFOUND, "payment %s not found", id)
	}
	t.holdPayment(x.p)
	if t.leases == nil {
		t.leases = map[string]pay.Lease{}
	}
	t.leases[id] = x.l
	return x.p, nil
}

// holdPayment records that the transaction holds p's row, as stored.
func (t *tx) holdPayment(p pay.Payment) {
	t.hold("payment:" + p.ID)
	if t.payments == nil {
		t.payments = map[string]pay.Payment{}
	}
	// As read back: times in UTC, to the nanosecond.
	p.CreatedAt, p.UpdatedAt = fromNS(storedNS(p.CreatedAt)), fromNS(storedNS(p.UpdatedAt))
	t.payments[p.ID] = p
}

// PaymentByRef finds a payment by the provider's reference, or ENOTFOUND.
func (t *tx) PaymentByRef(provider, ref string) (pay.Payment, error) {
	var (
		p     pay.Payment
		found bool
		err   error
	)
	if ref != "" {
		p, found, err = queryOne(t, "read payment by reference",
			`SELECT `+paymentCols+` FROM payments WHERE provider = $1 AND $2 <> '' AND (provider_ref = $2 OR second_ref = $2)
			ORDER BY provider_ref = $2 DESC LIMIT 1`, scanPayment, provider, ref)
	}
	return orNotFound(p, found, err, "payment with %s reference %s not found", provider, ref)
}

// paymentArgs are the values of p for the columns of paymentCols, in
// order, or EINVALID.
func paymentArgs(p pay.Payment) ([]any, error) {
	e := enc{what: "payment " + p.ID}
	args := []any{p.ID, p.OrderID, p.Amount, p.Currency, p.Customer.ID, p.Customer.Email, p.Provider, p.ProviderRef,
		string(p.Status), e.u64("version", p.Version), p.ClientSecret, p.RedirectURL, p.ReturnURL,
		e.stamp(p.CreatedAt), e.stamp(p.UpdatedAt), p.AmountRefunded, p.AmountRefundPending, string(p.Dispute),
		p.Flow, p.Description, p.SecondRef}
	return args, e.err
}

// InsertPayment stores a new payment with Version 1; ECONFLICT if the id
// exists or another payment has the same provider reference. It is one
// INSERT ... ON CONFLICT DO NOTHING, so a conflict leaves the transaction
// usable.
func (t *tx) InsertPayment(p pay.Payment) error {
	if err := store.CheckStoredPayment(p); err != nil {
		return err
	}
	if p.Version != 1 {
		return pay.Errorf(pay.EINVALID, "payment %s: a new payment has version 1, got %d", p.ID, p.Version)
	}
	args, err := paymentArgs(p)
	if err != nil {
		return err
	}
	// The unique indexes hold each column; a reference in one column of
	// this payment and the other of another is looked for here.
	if p.ProviderRef != "" || p.SecondRef != "" {
		if err := t.refConflict(p); pay.ErrorCode(err) != pay.ENOTFOUND {
			return err
		}
	}
	n, err := t.exec("insert payment", `INSERT INTO payments (`+paymentCols+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21) ON CONFLICT DO NOTHING`, args...)
	if err != nil {
		return err
	} else if n == 1 {
		if t.writable {
			t.holdPayment(p) // its new row is this transaction's until the commit
		}
		return nil
	}
	// Which constraint: the id or the reference.
	exists, _, err := queryOne(t, "read payment", `SELECT EXISTS (SELECT 1 FROM payments WHERE id = $1)`, scalar[bool], p.ID)
	if err != nil {
		return err
	}
	if exists {
		return pay.Errorf(pay.ECONFLICT, "payment %s already exists", p.ID)
	}
	return t.refConflict(p)
}

// refConflict returns the ECONFLICT of one of p's provider references
// (provider_ref, second_ref) held by another payment, in either column;
// ENOTFOUND if none is.
func (t *tx) refConflict(p pay.Payment) error {
	type held struct{ id, ref string }
	other, found, err := queryOne(t, "read payment by reference",
		`WITH r AS (SELECT NULLIF($3, '') AS a, NULLIF($4, '') AS b)
		SELECT id, CASE WHEN provider_ref IN (r.a, r.b) THEN provider_ref ELSE second_ref END FROM payments, r
		WHERE provider = $1 AND id <> $2 AND (provider_ref IN (r.a, r.b) OR second_ref IN (r.a, r.b))
		LIMIT 1`, func(r pgx.Row) (held, error) {
			var h held
			return h, r.Scan(&h.id, &h.ref)
		}, p.Provider, p.ID, p.ProviderRef, p.SecondRef)
	switch {
	case err != nil:
		return err
	case !found:
		return pay.Errorf(pay.ENOTFOUND, "no other payment holds %s's references", p.ID)
	}
	return pay.Errorf(pay.ECONFLICT, "%s reference %s already belongs to payment %s", p.Provider, other.ref, other.id)
}

// UpdatePayment writes p with compare-and-set on the version: UPDATE ...
// WHERE id = $1 AND version = prev, and only if no other payment holds
// p's provider reference. No row updated is ECONFLICT (ENOTFOUND if the
// payment does not exist), and nothing is written. p.Version must be
// prev+1 (ECONFLICT otherwise). Every index follows the row.
func (t *tx) UpdatePayment(p pay.Payment, prev uint64) error {
	if err := store.CheckStoredPayment(p); err != nil {
		return err
	}
	args, err := paymentArgs(p)
	if err != nil {
		return err
	}
	const update = `UPDATE payments SET order_id = $2, amount = $3, currency = $4, customer_id = $5,
			customer_email = $6, provider = $7, provider_ref = $8, status = $9, version = $10, client_secret = $11,
			redirect_url = $12, return_url = $13, created_at = $14, updated_at = $15,
			amount_refunded = $16, amount_refund_pending = $17, dispute = $18, flow = $19, description = $20, second_ref = $21
			WHERE id = $1 AND version = $22 AND ($8 = '' OR NOT EXISTS (
				SELECT 1 FROM payments o WHERE o.provider = $7 AND (o.provider_ref = $8 OR o.second_ref = $8) AND o.id <> $1))
			AND ($21 = '' OR NOT EXISTS (
				SELECT 1 FROM payments o WHERE o.provider = $7 AND (o.provider_ref = $21 OR o.second_ref = $21) AND o.id <> $1))`
	args = append(args, int64(prev))
	// The payment locked at version prev, with the same references: the
	// update cannot miss, and is queued with the transaction's other
	// writes (later).
	if cur, ok := t.payments[p.ID]; ok && cur.Version == prev && p.Version == prev+1 && prev < 1<<63 &&
		cur.Provider == p.Provider && cur.ProviderRef == p.ProviderRef && cur.SecondRef == p.SecondRef {
		if err := t.later("update payment", update, func(n int64) error {
			if n != 1 {
				return retry("update payment", "payment "+p.ID+" changed under its row lock")
			}
			return nil
		}, args...); err != nil {
			return err
		}
		t.holdPayment(p)
		return nil
	}
	if err := t.lockPayment(p.ID); err != nil {
		return err
	}
	if p.Version == prev+1 && prev < 1<<63 {
		n, err := t.exec("update payment", update, args...)
		if err != nil {
			return err
		} else if n == 1 {
			if t.writable {
				t.holdPayment(p)
			}
			return nil
		}
	}
	// Nothing written: say why, in the bbolt store's order.
	cur, found, err := queryOne(t, "read payment", `SELECT version FROM payments WHERE id = $1`, scalar[int64], p.ID)
	switch {
	case err != nil:
		return err
	case !found:
		return pay.Errorf(pay.ENOTFOUND, "payment %s not found", p.ID)
	case uint64(cur) != prev:
		return pay.Errorf(pay.ECONFLICT, "payment %s is at version %d, not %d", p.ID, cur, prev)
	case p.Version != prev+1:
		return pay.Errorf(pay.ECONFLICT, "payment %s: the version after %d is %d, got %d", p.ID, prev, prev+1, p.Version)
	}
	return t.refConflict(p)
}

// lockPayment locks a payment, in a write transaction, as Payment does
// (its row, or the advisory lock while it has none), without reading it.
func (t *tx) lockPayment(id string) error {
	if !t.writable || t.locked["payment:"+id] {
		return nil
	}
	_, _, err := lockedRow(t, "payment", id, "lock payment", `SELECT true FROM payments WHERE id = $1`, scalar[bool], id)
	return err
}

// ListPayments returns a page of payments and the cursor of the next page
// ("" on the last page), as the bbolt store does, in the order f.Order
// names: ByCreated newest created first (payments_by_created, within
// CreatedFrom and CreatedBefore when set); ByOrder newest created first
// among that order's payments (payments_by_order); ByStatus newest updated
// first (payments_by_status). The other filters are WHERE conditions; a
// customer has no index, so a customer search reads the payments of its
// range until the page is full. Limit 0 means DefaultListLimit; other
// values are clamped to 1..MaxListLimit. A cursor that is not from the
// same kind of list is EINVALID.
func (t *tx) ListPayments(f pay.PaymentFilter) ([]pay.Payment, string, error) {
	limit, err := store.PaymentListLimit(f)
	if err != nil {
		return nil, "", err
	}

	// Pick the index: its time column and the cursor's kind.
	var (
		where  []string
		args   []any
		col    = "created_at"
		kind   byte
		prefix []byte
	)
	arg := func(v any) string { args = append(args, v); return "$" + strconv.Itoa(len(args)) }
	switch f.Order() {
	case pay.ByOrder:
		if err := checkPart("order_id", f.OrderID, false); err != nil {
			return nil, "", err
		}
		kind, prefix = cursorOrder, orderPrefix(f.OrderID)
	case pay.ByStatus:
		kind, prefix, col = cursorStatus, statePrefix(string(f.Status)), "updated_at"
	default:
		kind = cursorCreated
	}

	// The filters (pay.PaymentFilter.Match, as SQL).
	if f.OrderID != "" {
		where = append(where, "order_id = "+arg(f.OrderID))
	}
	if f.Status != "" {
		where = append(where, "status = "+arg(string(f.Status)))
	}
	if f.CustomerID != "" {
		where = append(where, "customer_id = "+arg(f.CustomerID))
	}
	if f.CustomerEmail != "" {
		where = append(where, `lower(customer_email COLLATE "C") = `+arg(pay.FoldEmail(f.CustomerEmail)))
	}
	if !f.CreatedFrom.IsZero() {
		where = append(where, "created_at >= "+arg(keyNS(f.CreatedFrom)))
	}
	if !f.CreatedBefore.IsZero() {
		where = append(where, "created_at < "+arg(keyNS(f.CreatedBefore)))
	}
	if f.Cursor != "" {
		ns, id, err := decodeCursor(f.Cursor, kind, prefix)
		if err != nil {
			return nil, "", err
		}
		where = append(where, "("+col+", id) < ("+arg(ns)+", "+arg(id)+")")
	}
	q := `SELECT ` + paymentCols + ` FROM payments`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	q += ` ORDER BY ` + col + ` DESC, id DESC LIMIT ` + arg(limit+1)

	ps, err := queryAll(t, "list payments", q, scanPayment, args...)
	if err != nil || len(ps) <= limit {
		return ps, "", err
	}
	ps = ps[:limit]
	last := ps[limit-1]
	at := last.CreatedAt
	if col == "updated_at" {
		at = last.UpdatedAt
	}
	return ps, encodeCursor(kind, prefix, storedNS(at), last.ID), nil
}

// Candidates returns up to limit payments in the given statuses whose
// UpdatedAt is strictly before updatedBefore, oldest first (ties by id).
func (t *tx) Candidates(statuses []pay.Status, updatedBefore time.Time, limit int) ([]pay.Payment, error) {
	return t.CandidatesAfter(statuses, updatedBefore, time.Time{}, "", limit)
}

// CandidatesAfter returns up to limit payments in the given statuses whose
// UpdatedAt is strictly before updatedBefore and whose (UpdatedAt, ID) is
// greater than (afterUpdated, afterID), oldest first (ties by id). Each
// status is a range scan of payments_by_status of at most limit rows (a
// LATERAL subquery per status), merged and cut to limit, so a page costs
// O(statuses × limit) whatever the number of payments. EINVALID for an
// unknown status or a limit below 1.
func (t *tx) CandidatesAfter(statuses []pay.Status, updatedBefore, afterUpdated time.Time, afterID string, limit int) ([]pay.Payment, error) {
	if err := checkLimit(limit); err != nil {
		return nil, err
	}
	if err := checkPart("payment id", afterID, false); err != nil {
		return nil, err
	}
	var ss []string
	for _, s := range statuses {
		if !s.Valid() {
			return nil, pay.Errorf(pay.EINVALID, "status %q is not a known status", s)
		}
		if !slices.Contains(ss, string(s)) {
			ss = append(ss, string(s))
		}
	}
	if len(ss) == 0 {
		return nil, nil
	}
	return queryAll(t, "list candidates", `SELECT c.* FROM unnest($1::text[]) AS s(status)
		CROSS JOIN LATERAL (
			SELECT `+paymentCols+` FROM payments p
			WHERE p.status = s.status AND p.updated_at < $2 AND (p.updated_at, p.id) > ($3, $4)
			ORDER BY p.updated_at, p.id LIMIT $5) c
		ORDER BY c.updated_at, c.id LIMIT $5`,
		scanPayment, ss, keyNS(updatedBefore), keyNS(afterUpdated), afterID, limit)
}
