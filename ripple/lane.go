package ripple

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/paystate/paystate/internal/ids"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
)

// lane is one target's share of the workers: at most max of its
// deliveries are attempted at once, and they hold no other target's.
//
// A lane of an effect attempted outside the store (receipt, webhook) also
// keeps a queue of up to Batch deliveries claimed for it: an attempt that
// ends takes the next one from the queue on the same goroutine, so a lane
// runs at its cap without a pass per attempt, and a pass, which reads the
// due index past every delivery it cannot start, runs only when the queue
// runs short. A lane of an effect applied inside the store (inStore:
// loyalty, retention) has no queue: a pass hands all its due deliveries
// to one batch (runInStore), and the next batch waits for that one.
//
// Service.mu guards running and queue; max and inStore do not change once
// the service runs.
type lane struct {
	max     int
	inStore bool
	running int    // deliveries being attempted
	queue   []*job // claimed, waiting for one of them
}

// full reports whether the lane can take nothing a pass would give it: an
// in-store lane while its batch runs (one at a time, so they grow),
// another while its queue is not short (its attempts wake a pass when it
// is).
func (l *lane) full() bool {
	if l.inStore {
		return l.running > 0
	}
	return l.running >= l.max && len(l.queue) > l.max
}

// admit gives j a place if the lane has one: to run now (run), or in the
// queue while it holds fewer than queueCap. batching says that this pass
// makes the in-store lane's batch already.
func (l *lane) admit(j *job, queueCap int, batching bool) (run, ok bool) {
	switch {
	case l.inStore && l.running > 0 && !batching:
		return false, false // the lane's batch runs: wait for the next one
	case l.running < l.max:
		l.running++
		return true, true
	case !l.inStore && len(l.queue) < queueCap:
		l.queue = append(l.queue, j)
		return false, true
	}
	return false, false
}

// release frees the place of an attempt that ended, or hands it to the
// next job of the queue and returns that job; short says that the queue
// is short enough for a pass to fill.
func (l *lane) release() (next *job, short bool) {
	if len(l.queue) > 0 {
		next, l.queue = l.queue[0], l.queue[1:]
	} else {
		l.running--
	}
	return next, len(l.queue) <= l.max
}

// job is one running attempt of a delivery. attempted and err are set
// before done is closed.
type job struct {
	d         pay.Delivery
	lane      *lane
	own       bool // adopted (Service.own): given back if not attempted
	done      chan struct{}
	attempted bool
	err       error
}

// dispatch fans out, claims the due deliveries whose target has room
// (claimDue: this process's own, and those of the due index if scan) and
// starts their attempts on goroutines counted in attempts: one per
// attempt outside the store, one batch for the effects applied inside it.
// It returns the jobs it claimed and those that were running before.
// logErrors says that no caller collects the attempts' errors: the
// attempts log them; grace, that the read of the due index leaves the
// other instances' fresh deliveries to them (Config.Grace: Run, not
// RunOnce).
func (s *Service) dispatch(ctx context.Context, attempts *sync.WaitGroup, logErrors, scan, grace bool) (started, running []*job, err error) {
	s.pass.Lock()
	defer s.pass.Unlock()

	if err := s.fanOut(ctx); err != nil {
		return nil, nil, err
	}
	launch, started, running, err := s.claimDue(ctx, scan, grace)
	var batch []*job
	for _, j := range launch {
		if j.lane.inStore {
			batch = append(batch, j)
			continue
		}
		attempts.Go(func() { s.run(ctx, j, logErrors) })
	}
	if len(batch) > 0 {
		attempts.Go(func() { s.runInStore(ctx, batch, logErrors) })
	}
	return started, running, err
}

// claimDue takes the deliveries this process's transitions wrote (own,
// with claims) and, if scan, reads the due deliveries, and claims each
// that is not running yet and whose lane admits it. It returns the
// claimed jobs that got a place to run (launch), every job it claimed
// (started: those also wait in a lane's queue) and the jobs that were
// running before. Only passes call it, one at a time.
//
// Own deliveries are not read first: their attempt (a batch's
// ClaimDeliveries, or attempt's) finds whether they are still pending,
// due and first in line for their payment, and gives them back (keepOwn)
// if not. With grace, the read passes over the deliveries that were
// never attempted and are younger than Config.Grace, by the time in
// their ids (ULIDs): the instance that wrote them claims them.
//
// A delivery whose target is at its cap (running and queue full) stays due
// for a later pass (the attempt that frees a place wakes Run). Those
// deliveries and the claimed ones are still due in the store, at the head
// of the due index when a target has fallen behind, so the pass reads past
// them: until it has seen every due delivery or passed over none, a
// backlog of one target never hides the others' due deliveries. The pass
// skips, by id and without reading them, the deliveries claimed already
// and those the last pass left to a lane that is still full, so a backlog
// costs a walk of the due index's keys per pass, not a read of each
// delivery in it.
func (s *Service) claimDue(ctx context.Context, scan, grace bool) (launch, started, running []*job, err error) {
	// What the pass need not read: the deliveries claimed already, and
	// those that waited for a lane that is still full. A pass that reads
	// no due index (Run's, woken for own deliveries) needs neither, nor
	// the running jobs (RunOnce's, which always reads).
	claimed, full := map[string]bool{}, map[string]bool{}
	if scan {
		s.mu.Lock()
		for id, j := range s.inflight {
			running = append(running, j)
			claimed[id] = true
		}
		for tgt, l := range s.lanes {
			full[tgt] = l.full()
		}
		s.mu.Unlock()
	}
	held := map[string]string{}
	fresh := time.Time{} // with grace, ids made after it are other instances' fresh work
	if s.claims && grace {
		fresh = s.now().Add(-s.Config.Grace)
	}
	skip := func(id string) bool {
		if claimed[id] {
			return true
		}
		if !fresh.IsZero() {
			if at, ok := ids.Time(ids.DeliveryPrefix, id); ok && at.After(fresh) {
				return true // an instance's own, or this one's that a pass took
			}
		}
		if _, ok := held[id]; ok {
			return true // read by an earlier read of this pass
		}
		if tgt, ok := s.heldIDs[id]; ok && full[tgt] {
			held[id] = tgt
			return true
		}
		return false
	}
	batching := map[string]bool{} // in-store lanes whose batch this pass makes
	limit := s.batch()
	// admit claims d if its lane has a place and reports whether it did.
	// s.mu must be held.
	admit := func(d pay.Delivery, own bool) bool {
		tgt := d.Target()
		j := &job{d: d, lane: s.laneOf(tgt), own: own, done: make(chan struct{})}
		run, ok := j.lane.admit(j, limit, batching[tgt])
		if !ok {
			return false
		}
		if run {
			batching[tgt] = true
			launch = append(launch, j)
		}
		s.inflight[d.ID] = j
		claimed[d.ID] = true
		started = append(started, j)
		return true
	}
	if s.claims {
		// Only the targets whose lane has room: a pass while a batch runs
		// costs no walk of the deliveries waiting for the next one.
		var back []pay.Delivery
		s.mu.Lock()
		room := func(tgt string) bool {
			l := s.laneOf(tgt)
			if l.inStore {
				return l.running == 0 || batching[tgt]
			}
			return l.running < l.max || len(l.queue) < limit
		}
		for _, d := range s.takeOwn(room) {
			if _, ok := s.inflight[d.ID]; ok {
				continue // running already
			}
			if !admit(d, true) {
				back = append(back, d)
			}
		}
		s.mu.Unlock()
		s.keepOwn(s.graceCutoff(), back...)
	}
	for scan {
		var due []pay.Delivery
		err = store.View(ctx, s.Store, asRippleTx, func(tx rippleTx) error {
			var err error
			due, err = tx.DueDeliveriesSkipping(tx.Now(), limit, skip)
			return err
		})
		if err != nil {
			err = fmt.Errorf("due deliveries: %w", err)
			break
		}
		passed := 0
		s.mu.Lock()
		for _, d := range due {
			if _, ok := s.inflight[d.ID]; ok {
				continue // running, or claimed by an earlier read of this pass
			}
			if !admit(d, false) {
				passed++
				held[d.ID] = d.Target()
			}
		}
		s.mu.Unlock()
		if len(due) < limit || passed == 0 || ctx.Err() != nil {
			if len(due) == limit || passed > 0 {
				s.rescan.Store(true) // due deliveries left behind: the next pass reads again
			}
			break
		}
	}
	if scan {
		s.heldIDs = held
	}
	return launch, started, running, err
}

// laneOf returns the lane of a target; one no longer configured gets
// Config.Workers places. s.mu must be held.
func (s *Service) laneOf(target string) *lane {
	l, ok := s.lanes[target]
	if !ok {
		l = &lane{max: max(s.Config.Workers, 1)}
		s.lanes[target] = l
	}
	return l
}

// run makes the attempt of j and of the jobs it then takes from its
// lane's queue. Once ctx is done, queued jobs end unattempted.
func (s *Service) run(ctx context.Context, j *job, logErrors bool) {
	for j != nil {
		var (
			attempted bool
			err       = ctx.Err()
		)
		if err == nil {
			attempted, err = s.attempt(ctx, j.d)
		}
		j = s.finish(ctx, j, attempted, err, logErrors)
	}
}

// finish publishes j's outcome and frees its place, or hands the place to
// the next job of the lane's queue and returns it. If the attempt was
// recorded and the queue is short, it wakes Run.
func (s *Service) finish(ctx context.Context, j *job, attempted bool, err error, logErrors bool) (next *job) {
	s.mu.Lock()
	delete(s.inflight, j.d.ID)
	next, short := j.lane.release()
	s.mu.Unlock()
	j.attempted, j.err = attempted, err
	close(j.done)
	if j.own && !attempted && err == nil {
		s.keepOwn(s.graceCutoff(), j.d) // not first in line yet, perhaps
	}
	if err != nil {
		// Not recorded: the delivery stays due for the next Interval.
		if logErrors && ctx.Err() == nil {
			s.Logger.Error().Err(err).Str("payment_id", j.d.PaymentID).Str("event_id", j.d.EventID).
				Str("effect", j.d.Effect).Str("delivery_id", j.d.ID).Msg("ripple attempt")
		}
		return next
	}
	if attempted && short {
		select {
		case s.freed <- struct{}{}:
		default:
		}
	}
	return next
}

// runInStore attempts jobs of store effects (loyalty, retention) in one
// transaction that applies each effect and records each delivery, so N
// deliveries cost one commit. If that transaction fails (the store, or an
// effect that cannot be applied), each job is attempted on its own, as a
// delivery of any other effect is, and fails alone.
func (s *Service) runInStore(ctx context.Context, jobs []*job, logErrors bool) {
	recs := make([]*recording, len(jobs))
	err := store.Update(context.WithoutCancel(ctx), s.Store, asRippleTx, func(tx rippleTx) error {
		if err := s.advanceCursor(tx); err != nil {
			return err
		}
		// Several instances (claims): the batch's deliveries are claimed
		// in one statement, and those another instance holds are left to
		// it. The records of the batch are read once each.
		var claimed map[string]pay.Delivery
		records := map[uint64]pay.OutboxRecord{}
		if s.claims {
			ids := make([]string, len(jobs))
			for i, j := range jobs {
				ids[i] = j.d.ID
			}
			ds, err := tx.ClaimDeliveries(ids)
			if err != nil {
				return err
			}
			claimed = make(map[string]pay.Delivery, len(ds))
			var keys []string
			for _, d := range ds {
				claimed[d.ID] = d
				rec, err := tx.OutboxRecord(d.EventSeq) // read with the claim
				if pay.ErrorCode(err) == pay.ENOTFOUND {
					continue
				} else if err != nil {
					return err
				}
				records[d.EventSeq] = rec
				if e, ok := s.effects[d.Target()].(storeEffect); ok {
					keys = append(keys, e.keys(rec)...)
				}
			}
			// Their dedupe keys and records in one read too.
			if err := tx.LockEffects(keys); err != nil {
				return err
			}
		}
		for i, j := range jobs {
			recs[i] = nil // the function may run more than once (group commit)
			var (
				cur pay.Delivery
				err error
			)
			if claimed != nil {
				var ok bool
				if cur, ok = claimed[j.d.ID]; !ok {
					continue // purged meanwhile, or another instance's
				}
			} else if cur, err = tx.Delivery(j.d.ID); pay.ErrorCode(err) == pay.ENOTFOUND {
				continue // purged meanwhile: done long ago
			} else if err != nil {
				return err
			}
			if !unchanged(cur, j.d, tx.Now()) {
				continue // moved on since the pass read it
			}
			r := &recording{d: cur}
			rec, ok := records[cur.EventSeq]
			if !ok {
				rec, err = tx.OutboxRecord(cur.EventSeq)
				if err == nil {
					records[cur.EventSeq] = rec
				}
			}
			switch {
			case pay.ErrorCode(err) == pay.ENOTFOUND:
				r.out.permanent, r.failure = true, recordGone(cur)
				r.logErr = r.failure
			case err != nil:
				return err
			default:
				if r.out, err = s.effects[cur.Target()].(storeEffect).applyTx(tx, cur, rec); err != nil {
					return err // perhaps half applied: roll back, and try it alone
				}
			}
			if r.after, r.result, err = s.updateDelivery(tx, cur, r.out, r.failure); err != nil {
				return err
			}
			recs[i] = r
		}
		return nil
	})
	if err != nil {
		for _, j := range jobs {
			s.run(ctx, j, logErrors)
		}
		return
	}
	for i, j := range jobs {
		if recs[i] != nil {
			s.logRecord(recs[i])
		}
		s.finish(ctx, j, recs[i] != nil, nil, logErrors) // an in-store lane has no queue
	}
}
