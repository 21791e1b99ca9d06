package bolt

// Disputes (disputes) and their indexes: disputes_by_payment (a
// payment's disputes) and disputes_by_due (the list by status, soonest
// evidence deadline first).

import (
	"bytes"
	"fmt"
	"slices"

	"go.etcd.io/bbolt"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// PutDispute stores d under (d.Provider, d.ID), replacing the one before,
// and moves its index entries. Its payment must be stored (ENOTFOUND); an
// empty Currency is the payment's.
func (t *tx) PutDispute(d pay.Dispute) error {
	if err := store.CheckStoredKeys("provider", d.Provider, "dispute id", d.ID, "payment id", d.PaymentID); err != nil {
		return err
	}
	p, ok, err := t.payment(d.PaymentID)
	if err != nil {
		return err
	} else if !ok {
		return pay.Errorf(pay.ENOTFOUND, "dispute %s: payment %s not found", d.ID, d.PaymentID)
	}
	if d.Currency == "" {
		d.Currency = p.Currency
	}
	if err := pay.ValidateDispute(d); err != nil {
		return err
	}
	old, err := t.Dispute(d.Provider, d.ID)
	switch {
	case err == nil:
		if old.PaymentID != d.PaymentID {
			return pay.Errorf(pay.ECONFLICT, "dispute %s/%s belongs to payment %s, not %s", d.Provider, d.ID, old.PaymentID, d.PaymentID)
		}
		for _, o := range disputeIndexes(old) {
			if err := t.del(o.bucket, o.key); err != nil {
				return err
			}
		}
	case pay.ErrorCode(err) != pay.ENOTFOUND:
		return err
	}
	if err := t.putRecord(bucketDisputes, disputeKey(d.Provider, d.ID), fromDispute(d)); err != nil {
		return err
	}
	for _, n := range disputeIndexes(d) {
		if err := t.put(n.bucket, n.key, nil); err != nil {
			return err
		}
	}
	return nil
}

// disputeIndexes lists the index entries of d.
func disputeIndexes(d pay.Dispute) []indexEntry {
	return []indexEntry{
		{bucketDisputesByPayment, disputePaymentKey(d.PaymentID, d.Provider, d.ID), nil},
		{bucketDisputesByDue, disputeDueKey(d.Status, d.EvidenceDueBy, d.Provider, d.ID), nil},
	}
}

// Dispute returns one dispute, or ENOTFOUND.
func (t *tx) Dispute(provider, id string) (pay.Dispute, error) {
	var r disputeRecord
	if ok, err := t.getRecord(bucketDisputes, disputeKey(provider, id), &r); err != nil {
		return pay.Dispute{}, err
	} else if !ok || id == "" {
		return pay.Dispute{}, pay.Errorf(pay.ENOTFOUND, "dispute %s/%s not found", provider, id)
	}
	return r.dispute(provider, id), nil
}

// disputeAt reads the dispute whose disputeKey ends index key k after
// prefix n bytes long.
func (t *tx) disputeAt(bucket, k []byte, n int) (pay.Dispute, error) {
	provider, id, ok := readStr(k[n:])
	if !ok {
		return pay.Dispute{}, corrupt(bucket, "key %x", k)
	}
	d, err := t.Dispute(provider, string(id))
	return d, missing(err, bucket, "key %x points to missing dispute %s/%s", k, provider, id)
}

// DisputesForPayment returns a payment's disputes by provider and id.
func (t *tx) DisputesForPayment(paymentID string) ([]pay.Dispute, error) {
	if err := checkPart("payment id", paymentID, false); err != nil {
		return nil, err
	}
	prefix := paymentPrefix(paymentID)
	var out []pay.Dispute
	c := t.bucket(bucketDisputesByPayment).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		d, err := t.disputeAt(bucketDisputesByPayment, k, len(prefix))
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// ListDisputes returns up to f.Limit disputes in f.Status (every status
// when empty), soonest evidence deadline first, those without one last:
// per status, a scan of its prefix of disputes_by_due that stops after
// f.Limit entries.
func (t *tx) ListDisputes(f pay.DisputeFilter) ([]pay.Dispute, error) {
	if f.Limit < 1 || f.Limit > pay.MaxListLimit {
		return nil, pay.Invalidf("limit", "limit must be from 1 to %d, got %d", pay.MaxListLimit, f.Limit)
	}
	statuses := pay.DisputeStatuses
	if f.Status != "" {
		if !f.Status.Valid() {
			return nil, pay.Invalidf("status", "dispute status %q is not one of needs_response, under_review, won, lost", f.Status)
		}
		statuses = []pay.DisputeStatus{f.Status}
	}
	type entry struct {
		due []byte
		d   pay.Dispute
	}
	var all []entry
	for _, s := range statuses {
		prefix := disputeDuePrefix(s)
		c := t.bucket(bucketDisputesByDue).Cursor()
		n := 0
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && n < f.Limit; k, _ = c.Next() {
			if len(k) < len(prefix)+8 {
				return nil, corrupt(bucketDisputesByDue, "key %x", k)
			}
			d, err := t.disputeAt(bucketDisputesByDue, k, len(prefix)+8)
			if err != nil {
				return nil, err
			}
			all = append(all, entry{bytes.Clone(k[len(prefix):]), d})
			n++
		}
	}
	slices.SortFunc(all, func(a, b entry) int { return bytes.Compare(a.due, b.due) })
	if len(all) > f.Limit {
		all = all[:f.Limit]
	}
	out := make([]pay.Dispute, len(all))
	for i, e := range all {
		out[i] = e.d
	}
	return out, nil
}

// CountOpenDisputes counts the needs_response and under_review entries
// of disputes_by_due: O(open disputes).
func (t *tx) CountOpenDisputes() (int, error) {
	n := 0
	for _, s := range []pay.DisputeStatus{pay.DisputeNeedsResponse, pay.DisputeUnderReview} {
		prefix := disputeDuePrefix(s)
		c := t.bucket(bucketDisputesByDue).Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			n++
		}
	}
	return n, nil
}

// checkDisputes reports disputes without their index entries and index
// entries without a dispute.
func (c *checker) checkDisputes() {
	n := 0
	_ = c.bucket(bucketDisputes).ForEach(func(k, v []byte) error {
		n++
		provider, id, ok := readStr(k)
		var rec disputeRecord
		if err := decode("dispute", v, &rec); err != nil || !ok {
			c.report(fmt.Errorf("dispute %x: %v", k, err))
			return nil
		}
		d := rec.dispute(provider, string(id))
		for _, ix := range disputeIndexes(d) {
			c.want(ix.bucket, ix.key, "dispute "+provider+"/"+string(id))
		}
		return nil
	})
	c.wantCount(bucketDisputesByPayment, n, "disputes")
	c.wantCount(bucketDisputesByDue, n, "disputes")
}

// fillPaymentDisputes sets the Dispute of every payment with disputes to
// what they say (pay.DisputeOfPayment), where it differs: a file written
// before payments carried it (field 18 of paymentRecord), or by such a
// binary since. Open runs it on every writable open; disputes are few, so
// it reads them all and writes only a payment whose field is behind. The
// version is not bumped: nothing about the payment changed.
func fillPaymentDisputes(btx *bbolt.Tx) error {
	b := btx.Bucket(bucketDisputes)
	if b == nil {
		return nil
	}
	statuses := map[string][]pay.DisputeStatus{}
	var order []string
	if err := b.ForEach(func(k, v []byte) error {
		var rec disputeRecord
		if err := decodeAt(string(bucketDisputes), k, v, &rec); err != nil {
			return err
		}
		id := string(rec.PaymentID)
		if _, ok := statuses[id]; !ok {
			order = append(order, id)
		}
		statuses[id] = append(statuses[id], pay.DisputeStatus(rec.Status))
		return nil
	}); err != nil {
		return err
	}
	t := &tx{btx: btx}
	for _, id := range order {
		p, ok, err := t.payment(id)
		if err != nil {
			return err
		}
		if want := pay.DisputeOfPayment(statuses[id]...); ok && p.Dispute != want {
			p.Dispute = want
			t.cached = pay.Payment{}
			if err := t.putRecord(bucketPayments, keyID(p.ID), fromPayment(p)); err != nil {
				return err
			}
		}
	}
	return nil
}
