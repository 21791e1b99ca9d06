//go:build linux

package daemon_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/paystate/paystate/config"
	"github.com/paystate/paystate/daemon"
	"github.com/paystate/paystate/internal/testkit"
	"github.com/paystate/paystate/internal/testkit/daemontest"
	"github.com/paystate/paystate/internal/verify"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
	"github.com/paystate/paystate/store/bolt"
)

// Disk faults. What paystate does when its database file cannot be written:
//
//   - At run time, a disk full (a write refused with ENOSPC) rolls the
//     transaction back and the caller gets EDISKFULL: HTTP 503 with code
//     "storage_full". Nothing is half-written, because bbolt writes the new
//     meta page last and a failed commit leaves the old one in force.
//     Reads go on. When space returns, writes succeed again without a
//     restart, and a retry with the same Idempotency-Key finishes the
//     request (or resumes it, if its payment was stored before the
//     failure). Any other failed commit (EIO, a failed fsync) stops the
//     process: bolt.Options.OnFatal, tested in package store/bolt.
//   - At start, a database on a read-only file system (or a file paystate
//     may not write) is an error: paystate refuses to start rather than run
//     without being able to take a webhook. The tools that only read
//     (verify, backup) open it with bolt.Options{ReadOnly: true}.
//
// The tests mount a small tmpfs, so they need root (CI runs as root); they
// skip elsewhere.

// verifyClean checks the database the daemon has open: bbolt's own
// consistency check and paystate verify (timelines against records,
// outbox, ledger).
func verifyClean(t *testing.T, in *daemontest.Instance) verify.Report {
	t.Helper()
	if err := in.Main.Backend.Check(); err != nil {
		t.Fatalf("store check: %v", err)
	}
	rep, err := verify.Run(context.Background(), in.Main.Store)
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	for _, m := range rep.Mismatches {
		t.Errorf("verify: %s", m)
	}
	return rep
}

// TestE2E_DiskFull: a paystate whose database lives on a small file system
// that fills up answers writes with 503 storage_full, keeps answering
// reads, half-writes nothing, and takes writes again once space is freed,
// without a restart.
func TestE2E_DiskFull(t *testing.T) {
	t.Parallel()
	dir := testkit.MountTmpfs(t, "4m")
	in := daemontest.BootMain(t, func(c *config.Config) {
		c.Payment.Provider = "standard"
		c.Storage.Path = filepath.Join(dir, "paystate.db")
	}, nil)
	secret := in.Main.Config.Providers.Standard.WebhookSecret
	body := func(i int) string {
		return fmt.Sprintf(`{"order_id":"disk-%d","amount":%d,"currency":"EUR","customer":{"id":"cus_%d","email":"c%d@example.com"}}`, i, 1000+i, i, i)
	}

	// Room to spare: payments are created.
	var first string
	for i := range 5 {
		r := in.Create(body(i), fmt.Sprintf("disk-%d", i))
		if r.Status != 201 {
			t.Fatalf("create with room: %d %s", r.Status, r.Body)
		}
		if i == 0 {
			first = r.Str("id") // 1000 EUR, what eventBody's webhook says
		}
	}

	// Fill the file system, then write until the database needs a page it
	// cannot have.
	filler := filepath.Join(dir, "filler")
	testkit.FillUp(t, filler)
	var failed []int
	created := 5
	for i := 5; i < 2000 && len(failed) < 3; i++ {
		r := in.Create(body(i), fmt.Sprintf("disk-%d", i))
		switch {
		case r.Status == 201:
			created++ // it fit in pages the database had freed before
		case r.Status == 503:
			if got, want := r.ErrCode(), "storage_full"; got != want {
				t.Fatalf("disk full: code=%q, want %q: %s", got, want, r.Body)
			}
			failed = append(failed, i)
		default:
			t.Fatalf("disk full: create %d: status=%d, want 201 or 503: %s", i, r.Status, r.Body)
		}
	}
	if len(failed) == 0 {
		t.Fatal("the file system never filled up: no 503")
	}
	t.Logf("%d payments created; %d creates answered 503", created, len(failed))

	// Other writes fail the same way and change nothing; reads go on. (A
	// write that still fits in a page the database freed earlier, which
	// background work can do, succeeds: either answer is a whole one.)
	before := in.Do("GET", "/v1/payments/"+first, nil, nil)
	sync := in.Do("POST", "/v1/payments/"+first+"/sync", []byte(`{"status":"processing","client_secret":"cs_1"}`), nil)
	switch {
	case sync.Status == 503 && sync.ErrCode() == "storage_full":
		if g := in.Do("GET", "/v1/payments/"+first, nil, nil); g.Num("version") != before.Num("version") {
			t.Fatalf("a refused sync changed the payment: %s -> %s", before.Body, g.Body)
		}
	case sync.Status == 200:
		t.Log("the sync still fit in a free page of the database")
	default:
		t.Fatalf("sync on a full disk: %d %s, want 503 storage_full or 200", sync.Status, sync.Body)
	}
	ev := eventBody("evt_disk", "payment.captured", first, "psp_disk")
	// A webhook is small and may still fit in a page the database freed
	// earlier: then it is stored (200) and applied once the worker can
	// write. Otherwise it is refused with 503 and the PSP redelivers it.
	hook := in.Do("POST", "/webhooks/standard", ev, testkit.SignStandard(t, secret, "evt_disk", time.Now(), ev))
	switch {
	case hook.Status == 503 && hook.ErrCode() == "storage_full":
	case hook.Status == 200:
		t.Log("the webhook still fit in a free page of the database")
	default:
		t.Fatalf("webhook on a full disk: %d %s, want 503 storage_full or 200", hook.Status, hook.Body)
	}
	if g := in.Do("GET", "/v1/payments/"+first, nil, nil); g.Status != 200 || g.Str("id") != first {
		t.Fatalf("read on a full disk: %d %s", g.Status, g.Body)
	}

	// Space returns: no restart, the same requests succeed.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	for _, i := range failed {
		r := in.Create(body(i), fmt.Sprintf("disk-%d", i))
		if got, want := r.Status, 201; got != want {
			t.Fatalf("retry of create %d after space returned: status=%d, want %d: %s", i, got, want, r.Body)
		}
	}
	if r := in.Do("POST", "/webhooks/standard", ev, testkit.SignStandard(t, secret, "evt_disk", time.Now(), ev)); r.Status != 200 {
		t.Fatalf("webhook redelivered after space returned: %d %s", r.Status, r.Body)
	}
	testkit.WaitFor(t, 10*time.Second, func() error {
		if g := in.Do("GET", "/v1/payments/"+first, nil, nil); g.Str("status") != "captured" {
			return fmt.Errorf("status=%s, want captured", g.Str("status"))
		}
		return nil
	})

	// Nothing half-written: one payment per key, every timeline complete.
	list := in.Do("GET", "/v1/payments?limit=500", nil, nil)
	data, _ := list.JSON["data"].([]any)
	if got, want := len(data), created+len(failed); got != want {
		t.Errorf("%d payments stored, want %d (one per idempotency key)", got, want)
	}
	rep := verifyClean(t, in)
	t.Logf("verify: %d payments, %d steps, %d transitions, clean", rep.Payments, rep.Steps, rep.Transitions)
}

// TestE2E_ReadOnlyFileSystem: paystate refuses to start on a database it
// cannot write, says why, and starts normally once the file system is
// writable again; a read-only open (verify) works meanwhile.
func TestE2E_ReadOnlyFileSystem(t *testing.T) {
	t.Parallel()
	dir := testkit.MountTmpfs(t, "8m")
	cfg := config.DefaultConfig()
	cfg.Server.Listen = "127.0.0.1:0"
	cfg.Storage.Path = filepath.Join(dir, "paystate.db")
	cfg.Auth.APIKeys = []string{daemontest.APIKey}
	cfg.Payment.Provider = "standard"
	daemontest.TestProviders(&cfg)
	logger := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	ctx := context.Background()

	// A database with one payment, closed.
	m := daemon.New(cfg, logger)
	if err := m.Open(); err != nil {
		t.Fatal(err)
	}
	in := &daemontest.Instance{T: t, Main: m, Base: m.Server.URL()}
	r := in.Create(`{"order_id":"ro-1","amount":1000,"currency":"EUR"}`, "ro-1")
	if r.Status != 201 {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	id := r.Str("id")
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}

	// Read-only: no start, an error that names the cause.
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
		t.Fatalf("remount read-only: %v", err)
	}
	ro := daemon.New(cfg, logger)
	err := ro.Open()
	if err == nil {
		_ = ro.Close(ctx)
		t.Fatal("Open succeeded on a read-only file system")
	}
	if !errors.Is(err, syscall.EROFS) {
		t.Fatalf("Open: %v, want an error wrapping EROFS", err)
	}
	t.Logf("start on a read-only file system: %v", err)

	// The tools' read-only open still works.
	db, err := bolt.Open(cfg.Storage.Path, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only open: %v", err)
	}
	rep, err := verify.Run(ctx, db)
	if err != nil || !rep.OK() || rep.Payments != 1 {
		t.Errorf("verify on the read-only database: %+v, %v", rep, err)
	}
	if got, want := pay.ErrorCode(db.Update(ctx, func(store.Tx) error { return nil })), pay.EUNAVAILABLE; got != want {
		t.Errorf("Update on a read-only store: code=%q, want %q", got, want)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// Writable again: paystate starts with its data.
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_REMOUNT, ""); err != nil {
		t.Fatalf("remount read-write: %v", err)
	}
	in = daemontest.BootMain(t, func(c *config.Config) { *c = cfg }, nil)
	if g := in.Do("GET", "/v1/payments/"+id, nil, nil); g.Status != 200 {
		t.Fatalf("payment after restart: %d %s", g.Status, g.Body)
	}
	if r := in.Create(`{"order_id":"ro-2","amount":1000,"currency":"EUR"}`, "ro-2"); r.Status != 201 {
		t.Fatalf("create after restart: %d %s", r.Status, r.Body)
	}
}
