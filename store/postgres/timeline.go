package postgres

// The timeline (timeline): each payment's steps, numbered from 1.

import (
	"github.com/jackc/pgx/v5"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// AppendStep appends s to its payment's timeline with the next Seq of that
// payment (from 1, one above the highest stored); s.Seq is ignored. A zero
// At becomes Tx.Now. The payment need not exist.
func (t *tx) AppendStep(s pay.Step) error {
	if err := checkPart("payment id", s.PaymentID, true); err != nil {
		return err
	}
	store.NowIfZero(t.now, &s.At)
	e := enc{what: "step of payment " + s.PaymentID}
	args := []any{s.PaymentID, e.stamp(s.At), string(s.Source), s.Kind, string(s.From), string(s.To), e.u64("version", s.Version), s.EventID, s.Note}
	if e.err != nil {
		return e.err
	}
	if err := t.lockPayment(s.PaymentID); err != nil { // a payment's steps go with it
		return err
	}
	// Queued with the transaction's other writes (later). Two
	// transactions that append to the timeline of a payment not stored
	// (no row to lock) may take the same Seq: the later one's insert
	// fails on the primary key and runs again (classify).
	return t.later("append step", `INSERT INTO timeline (payment_id, seq, at, source, kind, from_status, to_status, version, event_id, note)
		VALUES ($1, (SELECT coalesce(max(seq), 0) + 1 FROM timeline WHERE payment_id = $1), $2, $3, $4, $5, $6, $7, $8, $9)`, nil, args...)
}

// Steps returns a payment's timeline in Seq order; empty (no error) for a
// payment without steps.
func (t *tx) Steps(paymentID string) ([]pay.Step, error) {
	return queryAll(t, "read timeline", `SELECT payment_id, seq, at, source, kind, from_status, to_status, version, event_id, note
		FROM timeline WHERE payment_id = $1 ORDER BY seq`, scanStep, paymentID)
}

// scanStep reads a row of Steps.
func scanStep(r pgx.Row) (pay.Step, error) {
	var (
		s            pay.Step
		seq, version int64
		at           int64
	)
	err := r.Scan(&s.PaymentID, &seq, &at, &s.Source, &s.Kind, &s.From, &s.To, &version, &s.EventID, &s.Note)
	s.Seq, s.Version, s.At = uint64(seq), uint64(version), fromNS(at)
	return s, err
}
