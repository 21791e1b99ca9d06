package bolt

// Export: every record of the file, family by family, for `paystate copy`,
// which moves a bbolt database into PostgreSQL.

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// exportPage is how many records Export asks a Tx list method for at once.
const exportPage = 500

// Export reads every record of the database in one read transaction, so
// that it sees one state of the file, and hands them to sink family by
// family: payments (newest first, as ListPayments lists them), their
// timelines, inbox events, processed event ids, leases, outbox records,
// deliveries (pending, done, dead), ledger lines, balances, review items,
// idempotency keys, customer accounts, effect records, webhook endpoints,
// PSP answers, the mock PSP's charges, refunds and disputes, settlements
// and reconciliation runs, then the counters. Index
// buckets are not exported: they are derived from the records.
//
// Records are read through the store.Tx methods (ListPayments, Steps,
// OutboxAfter, InboxEvent, IdemKey, ...); only the families that no Tx
// method lists are found by walking their bucket's keys, and each record
// is then read with its Tx getter. Processed ids, which no getter returns
// with their time, are the one family decoded here.
//
// A long export holds the read transaction throughout: run it on a file
// no paystate is writing (copy opens it read-only, which a running
// paystate's lock refuses).
func (db *DB) Export(ctx context.Context, sink store.ExportSink) error {
	return db.view(ctx, nil, func(t *tx) error {
		e := exporter{ctx: ctx, t: t, sink: sink}
		if err := sink.Begin(ctx, t.fingerprint()); err != nil {
			return err
		}
		for _, step := range []struct {
			family string
			run    func() error
		}{
			{"payments", e.payments},
			{"timeline", e.timeline},
			{"inbox", e.inbox},
			{"processed", e.processed},
			{"leases", e.leases},
			{"outbox", e.outbox},
			{"deliveries", e.deliveries},
			{"ledger", e.ledger},
			{"balances", e.balances},
			{"review", e.review},
			{"idempotency keys", e.idemKeys},
			{"customers", e.customers},
			{"effects", e.effects},
			{"webhook endpoints", e.endpoints},
			{"psp answers", e.pspAnswers},
			{"psp charges", e.pspCharges},
			{"refunds", e.refunds},
			{"disputes", e.disputes},
			{"settlements", e.settlements},       // reconcile.go
			{"reconciliation runs", e.reconRuns}, // reconcile.go
			{"counters", e.counters},
		} {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := step.run(); err != nil {
				return fmt.Errorf("export %s: %w", step.family, err)
			}
		}
		return nil
	})
}

// exporter is one run of Export.
type exporter struct {
	ctx  context.Context
	t    *tx
	sink store.ExportSink
}

// fingerprint is the export's source (ExportSink.Begin): an FNV-64a hash
// of the id of the last transaction committed to the file, the outbox and
// ledger counters, and the first and last payments as stored (key and
// value). Any write changes the transaction id; the rest tells apart two
// files that happen to share one.
func (t *tx) fingerprint() uint64 {
	h := fnv.New64a()
	_ = binary.Write(h, binary.BigEndian, uint64(t.btx.ID()))
	_ = binary.Write(h, binary.BigEndian, t.bucket(bucketOutbox).Sequence())
	_ = binary.Write(h, binary.BigEndian, t.bucket(bucketLedger).Sequence())
	c := t.bucket(bucketPayments).Cursor()
	fk, fv := c.First()
	lk, lv := c.Last()
	for _, b := range [][]byte{fk, fv, lk, lv} {
		_ = binary.Write(h, binary.BigEndian, uint32(len(b)))
		_, _ = h.Write(b)
	}
	return h.Sum64()
}

// eachPayment calls fn with every page of payments, newest first.
func (e *exporter) eachPayment(fn func([]pay.Payment) error) error {
	for cursor := ""; ; {
		ps, next, err := e.t.ListPayments(pay.PaymentFilter{Limit: exportPage, Cursor: cursor})
		if err != nil {
			return err
		}
		if err := fn(ps); err != nil {
			return err
		}
		if next == "" {
			return nil
		}
		cursor = next
		if err := e.ctx.Err(); err != nil {
			return err
		}
	}
}

func (e *exporter) payments() error {
	return e.eachPayment(func(ps []pay.Payment) error {
		for _, p := range ps {
			if err := e.sink.Payment(p); err != nil {
				return err
			}
		}
		return nil
	})
}

func (e *exporter) timeline() error {
	return e.eachPayment(func(ps []pay.Payment) error {
		for _, p := range ps {
			steps, err := e.t.Steps(p.ID)
			if err != nil {
				return err
			}
			for _, s := range steps {
				if err := e.sink.Step(s); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// eachKey calls fn with a copy of every key of bucket, in key order.
func (e *exporter) eachKey(bucket []byte, fn func(k []byte) error) error {
	c := e.t.bucket(bucket).Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		if err := fn(append([]byte(nil), k...)); err != nil {
			return err
		}
	}
	return nil
}

// eventParts splits a key of inbox or processed (eventKey).
func eventParts(bucket, k []byte) (provider, eventID string, err error) {
	provider, rest, ok := readWord(k)
	if !ok || len(rest) == 0 {
		return "", "", corrupt(bucket, "key %x is not word(provider) ‖ event id", k)
	}
	return provider, string(rest), nil
}

// inbox exports every stored event, orphans (no payment) included, which
// InboxForPayment would not find.
func (e *exporter) inbox() error {
	return e.eachKey(bucketInbox, func(k []byte) error {
		provider, eventID, err := eventParts(bucketInbox, k)
		if err != nil {
			return err
		}
		ev, err := e.t.InboxEvent(provider, eventID)
		if err != nil {
			return err
		}
		return e.sink.InboxEvent(ev)
	})
}

// processed exports every processed event id with its time, those of
// events that were never in the inbox included, from processed_by_time,
// which holds them all (oldest first).
func (e *exporter) processed() error {
	c := e.t.bucket(bucketProcessedByTime).Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		ns, event, ok := splitTimeKey(k)
		if !ok {
			return corrupt(bucketProcessedByTime, "key %x", k)
		}
		provider, eventID, err := eventParts(bucketProcessedByTime, event)
		if err != nil {
			return err
		}
		if err := e.sink.Processed(provider, eventID, time.Unix(0, int64(ns)).UTC()); err != nil {
			return err
		}
	}
	return nil
}

// leases exports every lease record: its holder, its fencing token (so
// that the next acquisition, wherever, still gets a higher one) and its
// expiry as stored.
func (e *exporter) leases() error {
	return e.eachKey(bucketLeases, func(k []byte) error {
		id, ok := parseKeyID(k)
		if !ok {
			return corrupt(bucketLeases, "key %x is not a payment id", k)
		}
		l, err := e.t.Lease(id)
		if err != nil {
			return err
		}
		return e.sink.Lease(l)
	})
}

func (e *exporter) outbox() error {
	for seq := uint64(0); ; {
		recs, err := e.t.OutboxAfter(seq, exportPage)
		if err != nil {
			return err
		}
		for _, r := range recs {
			if err := e.sink.Outbox(r); err != nil {
				return err
			}
			seq = r.Seq
		}
		if len(recs) < exportPage {
			return nil
		}
	}
}

func (e *exporter) deliveries() error {
	for _, state := range []string{pay.DeliveryPending, pay.DeliveryDone, pay.DeliveryDead} {
		for cursor := ""; ; {
			ds, next, err := e.t.ListDeliveries(pay.DeliveryFilter{State: state, Limit: exportPage, Cursor: cursor})
			if err != nil {
				return err
			}
			for _, d := range ds {
				if err := e.sink.Delivery(d); err != nil {
					return err
				}
			}
			if next == "" {
				break
			}
			cursor = next
		}
	}
	return nil
}

func (e *exporter) ledger() error {
	for seq := uint64(0); ; {
		lines, err := e.t.LedgerEntries(seq, exportPage)
		if err != nil {
			return err
		}
		for _, l := range lines {
			if err := e.sink.LedgerEntry(l); err != nil {
				return err
			}
			seq = l.Seq
		}
		if len(lines) < exportPage {
			return nil
		}
	}
}

func (e *exporter) balances() error {
	bs, err := e.t.LedgerBalances()
	if err != nil {
		return err
	}
	for _, b := range bs {
		if err := e.sink.Balance(b); err != nil {
			return err
		}
	}
	return nil
}

func (e *exporter) review() error {
	items, err := e.t.ListReview()
	if err != nil {
		return err
	}
	for _, i := range items {
		if err := e.sink.Review(i); err != nil {
			return err
		}
	}
	return nil
}

func (e *exporter) idemKeys() error {
	return e.eachKey(bucketIdem, func(k []byte) error {
		key, ok := parseIdemKey(k)
		if !ok {
			return corrupt(bucketIdem, "key %x", k)
		}
		r, err := e.t.IdemKey(key)
		if err != nil {
			return err
		}
		return e.sink.IdemKey(r)
	})
}

func (e *exporter) customers() error {
	return e.eachKey(bucketCustomers, func(k []byte) error {
		c, err := e.t.CustomerAccount(string(k))
		if err != nil {
			return err
		}
		return e.sink.Customer(c)
	})
}

func (e *exporter) effects() error {
	return e.eachKey(bucketEffects, func(k []byte) error {
		key, ok := parseEffectKey(k)
		if !ok {
			return corrupt(bucketEffects, "key %x", k)
		}
		r, found, err := e.t.Effect(key)
		if err != nil {
			return err
		} else if !found {
			return corrupt(bucketEffects, "key %q reads back as missing", k)
		}
		return e.sink.Effect(r)
	})
}

func (e *exporter) endpoints() error {
	return e.eachKey(bucketWebhookEndpoints, func(k []byte) error {
		ep, err := e.t.WebhookEndpoint(string(k))
		if err != nil {
			return err
		}
		return e.sink.Endpoint(ep)
	})
}

func (e *exporter) pspAnswers() error {
	return e.eachKey(bucketPSPAnswers, func(k []byte) error {
		id, ok := parseKeyID(k)
		if !ok {
			return corrupt(bucketPSPAnswers, "key %x is not a payment id", k)
		}
		a, err := e.t.PSPAnswer(id)
		if err != nil {
			return err
		}
		return e.sink.PSPAnswer(a)
	})
}

func (e *exporter) pspCharges() error {
	return e.eachKey(bucketPSPCharges, func(k []byte) error {
		key, ok := parsePSPChargeKey(k)
		if !ok {
			return corrupt(bucketPSPCharges, "key %x", k)
		}
		c, err := e.t.PSPCharge(key)
		if err != nil {
			return err
		}
		return e.sink.PSPCharge(c)
	})
}

// refunds exports every payment's refunds (a refund belongs to a stored
// payment).
func (e *exporter) refunds() error {
	return e.eachPayment(func(ps []pay.Payment) error {
		for _, p := range ps {
			rs, err := e.t.RefundsForPayment(p.ID)
			if err != nil {
				return err
			}
			for _, r := range rs {
				if err := e.sink.Refund(r); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// disputes exports every payment's disputes (a dispute belongs to a
// stored payment).
func (e *exporter) disputes() error {
	return e.eachPayment(func(ps []pay.Payment) error {
		for _, p := range ps {
			ds, err := e.t.DisputesForPayment(p.ID)
			if err != nil {
				return err
			}
			for _, d := range ds {
				if err := e.sink.Dispute(d); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

func (e *exporter) counters() error {
	cursor, err := e.t.RippleCursor()
	if err != nil {
		return err
	}
	horizon, err := e.t.OutboxHorizon()
	if err != nil {
		return err
	}
	return e.sink.Counters(e.t.bucket(bucketOutbox).Sequence(), e.t.bucket(bucketLedger).Sequence(), cursor, horizon)
}

// exportBuckets are the buckets of the records Export hands out, one per
// family (processed ids: processed_by_time, which holds them all); the
// others are indexes of these, or meta.
var exportBuckets = [][]byte{
	bucketPayments, bucketTimeline, bucketInbox, bucketProcessedByTime, bucketLeases, bucketOutbox, bucketDeliveries,
	bucketLedger, bucketBalances, bucketReview, bucketIdem, bucketCustomers, bucketEffects, bucketWebhookEndpoints,
	bucketPSPAnswers, bucketPSPCharges, bucketRefunds, bucketDisputes, bucketSettlements, bucketReconRuns,
}

// ExportSize returns how many records Export would hand out (the counters
// aside), for a progress bar: the keys of the record buckets, counted by
// walking their pages in one read transaction, and the steps of each
// timeline, read from its value's head.
func (db *DB) ExportSize(ctx context.Context) (int, error) {
	n := 0
	err := db.view(ctx, nil, func(t *tx) error {
		for _, b := range exportBuckets {
			if !bytes.Equal(b, bucketTimeline) {
				n += t.bucket(b).Stats().KeyN
			}
		}
		// A timeline is one value with its steps (timeline.go).
		return t.bucket(bucketTimeline).ForEach(func(k, v []byte) error {
			steps, err := timelineLen(v)
			if err != nil {
				return corrupt(bucketTimeline, "key %x: %v", k, err)
			}
			n += steps
			return nil
		})
	})
	return n, err
}
