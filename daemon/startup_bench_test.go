package daemon_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/paystate/paystate/config"
	"github.com/paystate/paystate/daemon"
	"github.com/paystate/paystate/pay"
	"github.com/paystate/paystate/store"
	"github.com/paystate/paystate/store/bolt"
)

// startupFiles are the databases BenchmarkStartup opens, built once per
// test binary run under the benchmark's first temporary directory.
var startupFiles sync.Map // payments → path

// startupFile returns a cleanly closed database of n payments, each with
// the records a captured payment leaves (bench/footprint's workload):
// the payment, three timeline steps, the archived webhook and its
// processed id, the outbox record, three done deliveries, two ledger
// lines, the create's idempotency key and three effect keys; every 20th
// payment was leased once (the sweeper), its lease released.
// cleanup is the Cleanup of the benchmark whose sub-benchmarks share the
// file.
func startupFile(b *testing.B, cleanup func(func()), n int) string {
	if p, ok := startupFiles.Load(n); ok {
		return p.(string)
	}
	dir, err := os.MkdirTemp("", "paystate-startup-")
	if err != nil {
		b.Fatal(err)
	}
	cleanup(func() {
		startupFiles.Delete(n)
		_ = os.RemoveAll(dir)
	})
	path := filepath.Join(dir, "paystate.db")
	t0 := time.Now().UTC().Add(-30 * 24 * time.Hour)
	clock := t0
	db, err := bolt.Open(path, &bolt.Options{Now: func() time.Time { return clock }})
	if err != nil {
		b.Fatal(err)
	}
	const perTx = 10_000
	for start := 0; start < n; start += perTx {
		clock = t0.Add(time.Duration(start) * 2 * time.Second)
		err := db.Update(context.Background(), func(tx store.Tx) error {
			for i := start; i < min(n, start+perTx); i++ {
				if err := fillPayment(tx, i, t0.Add(time.Duration(i)*2*time.Second)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}
	startupFiles.Store(n, path)
	return path
}

// fillPayment writes payment i's records, created at at.
func fillPayment(tx store.Tx, i int, at time.Time) error {
	id := fmt.Sprintf("pay_%s", ulidAt(at, i))
	evt := fmt.Sprintf("evt_%s", ulidAt(at, i+1))
	p := pay.Payment{
		ID: id, OrderID: fmt.Sprintf("order-%d", i), Amount: 1500 + int64(i%40)*100, Currency: "EUR",
		Customer: pay.Customer{ID: fmt.Sprintf("cus_%d", i%1000), Email: fmt.Sprintf("c%d@example.com", i%1000)},
		Provider: "mock", ProviderRef: fmt.Sprintf("mock_pi_%024x", i), Status: pay.Captured, Version: 1,
		CreatedAt: at, UpdatedAt: at,
	}
	if err := tx.InsertPayment(p); err != nil {
		return err
	}
	for s, kind := range []string{pay.StepCreated, pay.StepTransition, pay.StepDuplicate} {
		if err := tx.AppendStep(pay.Step{PaymentID: id, At: at, Source: pay.SourceAPI, Kind: kind, To: pay.Captured, Version: uint64(s + 1)}); err != nil {
			return err
		}
	}
	ev := fmt.Sprintf("evt_mock_%024x", i)
	if _, err := tx.PutInbox(pay.InboxEvent{
		Provider: "mock", EventID: ev, Type: "payment.captured", PaymentID: id, ProviderRef: p.ProviderRef,
		Status: pay.Captured, Amount: p.Amount, Currency: "EUR", OccurredAt: at, ReceivedAt: at,
		Body: fmt.Appendf(nil, `{"id":%q,"type":"payment.captured","created":%d,"data":{"payment_id":%q,"amount":%d,"currency":"EUR","provider_ref":%q}}`,
			ev, at.Unix(), id, p.Amount, p.ProviderRef),
	}); err != nil {
		return err
	}
	if err := tx.MarkProcessed("mock", ev); err != nil {
		return err
	}
	if err := tx.AppendOutbox(pay.OutboxRecord{
		ID: evt, Type: "payment.captured", PaymentID: id, Status: pay.Captured, From: pay.Created, Version: 2,
		OrderID: p.OrderID, Amount: p.Amount, Currency: "EUR", Customer: p.Customer, Provider: "mock", CreatedAt: at,
	}); err != nil {
		return err
	}
	for d, eff := range []string{pay.EffectLoyalty, pay.EffectRetention, pay.EffectWebhook} {
		dl := pay.Delivery{
			ID: fmt.Sprintf("dlv_%s", ulidAt(at, i+2+d)), Effect: eff, EventID: evt, EventType: "payment.captured",
			EventAt: at, PaymentID: id, State: pay.DeliveryDone, Attempts: 1, Note: "done",
			NextAttemptAt: at, CreatedAt: at, UpdatedAt: at,
		}
		if eff == pay.EffectWebhook {
			dl.Endpoint = "we_e8b8cc8d75ca8f7b"
		}
		if err := tx.InsertDelivery(dl); err != nil {
			return err
		}
		if eff != pay.EffectWebhook {
			if err := tx.PutEffect(store.EffectRecord{Key: eff + ":" + evt, DeliveryID: dl.ID, At: at}); err != nil {
				return err
			}
		}
	}
	if err := tx.PutEffect(store.EffectRecord{Key: "loyalty_payment:" + id, At: at}); err != nil {
		return err
	}
	if err := tx.AppendLedger([]pay.LedgerEntry{
		{PaymentID: id, EventID: evt, Account: pay.AccountPSPReceivable, Currency: "EUR", Amount: p.Amount, At: at},
		{PaymentID: id, EventID: evt, Account: pay.AccountMerchantRevenue, Currency: "EUR", Amount: -p.Amount, At: at},
	}); err != nil {
		return err
	}
	if err := tx.PutIdemKey(pay.IdemRecord{
		Key: fmt.Sprintf("create:e3b0c44298fc1c14:k-%d", i), Fingerprint: fmt.Sprintf("%064x", i), State: pay.IdemDone,
		PaymentID: id, StatusCode: 201, CreatedAt: at, ExpiresAt: at.Add(24 * time.Hour),
	}); err != nil {
		return err
	}
	if i%20 == 0 {
		l, err := tx.AcquireLease(id, "sweeper/0123456789ab", 30*time.Second)
		if err != nil {
			return err
		}
		return tx.ReleaseLease(id, l.Token)
	}
	return nil
}

// ulidAt is a ULID-shaped id for time at and sequence i: 10 characters of
// milliseconds and 16 of i, in Crockford base 32.
func ulidAt(at time.Time, i int) string {
	const digits = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
	var b [26]byte
	ms := uint64(at.UnixMilli())
	for k := 9; k >= 0; k-- {
		b[k] = digits[ms%32]
		ms /= 32
	}
	r := uint64(i)
	for k := 25; k >= 10; k-- {
		b[k] = digits[r%32]
		r /= 32
	}
	return string(b[:])
}

// evict drops the file's pages from the page cache (posix_fadvise
// DONTNEED on a file nothing maps: the kernel drops its clean pages) and
// returns how many of its pages were still resident, as mincore reports
// them, before and after.
func evict(b *testing.B, path string) (before, after int) {
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	before = resident(b, f)
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		b.Fatal(err)
	}
	return before, resident(b, f)
}

// resident counts the pages of f in the page cache.
func resident(b *testing.B, f *os.File) int {
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return 0
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Munmap(data)
	pageSize := os.Getpagesize()
	vec := make([]byte, (len(data)+pageSize-1)/pageSize)
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&data[0])), uintptr(len(data)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		b.Fatal(errno)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}

// startupSizes are the databases BenchmarkStartup opens; 0 is one that
// was opened and closed with no payment.
var startupSizes = []int{0, 100_000, 1_000_000}

// BenchmarkStartup measures `paystate serve`'s start-up — daemon.Open,
// from opening the file to the HTTP listener bound and the workers
// started — on a database of 0, 100,000 and 1,000,000 payments (see
// startupFile; 1M is skipped with -short), after a clean shutdown, with
// the file's pages dropped from the page cache before each open (cold:
// evict) or left there (warm). It reports the growth of the live heap
// (after a GC) across the open and, for the cold case, the file's pages
// still resident before the open.
func BenchmarkStartup(b *testing.B) {
	parent := b
	for _, n := range startupSizes {
		if n > 100_000 && testing.Short() {
			continue
		}
		for _, cold := range []bool{true, false} {
			b.Run(fmt.Sprintf("payments=%d/cold=%t", n, cold), func(b *testing.B) {
				src := startupFile(b, parent.Cleanup, n)
				var residentBefore int
				var heap uint64
				b.ResetTimer()
				for b.Loop() {
					b.StopTimer()
					path := src
					if cold {
						_, residentBefore = evict(b, path)
					}
					cfg := config.DefaultConfig()
					cfg.Server.Listen = "127.0.0.1:0"
					cfg.Storage.Path = path
					m := daemon.New(cfg, zerolog.Nop())
					runtime.GC()
					var ms0 runtime.MemStats
					runtime.ReadMemStats(&ms0)
					b.StartTimer()
					if err := m.Open(); err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					runtime.GC()
					var ms runtime.MemStats
					runtime.ReadMemStats(&ms)
					heap = max(heap, ms.HeapAlloc-min(ms.HeapAlloc, ms0.HeapAlloc))
					if err := m.Close(context.Background()); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				b.ReportMetric(float64(heap)/(1<<20), "MiB-heap")
				if cold {
					b.ReportMetric(float64(residentBefore), "resident-pages")
				}
			})
		}
	}
}
