package mock_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	svix "github.com/svix/svix-webhooks/go"

	"github.com/paystate/paystate/internal/testkit"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/psp/mock"
	"github.com/paystate/paystate/psp/stdwebhook"
)

const (
	secret      = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	otherSecret = "whsec_c2Vjb25kLXNlY3JldC1mb3ItdGhlLXRlc3RzLW9ubHk="
)

// clock is the injected time of every test: the receiver expects it in the
// webhook-timestamp header.
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func clock() time.Time { return t0 }

// delivery is one webhook as the receiver got it, after the svix library
// verified its signature.
type delivery struct {
	ID          string
	Type        string
	Created     int64
	PaymentID   string
	ProviderRef string
	Amount      int64
	Currency    string
	Header      http.Header
	Body        []byte
}

// receiver is a real HTTP server on loopback that verifies every webhook
// with the svix library and records it.
type receiver struct {
	srv       *httptest.Server
	failFirst int // answer 503 to this many requests before accepting

	mu        sync.Mutex
	attempts  int
	rejected  []string // why a request was refused (bad signature, timestamp, body)
	delivered []delivery
}

func newReceiver(t *testing.T, failFirst int) *receiver {
	t.Helper()
	wh, err := svix.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	rc := &receiver{failFirst: failFirst}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		rc.mu.Lock()
		defer rc.mu.Unlock()
		rc.attempts++
		if err != nil {
			rc.rejected = append(rc.rejected, "read: "+err.Error())
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if err := wh.VerifyIgnoringTimestamp(body, r.Header); err != nil {
			rc.rejected = append(rc.rejected, "svix: "+err.Error())
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if got, want := r.Header.Get("webhook-timestamp"), strconv.FormatInt(t0.Unix(), 10); got != want {
			rc.rejected = append(rc.rejected, "webhook-timestamp "+got+", want "+want)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if rc.attempts <= rc.failFirst {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		var msg struct {
			ID      string `json:"id"`
			Type    string `json:"type"`
			Created int64  `json:"created"`
			Data    struct {
				PaymentID   string `json:"payment_id"`
				ProviderRef string `json:"provider_ref"`
				Amount      int64  `json:"amount"`
				Currency    string `json:"currency"`
			} `json:"data"`
		}
		if err := json.Unmarshal(body, &msg); err != nil {
			rc.rejected = append(rc.rejected, "json: "+err.Error())
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if got := r.Header.Get("webhook-id"); got != msg.ID {
			rc.rejected = append(rc.rejected, "webhook-id "+got+" for event "+msg.ID)
		}
		rc.delivered = append(rc.delivered, delivery{
			ID:          msg.ID,
			Type:        msg.Type,
			Created:     msg.Created,
			PaymentID:   msg.Data.PaymentID,
			ProviderRef: msg.Data.ProviderRef,
			Amount:      msg.Data.Amount,
			Currency:    msg.Data.Currency,
			Header:      r.Header.Clone(),
			Body:        body,
		})
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

// forPayment returns the deliveries of one payment, in arrival order.
func (rc *receiver) forPayment(id string) []delivery {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []delivery
	for _, d := range rc.delivered {
		if d.PaymentID == id {
			out = append(out, d)
		}
	}
	return out
}

// check fails the test if the receiver refused a request.
func (rc *receiver) check(t *testing.T) {
	t.Helper()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.rejected) > 0 {
		t.Fatalf("receiver refused webhooks: %v", rc.rejected)
	}
}

func (rc *receiver) attemptCount() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.attempts
}

// wantTypesInAnyOrder fails the test unless the webhooks of payment id
// are of the types want, in any order (webhooks of one payment sent by
// different goroutines race each other).
func (rc *receiver) wantTypesInAnyOrder(t *testing.T, id string, want ...string) {
	t.Helper()
	got := types(rc.forPayment(id))
	slices.Sort(got)
	want = slices.Clone(want)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("webhooks %v, want %v in any order", got, want)
	}
}

// wantTypes fails the test unless the webhooks of payment id arrived with
// these event types, in this order.
func (rc *receiver) wantTypes(t *testing.T, id string, want ...string) {
	t.Helper()
	if got := types(rc.forPayment(id)); !slices.Equal(got, want) {
		t.Fatalf("webhooks %v, want %v", got, want)
	}
}

// create charges pm under the key charge-<id>, failing the test on an
// error.
func create(t *testing.T, p *mock.Provider, pm pay.Payment) pay.PSPResult {
	t.Helper()
	res, err := p.Create(context.Background(), pm, "charge-"+pm.ID)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// types lists the event types of deliveries.
func types(ds []delivery) []string {
	out := make([]string, 0, len(ds))
	for _, d := range ds {
		out = append(out, d.Type)
	}
	return out
}

// newProvider returns a mock PSP that posts to rc, with the test clock, a
// seeded random source and fast retries; it is closed at cleanup.
func newProvider(t *testing.T, cfg mock.Config, rc *receiver, opts ...mock.Option) *mock.Provider {
	t.Helper()
	if cfg.WebhookSecret == "" {
		cfg.WebhookSecret = secret
	}
	buf := new(testkit.SyncBuffer)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(buf.String())
		}
	})
	opts = append([]mock.Option{
		mock.WithLogger(zerolog.New(buf).Level(zerolog.DebugLevel)),
		mock.WithNow(clock),
		mock.WithRand(rand.New(rand.NewPCG(1, 2))),
		mock.WithRetry(3, time.Millisecond),
	}, opts...)
	p, err := mock.New(cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if rc != nil {
		p.SetWebhookURL(rc.srv.URL + "/webhooks/mock")
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// payment returns a payment as paystate stores it before the PSP call.
func payment(id string, amount int64) pay.Payment {
	return pay.Payment{ID: id, OrderID: "order-" + id, Amount: amount, Currency: "EUR", Provider: "mock", Status: pay.Created, Version: 1}
}

// wantCode fails the test unless err carries code.
func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if got := pay.ErrorCode(err); got != code {
		t.Fatalf("ErrorCode=%q (%v), want %q", got, err, code)
	}
}

func TestProvider_Create(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		amount     int64
		wantSync   pay.Status // "" when the answer is lost
		wantTypes  []string
		wantStatus pay.Status // the PSP's status once the webhooks are sent
	}{
		{"Captured00", 1000, pay.Captured, []string{"payment.captured"}, pay.Captured},
		{"Failed01", 1001, pay.Failed, []string{"payment.failed"}, pay.Failed},
		{"RequiresAction02", 1002, pay.RequiresAction, []string{"payment.requires_action", "payment.captured"}, pay.Captured},
		{"Processing03", 1003, pay.Processing, []string{"payment.processing", "payment.captured"}, pay.Captured},
		{"LostAnswer04", 1004, "", nil, pay.Captured},
		{"Other", 1042, pay.Captured, []string{"payment.captured"}, pay.Captured},
		{"OtherSmall", 7, pay.Captured, []string{"payment.captured"}, pay.Captured},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			rc := newReceiver(t, 0)
			p := newProvider(t, mock.Config{}, rc)
			pm := payment("pay_"+tc.name, tc.amount)
			key := "charge-" + pm.ID

			// The synchronous answer.
			res, err := p.Create(ctx, pm, key)
			if tc.wantSync == "" {
				wantCode(t, err, pay.EPSP)
				if !strings.Contains(err.Error(), "timeout") {
					t.Fatalf("err=%v, want a timeout", err)
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				if got, want := res.Status, tc.wantSync; got != want {
					t.Fatalf("Status=%s, want %s", got, want)
				}
				if !res.Found || !strings.HasPrefix(res.ProviderRef, "mock_pi_") {
					t.Fatalf("result=%+v", res)
				}
				if got, want := res.RedirectURL != "", tc.wantSync == pay.RequiresAction; got != want {
					t.Fatalf("RedirectURL=%q", res.RedirectURL)
				}
				if got, want := res.ClientSecret != "", tc.wantSync.ShowsSecrets(); got != want {
					t.Fatalf("ClientSecret set=%v, want %v", got, want)
				}
				if res.ClientSecret != "" && strings.Contains(res.Raw, res.ClientSecret) {
					t.Fatalf("Raw=%q holds the client secret", res.Raw)
				}
			}
			c, ok := p.Charge(key)
			if !ok {
				t.Fatal("no charge recorded")
			}
			if got, want := c.Charges, 1; got != want {
				t.Fatalf("Charges=%d, want %d", got, want)
			}

			// The webhooks, in order, every one verified by the receiver.
			testkit.WaitFor(t, 5*time.Second, func() error {
				if got := types(rc.forPayment(pm.ID)); !slices.Equal(got, tc.wantTypes) {
					return fmt.Errorf("webhooks %v, want %v", got, tc.wantTypes)
				}
				return nil
			})
			p.Wait()
			rc.check(t)
			ds := rc.forPayment(pm.ID)
			if got := types(ds); !slices.Equal(got, tc.wantTypes) {
				t.Fatalf("after Wait: webhooks %v, want %v", got, tc.wantTypes)
			}
			for i, d := range ds {
				if d.ProviderRef != c.ProviderRef || d.Amount != pm.Amount || d.Currency != pm.Currency || d.Created != t0.Unix() {
					t.Fatalf("webhook %d: %+v", i, d)
				}
				if !strings.HasPrefix(d.ID, "evt_") || (i > 0 && d.ID == ds[i-1].ID) {
					t.Fatalf("webhook %d: id %q", i, d.ID)
				}
			}

			// The status API, by reference and by payment id alone (the
			// reference is unknown when the answer was lost).
			for _, q := range []pay.Payment{{ID: pm.ID, ProviderRef: c.ProviderRef}, {ID: pm.ID}, {ProviderRef: c.ProviderRef}} {
				st, err := p.Status(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				if !st.Found || st.Status != tc.wantStatus || st.ProviderRef != c.ProviderRef {
					t.Fatalf("Status(%+v)=%+v, want %s", q, st, tc.wantStatus)
				}
				if want := "mock status=" + string(tc.wantStatus) + " ref=" + c.ProviderRef; st.Raw != want {
					t.Fatalf("Raw=%q, want %q", st.Raw, want)
				}
			}
		})
	}
}

func TestProvider_Create_Idempotent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("SameKey", func(t *testing.T) {
		t.Parallel()
		rc := newReceiver(t, 0)
		p := newProvider(t, mock.Config{}, rc)
		pm := payment("pay_same", 2500)
		first := create(t, p, pm)
		second := create(t, p, pm)
		if first != second {
			t.Fatalf("second answer %+v, want %+v", second, first)
		}
		if got, want := p.Charges("charge-"+pm.ID), 1; got != want {
			t.Fatalf("Charges=%d, want %d", got, want)
		}
		c, _ := p.Charge("charge-" + pm.ID)
		if c.Charges != 1 || c.Calls != 2 {
			t.Fatalf("Charges=%d Calls=%d, want 1 and 2", c.Charges, c.Calls)
		}
		p.Wait()
		rc.check(t)
		rc.wantTypes(t, pm.ID, "payment.captured")
		if s := p.Stats(); s.Charges != 1 || s.Replays != 1 {
			t.Fatalf("Stats=%+v", s)
		}
	})

	t.Run("LostAnswerRetry", func(t *testing.T) {
		t.Parallel()
		rc := newReceiver(t, 0)
		p := newProvider(t, mock.Config{}, rc)
		pm := payment("pay_lost", 904)
		_, err := p.Create(ctx, pm, "charge-"+pm.ID)
		wantCode(t, err, pay.EPSP)

		// The retry after a crash finishes the payment: captured, charged once.
		res := create(t, p, pm)
		c, _ := p.Charge("charge-" + pm.ID)
		if res.Status != pay.Captured || res.ProviderRef != c.ProviderRef || c.Charges != 1 {
			t.Fatalf("retry=%+v, charge=%+v", res, c)
		}
		p.Wait()
		if got := rc.forPayment(pm.ID); len(got) != 0 {
			t.Fatalf("webhooks %v, want none", types(got))
		}
		if got, want := p.Stats().LostAnswers, 1; got != want {
			t.Fatalf("LostAnswers=%d, want %d", got, want)
		}
	})

	t.Run("StableReference", func(t *testing.T) {
		t.Parallel()
		a := newProvider(t, mock.Config{}, nil)
		b := newProvider(t, mock.Config{}, nil)
		pm := payment("pay_ref", 1000)
		ra, err := a.Create(ctx, pm, "charge-"+pm.ID)
		if err != nil {
			t.Fatal(err)
		}
		rb, err := b.Create(ctx, pm, "charge-"+pm.ID)
		if err != nil {
			t.Fatal(err)
		}
		if ra.ProviderRef != rb.ProviderRef {
			t.Fatalf("references %s and %s differ for one key", ra.ProviderRef, rb.ProviderRef)
		}
		other, err := a.Create(ctx, payment("pay_ref2", 1000), "charge-pay_ref2")
		if err != nil {
			t.Fatal(err)
		}
		if other.ProviderRef == ra.ProviderRef {
			t.Fatal("two keys share a reference")
		}
	})

	t.Run("ErrKeyReused", func(t *testing.T) {
		t.Parallel()
		p := newProvider(t, mock.Config{}, nil)
		if _, err := p.Create(ctx, payment("pay_reuse", 1000), "charge-pay_reuse"); err != nil {
			t.Fatal(err)
		}
		_, err := p.Create(ctx, payment("pay_reuse", 2000), "charge-pay_reuse")
		wantCode(t, err, pay.EPSP)
		if c, _ := p.Charge("charge-pay_reuse"); c.Amount != 1000 || c.Charges != 1 {
			t.Fatalf("charge=%+v", c)
		}
	})

	t.Run("ErrInvalid", func(t *testing.T) {
		t.Parallel()
		p := newProvider(t, mock.Config{}, nil)
		_, err := p.Create(ctx, payment("pay_x", 1000), "")
		wantCode(t, err, pay.EINVALID)
		_, err = p.Create(ctx, payment("", 1000), "charge-")
		wantCode(t, err, pay.EINVALID)
		_, err = p.Create(ctx, payment("pay_x", 0), "charge-pay_x")
		wantCode(t, err, pay.EINVALID)
		if got := p.Stats().Charges; got != 0 {
			t.Fatalf("Charges=%d, want 0", got)
		}
	})

	t.Run("ErrCanceled", func(t *testing.T) {
		t.Parallel()
		p := newProvider(t, mock.Config{}, nil)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		_, err := p.Create(cctx, payment("pay_c", 1000), "charge-pay_c")
		wantCode(t, err, pay.EPSP)
		if _, ok := p.Charge("charge-pay_c"); ok {
			t.Fatal("a canceled call charged")
		}
	})
}

func TestProvider_Webhooks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("Duplicate", func(t *testing.T) {
		t.Parallel()
		rc := newReceiver(t, 0)
		p := newProvider(t, mock.Config{DuplicateRate: 1}, rc)
		pm := payment("pay_dup", 1002)
		create(t, p, pm)
		p.Wait()
		rc.check(t)
		ds := rc.forPayment(pm.ID)
		want := []string{"payment.requires_action", "payment.requires_action", "payment.captured", "payment.captured"}
		if got := types(ds); !slices.Equal(got, want) {
			t.Fatalf("webhooks %v, want %v", got, want)
		}
		if ds[0].ID != ds[1].ID || ds[2].ID != ds[3].ID || ds[0].ID == ds[2].ID {
			t.Fatalf("ids %s %s %s %s: want pairs of equal ids", ds[0].ID, ds[1].ID, ds[2].ID, ds[3].ID)
		}
		if s := p.Stats(); s.WebhooksDuplicated != 2 || s.WebhooksSent != 4 {
			t.Fatalf("Stats=%+v", s)
		}
	})

	t.Run("Reorder", func(t *testing.T) {
		t.Parallel()
		rc := newReceiver(t, 0)
		p := newProvider(t, mock.Config{Reorder: true}, rc)
		pm := payment("pay_reorder", 1003)
		create(t, p, pm)
		p.Wait()
		rc.check(t)
		rc.wantTypes(t, pm.ID, "payment.captured", "payment.processing")
	})

	t.Run("Retry", func(t *testing.T) {
		t.Parallel()
		rc := newReceiver(t, 2)
		p := newProvider(t, mock.Config{}, rc)
		pm := payment("pay_retry", 1000)
		create(t, p, pm)
		p.Wait()
		rc.check(t)
		rc.wantTypes(t, pm.ID, "payment.captured")
		if got, want := rc.attemptCount(), 3; got != want {
			t.Fatalf("attempts=%d, want %d", got, want)
		}
		if s := p.Stats(); s.WebhooksSent != 1 || s.Attempts != 3 || s.WebhooksFailed != 0 {
			t.Fatalf("Stats=%+v", s)
		}
	})

	t.Run("GiveUp", func(t *testing.T) {
		t.Parallel()
		rc := newReceiver(t, 1000)
		p := newProvider(t, mock.Config{}, rc)
		pm := payment("pay_giveup", 1000)
		create(t, p, pm)
		p.Wait()
		rc.check(t)
		if got, want := rc.attemptCount(), 3; got != want {
			t.Fatalf("attempts=%d, want %d", got, want)
		}
		if s := p.Stats(); s.WebhooksSent != 0 || s.WebhooksFailed != 1 {
			t.Fatalf("Stats=%+v", s)
		}
		// The PSP captured regardless: the status API knows.
		if st, err := p.Status(ctx, pm); err != nil || st.Status != pay.Captured {
			t.Fatalf("Status=%+v, %v", st, err)
		}
	})

	t.Run("URLSetLater", func(t *testing.T) {
		t.Parallel()
		rc := newReceiver(t, 0)
		p, err := mock.New(mock.Config{WebhookSecret: secret}, mock.WithNow(clock), mock.WithRetry(1000, time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		pm := payment("pay_later", 1000)
		create(t, p, pm)
		testkit.WaitFor(t, 5*time.Second, func() error {
			if n := p.Stats().Attempts; n == 0 {
				return fmt.Errorf("no attempt yet")
			}
			return nil
		})
		p.SetWebhookURL(rc.srv.URL)
		p.Wait()
		rc.check(t)
		rc.wantTypes(t, pm.ID, "payment.captured")
	})

	t.Run("CloseStopsPending", func(t *testing.T) {
		t.Parallel()
		rc := newReceiver(t, 0)
		p := newProvider(t, mock.Config{WebhookDelay: time.Hour}, rc)
		pm := payment("pay_close", 1002)
		create(t, p, pm)
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		if got := rc.attemptCount(); got != 0 {
			t.Fatalf("attempts=%d after Close, want 0", got)
		}
		// The customer never acted: still requires_action at the PSP.
		if st, err := p.Status(ctx, pm); err != nil || st.Status != pay.RequiresAction {
			t.Fatalf("Status=%+v, %v", st, err)
		}
		// Nothing is scheduled after Close.
		if _, err := p.Create(ctx, payment("pay_after", 1000), "charge-pay_after"); err != nil {
			t.Fatal(err)
		}
		p.Wait()
		if got := rc.attemptCount(); got != 0 {
			t.Fatalf("attempts=%d after Close, want 0", got)
		}
	})

	t.Run("Concurrent", func(t *testing.T) {
		t.Parallel()
		rc := newReceiver(t, 0)
		p := newProvider(t, mock.Config{DuplicateRate: 0.5}, rc)
		var wg sync.WaitGroup
		for i := range 40 {
			wg.Go(func() {
				pm := payment(fmt.Sprintf("pay_conc_%d", i%20), int64(1000+i%20))
				_, _ = p.Create(ctx, pm, "charge-"+pm.ID)
				_, _ = p.Status(ctx, pm)
			})
		}
		wg.Wait()
		p.Wait()
		rc.check(t)
		if s := p.Stats(); s.Charges != 20 || s.Replays != 20 {
			t.Fatalf("Stats=%+v, want 20 charges and 20 replays", s)
		}
	})
}

// refundOf is a refund of pm as paystate makes it before the PSP call.
func refundOf(pm pay.Payment, id string, amount int64) pay.Refund {
	return pay.Refund{ID: id, PaymentID: pm.ID, Amount: amount, Currency: pm.Currency, Status: pay.RefundPending}
}

// parseEvent decodes a delivered body in the wire format.
func parseEvent(t *testing.T, d delivery) pay.WebhookEvent {
	t.Helper()
	e, err := stdwebhook.ParseEvent(d.Body)
	if err != nil {
		t.Fatalf("webhook %s: %v", d.ID, err)
	}
	return e
}

func TestProvider_Refund(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("Partial", func(t *testing.T) {
		t.Parallel()
		rc := newReceiver(t, 0)
		p := newProvider(t, mock.Config{}, rc)
		pm := payment("pay_refund", 1000)
		res := create(t, p, pm)
		pm.ProviderRef, pm.Status = res.ProviderRef, res.Status
		p.Wait()

		r1, r2 := refundOf(pm, "re_01ARZ3NDEKTSV4RRFFQ69G5FA1", 300), refundOf(pm, "re_01ARZ3NDEKTSV4RRFFQ69G5FA2", 700)
		for i, r := range []pay.Refund{r1, r1, r2} {
			got, err := p.Refund(ctx, pm, r, pay.RefundKey(r.ID))
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != pay.RefundSucceeded || got.ProviderRef == "" || !got.Found {
				t.Fatalf("Refund %d=%+v, want succeeded", i, got)
			}
		}
		c, _ := p.Charge("charge-" + pm.ID)
		if c.Refunds != 2 || c.AmountRefunded != 1000 || c.Status != pay.Refunded {
			t.Fatalf("charge=%+v, want two refunds of 1000 in all, refunded", c)
		}
		p.Wait()
		rc.check(t)
		rc.wantTypesInAnyOrder(t, pm.ID, "payment.captured", "payment.refund.succeeded", "payment.refund.succeeded")
		found := false
		for _, d := range rc.forPayment(pm.ID) {
			if e := parseEvent(t, d); e.Refund != nil && e.Refund.ID == r1.ID {
				found = e.Refund.Amount == 300 && e.Refund.Status == pay.RefundSucceeded
			}
		}
		if !found {
			t.Fatalf("no payment.refund.succeeded of refund %s of 300", r1.ID)
		}
		if st, err := p.RefundStatus(ctx, pm, r2); err != nil || st.Status != pay.RefundSucceeded {
			t.Fatalf("RefundStatus=%+v, %v", st, err)
		}
		if st, err := p.Status(ctx, pm); err != nil || st.Status != pay.Refunded {
			t.Fatalf("Status=%+v, %v", st, err)
		}
	})

	t.Run("Fails06", func(t *testing.T) {
		t.Parallel()
		rc := newReceiver(t, 0)
		p := newProvider(t, mock.Config{}, rc)
		pm := payment("pay_refund06", 1006)
		res := create(t, p, pm)
		pm.ProviderRef, pm.Status = res.ProviderRef, res.Status
		r := refundOf(pm, "re_01ARZ3NDEKTSV4RRFFQ69G5FA3", 1006)
		got, err := p.Refund(ctx, pm, r, pay.RefundKey(r.ID))
		if err != nil || got.Status != pay.RefundPending {
			t.Fatalf("Refund=%+v, %v; want accepted as pending", got, err)
		}
		p.Wait()
		rc.check(t)
		rc.wantTypesInAnyOrder(t, pm.ID, "payment.captured", "payment.refund.failed")
		if st, err := p.RefundStatus(ctx, pm, r); err != nil || st.Status != pay.RefundFailed {
			t.Fatalf("RefundStatus=%+v, %v; want failed", st, err)
		}
		if c, _ := p.Charge("charge-" + pm.ID); c.AmountRefunded != 0 || c.Status != pay.Captured {
			t.Fatalf("charge=%+v, want captured with nothing refunded", c)
		}
	})

	t.Run("ErrExceeds", func(t *testing.T) {
		t.Parallel()
		p := newProvider(t, mock.Config{}, nil)
		pm := payment("pay_refund2", 1000)
		create(t, p, pm)
		r := refundOf(pm, "re_01ARZ3NDEKTSV4RRFFQ69G5FA4", 600)
		if _, err := p.Refund(ctx, pm, r, pay.RefundKey(r.ID)); err != nil {
			t.Fatal(err)
		}
		r2 := refundOf(pm, "re_01ARZ3NDEKTSV4RRFFQ69G5FA5", 600)
		_, err := p.Refund(ctx, pm, r2, pay.RefundKey(r2.ID))
		wantCode(t, err, pay.EINVALID)
	})

	t.Run("ErrNotCaptured", func(t *testing.T) {
		t.Parallel()
		p := newProvider(t, mock.Config{WebhookDelay: time.Hour}, nil)
		for _, pm := range []pay.Payment{payment("pay_failed", 1001), payment("pay_pending", 1002)} {
			create(t, p, pm)
			r := refundOf(pm, "re_01ARZ3NDEKTSV4RRFFQ69G5FA6", 100)
			_, err := p.Refund(ctx, pm, r, pay.RefundKey(r.ID))
			wantCode(t, err, pay.EINVALID)
		}
	})

	t.Run("ErrUnknown", func(t *testing.T) {
		t.Parallel()
		p := newProvider(t, mock.Config{}, nil)
		pm := payment("pay_nobody", 1000)
		r := refundOf(pm, "re_01ARZ3NDEKTSV4RRFFQ69G5FA7", 100)
		_, err := p.Refund(ctx, pm, r, pay.RefundKey(r.ID))
		wantCode(t, err, pay.EINVALID)
		_, err = p.Refund(ctx, pm, r, "")
		wantCode(t, err, pay.EINVALID)
		if st, err := p.RefundStatus(ctx, pm, r); err != nil || st.Found {
			t.Fatalf("RefundStatus of an unknown refund=%+v, %v; want not found", st, err)
		}
	})
}

// TestProvider_Dispute05: an amount ending in 05 is captured, then
// disputed (needs_response, evidence due in a week) and, after
// dispute_after, the dispute closes lost; the charge stays captured.
func TestProvider_Dispute05(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, 0)
	p := newProvider(t, mock.Config{DisputeAfter: time.Millisecond}, rc)
	pm := payment("pay_dispute", 1005)
	if res := create(t, p, pm); res.Status != pay.Captured {
		t.Fatalf("Create=%+v, want captured", res)
	}
	p.Wait()
	rc.check(t)
	rc.wantTypesInAnyOrder(t, pm.ID, "payment.captured", "payment.dispute.created", "payment.dispute.closed")
	var opened, closed pay.WebhookEvent
	for _, d := range rc.forPayment(pm.ID) {
		switch d.Type {
		case "payment.dispute.created":
			opened = parseEvent(t, d)
		case "payment.dispute.closed":
			closed = parseEvent(t, d)
		}
	}
	if d := opened.Dispute; d == nil || d.Status != pay.DisputeNeedsResponse || d.Amount != 1005 || !d.EvidenceDueBy.Equal(t0.Add(7*24*time.Hour).Truncate(time.Second)) {
		t.Fatalf("opened %+v, want needs_response of 1005 due a week later", d)
	}
	if d := closed.Dispute; d == nil || d.Status != pay.DisputeLost || d.ID != opened.Dispute.ID || closed.EventID == opened.EventID {
		t.Fatalf("closed %+v, want the same dispute lost", d)
	}
	if c, _ := p.Charge("charge-" + pm.ID); c.Status != pay.Captured {
		t.Fatalf("charge=%+v, want captured", c)
	}
}

func TestProvider_Status(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("NotFound", func(t *testing.T) {
		t.Parallel()
		p := newProvider(t, mock.Config{}, nil)
		for _, q := range []pay.Payment{payment("pay_unknown", 1000), {ProviderRef: "mock_pi_unknown"}, {}} {
			st, err := p.Status(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if st.Found {
				t.Fatalf("Status(%+v)=%+v, want not found", q, st)
			}
		}
	})

	t.Run("BeforeCustomerAction", func(t *testing.T) {
		t.Parallel()
		p := newProvider(t, mock.Config{WebhookDelay: time.Hour}, nil)
		pm := payment("pay_wait", 1002)
		res := create(t, p, pm)
		st, err := p.Status(ctx, pm)
		if err != nil {
			t.Fatal(err)
		}
		if st.Status != pay.RequiresAction || st.RedirectURL != res.RedirectURL || st.ClientSecret != res.ClientSecret {
			t.Fatalf("Status=%+v, want requires_action with the redirect", st)
		}
		// The PSP says what it holds the payment for: evidence finalize checks.
		if st.Amount != pm.Amount || st.Currency != pm.Currency || res.Amount != pm.Amount || res.Currency != pm.Currency {
			t.Fatalf("Status=%+v, Create=%+v, want %d %s", st, res, pm.Amount, pm.Currency)
		}
	})
}

func TestProvider_ParseWebhook(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, 0)
	p := newProvider(t, mock.Config{}, rc)
	pm := payment("pay_parse", 1000)
	res := create(t, p, pm)
	p.Wait()
	ds := rc.forPayment(pm.ID)
	if len(ds) != 1 {
		t.Fatalf("webhooks %v, want one", types(ds))
	}
	d := ds[0]

	t.Run("OK", func(t *testing.T) {
		t.Parallel()
		e, err := p.ParseWebhook(d.Body, d.Header, t0.Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		want := pay.WebhookEvent{EventID: d.ID, Type: "payment.captured", PaymentID: pm.ID, ProviderRef: res.ProviderRef, Status: pay.Captured, OccurredAt: t0, Amount: pm.Amount, Currency: pm.Currency}
		if e != want {
			t.Fatalf("event=%+v, want %+v", e, want)
		}
	})

	t.Run("ErrOtherSecret", func(t *testing.T) {
		t.Parallel()
		other := newProvider(t, mock.Config{WebhookSecret: otherSecret}, nil)
		_, err := other.ParseWebhook(d.Body, d.Header, t0)
		wantCode(t, err, pay.ESIGNATURE)
	})

	t.Run("ErrTooLate", func(t *testing.T) {
		t.Parallel()
		_, err := p.ParseWebhook(d.Body, d.Header, t0.Add(6*time.Minute))
		wantCode(t, err, pay.ESIGNATURE)
	})

	t.Run("ConfiguredTolerance", func(t *testing.T) {
		t.Parallel()
		lenient := newProvider(t, mock.Config{Tolerance: time.Hour}, nil)
		if _, err := lenient.ParseWebhook(d.Body, d.Header, t0.Add(30*time.Minute)); err != nil {
			t.Fatal(err)
		}
	})
}

func TestNew(t *testing.T) {
	t.Parallel()

	t.Run("GeneratedSecret", func(t *testing.T) {
		t.Parallel()
		// Without a configured secret the PSP and its receiver still agree.
		ctx := context.Background()
		var got struct {
			sync.Mutex
			body   []byte
			header http.Header
		}
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			got.Lock()
			got.body, got.header = b, r.Header.Clone()
			got.Unlock()
		}))
		t.Cleanup(srv.Close)
		p, err := mock.New(mock.Config{WebhookURL: srv.URL})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		if _, err := p.Create(ctx, payment("pay_gen", 1000), "charge-pay_gen"); err != nil {
			t.Fatal(err)
		}
		p.Wait()
		got.Lock()
		defer got.Unlock()
		if _, err := p.ParseWebhook(got.body, got.header, time.Now()); err != nil {
			t.Fatal(err)
		}
	})

	for _, tc := range []struct {
		name string
		cfg  mock.Config
		key  string
	}{
		{"ErrSecretPrefix", mock.Config{WebhookSecret: "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}, "providers.mock.webhook_secret"},
		{"ErrSecretBase64", mock.Config{WebhookSecret: "whsec_secret!value"}, "providers.mock.webhook_secret"},
		{"ErrDuplicateRate", mock.Config{DuplicateRate: 1.5}, "providers.mock.duplicate_rate"},
		{"ErrNegativeRate", mock.Config{DuplicateRate: -0.1}, "providers.mock.duplicate_rate"},
		{"ErrDelay", mock.Config{WebhookDelay: -time.Second}, "providers.mock.webhook_delay"},
		{"ErrURL", mock.Config{WebhookURL: "localhost:8080/webhooks/mock"}, "providers.mock.webhook_url"},
		{"ErrMaxCharges", mock.Config{MaxCharges: -1}, "providers.mock.max_charges"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := mock.New(tc.cfg)
			if err == nil {
				t.Fatal("want error")
			}
			if !strings.HasPrefix(err.Error(), tc.key+": ") {
				t.Fatalf("err=%q, want it to name %s", err, tc.key)
			}
			if tc.cfg.WebhookSecret != "" && strings.Contains(err.Error(), tc.cfg.WebhookSecret) {
				t.Fatalf("err=%q holds the secret", err)
			}
		})
	}
}

func TestProvider_Logger(t *testing.T) {
	t.Parallel()
	var buf testkit.SyncBuffer
	rc := newReceiver(t, 1)
	p := newProvider(t, mock.Config{}, rc, mock.WithLogger(zerolog.New(&buf).Level(zerolog.DebugLevel)))
	for _, amount := range []int64{1000, 1001, 1002, 1003} {
		create(t, p, payment(fmt.Sprintf("pay_log_%d", amount), amount))
	}
	p.Wait()
	out := buf.String()
	if !strings.Contains(out, `"component":"psp_mock"`) || !strings.Contains(out, `"payment_id":"pay_log_1000"`) {
		t.Fatalf("log lacks component or payment_id:\n%s", out)
	}
	for _, leak := range []string{"whsec_", strings.TrimPrefix(secret, "whsec_"), "_secret_", "v1,"} {
		if strings.Contains(out, leak) {
			t.Fatalf("log holds %q:\n%s", leak, out)
		}
	}
}
