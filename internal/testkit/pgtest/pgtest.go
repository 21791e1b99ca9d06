// Package pgtest gives tests outside store/postgres a real PostgreSQL 15:
// the one at PAYSTATE_TEST_PG_DSN if set, else a throwaway cluster that
// scripts/postgres.sh starts (installing PostgreSQL from Debian's packages
// when it is missing) the first time a test asks, and that Stop removes.
// A test that needs PostgreSQL fails, never skips, when it cannot be had.
package pgtest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

var (
	once     sync.Once
	baseDSN  string
	dir      string // the cluster started here, if any
	startErr error
	schemas  atomic.Int64
)

// script is scripts/postgres.sh of this module.
func script() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "scripts", "postgres.sh")
}

// start finds or starts PostgreSQL, once.
func start() {
	if baseDSN = os.Getenv("PAYSTATE_TEST_PG_DSN"); baseDSN != "" {
		return
	}
	cmd := exec.Command(script(), "start")
	cmd.Env = append(os.Environ(), "PAYSTATE_PG_DIR=")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		startErr = fmt.Errorf("PAYSTATE_TEST_PG_DSN is not set and %s start failed: %w", script(), err)
		return
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "export ")
		if !ok {
			continue
		}
		name, value, _ := strings.Cut(line, "=")
		switch value = strings.Trim(value, "'"); name {
		case "PAYSTATE_PG_DSN":
			baseDSN = value
		case "PAYSTATE_PG_DIR":
			dir = value
		}
	}
	if baseDSN == "" {
		startErr = fmt.Errorf("%s start printed no DSN:\n%s", script(), out)
	}
}

// DSN returns the DSN of the test database, starting PostgreSQL on first
// use (for a package that manages its own schemas; Schema is simpler).
func DSN() (string, error) {
	once.Do(start)
	return baseDSN, startErr
}

// Schema returns the DSN of a new, empty database of the test cluster,
// started on first use; the database is dropped when tb ends. Each test
// gets a database, not only a schema, of its own: the outbox's global
// feed (OutboxAfter) waits for every older transaction of its database,
// and another test's open transaction must not hold this test's records
// back.
func Schema(tb testing.TB) string {
	tb.Helper()
	once.Do(start)
	if startErr != nil {
		tb.Fatal(startErr)
	}
	name := fmt.Sprintf("t%d_%d", os.Getpid(), schemas.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, baseDSN)
	if err != nil {
		tb.Fatalf("connect to the test database: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		tb.Fatalf("create database: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if c, err := pgx.Connect(ctx, baseDSN); err == nil {
			_, _ = c.Exec(ctx, "DROP DATABASE "+name+" WITH (FORCE)")
			_ = c.Close(ctx)
		}
	})
	u, err := url.Parse(baseDSN)
	if err != nil {
		tb.Fatalf("test DSN: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}

// Stop removes the cluster Schema started, if it started one. Call it
// from TestMain after the tests.
func Stop() {
	if dir == "" {
		return
	}
	rm := exec.Command(script(), "remove", dir)
	rm.Stdout, rm.Stderr = os.Stderr, os.Stderr
	if err := rm.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: %s remove %s: %v\n", script(), dir, err)
	}
}
