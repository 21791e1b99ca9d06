package ripple_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/paystate/paystate/internal/testkit"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/ripple"
	"github.com/paystate/paystate/ripple/rippletest"
	"github.com/paystate/paystate/store"
)

// natsWait bounds the waits for the NATS client to notice that its server
// went away or came back.
const natsWait = 20 * time.Second

// addNATS adds the JetStream relay for srv to e's service, with a short
// reconnect wait so a restarted server is found again soon; cfg's URL
// defaults to srv's.
func (e *env) addNATS(srv *rippletest.NATSServer, cfg ripple.NATSConfig) *ripple.NATSRelay {
	e.t.Helper()
	if cfg.URL == "" {
		cfg.URL = srv.URL
	}
	if cfg.ReconnectWait == 0 {
		cfg.ReconnectWait = 10 * time.Millisecond
	}
	r, err := e.svc.AddNATS(cfg)
	if err != nil {
		e.t.Fatalf("AddNATS: %v", err)
	}
	e.t.Cleanup(r.Close)
	return r
}

// outbox returns a payment's outbox records, in order.
func (e *env) outbox(paymentID string) []pay.OutboxRecord {
	e.t.Helper()
	var recs []pay.OutboxRecord
	if err := e.db.View(context.Background(), func(tx store.Tx) (err error) { recs, err = tx.OutboxForPayment(paymentID); return err }); err != nil {
		e.t.Fatal(err)
	}
	return recs
}

// webhookJSON is the body a merchant webhook carries for rec.
func webhookJSON(t *testing.T, rec pay.OutboxRecord) []byte {
	t.Helper()
	b, err := json.Marshal(ripple.NewEvent(rec))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// summary is what a test compares of a stream's messages: subject and
// Nats-Msg-Id.
func summary(msgs []*jetstream.RawStreamMsg) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, m.Subject+" "+m.Header.Get(jetstream.MsgIDHeader))
	}
	return out
}

// waitConnected waits until the relay is (or is not) connected.
func waitConnected(t *testing.T, r *ripple.NATSRelay, want bool) {
	t.Helper()
	testkit.WaitFor(t, natsWait, func() error {
		if got := r.Connected(); got != want {
			return fmt.Errorf("Connected()=%v, want %v", got, want)
		}
		return nil
	})
}

// TestNATS_PublishesEveryRecord: every captured payment is one message on
// paystate.payment.captured whose body is byte for byte the JSON the
// merchant endpoint got, with Nats-Msg-Id and webhook-id both the event id.
func TestNATS_PublishesEveryRecord(t *testing.T) {
	t.Parallel()
	srv := rippletest.NewNATSServer(t)
	ep := rippletest.NewEndpoint(t)
	e := newEnv(t, t0, ripple.Config{Webhooks: []ripple.EndpointConfig{{URL: ep.URL, Secrets: []string{secret(t)}, Events: []string{"payment.captured"}}}})
	relay := e.addNATS(srv, ripple.NATSConfig{})
	var ps []pay.Payment
	for i := range 3 {
		p := e.payment(i+1, int64(1000+i), "EUR", pay.Customer{ID: fmt.Sprintf("cus_%d", i), Email: "c@example.com"})
		e.finalize(p.ID, pay.Captured)
		ps = append(ps, p)
	}
	e.settle()

	msgs := srv.Messages(ripple.DefaultNATSStream)
	if got, want := len(msgs), len(ps); got != want {
		t.Fatalf("messages=%d, want %d: %v", got, want, summary(msgs))
	}
	hooks := map[string][]byte{} // by webhook-id
	for _, r := range ep.Requests() {
		hooks[r.Header.Get("webhook-id")] = r.Body
	}
	// Different payments are relayed side by side, in any order.
	byID := map[string]*jetstream.RawStreamMsg{}
	for _, m := range msgs {
		byID[m.Header.Get(jetstream.MsgIDHeader)] = m
	}
	for i, p := range ps {
		recs := e.outbox(p.ID)
		if len(recs) != 1 {
			t.Fatalf("payment %d: %d outbox records, want 1", i, len(recs))
		}
		rec, m := recs[0], byID[recs[0].ID]
		if m == nil {
			t.Fatalf("payment %d: no message with Nats-Msg-Id %s: %v", i, rec.ID, summary(msgs))
		}
		if got, want := m.Subject, "paystate.payment.captured"; got != want {
			t.Errorf("message %d: subject=%q, want %q", i, got, want)
		}
		if got, want := m.Header.Get(jetstream.MsgIDHeader), rec.ID; got != want {
			t.Errorf("message %d: Nats-Msg-Id=%q, want the event id %q", i, got, want)
		}
		if got, want := m.Data, webhookJSON(t, rec); !bytes.Equal(got, want) {
			t.Errorf("message %d: body=%s, want %s", i, got, want)
		}
		if got, want := m.Data, hooks[rec.ID]; !bytes.Equal(got, want) {
			t.Errorf("message %d: body=%s, want the merchant webhook's %s", i, got, want)
		}
		d := e.delivery(p.ID, ripple.EffectNATS, pay.Captured)
		if d.State != pay.DeliveryDone || d.Attempts != 1 || !strings.Contains(d.Note, "published to stream PAYSTATE") {
			t.Errorf("payment %d: delivery=%+v, want done after one attempt, saying where it went", i, d)
		}
	}
	if !relay.Connected() {
		t.Fatal("relay not connected")
	}
}

// TestNATS_RedeliveryIsOneMessage: an attempt that published but was not
// recorded (a crash between the acknowledgement and the delivery's
// update) is attempted again with the same Nats-Msg-Id; the server drops
// the second copy and the stream holds one message.
func TestNATS_RedeliveryIsOneMessage(t *testing.T) {
	t.Parallel()
	srv := rippletest.NewNATSServer(t)
	e := newEnv(t, t0, ripple.Config{})
	e.addNATS(srv, ripple.NATSConfig{})
	crashes := 0
	ripple.SetAfterEffect(e.svc, func(d pay.Delivery) error {
		if d.Effect == ripple.EffectNATS && crashes == 0 {
			crashes++
			return errors.New("crash after the publish")
		}
		return nil
	})
	p := e.payment(1, 500, "EUR", pay.Customer{})
	e.finalize(p.ID, pay.Captured)
	if _, err := e.svc.RunOnce(context.Background()); err == nil || !strings.Contains(err.Error(), "crash") {
		t.Fatalf("RunOnce=%v, want the crash", err)
	}
	if d := e.delivery(p.ID, ripple.EffectNATS, pay.Captured); d.State != pay.DeliveryPending || d.Attempts != 0 {
		t.Fatalf("delivery after the crash=%+v, want pending, no attempt recorded", d)
	}
	if got := len(srv.Messages(ripple.DefaultNATSStream)); got != 1 {
		t.Fatalf("messages after the first publish=%d, want 1", got)
	}

	e.settle() // the same delivery, attempted again
	if got, want := crashes, 1; got != want {
		t.Fatalf("crashes=%d, want %d", got, want)
	}
	d := e.delivery(p.ID, ripple.EffectNATS, pay.Captured)
	if d.State != pay.DeliveryDone || !strings.Contains(d.Note, "duplicate") {
		t.Fatalf("delivery=%+v, want done, noting the duplicate", d)
	}
	msgs := srv.Messages(ripple.DefaultNATSStream)
	if got, want := summary(msgs), []string{"paystate.payment.captured " + e.outbox(p.ID)[0].ID}; !slices.Equal(got, want) {
		t.Fatalf("messages=%v, want %v: one, whatever the attempts", got, want)
	}
}

// TestNATS_ServerDown: with NATS down (at start, or later), deliveries to
// the relay fail and wait out their backoff while the other targets are
// delivered; once the server is back on its port and store, they are
// delivered, each once and in order.
func TestNATS_ServerDown(t *testing.T) {
	t.Parallel()

	t.Run("AtStart", func(t *testing.T) {
		t.Parallel()
		srv := rippletest.NewNATSServer(t)
		srv.Shutdown()
		ep := rippletest.NewEndpoint(t)
		e := newEnv(t, t0, ripple.Config{Webhooks: []ripple.EndpointConfig{{URL: ep.URL, Secrets: []string{secret(t)}, Events: []string{"payment.captured", "payment.refunded"}}}})
		retries := metrics.GetOrCreateCounter(`paystate_ripple_deliveries_total{effect="nats",outcome="retry"}`)
		before := retries.Get()
		relay := e.addNATS(srv, ripple.NATSConfig{ConnectTimeout: time.Second})
		if relay.Connected() {
			t.Fatal("connected to a server that is down")
		}
		p := e.payment(1, 900, "EUR", pay.Customer{})
		e.finalize(p.ID, pay.Captured)
		e.finalize(p.ID, pay.Refunded)
		e.settle()

		hook := pay.EffectWebhook + ":" + ripple.EndpointID(ep.URL)
		if d := e.delivery(p.ID, hook, pay.Refunded); d.State != pay.DeliveryDone {
			t.Fatalf("webhook delivery=%+v, want done: NATS down delays no other target", d)
		}
		captured := e.delivery(p.ID, ripple.EffectNATS, pay.Captured)
		if captured.State != pay.DeliveryPending || captured.Attempts != 1 || !captured.NextAttemptAt.After(e.clock.Now()) ||
			!strings.Contains(captured.LastError, "not connected") {
			t.Fatalf("nats delivery=%+v, want pending after one failed attempt, due later", captured)
		}
		if d := e.delivery(p.ID, ripple.EffectNATS, pay.Refunded); d.State != pay.DeliveryPending || d.Attempts != 0 {
			t.Fatalf("refund delivery=%+v, want pending and not attempted: the capture goes first", d)
		}
		if got := retries.Get() - before; got < 1 {
			t.Fatalf("retry counter moved by %d, want at least 1", got)
		}
		if n := e.runOnce(); n != 0 {
			t.Fatalf("a pass within the backoff attempted %d deliveries, want 0", n)
		}

		srv.Start()
		waitConnected(t, relay, true)
		e.clock.Add(2 * time.Hour) // past the backoff
		e.settle()
		recs := e.outbox(p.ID)
		want := []string{"paystate.payment.captured " + recs[0].ID, "paystate.payment.refund.succeeded " + recs[1].ID, "paystate.payment.refunded " + recs[2].ID}
		if got := summary(srv.Messages(ripple.DefaultNATSStream)); !slices.Equal(got, want) {
			t.Fatalf("messages=%v, want %v", got, want)
		}
		if d := e.delivery(p.ID, ripple.EffectNATS, pay.Captured); d.State != pay.DeliveryDone || d.Attempts != 2 {
			t.Fatalf("nats delivery=%+v, want done at the second attempt", d)
		}
	})

	t.Run("Later", func(t *testing.T) {
		t.Parallel()
		srv := rippletest.NewNATSServer(t)
		e := newEnv(t, t0, ripple.Config{})
		relay := e.addNATS(srv, ripple.NATSConfig{})
		p1 := e.payment(1, 100, "EUR", pay.Customer{})
		e.finalize(p1.ID, pay.Captured)
		e.settle()

		srv.Shutdown()
		waitConnected(t, relay, false)
		p2 := e.payment(2, 200, "EUR", pay.Customer{})
		e.finalize(p2.ID, pay.Captured)
		e.settle()
		if d := e.delivery(p2.ID, ripple.EffectNATS, pay.Captured); d.State != pay.DeliveryPending || d.Attempts != 1 {
			t.Fatalf("delivery while NATS is down=%+v, want pending after one attempt", d)
		}

		srv.Start() // same port, same store: the stream and its message are still there
		waitConnected(t, relay, true)
		e.clock.Add(2 * time.Hour)
		e.settle()
		want := []string{"paystate.payment.captured " + e.outbox(p1.ID)[0].ID, "paystate.payment.captured " + e.outbox(p2.ID)[0].ID}
		if got := summary(srv.Messages(ripple.DefaultNATSStream)); !slices.Equal(got, want) {
			t.Fatalf("messages=%v, want %v", got, want)
		}
	})

	t.Run("DeadLetterRetried", func(t *testing.T) {
		t.Parallel()
		srv := rippletest.NewNATSServer(t)
		srv.Shutdown()
		e := newEnv(t, t0, ripple.Config{MaxAttempts: 2})
		relay := e.addNATS(srv, ripple.NATSConfig{ConnectTimeout: time.Second})
		p := e.payment(1, 300, "EUR", pay.Customer{})
		e.finalize(p.ID, pay.Captured)
		e.settle()
		e.clock.Add(2 * time.Hour)
		e.settle()
		d := e.delivery(p.ID, ripple.EffectNATS, pay.Captured)
		if d.State != pay.DeliveryDead || d.Attempts != 2 {
			t.Fatalf("delivery=%+v, want a dead letter after max_attempts", d)
		}

		srv.Start()
		waitConnected(t, relay, true)
		if _, err := e.svc.Retry(context.Background(), d.ID); err != nil {
			t.Fatal(err)
		}
		e.settle()
		if d := e.delivery(p.ID, ripple.EffectNATS, pay.Captured); d.State != pay.DeliveryDone {
			t.Fatalf("retried dead letter=%+v, want done", d)
		}
		if got := len(srv.Messages(ripple.DefaultNATSStream)); got != 1 {
			t.Fatalf("messages=%d, want 1", got)
		}
	})
}

// TestNATS_OrderPerPayment: a payment's refund never overtakes its
// capture, even while the capture cannot be published; and across many
// payments each one's records arrive in outbox order.
func TestNATS_OrderPerPayment(t *testing.T) {
	t.Parallel()

	t.Run("CaptureHeldUp", func(t *testing.T) {
		t.Parallel()
		srv := rippletest.NewNATSServer(t)
		js := srv.JetStream()
		ctx := context.Background()
		// An existing stream that takes refunds only: used as it is.
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{
			Name: ripple.DefaultNATSStream, Description: "the merchant's own", Subjects: []string{"paystate.payment.refunded"},
		}); err != nil {
			t.Fatal(err)
		}
		e := newEnv(t, t0, ripple.Config{})
		e.addNATS(srv, ripple.NATSConfig{})
		p := e.payment(1, 700, "EUR", pay.Customer{})
		e.finalize(p.ID, pay.Captured)
		e.finalize(p.ID, pay.Refunded)
		if got, want := e.runOnce(), 1; got != want {
			t.Fatalf("attempts=%d, want %d: the capture only", got, want)
		}
		captured := e.delivery(p.ID, ripple.EffectNATS, pay.Captured)
		if captured.State != pay.DeliveryPending || !strings.Contains(captured.LastError, "no stream takes the subject") {
			t.Fatalf("capture delivery=%+v, want pending, no stream taking its subject", captured)
		}
		if d := e.delivery(p.ID, ripple.EffectNATS, pay.Refunded); d.Attempts != 0 {
			t.Fatalf("refund delivery=%+v, want not attempted while the capture is pending", d)
		}
		if got := srv.Messages(ripple.DefaultNATSStream); len(got) != 0 {
			t.Fatalf("messages=%v, want none", summary(got))
		}

		// The operator widens the stream.
		if _, err := js.UpdateStream(ctx, jetstream.StreamConfig{
			Name: ripple.DefaultNATSStream, Description: "the merchant's own", Subjects: []string{"paystate.>"},
		}); err != nil {
			t.Fatal(err)
		}
		e.clock.Add(2 * time.Hour)
		e.settle()
		recs := e.outbox(p.ID)
		want := []string{"paystate.payment.captured " + recs[0].ID, "paystate.payment.refund.succeeded " + recs[1].ID, "paystate.payment.refunded " + recs[2].ID}
		if got := summary(srv.Messages(ripple.DefaultNATSStream)); !slices.Equal(got, want) {
			t.Fatalf("messages=%v, want %v", got, want)
		}
		st, err := js.Stream(ctx, ripple.DefaultNATSStream)
		if err != nil {
			t.Fatal(err)
		}
		if got := st.CachedInfo().Config.Description; got != "the merchant's own" {
			t.Fatalf("stream description=%q: the relay changed an existing stream", got)
		}
	})

	t.Run("ManyPayments", func(t *testing.T) {
		t.Parallel()
		srv := rippletest.NewNATSServer(t)
		e := newEnv(t, t0, ripple.Config{})
		e.addNATS(srv, ripple.NATSConfig{MaxInFlight: 8})
		var ps []pay.Payment
		for i := range 20 {
			p := e.payment(i+1, 100, "EUR", pay.Customer{})
			e.finalize(p.ID, pay.Captured)
			ps = append(ps, p)
		}
		for _, p := range ps {
			e.finalize(p.ID, pay.Refunded)
		}
		e.settle()
		seq := map[string]uint64{} // by event id
		for _, m := range srv.Messages(ripple.DefaultNATSStream) {
			seq[m.Header.Get(jetstream.MsgIDHeader)] = m.Sequence
		}
		if got, want := len(seq), 3*len(ps); got != want { // captured, refund.succeeded, refunded
			t.Fatalf("messages=%d, want %d", got, want)
		}
		for _, p := range ps {
			recs := e.outbox(p.ID)
			if c, r := seq[recs[0].ID], seq[recs[1].ID]; c == 0 || r == 0 || c > r {
				t.Fatalf("payment %s: capture at %d, refund at %d, want the capture first", p.ID, c, r)
			}
		}
	})
}

// TestNATS_CreatesStream: a missing stream is created at start with the
// subjects <prefix>.>, and again when it was deleted.
func TestNATS_CreatesStream(t *testing.T) {
	t.Parallel()
	srv := rippletest.NewNATSServer(t)
	js := srv.JetStream()
	ctx := context.Background()
	if _, err := js.Stream(ctx, "SHOP"); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("Stream before the relay: %v, want not found", err)
	}
	e := newEnv(t, t0, ripple.Config{})
	relay := e.addNATS(srv, ripple.NATSConfig{Stream: "SHOP", SubjectPrefix: "shop.paystate"})
	st, err := js.Stream(ctx, "SHOP")
	if err != nil {
		t.Fatalf("Stream after AddNATS: %v", err)
	}
	if got, want := st.CachedInfo().Config.Subjects, []string{"shop.paystate.>"}; !slices.Equal(got, want) {
		t.Fatalf("subjects=%q, want %q", got, want)
	}
	if got, want := relay.Stream(), "SHOP"; got != want {
		t.Fatalf("Stream()=%q, want %q", got, want)
	}

	p1 := e.payment(1, 100, "EUR", pay.Customer{})
	e.finalize(p1.ID, pay.Captured)
	e.settle()
	if got, want := summary(srv.Messages("SHOP")), []string{"shop.paystate.payment.captured " + e.outbox(p1.ID)[0].ID}; !slices.Equal(got, want) {
		t.Fatalf("messages=%v, want %v", got, want)
	}

	// Deleted under the relay: the next publish finds no stream, the one
	// after creates it again.
	if err := js.DeleteStream(ctx, "SHOP"); err != nil {
		t.Fatal(err)
	}
	p2 := e.payment(2, 200, "EUR", pay.Customer{})
	e.finalize(p2.ID, pay.Captured)
	e.settle()
	e.clock.Add(2 * time.Hour)
	e.settle()
	if d := e.delivery(p2.ID, ripple.EffectNATS, pay.Captured); d.State != pay.DeliveryDone {
		t.Fatalf("delivery=%+v, want done", d)
	}
	if got, want := summary(srv.Messages("SHOP")), []string{"shop.paystate.payment.captured " + e.outbox(p2.ID)[0].ID}; !slices.Equal(got, want) {
		t.Fatalf("messages in the new stream=%v, want %v", got, want)
	}
}

// TestNATS_Invalid: AddNATS refuses a bad URL, stream or subject prefix
// without quoting the URL's password, and a second relay.
func TestNATS_Invalid(t *testing.T) {
	t.Parallel()
	e := newEnv(t, t0, ripple.Config{})
	for _, tt := range []struct {
		name string
		cfg  ripple.NATSConfig
		want string
	}{
		{"NoURL", ripple.NATSConfig{}, "url is empty"},
		{"HTTP", ripple.NATSConfig{URL: "http://user:s3cret@127.0.0.1:4222"}, "scheme"},
		{"NoHost", ripple.NATSConfig{URL: "nats://127.0.0.1:4222,nats://"}, "url 2"},
		{"StreamDot", ripple.NATSConfig{URL: "nats://127.0.0.1:1", Stream: "A.B"}, "stream"},
		{"PrefixWildcard", ripple.NATSConfig{URL: "nats://127.0.0.1:1", SubjectPrefix: "paystate.*"}, "subject prefix"},
		{"PrefixEmptyToken", ripple.NATSConfig{URL: "nats://127.0.0.1:1", SubjectPrefix: "paystate..x"}, "subject prefix"},
		{"PrefixSystem", ripple.NATSConfig{URL: "nats://127.0.0.1:1", SubjectPrefix: "$JS.x"}, "subject prefix"},
		{"MaxInFlight", ripple.NATSConfig{URL: "nats://127.0.0.1:1", MaxInFlight: ripple.MaxInFlightLimit + 1}, "max in flight"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.svc.AddNATS(tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("AddNATS=%v, want an error about %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Fatalf("the error quotes the password: %v", err)
			}
		})
	}
	srv := rippletest.NewNATSServer(t)
	e.addNATS(srv, ripple.NATSConfig{})
	if _, err := e.svc.AddNATS(ripple.NATSConfig{URL: srv.URL}); err == nil {
		t.Fatal("a second relay was added")
	}
}

// BenchmarkDeliverNATS is BenchmarkDeliverEndpoint with the JetStream relay
// (an embedded server on 127.0.0.1, its store on disk) as the third target
// instead of the merchant endpoint, and both side by side: each iteration
// captures 100 payments and runs passes until their deliveries are done.
// Endpoint is the reference run; compare deliveries/s as ratios within one
// run. commits/delivery counts the store's durable commits.
func BenchmarkDeliverNATS(b *testing.B) {
	for _, bc := range []struct {
		name           string
		endpoint, nats bool
	}{
		{"Endpoint", true, false},
		{"NATS", false, true},
		{"EndpointAndNATS", true, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			url := ""
			if bc.endpoint {
				url = rippletest.NewEndpoint(b).URL
			}
			db, svc, f := benchEnv(b, url)
			if bc.nats {
				srv := rippletest.NewNATSServer(b)
				r, err := svc.AddNATS(ripple.NATSConfig{URL: srv.URL})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(r.Close)
			}
			ctx := context.Background()
			commits := metrics.GetOrCreateCounter(`paystate_store_commits_total`)
			const perIter = 100
			i, delivered := 0, 0
			var commitsDuring uint64
			for b.Loop() {
				b.StopTimer()
				for range perIter {
					i++
					if err := capture(ctx, db, f, i); err != nil {
						b.Fatal(err)
					}
				}
				before := commits.Get()
				b.StartTimer()
				for {
					n, err := svc.RunOnce(ctx)
					if err != nil {
						b.Fatal(err)
					}
					if n == 0 {
						break
					}
					delivered += n
				}
				commitsDuring += commits.Get() - before
			}
			b.ReportMetric(float64(delivered)/b.Elapsed().Seconds(), "deliveries/s")
			b.ReportMetric(float64(commitsDuring)/float64(delivered), "commits/delivery")
		})
	}
}
