// Package stripetest runs the Stripe API for tests of the stripe provider
// and of a daemon that uses it: stripe-mock (Stripe's own stateless API
// mock, installed and started on demand), a Recorder that sits in front of
// an API and records what reached it, NewFake (a stripefake.Fake with
// scripted PaymentIntent statuses and real idempotency, closed at the
// test's cleanup), and the events of testdata/stripe rewritten for a test
// (Event).
//
// stripe-mock checks every request against Stripe's OpenAPI description and
// answers fixtures: any id exists, a PaymentIntent is always
// requires_payment_method, idempotency keys are not enforced. What goes
// beyond request shapes is tested with webhooks and with stripefake.Fake.
package stripetest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// Environment variables read by MockURL.
const (
	// EnvMockURL names a stripe-mock that is already running
	// ("http://127.0.0.1:12111"); MockURL then starts none.
	EnvMockURL = "PAYSTATE_STRIPE_MOCK_URL"
	// EnvSkipMock set to 1 makes MockURL skip the test instead of failing
	// it when stripe-mock cannot be installed or started.
	EnvSkipMock = "PAYSTATE_SKIP_STRIPE_MOCK"
)

// MockModule and MockVersion name the stripe-mock release the tests run
// against; its OpenAPI description is of the same API release train as
// the stripe-go version paystate is built with.
const (
	MockModule  = "github.com/stripe/stripe-mock"
	MockVersion = "v0.203.0"
)

// Timeouts of installing and starting stripe-mock.
const (
	installTimeout = 10 * time.Minute
	startTimeout   = time.Minute
)

// Mock is a running stripe-mock process listening on loopback.
type Mock struct {
	// URL is its HTTP address, "http://127.0.0.1:<port>".
	URL string

	cmd    *exec.Cmd
	exited chan error
	once   sync.Once
}

// StartMock installs stripe-mock MockVersion into $(go env GOPATH)/bin (or
// GOBIN) unless it is there already, and starts it on 127.0.0.1 with
// ephemeral ports for HTTP and HTTPS. Close stops it.
func StartMock(ctx context.Context) (*Mock, error) {
	bin, err := InstallMock(ctx)
	if err != nil {
		return nil, err
	}
	return runMock(ctx, bin)
}

// InstallMock returns the path of the stripe-mock binary, running `go
// install github.com/stripe/stripe-mock@MockVersion` first if the binary is
// missing or of another version. The binary is built into a temporary
// directory beside its destination and renamed into place, so two test
// processes that install at once never see a half-written file.
func InstallMock(ctx context.Context) (string, error) {
	goBin, err := goTool()
	if err != nil {
		return "", err
	}
	dir, err := binDir(ctx, goBin)
	if err != nil {
		return "", err
	}
	name := "stripe-mock"
	if runtime.GOOS == "windows" {
		name += ".exe"
	}
	bin := filepath.Join(dir, name)
	if mockVersion(ctx, goBin, bin) == MockVersion {
		return bin, nil
	}

	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("install stripe-mock: %w", err)
	}
	tmp, err := os.MkdirTemp(dir, ".stripe-mock-install-")
	if err != nil {
		return "", fmt.Errorf("install stripe-mock: %w", err)
	}
	defer os.RemoveAll(tmp)
	ictx, cancel := context.WithTimeout(ctx, installTimeout)
	defer cancel()
	cmd := exec.CommandContext(ictx, goBin, "install", MockModule+"@"+MockVersion)
	cmd.Dir = tmp // outside any module: the version comes from the command line
	cmd.Env = append(os.Environ(), "GOBIN="+tmp, "GOFLAGS=", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go install %s@%s: %w\n%s", MockModule, MockVersion, err, out)
	}
	if err := os.Rename(filepath.Join(tmp, name), bin); err != nil {
		return "", fmt.Errorf("install stripe-mock: %w", err)
	}
	return bin, nil
}

// goTool finds the go command: go test puts GOROOT/bin first on PATH.
func goTool() (string, error) {
	p, err := exec.LookPath("go")
	if err != nil {
		return "", errors.New("install stripe-mock: the go command is not on PATH")
	}
	return p, nil
}

// binDir is where go install puts binaries: GOBIN, else GOPATH/bin.
func binDir(ctx context.Context, goBin string) (string, error) {
	out, err := exec.CommandContext(ctx, goBin, "env", "GOBIN", "GOPATH").Output()
	if err != nil {
		return "", fmt.Errorf("go env: %w", err)
	}
	// One line per variable, the first empty when GOBIN is not set.
	lines := strings.Split(string(out), "\n")
	if strings.TrimSpace(lines[0]) != "" {
		return strings.TrimSpace(lines[0]), nil
	}
	if len(lines) < 2 || strings.TrimSpace(lines[1]) == "" {
		return "", errors.New("go env: neither GOBIN nor GOPATH is set")
	}
	gopath := filepath.SplitList(strings.TrimSpace(lines[1]))[0]
	return filepath.Join(gopath, "bin"), nil
}

// mockVersion reads the module version a stripe-mock binary was built
// from (go version -m); "" if the binary is missing or unreadable.
func mockVersion(ctx context.Context, goBin, bin string) string {
	if _, err := os.Stat(bin); err != nil {
		return ""
	}
	out, err := exec.CommandContext(ctx, goBin, "version", "-m", bin).Output()
	if err != nil {
		return ""
	}
	for line := range strings.SplitSeq(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[0] == "mod" && f[1] == MockModule {
			return f[2]
		}
	}
	return ""
}

// runMock starts bin and waits until it says where it listens.
func runMock(ctx context.Context, bin string) (*Mock, error) {
	cmd := exec.Command(bin, "-http-addr", "127.0.0.1:0", "-https-addr", "127.0.0.1:0")
	cmd.SysProcAttr = sysProcAttr()
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = cmd.Stdout
	m := &Mock{cmd: cmd, exited: make(chan error, 1)}
	started := make(chan error, 1)
	go func() {
		// The kill-on-parent-death signal belongs to the thread that
		// started the child: keep that thread until the child is gone.
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			runtime.UnlockOSThread()
			return
		}
		started <- nil
		m.exited <- cmd.Wait()
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("start stripe-mock: %w", err)
	}

	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		const prefix = "Listening for HTTP at address: "
		for sc.Scan() {
			if line := sc.Text(); strings.HasPrefix(line, prefix) {
				addr <- strings.TrimSpace(strings.TrimPrefix(line, prefix))
				break
			}
		}
		// Keep reading, so a chatty stripe-mock never blocks on its pipe.
		_, _ = io.Copy(io.Discard, out)
	}()
	timer := time.NewTimer(startTimeout)
	defer timer.Stop()
	select {
	case a := <-addr:
		m.URL = "http://" + a
		return m, nil
	case err := <-m.exited:
		return nil, fmt.Errorf("stripe-mock exited before listening: %v", err)
	case <-timer.C:
		_ = m.Close()
		return nil, fmt.Errorf("stripe-mock did not listen within %s", startTimeout)
	case <-ctx.Done():
		_ = m.Close()
		return nil, ctx.Err()
	}
}

// Close stops the process and waits for it. It always returns nil.
func (m *Mock) Close() error {
	m.once.Do(func() {
		_ = m.cmd.Process.Kill()
		<-m.exited
	})
	return nil
}

// shared is the stripe-mock of this test binary, started by the first
// MockURL and stopped when the last test using it has finished.
var shared struct {
	mu    sync.Mutex
	mock  *Mock
	users int
	err   error // a failed install or start, reported to every later caller
}

// MockURL returns the URL of a stripe-mock for tb. With PAYSTATE_STRIPE_MOCK_URL
// set it returns that. Otherwise the tests of one binary share one process,
// installed (see InstallMock) and started on first use and stopped at the
// cleanup of the last test using it. If stripe-mock cannot be installed or
// started the test fails, unless PAYSTATE_SKIP_STRIPE_MOCK=1 is set: then it
// is skipped.
func MockURL(tb testing.TB) string {
	tb.Helper()
	if u := os.Getenv(EnvMockURL); u != "" {
		return u
	}
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.mock == nil && shared.err == nil {
		shared.mock, shared.err = StartMock(context.Background())
	}
	if err := shared.err; err != nil {
		if os.Getenv(EnvSkipMock) == "1" {
			tb.Skipf("stripe-mock unavailable and %s=1: %v", EnvSkipMock, err)
		}
		tb.Fatalf("stripe-mock is needed by this test and could not be installed or started "+
			"(set %s to a running one, or %s=1 to skip): %v", EnvMockURL, EnvSkipMock, err)
	}
	shared.users++
	u := shared.mock.URL
	tb.Cleanup(func() {
		shared.mu.Lock()
		defer shared.mu.Unlock()
		shared.users--
		if shared.users == 0 {
			_ = shared.mock.Close()
			shared.mock = nil
		}
	})
	return u
}
