package daemon_test

// Browser tests of the dashboard: a real headless Chromium (Debian's
// chromium package; ../scripts/install-chromium.sh installs it when
// /usr/bin/chromium is missing) driven with chromedp against a running
// paystate. Set PAYSTATE_SCREENSHOTS to a folder to keep the screenshots
// after the test (they are always written under the test's temp dir).

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/paystate/paystate/config"
	"github.com/paystate/paystate/internal/testkit"
	"github.com/paystate/paystate/internal/testkit/daemontest"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/reconcile"
)

const chromiumPath = "/usr/bin/chromium"

var (
	chromiumOnce sync.Once
	chromiumErr  error
)

// needChromium installs Debian's chromium once when it is missing.
func needChromium(t *testing.T) {
	t.Helper()
	chromiumOnce.Do(func() {
		if _, err := os.Stat(chromiumPath); err == nil {
			return
		}
		out, err := exec.Command("bash", filepath.Join("..", "scripts", "install-chromium.sh")).CombinedOutput()
		if err != nil {
			chromiumErr = fmt.Errorf("install chromium: %v\n%s", err, out)
		}
	})
	if chromiumErr != nil {
		t.Fatal(chromiumErr)
	}
}

// browser is one headless Chromium tab with what its page wrote to the
// console.
type browser struct {
	t   *testing.T
	ctx context.Context
	dir string

	mu      sync.Mutex
	console []chromedp.ConsoleMessage
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	needChromium(t)
	dir := t.TempDir()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath),
		chromedp.NoSandbox, // tests and CI run as root
		chromedp.UserDataDir(filepath.Join(dir, "profile")),
		chromedp.WindowSize(1400, 1000),
		chromedp.Flag("disable-gpu", true),
	)
	parent, cancelParent := context.WithTimeout(context.Background(), 3*time.Minute)
	actx, cancelAlloc := chromedp.NewExecAllocator(parent, opts...)
	ctx, cancelCtx := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(func() {
		cancelCtx()
		cancelAlloc()
		cancelParent()
	})
	b := &browser{t: t, ctx: ctx, dir: dir}
	msgs := chromedp.Console(ctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			b.mu.Lock()
			b.console = append(b.console, m)
			b.mu.Unlock()
		}
	}()
	return b
}

// do runs steps and fails the test on the first error, naming the step.
func (b *browser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.screenshot("failed")
		b.t.Fatalf("%s: %v\nconsole: %v", what, err, b.messages())
	}
}

// eval evaluates a JavaScript expression into T.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// poll waits until a JavaScript predicate holds in the page.
func (b *browser) poll(what, predicate string) {
	b.t.Helper()
	b.do(what, func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.Poll[chromedp.Void](predicate, chromedp.WithPollingTimeout(20*time.Second), chromedp.WithPollingInterval(50*time.Millisecond))(ctx, t)
		return chromedp.Void{}, err
	})
}

func (b *browser) messages() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, m := range b.console {
		out = append(out, m.String())
	}
	return out
}

// assertCleanConsole fails on an uncaught exception and on anything the
// Content-Security-Policy refused.
func (b *browser) assertCleanConsole() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, m := range b.console {
		if m.IsException() || strings.Contains(m.Text, "Content Security Policy") {
			b.t.Errorf("browser console: %s", m)
		}
	}
}

// screenshot saves the whole page as name.png under the test's temp dir
// (and PAYSTATE_SCREENSHOTS when set) and returns the path.
func (b *browser) screenshot(name string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Errorf("screenshot %s: %v", name, err)
		return ""
	}
	path := filepath.Join(b.dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	if keep := os.Getenv("PAYSTATE_SCREENSHOTS"); keep != "" {
		if err := os.WriteFile(filepath.Join(keep, b.t.Name()+"-"+name+".png"), png, 0o644); err != nil {
			b.t.Errorf("keep screenshot: %v", err)
		}
	}
	return path
}

// signIn opens the dashboard, which asks for the API key, and signs in
// through the form.
func (b *browser) signIn(base string) {
	b.t.Helper()
	b.do("open the sign-in page",
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(chromedp.CSS("#signin-form")),
	)
	b.screenshot("signin")
	b.do("sign in",
		chromedp.SendKeys(chromedp.CSS("#api_key"), daemontest.APIKey),
		chromedp.Click(chromedp.CSS("#signin")),
		chromedp.WaitVisible(chromedp.CSS("#tab-payments")),
	)
	// The tabs show before the deferred app.js has bound their clicks.
	b.poll("the dashboard starts", `document.documentElement.dataset.ready === "true"`)
}

// jsString quotes s for a JavaScript expression.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// reportCaptured creates a report-mode payment and reports it captured.
func reportCaptured(t *testing.T, in *daemontest.Instance, orderID, key string) string {
	t.Helper()
	c := in.Create(fmt.Sprintf(`{"order_id":%s,"amount":1500,"currency":"EUR","provider":"standard"}`, jsString(orderID)), key)
	if c.Status != 201 {
		t.Fatalf("create: %d %s", c.Status, c.Body)
	}
	id := c.Str("id")
	s := in.Do("POST", "/v1/payments/"+id+"/sync", []byte(`{"status":"captured","provider_ref":"psp_`+key+`","expected_version":1}`), nil)
	if got, want := s.Str("status"), "captured"; got != want {
		t.Fatalf("sync: status=%s, want %s: %s", got, want, s.Body)
	}
	return id
}

// sendStandard delivers a signed standard webhook and waits until it is
// applied (the event shows in the payment's timeline).
func sendStandard(t *testing.T, in *daemontest.Instance, eventID, typ, paymentID string) {
	t.Helper()
	body := eventBody(eventID, typ, paymentID, "")
	r := in.Do("POST", "/webhooks/standard", body, testkit.SignStandard(t, in.Main.Config.Providers.Standard.WebhookSecret, eventID, time.Now(), body))
	if r.Status != 200 {
		t.Fatalf("webhook: %d %s", r.Status, r.Body)
	}
	testkit.WaitFor(t, 10*time.Second, func() error {
		ev := in.Do("GET", "/v1/payments/"+paymentID+"/events", nil, nil)
		if !strings.Contains(string(ev.Body), eventID) {
			return fmt.Errorf("event %s not in the timeline yet: %s", eventID, ev.Body)
		}
		return nil
	})
}

func TestBrowser_Dashboard(t *testing.T) {
	t.Parallel()
	// A merchant endpoint that fails until told otherwise: with one attempt
	// allowed, its deliveries become dead letters at once.
	var accept atomic.Bool
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !accept.Load() {
			http.Error(w, "down for maintenance", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(endpoint.Close)
	in := daemontest.Boot(t, func(c *config.Config) {
		c.Ripple.MaxAttempts = 1
		c.Webhooks = []config.Webhook{{URL: endpoint.URL + "/paystate", Secret: "whsec_" + base64.StdEncoding.EncodeToString([]byte("merchant-endpoint-secret-0123456")), Events: []string{"payment.captured"}}}
	})

	// Merchant input that would run as HTML if it were put in as HTML.
	hostile := `<img src=x id=pwned onerror="document.title='pwned'">&amp;`
	in.Create(fmt.Sprintf(`{"order_id":%s,"amount":1000,"currency":"EUR"}`, jsString(hostile)), "k-hostile")
	// A report-mode payment: the merchant's sync report wins, the PSP's
	// webhook of the same outcome arrives second and is absorbed.
	id := reportCaptured(t, in, "order-browser-1", "rep1")
	sendStandard(t, in, "evt_browser_dup", "payment.captured", id)

	b := newBrowser(t)
	b.signIn(in.Base)
	row := fmt.Sprintf(`#payments-table tr[data-payment-id=%q]`, id)
	b.do("see the payment created over the API", chromedp.WaitVisible(chromedp.CSS(row)))

	// The hostile order id is shown as text and created no element.
	b.poll("see the hostile order id", `Array.from(document.querySelectorAll('#payments-table td.order')).some(td => td.textContent === `+jsString(hostile)+`)`)
	if eval[bool](b, `document.getElementById('pwned') !== null || document.title === 'pwned'`) {
		t.Fatal("an order id was put into the page as HTML")
	}

	// The status filter and the order id filter.
	b.do("filter by status",
		chromedp.SetValue(chromedp.CSS("#filter-status"), "failed"),
		chromedp.Click(chromedp.CSS(`#payment-filters button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS("#payments-empty")),
	)
	eval[bool](b, `(document.getElementById('filter-status').selectedIndex = 0) === 0`)
	b.do("filter by order id",
		chromedp.SetValue(chromedp.CSS("#filter-order"), "order-browser-1"),
		chromedp.Click(chromedp.CSS(`#payment-filters button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(row)),
	)
	if got, want := eval[int](b, `document.querySelectorAll('#payments-table tbody tr').length`), 1; got != want {
		t.Fatalf("rows for one order id: %d, want %d", got, want)
	}

	// Its timeline: which path won, and what was absorbed.
	b.do("open the timeline",
		chromedp.Click(chromedp.CSS(row)),
		chromedp.WaitVisible(chromedp.CSS("#timeline-table")),
	)
	if got, want := eval[string](b, `document.getElementById('timeline-id').textContent`), id; got != want {
		t.Fatalf("timeline of %s, want %s", got, want)
	}
	verdict := eval[string](b, `document.getElementById('timeline-verdict').textContent`)
	for _, want := range []string{"report path won", "created → captured", "duplicate from webhook"} {
		if !strings.Contains(verdict, want) {
			t.Errorf("verdict %q lacks %q", verdict, want)
		}
	}
	kinds := eval[[]string](b, `Array.from(document.querySelectorAll('#timeline-table tbody tr')).map(tr => tr.dataset.kind)`)
	if got, want := strings.Join(kinds, ","), "created,transition,duplicate"; got != want {
		t.Errorf("timeline kinds %s, want %s", got, want)
	}
	if got, want := eval[string](b, `document.querySelector('#timeline-table tr.won td.source').textContent`), "report"; got != want {
		t.Errorf("winning row source %q, want %q", got, want)
	}
	b.screenshot("timeline")

	// Dead letters, and a retry once the endpoint is back.
	var dead string
	testkit.WaitFor(t, 10*time.Second, func() error {
		r := in.Do("GET", "/v1/deliveries?state=dead", nil, nil)
		data, _ := r.JSON["data"].([]any)
		for _, d := range data {
			if d, _ := d.(map[string]any); d["payment_id"] == id && d["effect"] == "webhook" {
				dead, _ = d["id"].(string)
				return nil
			}
		}
		return fmt.Errorf("no dead webhook delivery of %s yet: %d %s", id, r.Status, r.Body)
	})
	deadRow := fmt.Sprintf(`#deliveries-table tr[data-delivery-id=%q]`, dead)
	b.do("see the dead letter",
		chromedp.Click(chromedp.CSS("#tab-deliveries")),
		chromedp.WaitVisible(chromedp.CSS(deadRow)),
	)
	b.screenshot("deliveries")
	accept.Store(true)
	b.do("retry it", chromedp.Click(chromedp.CSS(deadRow+" button.retry")))
	testkit.WaitFor(t, 10*time.Second, func() error {
		r := in.Do("GET", "/v1/deliveries?state=done", nil, nil)
		if !strings.Contains(string(r.Body), dead) {
			return fmt.Errorf("delivery %s not done: %s", dead, r.Body)
		}
		return nil
	})
	b.do("the list follows",
		chromedp.SetValue(chromedp.CSS("#delivery-state"), "done"),
		chromedp.Click(chromedp.CSS("#deliveries-refresh")),
		chromedp.WaitVisible(chromedp.CSS(deadRow)),
	)

	// Charts fill from /metrics: the webhook above was counted.
	b.do("open charts", chromedp.Click(chromedp.CSS("#tab-charts")))
	b.poll("read the metrics twice", `document.querySelectorAll('#chart-webhooks .legend li').length > 0`)
	b.screenshot("charts")
	b.assertCleanConsole()
}

func TestBrowser_ReviewResolve(t *testing.T) {
	t.Parallel()
	in := daemontest.Boot(t, func(c *config.Config) { c.Payment.Provider = "standard" })

	// The merchant reports captured, then the PSP says failed: conflicting
	// terminal outcomes put the payment on the review queue.
	id := reportCaptured(t, in, "order-review-1", "rev1")
	sendStandard(t, in, "evt_browser_failed", "payment.failed", id)
	testkit.WaitFor(t, 10*time.Second, func() error {
		r := in.Do("GET", "/v1/review", nil, nil)
		if r.Status == 501 {
			t.Fatalf("GET /v1/review answers 501: the review API is needed to resolve an item: %s", r.Body)
		}
		if r.Status != 200 {
			return fmt.Errorf("GET /v1/review: %d %s", r.Status, r.Body)
		}
		if !strings.Contains(string(r.Body), id) {
			return fmt.Errorf("%s not on the review queue: %s", id, r.Body)
		}
		return nil
	})

	b := newBrowser(t)
	b.signIn(in.Base)
	// The Review badge counts the item before the tab is opened, without
	// waiting for a sweeper pass: it shows paystate_review_queue_size,
	// which /metrics reads from the store at each scrape.
	b.poll("the Review badge counts the item", `!document.getElementById('review-count').hidden && document.getElementById('review-count').textContent === '1'`)
	form := fmt.Sprintf(`form.resolve[data-payment-id=%q]`, id)
	b.do("open the review queue",
		chromedp.Click(chromedp.CSS("#tab-review")),
		chromedp.WaitVisible(chromedp.CSS(form)),
	)
	b.do("open the evidence", chromedp.Click(chromedp.CSS(fmt.Sprintf(`article[data-review-id=%q] details.evidence > summary`, id))))
	evidence := eval[string](b, fmt.Sprintf(`document.querySelector('article[data-review-id=%q] details.evidence').innerText`, id))
	for _, want := range []string{"evt_browser_failed", "conflicting_terminal", "report"} {
		if !strings.Contains(evidence, want) {
			t.Errorf("evidence lacks %q: %s", want, evidence)
		}
	}
	b.screenshot("review")
	b.do("resolve through the form",
		chromedp.SetValue(chromedp.CSS(form+` select[name="status"]`), "captured"),
		chromedp.SendKeys(chromedp.CSS(form+` input[name="note"]`), "PSP dashboard shows the charge settled"),
		chromedp.Click(chromedp.CSS(form+` button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS("#review-notice")),
	)
	b.poll("the item leaves the queue", `document.querySelector(`+jsString(form)+`) === null`)
	b.screenshot("resolved")

	// The API agrees: off the queue, captured, and the human's step is in
	// the timeline.
	if r := in.Do("GET", "/v1/review", nil, nil); strings.Contains(string(r.Body), id) {
		t.Fatalf("%s still on the review queue: %s", id, r.Body)
	}
	if got, want := in.Do("GET", "/v1/payments/"+id, nil, nil).Str("status"), "captured"; got != want {
		t.Fatalf("status=%s, want %s", got, want)
	}
	ev := in.Do("GET", "/v1/payments/"+id+"/events", nil, nil)
	if !strings.Contains(string(ev.Body), `"source":"review"`) {
		t.Fatalf("no review step in the timeline: %s", ev.Body)
	}
	b.assertCleanConsole()
}

// TestBrowser_MerchantDashboard is what a merchant does with the dashboard:
// payment ids are links that open the payment's page (also in a new tab),
// the list is searched by customer and dates and exported as CSV, a
// captured payment is refunded with a confirmation, and the revenue view
// charts what the ledger holds. No page ever shows a client secret.
func TestBrowser_MerchantDashboard(t *testing.T) {
	t.Parallel()
	in := daemontest.Boot(t, nil)
	create := func(body, key string) string {
		t.Helper()
		r := in.Create(body, key)
		if r.Status != 201 {
			t.Fatalf("create %s: %d %s", body, r.Status, r.Body)
		}
		return r.Str("id")
	}
	// Two mock payments, captured at once (amounts ending 00).
	ada := create(`{"order_id":"order-ada","amount":1000,"currency":"EUR","customer":{"id":"cus_ada","email":"Ada@Example.com"}}`, "m-ada")
	bob := create(`{"order_id":"order-bob","amount":2000,"currency":"EUR","customer":{"id":"cus_bob","email":"bob@example.com"}}`, "m-bob")
	// A payment waiting for its customer, whose view carries secrets.
	wait := create(`{"order_id":"order-wait","amount":1500,"currency":"EUR","provider":"standard","customer":{"id":"cus_wait"}}`, "m-wait")
	const secret, redirect = "pi_wait_secret_d0n7_5h0w", "https://psp.example/3ds/d0n7-5h0w"
	s := in.Do("POST", "/v1/payments/"+wait+"/sync", []byte(`{"status":"requires_action","client_secret":"`+secret+`","redirect_url":"`+redirect+`"}`), nil)
	if s.Str("client_secret") != secret {
		t.Fatalf("the API view of a requires_action payment has no client secret: %s", s.Body)
	}
	for _, id := range []string{ada, bob} {
		if got, want := in.Do("GET", "/v1/payments/"+id, nil, nil).Str("status"), "captured"; got != want {
			t.Fatalf("%s: status=%s, want %s", id, got, want)
		}
	}

	b := newBrowser(t)
	b.signIn(in.Base)
	link := func(id string) string { return fmt.Sprintf(`#payments-table a[data-payment-link=%q]`, id) }
	b.do("see the payments", chromedp.WaitVisible(chromedp.CSS(link(ada))), chromedp.WaitVisible(chromedp.CSS(link(wait))))
	noSecret := func(where string) {
		t.Helper()
		html := eval[string](b, `document.documentElement.outerHTML`)
		if strings.Contains(html, secret) || strings.Contains(html, redirect) {
			t.Fatalf("%s shows a client secret or redirect URL", where)
		}
	}
	noSecret("the payment list")

	// A payment id is a real link to the payment's page.
	href := eval[string](b, `document.querySelector(`+jsString(link(ada))+`).href`)
	if want := in.Base + "/#/payments/" + ada; href != want {
		t.Fatalf("link href %q, want %q", href, want)
	}
	b.do("follow the link", chromedp.Click(chromedp.CSS(link(ada))), chromedp.WaitVisible(chromedp.CSS("#timeline-table")))
	if got := eval[string](b, `document.getElementById('timeline-id').textContent`); got != ada {
		t.Fatalf("page of %s, want %s", got, ada)
	}
	if !eval[bool](b, `document.getElementById('payments-list').hidden`) {
		t.Error("the list is still shown on a payment's page")
	}
	// The link opened in a new tab of the same browser (the session
	// cookie comes along) shows the same page.
	tab, closeTab := chromedp.NewContext(b.ctx)
	tabCtx, cancelTab := context.WithTimeout(tab, 30*time.Second)
	var opened string
	err := chromedp.Do(tabCtx, chromedp.Navigate(in.Base+"/#/payments/"+wait), chromedp.WaitVisible(chromedp.CSS("#timeline-table")))
	if err == nil {
		opened, err = chromedp.Run(tabCtx, chromedp.Evaluate[string](`document.getElementById('timeline-id').textContent + ' ' + document.documentElement.outerHTML`))
	}
	cancelTab()
	closeTab()
	if err != nil {
		t.Fatalf("open the payment's link in a new tab: %v", err)
	}
	if !strings.HasPrefix(opened, wait+" ") {
		t.Fatalf("the new tab shows %.80q, want the page of %s", opened, wait)
	}
	if strings.Contains(opened, secret) || strings.Contains(opened, redirect) {
		t.Fatal("the page of a requires_action payment shows its client secret or redirect URL")
	}
	b.do("back to the list", chromedp.Click(chromedp.CSS("#payment-back")), chromedp.WaitVisible(chromedp.CSS(link(bob))))

	// Search by customer e-mail (any case), by customer id, by dates.
	rows := func() []string {
		return eval[[]string](b, `Array.from(document.querySelectorAll('#payments-table tbody tr')).map(tr => tr.dataset.paymentId)`)
	}
	search := func(what, customer, from, to string) {
		t.Helper()
		// Date inputs take their value from script (as a date picker sets
		// it). The list is emptied and the search submitted in one script,
		// so that no answer of an earlier load lands in between and passes
		// for the search's.
		eval[bool](b, fmt.Sprintf(`(document.getElementById('filter-customer').value = %s, document.getElementById('filter-from').value = %s,
			document.getElementById('filter-to').value = %s, document.getElementById('payments-body').replaceChildren(),
			document.querySelector('#payment-filters button[type="submit"]').click(), true)`,
			jsString(customer), jsString(from), jsString(to)))
		b.poll(what+": the list is back", `document.querySelector('#payments-table, #payments-empty') !== null`)
	}
	today := time.Now().UTC().Format(time.DateOnly)
	tomorrow := time.Now().UTC().AddDate(0, 0, 1).Format(time.DateOnly)
	search("search by e-mail", "ada@EXAMPLE.com", "", "")
	if got := rows(); len(got) != 1 || got[0] != ada {
		t.Fatalf("e-mail search: %v, want [%s]", got, ada)
	}
	b.screenshot("search")

	// The export takes the same filters.
	b.do("export the search as CSV", chromedp.Click(chromedp.CSS("#payments-export")))
	b.poll("the export is done", `document.getElementById('export-result').dataset.rows !== undefined`)
	if got := eval[string](b, `document.getElementById('export-result').dataset.rows`); got != "1" {
		t.Fatalf("exported %s rows, want 1: %s", got, eval[string](b, `document.getElementById('export-result').textContent`))
	}

	// A load of the list begun before a search (the periodic refresh, here
	// the refresh button with the e-mail filter still applied) and answered
	// after it must not replace the search's list: the page holds that
	// load's answer until the search has been shown, then lets it through.
	eval[bool](b, `(() => {
		const real = window.fetch;
		let hold = true;
		window.fetch = function (path, opts) {
			if (!hold || !String(path).startsWith('/v1/payments?')) return real.call(this, path, opts);
			hold = false;
			const answer = real.call(this, path, opts);
			return new Promise((resolve) => {
				window.releaseHeld = async () => {
					const res = await answer;
					const text = await res.text();
					resolve({ ok: res.ok, status: res.status, statusText: res.statusText, headers: res.headers, text: () => Promise.resolve(text) });
					// The page's continuations are microtasks: done before this timer.
					setTimeout(() => { window.heldDone = true; }, 0);
				};
			});
		};
		document.getElementById('payments-refresh').click();
		return true;
	})()`)
	b.poll("the refresh is held", `typeof window.releaseHeld === 'function'`)
	search("search by customer id", "cus_bob", "", "")
	if got := rows(); len(got) != 1 || got[0] != bob {
		t.Fatalf("customer id search: %v, want [%s]", got, bob)
	}
	eval[bool](b, `(window.releaseHeld(), true)`)
	b.poll("the held refresh is answered", `window.heldDone === true`)
	if got := rows(); len(got) != 1 || got[0] != bob {
		t.Fatalf("after the earlier refresh was answered: %v, want the search's [%s]", got, bob)
	}
	search("search by today", "", today, today)
	if got := rows(); len(got) != 3 {
		t.Fatalf("created today: %v, want 3 payments", got)
	}
	search("search from tomorrow", "", tomorrow, "")
	if !eval[bool](b, `document.getElementById('payments-empty') !== null`) {
		t.Fatalf("created from tomorrow: %v, want none", rows())
	}
	search("search by customer and today", "cus_ada", today, today)
	if got := rows(); len(got) != 1 || got[0] != ada {
		t.Fatalf("customer and day: %v, want [%s]", got, ada)
	}

	// Refund the captured payment from its page, all of it, after a
	// confirmation.
	b.do("open the captured payment",
		chromedp.Click(chromedp.CSS(link(ada))),
		chromedp.WaitVisible(chromedp.CSS("#refund-rest")),
		chromedp.Click(chromedp.CSS("#refund-rest")),
		chromedp.WaitVisible(chromedp.CSS("#refund-confirm")),
	)
	question := eval[string](b, `document.getElementById('refund-question').textContent`)
	if !strings.Contains(question, "order-ada") || !strings.Contains(question, "10") {
		t.Errorf("the confirmation %q does not name the order and the amount", question)
	}
	if got, want := in.Do("GET", "/v1/payments/"+ada, nil, nil).Str("status"), "captured"; got != want {
		t.Fatalf("before the confirmation: status=%s, want %s", got, want)
	}
	b.screenshot("refund-confirm")
	b.do("confirm the refund", chromedp.Click(chromedp.CSS("#refund-confirm")), chromedp.WaitVisible(chromedp.CSS("#refund-result")))
	b.poll("the page shows the payment refunded", `document.querySelector('#payment-status .badge').textContent === 'refunded'`)
	if eval[bool](b, `document.getElementById('refund-start') !== null || document.getElementById('refund-rest') !== null`) {
		t.Error("a refunded payment still offers a refund")
	}
	b.screenshot("refunded")
	if got, want := in.Do("GET", "/v1/payments/"+ada, nil, nil).Str("status"), "refunded"; got != want {
		t.Fatalf("after the refund: status=%s, want %s", got, want)
	}
	ev := in.Do("GET", "/v1/payments/"+ada+"/events", nil, nil)
	if !strings.Contains(string(ev.Body), `"to":"refunded"`) {
		t.Fatalf("no refund in the timeline: %s", ev.Body)
	}

	// Revenue: 30.00 captured, 10.00 refunded, 20.00 net today, charted
	// by Chart.js; and the ledger balances.
	b.do("open the revenue view", chromedp.Click(chromedp.CSS("#tab-revenue")),
		chromedp.WaitVisible(chromedp.CSS(`#revenue-charts figure[data-currency="EUR"] canvas`)),
		chromedp.WaitVisible(chromedp.CSS("#balances-table")))
	type dataset struct {
		Label string
		Sum   float64
	}
	sets := eval[[]dataset](b, `Chart.getChart(document.querySelector('#revenue-charts figure[data-currency="EUR"] canvas')).data.datasets.map(d => ({label: d.label, sum: d.data.reduce((a, b) => a + b, 0)}))`)
	if got, want := fmt.Sprint(sets), "[{Captured 30} {Refunded 10} {Lost to disputes 0} {Fees 0} {Net 20}]"; got != want {
		t.Fatalf("chart datasets %s, want %s", got, want)
	}
	if got := eval[string](b, `document.querySelector('#revenue-table tr[data-currency="EUR"] td.net').textContent`); !strings.Contains(got, "20") {
		t.Errorf("revenue table net %q, want 20.00", got)
	}
	if got := eval[int](b, `document.querySelectorAll('#balances-table tbody tr').length`); got != 2 {
		t.Errorf("%d ledger balances, want 2 (receivable and revenue in EUR)", got)
	}
	if got := eval[string](b, `document.getElementById('balances-check').textContent`); !strings.HasPrefix(got, "Balanced") {
		t.Errorf("balance check %q", got)
	}
	// The balances say what each sign means.
	if got := eval[string](b, `document.querySelector('#balances-table tr[data-account="merchant_revenue"] td.account-meaning').textContent`); !strings.HasPrefix(got, "Negative") {
		t.Errorf("merchant_revenue's meaning %q, want it to say why it is negative", got)
	}
	if got := eval[string](b, `document.getElementById('revenue-net').textContent`); !strings.Contains(got, "captured − refunded − lost to disputes − fees") {
		t.Errorf("revenue note %q does not say how net is made", got)
	}
	b.screenshot("revenue")
	noSecret("the revenue view")
	b.assertCleanConsole()
}

// sendStandardDispute delivers a signed standard payment.dispute.* event
// and waits until GET /v1/disputes shows the dispute in status.
func sendStandardDispute(t *testing.T, in *daemontest.Instance, eventID, typ, paymentID, disputeID, status string, amount int64, due time.Time) {
	t.Helper()
	body := []byte(fmt.Sprintf(`{"id":%q,"type":%q,"created":%d,"data":{"payment_id":%q,"currency":"EUR","dispute":{"id":%q,"amount":%d,"reason":"fraudulent","status":%q,"evidence_due_by":%d}}}`,
		eventID, typ, time.Now().Unix(), paymentID, disputeID, amount, status, due.Unix()))
	r := in.Do("POST", "/webhooks/standard", body, testkit.SignStandard(t, in.Main.Config.Providers.Standard.WebhookSecret, eventID, time.Now(), body))
	if r.Status != 200 {
		t.Fatalf("dispute webhook: %d %s", r.Status, r.Body)
	}
	testkit.WaitFor(t, 10*time.Second, func() error {
		l := in.Do("GET", "/v1/disputes?status="+status, nil, nil)
		if !strings.Contains(string(l.Body), `"id":"`+disputeID+`"`) {
			return fmt.Errorf("dispute %s not %s yet: %d %s", disputeID, status, l.Status, l.Body)
		}
		return nil
	})
}

// TestBrowser_RefundsDisputes is the money beyond the happy path on the
// dashboard: a partial refund through the payment's form (in major units,
// after a confirmation, its idempotency key kept across a lost answer),
// then the rest; open disputes with their evidence deadlines, soonest
// first and the overdue one marked; and the reconciliation runs.
func TestBrowser_RefundsDisputes(t *testing.T) {
	t.Parallel()
	in := daemontest.Boot(t, nil)
	c := in.Create(`{"order_id":"order-partial","amount":1500,"currency":"EUR","customer":{"id":"cus_partial"}}`, "rd-partial")
	if c.Status != 201 || c.Str("status") != "captured" {
		t.Fatalf("create: %d %s", c.Status, c.Body)
	}
	id := c.Str("id")
	refunds := func() []any {
		t.Helper()
		r := in.Do("GET", "/v1/payments/"+id+"/refunds", nil, nil)
		if r.Status != 200 {
			t.Fatalf("GET refunds: %d %s", r.Status, r.Body)
		}
		data, _ := r.JSON["data"].([]any)
		return data
	}

	b := newBrowser(t)
	b.signIn(in.Base)
	b.do("open the payment's page", chromedp.Navigate(in.Base+"/#/payments/"+id), chromedp.WaitVisible(chromedp.CSS("#refund-form")))
	if !eval[bool](b, `document.getElementById('refunds-empty') !== null`) {
		t.Error("a payment with no refunds does not say so")
	}

	// Amounts the form refuses before asking anything: more than is left,
	// more decimals than the currency has, not a number.
	for _, tc := range []struct{ in, want string }{
		{"20", "at most"},
		{"4.505", "decimals"},
		{"4.5.0", "not an amount"},
		{"0", "more than zero"},
	} {
		eval[bool](b, `(document.getElementById('refund-amount').value = `+jsString(tc.in)+`, true)`)
		b.do("refund "+tc.in, chromedp.Click(chromedp.CSS("#refund-start")), chromedp.WaitVisible(chromedp.CSS("#refund-error")))
		msg := eval[string](b, `document.getElementById('refund-error').textContent`)
		if !strings.HasPrefix(msg, "Amount:") || !strings.Contains(msg, tc.want) {
			t.Errorf("refund %q: error %q, want it to name the amount and say %q", tc.in, msg, tc.want)
		}
		if eval[bool](b, `document.getElementById('refund-confirm') !== null`) {
			t.Fatalf("refund %q: the form asks to confirm an amount it should refuse", tc.in)
		}
	}
	if n := len(refunds()); n != 0 {
		t.Fatalf("%d refunds after refused input, want 0", n)
	}

	// The first answer to the refund is lost on the way back (the request
	// reached paystate): Send again repeats it under the same key.
	eval[bool](b, `(() => {
		const real = window.fetch;
		window.refundKeys = [];
		let lose = true;
		window.fetch = async (url, opts) => {
			if (opts && opts.method === 'POST' && String(url).endsWith('/refund')) {
				window.refundKeys.push(opts.headers['Idempotency-Key']);
				const res = await real(url, opts);
				if (lose) { lose = false; await res.text(); throw new TypeError('connection reset'); }
				return res;
			}
			return real(url, opts);
		};
		document.getElementById('refund-amount').value = '4.50';
		document.getElementById('refund-amount').dispatchEvent(new Event('input'));
		return true;
	})()`)
	b.do("ask for 4.50", chromedp.SendKeys(chromedp.CSS("#refund-reason"), "one item returned"),
		chromedp.Click(chromedp.CSS("#refund-start")), chromedp.WaitVisible(chromedp.CSS("#refund-confirm")))
	question := eval[string](b, `document.getElementById('refund-question').textContent`)
	for _, want := range []string{"4.50", "15.00", "order-partial", "one item returned"} {
		if !strings.Contains(question, want) {
			t.Errorf("the confirmation %q lacks %q", question, want)
		}
	}
	if n := len(refunds()); n != 0 {
		t.Fatalf("%d refunds before the confirmation, want 0", n)
	}
	b.screenshot("partial-confirm")
	b.do("confirm; the answer is lost", chromedp.Click(chromedp.CSS("#refund-confirm")), chromedp.WaitVisible(chromedp.CSS("#refund-error")))
	b.poll("Send again is offered", `document.getElementById('refund-confirm').textContent === 'Send again'`)
	if eval[bool](b, `document.getElementById('refund-cancel') !== null`) {
		t.Error("a refund sent without an answer can be cancelled (its key would be lost)")
	}
	b.do("send again", chromedp.Click(chromedp.CSS("#refund-confirm")), chromedp.WaitVisible(chromedp.CSS("#refund-result")))
	keys := eval[[]string](b, `window.refundKeys`)
	if len(keys) != 2 || keys[0] == "" || keys[0] != keys[1] {
		t.Fatalf("idempotency keys sent %q, want the same key twice", keys)
	}
	list := refunds()
	if len(list) != 1 {
		t.Fatalf("%d refunds after a resend, want 1: %v", len(list), list)
	}
	re, _ := list[0].(map[string]any)
	if re["amount"] != float64(450) || re["reason"] != "one item returned" || re["status"] != "succeeded" {
		t.Fatalf("refund %v, want 450 succeeded for one item returned", re)
	}
	p := in.Do("GET", "/v1/payments/"+id, nil, nil)
	if got, want := p.Num("amount_refunded"), float64(450); got != want || p.Str("status") != "captured" {
		t.Fatalf("amount_refunded=%v status=%s, want %v captured: %s", got, p.Str("status"), want, p.Body)
	}
	reID, _ := re["id"].(string)
	row := fmt.Sprintf(`#refunds-table tr[data-refund-id=%q]`, reID)
	b.poll("the refund is listed", `document.querySelector(`+jsString(row)+`) !== null`)
	cells := eval[[]string](b, `Array.from(document.querySelectorAll(`+jsString(row+" td")+`)).map(td => td.textContent)`)
	if got := strings.Join(cells, "|"); !strings.Contains(got, "4.50") || !strings.Contains(got, "succeeded") || !strings.Contains(got, "one item returned") {
		t.Errorf("refund row %q lacks the amount, status or reason", got)
	}
	left := eval[string](b, `Array.from(document.querySelectorAll('#timeline dl.facts div')).filter(d => d.querySelector('dt').textContent === 'Left to refund').map(d => d.querySelector('dd').textContent).join()`)
	if !strings.Contains(left, "10.50") {
		t.Errorf("left to refund %q, want 10.50", left)
	}
	b.screenshot("partial-refunded")

	// The rest: 10.50, and the payment is refunded.
	b.do("refund the rest", chromedp.Click(chromedp.CSS("#refund-rest")), chromedp.WaitVisible(chromedp.CSS("#refund-confirm")))
	if q := eval[string](b, `document.getElementById('refund-question').textContent`); !strings.Contains(q, "10.50") {
		t.Errorf("the confirmation of the rest %q does not name 10.50", q)
	}
	b.do("confirm the rest", chromedp.Click(chromedp.CSS("#refund-confirm")), chromedp.WaitVisible(chromedp.CSS("#refund-result")))
	b.poll("the page shows the payment refunded", `document.querySelector('#payment-status .badge').textContent === 'refunded' && document.querySelectorAll('#refunds-table tbody tr').length === 2`)
	if eval[bool](b, `document.getElementById('refund-form') !== null`) {
		t.Error("a refunded payment still offers a refund")
	}
	if p := in.Do("GET", "/v1/payments/"+id, nil, nil); p.Num("amount_refunded") != 1500 || p.Str("status") != "refunded" {
		t.Fatalf("after the rest: %s", p.Body)
	}

	// Disputes of three report-mode payments: one past its evidence
	// deadline, one under review (evidence sent), one due in five days.
	now := time.Now().UTC().Truncate(time.Second)
	a := reportCaptured(t, in, "order-dispute-a", "rd-a")
	d := reportCaptured(t, in, "order-dispute-b", "rd-b")
	e := reportCaptured(t, in, "order-dispute-c", "rd-c")
	dueA, dueB, dueC := now.Add(5*24*time.Hour), now.Add(-26*time.Hour), now.Add(2*24*time.Hour)
	sendStandardDispute(t, in, "evt_dp_a_created", "payment.dispute.created", a, "dp_browser_a", "needs_response", 1500, dueA)
	sendStandardDispute(t, in, "evt_dp_b_created", "payment.dispute.created", d, "dp_browser_b", "needs_response", 1500, dueB)
	sendStandardDispute(t, in, "evt_dp_c_created", "payment.dispute.created", e, "dp_browser_c", "under_review", 1500, dueC)
	b.do("open the disputes", chromedp.Click(chromedp.CSS("#tab-disputes")), chromedp.WaitVisible(chromedp.CSS(`#disputes-table tr[data-dispute-id="dp_browser_a"]`)))
	order := eval[[]string](b, `Array.from(document.querySelectorAll('#disputes-table tbody tr')).map(tr => tr.dataset.disputeId + ':' + (tr.dataset.overdue || 'no'))`)
	if got, want := strings.Join(order, ","), "dp_browser_b:true,dp_browser_c:no,dp_browser_a:no"; got != want {
		t.Fatalf("disputes %s, want %s (soonest deadline first, the past one overdue)", got, want)
	}
	rowA := eval[string](b, `document.querySelector('#disputes-table tr[data-dispute-id="dp_browser_a"]').textContent`)
	for _, want := range []string{dueA.Format("2006-01-02 15:04:05Z"), "in 5 days", "needs_response", a, "15.00"} {
		if !strings.Contains(rowA, want) {
			t.Errorf("dispute row %q lacks %q", rowA, want)
		}
	}
	rowB := eval[string](b, `document.querySelector('#disputes-table tr[data-dispute-id="dp_browser_b"] td.deadline').textContent`)
	if !strings.Contains(rowB, dueB.Format("2006-01-02 15:04:05Z")) || !strings.Contains(rowB, "overdue by 26 hours") {
		t.Errorf("overdue deadline %q", rowB)
	}
	// The tab counts those that need a response.
	b.poll("the tab counts them", `document.getElementById('disputes-count').textContent === '2'`)
	b.screenshot("disputes")

	// Closed, a dispute leaves the open list.
	sendStandardDispute(t, in, "evt_dp_a_closed", "payment.dispute.closed", a, "dp_browser_a", "lost", 1500, dueA)
	b.do("refresh the disputes", chromedp.Click(chromedp.CSS("#disputes-refresh")))
	b.poll("the closed one is gone", `document.querySelector('#disputes-table tr[data-dispute-id="dp_browser_a"]') === null && document.querySelector('#disputes-table tr[data-dispute-id="dp_browser_b"]') !== null`)
	b.do("show the lost ones", chromedp.SetValue(chromedp.CSS("#dispute-status"), "lost"),
		chromedp.WaitVisible(chromedp.CSS(`#disputes-table tr[data-dispute-id="dp_browser_a"][data-status="lost"]`)))

	// A disputed payment cannot be refunded: the API says 409
	// charge_disputed with nothing left to refund, and the dashboard
	// shows the dispute on the payment and in the list, with no refund
	// form and no button. The lost one too.
	for _, c := range []struct{ id, dispute, badge string }{{a, "lost", "charged back"}, {d, "needs_response", "disputed"}} {
		if p := in.Do("GET", "/v1/payments/"+c.id, nil, nil); p.Str("dispute") != c.dispute || p.Num("amount_refundable") != 0 {
			t.Fatalf("payment with a %s dispute: %s, want its dispute and nothing refundable", c.dispute, p.Body)
		}
		r := in.Do("POST", "/v1/payments/"+c.id+"/refund", []byte(`{}`), map[string]string{"Idempotency-Key": "rd-disputed-" + c.dispute})
		if r.Status != 409 || !strings.Contains(string(r.Body), `"code":"`+pay.EChargeDisputed+`"`) {
			t.Fatalf("refund of a payment with a %s dispute: %d %s, want 409 %s", c.dispute, r.Status, r.Body, pay.EChargeDisputed)
		}
		b.do("open the disputed payment", chromedp.Navigate(in.Base+"/#/payments/"+c.id), chromedp.WaitVisible(chromedp.CSS("#refund-disputed")))
		if eval[bool](b, `document.getElementById('refund-form') !== null || document.getElementById('refund-rest') !== null || document.getElementById('refund-start') !== null`) {
			t.Errorf("the page of a payment with a %s dispute offers a refund", c.dispute)
		}
		if got := eval[string](b, `document.getElementById('payment-dispute').textContent`); got != c.badge {
			t.Errorf("the payment's dispute badge=%q, want %q", got, c.badge)
		}
		b.do("list the payments", chromedp.Navigate(in.Base+"/#payments"),
			chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#payments-table tr[data-payment-id=%q] [data-dispute=%q]`, c.id, c.dispute))))
	}
	b.screenshot("disputed-payment")

	// Reconciliation: before any run the panel says so.
	b.do("open reconciliation", chromedp.Click(chromedp.CSS("#tab-reconciliation")), chromedp.WaitVisible(chromedp.CSS("#reconciliation-empty")))
	if r := in.Do("GET", "/v1/reconciliation/runs", nil, nil); r.Status != 200 || !strings.Contains(string(r.Body), `"data":[]`) {
		t.Errorf("GET /v1/reconciliation/runs before any run: %d %s", r.Status, r.Body)
	}
	// A settlement report of the standard PSP: a charge that matches, one
	// settled for another amount, one paystate does not know.
	run, err := (&reconcile.Engine{Store: in.Main.Store}).Run(context.Background(), "standard", "import:generic:browser.csv", []pay.SettlementLine{
		{Line: 2, ID: "txn_browser_ok", Kind: pay.SettleCharge, ProviderRef: "psp_rd-a", Amount: 1500, Fee: 45, Currency: "EUR"},
		{Line: 3, ID: "txn_browser_short", Kind: pay.SettleCharge, ProviderRef: "psp_rd-b", Amount: 1400, Fee: 42, Currency: "EUR"},
		{Line: 4, ID: "txn_browser_unknown", Kind: pay.SettleCharge, ProviderRef: "psp_nobody_knows", Amount: 900, Fee: 27, Currency: "EUR"},
	})
	if err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	if run.Matched != 1 || run.Mismatched != 1 || run.MissingLocally != 1 {
		t.Fatalf("run %+v, want 1 matched, 1 mismatched, 1 missing locally", run)
	}
	b.do("refresh the runs", chromedp.Click(chromedp.CSS("#reconciliation-refresh")))
	runRow := fmt.Sprintf(`#reconciliation-table tr[data-run-id=%q]`, run.ID)
	b.do("see the run", chromedp.WaitVisible(chromedp.CSS(runRow)), chromedp.WaitVisible(chromedp.CSS("#reconciliation-lines")))
	counts := eval[[]string](b, `['lines', 'matched', 'mismatched', 'missing_locally', 'missing_at_psp'].map(k => document.querySelector(`+jsString(runRow)+` + ' td.' + k).textContent)`)
	if got, want := strings.Join(counts, ","), "3,1,1,1,0"; got != want {
		t.Errorf("run counts %s, want %s", got, want)
	}
	lines := eval[[]string](b, `Array.from(document.querySelectorAll('#reconciliation-lines tbody tr')).map(tr => tr.dataset.kind + ':' + tr.dataset.providerRef)`)
	if got, want := strings.Join(lines, ","), "amount_mismatch:psp_rd-b,missing_locally:psp_nobody_knows"; got != want {
		t.Errorf("unmatched lines %s, want %s", got, want)
	}
	if text := eval[string](b, `document.getElementById('reconciliation-lines').textContent`); !strings.Contains(text, "14.00") || !strings.Contains(text, "txn_browser_unknown") {
		t.Errorf("unmatched lines %q lack the amount settled or the line's id", text)
	}
	b.screenshot("reconciliation")
	// A later run where everything matched opens first; the earlier one's
	// lines are a click away.
	again, err := (&reconcile.Engine{Store: in.Main.Store}).Run(context.Background(), "standard", "import:generic:again.csv", []pay.SettlementLine{
		{Line: 2, ID: "txn_browser_ok", Kind: pay.SettleCharge, ProviderRef: "psp_rd-a", Amount: 1500, Fee: 45, Currency: "EUR"},
	})
	if err != nil || !again.OK() || again.Posted != 0 {
		t.Fatalf("second run %+v, %v: want all matched, nothing posted", again, err)
	}
	b.do("refresh the runs again", chromedp.Click(chromedp.CSS("#reconciliation-refresh")),
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#reconciliation-table tr[data-run-id=%q]`, again.ID))),
		chromedp.WaitVisible(chromedp.CSS("#reconciliation-lines-empty")))
	if got := eval[[]string](b, `Array.from(document.querySelectorAll('#reconciliation-table tbody tr')).map(tr => tr.dataset.runId)`); len(got) != 2 || got[0] != again.ID || got[1] != run.ID {
		t.Errorf("runs %v, want [%s %s] (newest first)", got, again.ID, run.ID)
	}
	b.do("open the first run's lines", chromedp.Click(chromedp.CSS(runRow+" button.show-run")), chromedp.WaitVisible(chromedp.CSS("#reconciliation-lines")))

	// A report imported from the page (POST /v1/reconciliation/runs with
	// the session's CSRF token): the line seen before with another fee is
	// changed_since_posted, the new fee line is posted, and the new run
	// opens.
	report := filepath.Join(t.TempDir(), "dashboard.csv")
	if err := os.WriteFile(report, []byte("id,provider_ref,type,amount,fee,currency\ntxn_browser_ok,psp_rd-a,charge,15.00,0.50,EUR\ntxn_browser_fee,,fee,0,1.00,EUR\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b.do("import a report from the page", chromedp.SetUploadFiles(chromedp.CSS("#reconciliation-file"), []string{report}),
		chromedp.SetValue(chromedp.CSS("#reconciliation-format"), "generic"), chromedp.SetValue(chromedp.CSS("#reconciliation-provider"), "standard"),
		chromedp.Click(chromedp.CSS("#reconciliation-import-submit")))
	b.poll("the import is done", `document.getElementById('reconciliation-import-status').dataset.runId !== undefined`)
	uploaded := eval[string](b, `document.getElementById('reconciliation-import-status').dataset.runId`)
	status := eval[string](b, `document.getElementById('reconciliation-import-status').textContent`)
	if !strings.Contains(status, "2 lines, 1 matched, 1 posted, 1 not matched") {
		t.Errorf("import status %q", status)
	}
	b.poll("the uploaded run opens", `document.querySelector('#reconciliation-lines tbody tr[data-kind="changed_since_posted"]') !== null && document.querySelector(`+jsString(fmt.Sprintf(`#reconciliation-table tr[data-run-id=%q].selected`, uploaded))+`) !== null`)

	// A payment waiting for its customer: its page, refunds part included,
	// shows no client secret or redirect URL, and offers no refund.
	wait := in.Create(`{"order_id":"order-rd-wait","amount":1500,"currency":"EUR","provider":"standard"}`, "rd-wait").Str("id")
	const secret, redirect = "pi_rd_secret_d0n7_5h0w", "https://psp.example/3ds/rd-d0n7-5h0w"
	if s := in.Do("POST", "/v1/payments/"+wait+"/sync", []byte(`{"status":"requires_action","client_secret":"`+secret+`","redirect_url":"`+redirect+`"}`), nil); s.Str("client_secret") != secret {
		t.Fatalf("the API view of a requires_action payment has no client secret: %s", s.Body)
	}
	b.do("open the waiting payment", chromedp.Navigate(in.Base+"/#/payments/"+wait), chromedp.WaitVisible(chromedp.CSS("#refunds-empty")))
	html := eval[string](b, `document.documentElement.outerHTML`)
	if strings.Contains(html, secret) || strings.Contains(html, redirect) {
		t.Error("the page of a requires_action payment shows its client secret or redirect URL")
	}
	if eval[bool](b, `document.getElementById('refund-form') !== null`) {
		t.Error("a payment that is not captured offers a refund")
	}
	b.assertCleanConsole()
}

// checkPSPLink checks that the dashboard links payment id's reference to
// want, its page in its PSP's own dashboard, in the list and on the
// payment's page (a new tab, without the opener or the referrer).
func checkPSPLink(t *testing.T, base, id, want string) {
	t.Helper()
	b := newBrowser(t)
	b.signIn(base)
	row := fmt.Sprintf(`#payments-table tr[data-payment-id=%q]`, id)
	b.do("see the payment", chromedp.WaitVisible(chromedp.CSS(row)))
	if got := eval[string](b, `document.querySelector(`+jsString(row+" a.psp-link")+`).href`); got != want {
		t.Fatalf("list link=%q, want %q", got, want)
	}
	b.do("open the payment", chromedp.Click(chromedp.CSS(row+" td")), chromedp.WaitVisible(chromedp.CSS("#timeline-table")))
	if got := eval[string](b, `document.querySelector('dl.facts a.psp-link').href`); got != want {
		t.Fatalf("page link=%q, want %q", got, want)
	}
	if got := eval[string](b, `document.querySelector('dl.facts a.psp-link').rel`); got != "noopener noreferrer" {
		t.Fatalf("rel=%q", got)
	}
	b.assertCleanConsole()
}
