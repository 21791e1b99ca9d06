package cli

import (
	"runtime/debug"
	"strconv"
)

// The garbage collector's settings of `paystate serve` when the
// environment sets none. Go's default (GOGC=100) collects whenever the heap
// has doubled; paystate's live heap is small (tens of MiB) and every
// request allocates, so at full speed the collector runs often. Collecting
// at 5 × the live heap instead (serveGCPercent) cut about a quarter of a
// webhook's CPU (172 → 131 µs, docs/benchmarks-history.md). serveMemoryLimit is a soft
// limit: near it the collector runs as often as it must, so the heap stays
// under it unless the live heap itself is larger. 128 MiB is half a 256 MiB
// container, and kept the whole gain in the webhook benchmark (64, 128 and
// 192 MiB gave the same ratio; docs/benchmarks-history.md). GOGC and GOMEMLIMIT, when
// set, win (the Go runtime reads them at start).
const (
	serveGCPercent   = 400
	serveMemoryLimit = 128 << 20
)

// tuneGC applies serveGCPercent and serveMemoryLimit unless GOGC or
// GOMEMLIMIT is set, and says what is in force, for the log.
func tuneGC(getenv func(string) string) (gogc, memLimit string) {
	gogc, memLimit = getenv("GOGC"), getenv("GOMEMLIMIT")
	if gogc == "" {
		debug.SetGCPercent(serveGCPercent)
		gogc = strconv.Itoa(serveGCPercent)
	}
	if memLimit == "" {
		debug.SetMemoryLimit(serveMemoryLimit)
		memLimit = strconv.Itoa(serveMemoryLimit>>20) + "MiB"
	}
	return gogc, memLimit
}
