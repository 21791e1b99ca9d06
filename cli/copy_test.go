package cli

import (
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/paystate/paystate/config"
	"github.com/paystate/paystate/internal/simulate"
	"github.com/paystate/paystate/internal/testkit"
	"github.com/paystate/paystate/internal/testkit/daemontest"
	"github.com/paystate/paystate/internal/testkit/filltest"
	"github.com/paystate/paystate/internal/testkit/pgtest"
	"github.com/paystate/paystate/store/bolt"
	"github.com/paystate/paystate/store/postgres"
)

const copyMerchantSecret = "whsec_Y29weS1tZXJjaGFudC1zZWNyZXQtY29weS1tZXJjaGFudA=="

// runCmdSplit runs a command with stdout and stderr apart.
func runCmdSplit(args ...string) (stdout, stderr string, err error) {
	var out, errb bytes.Buffer
	err = Run(context.Background(), args, &out, &errb)
	return out.String(), errb.String(), err
}

// copySource runs a paystate on a new bbolt file and stops it: mock
// payments of every outcome for two customers, delivered to a merchant
// endpoint with loyalty points, a refund, a report-mode payment captured
// by a webhook sent twice and an event for a payment no one knows. It
// returns the file.
func copySource(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "paystate.db")
	m, err := simulate.NewMerchant(copyMerchantSecret)
	if err != nil {
		t.Fatal(err)
	}
	ms := httptest.NewServer(m)
	t.Cleanup(ms.Close)
	in := daemontest.Boot(t, func(c *config.Config) {
		c.Storage.Path = path
		c.Webhooks = []config.Webhook{{URL: ms.URL + "/hooks", Secret: copyMerchantSecret, Events: []string{"payment.captured", "payment.failed", "payment.refunded"}}}
	})
	var captured string
	for i := range 12 {
		body := fmt.Sprintf(`{"order_id":"c-%d","amount":%d,"currency":"EUR","customer":{"id":"cus_%d","email":"c%d@example.com"}}`, i, 1000+i%4, i%2, i%2)
		r := in.Create(body, fmt.Sprint("copy-", i))
		if r.Status != 201 {
			t.Fatalf("create: %d %s", r.Status, r.Body)
		}
		if r.Str("status") == "captured" {
			captured = r.Str("id")
		}
	}
	if r := in.Do("POST", "/v1/payments/"+captured+"/refund", nil, map[string]string{"Idempotency-Key": "copy-refund"}); r.Status/100 != 2 {
		t.Fatalf("refund: %d %s", r.Status, r.Body)
	}
	std := in.Create(`{"order_id":"c-std","amount":2000,"currency":"EUR","provider":"standard"}`, "copy-std")
	secret := in.Main.Config.Providers.Standard.WebhookSecret
	for _, ev := range []struct{ id, payment string }{{"evt_copy_1", std.Str("id")}, {"evt_copy_1", std.Str("id")}, {"evt_copy_orphan", "pay_01KB00000000000000000000ZZ"}} {
		body := []byte(fmt.Sprintf(`{"id":%q,"type":"payment.captured","created":%d,"data":{"payment_id":%q,"provider_ref":"psp_%s","amount":2000,"currency":"EUR"}}`,
			ev.id, time.Now().Unix(), ev.payment, ev.id))
		if r := in.Do("POST", "/webhooks/standard", body, testkit.SignStandard(t, secret, ev.id, time.Now(), body)); r.Status/100 != 2 {
			t.Fatalf("webhook %s: %d %s", ev.id, r.Status, r.Body)
		}
	}
	in.Main.Mock.Wait()
	testkit.WaitFor(t, 20*time.Second, func() error {
		r := in.Do("GET", "/v1/deliveries?state=pending", nil, nil)
		if d, _ := r.JSON["data"].([]any); r.Status != 200 || len(d) > 0 {
			return fmt.Errorf("deliveries pending: %d %s", r.Status, r.Body)
		}
		if r := in.Do("GET", "/v1/customers/cus_0", nil, nil); r.Num("points") == 0 {
			return fmt.Errorf("no loyalty points yet: %s", r.Body)
		}
		return nil
	})
	in.Close()
	return path
}

// pgConfig writes a config file of the PostgreSQL database dsn.
func pgConfig(t *testing.T, dsn string) string {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "pg.toml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("[storage]\nbackend = \"postgres\"\ndsn = %q\n[providers.mock]\n", dsn)), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// verifyLine is the summary line of verify's output.
var verifyLine = regexp.MustCompile(`(?m)^\d+ payments, \d+ timeline steps, \d+ transitions, \d+ mismatches$`)

// TestCopy: `paystate copy` moves a bbolt database that a paystate wrote
// into an empty PostgreSQL schema: verify on both says the same (and
// clean), every record reads back the same through store.Tx on both, and a
// paystate started on the copy serves it. A second copy into the filled
// schema is refused with exit 2, naming why, and so is a config whose
// backend is bbolt.
func TestCopy(t *testing.T) {
	t.Parallel()
	src := copySource(t)
	dsn := pgtest.Schema(t)
	cfg := pgConfig(t, dsn)

	out, errOut, err := runCmdSplit("copy", "-from-db", src, "-config", cfg, "-batch", "50")
	if err != nil {
		t.Fatalf("copy: %v\n%s%s", err, out, errOut)
	}
	if !strings.Contains(out, "copied ") || !strings.Contains(out, "paystate verify -config "+cfg) || !strings.Contains(errOut, "copy") {
		t.Fatalf("copy printed:\nstdout: %s\nstderr: %s", out, errOut)
	}
	t.Logf("copy:\n%s", out)

	// verify agrees.
	bv, err := runCmd("verify", "-db", src)
	if err != nil {
		t.Fatalf("verify -db: %v\n%s", err, bv)
	}
	pv, err := runCmd("verify", "-config", cfg)
	if err != nil {
		t.Fatalf("verify -config: %v\n%s", err, pv)
	}
	if b, p := verifyLine.FindString(bv), verifyLine.FindString(pv); b == "" || b != p || !strings.HasSuffix(b, " 0 mismatches") {
		t.Fatalf("verify of the file says %q, of the copy %q: want the same, clean", b, p)
	}

	// Record by record.
	ctx := context.Background()
	bolt, err := bolt.Open(src, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer bolt.Close()
	var r filltest.Records
	if err := bolt.Export(ctx, &r); err != nil {
		t.Fatal(err)
	}
	pg, err := postgres.Open(ctx, dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	if err := filltest.Compare(ctx, bolt, pg, &r); err != nil {
		t.Fatal(err)
	}
	for what, n := range map[string]int{"payments": len(r.Payments), "deliveries": len(r.Deliveries), "ledger lines": len(r.Ledger),
		"processed ids": len(r.ProcessedIDs), "idempotency keys": len(r.IdemKeys), "customers": len(r.Customers),
		"effects": len(r.Effects), "endpoints": len(r.Endpoints), "charges": len(r.PSPCharges)} {
		if n == 0 {
			t.Errorf("the source holds no %s: the test shows nothing about them", what)
		}
	}
	if !strings.Contains(out, fmt.Sprintf("copied %d records", r.Len())) {
		t.Errorf("copy says %q, the export has %d records", out, r.Len())
	}

	// Refused: a second copy, and a bbolt config.
	_, errOut, err = runCmdSplit("copy", "-from-db", src, "-config", cfg)
	if ExitCode(err) != ExitUsage || !strings.Contains(err.Error(), "not empty") || !strings.Contains(err.Error(), "table payments") {
		t.Fatalf("second copy: exit %d, %v\n%s", ExitCode(err), err, errOut)
	}
	boltCfg := filepath.Join(t.TempDir(), "bolt.toml")
	if err := os.WriteFile(boltCfg, []byte("[storage]\npath = \"x.db\"\n[providers.mock]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runCmdSplit("copy", "-from-db", src, "-config", boltCfg); ExitCode(err) != ExitUsage || !strings.Contains(err.Error(), `storage.backend of `+boltCfg+` is "bolt"`) {
		t.Fatalf("copy to a bbolt config: exit %d, %v", ExitCode(err), err)
	}
	if _, _, err := runCmdSplit("copy", "-config", cfg); ExitCode(err) != ExitUsage || !strings.Contains(err.Error(), "-from-db") {
		t.Fatalf("copy without -from-db: exit %d, %v", ExitCode(err), err)
	}

	// A paystate on the copy serves what the file held.
	in := daemontest.Boot(t, func(c *config.Config) { c.Storage.Backend, c.Storage.DSN = "postgres", dsn })
	for _, p := range r.Payments[:3] {
		g := in.Do("GET", "/v1/payments/"+p.ID, nil, nil)
		if g.Status != 200 || g.Str("status") != string(p.Status) || g.Num("version") != float64(p.Version) {
			t.Fatalf("payment %s on the copy: %d %s, want %s version %d", p.ID, g.Status, g.Body, p.Status, p.Version)
		}
	}
}
