//go:build linux

package bolt_test

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// BenchmarkDiskCommit measures the disk under the store, not the store: a
// commit's two fdatasyncs as bbolt makes them (the pages, one pwrite
// each, then fdatasync; the meta page, then fdatasync again) on a 64 MiB
// file in the test's temporary directory, for 1 to 128 pages written
// either side by side (contiguous) or spread over the file (scattered),
// as the pages of a commit are when the freelist hands out pages freed
// all over the file. ns/op is one commit; µs/page divides it by the
// pages. bbolt writes every dirty page of a commit, so the layout of
// those pages sets what the commit's fdatasync costs the writer, whose
// commits are one after the other.
func BenchmarkDiskCommit(b *testing.B) {
	const fileSize = 64 << 20
	const pageSize = 4096
	path := filepath.Join(b.TempDir(), "disk")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 1<<20)
	for off := int64(0); off < fileSize; off += int64(len(chunk)) {
		if _, err := f.WriteAt(chunk, off); err != nil {
			b.Fatal(err)
		}
	}
	if err := syscall.Fdatasync(int(f.Fd())); err != nil {
		b.Fatal(err)
	}
	page := make([]byte, pageSize)
	for i := range page {
		page[i] = byte(i)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	pages := fileSize / pageSize
	for _, layout := range []string{"contiguous", "scattered"} {
		for _, n := range []int{1, 32, 64, 128} {
			b.Run(layout+"/pages="+strconv.Itoa(n), func(b *testing.B) {
				for b.Loop() {
					first := 2 + rng.IntN(pages-n-2)
					for i := range n {
						id := first + i
						if layout == "scattered" {
							id = 2 + rng.IntN(pages-2)
						}
						if _, err := f.WriteAt(page, int64(id)*pageSize); err != nil {
							b.Fatal(err)
						}
					}
					if err := syscall.Fdatasync(int(f.Fd())); err != nil {
						b.Fatal(err)
					}
					if _, err := f.WriteAt(page, 0); err != nil { // the meta page
						b.Fatal(err)
					}
					if err := syscall.Fdatasync(int(f.Fd())); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/float64(n), "µs/page")
			})
		}
	}
}
