package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/paystate/paystate/config"
	"github.com/paystate/paystate/daemon"
	"github.com/paystate/paystate/internal/testkit"
	"github.com/paystate/paystate/internal/testkit/daemontest"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/psp/stdwebhook"
	"github.com/paystate/paystate/store/storetest"
)

// reviewDaemon boots a paystate on dbPath with the injected clock; the
// sweeper's own loop waits an hour between passes, so the test drives
// the passes. Close stops it.
func reviewDaemon(t *testing.T, dbPath string, clock *storetest.Clock) *daemontest.Instance {
	t.Helper()
	return daemontest.BootMain(t, func(c *config.Config) {
		c.Storage.Path = dbPath
		c.Sweeper.Interval = config.Duration{Duration: time.Hour}
	}, func(m *daemon.Main) { m.Now = clock.Now })
}

// mockWebhook posts a webhook signed with the mock's secret, as the
// simulated PSP would.
func mockWebhook(t *testing.T, in *daemontest.Instance, clock *storetest.Clock, id, typ, paymentID, ref string) {
	t.Helper()
	body, err := stdwebhook.EncodeEvent(stdwebhook.Event{
		ID: id, Type: typ, Created: clock.Now(), PaymentID: paymentID, ProviderRef: ref, Amount: 1004, Currency: "EUR",
	})
	if err != nil {
		t.Fatal(err)
	}
	h := testkit.SignStandard(t, in.Main.Config.Providers.Mock.WebhookSecret, id, clock.Now(), body)
	if got := in.Do("POST", "/webhooks/mock", body, h).Status; got != http.StatusOK {
		t.Fatalf("webhook %s: HTTP %d, want 200", id, got)
	}
}

// reviewList is the answer of GET /v1/review.
type reviewList struct {
	Data []struct {
		ID        string `json:"id"`
		PaymentID string `json:"payment_id"`
		Reason    string `json:"reason"`
		EventID   string `json:"event_id"`
		Evidence  struct {
			Payment  map[string]any `json:"payment"`
			Timeline []struct {
				Source string `json:"source"`
				Kind   string `json:"kind"`
			} `json:"timeline"`
			Webhooks []struct {
				EventID    string         `json:"event_id"`
				ReceivedAt string         `json:"received_at"`
				Body       map[string]any `json:"body"`
			} `json:"webhooks"`
			LastPSPStatus *struct {
				Found bool   `json:"found"`
				Raw   string `json:"raw"`
			} `json:"last_psp_status"`
		} `json:"evidence"`
	} `json:"data"`
}

func TestReview_QueueEvidenceAndCLI(t *testing.T) {
	t.Parallel()
	clock := storetest.NewClock(time.Now().UTC())
	dbPath := filepath.Join(t.TempDir(), "paystate.db")

	// A payment whose answer is lost: the mock PSP captured it.
	in := reviewDaemon(t, dbPath, clock)
	created := in.Create(`{"order_id":"order-review","amount":1004,"currency":"EUR"}`, "review-1")
	if got := created.Status; got != http.StatusCreated {
		t.Fatalf("create: HTTP %d: %s", got, created.Body)
	}
	id := created.Str("id")
	if got, want := created.Str("status"), "finalize_pending"; got != want {
		t.Fatalf("status=%v, want %s", got, want)
	}
	in.Close()

	// The simulated PSP loses the charge (it keeps its charges in the
	// store, under a key the store encodes: take out its only one), and
	// the process restarts: the PSP does not know the payment.
	bdb, err := bbolt.Open(dbPath, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := bdb.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte("psp_charges"))
		if n := b.Stats().KeyN; n != 1 {
			return fmt.Errorf("the mock PSP holds %d charges, want the one of %s", n, id)
		}
		k, _ := b.Cursor().First()
		return b.Delete(k)
	}); err != nil {
		t.Fatal(err)
	}
	if err := bdb.Close(); err != nil {
		t.Fatal(err)
	}
	in = reviewDaemon(t, dbPath, clock)
	m, base := in.Main, in.Base
	mockWebhook(t, in, clock, "evt_review_1", stdwebhook.TypeProcessing, id, "")
	testkit.WaitFor(t, 10*time.Second, func() error {
		var ev struct {
			Data []struct {
				EventID string `json:"event_id"`
			}
		}
		in.DoJSON("GET", "/v1/payments/"+id+"/events", nil, nil, &ev)
		for _, s := range ev.Data {
			if s.EventID == "evt_review_1" {
				return nil
			}
		}
		return fmt.Errorf("webhook not applied yet")
	})
	clock.Add(11 * time.Minute)
	if _, err := m.Sweeper.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if rep := m.Sweeper.LastReport(); rep.Reviewed != 1 {
		t.Fatalf("sweeper report=%+v, want one payment reviewed", rep)
	}

	// The queue over HTTP, with the evidence.
	var list reviewList
	if got := in.DoJSON("GET", "/v1/review", nil, nil, &list); got != http.StatusOK {
		t.Fatalf("GET /v1/review: HTTP %d", got)
	}
	if len(list.Data) != 1 {
		t.Fatalf("review items=%d, want 1", len(list.Data))
	}
	it := list.Data[0]
	if it.ID != id || it.PaymentID != id || it.Reason != "unresolved" {
		t.Fatalf("item=%+v, want %s unresolved", it, id)
	}
	ev := it.Evidence
	if got, want := ev.Payment["status"], "finalize_pending"; got != want {
		t.Fatalf("evidence payment status=%v, want %s", got, want)
	}
	for _, k := range []string{"client_secret", "redirect_url"} {
		if _, ok := ev.Payment[k]; ok {
			t.Fatalf("evidence payment has %s", k)
		}
	}
	var sawReview bool
	for _, s := range ev.Timeline {
		sawReview = sawReview || (s.Kind == "review" && s.Source == "sweeper")
	}
	if !sawReview || len(ev.Timeline) < 3 {
		t.Fatalf("timeline=%+v, want created, finalize_pending, the webhook and the review step", ev.Timeline)
	}
	if len(ev.Webhooks) != 1 || ev.Webhooks[0].EventID != "evt_review_1" || ev.Webhooks[0].ReceivedAt == "" ||
		ev.Webhooks[0].Body["type"] != stdwebhook.TypeProcessing {
		t.Fatalf("webhooks=%+v, want evt_review_1 with its raw body", ev.Webhooks)
	}
	if a := ev.LastPSPStatus; a == nil || a.Found || a.Raw != "mock status=not_found" {
		t.Fatalf("last_psp_status=%+v, want not found", a)
	}

	// The state machine holds for humans too, and a note is required.
	var e map[string]any
	if got := in.DoJSON("POST", "/v1/review/"+id+"/resolve", []byte(`{"status":"processing","note":"looks open"}`), nil, &e); got != http.StatusConflict {
		t.Fatalf("resolve with an older status: HTTP %d (%v), want 409", got, e)
	}
	if got := in.DoJSON("POST", "/v1/review/"+id+"/resolve", []byte(`{"status":"captured"}`), nil, &e); got != http.StatusBadRequest {
		t.Fatalf("resolve without a note: HTTP %d (%v), want 400", got, e)
	}

	// The CLI against the running server.
	out, err := runCmd("review", "list", "-url", base, "-api-key", daemontest.APIKey)
	if err != nil {
		t.Fatalf("review list: %v\n%s", err, out)
	}
	if !strings.Contains(out, id) || !strings.Contains(out, "unresolved") || !strings.Contains(out, "not_found") {
		t.Fatalf("review list printed:\n%s\nwant the item, its reason and the PSP's answer", out)
	}
	out, err = runCmd("review", "list", "-url", base, "-api-key", daemontest.APIKey, "-json")
	if err != nil || !json.Valid([]byte(out)) {
		t.Fatalf("review list -json: %v\n%s", err, out)
	}
	if _, err := runCmd("review", "list", "-url", base, "-api-key", "wrong"); err == nil || !strings.Contains(err.Error(), "unauthorized") {
		t.Fatalf("review list with a wrong key: err=%v, want unauthorized", err)
	}
	// The client's error carries the server's code; -url may omit the scheme.
	if _, err := runCmd("review", "list", "-url", base, "-api-key", "wrong"); pay.ErrorCode(err) != pay.EUNAUTHORIZED {
		t.Fatalf("review list with a wrong key: code %q (%v), want %s", pay.ErrorCode(err), err, pay.EUNAUTHORIZED)
	}
	if out, err := runCmd("review", "list", "-url", strings.TrimPrefix(base, "http://"), "-api-key", daemontest.APIKey); err != nil || !strings.Contains(out, id) {
		t.Fatalf("review list -url host:port: %v\n%s", err, out)
	}
	out, err = runCmd("review", "resolve", "-url", base, "-api-key", daemontest.APIKey,
		"-id", id, "-status", "captured", "-note", "captured per the PSP's dashboard")
	if err != nil {
		t.Fatalf("review resolve: %v\n%s", err, out)
	}
	if !strings.Contains(out, id+" resolved: captured") {
		t.Fatalf("review resolve printed %q", out)
	}

	// Resolved through finalize: captured by source review, off the queue.
	var p map[string]any
	in.DoJSON("GET", "/v1/payments/"+id, nil, nil, &p)
	if got, want := p["status"], "captured"; got != want {
		t.Fatalf("status=%v, want %s", got, want)
	}
	var steps struct {
		Data []struct {
			Source, Kind, To, Note string
		} `json:"data"`
	}
	in.DoJSON("GET", "/v1/payments/"+id+"/events", nil, nil, &steps)
	last := steps.Data[len(steps.Data)-1]
	if last.Source != "review" || last.Kind != "transition" || last.To != "captured" || !strings.Contains(last.Note, "PSP's dashboard") {
		t.Fatalf("last step=%+v, want the review's transition to captured with the note", last)
	}
	list = reviewList{}
	in.DoJSON("GET", "/v1/review", nil, nil, &list)
	if len(list.Data) != 0 {
		t.Fatalf("review items=%+v, want none", list.Data)
	}
	if _, err := runCmd("review", "resolve", "-url", base, "-api-key", daemontest.APIKey, "-id", id, "-status", "captured", "-note", "again"); err == nil || !strings.Contains(err.Error(), "not_found") {
		t.Fatalf("second resolve: err=%v, want not_found", err)
	}

	// An orphan: a PSP event for a payment paystate does not know. It is
	// retried a few times, then queued; it can only be dismissed.
	mockWebhook(t, in, clock, "evt_orphan_1", stdwebhook.TypeCaptured, "", "mock_pi_unknown")
	orphan := ""
	testkit.WaitFor(t, 10*time.Second, func() error {
		clock.Add(time.Minute) // past the inbox's backoff
		m.Inbox.Wake()
		list = reviewList{}
		in.DoJSON("GET", "/v1/review", nil, nil, &list)
		if len(list.Data) == 1 && list.Data[0].Reason == "orphan" {
			orphan = list.Data[0].ID
			return nil
		}
		return fmt.Errorf("no orphan on the queue yet")
	})
	if w := list.Data[0].Evidence.Webhooks; list.Data[0].Evidence.Payment != nil || len(w) != 1 || w[0].EventID != "evt_orphan_1" {
		t.Fatalf("orphan evidence=%+v, want no payment and its webhook", list.Data[0].Evidence)
	}
	if _, err := runCmd("review", "resolve", "-url", base, "-api-key", daemontest.APIKey, "-id", orphan, "-status", "captured", "-note", "x"); err == nil || !strings.Contains(err.Error(), "dismissed") {
		t.Fatalf("resolve an orphan as captured: err=%v, want a pointer to dismissed", err)
	}
	out, err = runCmd("review", "resolve", "-url", base, "-api-key", daemontest.APIKey, "-id", orphan, "-status", "dismissed", "-note", "test charge, refunded at the PSP")
	if err != nil || !strings.Contains(out, orphan+" dismissed") {
		t.Fatalf("dismiss: %v, printed %q", err, out)
	}
	out, err = runCmd("review", "list", "-url", base, "-api-key", daemontest.APIKey)
	if err != nil || !strings.Contains(out, "empty") {
		t.Fatalf("review list after resolving everything: %v\n%s", err, out)
	}

	// The sweeper's and the human's steps replay cleanly.
	in.Close()
	if out, err := runCmd("verify", "-db", dbPath); err != nil {
		t.Fatalf("verify: %v\n%s", err, out)
	}
}

func TestReview_Usage(t *testing.T) {
	t.Parallel()
	var out, errb bytes.Buffer
	if err := Run(context.Background(), []string{"review"}, &out, &errb); err == nil || !strings.Contains(errb.String(), "review resolve") {
		t.Fatalf("review without subcommand: err=%v, stderr %q", err, errb.String())
	}
	if err := Run(context.Background(), []string{"review", "resolve", "-url", "http://127.0.0.1:1", "-api-key", "k", "-id", "pay_x", "-status", "captured"}, &out, &errb); err == nil || !strings.Contains(err.Error(), "-note") {
		t.Fatalf("resolve without -note: err=%v", err)
	}
}
