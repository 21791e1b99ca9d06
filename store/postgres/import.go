package postgres

// Import: `paystate copy` writes an export of a bbolt database (the
// records of store/bolt's DB.Export) into an empty PostgreSQL
// database, keeping every id, version, Seq and time as they are.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/paystate/paystate/internal/defaults"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// Importer writes the records of an export into the database: the sink
// of the bbolt store's DB.Export. Every value is written as the export
// gives it: ids, versions, timeline, outbox and ledger Seq, fencing
// tokens, times; the counters (the last outbox and ledger Seq given out,
// the ripple cursor, the purge horizon) are set by Finish, so that the
// next record a paystate appends gets the next number, and a record fanned
// out before the copy is not fanned out again.
//
// The target must be empty (store.ErrTargetNotEmpty otherwise). Begin marks it
// with the export's source (meta "copy_source"); records go in with COPY
// into a temporary table and INSERT ... ON CONFLICT (key) DO NOTHING, one
// transaction per BatchSize records, so a copy that stopped part-way (a
// crash, a lost connection, Ctrl-C) is resumed by running it again on the
// same, unchanged source: what is there already is skipped. Finish writes
// the counters and removes the mark in its last transaction. A record
// that conflicts with another on a unique key other than its own (two
// payments with one provider reference) fails the copy, naming it. One
// session advisory lock keeps two copies from writing into one database
// at once.
//
// An Importer uses one connection of its own and is not safe for
// concurrent use.
type Importer struct {
	conn     *pgx.Conn
	ctx      context.Context
	batch    int
	progress func(int)

	tables   map[string]*importTable
	order    []*importTable
	buffered int
	written  int
	counters []int64 // outbox seq, ledger seq, ripple cursor, outbox horizon (ns); nil until Counters
	begun    bool
}

// importTable is one table's buffered rows.
type importTable struct {
	name    string
	cols    []string
	key     string // the primary key's columns, for ON CONFLICT
	rows    [][]any
	offered int
	written int
}

// importTables are the tables an export fills, in the order of the
// families of store/bolt/doc.go, with their columns (every column but the
// generated ones) and primary keys.
var importTables = []struct{ name, cols, key string }{
	{"payments", paymentCols, "id"},
	{"timeline", "payment_id, seq, at, source, kind, from_status, to_status, version, event_id, note", "payment_id, seq"},
	{"inbox", inboxCols, "provider, event_id"},
	{"processed", "provider, event_id, at", "provider, event_id"},
	{"leases", "payment_id, holder, token, expires_at", "payment_id"},
	{"outbox", outboxCols + ", fanned", "seq"},
	{"deliveries", deliveryCols, "id"},
	{"ledger", "seq, payment_id, event_id, account, currency, amount, at", "seq"},
	{"balances", "account, currency, amount, shard", "account, currency, shard"},
	{"review", reviewCols, "id"},
	{"idempotency_keys", "key, fingerprint, state, owner, locked_until, payment_id, status_code, body, created_at, expires_at", "key"},
	{"customers", "id, points, last_visit_at, updated_at", "id"},
	{"effects", "key, delivery_id, points, at", "key"},
	{"webhook_endpoints", "id, url, disabled, disabled_at, disabled_reason, failing_since, last_success_at, updated_at", "id"},
	{"psp_answers", "payment_id, provider, status, found, raw, error, at", "payment_id"},
	{"psp_charges", "key, payment_id, provider_ref, amount, currency, status, client_secret, redirect_url, refund_key, calls, refunds, created_at, amount_refunded", "key"},
	{"refunds", refundCols, "id"},
	{"disputes", disputeCols, "provider, id"},
	{"settlements", settlementCols, "provider, id"},
	{"recon_runs", reconRunCols, "id"},
}

// NewImporter returns an Importer on a connection of its own, taken from
// the pool (Close gives it up). Nothing is written before Begin.
func (db *DB) NewImporter(ctx context.Context, opts store.ImportOptions) (*Importer, error) {
	opts.BatchSize = defaults.Or(opts.BatchSize, store.DefaultImportBatch)
	pc, err := db.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("copy: %w", classify("connect", err, true))
	}
	im := &Importer{conn: pc.Hijack(), batch: opts.BatchSize, progress: opts.Progress, tables: map[string]*importTable{}}
	for _, t := range importTables {
		it := &importTable{name: t.name, key: t.key}
		for _, c := range strings.Split(t.cols, ",") {
			it.cols = append(it.cols, strings.TrimSpace(c))
		}
		im.tables[t.name] = it
		im.order = append(im.order, it)
	}
	return im, nil
}

// Close ends the Importer's connection, and with it its lock and its
// temporary tables. What Finish did not commit stays as far as the last
// batch: running the copy again resumes it.
func (im *Importer) Close() error {
	return im.conn.Close(context.Background())
}

// Begin starts (or resumes) a copy of the export whose source is given
// (store's ExportSink.Begin): it takes the copy's lock, checks that the
// database is empty or holds part of a copy of the same source, marks it
// with the source, and makes the temporary tables. ctx is used by every
// later call.
func (im *Importer) Begin(ctx context.Context, source uint64) error {
	im.ctx = ctx
	if err := im.lock(ctx); err != nil {
		return err
	}
	if err := im.mark(ctx, int64(source)); err != nil {
		return err
	}
	for _, t := range im.order {
		sql := fmt.Sprintf(`CREATE TEMP TABLE %s ON COMMIT DELETE ROWS AS SELECT %s FROM %s WITH NO DATA`,
			pgx.Identifier{"copy_" + t.name}.Sanitize(), strings.Join(t.cols, ", "), pgx.Identifier{t.name}.Sanitize())
		if _, err := im.conn.Exec(ctx, sql); err != nil {
			return fmt.Errorf("copy: %w", classify("create temporary table for "+t.name, err, false))
		}
	}
	im.begun = true
	return nil
}

// copyLockWait is how long Begin waits for the lock of a copy that runs,
// or of one whose connection is closing.
const copyLockWait = 5 * time.Second

// lock takes the session advisory lock of copies into this schema,
// waiting copyLockWait at most (statement_timeout, so that the connection
// stays usable).
func (im *Importer) lock(ctx context.Context) error {
	if _, err := im.conn.Exec(ctx, fmt.Sprintf(`SET statement_timeout = %d`, copyLockWait.Milliseconds())); err != nil {
		return fmt.Errorf("copy: %w", classify("lock", err, true))
	}
	_, err := im.conn.Exec(ctx, `SELECT pg_advisory_lock(hashtextextended('paystate copy ' || coalesce(current_schema(), ''), 0))`)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "57014" { // query_canceled: the timeout
		return fmt.Errorf("copy: another paystate copy is writing into this database")
	} else if err != nil {
		return fmt.Errorf("copy: %w", classify("lock", err, true))
	}
	if _, err := im.conn.Exec(ctx, `RESET statement_timeout`); err != nil {
		return fmt.Errorf("copy: %w", classify("lock", err, true))
	}
	return nil
}

// mark checks the target and records the source in meta "copy_source", in
// one transaction.
func (im *Importer) mark(ctx context.Context, source int64) error {
	tx, err := im.conn.Begin(ctx)
	if err != nil {
		return fmt.Errorf("copy: %w", classify("begin", err, true))
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var (
		marked bool
		mark   int64
	)
	switch err := tx.QueryRow(ctx, `SELECT value FROM meta WHERE key = 'copy_source'`).Scan(&mark); {
	case err == nil:
		marked = true
	case !errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("copy: %w", classify("read meta", err, false))
	}
	switch {
	case marked && mark == source:
		return nil // resume: the batches written before are skipped
	case marked:
		return fmt.Errorf("copy: %w: it holds part of a copy of another bbolt database, or of this one before it was written to again; copy into a new schema, or drop this one's tables and copy again", store.ErrTargetNotEmpty)
	}
	full, err := nonEmpty(ctx, tx)
	if err != nil {
		return err
	}
	if len(full) > 0 {
		return fmt.Errorf("copy: %w: %s hold records; copy into a new, empty database or schema (the search_path of storage.dsn)", store.ErrTargetNotEmpty, strings.Join(full, ", "))
	}
	if _, err := tx.Exec(ctx, `INSERT INTO meta (key, value) VALUES ('copy_source', $1)`, source); err != nil {
		return fmt.Errorf("copy: %w", classify("mark", err, false))
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("copy: %w", classify("commit", err, true))
	}
	return nil
}

// nonEmpty names the tables of the schema that hold rows (schema_version
// aside), and meta's counters that have moved.
func nonEmpty(ctx context.Context, tx pgx.Tx) ([]string, error) {
	rows, err := tx.Query(ctx, `SELECT c.relname FROM pg_class c
		WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'p')
			AND c.relname NOT IN ('schema_version', 'meta') ORDER BY c.relname`)
	if err != nil {
		return nil, fmt.Errorf("copy: %w", classify("list tables", err, false))
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("copy: %w", classify("list tables", err, false))
	}
	var full []string
	for _, name := range tables {
		var has bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+pgx.Identifier{name}.Sanitize()+`)`).Scan(&has); err != nil {
			return nil, fmt.Errorf("copy: %w", classify("read "+name, err, false))
		}
		if has {
			full = append(full, "table "+name)
		}
	}
	rows, err = tx.Query(ctx, `SELECT key FROM meta WHERE value <> 0 ORDER BY key`)
	if err != nil {
		return nil, fmt.Errorf("copy: %w", classify("read meta", err, false))
	}
	moved, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("copy: %w", classify("read meta", err, false))
	}
	for _, k := range moved {
		full = append(full, "meta "+k)
	}
	return full, nil
}

// add buffers one row of a table, after checking that its text can be
// stored, and writes the buffered rows once there are BatchSize of them.
// what names the record in an error.
func (im *Importer) add(table, what string, e *enc, row ...any) error {
	if !im.begun {
		return fmt.Errorf("copy: %s before Begin", what)
	}
	if e.err != nil {
		return fmt.Errorf("copy %s: %w", what, e.err)
	}
	t := im.tables[table]
	for i, v := range row {
		if s, ok := v.(string); ok {
			if err := storableText(s); err != nil {
				return fmt.Errorf("copy %s: %s: %w", what, t.cols[i], err)
			}
		}
	}
	t.rows = append(t.rows, row)
	t.offered++
	if im.buffered++; im.buffered >= im.batch {
		return im.flush()
	}
	return nil
}

// flush writes the buffered rows in one transaction: for each table, COPY
// into its temporary table, then INSERT into the table what it does not
// hold yet.
func (im *Importer) flush() error {
	if im.buffered == 0 {
		return nil
	}
	ctx := im.ctx
	tx, err := im.conn.Begin(ctx)
	if err != nil {
		return fmt.Errorf("copy: %w", classify("begin", err, true))
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	written := map[*importTable]int{}
	for _, t := range im.order {
		if len(t.rows) == 0 {
			continue
		}
		tmp := pgx.Identifier{"copy_" + t.name}
		if _, err := tx.CopyFrom(ctx, tmp, t.cols, pgx.CopyFromRows(t.rows)); err != nil {
			return fmt.Errorf("copy %s: %w", t.name, classify("copy", err, false))
		}
		cols := strings.Join(t.cols, ", ")
		tag, err := tx.Exec(ctx, fmt.Sprintf(`INSERT INTO %s (%s) SELECT %s FROM %s ON CONFLICT (%s) DO NOTHING`,
			pgx.Identifier{t.name}.Sanitize(), cols, cols, tmp.Sanitize(), t.key))
		if err != nil {
			return fmt.Errorf("copy %s: %w", t.name, classify("insert", err, false))
		}
		written[t] = int(tag.RowsAffected())
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("copy: %w", classify("commit", err, true))
	}
	for _, t := range im.order {
		t.written += written[t]
		t.rows = t.rows[:0]
	}
	im.written += im.buffered
	im.buffered = 0
	if im.progress != nil {
		im.progress(im.written)
	}
	return nil
}

// Counters records the export's single values (store's
// ExportSink.Counters); Finish writes them.
func (im *Importer) Counters(outboxSeq, ledgerSeq, rippleCursor uint64, outboxHorizon time.Time) error {
	e := enc{what: "counters"}
	im.counters = []int64{e.u64("outbox seq", outboxSeq), e.u64("ledger seq", ledgerSeq), e.u64("ripple cursor", rippleCursor), e.stamp(outboxHorizon)}
	if e.err != nil {
		return fmt.Errorf("copy: %w", e.err)
	}
	return nil
}

// Finish writes the last records, then, in one transaction, the counters
// and the end of the copy (the mark Begin made is removed). It fails if
// the export did not reach its counters (it stopped part-way).
func (im *Importer) Finish() error {
	if im.counters == nil {
		return fmt.Errorf("copy: the export ended before its counters: it is incomplete")
	}
	if err := im.flush(); err != nil {
		return err
	}
	ctx := im.ctx
	tx, err := im.conn.Begin(ctx)
	if err != nil {
		return fmt.Errorf("copy: %w", classify("begin", err, true))
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	// A Seq is never reused: the counters are at least the highest stored.
	_, err = tx.Exec(ctx, `UPDATE meta SET value = CASE key
			WHEN 'ripple_cursor' THEN $1::bigint
			WHEN 'outbox_horizon' THEN $2::bigint END
		WHERE key IN ('ripple_cursor', 'outbox_horizon')`,
		im.counters[2], im.counters[3])
	if err == nil { // the records up to the cursor were fanned out
		_, err = tx.Exec(ctx, `UPDATE outbox SET fanned = true WHERE seq <= $1 AND NOT fanned`, im.counters[2])
	}
	if err == nil {
		_, err = tx.Exec(ctx, `SELECT setval(pg_get_serial_sequence('ledger', 'seq'), greatest($1::bigint,
			(SELECT coalesce(max(seq), 0) FROM ledger)) + 1, false)`, im.counters[1])
	}
	if err != nil {
		return fmt.Errorf("copy counters: %w", classify("update meta", err, false))
	}
	if _, err := tx.Exec(ctx, `DELETE FROM meta WHERE key = 'copy_source'`); err != nil {
		return fmt.Errorf("copy: %w", classify("unmark", err, false))
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("copy: %w", classify("commit", err, true))
	}
	if _, err := im.conn.Exec(ctx, `SELECT pg_advisory_unlock_all()`); err != nil {
		return fmt.Errorf("copy: %w", classify("unlock", err, true))
	}
	return nil
}

// Counts returns, per table in the order of the families, the records
// received and those written (the rest were there from an earlier run of a
// resumed copy).
func (im *Importer) Counts() []store.ImportCount {
	out := make([]store.ImportCount, 0, len(im.order))
	for _, t := range im.order {
		out = append(out, store.ImportCount{Table: t.name, Offered: t.offered, Written: t.written})
	}
	return out
}

// Payment buffers a payment.
func (im *Importer) Payment(p pay.Payment) error {
	if err := store.CheckStoredPayment(p); err != nil {
		return fmt.Errorf("copy payment %s: %w", p.ID, err)
	}
	args, err := paymentArgs(p)
	e := enc{err: err}
	return im.add("payments", "payment "+p.ID, &e, args...)
}

// Step buffers a timeline step, with its Seq.
func (im *Importer) Step(s pay.Step) error {
	e := enc{what: "step"}
	return im.add("timeline", fmt.Sprintf("step %d of payment %s", s.Seq, s.PaymentID), &e,
		s.PaymentID, e.u64("seq", s.Seq), e.stamp(s.At), string(s.Source), s.Kind, string(s.From), string(s.To),
		e.u64("version", s.Version), s.EventID, s.Note)
}

// InboxEvent buffers an inbox event, pending or processed as it is.
func (im *Importer) InboxEvent(ev pay.InboxEvent) error {
	e := enc{what: "webhook event"}
	return im.add("inbox", "webhook event "+ev.Provider+"/"+ev.EventID, &e,
		ev.Provider, ev.EventID, ev.Type, ev.PaymentID, ev.ProviderRef, string(ev.Status), ev.StepKind, ev.Amount, ev.Currency,
		e.stamp(ev.OccurredAt), e.stamp(ev.ReceivedAt), orEmpty(ev.Body), int64(ev.Attempts), e.stamp(ev.NextAttemptAt),
		ev.LastError, ev.Processed, detailOrNull(ev.Refund, ev.Dispute, &e), ev.SecondRef)
}

// Processed buffers a processed event id and its time.
func (im *Importer) Processed(provider, eventID string, at time.Time) error {
	e := enc{what: "processed event"}
	return im.add("processed", "processed event "+provider+"/"+eventID, &e, provider, eventID, e.stamp(at))
}

// Lease buffers a lease record with its holder, token and expiry.
func (im *Importer) Lease(l pay.Lease) error {
	e := enc{what: "lease"}
	return im.add("leases", "lease of payment "+l.PaymentID, &e, l.PaymentID, l.Holder, e.u64("token", l.Token), e.stamp(l.ExpiresAt))
}

// Outbox buffers an outbox record, with its Seq, which must be below
// outboxBase (where the Seqs of records appended on PostgreSQL begin).
func (im *Importer) Outbox(r pay.OutboxRecord) error {
	if r.Seq >= outboxBase {
		return fmt.Errorf("copy outbox record %d (%s): a Seq from %d on cannot be copied", r.Seq, r.ID, uint64(outboxBase))
	}
	e := enc{what: "outbox record"}
	return im.add("outbox", fmt.Sprintf("outbox record %d (%s)", r.Seq, r.ID), &e,
		e.u64("seq", r.Seq), r.ID, r.Type, r.PaymentID, string(r.Status), string(r.From), e.u64("version", r.Version), r.OrderID,
		r.Amount, r.Currency, r.Customer.ID, r.Customer.Email, r.Provider, e.stamp(r.CreatedAt),
		r.RefundID, r.DisputeID, r.ObjectAmount, r.ObjectStatus, r.AmountRefunded,
		false) // Finish marks those up to the ripple cursor fanned out
}

// Delivery buffers a delivery in its state.
func (im *Importer) Delivery(d pay.Delivery) error {
	if err := store.CheckStoredDelivery(d); err != nil {
		return fmt.Errorf("copy delivery %s: %w", d.ID, err)
	}
	e := enc{what: "delivery"}
	return im.add("deliveries", "delivery "+d.ID, &e,
		d.ID, d.Effect, d.Endpoint, d.EventID, d.EventType, e.u64("event seq", d.EventSeq), e.stamp(d.EventAt), d.PaymentID, d.State,
		int64(d.Attempts), e.stamp(d.NextAttemptAt), d.LastError, d.Note, e.stamp(d.CreatedAt), e.stamp(d.UpdatedAt))
}

// LedgerEntry buffers a journal line, with its Seq.
func (im *Importer) LedgerEntry(l pay.LedgerEntry) error {
	e := enc{what: "ledger entry"}
	return im.add("ledger", fmt.Sprintf("ledger entry %d", l.Seq), &e,
		e.u64("seq", l.Seq), l.PaymentID, l.EventID, l.Account, l.Currency, l.Amount, e.stamp(l.At))
}

// Balance buffers the running balance of an account in a currency, as
// its shard 0.
func (im *Importer) Balance(b pay.Balance) error {
	e := enc{what: "balance"}
	return im.add("balances", "balance of "+b.Account+" in "+b.Currency, &e, b.Account, b.Currency, b.Amount, int32(0))
}

// Review buffers a review item.
func (im *Importer) Review(i pay.ReviewItem) error {
	e := enc{what: "review item"}
	return im.add("review", "review item "+i.ID, &e,
		i.ID, i.PaymentID, i.Reason, i.Provider, i.ProviderRef, i.EventID, string(i.Observed), i.Note, i.LastPSP, e.stamp(i.CreatedAt))
}

// IdemKey buffers an idempotency key's record. The error names the key's
// payment, not the key (it holds the client's key).
func (im *Importer) IdemKey(r pay.IdemRecord) error {
	e := enc{what: "idempotency key"}
	return im.add("idempotency_keys", "idempotency key of payment "+r.PaymentID, &e,
		r.Key, r.Fingerprint, r.State, r.Owner, e.stamp(r.LockedUntil), r.PaymentID, int64(r.StatusCode), orEmpty(r.Body),
		e.stamp(r.CreatedAt), e.stamp(r.ExpiresAt))
}

// Customer buffers a customer account.
func (im *Importer) Customer(c store.CustomerAccount) error {
	e := enc{what: "customer"}
	return im.add("customers", "customer "+c.ID, &e, c.ID, c.Points, e.stamp(c.LastVisitAt), e.stamp(c.UpdatedAt))
}

// Effect buffers an effect's dedupe record.
func (im *Importer) Effect(r store.EffectRecord) error {
	e := enc{what: "effect"}
	return im.add("effects", "effect "+r.Key, &e, r.Key, r.DeliveryID, r.Points, e.stamp(r.At))
}

// Endpoint buffers a merchant endpoint's state.
func (im *Importer) Endpoint(ep store.WebhookEndpoint) error {
	e := enc{what: "webhook endpoint"}
	return im.add("webhook_endpoints", "webhook endpoint "+ep.ID, &e,
		ep.ID, ep.URL, ep.Disabled, e.stamp(ep.DisabledAt), ep.DisabledReason, e.stamp(ep.FailingSince), e.stamp(ep.LastSuccessAt), e.stamp(ep.UpdatedAt))
}

// PSPAnswer buffers a payment's last PSP answer.
func (im *Importer) PSPAnswer(a pay.PSPAnswer) error {
	e := enc{what: "PSP answer"}
	return im.add("psp_answers", "PSP answer of payment "+a.PaymentID, &e,
		a.PaymentID, a.Provider, string(a.Status), a.Found, a.Raw, a.Error, e.stamp(a.At))
}

// PSPCharge buffers a charge of the mock PSP.
func (im *Importer) PSPCharge(c store.PSPCharge) error {
	e := enc{what: "charge"}
	for _, n := range []struct {
		field string
		v     int
	}{{"calls", c.Calls}, {"refunds", c.Refunds}} {
		if n.v < 0 || n.v > math.MaxInt32 {
			e.err = pay.Errorf(pay.EINVALID, "charge %s cannot be stored: %s %d is outside 0 to %d", c.Key, n.field, n.v, math.MaxInt32)
		}
	}
	return im.add("psp_charges", "charge "+c.Key, &e,
		c.Key, c.PaymentID, c.ProviderRef, c.Amount, c.Currency, string(c.Status), c.ClientSecret, c.RedirectURL, c.RefundKey,
		int32(c.Calls), int32(c.Refunds), e.stamp(c.CreatedAt), c.AmountRefunded)
}

// Refund buffers a refund.
func (im *Importer) Refund(r pay.Refund) error {
	e := enc{what: "refund"}
	return im.add("refunds", "refund "+r.ID, &e,
		r.ID, r.PaymentID, r.Provider, r.Amount, r.Currency, r.Reason, string(r.Status), r.ProviderRef,
		r.IdemKey, r.EventID, e.stamp(r.CreatedAt), e.stamp(r.UpdatedAt))
}

// Dispute buffers a dispute.
func (im *Importer) Dispute(d pay.Dispute) error {
	e := enc{what: "dispute"}
	return im.add("disputes", "dispute "+d.Provider+"/"+d.ID, &e,
		d.Provider, d.ID, d.PaymentID, d.Amount, d.Currency, d.Reason, string(d.Status),
		e.stamp(d.EvidenceDueBy), e.stamp(d.CreatedAt), e.stamp(d.UpdatedAt))
}
