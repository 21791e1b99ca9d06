package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paystate/paystate/config"
	"github.com/paystate/paystate/internal/testkit/daemontest"
)

// TestReconcileImport_RunningServer imports a report into the bbolt file
// of a running paystate: the command finds the file locked and sends the
// report to the server of -config (its server.listen) with -api-key,
// which imports it; with -url it goes there directly; a wrong key is
// told in the command's terms.
func TestReconcileImport_RunningServer(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "live.db")
	in := daemontest.Boot(t, func(c *config.Config) { c.Storage.Path = dbPath })
	report := filepath.Join(dir, "report.csv")
	if err := os.WriteFile(report, []byte("id,provider_ref,type,amount,fee,currency\ntxn_fee_1,,fee,0,2.50,EUR\ntxn_ghost,pi_ghost,charge,70.00,1.30,EUR\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "paystate.toml")
	// The command reads the server's address and the database from the
	// file; the key comes from -api-key (a config names no key).
	toml := fmt.Sprintf("[server]\nlisten = %q\n[storage]\npath = %q\n[providers.mock]\n", strings.TrimPrefix(in.Base, "http://"), filepath.ToSlash(dbPath))
	if err := os.WriteFile(cfgPath, []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, err := runCmdSplit("reconcile", "import", "-format", "generic", "-provider", "mock", "-config", cfgPath, "-api-key", daemontest.APIKey, report)
	if ExitCode(err) != ExitVerify {
		t.Fatalf("reconcile import of a locked file: %v (exit %d), want exit 3 (one line missing locally)\n%s%s", err, ExitCode(err), stdout, stderr)
	}
	if !strings.Contains(stderr, "in use by a running paystate; sending the report to") ||
		!strings.Contains(stdout, "source upload:generic:report.csv") || !strings.Contains(stdout, "2      1        1       0           1                0") {
		t.Fatalf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
	}

	clean := filepath.Join(dir, "fees.csv")
	if err := os.WriteFile(clean, []byte("id,provider_ref,type,amount,fee,currency\ntxn_fee_1,,fee,0,2.50,EUR\ntxn_fee_2,,fee,0,1.00,EUR\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, err = runCmdSplit("reconcile", "import", "-format", "generic", "-provider", "mock", "-url", in.Base, "-api-key", daemontest.APIKey, clean)
	if err != nil || !strings.Contains(stdout, "2      2        1       0           0                0") {
		t.Fatalf("reconcile import -url: %v\n%s%s", err, stdout, stderr)
	}
	_, _, err = runCmdSplit("reconcile", "import", "-format", "generic", "-provider", "mock", "-url", in.Base, "-api-key", "wrong-key-0123456789", clean)
	if err == nil || !strings.Contains(err.Error(), "pass the key with -api-key KEY or in the environment as PAYSTATE_API_KEY") {
		t.Fatalf("reconcile import with a wrong key: %v, want unauthorized", err)
	}
}
