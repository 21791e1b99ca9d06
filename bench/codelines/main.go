// Command codelines counts the lines of Go code in a commit's production
// files: lines that hold a Go token (comments and blank lines excluded, as
// cloc's "code" column), in the non-test files of the packages the
// paystate binary links. Given commits, it prints each one's change of
// that count, file by file with -v, and the sum:
//
//	go run ./bench/codelines 8c6de31 d8d0358 ...
//	git log --format=%h BASE..HEAD | go run ./bench/codelines -stdin
//
// A file counts as production if its package is in `go list -deps .` at
// the working tree (the module's packages only) and its name does not end
// in _test.go; a file of a package that no longer exists counts if its
// directory is not a test kit (…test, testkit, testdata, bench).
package main

import (
	"bufio"
	"flag"
	"fmt"
	"go/scanner"
	"go/token"
	"os"
	"os/exec"
	"path"
	"strings"
)

func main() {
	verbose := flag.Bool("v", false, "print each file's change")
	stdin := flag.Bool("stdin", false, "read the commits from stdin, one per line")
	flag.Parse()
	revs := flag.Args()
	if *stdin {
		in := bufio.NewScanner(os.Stdin)
		for in.Scan() {
			if r := strings.TrimSpace(in.Text()); r != "" {
				revs = append(revs, r)
			}
		}
	}
	if len(revs) == 0 {
		fmt.Fprintln(os.Stderr, "codelines: name at least one commit")
		os.Exit(2)
	}
	prod, err := productionDirs()
	if err != nil {
		fmt.Fprintln(os.Stderr, "codelines:", err)
		os.Exit(1)
	}
	total := 0
	for _, rev := range revs {
		files, err := git("diff", "--no-renames", "--name-only", rev+"^", rev)
		if err != nil {
			fmt.Fprintln(os.Stderr, "codelines:", err)
			os.Exit(1)
		}
		sum := 0
		for _, f := range strings.Fields(files) {
			if !production(f, prod) {
				continue
			}
			d := count(rev, f) - count(rev+"^", f)
			if d != 0 && *verbose {
				fmt.Printf("  %+d %s\n", d, f)
			}
			sum += d
		}
		subject, _ := git("log", "-1", "--format=%s", rev)
		fmt.Printf("%+d %s %s\n", sum, rev, cut(strings.TrimSpace(subject), 70))
		total += sum
	}
	fmt.Printf("%+d in all\n", total)
}

// productionDirs returns the module-relative directories of the packages
// the binary links.
func productionDirs() (map[string]bool, error) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if .Module}}{{if .Module.Main}}{{.ImportPath}}{{end}}{{end}}", ".").Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w", err)
	}
	mod, err := exec.Command("go", "list", "-m").Output()
	if err != nil {
		return nil, fmt.Errorf("go list -m: %w", err)
	}
	prefix := strings.TrimSpace(string(mod))
	dirs := map[string]bool{}
	for _, p := range strings.Fields(string(out)) {
		dirs[strings.TrimPrefix(strings.TrimPrefix(p, prefix), "/")] = true
	}
	return dirs, nil
}

func production(f string, prod map[string]bool) bool {
	if !strings.HasSuffix(f, ".go") || strings.HasSuffix(f, "_test.go") {
		return false
	}
	dir := path.Dir(f)
	if dir == "." {
		dir = ""
	}
	if prod[dir] {
		return true
	}
	for _, part := range strings.Split(dir, "/") {
		if strings.HasSuffix(part, "test") || part == "testkit" || part == "testdata" || part == "bench" {
			return false
		}
	}
	return dir != "" // a package gone since (moved or removed)
}

// count returns the code lines of file f at rev, 0 if it is not there.
func count(rev, f string) int {
	src, err := git("show", rev+":"+f)
	if err != nil {
		return 0
	}
	fset := token.NewFileSet()
	file := fset.AddFile(f, -1, len(src))
	var s scanner.Scanner
	s.Init(file, []byte(src), nil, 0)
	lines := map[int]bool{}
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			break
		}
		if tok == token.SEMICOLON && lit == "\n" {
			continue // inserted at a line's end, not written
		}
		lines[file.Line(pos)] = true
	}
	return len(lines)
}

func git(args ...string) (string, error) {
	out, err := exec.Command("git", args...).Output()
	return string(out), err
}

func cut(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
