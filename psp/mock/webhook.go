package mock

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/psp/stdwebhook"
)

// schedule starts the goroutine that, after the webhook delay, moves c from
// status from to final (when final is set and c is still in from) and posts
// the webhooks of types, in order. Nothing is scheduled after Close.
func (p *Provider) schedule(c *charge, types []string, from, final pay.Status) {
	if len(types) == 0 && final == "" {
		return
	}
	p.later(func() {
		// The customer acted, or the bank answered: the PSP's status moves on.
		p.mu.Lock()
		moved := final != "" && c.Status == from
		if moved {
			c.Status = final
		}
		rec := c.record()
		// Decide the deliveries: duplicates and order.
		now := p.Now()
		var sends []stdwebhook.Event
		for _, typ := range types {
			e := p.eventAt(c, typ, now)
			sends = append(sends, e)
			if p.rnd.Float64() < p.cfg.DuplicateRate {
				sends = append(sends, e)
				p.stats.WebhooksDuplicated++
			}
		}
		p.mu.Unlock()
		if moved {
			if err := p.save(context.Background(), rec); err != nil {
				p.Logger.Warn().Err(err).Str("payment_id", rec.PaymentID).Msg("mock: record the charge's new status")
			}
		}
		if p.cfg.Reorder {
			slices.Reverse(sends)
		}

		for _, e := range sends {
			if !p.deliver(e) {
				return // closed
			}
		}
	})
}

// event builds the webhook of type typ about c, stamped now.
func (p *Provider) event(c *charge, typ string) stdwebhook.Event {
	return p.eventAt(c, typ, p.Now())
}

// eventAt builds the webhook of type typ about c. Its id is derived from
// the charge and the type, so a redelivery carries the same id.
func (p *Provider) eventAt(c *charge, typ string, now time.Time) stdwebhook.Event {
	return stdwebhook.Event{
		ID:          "evt_mock_" + digest(c.ProviderRef+"/"+typ),
		Type:        typ,
		Created:     now,
		PaymentID:   c.PaymentID,
		ProviderRef: c.ProviderRef,
		Amount:      c.Amount,
		Currency:    c.Currency,
	}
}

// done ends one webhook goroutine.
func (p *Provider) done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.inflight--
	if p.inflight == 0 {
		p.idle.Broadcast()
	}
}

// sleep waits d, or until Close; it reports whether the wait ran out.
func (p *Provider) sleep(d time.Duration) bool {
	if d <= 0 {
		return p.ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-p.ctx.Done():
		return false
	}
}

// deliver posts one event, retrying with backoff, and drops it quietly after
// the last attempt (a real PSP gives up too; the sweeper finds the drift).
// It reports false once the provider is closed.
func (p *Provider) deliver(e stdwebhook.Event) bool {
	body, err := stdwebhook.EncodeEvent(e)
	if err != nil {
		// The mock builds its own events; this is a bug, not a PSP failure.
		p.Logger.Error().Err(err).Str("payment_id", e.PaymentID).Str("event_id", e.ID).Msg("encode mock webhook")
		return true
	}
	wait := p.backoff
	for attempt := 1; ; attempt++ {
		err := p.post(e.ID, body)
		if err == nil {
			p.mu.Lock()
			p.stats.WebhooksSent++
			p.mu.Unlock()
			p.Logger.Debug().Str("payment_id", e.PaymentID).Str("event_id", e.ID).Str("type", e.Type).Int("attempt", attempt).Msg("mock webhook delivered")
			return true
		}
		if p.ctx.Err() != nil {
			return false
		}
		if attempt >= p.attempts {
			p.mu.Lock()
			p.stats.WebhooksFailed++
			p.mu.Unlock()
			p.Logger.Warn().Err(err).Str("payment_id", e.PaymentID).Str("event_id", e.ID).Str("type", e.Type).Int("attempts", attempt).Msg("mock webhook dropped after every attempt failed")
			return true
		}
		p.Logger.Debug().Err(err).Str("payment_id", e.PaymentID).Str("event_id", e.ID).Int("attempt", attempt).Stringer("retry_in", wait).Msg("mock webhook attempt failed")
		if !p.sleep(wait) {
			return false
		}
		wait = min(wait*2, maxRetryBackoff)
	}
}

// post makes one delivery attempt, signed at the current time.
func (p *Provider) post(id string, body []byte) error {
	p.mu.Lock()
	p.stats.Attempts++
	target := p.webhookURL
	p.mu.Unlock()
	if target == "" {
		return errors.New("no webhook url set")
	}

	h, err := p.signer.Header(id, p.Now(), body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(p.ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("build webhook request: %w", err)
	}
	for k, vs := range h {
		req.Header[k] = vs
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "paystate-mock-psp")

	resp, err := p.Client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("webhook answered %s", resp.Status)
	}
	return nil
}
