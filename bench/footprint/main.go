// Command footprint measures what one payment costs a running paystate: the
// write transactions it commits, the bytes the server process writes, and
// the bytes and keys the payment leaves in the database file. It counts,
// it does not time, so the figures do not depend on the machine's load.
//
// It builds (or takes) a paystate binary, starts `paystate serve` on a
// fresh database in a temporary directory with the mock PSP, loyalty,
// retention and one merchant webhook endpoint (served by this command),
// then creates -n payments one after the other; each is captured in the
// create's answer (amount ending 00), gets the mock PSP's webhook, and is
// delivered to all three targets before the next begins. Then it stops
// the server (SIGTERM, a clean shutdown) and reads the file.
//
//	go run ./bench/footprint -n 200
//	go run ./bench/footprint -n 200 -bin /tmp/paystate-old   # another build
//	go run ./bench/footprint -n 200 -keys random             # UUID-like client keys
//
// The client's order ids and idempotency keys (-keys) decide how full
// bbolt keeps the pages of the buckets keyed by them: counter ("fp-<run>-
// <i>", the default), random (crypto/rand.Text, as clients that send
// UUIDs) or padded (an increasing count of ten digits).
//
// Counted, per payment:
//   - commits: the growth of the transaction id in the file's meta pages
//     (bbolt adds one per commit) between the first payment and the last,
//     read from the file while the server runs; each commit is two
//     fdatasyncs (the pages, then the meta page);
//   - written: the bytes the server process wrote through write system
//     calls (wchar in /proc/PID/io), its log at warn included (none here);
//   - file: the database file's size after the clean shutdown;
//   - data: the keys and values of every bucket, and their count.
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/paystate/paystate/store/bolt"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "footprint:", err)
		os.Exit(1)
	}
}

func run() error {
	n := flag.Int("n", 200, "payments to create, one after the other")
	bin := flag.String("bin", "", "paystate binary to measure; empty: go build the current directory")
	keep := flag.String("keep", "", "copy the database file here at the end")
	flag.StringVar(&keyKind, "keys", "counter", "the client's order ids and idempotency keys: counter (fp-<run>-<i>), random (crypto/rand.Text) or padded (fp-<run>-<i in 10 digits>, increasing)")
	flag.Parse()
	if *n < 2 {
		return errors.New("-n must be at least 2")
	}
	if keyKind != "counter" && keyKind != "random" && keyKind != "padded" {
		return fmt.Errorf("-keys must be counter, random or padded, not %q", keyKind)
	}

	dir, err := os.MkdirTemp("", "footprint-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if *bin == "" {
		*bin = filepath.Join(dir, "paystate")
		if out, err := exec.Command("go", "build", "-o", *bin, ".").CombinedOutput(); err != nil {
			return fmt.Errorf("go build: %v\n%s", err, out)
		}
	}

	hook, hookURL, err := endpoint()
	if err != nil {
		return err
	}
	defer hook.Close()
	port, err := freePort()
	if err != nil {
		return err
	}
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	dbPath := filepath.Join(dir, "paystate.db")
	cfgPath := filepath.Join(dir, "paystate.toml")
	cfg := fmt.Sprintf(`[server]
listen = "127.0.0.1:%d"
[storage]
path = %q
[log]
level = "warn"
[providers.mock]
webhook_delay = "0s"
[[webhooks]]
url = %q
secret = "whsec_Zm9vdHByaW50LWJlbmNobWFyay1zZWNyZXQtMDAwMA=="
events = ["payment.captured"]
`, port, dbPath, hookURL)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return err
	}

	srv := exec.Command(*bin, "serve", "-config", cfgPath)
	srv.Stdout, srv.Stderr = os.Stderr, os.Stderr
	if err := srv.Start(); err != nil {
		return err
	}
	defer func() { _ = srv.Process.Kill() }()
	if err := waitUp(base); err != nil {
		return err
	}

	// The first payment settles the file's start-up writes (buckets, the
	// schema, the endpoint's record); counting starts after it.
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	if err := onePayment(base, run, 0); err != nil {
		return err
	}
	tx0, err := txid(dbPath)
	if err != nil {
		return err
	}
	io0, err := procIO(srv.Process.Pid)
	if err != nil {
		return err
	}
	m0 := scrape(base)
	for i := 1; i < *n; i++ {
		if err := onePayment(base, run, i); err != nil {
			return err
		}
	}
	tx1, err := txid(dbPath)
	if err != nil {
		return err
	}
	io1, err := procIO(srv.Process.Pid)
	if err != nil {
		return err
	}
	m1 := scrape(base)
	if err := srv.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	if err := srv.Wait(); err != nil {
		return fmt.Errorf("paystate serve: %v", err)
	}
	if *keep != "" {
		if data, err := os.ReadFile(dbPath); err == nil {
			_ = os.WriteFile(*keep, data, 0o600)
		}
	}

	measured := float64(*n - 1)
	fi, err := os.Stat(dbPath)
	if err != nil {
		return err
	}
	buckets, inUse, err := bolt.BucketSizes(dbPath)
	if err != nil {
		return err
	}
	per := float64(*n)
	var keys, data int
	for _, b := range buckets {
		keys += b.Keys
		data += b.KeyBytes + b.ValueBytes
	}
	fmt.Printf("payments %d (counted: the last %d)\n", *n, *n-1)
	if w, ok := m1[writesMetric]; ok {
		fmt.Printf("write tx per payment     %.2f (Updates; %s)\n", (w-m0[writesMetric])/measured, writesMetric)
	}
	fmt.Printf("commits per payment      %.2f (fdatasyncs: twice that)\n", float64(tx1-tx0)/measured)
	if p, ok := m1[pagesMetric]; ok {
		fmt.Printf("pages written per payment %.1f (%s)\n", (p-m0[pagesMetric])/measured, pagesMetric)
	}
	fmt.Printf("written per payment      %.0f bytes in %.1f write calls (%.1f pages of 4 KiB)\n",
		float64(io1.wchar-io0.wchar)/measured, float64(io1.syscw-io0.syscw)/measured, float64(io1.wchar-io0.wchar)/measured/4096)
	fmt.Printf("file per payment         %.0f bytes (file %d bytes; it grows in steps)\n", float64(fi.Size())/per, fi.Size())
	fmt.Printf("pages in use per payment %.0f bytes (%d pages of 4 KiB hold data, the rest is free)\n", float64(inUse*4096)/per, inUse)
	fmt.Printf("data per payment         %.0f bytes in %.1f keys\n\n", float64(data)/per, float64(keys)/per)
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "bucket\tkeys/payment\tkey B/payment\tvalue B/payment\tpages B/payment\tfill\t")
	sort.Slice(buckets, func(i, j int) bool {
		return buckets[i].KeyBytes+buckets[i].ValueBytes > buckets[j].KeyBytes+buckets[j].ValueBytes
	})
	for _, b := range buckets {
		if b.Keys == 0 {
			continue
		}
		fmt.Fprintf(w, "%s\t%.2f\t%.0f\t%.0f\t%.0f\t%.0f %%\t\n", b.Name, float64(b.Keys)/per, float64(b.KeyBytes)/per, float64(b.ValueBytes)/per,
			float64(b.Alloc)/per, 100*float64(b.Inuse)/float64(max(b.Alloc, 1)))
	}
	return w.Flush()
}

// onePayment creates payment i, captured in the answer, and waits until the
// mock PSP's webhook for it is stored and its three deliveries are done.
// keyKind is -keys: how the client names its orders and idempotency keys.
// bbolt fills the pages of those two buckets by where new keys land
// (store's chooseFill): at the end (padded), anywhere (random), or in a few
// regions at a time (counter: "-10" sorts before "-9").
var keyKind string

// clientKeys returns the order id and the idempotency key of payment i.
func clientKeys(run string, i int) (order, key string) {
	switch keyKind {
	case "random":
		return rand.Text(), rand.Text()
	case "padded":
		s := fmt.Sprintf("fp-%s-%010d", run, i)
		return s, s
	}
	s := fmt.Sprintf("fp-%s-%d", run, i)
	return s, s
}

func onePayment(base, run string, i int) error {
	order, key := clientKeys(run, i)
	body := fmt.Sprintf(`{"order_id":%q,"amount":%d,"currency":"EUR","provider":"mock","customer":{"id":"cus_%d","email":"c%d@example.com"}}`,
		order, 1500+100*(i%40), i%100, i%100)
	since := time.Now().UTC().Add(-time.Second).Format(time.RFC3339Nano)
	res, err := call("POST", base+"/v1/payments", body, map[string]string{"Idempotency-Key": key})
	if err != nil {
		return err
	}
	id, _ := res["id"].(string)
	if id == "" || res["status"] != "captured" {
		return fmt.Errorf("create %d: %v", i, res)
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if done, err := settled(base, id, since); err != nil {
			return err
		} else if done {
			return nil
		}
		time.Sleep(2 * time.Millisecond)
	}
	return fmt.Errorf("payment %s did not settle within 30 s", id)
}

// settled reports whether the payment's timeline shows the PSP's webhook
// and none of its deliveries is still open.
func settled(base, id, since string) (bool, error) {
	ev, err := call("GET", base+"/v1/payments/"+id+"/events", "", nil)
	if err != nil {
		return false, err
	}
	hooked := false
	steps, _ := ev["data"].([]any)
	for _, s := range steps {
		if m, _ := s.(map[string]any); m["source"] == "webhook" {
			hooked = true
		}
	}
	if !hooked {
		return false, nil
	}
	dl, err := call("GET", base+"/v1/deliveries?state=done&limit=1000&since="+url.QueryEscape(since), "", nil)
	if err != nil {
		return false, err
	}
	done := 0
	list, _ := dl["data"].([]any)
	for _, d := range list {
		if m, _ := d.(map[string]any); m["payment_id"] == id {
			done++
		}
	}
	return done >= 3, nil
}

func call(method, url, body string, hdr map[string]string) (map[string]any, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, url, rd)
	if err != nil {
		return nil, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, err
	}
	if res.StatusCode >= 300 {
		return nil, fmt.Errorf("%s %s: %d %s", method, url, res.StatusCode, data)
	}
	var out map[string]any
	return out, json.Unmarshal(data, &out)
}

const (
	writesMetric = "paystate_store_write_transactions_total"
	pagesMetric  = "paystate_store_pages_written_total"
)

// scrape reads the store's counters from /metrics; a build without them
// gives none.
func scrape(base string) map[string]float64 {
	out := map[string]float64{}
	res, err := http.Get(base + "/metrics")
	if err != nil {
		return out
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		name, v, ok := strings.Cut(sc.Text(), " ")
		if ok && (name == writesMetric || name == pagesMetric) {
			out[name], _ = strconv.ParseFloat(v, 64)
		}
	}
	return out
}

// endpoint serves the merchant webhook endpoint: it answers 200.
func endpoint() (*http.Server, string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	s := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = s.Serve(ln) }()
	return s, "http://" + ln.Addr().String() + "/hook", nil
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func waitUp(base string) error {
	for range 500 {
		if res, err := http.Get(base + "/healthz"); err == nil {
			res.Body.Close()
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return errors.New("paystate serve did not come up within 10 s")
}

// txid reads the newest transaction id of the file's two meta pages
// (page size 4096: each meta page's txid sits at offset 16+48).
func txid(path string) (uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var best uint64
	for _, off := range []int64{0, 4096} {
		buf := make([]byte, 8)
		if _, err := f.ReadAt(buf, off+16+48); err != nil {
			return 0, err
		}
		best = max(best, binary.LittleEndian.Uint64(buf))
	}
	return best, nil
}

type ioCounts struct{ wchar, syscw int64 }

// procIO reads a process's write counters from /proc/PID/io.
func procIO(pid int) (ioCounts, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return ioCounts{}, err
	}
	defer f.Close()
	var c ioCounts
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ": ")
		n, _ := strconv.ParseInt(v, 10, 64)
		switch k {
		case "wchar":
			c.wchar = n
		case "syscw":
			c.syscw = n
		}
	}
	return c, sc.Err()
}
