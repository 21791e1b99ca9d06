package cli_test

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paystate/paystate/cli"
	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/internal/testkit"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/psp/standard"
	"github.com/paystate/paystate/psp/stdwebhook"
	"github.com/paystate/paystate/psp/stripe/stripetest"
	"github.com/paystate/paystate/store"
	"github.com/paystate/paystate/store/bolt"
)

const reconcileSecret = "whsec_cGF5c3RhdGUtZGV2ZWxvcG1lbnQtc2VjcmV0LTAwMDA="

// reconcileDB writes a database with the payments that
// testdata/reconcile/generic.csv settles, through finalize and signed
// webhooks of the standard provider, all captured long before now:
// pi_one (100.00, refund re_one of 40.00), pi_two (200.00, dispute
// dp_one of 50.00), pi_three (30.00, in no report), pi_five (50.00,
// settled as 40.00).
func reconcileDB(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "paystate.db")
	at := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	now := func() time.Time { at = at.Add(time.Second); return at }
	db, err := bolt.Open(path, &bolt.Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	std, err := standard.New(standard.Config{WebhookSecret: reconcileSecret})
	if err != nil {
		t.Fatal(err)
	}
	providers := map[string]pay.Provider{"standard": std}
	fin := finalize.New(db)
	svc := &finalize.Payments{Store: db, Finalizer: fin, Providers: providers, DefaultProvider: "standard"}
	inbox := &finalize.Inbox{Store: db, Finalizer: fin, Providers: providers, Now: func() time.Time { return at }}
	ids := map[string]string{}
	for _, c := range []struct {
		name   string
		amount int64
	}{{"one", 10000}, {"two", 20000}, {"three", 3000}, {"five", 5000}} {
		p, err := svc.Create(ctx, finalize.CreateRequest{OrderID: "o-" + c.name, Amount: c.amount, Currency: "EUR"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Report(ctx, p.ID, finalize.ReportRequest{Status: pay.Captured, ProviderRef: "pi_" + c.name}); err != nil {
			t.Fatal(err)
		}
		ids[c.name] = p.ID
	}
	r, err := svc.RefundOnce(ctx, ids["one"], finalize.RefundRequest{Amount: 4000}, finalize.IdemKey{Key: "refund:one", Fingerprint: "one", Status: http.StatusCreated})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range []stdwebhook.Event{
		{ID: "evt_re_one", Type: stdwebhook.TypeRefundSucceeded, PaymentID: ids["one"], Refund: &stdwebhook.Refund{ID: r.Refund.ID, ProviderRef: "re_one", Amount: 4000}},
		{ID: "evt_dp_one", Type: stdwebhook.TypeDisputeCreated, PaymentID: ids["two"], Dispute: &stdwebhook.Dispute{ID: "dp_one", Amount: 5000, Status: pay.DisputeNeedsResponse}},
	} {
		ev.Created = at
		body, err := stdwebhook.EncodeEvent(ev)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := inbox.Accept(ctx, "standard", body, testkit.StandardHeader(t, reconcileSecret, ev.ID, at, body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// reconcileState reads what an import may change: the journal's length,
// the runs and the review queue.
func reconcileState(t *testing.T, path string) (journal, runs, review int) {
	t.Helper()
	db, err := bolt.Open(path, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.View(context.Background(), func(tx store.Tx) error {
		ls, err := tx.LedgerEntries(0, 1<<20)
		if err != nil {
			return err
		}
		rs, err := tx.ListReconRuns("", pay.MaxListLimit)
		if err != nil {
			return err
		}
		items, err := tx.ListReview()
		journal, runs, review = len(ls), len(rs), len(items)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return journal, runs, review
}

func TestRun_ReconcileImport(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := reconcileDB(t)
	file := filepath.Join("..", "testdata", "reconcile", "generic.csv")
	journal0, _, _ := reconcileState(t, path)
	run := func(args ...string) (string, string, error) {
		var stdout, stderr bytes.Buffer
		err := cli.Run(ctx, append([]string{"reconcile"}, args...), &stdout, &stderr)
		return stdout.String(), stderr.String(), err
	}

	out, _, err := run("import", "-format", "generic", "-provider", "standard", "-db", path, file)
	t.Logf("paystate reconcile import -format generic -provider standard -db paystate.db %s\n%s", file, out)
	if got, want := cli.ExitCode(err), cli.ExitVerify; got != want {
		t.Fatalf("exit code %d (%v), want %d: lines did not match", got, err, want)
	}
	// Every payment was captured long before now: pi_three is missing at
	// the PSP (pi_five was in the report, with another amount).
	for _, want := range []string{
		"lines  matched  posted  mismatched  missing_locally  missing_at_psp\n8      6        6       1           1                1\n",
		"amount_mismatch  8", "txn_mismatch", "40.00 EUR", "50.00 EUR",
		"missing_locally  7", "txn_unknown", "pi_ghost", "70.00 EUR",
		"missing_at_psp   -", "pi_three", "30.00 EUR",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	journal1, runs1, review1 := reconcileState(t, path)
	if journal1-journal0 != 18 || runs1 != 1 || review1 != 1 {
		t.Fatalf("after the import: %d new journal lines, %d runs, %d review items; want 18, 1, 1", journal1-journal0, runs1, review1)
	}

	// Again: nothing new posted.
	out, _, err = run("import", "-format", "generic", "-provider", "standard", "-db", path, file)
	if cli.ExitCode(err) != cli.ExitVerify || !strings.Contains(out, "8      6        0       1") {
		t.Fatalf("second import: %v\n%s", err, out)
	}
	if journal2, runs2, review2 := reconcileState(t, path); journal2 != journal1 || runs2 != 2 || review2 != 1 {
		t.Fatalf("after the second import: journal %d (want %d), %d runs (want 2), %d review items (want 1)", journal2, journal1, runs2, review2)
	}

	// A malformed file: refused with its line, nothing written.
	_, _, err = run("import", "-format", "generic", "-provider", "standard", "-db", path, filepath.Join("..", "testdata", "reconcile", "malformed.csv"))
	if err == nil || !strings.Contains(err.Error(), "line 3: amount") || cli.ExitCode(err) != cli.ExitFailure {
		t.Fatalf("malformed file: %v (exit %d), want an error naming line 3", err, cli.ExitCode(err))
	}
	if journal3, runs3, _ := reconcileState(t, path); journal3 != journal1 || runs3 != 2 {
		t.Fatalf("the malformed file wrote: journal %d (want %d), %d runs (want 2)", journal3, journal1, runs3)
	}
}

func TestRun_ReconcileMatched(t *testing.T) {
	t.Parallel()
	path := reconcileDB(t)
	csv := filepath.Join(t.TempDir(), "ok.csv")
	data := "id,provider_ref,type,amount,fee,currency\n" +
		"t1,pi_one,charge,100.00,1.75,EUR\nt2,pi_two,charge,200.00,3.20,EUR\nt3,pi_three,charge,30.00,0.50,EUR\nt5,pi_five,charge,50.00,0.90,EUR\n"
	if err := os.WriteFile(csv, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	err := cli.Run(context.Background(), []string{"reconcile", "import", "-format", "generic", "-provider", "standard", "-db", path, csv}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("everything settled: %v\n%s", err, stdout.String())
	}
	if !strings.Contains(stdout.String(), "4      4        4       0           0                0") {
		t.Fatalf("output:\n%s", stdout.String())
	}
}

func TestRun_ReconcileUsage(t *testing.T) {
	t.Parallel()
	path := reconcileDB(t)
	file := filepath.Join("..", "testdata", "reconcile", "generic.csv")
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"NoSubcommand", nil, "import or stripe is required"},
		{"Unknown", []string{"export"}, `unknown subcommand "export"`},
		{"NoFormat", []string{"import", "-db", path, file}, `-format ""`},
		{"NoProvider", []string{"import", "-format", "generic", "-db", path, file}, "-provider is required"},
		{"NoFile", []string{"import", "-format", "generic", "-provider", "standard", "-db", path}, "one FILE is required"},
		{"NoSince", []string{"stripe", "-db", path}, "-since is required"},
		{"BadSince", []string{"stripe", "-since", "yesterday", "-db", path}, `-since "yesterday"`},
		{"NoStripeKey", []string{"stripe", "-since", "2025-03-01", "-db", path}, "providers.stripe.secret_key is required"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := cli.Run(context.Background(), append([]string{"reconcile"}, c.args...), &stdout, &stderr)
			if cli.ExitCode(err) != cli.ExitUsage || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("reconcile %v: %v (exit %d), want a usage error with %q", c.args, err, cli.ExitCode(err), c.want)
			}
		})
	}
}

// TestRun_ReconcileStripe runs `reconcile stripe -since` against
// stripe-mock: its balance transaction fixture settles nothing paystate
// knows, so the run lists it missing_locally and exits 3.
func TestRun_ReconcileStripe(t *testing.T) {
	t.Parallel()
	path := reconcileDB(t)
	cfg := filepath.Join(t.TempDir(), "paystate.toml")
	toml := "[storage]\npath = \"" + filepath.ToSlash(path) + "\"\n\n[providers.stripe]\nsecret_key = \"sk_test_123\"\nwebhook_secret = \"whsec_test\"\napi_base = \"" +
		stripetest.MockURL(t) + "\"\n"
	if err := os.WriteFile(cfg, []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	err := cli.Run(context.Background(), []string{"reconcile", "stripe", "-since", "2025-03-01", "-config", cfg}, &stdout, &stderr)
	if cli.ExitCode(err) != cli.ExitVerify {
		t.Fatalf("reconcile stripe: %v (exit %d), want exit 3\n%s%s", err, cli.ExitCode(err), stdout.String(), stderr.String())
	}
	out := stdout.String()
	t.Logf("paystate reconcile stripe -since 2025-03-01\n%s", out)
	if !strings.Contains(out, "source api:stripe:since 2025-03-01T00:00:00Z") || !strings.Contains(out, "missing_locally  -") {
		t.Fatalf("output:\n%s", out)
	}
	if strings.Contains(out+stderr.String(), "sk_test_123") {
		t.Fatal("the secret key was printed")
	}
	if _, runs, _ := reconcileState(t, path); runs != 1 {
		t.Fatalf("%d runs stored, want 1", runs)
	}
}

// TestRun_ReconcileCleanErrors imports files whose values hold a NUL, a
// newline (in a quoted field) and an escape sequence: the command's error
// names the line and column in plain words, never paystate's internal
// error form, and prints no byte of the file that is not printable text.
func TestRun_ReconcileCleanErrors(t *testing.T) {
	t.Parallel()
	path := reconcileDB(t)
	for _, c := range []struct{ name, row, want string }{
		{"NUL", "txn_\x00x,pi_one,charge,100.00,1.75,EUR\n", "line 2: id: contains a control"},
		{"Newline", "\"txn_1\n\x1b[31mred\",pi_one,charge,100.00,1.75,EUR\n", "line 2: id: contains a control"},
		{"RefNewline", "txn_1,\"pi_\none\",charge,100.00,1.75,EUR\n", "line 2: provider_ref: contains a control"},
	} {
		t.Run(c.name, func(t *testing.T) {
			csv := filepath.Join(t.TempDir(), "bad.csv")
			if err := os.WriteFile(csv, []byte("id,provider_ref,type,amount,fee,currency\n"+c.row), 0o600); err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			err := cli.Run(context.Background(), []string{"reconcile", "import", "-format", "generic", "-provider", "standard", "-db", path, csv}, &stdout, &stderr)
			if err == nil {
				t.Fatal("the file was imported")
			}
			msg := err.Error()
			if !strings.Contains(msg, c.want) || strings.Contains(msg, "paystate error") || strings.Contains(msg, "code=") ||
				strings.ContainsAny(msg, "\x00\n\x1b") {
				t.Fatalf("error %q, want a clean message with %q", msg, c.want)
			}
		})
	}
}

// TestRun_ReconcileImportDefaultProvider: without -provider, a provider's
// own report format names the provider the run is recorded for.
func TestRun_ReconcileImportDefaultProvider(t *testing.T) {
	t.Parallel()
	paypal := filepath.Join(t.TempDir(), "paypal.csv")
	header := `"CH","Transaction ID","Invoice ID","PayPal Reference ID","PayPal Reference ID Type","Transaction Event Code","Transaction Initiation Date","Transaction Completion Date","Transaction  Debit or Credit","Gross Transaction Amount","Gross Transaction Currency","Fee Debit or Credit","Fee Amount","Fee Currency","Custom Field","Consumer ID"` + "\n"
	if err := os.WriteFile(paypal, []byte(header), 0o600); err != nil {
		t.Fatal(err)
	}
	for format, file := range map[string]string{
		"stripe": filepath.Join("..", "testdata", "reconcile", "stripe.csv"),
		"mollie": filepath.Join("..", "testdata", "reconcile", "mollie.csv"),
		"paypal": paypal,
	} {
		t.Run(format, func(t *testing.T) {
			t.Parallel()
			path := reconcileDB(t)
			var stdout, stderr bytes.Buffer
			err := cli.Run(context.Background(), []string{"reconcile", "import", "-format", format, "-db", path, file}, &stdout, &stderr)
			if code := cli.ExitCode(err); err != nil && code != cli.ExitVerify {
				t.Fatalf("reconcile import -format %s: %v (exit %d)\n%s", format, err, code, stderr.String())
			}
			db, err := bolt.Open(path, &bolt.Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			err = db.View(context.Background(), func(tx store.Tx) error {
				runs, err := tx.ListReconRuns("", pay.MaxListLimit)
				if err == nil && (len(runs) != 1 || runs[0].Provider != format) {
					t.Errorf("runs %+v, want one of provider %s", runs, format)
				}
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}
