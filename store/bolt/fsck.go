package bolt

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"os"
	"time"
)

// ErrDamaged is wrapped by the error Open returns for a database file that
// is damaged: truncated, with a bad meta page, or with a page that does not
// hold what the pages pointing to it say. Such a file is refused rather
// than opened: the only repair is a restore from a backup.
var ErrDamaged = errors.New("damaged database file")

// ErrNotDatabase is wrapped by the error Open returns for a file that is
// not a paystate database at all: empty where it must be read (read-only),
// or with nothing of a bbolt file in it (another file named by mistake).
// Unlike ErrDamaged, a backup is not the cure: the path is.
var ErrNotDatabase = errors.New("not a paystate database")

// notDatabase says why a file is not a paystate database.
func notDatabase(format string, args ...any) error {
	return fmt.Errorf("%w: %s; check the path", ErrNotDatabase, fmt.Sprintf(format, args...))
}

// damagedError says what is wrong with a damaged file.
type damagedError struct {
	problem string
	cause   error // errNoMagic, for checkFile; nil otherwise
}

// errNoMagic is the cause of a meta page without bbolt's magic number.
var errNoMagic = errors.New("no bbolt magic")

// Unwrap is the cause, if any.
func (e *damagedError) Unwrap() error { return e.cause }

// bboltPages reports whether the file of size bytes holds anything of a
// bbolt file although its meta page 0 does not: meta page 1 (bbolt's
// magic one page in, for any page size), or page 2 (its id in its header
// and the type of a branch, leaf or freelist page). A file with both meta
// pages destroyed is damaged; one with neither is another kind of file.
func bboltPages(f *os.File, size int64) bool {
	b := make([]byte, bbPageHeader+4)
	for ps := int64(512); ps <= bbMaxPageSize; ps *= 2 {
		if ps+int64(len(b)) <= size {
			if _, err := f.ReadAt(b, ps); err == nil && order.Uint32(b[bbPageHeader:]) == bbMagic {
				return true
			}
		}
		if 2*ps+int64(len(b)) <= size {
			if _, err := f.ReadAt(b, 2*ps); err == nil && order.Uint64(b) == 2 {
				switch order.Uint16(b[8:]) {
				case bbBranch, bbLeaf, bbFreelist:
					return true
				}
			}
		}
	}
	return false
}

func damaged(format string, args ...any) error {
	return &damagedError{problem: fmt.Sprintf(format, args...)}
}

// Error says what is wrong and what to do, on one line.
func (e *damagedError) Error() string {
	return "the file is damaged (" + e.problem + "): restore from a backup"
}

// Is makes errors.Is(err, ErrDamaged) true.
func (e *damagedError) Is(target error) bool { return target == ErrDamaged }

// The bbolt file format (go.etcd.io/bbolt/internal/common, unchanged since
// bbolt's format version 2), in the machine's byte order as bbolt writes
// it. A page starts with a 16-byte header: id uint64, flags uint16, count
// uint16, overflow uint32 (the pages after this one that it spans). A meta
// page holds after it: magic, version, page size, flags (uint32 each), the
// root bucket (root page id, sequence), the freelist page id, the high
// water mark (pages in use are the ids below it), the transaction id and
// an FNV-1a checksum of everything before it. Branch and leaf pages hold
// count 16-byte elements after the header: a branch element is pos, ksize
// (uint32) and the child's page id; a leaf element is flags, pos, ksize,
// vsize (uint32); pos counts from the element itself. A leaf element with
// flag 1 is a bucket: its value starts with the bucket's root page id and
// sequence; root 0 means the bucket's leaf page is inline, after them.
const (
	bbMagic         = 0xED0CDAED
	bbVersion       = 2
	bbPageHeader    = 16
	bbElement       = 16
	bbBucketHeader  = 16
	bbMetaSize      = 56 // up to the checksum
	bbBranch        = 0x01
	bbLeaf          = 0x02
	bbMeta          = 0x04
	bbFreelist      = 0x10
	bbBucketLeaf    = 0x01
	bbNoFreelist    = ^uint64(0)
	bbMaxPageSize   = 1 << 20
	bbMaxTreeHeight = 64 // far above what 2^64 pages need
)

var order = binary.NativeEndian

// bbMetaPage is what checkFile reads from a meta page.
type bbMetaPage struct {
	pageSize uint32
	root     uint64
	freelist uint64
	hwm      uint64
	txid     uint64
}

// checkFile reads the bbolt file at path, before bbolt maps it, for the
// damage bbolt cannot survive. bbolt trusts its file: a truncated one
// faults (SIGBUS) when it touches a page past the end, and a page that
// does not hold what points to it either fails an assertion or is
// reported to a goroutine of bbolt's own (the freelist rebuild at open)
// that panics, which no caller can recover. So this walk, with plain
// reads, checks what bbolt relies on: both meta pages valid (magic,
// version, checksum; bbolt would fall back to the older one silently,
// losing the last commit, and a checksummed meta sits in one sector, which
// a crash does not tear), the file as long as the high water mark says,
// and from the root bucket down every page in range, of the right type,
// used once, its elements inside it, its keys in order and inside the
// range its parent gives. After a crash it reads every page in use once,
// as bbolt's own rebuild of the freelist at open does: O(file), no more.
//
// After a clean shutdown it skips that walk, and bbolt reads the freelist
// Close wrote instead of walking the pages too, so the open costs the
// same for any size of file: Close's last transaction (DB.Close) writes
// the freelist and records in meta "clean_shutdown" its transaction id
// and the modification time it then gives the file. The walk is skipped
// only if the newer meta page is that transaction's, with a freelist, and
// the file's modification time is still the recorded one to the
// nanosecond: a file written since by anything (a crash after an open, a
// tool, a damaged copy) gets the full walk. What it cannot see is damage
// that leaves the time alone (a failing disk); DB.Check (paystate verify)
// reads everything. It returns the pages it read besides the meta pages.
// A missing or empty file is fine: bbolt creates it. It reads only under
// the lock bbolt's open would take (lockForCheck, waiting up to timeout):
// a file that another process is writing is refused as locked, never
// read half-written and called damaged.
func checkFile(path string, readOnly bool, timeout time.Duration) (pagesRead int, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, nil // missing (bbolt creates it), or bbolt says why it cannot open it
	}
	defer f.Close()
	if err := lockForCheck(f, readOnly, timeout); err != nil {
		return 0, err
	}
	fi, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("stat: %w", pathless(err))
	}
	size := fi.Size()
	switch {
	case size == 0 && readOnly:
		// bbolt would try to write the first pages (EBADF on a read-only
		// file): nothing was ever stored in it.
		return 0, notDatabase("the file is empty (0 bytes)")
	case size == 0:
		return 0, nil
	}

	// The meta pages: page 0 gives the page size, which places page 1.
	m0, err := readMeta(f, size, 0, 0)
	if errors.Is(err, errNoMagic) && !bboltPages(f, size) {
		return 0, notDatabase("it is not a bbolt file (%d bytes, no bbolt page in it)", size)
	}
	if err != nil {
		return 0, err
	}
	m1, err := readMeta(f, size, 1, int64(m0.pageSize))
	if err != nil {
		return 0, err
	}
	if m1.pageSize != m0.pageSize {
		return 0, damaged("the meta pages disagree on the page size: %d and %d", m0.pageSize, m1.pageSize)
	}
	m := m0
	if m1.txid > m0.txid {
		m = m1
	}

	ps := int64(m.pageSize)
	if m.hwm < 2 {
		return 0, damaged("its meta page says it has %d pages", m.hwm)
	}
	if m.hwm > uint64(size/ps) {
		return 0, damaged("truncated: %d bytes, but its %d pages of %d bytes need %d", size, m.hwm, ps, int64(m.hwm)*ps)
	}
	c := &fileCheck{f: f, pageSize: ps, hwm: m.hwm}
	if m.freelist != bbNoFreelist && c.closedCleanly(m, fi.ModTime()) {
		return c.reads, c.freelist(m.freelist)
	}
	c.seen = make([]uint64, (m.hwm+63)/64)
	c.mark(0, 1)
	if m.freelist != bbNoFreelist {
		if err := c.freelist(m.freelist); err != nil {
			return c.reads, err
		}
	}
	_, err = c.page(m.root, 0, nil, nil, 0)
	return c.reads, err
}

// closedCleanly reports whether meta "clean_shutdown" names the
// transaction of meta page m and the file's modification time mtime (see
// checkFile). Any problem on the way there means no: the full walk then
// says what is wrong.
func (c *fileCheck) closedCleanly(m bbMetaPage, mtime time.Time) bool {
	v, bucket, err := c.find(m.root, nil, bucketMeta)
	if err != nil || !bucket || len(v) < bbBucketHeader {
		return false
	}
	if root := order.Uint64(v); root != 0 {
		v, bucket, err = c.find(root, nil, keyCleanShutdown)
	} else {
		v, bucket, err = c.find(0, v[bbBucketHeader:], keyCleanShutdown)
	}
	return err == nil && !bucket && len(v) == 16 &&
		binary.BigEndian.Uint64(v) == m.txid && int64(binary.BigEndian.Uint64(v[8:])) == mtime.UnixNano()
}

// find looks key up in the tree whose root is page id, or the inline leaf
// page p if it is not nil, as a bbolt cursor would, and returns its value
// (nil if absent) and whether it is a bucket.
func (c *fileCheck) find(id uint64, p, key []byte) (value []byte, bucket bool, err error) {
	for from, depth := uint64(0), 0; p == nil; depth++ {
		if depth > bbMaxTreeHeight {
			return nil, false, damaged("page %d is %d levels deep", id, depth)
		}
		page, err := c.read(id, from, "branch or leaf", bbBranch, bbLeaf)
		if err != nil {
			return nil, false, err
		}
		if order.Uint16(page[8:]) == bbLeaf {
			p = page
			break
		}
		// The child of the last element whose key is at most key.
		from, id = id, 0
		for i := range int(order.Uint16(page[10:])) {
			k, child, err := branchElem(from, page, i)
			if err != nil {
				return nil, false, err
			}
			if i > 0 && bytes.Compare(k, key) > 0 {
				break
			}
			id = child
		}
	}
	for i := range int(order.Uint16(p[10:])) {
		flags, k, v, err := leafElem(id, p, i)
		if err != nil {
			return nil, false, err
		}
		if bytes.Equal(k, key) {
			return v, flags&bbBucketLeaf != 0, nil
		}
	}
	return nil, false, nil
}

// readMeta reads and validates meta page id at off.
func readMeta(f *os.File, size int64, id uint64, off int64) (bbMetaPage, error) {
	b := make([]byte, bbPageHeader+bbMetaSize+8)
	if off+int64(len(b)) > size {
		return bbMetaPage{}, damaged("truncated: %d bytes, shorter than its meta pages", size)
	}
	if _, err := f.ReadAt(b, off); err != nil {
		return bbMetaPage{}, fmt.Errorf("read meta page %d: %w", id, pathless(err))
	}
	meta := b[bbPageHeader:]
	switch {
	case order.Uint32(meta[0:]) != bbMagic:
		return bbMetaPage{}, &damagedError{problem: fmt.Sprintf("meta page %d is not a bbolt meta page", id), cause: errNoMagic}
	case order.Uint32(meta[4:]) != bbVersion:
		return bbMetaPage{}, damaged("meta page %d has format version %d, want %d", id, order.Uint32(meta[4:]), bbVersion)
	}
	h := fnv.New64a()
	h.Write(meta[:bbMetaSize])
	if h.Sum64() != order.Uint64(meta[bbMetaSize:]) {
		return bbMetaPage{}, damaged("meta page %d fails its checksum", id)
	}
	m := bbMetaPage{
		pageSize: order.Uint32(meta[8:]), root: order.Uint64(meta[16:]), freelist: order.Uint64(meta[32:]),
		hwm: order.Uint64(meta[40:]), txid: order.Uint64(meta[48:]),
	}
	if m.pageSize < 512 || m.pageSize > bbMaxPageSize || m.pageSize&(m.pageSize-1) != 0 {
		return bbMetaPage{}, damaged("meta page %d gives a page size of %d", id, m.pageSize)
	}
	if flags := order.Uint16(b[8:]); flags != bbMeta {
		return bbMetaPage{}, damaged("meta page %d has page type %#x", id, flags)
	}
	return m, nil
}

// fileCheck walks the pages of one file.
type fileCheck struct {
	f        *os.File
	pageSize int64
	hwm      uint64
	seen     []uint64 // bit per page id: reached once already; nil: not kept
	reads    int      // pages read
}

// mark records pages first..last as reached and reports whether one of
// them already was.
func (c *fileCheck) mark(first, last uint64) (twice bool) {
	for id := first; id <= last && c.seen != nil; id++ {
		w, bit := id/64, uint64(1)<<(id%64)
		twice = twice || c.seen[w]&bit != 0
		c.seen[w] |= bit
	}
	return twice
}

// read returns page id, with its overflow pages, after checking that it
// is in range, of one of the types (want names them) and reached only
// once. from is the page that points to it, for the message.
func (c *fileCheck) read(id, from uint64, want string, types ...uint16) ([]byte, error) {
	if id < 2 || id >= c.hwm {
		return nil, damaged("page %d points to page %d, outside the file's %d pages", from, id, c.hwm)
	}
	head := make([]byte, c.pageSize)
	if _, err := c.f.ReadAt(head, int64(id)*c.pageSize); err != nil {
		return nil, fmt.Errorf("read page %d: %w", id, pathless(err))
	}
	c.reads++
	if got := order.Uint64(head); got != id {
		return nil, damaged("page %d says it is page %d", id, got)
	}
	flags := order.Uint16(head[8:])
	ok := false
	for _, t := range types {
		ok = ok || flags == t
	}
	if !ok {
		return nil, damaged("page %d has page type %#x, not a %s page", id, flags, want)
	}
	overflow := uint64(order.Uint32(head[12:]))
	if id+overflow >= c.hwm {
		return nil, damaged("page %d runs %d pages past the file's %d pages", id, id+overflow+1-c.hwm, c.hwm)
	}
	if c.mark(id, id+overflow) {
		return nil, damaged("page %d (pointed to by page %d) is in use twice", id, from)
	}
	if overflow == 0 {
		return head, nil
	}
	buf := make([]byte, int64(overflow+1)*c.pageSize)
	copy(buf, head)
	if _, err := c.f.ReadAt(buf[len(head):], int64(id+1)*c.pageSize); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read page %d: %w", id, pathless(err))
	}
	return buf, nil
}

// freelist checks a freelist page (Close writes one; other commits do
// not).
func (c *fileCheck) freelist(id uint64) error {
	p, err := c.read(id, 0, "freelist", bbFreelist)
	if err != nil {
		return err
	}
	first, n := uint64(bbPageHeader), uint64(order.Uint16(p[10:]))
	if n == 0xFFFF { // the count is in the first element
		if len(p) < bbPageHeader+8 {
			return damaged("freelist page %d is cut short", id)
		}
		first, n = bbPageHeader+8, order.Uint64(p[bbPageHeader:])
	}
	if n > (uint64(len(p))-first)/8 {
		return damaged("freelist page %d lists %d pages, more than it holds", id, n)
	}
	for i := range n {
		if free := order.Uint64(p[first+8*i:]); free < 2 || free >= c.hwm {
			return damaged("freelist page %d lists page %d, outside the file's %d pages", id, free, c.hwm)
		}
	}
	return nil
}

// page checks the branch or leaf page id, pointed to by page from, and
// everything below it. Its keys must be at least lo and below hi (nil: no
// bound), as bbolt's own check requires; it returns the greatest key
// below it.
func (c *fileCheck) page(id, from uint64, lo, hi []byte, depth int) ([]byte, error) {
	if depth > bbMaxTreeHeight {
		return nil, damaged("page %d is %d levels deep", id, depth)
	}
	p, err := c.read(id, from, "branch or leaf", bbBranch, bbLeaf)
	if err != nil {
		return nil, err
	}
	if order.Uint16(p[8:]) == bbLeaf {
		return c.leaf(id, p, lo, hi, depth)
	}
	n := int(order.Uint16(p[10:]))
	if n == 0 {
		return nil, damaged("branch page %d is empty", id)
	}
	var (
		prev = lo
		max  []byte
	)
	for i := range n {
		key, child, err := branchElem(id, p, i)
		if err != nil {
			return nil, err
		}
		if err := keyOrder(id, i, key, prev, hi); err != nil {
			return nil, err
		}
		next := hi
		if i+1 < n {
			if next, _, err = branchElem(id, p, i+1); err != nil {
				return nil, err
			}
		}
		if max, err = c.page(child, id, key, next, depth+1); err != nil {
			return nil, err
		}
		prev = max
	}
	return max, nil
}

// leaf checks the elements of leaf page id (p, or the inline page of a
// bucket) and the buckets they hold.
func (c *fileCheck) leaf(id uint64, p []byte, lo, hi []byte, depth int) ([]byte, error) {
	n := int(order.Uint16(p[10:]))
	if bbPageHeader+n*bbElement > len(p) {
		return nil, damaged("page %d has %d elements, more than it holds", id, n)
	}
	prev := lo
	for i := range n {
		flags, key, value, err := leafElem(id, p, i)
		if err != nil {
			return nil, err
		}
		if err := keyOrder(id, i, key, prev, hi); err != nil {
			return nil, err
		}
		prev = key
		if flags&bbBucketLeaf == 0 {
			continue
		}
		if len(value) < bbBucketHeader {
			return nil, damaged("page %d: bucket %q has a %d-byte header", id, key, len(value))
		}
		if root := order.Uint64(value); root != 0 {
			if _, err := c.page(root, id, nil, nil, depth+1); err != nil {
				return nil, err
			}
			continue
		}
		inline := value[bbBucketHeader:]
		if len(inline) < bbPageHeader || order.Uint16(inline[8:]) != bbLeaf {
			return nil, damaged("page %d: bucket %q has no leaf page inline", id, key)
		}
		if _, err := c.leaf(id, inline, nil, nil, depth+1); err != nil {
			return nil, err
		}
	}
	return prev, nil
}

// branchElem returns the key and child page id of element i of branch
// page id.
func branchElem(id uint64, p []byte, i int) ([]byte, uint64, error) {
	e := bbPageHeader + i*bbElement
	if e+bbElement > len(p) {
		return nil, 0, damaged("page %d has %d elements, more than it holds", id, order.Uint16(p[10:]))
	}
	start := e + int(order.Uint32(p[e:]))
	end := start + int(order.Uint32(p[e+4:]))
	if start < e || end < start || end > len(p) {
		return nil, 0, damaged("page %d: element %d lies outside the page", id, i)
	}
	return p[start:end], order.Uint64(p[e+8:]), nil
}

// leafElem returns the flags, key and value of element i of leaf page id
// (p).
func leafElem(id uint64, p []byte, i int) (flags uint32, key, value []byte, err error) {
	e := bbPageHeader + i*bbElement
	if e+bbElement > len(p) {
		return 0, nil, nil, damaged("page %d has %d elements, more than it holds", id, order.Uint16(p[10:]))
	}
	start := e + int(order.Uint32(p[e+4:]))
	kend := start + int(order.Uint32(p[e+8:]))
	vend := kend + int(order.Uint32(p[e+12:]))
	if start < e || kend < start || vend < kend || vend > len(p) {
		return 0, nil, nil, damaged("page %d: element %d lies outside the page", id, i)
	}
	return order.Uint32(p[e:]), p[start:kend], p[kend:vend], nil
}

// pathless returns the cause of an error about the file (Open's prefix
// names it already).
func pathless(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// keyOrder checks key i of page id against the key before it (or the
// page's lower bound) and the page's upper bound, as bbolt's check does.
func keyOrder(id uint64, i int, key, prev, hi []byte) error {
	switch {
	case i == 0 && prev != nil && bytes.Compare(prev, key) > 0:
		return damaged("page %d: its first key is below the bound its parent gives", id)
	case i > 0 && bytes.Compare(prev, key) >= 0:
		return damaged("page %d: key %d is out of order", id, i)
	case hi != nil && bytes.Compare(key, hi) >= 0:
		return damaged("page %d: key %d is at or above the bound its parent gives", id, i)
	}
	return nil
}
