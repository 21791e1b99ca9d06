// Package finalize is paystate's application layer: everything that moves
// a payment's state. It holds the one function that changes a payment's
// status (Finalizer, Apply) and every path that feeds it: creating,
// reporting and refunding a charge (Payments, charge.go), applying PSP
// webhooks from the inbox (Inbox, inbox.go), running slow work under a
// payment's lease (Leases, lease.go), the review queue and its resolution
// (QueueReview, Review, review.go), and the idempotency keys of the
// merchant API (Idempotency, idempotency.go); plus the reads of what these
// wrote and the client view, which decides what of a payment a client may
// see. Adapters (httpd, the CLI) and workers (the sweeper) call it; it
// calls the providers and the store, through pay's interfaces only. The
// package keeps the name of its core: whatever the path, a payment's state
// moves only by finalizing an observation here, so a reader looking for
// "where does a payment change" finds one package.
//
// Every path — the synchronous PSP answer, a merchant's /sync report, a
// webhook, the sweeper, a human on the review queue — builds a
// pay.Observation and calls Finalize (or FinalizeIf, with a precondition).
// In one storage transaction it reads the payment, checks the lease token
// (fencing), checks the evidence (an observation whose amount, currency or
// PSP reference contradicts the payment is not applied: the payment goes
// on the review queue as amount_mismatch or provider_ref_conflict and a
// webhook's event is processed, so it is acknowledged and not retried),
// notes a version conflict and evaluates the state machine
// against the fresh record, writes the next version with compare-and-set,
// appends the outbox record and ledger lines of a real transition, records
// a webhook's event id as processed, and appends a timeline step.
//
// The state machine (pay.Decide), non-terminal statuses ranked
// created < processing = requires_action < finalize_pending:
//
//	            +------------------+-----------------+
//	            |                  |                 v
//	created --> processing <--> requires_action --> finalize_pending
//	   |            |                  |                 |
//	   |            v                  v                 v
//	   +------> captured / failed / refunded <---- expired (any non-terminal
//	                 |                                  may expire; expired
//	                 +--> refunded (only exit from      may move to anything)
//	                      a terminal status)
//
// A terminal payment observed in the same status is a duplicate (no-op);
// observed in another terminal status it goes to the review queue as
// conflicting_terminal; observed in a non-terminal status the observation
// is stale and ignored. A lower-ranked non-terminal observation is stale.
// Only a real transition ("flipped") appends an outbox record.
//
// Refunds and disputes are observations too (pay.Observation.Refund,
// .Dispute), applied by the same Apply with the same steps (processed
// event ids, fencing, the version conflict, compare-and-set on the
// payment), each with a table of its own:
//
//	refund (pay.DecideRefund)              dispute (pay.DecideDispute)
//
//	pending --> succeeded                  needs_response --> under_review
//	   |                                         |                 |
//	   +------> failed                           +-----> won / lost <+
//
// An outcome seen again is a duplicate; a pending report after an outcome,
// an open report of a closed dispute or needs_response after under_review
// is stale; succeeded against failed, or won against lost, goes to the
// review queue as conflicting_terminal. Every change writes the payment (a
// new version and its timeline step: refund_requested, refund_succeeded,
// refund_failed, dispute_opened, dispute_updated, dispute_closed). A
// refund's amount is held in AmountRefundPending while it is pending and
// moves to AmountRefunded when it succeeds; the store refuses a refund that
// would take them past the amount (pay.ERefundExceeds). The refund that
// completes the amount moves the payment captured → refunded in the same
// write. The money moves of refund.go and dispute.go:
//
//	refund succeeded      merchant_revenue +amount, psp_receivable -amount   payment.refund.succeeded
//	refund failed         nothing posted; the amount is free again          payment.refund.failed
//	dispute first seen    disputes +amount, psp_receivable -amount          payment.dispute.created
//	dispute won           psp_receivable +amount, disputes -amount          payment.dispute.closed
//	dispute lost          dispute_losses +amount, disputes -amount          payment.dispute.closed
//
// A payment reported refunded in full (payment.refunded, a human's
// resolution) settles its pending refunds as succeeded and refunds what is
// left with one more refund, each with its event and posting.
package finalize
