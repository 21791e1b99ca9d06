package bolt

// What the operator's tools ask of the store: the payments per status
// for /metrics and the write probe of /readyz.

import (
	"bytes"

	"github.com/paystate/paystate/pay"
)

// WriteProbe writes Tx.Now to meta "ready_probe", replacing the value
// before: one small key in a bucket of a few, so the probe's commit
// writes a page or two.
func (t *tx) WriteProbe() error {
	return t.put(bucketMeta, keyReadyProbe, be64(keyTime(t.now)))
}

// PaymentCounts counts the entries of payments_by_status, one prefix scan
// per status: it walks keys only, never decoding a payment, so a scrape
// costs O(payments) cursor steps (BenchmarkPaymentCounts).
func (t *tx) PaymentCounts() (map[pay.Status]int, error) {
	out := make(map[pay.Status]int)
	c := t.bucket(bucketPaymentsByStatus).Cursor()
	for _, st := range pay.Statuses {
		prefix := statusPrefix(st)
		n := 0
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			n++
		}
		if n > 0 {
			out[st] = n
		}
	}
	return out, nil
}
