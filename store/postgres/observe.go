package postgres

// What the operator's tools ask of the store: the payments per status
// for /metrics and the write probe of /readyz.

import (
	"github.com/jackc/pgx/v5"

	"github.com/paystate/paystate/pay"
)

// WriteProbe writes Tx.Now to the meta row "ready_probe", made on the
// first probe. Every instance on the database writes the same row: the
// probe of one waits at most for another's, never for a payment's lock.
func (t *tx) WriteProbe() error {
	_, err := t.exec("write probe", `INSERT INTO meta (key, value) VALUES ('ready_probe', $1)
		ON CONFLICT (key) DO UPDATE SET value = excluded.value`, t.nowNS())
	return err
}

// statusCount is one row of PaymentCounts.
type statusCount struct {
	status pay.Status
	n      int64
}

// PaymentCounts counts payments per status with one GROUP BY, which
// PostgreSQL answers from the payments_by_status index.
func (t *tx) PaymentCounts() (map[pay.Status]int, error) {
	rows, err := queryAll(t, "count payments", `SELECT status, count(*) FROM payments GROUP BY status`,
		func(r pgx.Row) (statusCount, error) {
			var c statusCount
			err := r.Scan(&c.status, &c.n)
			return c, err
		})
	if err != nil {
		return nil, err
	}
	out := make(map[pay.Status]int, len(rows))
	for _, c := range rows {
		out[c.status] = int(c.n)
	}
	return out, nil
}
