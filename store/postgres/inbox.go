package postgres

// The webhook inbox (inbox, with its indexes inbox_pending and
// inbox_by_payment) and the processed event ids (processed, with
// processed_by_time). Both are unique on (provider, event id), and that
// unique key, not a lock, decides between two transactions that store the
// same event or mark it processed: the later INSERT … ON CONFLICT DO
// NOTHING waits for the earlier one's transaction and, if it commits,
// stores nothing. Reads take no lock: the callers that decide on
// IsProcessed hold the payment's row lock first (finalize.Apply, Record),
// so a second instance's check runs after the first one's commit.

import (
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// eventOrder orders events of the same time as the bbolt store's keys
// str(provider) ‖ event id do.
const eventOrder = `octet_length(provider), provider, event_id`

// inboxCols are the columns scanInbox reads, in its order.
const inboxCols = `provider, event_id, type, payment_id, provider_ref, status, step_kind, amount, currency,
	occurred_at, received_at, body, attempts, next_attempt_at, last_error, processed, detail, second_ref`

// scanInbox reads the inboxCols of a row.
func scanInbox(r pgx.Row) (pay.InboxEvent, error) {
	var (
		e                        pay.InboxEvent
		occurred, received, next int64
		attempts                 int64
		detail                   []byte
	)
	err := r.Scan(&e.Provider, &e.EventID, &e.Type, &e.PaymentID, &e.ProviderRef, &e.Status, &e.StepKind, &e.Amount, &e.Currency,
		&occurred, &received, &e.Body, &attempts, &next, &e.LastError, &e.Processed, &detail, &e.SecondRef)
	if err == nil {
		e.Refund, e.Dispute, err = decodeDetail(detail)
	}
	e.OccurredAt, e.ReceivedAt, e.NextAttemptAt = fromNS(occurred), fromNS(received), fromNS(next)
	e.Attempts, e.Body = int(attempts), nilIfEmpty(e.Body)
	return e, err
}

// PutInbox stores a new webhook event and returns true, or returns false
// and stores nothing if (provider, event id) is already in the inbox (ON
// CONFLICT DO NOTHING). A zero ReceivedAt becomes Tx.Now and a zero
// NextAttemptAt becomes ReceivedAt. An event already recorded as processed
// is archived with Processed set and is not pending; otherwise Processed
// is cleared and the event is pending.
func (t *tx) PutInbox(e pay.InboxEvent) (bool, error) {
	e, err := store.NewInboxEvent(e, t.now)
	if err != nil {
		return false, err
	}
	c := enc{what: "webhook event " + e.Provider + "/" + e.EventID}
	args := []any{e.Provider, e.EventID, e.Type, e.PaymentID, e.ProviderRef, string(e.Status), e.StepKind, e.Amount, e.Currency,
		c.stamp(e.OccurredAt), c.stamp(e.ReceivedAt), orEmpty(e.Body), int64(e.Attempts), c.stamp(e.NextAttemptAt), e.LastError}
	detail, err := encodeDetail(e.Refund, e.Dispute)
	if err != nil {
		return false, err
	}
	args = append(args, detail, e.SecondRef)
	if c.err != nil {
		return false, c.err
	}
	const insert = `INSERT INTO inbox (` + inboxCols + `)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15,
			EXISTS (SELECT 1 FROM processed WHERE provider = $1 AND event_id = $2), $16::jsonb, $17)`
	key := joinKey(e.Provider, e.EventID)
	if t.inboxAbsent[key] && t.processed[key].mine {
		// Read missing and marked processed by this transaction, under
		// its payment's lock (a transaction that applies the event
		// too is held behind that lock, and finds the mark): the insert
		// is queued with the other writes and must insert; an entry
		// stored meanwhile without being applied (the event stored alone,
		// for later) makes this transaction run again, and find it.
		delete(t.inboxAbsent, key)
		return true, t.laterInsert("put inbox", insert, "webhook event "+e.Provider+"/"+e.EventID, args...)
	}
	n, err := t.exec("put inbox", insert+` ON CONFLICT DO NOTHING`, args...)
	return n == 1, err
}

// inboxZero are values of the inboxCols, typed, for a row that is not
// there.
const inboxZero = `'', '', '', '', '', '', '', 0, '', 0, 0, ''::bytea, 0, 0, '', false, NULL::jsonb, ''`

// InboxEvent returns one stored event, or ENOTFOUND.
//
// In a write transaction the same statement reads whether the event is
// processed (IsProcessed then costs no statement while the transaction
// takes no other payment's lock), and a missing event is remembered:
// PutInbox of it is then queued with the other writes.
func (t *tx) InboxEvent(provider, eventID string) (pay.InboxEvent, error) {
	if !t.writable {
		return t.inboxEvent(provider, eventID)
	}
	type read struct {
		found, done bool
		e           pay.InboxEvent
	}
	r, _, err := queryOne(t, "read inbox", `WITH i AS (SELECT `+inboxCols+` FROM inbox WHERE provider = $1 AND event_id = $2),
			d AS (SELECT EXISTS (SELECT 1 FROM processed WHERE provider = $1 AND event_id = $2) AS done)
		SELECT true, d.done, i.* FROM i, d
		UNION ALL SELECT false, d.done, `+inboxZero+` FROM d WHERE NOT EXISTS (SELECT 1 FROM i)`,
		func(row pgx.Row) (read, error) {
			var x read
			e, err := scanInbox(prefixed{row, []any{&x.found, &x.done}})
			x.e = e
			return x, err
		}, provider, eventID)
	if err != nil {
		return pay.InboxEvent{}, err
	}
	key := joinKey(provider, eventID)
	t.sawProcessed(key, r.done)
	if !r.found {
		if t.inboxAbsent == nil {
			t.inboxAbsent = map[string]bool{}
		}
		t.inboxAbsent[key] = true
		return pay.InboxEvent{}, pay.Errorf(pay.ENOTFOUND, "webhook event %s/%s not found", provider, eventID)
	}
	delete(t.inboxAbsent, key)
	return r.e, nil
}

// prefixed is a row whose first columns go to dest, before those its
// Scan is given.
type prefixed struct {
	pgx.Row
	dest []any
}

// Scan scans the row into p.dest, then dest.
func (p prefixed) Scan(dest ...any) error { return p.Row.Scan(append(p.dest, dest...)...) }

// processedRead is a processed mark a write transaction read, and how
// many payments it had locked then (tx.lockedPayments).
type processedRead struct {
	done   bool
	locked int
	mine   bool // marked by this transaction (MarkProcessed)
}

// sawProcessed records the processed mark of an event read now.
func (t *tx) sawProcessed(key string, done bool) {
	if t.processed == nil {
		t.processed = map[string]processedRead{}
	}
	t.processed[key] = processedRead{done: done, locked: len(t.payments)}
}

// inboxEvent reads one stored event, or ENOTFOUND.
func (t *tx) inboxEvent(provider, eventID string) (pay.InboxEvent, error) {
	e, found, err := queryOne(t, "read inbox", `SELECT `+inboxCols+` FROM inbox WHERE provider = $1 AND event_id = $2`, scanInbox, provider, eventID)
	return orNotFound(e, found, err, "webhook event %s/%s not found", provider, eventID)
}

// InboxForPayment returns the archived webhooks of a payment, oldest
// received first (inbox_by_payment).
func (t *tx) InboxForPayment(paymentID string) ([]pay.InboxEvent, error) {
	return queryAll(t, "read inbox of payment", `SELECT `+inboxCols+` FROM inbox
		WHERE payment_id = $1 AND payment_id <> '' ORDER BY received_at, `+eventOrder, scanInbox, paymentID)
}

// PendingInbox returns up to limit unprocessed events whose NextAttemptAt
// is at or before due, earliest first (inbox_pending). EINVALID for a
// limit below 1.
func (t *tx) PendingInbox(due time.Time, limit int) ([]pay.InboxEvent, error) {
	if err := checkLimit(limit); err != nil {
		return nil, err
	}
	return queryAll(t, "read pending inbox", `SELECT `+inboxCols+` FROM inbox
		WHERE NOT processed AND next_attempt_at <= $1 ORDER BY next_attempt_at, `+eventOrder+` LIMIT $2`,
		scanInbox, keyNS(due), limit)
}

// DeferInbox records a deferral of a pending event: Attempts+1,
// NextAttemptAt = next, LastError = lastErr. ENOTFOUND if the event is not
// in the inbox; an event already processed is left as it is.
func (t *tx) DeferInbox(provider, eventID string, next time.Time, lastErr string) error {
	c := enc{what: "webhook event " + provider + "/" + eventID}
	nextNS := c.stamp(next)
	if c.err != nil {
		return c.err
	}
	n, err := t.exec("defer inbox", `UPDATE inbox SET attempts = attempts + 1, next_attempt_at = $3, last_error = $4
		WHERE provider = $1 AND event_id = $2 AND NOT processed`, provider, eventID, nextNS, lastErr)
	if err != nil || n == 1 {
		return err
	}
	exists, _, err := queryOne(t, "read inbox", `SELECT EXISTS (SELECT 1 FROM inbox WHERE provider = $1 AND event_id = $2)`, scalar[bool], provider, eventID)
	if err != nil {
		return err
	} else if !exists {
		return pay.Errorf(pay.ENOTFOUND, "webhook event %s/%s not found", provider, eventID)
	}
	return nil // processed: left as it is
}

// IsProcessed reports whether the event was recorded as processed.
//
// A write transaction that read the mark (InboxEvent) or wrote it
// (MarkProcessed), and has locked no payment since, gets it without a
// statement: its callers decide under the payment's row lock, taken
// before (finalize.Apply), so no other transaction can have marked the
// event since. A payment locked after the read makes it read again.
func (t *tx) IsProcessed(provider, eventID string) (bool, error) {
	if r, ok := t.processed[joinKey(provider, eventID)]; ok && r.locked == len(t.payments) {
		return r.done, nil
	}
	ok, _, err := queryOne(t, "read processed", `SELECT EXISTS (SELECT 1 FROM processed WHERE provider = $1 AND event_id = $2)`, scalar[bool], provider, eventID)
	return ok, err
}

// MarkProcessed records the event as processed at Tx.Now (a second call
// keeps the first time: the unique key and ON CONFLICT DO NOTHING), takes
// it off the pending list and sets Processed on its inbox entry, in one
// statement. The event need not be in the inbox.
func (t *tx) MarkProcessed(provider, eventID string) error {
	if err := store.CheckStoredKeys("provider", provider, "event id", eventID); err != nil {
		return err
	}
	if err := t.later("mark processed", `WITH p AS (
			INSERT INTO processed (provider, event_id, at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING)
		UPDATE inbox SET processed = true WHERE provider = $1 AND event_id = $2 AND NOT processed`, nil,
		provider, eventID, t.nowNS()); err != nil {
		return err
	}
	key := joinKey(provider, eventID)
	t.sawProcessed(key, true)
	r := t.processed[key]
	r.mine = true
	t.processed[key] = r
	return nil
}

// PurgeProcessed removes up to limit processed event ids recorded strictly
// before before, oldest first (processed_by_time), and with each its inbox
// entry if that entry is processed, in one statement. It returns how many
// event ids it removed. EINVALID for a limit below 1.
func (t *tx) PurgeProcessed(before time.Time, limit int) (int, error) {
	if err := checkLimit(limit); err != nil {
		return 0, err
	}
	n, _, err := queryOne(t, "purge processed", `WITH due AS (
			SELECT provider, event_id FROM processed WHERE at < $1 ORDER BY at, `+eventOrder+` LIMIT $2),
		gone AS (
			DELETE FROM processed p USING due WHERE p.provider = due.provider AND p.event_id = due.event_id
			RETURNING p.provider, p.event_id),
		archived AS (
			DELETE FROM inbox i USING gone WHERE i.provider = gone.provider AND i.event_id = gone.event_id AND i.processed)
		SELECT count(*) FROM gone`, scalar[int64], keyNS(before), limit)
	return int(n), err
}
