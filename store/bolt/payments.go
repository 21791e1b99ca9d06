package bolt

// Payments and their four indexes: payments_by_status (the sweeper's
// candidates), payments_by_created and payments_by_order (lists) and
// payments_by_ref (the provider's reference).

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// List limits of ListPayments.
const (
	DefaultListLimit = pay.DefaultListLimit
	MaxListLimit     = pay.MaxListLimit
)

// Payment returns the payment with the given id, or ENOTFOUND.
func (t *tx) Payment(id string) (pay.Payment, error) {
	p, ok, err := t.payment(id)
	if err != nil {
		return pay.Payment{}, err
	} else if !ok {
		return pay.Payment{}, pay.Errorf(pay.ENOTFOUND, "payment %s not found", id)
	}
	return p, nil
}

// payment loads a payment and reports whether it exists.
//
// The last payment decoded is kept in t until t writes a payment: one
// webhook's transaction reads its payment three times (to resolve the
// event, in finalize.Apply, and for the compare-and-set), and decoding it
// once is a tenth of that transaction's time. pay.Payment holds no
// pointer or slice, so the copy handed out shares nothing.
func (t *tx) payment(id string) (pay.Payment, bool, error) {
	if t.cached.ID == id && id != "" {
		return t.cached, true, nil
	}
	var r paymentRecord
	if ok, err := t.getRecord(bucketPayments, keyID(id), &r); err != nil || !ok {
		return pay.Payment{}, false, err
	}
	t.cached = r.payment()
	return t.cached, true, nil
}

// PaymentByRef finds a payment by the provider's reference, or ENOTFOUND.
func (t *tx) PaymentByRef(provider, ref string) (pay.Payment, error) {
	v := t.bucket(bucketPaymentsByRef).Get(refKey(provider, ref))
	if v == nil || ref == "" {
		return pay.Payment{}, pay.Errorf(pay.ENOTFOUND, "payment with %s reference %s not found", provider, ref)
	}
	id, ok := parseKeyID(v)
	if !ok {
		return pay.Payment{}, corrupt(bucketPaymentsByRef, "%s/%s: value %x is not a payment id", provider, ref, v)
	}
	p, ok, err := t.payment(id)
	if err != nil {
		return pay.Payment{}, err
	} else if !ok {
		return pay.Payment{}, corrupt(bucketPaymentsByRef, "%s/%s points to missing payment %s", provider, ref, id)
	}
	return p, nil
}

// InsertPayment stores a new payment with Version 1; ECONFLICT if the id
// exists or another payment has the same provider reference.
func (t *tx) InsertPayment(p pay.Payment) error {
	if err := store.CheckStoredPayment(p); err != nil {
		return err
	}
	if p.Version != 1 {
		return pay.Errorf(pay.EINVALID, "payment %s: a new payment has version 1, got %d", p.ID, p.Version)
	}
	if t.has(bucketPayments, keyID(p.ID)) {
		return pay.Errorf(pay.ECONFLICT, "payment %s already exists", p.ID)
	}
	if err := t.checkRefFree(p); err != nil {
		return err
	}
	return t.writePayment(nil, fromPayment(p).payment())
}

// UpdatePayment writes p with compare-and-set on the version: the stored
// version must be prev and p.Version prev+1, else ECONFLICT (nothing is
// written). Every index follows the new record.
func (t *tx) UpdatePayment(p pay.Payment, prev uint64) error {
	if err := store.CheckStoredPayment(p); err != nil {
		return err
	}
	cur, ok, err := t.payment(p.ID)
	if err != nil {
		return err
	} else if !ok {
		return pay.Errorf(pay.ENOTFOUND, "payment %s not found", p.ID)
	}
	if cur.Version != prev {
		return pay.Errorf(pay.ECONFLICT, "payment %s is at version %d, not %d", p.ID, cur.Version, prev)
	}
	if p.Version != prev+1 {
		return pay.Errorf(pay.ECONFLICT, "payment %s: the version after %d is %d, got %d", p.ID, prev, prev+1, p.Version)
	}
	if err := t.checkRefFree(p); err != nil {
		return err
	}
	return t.writePayment(&cur, fromPayment(p).payment())
}

// checkRefFree returns ECONFLICT if one of p's provider references
// belongs to another payment.
func (t *tx) checkRefFree(p pay.Payment) error {
	for _, ref := range refsOf(p) {
		if v := t.bucket(bucketPaymentsByRef).Get(refKey(p.Provider, ref)); v != nil && !bytes.Equal(v, keyID(p.ID)) {
			other, _ := parseKeyID(v)
			return pay.Errorf(pay.ECONFLICT, "%s reference %s already belongs to payment %s", p.Provider, ref, other)
		}
	}
	return nil
}

// refsOf lists p's provider references (ProviderRef, then a SecondRef
// other than it), each an entry of payments_by_ref.
func refsOf(p pay.Payment) []string {
	var refs []string
	if p.ProviderRef != "" {
		refs = append(refs, p.ProviderRef)
	}
	if p.SecondRef != "" && p.SecondRef != p.ProviderRef {
		refs = append(refs, p.SecondRef)
	}
	return refs
}

// indexEntry is one entry a payment has in an index.
type indexEntry struct {
	bucket, key, value []byte
}

// paymentIndexes lists the index entries of p.
func paymentIndexes(p pay.Payment) []indexEntry {
	ix := []indexEntry{
		{bucketPaymentsByStatus, statusKey(p.Status, p.UpdatedAt, p.ID), nil},
		{bucketPaymentsByCreated, createdKey(p.CreatedAt, p.ID), nil},
		{bucketPaymentsByOrder, orderKey(p.OrderID, p.CreatedAt, p.ID), nil},
	}
	for _, ref := range refsOf(p) {
		ix = append(ix, indexEntry{bucketPaymentsByRef, refKey(p.Provider, ref), keyID(p.ID)})
	}
	return ix
}

// writePayment stores p (times in UTC) and moves its index entries from
// those of old (nil for a new payment) to those of p.
func (t *tx) writePayment(old *pay.Payment, p pay.Payment) error {
	t.cached = pay.Payment{}
	next := paymentIndexes(p)
	var kept []indexEntry // entries old has too, value and all: not written again
	if old != nil {
		for _, o := range paymentIndexes(*old) {
			i := slices.IndexFunc(next, func(n indexEntry) bool {
				return bytes.Equal(n.bucket, o.bucket) && bytes.Equal(n.key, o.key)
			})
			switch {
			case i < 0:
				if err := t.del(o.bucket, o.key); err != nil {
					return err
				}
			case bytes.Equal(next[i].value, o.value):
				kept = append(kept, o)
			}
		}
	}
	if err := t.putRecord(bucketPayments, keyID(p.ID), fromPayment(p)); err != nil {
		return err
	}
	for _, n := range next {
		if slices.ContainsFunc(kept, func(k indexEntry) bool {
			return bytes.Equal(n.bucket, k.bucket) && bytes.Equal(n.key, k.key)
		}) {
			continue
		}
		if err := t.put(n.bucket, n.key, n.value); err != nil {
			return err
		}
	}
	return nil
}

// ListPayments returns a page of payments and the cursor of the next page
// ("" on the last page), in the order f.Order names.
//
// ByCreated walks payments_by_created newest first, from CreatedBefore
// down to CreatedFrom when they are set: a date range costs what it holds.
// ByOrder walks one order's payments (payments_by_order), newest created
// first. ByStatus walks payments_by_status, newest updated first; a
// payment that changes while a client pages moves in that order, so it
// may be seen twice or not at all. Filters the index does not decide
// (status within an order, a customer) are matched on each payment read:
// a customer search reads every payment of the range it is given, as many
// as it takes to fill the page. Limit 0 means DefaultListLimit; other
// values are clamped to 1..MaxListLimit. A cursor that is not from the
// same kind of list is EINVALID.
func (t *tx) ListPayments(f pay.PaymentFilter) ([]pay.Payment, string, error) {
	limit, err := store.PaymentListLimit(f)
	if err != nil {
		return nil, "", err
	}

	// Pick the index, and in payments_by_created the range of keys.
	var (
		bucket []byte
		kind   byte
		prefix []byte
		top    []byte // keys below this; nil: the end of the prefix
		bottom []byte // keys at or above this
	)
	switch f.Order() {
	case pay.ByOrder:
		if err := checkPart("order_id", f.OrderID, false); err != nil {
			return nil, "", err
		}
		bucket, kind, prefix = bucketPaymentsByOrder, cursorOrder, orderPrefix(f.OrderID)
	case pay.ByStatus:
		bucket, kind, prefix = bucketPaymentsByStatus, cursorStatus, statusPrefix(f.Status)
	default:
		bucket, kind = bucketPaymentsByCreated, cursorCreated
		if !f.CreatedBefore.IsZero() {
			top = be64(keyTime(f.CreatedBefore))
		}
		if !f.CreatedFrom.IsZero() {
			bottom = be64(keyTime(f.CreatedFrom))
		}
	}

	// Position on the first key of the page.
	c := t.bucket(bucket).Cursor()
	var k []byte
	switch {
	case f.Cursor != "":
		from, err := decodeCursor(f.Cursor, kind, prefix)
		if err != nil {
			return nil, "", err
		}
		if top != nil && bytes.Compare(from, top) > 0 {
			from = top
		}
		k = seekBefore(c, from)
	case top != nil:
		k = seekBefore(c, top)
	default:
		k = lastWithPrefix(c, prefix)
	}

	// Walk backwards; one match past the page means there is a next page.
	var (
		out  []pay.Payment
		last []byte
	)
	for ; k != nil && bytes.HasPrefix(k, prefix) && (bottom == nil || bytes.Compare(k, bottom) >= 0); k, _ = c.Prev() {
		_, id, ok := splitTimeKeyID(k, len(prefix))
		if !ok {
			return nil, "", corrupt(bucket, "key %x", k)
		}
		p, found, err := t.payment(id)
		if err != nil {
			return nil, "", err
		} else if !found {
			return nil, "", corrupt(bucket, "key %x points to missing payment %s", k, id)
		}
		if !f.Match(p) {
			continue
		}
		if len(out) == limit {
			return out, encodeCursor(kind, last), nil
		}
		out = append(out, p)
		last = bytes.Clone(k)
	}
	return out, "", nil
}

// Candidates returns up to limit payments in the given statuses whose
// UpdatedAt is strictly before updatedBefore, oldest first (ties by id). For
// each status it scans payments_by_status from status ‖ 0x00 up to the
// bound and stops after limit entries, so the cost is O(statuses × limit)
// index entries plus limit payment reads, whatever the number of payments.
// EINVALID for an unknown status or a limit below 1.
func (t *tx) Candidates(statuses []pay.Status, updatedBefore time.Time, limit int) ([]pay.Payment, error) {
	// The first page: after the zero time and the empty id, which sorts
	// before every entry of a status.
	return t.CandidatesAfter(statuses, updatedBefore, time.Time{}, "", limit)
}

// CandidatesAfter returns up to limit payments in the given statuses whose
// UpdatedAt is strictly before updatedBefore and whose (UpdatedAt, ID) is
// greater than (afterUpdated, afterID), oldest first (ties by id). For each
// status it seeks payments_by_status to status ‖ 0x00 ‖ be64(afterUpdated)
// ‖ afterID and reads at most limit entries below the bound, so a page
// costs O(statuses × limit) whatever the number of payments. EINVALID for
// an unknown status or a limit below 1.
func (t *tx) CandidatesAfter(statuses []pay.Status, updatedBefore, afterUpdated time.Time, afterID string, limit int) ([]pay.Payment, error) {
	if err := checkLimit(limit); err != nil {
		return nil, err
	}
	if err := checkPart("payment id", afterID, false); err != nil {
		return nil, err
	}
	type cand struct {
		ns uint64
		id string
	}
	var (
		cs   []cand
		seen = make(map[pay.Status]bool, len(statuses))
	)
	for _, s := range statuses {
		if !s.Valid() {
			return nil, pay.Errorf(pay.EINVALID, "status %q is not a known status", s)
		}
		if seen[s] {
			continue
		}
		seen[s] = true
		prefix, end := statusPrefix(s), statusBound(s, updatedBefore)
		from := statusKey(s, afterUpdated, afterID)
		c := t.bucket(bucketPaymentsByStatus).Cursor()
		k, _ := c.Seek(from)
		if k != nil && bytes.Equal(k, from) {
			k, _ = c.Next() // strictly after the cursor
		}
		for n := 0; k != nil && bytes.Compare(k, end) < 0 && n < limit; k, _ = c.Next() {
			t.indexSteps++
			ns, id, ok := splitTimeKeyID(k, len(prefix))
			if !ok {
				return nil, corrupt(bucketPaymentsByStatus, "key %x", k)
			}
			cs = append(cs, cand{ns, id})
			n++
		}
	}

	// Merge: oldest first over all statuses, then cap.
	slices.SortFunc(cs, func(a, b cand) int {
		return cmp.Or(cmp.Compare(a.ns, b.ns), cmp.Compare(a.id, b.id))
	})
	if len(cs) > limit {
		cs = cs[:limit]
	}
	out := make([]pay.Payment, 0, len(cs))
	for _, c := range cs {
		p, ok, err := t.payment(c.id)
		if err != nil {
			return nil, err
		} else if !ok {
			return nil, corrupt(bucketPaymentsByStatus, "entry points to missing payment %s", c.id)
		}
		out = append(out, p)
	}
	return out, nil
}

// checkPayments reports payments that lack one of their index entries,
// and index entries without a payment.
func (c *checker) checkPayments() {
	var nPayments, nRefs int
	_ = c.bucket(bucketPayments).ForEach(func(k, v []byte) error {
		nPayments++
		var r paymentRecord
		if err := decodeAt("payment", k, v, &r); err != nil {
			c.report(fmt.Errorf("payment %s: %w", k, err))
			return nil
		}
		p := r.payment()
		what := "payment " + p.ID
		for _, ix := range paymentIndexes(p) {
			c.want(ix.bucket, ix.key, what)
		}
		for _, ref := range refsOf(p) {
			nRefs++
			if got := c.bucket(bucketPaymentsByRef).Get(refKey(p.Provider, ref)); got != nil && !bytes.Equal(got, keyID(p.ID)) {
				other, ok := parseKeyID(got)
				if !ok {
					other = fmt.Sprintf("%x", got)
				}
				c.report(fmt.Errorf("%s: reference %s/%s points to %s", what, p.Provider, ref, other))
			}
		}
		return nil
	})
	for _, b := range [][]byte{bucketPaymentsByStatus, bucketPaymentsByCreated, bucketPaymentsByOrder} {
		c.wantCount(b, nPayments, "payments")
	}
	c.wantCount(bucketPaymentsByRef, nRefs, "payments with a reference")
}
