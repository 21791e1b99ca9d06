package pay_test

import (
	"testing"

	"github.com/paystate/paystate/pay"
)

// TestDecideRefund walks every (stored, observed) pair of refund statuses.
func TestDecideRefund(t *testing.T) {
	t.Parallel()
	want := map[[2]pay.RefundStatus]pay.Decision{
		{pay.RefundPending, pay.RefundPending}:     pay.Duplicate,
		{pay.RefundPending, pay.RefundSucceeded}:   pay.Apply,
		{pay.RefundPending, pay.RefundFailed}:      pay.Apply,
		{pay.RefundSucceeded, pay.RefundPending}:   pay.Stale, // the acceptance after the outcome
		{pay.RefundSucceeded, pay.RefundSucceeded}: pay.Duplicate,
		{pay.RefundSucceeded, pay.RefundFailed}:    pay.ConflictingTerminal,
		{pay.RefundFailed, pay.RefundPending}:      pay.Stale,
		{pay.RefundFailed, pay.RefundSucceeded}:    pay.ConflictingTerminal,
		{pay.RefundFailed, pay.RefundFailed}:       pay.Duplicate,
	}
	for _, cur := range pay.RefundStatuses {
		for _, obs := range pay.RefundStatuses {
			if got, want := pay.DecideRefund(cur, obs), want[[2]pay.RefundStatus{cur, obs}]; got != want {
				t.Errorf("pay.DecideRefund(%s, %s)=%s, want %s", cur, obs, got, want)
			}
		}
	}
}

// TestDecideDispute walks every (stored, observed) pair of dispute
// statuses: a closed dispute never reopens.
func TestDecideDispute(t *testing.T) {
	t.Parallel()
	want := map[[2]pay.DisputeStatus]pay.Decision{
		{pay.DisputeNeedsResponse, pay.DisputeNeedsResponse}: pay.Duplicate,
		{pay.DisputeNeedsResponse, pay.DisputeUnderReview}:   pay.Apply,
		{pay.DisputeNeedsResponse, pay.DisputeWon}:           pay.Apply,
		{pay.DisputeNeedsResponse, pay.DisputeLost}:          pay.Apply,
		{pay.DisputeUnderReview, pay.DisputeNeedsResponse}:   pay.Stale,
		{pay.DisputeUnderReview, pay.DisputeUnderReview}:     pay.Duplicate,
		{pay.DisputeUnderReview, pay.DisputeWon}:             pay.Apply,
		{pay.DisputeUnderReview, pay.DisputeLost}:            pay.Apply,
		{pay.DisputeWon, pay.DisputeNeedsResponse}:           pay.Stale,
		{pay.DisputeWon, pay.DisputeUnderReview}:             pay.Stale,
		{pay.DisputeWon, pay.DisputeWon}:                     pay.Duplicate,
		{pay.DisputeWon, pay.DisputeLost}:                    pay.ConflictingTerminal,
		{pay.DisputeLost, pay.DisputeNeedsResponse}:          pay.Stale,
		{pay.DisputeLost, pay.DisputeUnderReview}:            pay.Stale,
		{pay.DisputeLost, pay.DisputeWon}:                    pay.ConflictingTerminal,
		{pay.DisputeLost, pay.DisputeLost}:                   pay.Duplicate,
	}
	for _, cur := range pay.DisputeStatuses {
		for _, obs := range pay.DisputeStatuses {
			if got, want := pay.DecideDispute(cur, obs), want[[2]pay.DisputeStatus{cur, obs}]; got != want {
				t.Errorf("pay.DecideDispute(%s, %s)=%s, want %s", cur, obs, got, want)
			}
		}
	}
}

// TestPayment_Refundable: what is left is the amount less the succeeded
// and the pending refunds.
func TestPayment_Refundable(t *testing.T) {
	t.Parallel()
	p := pay.Payment{Amount: 1000, AmountRefunded: 300, AmountRefundPending: 200}
	if got, want := p.Refundable(), int64(500); got != want {
		t.Fatalf("Refundable=%d, want %d", got, want)
	}
}
