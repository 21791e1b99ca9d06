package bolt

// Refunds (refunds) and their indexes: refunds_by_payment (a payment's
// refunds), refunds_by_ref (the PSP's reference) and refunds_pending (the
// sweeper's candidates).

import (
	"bytes"
	"fmt"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// counts reports whether a refund in status s holds part of its
// payment's amount: pending and succeeded refunds do, failed ones not.

// InsertRefund stores a new refund (see store.Tx.InsertRefund). An empty
// Currency or Provider is the payment's.
func (t *tx) InsertRefund(r pay.Refund) error {
	if err := store.CheckStoredRefund(r); err != nil {
		return err
	}
	if t.has(bucketRefunds, []byte(r.ID)) {
		return pay.Errorf(pay.ECONFLICT, "refund %s already exists", r.ID)
	}
	r, err := t.refundOfPayment(r, "")
	if err != nil {
		return err
	}
	return t.writeRefund(nil, r)
}

// UpdateRefund writes the status, provider reference and event id of a
// stored refund, UpdatedAt becoming Tx.Now; the refund's other fields
// stay as stored.
func (t *tx) UpdateRefund(r pay.Refund) error {
	old, nr, err := store.UpdatedRefund(r, t.now, t.Refund)
	if err != nil {
		return err
	}
	if nr, err = t.refundOfPayment(nr, old.ID); err != nil {
		return err
	}
	return t.writeRefund(&old, nr)
}

// refundOfPayment checks r against its stored payment and the payment's
// other refunds (all but the one with id self): the same currency and
// provider, a free provider reference, and no more refunded and pending
// than the payment's amount. It returns r with the payment's currency and
// provider filled in.
func (t *tx) refundOfPayment(r pay.Refund, self string) (pay.Refund, error) {
	p, ok, err := t.payment(r.PaymentID)
	if err != nil {
		return r, err
	} else if !ok {
		return r, pay.Errorf(pay.ENOTFOUND, "refund %s: payment %s not found", r.ID, r.PaymentID)
	}
	if r, err = store.RefundOfPayment(r, p, self == "", t.DisputesForPayment); err != nil {
		return r, err
	}
	if r.ProviderRef != "" {
		if v := t.bucket(bucketRefundsByRef).Get(refKey(r.Provider, r.ProviderRef)); v != nil && string(v) != r.ID {
			return r, pay.Errorf(pay.ECONFLICT, "%s refund reference %s already belongs to refund %s", r.Provider, r.ProviderRef, v)
		}
	}
	var othersHeld int64
	if pay.RefundHolds(r.Status) {
		others, err := t.RefundsForPayment(p.ID)
		if err != nil {
			return r, err
		}
		for _, o := range others {
			if o.ID != self && o.ID != r.ID && pay.RefundHolds(o.Status) {
				othersHeld += o.Amount
			}
		}
	}
	return r, pay.CheckRefundFits(r, p, othersHeld)
}

// refundIndexes lists the index entries of r.
func refundIndexes(r pay.Refund) []indexEntry {
	ix := []indexEntry{{bucketRefundsByPayment, refundPaymentKey(r.PaymentID, r.ID), nil}}
	if r.ProviderRef != "" {
		ix = append(ix, indexEntry{bucketRefundsByRef, refKey(r.Provider, r.ProviderRef), []byte(r.ID)})
	}
	if r.Status == pay.RefundPending {
		ix = append(ix, indexEntry{bucketRefundsPending, refundPendingKey(r.UpdatedAt, r.ID), nil})
	}
	return ix
}

// writeRefund stores r and moves its index entries from those of old
// (nil for a new refund).
func (t *tx) writeRefund(old *pay.Refund, r pay.Refund) error {
	if old != nil {
		for _, o := range refundIndexes(*old) {
			if err := t.del(o.bucket, o.key); err != nil {
				return err
			}
		}
	}
	if err := t.putRecord(bucketRefunds, []byte(r.ID), fromRefund(r)); err != nil {
		return err
	}
	for _, n := range refundIndexes(r) {
		if err := t.put(n.bucket, n.key, n.value); err != nil {
			return err
		}
	}
	return nil
}

// Refund returns one refund, or ENOTFOUND.
func (t *tx) Refund(id string) (pay.Refund, error) {
	var r refundRecord
	if ok, err := t.getRecord(bucketRefunds, []byte(id), &r); err != nil {
		return pay.Refund{}, err
	} else if !ok || id == "" {
		return pay.Refund{}, pay.Errorf(pay.ENOTFOUND, "refund %s not found", id)
	}
	return r.refund(id), nil
}

// RefundByRef finds a refund by its provider and the PSP's reference, or
// ENOTFOUND.
func (t *tx) RefundByRef(provider, ref string) (pay.Refund, error) {
	v := t.bucket(bucketRefundsByRef).Get(refKey(provider, ref))
	if v == nil || ref == "" {
		return pay.Refund{}, pay.Errorf(pay.ENOTFOUND, "refund with %s reference %s not found", provider, ref)
	}
	r, err := t.Refund(string(v))
	return r, missing(err, bucketRefundsByRef, "%s/%s points to missing refund %s", provider, ref, v)
}

// RefundsForPayment returns a payment's refunds, oldest first: a scan of
// its prefix of refunds_by_payment.
func (t *tx) RefundsForPayment(paymentID string) ([]pay.Refund, error) {
	if err := checkPart("payment id", paymentID, false); err != nil {
		return nil, err
	}
	prefix := paymentPrefix(paymentID)
	var out []pay.Refund
	c := t.bucket(bucketRefundsByPayment).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		id := string(k[len(prefix):])
		r, err := t.Refund(id)
		if err != nil {
			return nil, missing(err, bucketRefundsByPayment, "key %x points to missing refund %s", k, id)
		}
		out = append(out, r)
	}
	return out, nil
}

// PendingRefunds returns pending refunds updated before f.UpdatedBefore,
// oldest first after (f.AfterUpdated, f.AfterID): one seek into
// refunds_pending and at most f.Limit reads.
func (t *tx) PendingRefunds(f pay.RefundFilter) ([]pay.Refund, error) {
	if err := checkLimit(f.Limit); err != nil {
		return nil, err
	}
	if err := checkPart("refund id", f.AfterID, false); err != nil {
		return nil, err
	}
	from, end := refundPendingKey(f.AfterUpdated, f.AfterID), be64(keyTime(f.UpdatedBefore))
	c := t.bucket(bucketRefundsPending).Cursor()
	k, _ := c.Seek(from)
	if k != nil && bytes.Equal(k, from) {
		k, _ = c.Next()
	}
	var out []pay.Refund
	for ; k != nil && bytes.Compare(k, end) < 0 && len(out) < f.Limit; k, _ = c.Next() {
		_, id, ok := splitTimeID(k, 0)
		if !ok {
			return nil, corrupt(bucketRefundsPending, "key %x", k)
		}
		r, err := t.Refund(id)
		if err != nil {
			return nil, missing(err, bucketRefundsPending, "key %x points to missing refund %s", k, id)
		}
		out = append(out, r)
	}
	return out, nil
}

// checkRefunds reports refunds without their index entries, index
// entries without a refund, and payments whose pending and succeeded
// refunds sum to more than their amount.
func (c *checker) checkRefunds() {
	var n, nRefs, nPending int
	held := map[string]int64{}
	_ = c.bucket(bucketRefunds).ForEach(func(k, v []byte) error {
		n++
		var rec refundRecord
		if err := decode("refund", v, &rec); err != nil {
			c.report(fmt.Errorf("refund %s: %w", k, err))
			return nil
		}
		r := rec.refund(string(k))
		what := "refund " + r.ID
		for _, ix := range refundIndexes(r) {
			c.want(ix.bucket, ix.key, what)
		}
		if r.ProviderRef != "" {
			nRefs++
		}
		if r.Status == pay.RefundPending {
			nPending++
		}
		if pay.RefundHolds(r.Status) {
			held[r.PaymentID] += r.Amount
		}
		return nil
	})
	c.wantCount(bucketRefundsByPayment, n, "refunds")
	c.wantCount(bucketRefundsByRef, nRefs, "refunds with a reference")
	c.wantCount(bucketRefundsPending, nPending, "pending refunds")
	for id, sum := range held {
		if p, ok, err := c.payment(id); err != nil || !ok {
			c.report(fmt.Errorf("refunds of payment %s: the payment is missing", id))
		} else if sum > p.Amount {
			c.report(fmt.Errorf("payment %s: pending and succeeded refunds sum to %s, more than its amount %s", id, pay.FormatAmount(sum, p.Currency), pay.FormatAmount(p.Amount, p.Currency)))
		}
	}
}
