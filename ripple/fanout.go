package ripple

import (
	"context"
	"fmt"
	"time"

	"github.com/paystate/paystate/internal/ids"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// processStart is when the process began, for claimFanOut's throttle.
var processStart = time.Now()

// deliveriesOf returns the deliveries of rec, one per target that wants
// it, in fan-out order, due at now; their EventSeq is rec's.
func (s *Service) deliveriesOf(rec pay.OutboxRecord, now time.Time) []pay.Delivery {
	var ds []pay.Delivery
	for _, e := range s.order {
		if e.wants(rec) {
			ds = append(ds, newDelivery(e, rec, now))
		}
	}
	return ds
}

// newDelivery returns the delivery of rec to e, due at now.
func newDelivery(e effect, rec pay.OutboxRecord, now time.Time) pay.Delivery {
	return pay.Delivery{
		ID: ids.New(ids.DeliveryPrefix, now), Effect: e.name(), Endpoint: e.endpoint(),
		EventID: rec.ID, EventType: rec.Type, EventSeq: rec.Seq, EventAt: rec.CreatedAt,
		PaymentID: rec.PaymentID, State: pay.DeliveryPending, NextAttemptAt: now, CreatedAt: now, UpdatedAt: now,
	}
}

// fanOut creates the deliveries of the outbox records after the cursor and
// moves the cursor, one transaction per batch of records.
//
// Records that no target wants cost no write: the cursor moves past them
// in memory (skip) and reaches the store with the next write of ripple.
// After a restart before that write they are read again, and still want
// nothing unless the configuration changed.
func (s *Service) fanOut(ctx context.Context) error {
	if s.claims {
		return s.claimFanOut(ctx)
	}
	for {
		// Look first, without a write: most passes find nothing new, or
		// nothing any target wants.
		var recs []pay.OutboxRecord
		err := store.View(ctx, s.Store, asRippleTx, func(tx rippleTx) error {
			cur, err := s.cursor(tx)
			if err != nil {
				return err
			}
			recs, err = tx.OutboxAfter(cur, s.batch())
			return err
		})
		if err != nil || len(recs) == 0 {
			return err
		}
		if !s.wanted(recs) {
			s.skipTo(recs[len(recs)-1].Seq)
			if len(recs) < s.batch() {
				return nil
			}
			continue
		}
		var n int
		err = store.Update(ctx, s.Store, asRippleTx, func(tx rippleTx) error {
			n = 0 // the function may run more than once (group commit)
			cur, err := s.cursor(tx)
			if err != nil {
				return err
			}
			recs, err := tx.OutboxAfter(cur, s.batch())
			if err != nil {
				return err
			}
			n = len(recs)
			if n == 0 {
				return nil
			}
			if _, err := s.insertDeliveries(tx, recs); err != nil {
				return err
			}
			return tx.SetRippleCursor(recs[n-1].Seq)
		})
		if err != nil {
			return fmt.Errorf("fan out: %w", err)
		}
		if n < s.batch() {
			return nil
		}
	}
}

// insertDeliveries stores the deliveries of recs and returns them.
func (s *Service) insertDeliveries(tx rippleTx, recs []pay.OutboxRecord) ([]pay.Delivery, error) {
	var all []pay.Delivery
	for _, rec := range recs {
		for _, d := range s.deliveriesOf(rec, tx.Now()) {
			if err := tx.InsertDelivery(d); err != nil {
				return nil, err
			}
			all = append(all, d)
		}
	}
	return all, nil
}

// claimFanOut fans out, on a fanOutStore, the records that their
// transaction did not (appended before the store knew the targets, or by
// another process): batches of them claimed (ClaimUnfanned) by whichever
// instance comes first, no cursor. Their transactions fanned nearly every
// record out, so it looks at most once per Interval.
func (s *Service) claimFanOut(ctx context.Context) error {
	// The process's clock, not Now: a throttle, not a schedule.
	now := time.Since(processStart)
	if last := s.lastClaim.Load(); last != 0 && int64(now)-last < int64(s.interval()) {
		return nil
	}
	s.lastClaim.Store(max(int64(now), 1))
	for {
		var n int
		err := store.Update(ctx, s.Store, asRippleTx, func(tx rippleTx) error {
			recs, err := tx.ClaimUnfanned(s.batch())
			n = len(recs)
			if err != nil || n == 0 {
				return err
			}
			ds, err := s.insertDeliveries(tx, recs)
			if err != nil {
				return err
			}
			tx.OnCommit(func() { s.adopt(ds) }) // this instance's to deliver
			seqs := make([]uint64, n)
			for i, r := range recs {
				seqs[i] = r.Seq
			}
			return tx.MarkFanned(seqs)
		})
		if err != nil {
			return fmt.Errorf("fan out: %w", err)
		}
		if n < s.batch() {
			return nil
		}
	}
}

// wanted reports whether a target wants one of recs.
func (s *Service) wanted(recs []pay.OutboxRecord) bool {
	for _, rec := range recs {
		for _, e := range s.order {
			if e.wants(rec) {
				return true
			}
		}
	}
	return false
}

// skipTo moves the unstored cursor forward to seq.
func (s *Service) skipTo(seq uint64) {
	for {
		old := s.skip.Load()
		if seq <= old || s.skip.CompareAndSwap(old, seq) {
			return
		}
	}
}

// cursor returns the fan-out cursor: the stored one or, if further, the
// one not stored yet.
func (s *Service) cursor(tx rippleTx) (uint64, error) {
	cur, err := tx.RippleCursor()
	return max(cur, s.skip.Load()), err
}

// advanceCursor stores the cursor that skip holds, if it is further than
// the stored one, in a write transaction that ripple makes anyway.
func (s *Service) advanceCursor(tx rippleTx) error {
	skip := s.skip.Load()
	if skip == 0 {
		return nil
	}
	cur, err := tx.RippleCursor()
	if err != nil || skip <= cur {
		return err
	}
	return tx.SetRippleCursor(skip)
}
