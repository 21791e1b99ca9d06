package postgres

// Leases (leases): one row per payment ever leased, with its holder, its
// fencing token and when it ends.

import (
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// AcquireLease takes the payment's lease for holder until Tx.Now+ttl with
// the token one above the last one given out, in one statement: INSERT
// ... ON CONFLICT DO UPDATE ... WHERE expires_at <= now RETURNING token,
// and no other lock: the lease's row (or, for a first lease, its unique
// key) makes two acquisitions take turns, and the later one sees the
// lease the earlier one took. A lease in force at Tx.Now is ELEASEHELD
// whoever holds it, the same holder included. EINVALID for an empty id or
// holder or a ttl below 1ns.
func (t *tx) AcquireLease(paymentID, holder string, ttl time.Duration) (pay.Lease, error) {
	if err := store.CheckLeaseRequest(paymentID, holder, ttl); err != nil {
		return pay.Lease{}, err
	}
	l := pay.Lease{PaymentID: paymentID, Holder: holder, ExpiresAt: t.now.Add(ttl)}
	e := enc{what: "lease of payment " + paymentID}
	expires := e.stamp(l.ExpiresAt)
	if e.err != nil {
		return pay.Lease{}, e.err
	}
	delete(t.leases, paymentID)
	token, taken, err := queryOne(t, "acquire lease", `INSERT INTO leases AS l (payment_id, holder, token, expires_at)
		VALUES ($1, $2, 1, $3)
		ON CONFLICT (payment_id) DO UPDATE SET holder = excluded.holder, token = l.token + 1, expires_at = excluded.expires_at
		WHERE l.expires_at <= $4
		RETURNING token`, scalar[int64], paymentID, holder, expires, t.nowNS())
	if err != nil {
		return pay.Lease{}, err
	}
	if !taken {
		cur, err := t.Lease(paymentID)
		if err != nil {
			return pay.Lease{}, err
		}
		return pay.Lease{}, pay.Errorf(pay.ELEASEHELD, "payment %s is leased by %s until %s", paymentID, cur.Holder, cur.ExpiresAt.Format(time.RFC3339Nano))
	}
	l.Token = uint64(token)
	return l, nil
}

// ReleaseLease ends the lease (ExpiresAt = Tx.Now) if token is current and
// the lease is still in force; otherwise it does nothing. Holder and token
// are kept, so the next acquisition gets token+1.
func (t *tx) ReleaseLease(paymentID string, token uint64) error {
	if token == 0 || token > 1<<63-1 {
		return nil
	}
	delete(t.leases, paymentID)
	_, err := t.exec("release lease", `UPDATE leases SET expires_at = $3 WHERE payment_id = $1 AND token = $2 AND expires_at > $3`,
		paymentID, int64(token), t.nowNS())
	return err
}

// Lease returns the payment's lease record; a payment whose lease was never
// taken gets a record with Token 0 and no error.
//
// It takes no lock. The writers of a lease (AcquireLease, ReleaseLease)
// write the lease's row alone, in transactions of their own, so a reader
// that does not see a lease taken after its statement began is ordered
// before that acquisition. In a write transaction that holds the
// payment, the lease read with it (Payment) is returned without a
// statement.
func (t *tx) Lease(paymentID string) (pay.Lease, error) {
	if l, ok := t.leases[paymentID]; ok {
		return l, nil
	}
	l, _, err := queryOne(t, "read lease", `SELECT holder, token, expires_at FROM leases WHERE payment_id = $1`, func(r pgx.Row) (pay.Lease, error) {
		var (
			l              pay.Lease
			token, expires int64
		)
		err := r.Scan(&l.Holder, &token, &expires)
		l.Token, l.ExpiresAt = uint64(token), fromNS(expires)
		return l, err
	}, paymentID)
	l.PaymentID = paymentID
	return l, err
}
