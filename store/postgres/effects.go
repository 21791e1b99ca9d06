package postgres

// The state of the ripple effects: customer accounts (customers), effect
// dedupe records (effects) and merchant webhook endpoints
// (webhook_endpoints), and the last PSP answer of each payment
// (psp_answers). None has an index but its key.

import (
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// The columns of the rows of customers and effects that PutCustomerAccount
// and PutEffect queue (rowKinds), and their types.
var (
	customerCols  = []string{"id", "points", "last_visit_at", "updated_at"}
	customerTypes = []string{"text", "bigint", "bigint", "bigint"}
	effectCols    = []string{"key", "delivery_id", "points", "at"}
	effectTypes   = []string{"text", "text", "bigint", "bigint"}
)

// CustomerAccount returns a customer's account, or ENOTFOUND. In a write
// transaction the account is locked by its row (lockedRow); a missing
// account is created by PutCustomerAccount only if still missing. The
// transaction keeps what it read and wrote: the account read again costs
// no statement (no other transaction changes a row this one holds).
func (t *tx) CustomerAccount(id string) (store.CustomerAccount, error) {
	if err := checkPart("customer id", id, true); err != nil {
		return store.CustomerAccount{}, err
	}
	if c, ok := t.customers[id]; ok {
		if c == nil {
			return store.CustomerAccount{}, pay.Errorf(pay.ENOTFOUND, "customer %s not found", id)
		}
		return *c, nil
	}
	c, found, err := lockedRow(t, "customer", id, "read customer", `SELECT points, last_visit_at, updated_at FROM customers WHERE id = $1`,
		func(r pgx.Row) (store.CustomerAccount, error) {
			var (
				c              store.CustomerAccount
				visit, updated int64
			)
			err := r.Scan(&c.Points, &visit, &updated)
			c.LastVisitAt, c.UpdatedAt = fromNS(visit), fromNS(updated)
			return c, err
		}, id)
	if err != nil {
		return store.CustomerAccount{}, err
	}
	c.ID = id
	if t.writable {
		t.keepCustomer(id, found, c)
	}
	if !found {
		return store.CustomerAccount{}, pay.Errorf(pay.ENOTFOUND, "customer %s not found", id)
	}
	return c, nil
}

// keepCustomer records a customer account as the transaction holds it.
func (t *tx) keepCustomer(id string, found bool, c store.CustomerAccount) {
	if t.customers == nil {
		t.customers = map[string]*store.CustomerAccount{}
	}
	if !found {
		t.customers[id] = nil
		return
	}
	t.customers[id] = &c
}

// PutCustomerAccount stores c under c.ID; UpdatedAt becomes Tx.Now. The
// write is queued with the transaction's other writes (put).
func (t *tx) PutCustomerAccount(c store.CustomerAccount) error {
	if err := checkPart("customer id", c.ID, true); err != nil {
		return err
	}
	e := enc{what: "customer " + c.ID}
	visit := e.stamp(c.LastVisitAt)
	if e.err != nil {
		return e.err
	}
	if err := t.put("customer", c.ID, "put customer", "", "", c.ID, c.Points, visit, t.nowNS()); err != nil {
		return err
	}
	c.LastVisitAt, c.UpdatedAt = fromNS(visit), fromNS(t.nowNS())
	t.keepCustomer(c.ID, true, c)
	return nil
}

// Effect returns the record of a dedupe key and whether there is one. In
// a write transaction the record is locked by its row (lockedRow), so a
// read-modify-write of it (loyalty's record of a payment) sees no
// concurrent change; a missing record is created by PutEffect only if
// still missing.
func (t *tx) Effect(key string) (store.EffectRecord, bool, error) {
	if err := checkPart("effect key", key, true); err != nil {
		return store.EffectRecord{}, false, err
	}
	if r, ok := t.effects[key]; ok {
		if r == nil {
			return store.EffectRecord{}, false, nil
		}
		return *r, true, nil
	}
	r, found, err := lockedRow(t, "effect", key, "read effect", `SELECT `+effectReadCols+` FROM effects WHERE key = $1`, scanEffect, key)
	if err != nil || !found {
		return store.EffectRecord{}, false, err
	}
	return r, true, nil
}

// effectReadCols are the columns scanEffect reads, in its order.
const effectReadCols = `key, delivery_id, points, at`

// scanEffect reads the effectReadCols of a row.
func scanEffect(row pgx.Row) (store.EffectRecord, error) {
	var (
		r  store.EffectRecord
		at int64
	)
	err := row.Scan(&r.Key, &r.DeliveryID, &r.Points, &at)
	r.At = fromNS(at)
	return r, err
}

// PutEffect stores r under r.Key, replacing any record there; a zero At
// becomes Tx.Now. The write is queued with the transaction's other writes
// (put).
func (t *tx) PutEffect(r store.EffectRecord) error {
	if err := checkPart("effect key", r.Key, true); err != nil {
		return err
	}
	store.NowIfZero(t.now, &r.At)
	e := enc{what: "effect " + r.Key}
	at := e.stamp(r.At)
	if e.err != nil {
		return e.err
	}
	if err := t.put("effect", r.Key, "put effect", "", "", r.Key, r.DeliveryID, r.Points, at); err != nil {
		return err
	}
	if _, ok := t.effects[r.Key]; ok {
		r.At = fromNS(at)
		t.effects[r.Key] = &r
	}
	return nil
}

// LockEffects reads the records of keys that the transaction does not
// hold yet, in one statement, locking each by its row (FOR NO KEY UPDATE,
// in the order of the keys, so that two transactions lock them in one
// order), and keeps them and the keys found missing (absent): Effect and
// ClaimEffect of them then cost no statement, and a missing key is
// written with an INSERT that must insert (put). Outside a write
// transaction it does nothing.
func (t *tx) LockEffects(keys []string) error {
	if !t.writable {
		return nil
	}
	var want []string
	for _, k := range keys {
		if err := checkPart("effect key", k, true); err != nil {
			return err
		}
		if _, ok := t.effects[k]; !ok && !t.locked["effect:"+k] && !slices.Contains(want, k) {
			want = append(want, k)
		}
	}
	found, err := lockedRows(t, "effect", "lock effects", `SELECT `+effectReadCols+` FROM effects WHERE key = ANY($1) ORDER BY key`, want, scanEffect)
	if err != nil {
		return err
	}
	if t.effects == nil {
		t.effects = map[string]*store.EffectRecord{}
	}
	for _, k := range want {
		t.effects[k] = nil
	}
	for _, r := range found {
		t.effects[r.Key] = &r
		t.hold("effect:" + r.Key)
	}
	return nil
}

// ClaimEffect stores r under r.Key unless the key has a record, in one
// statement and without an advisory lock: the key's unique index decides.
// It reports whether r was stored. A transaction that stored the same key
// and has not ended is waited for: if it commits, its record stays and
// ClaimEffect reports false; if it rolls back, r is stored. A zero At
// becomes Tx.Now.
func (t *tx) ClaimEffect(r store.EffectRecord) (bool, error) {
	if err := checkPart("effect key", r.Key, true); err != nil {
		return false, err
	}
	store.NowIfZero(t.now, &r.At)
	e := enc{what: "effect " + r.Key}
	at := e.stamp(r.At)
	if e.err != nil {
		return false, e.err
	}
	if held, ok := t.effects[r.Key]; ok {
		// Read by LockEffects: stored, or queued to be inserted (a
		// concurrent insert of the key runs the transaction again).
		if held != nil {
			return false, nil
		}
		return true, t.PutEffect(r)
	}
	_, claimed, err := queryOne(t.about("effect:"+r.Key), "claim effect", `INSERT INTO effects (key, delivery_id, points, at) VALUES ($1, $2, $3, $4)
		ON CONFLICT (key) DO NOTHING RETURNING true`, scalar[bool], r.Key, r.DeliveryID, r.Points, at)
	if claimed {
		t.hold("effect:" + r.Key)
	}
	return claimed, err
}

// WebhookEndpoint returns an endpoint's stored state; an endpoint never
// stored is enabled, with only its ID set, and no error. In a write
// transaction the endpoint is locked by its row (lockedRow).
func (t *tx) WebhookEndpoint(id string) (store.WebhookEndpoint, error) {
	if err := checkPart("endpoint id", id, true); err != nil {
		return store.WebhookEndpoint{}, err
	}
	ep, _, err := lockedRow(t, "endpoint", id, "read webhook endpoint", `SELECT url, disabled, disabled_at, disabled_reason, failing_since,
		last_success_at, updated_at FROM webhook_endpoints WHERE id = $1`, func(r pgx.Row) (store.WebhookEndpoint, error) {
		var (
			ep                                    store.WebhookEndpoint
			disabledAt, failing, success, updated int64
		)
		err := r.Scan(&ep.URL, &ep.Disabled, &disabledAt, &ep.DisabledReason, &failing, &success, &updated)
		ep.DisabledAt, ep.FailingSince, ep.LastSuccessAt, ep.UpdatedAt = fromNS(disabledAt), fromNS(failing), fromNS(success), fromNS(updated)
		return ep, err
	}, id)
	if err != nil {
		return store.WebhookEndpoint{}, err
	}
	ep.ID = id
	return ep, nil
}

// PutWebhookEndpoint stores e under e.ID; UpdatedAt becomes Tx.Now. The
// write is queued with the transaction's other writes (put).
func (t *tx) PutWebhookEndpoint(ep store.WebhookEndpoint) error {
	if err := checkPart("endpoint id", ep.ID, true); err != nil {
		return err
	}
	e := enc{what: "webhook endpoint " + ep.ID}
	args := []any{ep.ID, ep.URL, ep.Disabled, e.stamp(ep.DisabledAt), ep.DisabledReason, e.stamp(ep.FailingSince), e.stamp(ep.LastSuccessAt), t.nowNS()}
	if e.err != nil {
		return e.err
	}
	const insert = `INSERT INTO webhook_endpoints (id, url, disabled, disabled_at, disabled_reason,
			failing_since, last_success_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`
	return t.put("endpoint", ep.ID, "put webhook endpoint",
		insert+` ON CONFLICT (id) DO UPDATE SET url = excluded.url, disabled = excluded.disabled, disabled_at = excluded.disabled_at,
			disabled_reason = excluded.disabled_reason, failing_since = excluded.failing_since,
			last_success_at = excluded.last_success_at, updated_at = excluded.updated_at`,
		insert, args...)
}

// PutPSPAnswer stores a as the payment's last PSP answer, replacing the one
// before, in one upsert and without any other lock (nothing reads it to
// write it). A zero At becomes Tx.Now. The payment need not exist.
func (t *tx) PutPSPAnswer(a pay.PSPAnswer) error {
	if err := checkPart("payment id", a.PaymentID, true); err != nil {
		return err
	}
	store.NowIfZero(t.now, &a.At)
	e := enc{what: "PSP answer of payment " + a.PaymentID}
	at := e.stamp(a.At)
	if e.err != nil {
		return e.err
	}
	_, err := t.exec("put psp answer", `INSERT INTO psp_answers (payment_id, provider, status, found, raw, error, at)
		VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (payment_id) DO UPDATE SET provider = excluded.provider, status = excluded.status, found = excluded.found,
			raw = excluded.raw, error = excluded.error, at = excluded.at`,
		a.PaymentID, a.Provider, string(a.Status), a.Found, a.Raw, a.Error, at)
	return err
}

// PSPAnswer returns the payment's last PSP answer, or ENOTFOUND.
func (t *tx) PSPAnswer(paymentID string) (pay.PSPAnswer, error) {
	a, found, err := queryOne(t, "read psp answer", `SELECT provider, status, found, raw, error, at FROM psp_answers WHERE payment_id = $1`,
		func(r pgx.Row) (pay.PSPAnswer, error) {
			var (
				a  pay.PSPAnswer
				at int64
			)
			err := r.Scan(&a.Provider, &a.Status, &a.Found, &a.Raw, &a.Error, &at)
			a.At = fromNS(at)
			return a, err
		}, paymentID)
	if err != nil {
		return pay.PSPAnswer{}, err
	} else if !found {
		return pay.PSPAnswer{}, pay.Errorf(pay.ENOTFOUND, "no PSP answer recorded for payment %s", paymentID)
	}
	a.PaymentID = paymentID
	return a, nil
}

// PutPSPCharge stores the mock PSP's charge c under its key, replacing the
// one before. A zero CreatedAt becomes Tx.Now. The write is queued with
// the transaction's other writes (put).
func (t *tx) PutPSPCharge(c store.PSPCharge) error {
	if err := checkPart("charge key", c.Key, true); err != nil {
		return err
	}
	store.NowIfZero(t.now, &c.CreatedAt)
	e := enc{what: "charge " + c.Key}
	created := e.stamp(c.CreatedAt)
	if e.err != nil {
		return e.err
	}
	const insert = `INSERT INTO psp_charges (key, payment_id, provider_ref, amount, currency, status,
			client_secret, redirect_url, refund_key, calls, refunds, created_at, amount_refunded)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`
	return t.put("psp charge", c.Key, "put psp charge", insert+`
		ON CONFLICT (key) DO UPDATE SET payment_id = excluded.payment_id, provider_ref = excluded.provider_ref,
			amount = excluded.amount, currency = excluded.currency, status = excluded.status,
			client_secret = excluded.client_secret, redirect_url = excluded.redirect_url, refund_key = excluded.refund_key,
			calls = excluded.calls, refunds = excluded.refunds, created_at = excluded.created_at,
			amount_refunded = excluded.amount_refunded`, insert,
		c.Key, c.PaymentID, c.ProviderRef, c.Amount, c.Currency, string(c.Status),
		c.ClientSecret, c.RedirectURL, c.RefundKey, c.Calls, c.Refunds, created, c.AmountRefunded)
}

// PSPCharge returns the mock PSP's charge made with key, or ENOTFOUND. In
// a write transaction the charge is locked by its row (lockedRow).
func (t *tx) PSPCharge(key string) (store.PSPCharge, error) {
	c, found, err := lockedRow(t, "psp charge", key, "read psp charge", `SELECT payment_id, provider_ref, amount, currency, status,
			client_secret, redirect_url, refund_key, calls, refunds, created_at, amount_refunded FROM psp_charges WHERE key = $1`,
		func(r pgx.Row) (store.PSPCharge, error) {
			var (
				c       store.PSPCharge
				created int64
			)
			err := r.Scan(&c.PaymentID, &c.ProviderRef, &c.Amount, &c.Currency, &c.Status,
				&c.ClientSecret, &c.RedirectURL, &c.RefundKey, &c.Calls, &c.Refunds, &created, &c.AmountRefunded)
			c.CreatedAt = fromNS(created)
			return c, err
		}, key)
	if err != nil {
		return store.PSPCharge{}, err
	} else if !found {
		return store.PSPCharge{}, pay.Errorf(pay.ENOTFOUND, "no charge with key %s", key)
	}
	c.Key = key
	return c, nil
}
