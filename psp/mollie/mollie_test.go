package mollie_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/VictorAvelar/mollie-api-go/v4/testdata"

	"github.com/paystate/paystate/internal/ids"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/psp/mollie"
	"github.com/paystate/paystate/psp/mollie/mollietest"
)

const webhookSecret = "mollie-webhook-signing-secret"

func newProvider(t testing.TB, fake *mollietest.Fake) *mollie.Provider {
	t.Helper()
	p, err := mollie.New(mollie.Config{
		APIKey: mollietest.APIKey, APIBase: fake.URL, WebhookURL: "https://shop.example/webhooks/mollie",
		RedirectURL: "https://shop.example/thanks", WebhookSecret: webhookSecret,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// created creates a payment at the fake and returns it with its Mollie id.
func created(t *testing.T, prov *mollie.Provider, amount int64) pay.Payment {
	t.Helper()
	p := newPayment(amount, "EUR")
	res, err := prov.Create(context.Background(), p, "charge-"+p.ID)
	if err != nil {
		t.Fatal(err)
	}
	p.ProviderRef = res.ProviderRef
	return p
}

func newPayment(amount int64, currency string) pay.Payment {
	id := ids.Payment(time.Now())
	return pay.Payment{ID: id, OrderID: "order-" + id, Amount: amount, Currency: currency, Provider: mollie.Name, Status: pay.Created, Version: 1}
}

func TestProvider_Create(t *testing.T) {
	t.Parallel()
	fake := mollietest.New(t)
	prov := newProvider(t, fake)
	p := newPayment(1050, "EUR")
	key := "charge-" + p.ID
	res, err := prov.Create(context.Background(), p, key)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != pay.RequiresAction || res.RedirectURL == "" || res.ProviderRef == "" || res.PaymentID != p.ID {
		t.Fatalf("res=%+v, want requires_action with the checkout link, a tr_ id and the payment id", res)
	}
	if res.Amount != 1050 || res.Currency != "EUR" {
		t.Fatalf("amount=%d %s, want 1050 EUR", res.Amount, res.Currency)
	}
	got, _ := fake.Payment(res.ProviderRef)
	if got.Value != "10.50" || got.Currency != "EUR" || got.IdemKey != key || got.Metadata[mollie.MetadataPaymentID] != p.ID ||
		got.RedirectURL != "https://shop.example/thanks" || got.WebhookURL != "https://shop.example/webhooks/mollie" || got.Description != "Order "+p.OrderID {
		t.Fatalf("Mollie got %+v", got)
	}

	// The same key makes no second payment.
	again, err := prov.Create(context.Background(), p, key)
	if err != nil || again.ProviderRef != res.ProviderRef || fake.Payments() != 1 {
		t.Fatalf("retry: %+v %v, payments=%d", again, err, fake.Payments())
	}

	// The create's return_url wins; JPY has no decimals.
	j := newPayment(3500, "JPY")
	j.ReturnURL, j.Description = "https://shop.example/order/7", "Tea"
	res, err = prov.Create(context.Background(), j, "charge-"+j.ID)
	if err != nil {
		t.Fatal(err)
	}
	got, _ = fake.Payment(res.ProviderRef)
	if got.Value != "3500" || got.RedirectURL != j.ReturnURL || got.Description != "Tea" {
		t.Fatalf("Mollie got %+v", got)
	}

	if _, err := prov.Create(context.Background(), p, ""); pay.ErrorCode(err) != pay.EINVALID {
		t.Fatalf("no key: err=%v, want %s", err, pay.EINVALID)
	}
}

func TestProvider_StatusMapping(t *testing.T) {
	t.Parallel()
	fake := mollietest.New(t)
	prov := newProvider(t, fake)
	for mst, want := range map[string]pay.Status{
		"open": pay.RequiresAction, "pending": pay.Processing, "authorized": pay.Processing, "paid": pay.Captured,
		"failed": pay.Failed, "canceled": pay.Failed, "expired": pay.Failed, "something_new": "",
	} {
		p := created(t, prov, 1000)
		fake.SetStatus(p.ProviderRef, mst)
		got, err := prov.Status(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != want || !got.Found {
			t.Errorf("%s: Status=%q Found=%v, want %q", mst, got.Status, got.Found, want)
		}
		if (got.RedirectURL != "") != (want == pay.RequiresAction) {
			t.Errorf("%s: RedirectURL=%q", mst, got.RedirectURL)
		}
	}

	// A payment Mollie does not know.
	p := newPayment(1000, "EUR")
	p.ProviderRef = "tr_unknown1"
	got, err := prov.Status(context.Background(), p)
	if err != nil || got.Found {
		t.Fatalf("unknown: %+v %v, want Found false", got, err)
	}
	// A server error is EPSP, never a status.
	p.ProviderRef = "tr_any"
	fake.Fail(1)
	if _, err := prov.Status(context.Background(), p); pay.ErrorCode(err) != pay.EPSP {
		t.Fatalf("500: err=%v, want %s", err, pay.EPSP)
	}
}

func TestProvider_RefundsAndChargebacks(t *testing.T) {
	t.Parallel()
	fake := mollietest.New(t)
	prov := newProvider(t, fake)
	ctx := context.Background()
	p := created(t, prov, 2000)
	fake.SetStatus(p.ProviderRef, "paid")

	r := pay.Refund{ID: ids.Refund(time.Now()), PaymentID: p.ID, Amount: 500, Currency: "EUR"}
	key := pay.RefundKey(r.ID)
	rr, err := prov.Refund(ctx, p, r, key)
	if err != nil {
		t.Fatal(err)
	}
	if rr.Status != pay.RefundPending || rr.ProviderRef == "" {
		t.Fatalf("refund=%+v, want pending with an id", rr)
	}
	again, err := prov.Refund(ctx, p, r, key)
	if err != nil || again.ProviderRef != rr.ProviderRef {
		t.Fatalf("retry: %+v %v, want the same refund", again, err)
	}
	mp, _ := fake.Payment(p.ProviderRef)
	if len(mp.Refunds) != 1 || mp.Refunds[0].Value != "5.00" || mp.Refunds[0].IdemKey != key || mp.Refunds[0].Metadata[mollie.MetadataRefundID] != r.ID {
		t.Fatalf("Mollie holds %+v", mp.Refunds)
	}

	// Settled by what the next fetch shows.
	fake.SetRefundStatus(p.ProviderRef, "refunded")
	st, err := prov.Status(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if st.Money == nil || len(st.Money.Refunds) != 1 || st.Money.Refunds[0].Status != pay.RefundSucceeded || st.Money.Refunds[0].ID != r.ID || st.Money.Refunds[0].Amount != 500 {
		t.Fatalf("Money=%+v", st.Money)
	}
	r.ProviderRef = rr.ProviderRef
	if got, err := prov.RefundStatus(ctx, p, r); err != nil || got.Status != pay.RefundSucceeded {
		t.Fatalf("RefundStatus=%+v %v", got, err)
	}
	r.ProviderRef = ""
	if got, err := prov.RefundStatus(ctx, p, r); err != nil || got.Status != pay.RefundSucceeded {
		t.Fatalf("RefundStatus by metadata=%+v %v", got, err)
	}

	// A chargeback is a lost dispute; reversed, a won one.
	if len(st.Money.Disputes) != 0 {
		t.Fatalf("Disputes=%+v before any chargeback", st.Money.Disputes)
	}
	cb := fake.AddChargeback(p.ProviderRef, "20.00")
	st, _ = prov.Status(ctx, p)
	if len(st.Money.Disputes) != 1 || st.Money.Disputes[0].ID != cb || st.Money.Disputes[0].Status != pay.DisputeLost || st.Money.Disputes[0].Amount != 2000 {
		t.Fatalf("Disputes=%+v", st.Money.Disputes)
	}
	fake.ReverseChargeback(p.ProviderRef, cb)
	st, _ = prov.Status(ctx, p)
	if len(st.Money.Disputes) != 1 || st.Money.Disputes[0].Status != pay.DisputeWon {
		t.Fatalf("Disputes=%+v, want won", st.Money.Disputes)
	}
}

func TestProvider_Cancel(t *testing.T) {
	t.Parallel()
	fake := mollietest.New(t)
	prov := newProvider(t, fake)
	ctx := context.Background()
	open := created(t, prov, 1000)
	if got, err := prov.Cancel(ctx, open, "cancel-"+open.ID); err != nil || got.Status != pay.Failed {
		t.Fatalf("cancel open: %+v %v, want failed", got, err)
	}
	// No Mollie id recorded: nothing to cancel, no status, no error.
	if got, err := prov.Cancel(ctx, newPayment(1000, "EUR"), "cancel-x"); err != nil || got.Status != "" {
		t.Fatalf("cancel without an id: %+v %v, want no status and no error", got, err)
	}
	paid := created(t, prov, 1000)
	fake.SetStatus(paid.ProviderRef, "paid")
	if got, err := prov.Cancel(ctx, paid, "cancel-"+paid.ID); err != nil || got.Status != pay.Captured {
		t.Fatalf("cancel paid: %+v %v, want captured (Mollie refuses, the status answers)", got, err)
	}
}

func TestProvider_Flow(t *testing.T) {
	t.Parallel()
	prov := newProvider(t, mollietest.New(t))
	if _, err := prov.Flow(pay.Payment{}); err != nil {
		t.Fatal(err)
	}
	if _, err := prov.Flow(pay.Payment{Flow: pay.FlowCheckout}); pay.ErrorCode(err) != pay.EINVALID {
		t.Fatalf("flow checkout: err=%v", err)
	}
	noRedirect, err := mollie.New(mollie.Config{APIKey: mollietest.APIKey, WebhookURL: "https://shop.example/w"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = noRedirect.Flow(pay.Payment{})
	var pe *pay.Error
	if pay.ErrorCode(err) != pay.EINVALID || !errors.As(err, &pe) || pe.Param != "return_url" {
		t.Fatalf("no redirect: err=%v, want EINVALID naming return_url", err)
	}
}

func sign(body []byte) http.Header {
	mac := hmac.New(sha256.New, []byte(webhookSecret))
	mac.Write(body)
	return http.Header{mollie.HeaderSignature: {"sha256=" + hex.EncodeToString(mac.Sum(nil))}}
}

func TestProvider_ParseWebhook(t *testing.T) {
	t.Parallel()
	prov := newProvider(t, mollietest.New(t))
	now := time.Now()

	ev, err := prov.ParseWebhook([]byte("id=tr_d0b0E3EA3v"), http.Header{}, now)
	if err != nil {
		t.Fatal(err)
	}
	if !ev.Pull || ev.ProviderRef != "tr_d0b0E3EA3v" || ev.Status != "" || ev.EventID == "" {
		t.Fatalf("ev=%+v, want a trigger for tr_d0b0E3EA3v", ev)
	}
	for _, body := range []string{"", "id=", "id=tr_", "id=re_123", "id=tr_a-b", "id=tr_a%0Ab", "foo=tr_abc", "%zz"} {
		if _, err := prov.ParseWebhook([]byte(body), http.Header{}, now); pay.ErrorCode(err) != pay.EINVALID {
			t.Errorf("%q: err=%v, want %s", body, err, pay.EINVALID)
		}
	}

	// A next-generation webhook, signed: a trigger when it names a payment.
	body := []byte(`{"resource":"event","id":"event_GvJ8WHrp5isUdRub9CJyH","type":"payment.paid","entityId":"tr_d0b0E3EA3v","createdAt":"2024-12-16T15:57:04+00:00"}`)
	ev, err = prov.ParseWebhook(body, sign(body), now)
	if err != nil || !ev.Pull || ev.ProviderRef != "tr_d0b0E3EA3v" || ev.EventID != "event_GvJ8WHrp5isUdRub9CJyH" {
		t.Fatalf("signed: %+v %v", ev, err)
	}
	// The library's own example is about a payment link: ignored.
	link := []byte(testdata.GetWebhookEventExample)
	if ev, err := prov.ParseWebhook(link, sign(link), now); err != nil || !ev.Ignore {
		t.Fatalf("payment link event: %+v %v, want Ignore", ev, err)
	}
	tampered := append([]byte(nil), body...)
	tampered[len(tampered)-3] ^= 1
	if _, err := prov.ParseWebhook(tampered, sign(body), now); pay.ErrorCode(err) != pay.ESIGNATURE {
		t.Fatalf("tampered: err=%v, want %s", err, pay.ESIGNATURE)
	}
	for _, h := range []http.Header{{}, {mollie.HeaderSignature: {"sha256=zz"}}, {mollie.HeaderSignature: {"md5=00"}}} {
		if _, err := prov.ParseWebhook(body, h, now); pay.ErrorCode(err) != pay.ESIGNATURE {
			t.Fatalf("header %v: err=%v, want %s", h, err, pay.ESIGNATURE)
		}
	}
	// Without a secret configured, a signed webhook is refused.
	plain, err := mollie.New(mollie.Config{APIKey: mollietest.APIKey, WebhookURL: "https://shop.example/w"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plain.ParseWebhook(body, sign(body), now); pay.ErrorCode(err) != pay.ESIGNATURE {
		t.Fatalf("no secret: err=%v, want %s", err, pay.ESIGNATURE)
	}
}

func TestNew_Errors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		cfg  mollie.Config
		want string
	}{
		{mollie.Config{WebhookURL: "https://x.example/w"}, "providers.mollie.api_key: required"},
		{mollie.Config{APIKey: "sk_123", WebhookURL: "https://x.example/w"}, "providers.mollie.api_key: must start with live_ or test_"},
		{mollie.Config{APIKey: "test_1"}, "providers.mollie.webhook_url: required (paystate's /webhooks/mollie as Mollie reaches it)"},
		{mollie.Config{APIKey: "test_1", WebhookURL: "ftp://x"}, "providers.mollie.webhook_url: must be an absolute http or https URL without credentials"},
		{mollie.Config{APIKey: "test_1", WebhookURL: "https://x.example/w", APIBase: "https://u:p@x"}, "providers.mollie.api_base: must be an absolute http or https URL without credentials"},
	} {
		_, err := mollie.New(c.cfg, nil)
		if err == nil || err.Error() != c.want {
			t.Errorf("%+v: err=%v, want %q", c.cfg, err, c.want)
		}
	}
}
