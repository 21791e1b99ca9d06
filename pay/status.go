package pay

import "fmt"

// Status is the state of a payment. The wire strings are part of the
// contract and never change.
type Status string

const (
	// Created is set by the merchant API when the payment is stored, before
	// (or, in report mode, instead of) the PSP call. It leaves Created on the
	// first PSP answer, report or webhook, or when the sweeper expires it.
	Created Status = "created"

	// Processing is set by a PSP answer or webhook that says the PSP is still
	// working. The PSP's final answer (sync, webhook, sweeper) moves it on.
	Processing Status = "processing"

	// RequiresAction is set by a PSP answer that needs the customer (3-D
	// Secure, a redirect). The customer's action is reported by a webhook.
	RequiresAction Status = "requires_action"

	// FinalizePending is set when the charge was sent but its answer was lost
	// (timeout, crash): the PSP may already have finished. Only PSP evidence
	// (webhook, sweeper status query, a human on the review queue) moves it on.
	FinalizePending Status = "finalize_pending"

	// Expired is set by the sweeper for a payment that aged past
	// payment.expire_after. It is not terminal: the sweeper resolves it
	// against the PSP, and any observation may move it.
	Expired Status = "expired"

	// Captured is terminal: the PSP took the money. Only a refund leaves it.
	Captured Status = "captured"

	// Failed is terminal: the PSP declined or the payment was canceled.
	Failed Status = "failed"

	// Refunded is terminal: a captured payment was refunded in full.
	Refunded Status = "refunded"
)

// Statuses lists every status, in the order of the state diagram.
var Statuses = []Status{Created, Processing, RequiresAction, FinalizePending, Expired, Captured, Failed, Refunded}

// ParseStatus returns the status named s or an invalid error.
func ParseStatus(s string) (Status, error) {
	st := Status(s)
	if !st.Valid() {
		return "", Invalidf("status", "status %q is not one of created, processing, requires_action, finalize_pending, expired, captured, failed, refunded", s)
	}
	return st, nil
}

// Valid reports whether s is a known status.
func (s Status) Valid() bool {
	switch s {
	case Created, Processing, RequiresAction, FinalizePending, Expired, Captured, Failed, Refunded:
		return true
	}
	return false
}

// Terminal reports whether s is a final outcome of the PSP.
func (s Status) Terminal() bool {
	return s == Captured || s == Failed || s == Refunded
}

// ShowsSecrets reports whether a client may still see the client secret and
// redirect URL of a payment in status s.
func (s Status) ShowsSecrets() bool {
	return s == Created || s == Processing || s == RequiresAction
}

// rank orders the non-terminal statuses for rule 5; Expired has no rank.
func (s Status) rank() int {
	switch s {
	case Created:
		return 0
	case Processing, RequiresAction:
		return 1
	case FinalizePending:
		return 2
	}
	return -1
}

// Decision is what the state machine says about an observation.
type Decision int

const (
	// Apply: the observation changes the stored status (a real transition).
	Apply Decision = iota
	// Duplicate: the payment is already in the observed status.
	Duplicate
	// Stale: the observation is older than what is stored; it is ignored.
	Stale
	// ConflictingTerminal: a terminal payment is reported with another
	// terminal outcome; a human must decide (review queue).
	ConflictingTerminal
)

// String returns the decision's name as used in the timeline and metrics.
func (d Decision) String() string {
	switch d {
	case Apply:
		return "apply"
	case Duplicate:
		return "duplicate"
	case Stale:
		return "stale"
	case ConflictingTerminal:
		return "conflicting_terminal"
	}
	return fmt.Sprintf("decision(%d)", int(d))
}

// Decide applies the rules of the state machine to an observation obs of a
// payment stored in status cur. It is the one transition table of paystate.
func Decide(cur, obs Status) Decision {
	switch {
	case cur == obs:
		// Rule 1 for terminal statuses; for non-terminal ones the same status
		// is no transition either.
		return Duplicate
	case cur.Terminal():
		if cur == Captured && obs == Refunded {
			return Apply // rule 2
		}
		if cur == Refunded && obs == Captured {
			// The capture came before the refund: a late report of it is
			// old news, not a conflict (rule 4 in spirit).
			return Stale
		}
		if obs.Terminal() {
			return ConflictingTerminal // rule 3
		}
		return Stale // rule 4
	case obs.Terminal():
		return Apply // rule 5: any terminal outcome ends a non-terminal payment
	case cur == Expired || obs == Expired:
		// Expired may move to anything, and the sweeper may expire any
		// non-terminal payment.
		return Apply
	case obs.rank() < cur.rank():
		return Stale
	default:
		// Equal rank (processing <-> requires_action) or a higher one.
		return Apply
	}
}

// CanTransition reports whether a payment may move from one status to another.
func CanTransition(from, to Status) bool {
	return from != to && Decide(from, to) == Apply
}
