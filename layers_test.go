package main

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestLayers reads the imports with go list -deps and holds the rules of
// ARCHITECTURE.md's layers that the compiler does not: pay and receipt
// depend on the standard library alone, config and reconcile take no
// domain fact from ripple (receipt settings come from receipt, money and
// event names from pay), only store/bolt depends on bbolt and only
// store/postgres on pgx, and no package above the storage contract
// depends on a backend.
func TestLayers(t *testing.T) {
	t.Parallel()
	const (
		mod   = "github.com/paystate/paystate/"
		bbolt = "go.etcd.io/bbolt"
		pgx   = "github.com/jackc/pgx"
	)
	for _, l := range []struct {
		pkg     string
		stdOnly bool     // nothing outside the standard library but itself
		bans    []string // import paths it must not depend on, or their prefixes
	}{
		{pkg: "pay", stdOnly: true},
		{pkg: "receipt", stdOnly: true},
		{pkg: "config", bans: []string{mod + "ripple"}},
		{pkg: "reconcile", bans: []string{mod + "ripple", bbolt, pgx, mod + "store/"}},
		// The storage contract names no backend; the backends are
		// siblings; the layers above see the contract alone.
		{pkg: "store", bans: []string{bbolt, pgx, mod + "store/"}},
		{pkg: "store/bolt", bans: []string{pgx, mod + "store/postgres"}},
		{pkg: "store/postgres", bans: []string{bbolt, mod + "store/bolt"}},
		{pkg: "finalize", bans: []string{bbolt, pgx, mod + "store/"}},
		{pkg: "ripple", bans: []string{bbolt, pgx, mod + "store/"}},
		{pkg: "sweeper", bans: []string{bbolt, pgx, mod + "store/"}},
		{pkg: "httpd", bans: []string{bbolt, pgx, mod + "store/"}},
	} {
		out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "./"+l.pkg).Output()
		if err != nil {
			var stderr []byte
			if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
				stderr = ee.Stderr
			}
			t.Errorf("go list -deps ./%s: %v\n%s", l.pkg, err, stderr)
			continue
		}
		for _, dep := range strings.Fields(string(out)) {
			if l.stdOnly && dep != mod+l.pkg {
				t.Errorf("%s depends on %s: it may import the standard library only", l.pkg, dep)
			}
			for _, ban := range l.bans {
				if strings.HasPrefix(dep, ban) {
					t.Errorf("%s depends on %s (go list -deps ./%s)", l.pkg, dep, l.pkg)
				}
			}
		}
	}
}

// TestStorageContract holds the storage contract's shape: no interface in
// the module's code declares more than maxMethods methods of its own (a
// record family is a handful; a wider contract is composed of families),
// and no code outside store/ and config/ compares a string with a
// backend's name ("bolt", "postgres"): store.Open chooses the backend.
func TestStorageContract(t *testing.T) {
	t.Parallel()
	const maxMethods = 20
	fset := token.NewFileSet()
	widest, seen := 0, 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != ".":
			return filepath.SkipDir
		case d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go"):
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		chooser := strings.HasPrefix(path, "store/") || strings.HasPrefix(path, "config/")
		ast.Inspect(f, func(n ast.Node) bool {
			if !chooser {
				if lit := backendName(n); lit != nil {
					t.Errorf("%s: compares with the backend name %s outside store/ and config/", fset.Position(lit.Pos()), lit.Value)
				}
			}
			ts, ok := n.(*ast.TypeSpec)
			if !ok {
				return true
			}
			it, ok := ts.Type.(*ast.InterfaceType)
			if !ok {
				return true
			}
			methods := 0
			for _, m := range it.Methods.List {
				if _, ok := m.Type.(*ast.FuncType); ok {
					methods += len(m.Names)
				}
			}
			seen++
			widest = max(widest, methods)
			if methods > maxMethods {
				t.Errorf("%s: interface %s declares %d methods, more than %d", fset.Position(ts.Pos()), ts.Name.Name, methods, maxMethods)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen < 20 {
		t.Fatalf("found %d interfaces: the walk missed the tree", seen)
	}
	t.Logf("%d interfaces, the widest declares %d methods", seen, widest)
}

// backendName returns the backend name a comparison or a switch case n
// tests for, if any.
func backendName(n ast.Node) *ast.BasicLit {
	var operands []ast.Expr
	switch n := n.(type) {
	case *ast.BinaryExpr:
		if n.Op == token.EQL || n.Op == token.NEQ {
			operands = []ast.Expr{n.X, n.Y}
		}
	case *ast.CaseClause:
		operands = n.List
	}
	for _, e := range operands {
		if lit, ok := e.(*ast.BasicLit); ok && (lit.Value == `"bolt"` || lit.Value == `"postgres"`) {
			return lit
		}
	}
	return nil
}
