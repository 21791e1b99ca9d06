package httpd_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/paystate/paystate/pay"
)

// The 256 clients of the benchmarks in throughput_bench_test.go run in the
// test process, so their goroutines share the Go scheduler with the
// server's, and the store's writer waits behind them to be scheduled. A
// merchant's clients are other processes. clientProcess runs the clients
// of the create benchmark in a second process on the same cores: the test
// binary itself, started with clientProcessEnv set to the server's
// address, which TestMain hands to runClientProcess instead of running
// tests.
const clientProcessEnv = "PAYSTATE_BENCH_CLIENT_PROCESS"

// runClientProcess is the client process: for each line "<run> <n>" on
// stdin it creates payments 0..n-1 of that run from clients goroutines,
// as sendCreates does, and answers one line: the nanoseconds it took and
// the CPU time the process has used so far, or "error <text>". It returns
// the process's exit code once stdin is closed.
func runClientProcess(addr string) int {
	d := &benchDaemon{hc: &fasthttp.HostClient{
		Addr: addr, MaxConns: 2 * clients, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second,
		Dial: func(addr string) (net.Conn, error) { return net.Dial("tcp", addr) },
	}}
	url := "http://" + addr
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		var run string
		var n int
		if _, err := fmt.Sscan(in.Text(), &run, &n); err != nil {
			fmt.Println("error", err)
			continue
		}
		start := time.Now()
		err := fanOut(n, clients, func() func(int) error {
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			return func(i int) error {
				_, err := d.postCreateTo(url, req, resp, run, i, "mock", pay.Captured)
				return err
			}
		})
		if err != nil {
			fmt.Println("error", err)
			continue
		}
		cpu, err := processCPU()
		if err != nil {
			fmt.Println("error", err)
			continue
		}
		fmt.Println(time.Since(start).Nanoseconds(), cpu.Nanoseconds())
	}
	return 0
}

// clientProcess is the parent's end of a client process.
type clientProcess struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
	cpu time.Duration // the process's CPU time as of its last answer
}

// startClientProcess starts the client process against d's server; the
// benchmark's cleanup ends it.
func startClientProcess(b *testing.B, d *benchDaemon) *clientProcess {
	b.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), clientProcessEnv+"=127.0.0.1:"+strconv.Itoa(d.srv.Port()))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	p := &clientProcess{cmd: cmd, in: in, out: bufio.NewScanner(out)}
	b.Cleanup(func() {
		_ = in.Close()
		if err := cmd.Wait(); err != nil {
			b.Errorf("client process: %v", err)
		}
	})
	return p
}

// creates has the client process create n payments of run and returns
// how long that took there, and the CPU time the client process used for
// them.
func (p *clientProcess) creates(b *testing.B, run string, n int) (took, cpu time.Duration) {
	b.Helper()
	if _, err := fmt.Fprintln(p.in, run, n); err != nil {
		b.Fatal(err)
	}
	if !p.out.Scan() {
		b.Fatalf("client process: no answer: %v", p.out.Err())
	}
	var ns, cpuNs int64
	if _, err := fmt.Sscan(p.out.Text(), &ns, &cpuNs); err != nil {
		b.Fatalf("client process: %s", p.out.Text())
	}
	cpu, p.cpu = time.Duration(cpuNs)-p.cpu, time.Duration(cpuNs)
	return time.Duration(ns), cpu
}
