package httpd_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/pay"
)

// parseOnly is the webhook path without storage: it verifies and parses a
// webhook with the provider, as finalize.Inbox.Accept does before its
// first transaction, redacts the body as the stored copy would be, and
// stores nothing. BenchmarkWebhookFloor puts the HTTP server behind it, so
// that what it measures is the ceiling of any store behind the real
// server, signature check and clients on this machine.
type parseOnly struct{ prov pay.Provider }

func (p parseOnly) Accept(_ context.Context, _ string, body []byte, h http.Header) (pay.WebhookEvent, bool, error) {
	ev, err := p.prov.ParseWebhook(body, h, time.Now())
	if err != nil {
		return ev, false, err
	}
	_ = finalize.Redact(body)
	return ev, false, nil
}

// BenchmarkWebhookFloor is BenchmarkWebhooks/ratio with a server that
// stores nothing (parseOnly): 256 clients post signed standard webhooks
// over keep-alive connections to the same httpd.Server (routing, request
// id, access metrics, the svix signature check, the event's JSON), in
// turns with raw bbolt db.Batch from 256 goroutines. Its ratio is an
// upper bound on BenchmarkWebhooks/ratio on the same machine: no store,
// however fast, makes the webhook path faster than the path without one.
func BenchmarkWebhookFloor(b *testing.B) {
	d := newBenchDaemon(b)
	d.srv.Webhooks = parseOnly{prov: d.inbox.Providers["standard"]}
	d.warmUp(b)
	r := newRawDB(b)
	var answered, raw, cpu, rawCPU time.Duration
	inTurns(b, func(done, size int) {
		b.StopTimer()
		ids := make([]string, size)
		for i := range ids {
			ids[i] = "pay_floor" + time.Now().Format("150405.000000000")
		}
		ws := d.webhooks(b, ids)
		first := r.addPayments(b, size)
		b.StartTimer()
		c0 := cpuTime(b)
		answered += d.sendWebhooks(b, ws)
		c1 := cpuTime(b)
		raw += r.batch(b, first, size)
		cpu, rawCPU = cpu+c1-c0, rawCPU+cpuTime(b)-c1
	})
	reportCPU(b, cpu, rawCPU, raw)
	b.ReportMetric(perSecond(b.N, answered), "webhooks/s")
	b.ReportMetric(perSecond(b.N, raw), "raw-tx/s")
	b.ReportMetric(float64(raw)/float64(answered), "ratio")
}
