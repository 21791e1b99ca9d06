package store

import (
	"context"
	"errors"
	"time"

	"github.com/paystate/paystate/pay"
)

// Copying a store into another backend (`paystate copy`): the source's
// Backend.Export hands every record to the target's Backend.Import.

// ExportSink receives the records of an export (Backend.Export), each family
// in the order of store/bolt/doc.go's table. The values are copies that the sink may
// keep. A method that fails ends the export with its error.
type ExportSink interface {
	// Begin is called first, with the export's source: a fingerprint of
	// the file and of the transaction the export reads, the same for two
	// exports of a source nothing wrote to in between (a copy that stopped
	// part-way may be resumed when it is the same).
	Begin(ctx context.Context, source uint64) error

	// Then one call per record (PaymentRecords, WorkRecords).
	PaymentRecords
	WorkRecords

	// Counters is called last, with the single values: the last outbox
	// and ledger Seq given out (at least the highest stored, more when the
	// newest records were purged: a Seq is never reused), the ripple
	// cursor (Tx.RippleCursor) and the outbox purge horizon
	// (Tx.OutboxHorizon).
	Counters(outboxSeq, ledgerSeq, rippleCursor uint64, outboxHorizon time.Time) error
}

// PaymentRecords receives the records of an export that payments and
// their money are made of, one call per record, each method the records
// of the family it names (ExportSink).
type PaymentRecords interface {
	Payment(p pay.Payment) error
	Step(s pay.Step) error
	PSPAnswer(a pay.PSPAnswer) error
	PSPCharge(c PSPCharge) error
	LedgerEntry(e pay.LedgerEntry) error
	Balance(b pay.Balance) error
	Refund(r pay.Refund) error
	Dispute(d pay.Dispute) error
	Settlement(s pay.Settlement) error
	ReconRun(r pay.ReconRun) error
}

// WorkRecords receives the records of an export that the work around
// payments keeps: webhooks, leases, the outbox and its deliveries, review,
// idempotency keys and the effects' state (ExportSink).
type WorkRecords interface {
	InboxEvent(e pay.InboxEvent) error
	// Processed is a processed event id and when it was recorded
	// (MarkProcessed), whether or not its event is in the inbox.
	Processed(provider, eventID string, at time.Time) error
	Lease(l pay.Lease) error
	Outbox(r pay.OutboxRecord) error
	Delivery(d pay.Delivery) error
	Review(i pay.ReviewItem) error
	IdemKey(r pay.IdemRecord) error
	Customer(c CustomerAccount) error
	Effect(r EffectRecord) error
	Endpoint(e WebhookEndpoint) error
}

// Exporter reads every record of a store (Backend.Export).
type Exporter interface {
	// Export hands every record to sink, family by family, from one
	// read transaction, then the counters.
	Export(ctx context.Context, sink ExportSink) error
	// ExportSize returns how many records Export would hand out (the
	// counters aside), for a progress bar.
	ExportSize(ctx context.Context) (int, error)
}

// Importer is an ExportSink that writes the records into a store
// (Backend.Import). A copy that stopped part-way is resumed by running it
// again on the same, unchanged source.
type Importer interface {
	ExportSink
	// Finish writes the counters and what was left of the last batch.
	Finish() error
	// Counts returns what the importer did with each table's records.
	Counts() []ImportCount
	// Close ends the importer and releases what it holds.
	Close() error
}

// DefaultImportBatch is how many records an Importer writes per
// transaction by default.
const DefaultImportBatch = 5000

// ErrTargetNotEmpty is wrapped by the error of Importer.Begin when the
// database holds records of its own, or part of a copy of another source:
// a copy goes into an empty database only.
var ErrTargetNotEmpty = errors.New("the PostgreSQL database is not empty")

// ImportOptions configure an Importer. The zero value is ready to use.
type ImportOptions struct {
	// BatchSize is how many records one transaction writes. Default
	// DefaultImportBatch.
	BatchSize int
	// Progress, if set, is called after each transaction with the
	// records written so far (all families).
	Progress func(records int)
}

// ImportCount is what an Importer did with one table's records.
type ImportCount struct {
	Table   string
	Offered int // records received
	Written int // records inserted; Offered-Written were there already (a resumed copy)
}
