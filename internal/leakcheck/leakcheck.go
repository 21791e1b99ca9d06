// Package leakcheck is the goroutine-leak check of the packages whose
// tests start HTTP servers (httpd, daemon): a TestMain that fails the
// package if goroutines outlive its tests.
package leakcheck

import (
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// Main runs the tests and then looks for leaked goroutines. The lingering
// closes of httpd/linger.go end within a second (their read deadline), so
// the check is repeated for a few seconds before a goroutine counts as
// leaked.
//
// The tests' HTTP clients share http.DefaultTransport; its idle keep-alive
// connections are closed first, so that their read loops are not taken for
// leaks of the server.
//
// Two goroutines of fasthttp are not leaks and are ignored:
//   - updateServerDate.func1 refreshes the Date header once a second for
//     the whole process; fasthttp starts it once, with the first server,
//     and never stops it;
//   - (*workerPool).Start.func2 is a stopped server's idle-worker cleaner:
//     it sees the stop only when its sleep (MaxIdleWorkerDuration, 10 s by
//     default) ends, and then returns. A server that was never shut down
//     still shows up, through its Serve and worker goroutines.
func Main(m *testing.M) { MainThen(m, nil) }

// MainThen is Main with after, if not nil, run once the tests ended and
// before the check (a server the tests shared is stopped there).
func MainThen(m *testing.M, after func()) {
	code := m.Run()
	if after != nil {
		after()
	}
	if code == 0 {
		http.DefaultTransport.(*http.Transport).CloseIdleConnections()
		opts := []goleak.Option{
			goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
			goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"),
		}
		deadline := time.Now().Add(5 * time.Second)
		err := goleak.Find(opts...)
		for err != nil && time.Now().Before(deadline) {
			err = goleak.Find(opts...)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "goleak: goroutines left after the tests: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
