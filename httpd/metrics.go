package httpd

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"

	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/internal/buildinfo"
)

// PaymentCounter is what GET /metrics asks at every scrape for the gauges
// of stored state: paystate_payments, paystate_review_queue_size and
// paystate_disputes_open (finalize.Payments).
type PaymentCounter interface {
	// CountStored counts the payments in each status, the review queue
	// and the open disputes, in one read.
	CountStored(ctx context.Context) (finalize.StoredCounts, error)
}

// The gauges of stored state other than paystate_payments, set at each
// scrape from the store.
var (
	reviewQueueGauge  = metrics.GetOrCreateGauge(`paystate_review_queue_size`, nil)
	disputesOpenGauge = metrics.GetOrCreateGauge(`paystate_disputes_open`, nil)
)

// countTimeout bounds the count of payments of one scrape.
const countTimeout = 5 * time.Second

func init() {
	// Every family gets its # HELP and # TYPE lines; the library writes
	// the HELP line without text, which writeHelp fills in.
	metrics.ExposeMetadata(true)
}

// buildInfoOnce registers paystate_build_info at the first scrape, when
// the command has set the injected version.
var buildInfoOnce sync.Once

// handleMetrics exposes every metric in the Prometheus text format: the
// process-wide registry of package metrics (Go runtime and process
// metrics included), the build, and the stored state (the payments per
// status, the review queue, the open disputes), read from storage at the
// scrape. It needs no API key: metrics carry counts, never
// payment data or secrets, and no label value comes from a request.
func (s *Server) handleMetrics(rc *fasthttp.RequestCtx, _ []string) error {
	buildInfoOnce.Do(func() {
		bi := buildinfo.Get()
		metrics.NewGauge(fmt.Sprintf(`paystate_build_info{version=%q,revision=%q,goversion=%q}`, bi.Version, bi.Revision, bi.GoVersion),
			func() float64 { return 1 })
	})
	if s.Counts != nil {
		// Scrapes that arrive together share one count: it walks an
		// index of every payment (BenchmarkPaymentCounts: 12 ms for
		// 100,000 payments on bbolt).
		_, err, _ := s.counting.Do("", func() (any, error) {
			ctx, cancel := context.WithTimeout(s.ctx, countTimeout)
			defer cancel()
			c, err := s.Counts.CountStored(ctx)
			if err != nil {
				return nil, err
			}
			for st, n := range c.ByStatus {
				metrics.GetOrCreateGauge(fmt.Sprintf(`paystate_payments{status=%q}`, st), nil).Set(float64(n))
			}
			reviewQueueGauge.Set(float64(c.ReviewQueue))
			disputesOpenGauge.Set(float64(c.OpenDisputes))
			return nil, nil
		})
		if err != nil {
			// The gauges keep their last values; the scrape goes on.
			s.log(rc).Warn().Err(err).Msg("metrics: count stored payments, review items and disputes")
		}
	}
	var buf bytes.Buffer
	metrics.WritePrometheus(&buf, true)
	metrics.WriteFDMetrics(&buf)
	rc.Response.Header.SetContentType("text/plain; version=0.0.4; charset=utf-8")
	rc.Response.Header.Set("Cache-Control", "no-store")
	writeHelp(rc, buf.Bytes())
	return nil
}

// writeHelp copies an exposition to w with the text of every "# HELP
// family" line filled in from metricHelp (the library has no place for
// it). A family missing from metricHelp keeps its bare HELP line; the
// tests require a text for each one paystate declares.
func writeHelp(w *fasthttp.RequestCtx, exposition []byte) {
	sc := bufio.NewScanner(bytes.NewReader(exposition))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if name, ok := bytes.CutPrefix(line, []byte("# HELP ")); ok && bytes.IndexByte(name, ' ') < 0 {
			if text := metricHelp[string(name)]; text != "" {
				fmt.Fprintf(w, "# HELP %s %s\n", name, text)
				continue
			}
		}
		_, _ = w.Write(line)
		_, _ = w.Write([]byte{'\n'})
	}
}

// metricHelp is the HELP text of every metric family /metrics exposes,
// paystate's own (declared next to the code that observes them; their
// meaning and alerts are in docs/metrics.md) and those of the Go runtime
// and the process (github.com/VictoriaMetrics/metrics). A text has no
// backslash and no newline, which the format would need escaped.
var metricHelp = map[string]string{
	// The build and the stored state (httpd, at each scrape).
	"paystate_build_info":        "Always 1; the labels name the running build: release or module version, VCS revision (-modified for a dirty checkout), Go version.",
	"paystate_payments":          "Payments stored, by status, counted from the storage index at each scrape (every instance on a shared database reports the same totals).",
	"paystate_review_queue_size": "Items on the review queue waiting for a human, counted from the store at each scrape.",
	"paystate_disputes_open":     "Disputes needs_response or under_review, counted from the store at each scrape.",

	// HTTP (httpd).
	"paystate_http_requests_total":           "HTTP requests answered, by route pattern (unmatched, unparsed) and status code.",
	"paystate_http_request_duration_seconds": "Time from reading an HTTP request to writing its answer, by route pattern.",

	// finalize.
	"paystate_finalize_outcomes_total":          "Observations committed by finalize, by outcome: flipped (the status changed), update, duplicate, stale, anomaly, rejected, and conflict (counted again when the expected version was not the stored one).",
	"paystate_finalize_version_conflicts_total": "Observations whose expected version was not the stored one; the rules ran on the fresh record.",
	"paystate_inbox_deferrals_total":            "Webhook events the inbox could not apply at once (lease held, payment unknown yet, an error) and retried later with backoff.",
	"paystate_webhooks_total":                   "PSP webhooks received, by provider (unknown for a provider not configured) and outcome: accepted, duplicate, ignored, rejected, unknown_provider.",
	"paystate_webhooks_ignored_total":           "PSP webhooks acknowledged but not stored, by provider and reason: not_ours (an object paystate did not create), unhandled_type.",
	"paystate_pull_triggers_total":              "Webhooks that are triggers (Mollie), by provider and outcome: stored, coalesced, unknown, throttled, dropped.",
	"paystate_pull_fetches_total":               "Fetches the triggers caused, by provider and outcome: ok, error, ours, unknown.",
	"paystate_pull_unknown_total":               "Unknown references whose fetch named no payment of paystate's (forged ids).",
	"paystate_payments_adopted_total":           "Payments made from a PSP's evidence, not created through the API (a Stripe Payment Link's completed Checkout Session).",
	"paystate_lease_acquisitions_total":         "Payment leases taken for slow work (sweeper, review resolution).",
	"paystate_lease_contention_total":           "Lease acquisitions refused because another holder had the lease; the work was deferred.",
	"paystate_lease_lost_total":                 "Work under a lease whose finalize was refused because the lease had run out and been taken over (fencing).",
	"paystate_lease_ttl_headroom_low":           "Lease holders whose p99 work time is above half of lease.ttl: 0 while every holder has headroom.",

	// sweeper.
	"paystate_sweeper_candidates_total":      "Payments the sweeper looked at (expiry and reconciliation candidates).",
	"paystate_sweeper_drift_corrected_total": "Payments the sweeper moved to the status the PSP reported (drift corrected), by the status they moved to.",
	"paystate_sweeper_expired_total":         "Payments the sweeper expired, or cancelled at the PSP, after payment.expire_after.",
	"paystate_sweeper_lease_held_total":      "Sweeper candidates skipped for a pass because another worker held their lease.",
	"paystate_sweeper_errors_total":          "Sweeper candidates that failed (a PSP or storage error), logged and retried next pass.",
	"paystate_sweeper_reviewed_total":        "Payments the sweeper put on the review queue (PSP cannot tell, or still open past sweeper.give_up_after).",
	"paystate_sweeper_unresolved":            "Review items with reason unresolved after the last sweeper pass.",
	"paystate_sweeper_drift_alert":           "1 when the last sweeper pass corrected more than max(3, 3 times the trailing average) payments, else 0.",
	"paystate_sweeper_pass_duration_seconds": "Time one sweeper pass took: expiry, reconciliation and housekeeping.",
	"paystate_sweeper_purged_total":          "Records removed after their retention, by kind: idempotency_keys, processed_events, deliveries, outbox.",

	// ripple and the NATS relay.
	"paystate_ripple_deliveries_total":   "Attempts of ripple deliveries recorded, by effect (loyalty, retention, receipt, webhook, nats) and outcome: done, skipped, retry, dead.",
	"paystate_ripple_outbox_lag_seconds": "Age of the oldest outbox record not yet delivered to every target; 0 when all are.",
	"paystate_ripple_dead_letters":       "Deliveries that used up their attempts (dead letters) waiting for a replay.",
	"paystate_relay_nats_connected":      "1 while the NATS relay is connected to a server, 0 while it reconnects (only with [relay.nats]).",

	// Providers.
	"paystate_stripe_webhook_version_mismatch_total": "Stripe events whose API version is not the one the Stripe library speaks.",
	"paystate_paypal_cert_fetches_total":             "PayPal webhook signing certificates fetched from an allowed host (each is cached by URL).",

	// Storage.
	"paystate_store_write_transactions_total": "Write transactions asked of the bbolt store (every Update).",
	"paystate_store_commits_total":            "bbolt commits; write transactions divided by commits is how many writes a group commit carries.",
	"paystate_store_pages_written_total":      "Pages the bbolt commits wrote.",
	"paystate_store_pg_transactions_total":    "PostgreSQL transactions begun, retries included.",
	"paystate_store_pg_retries_total":         "PostgreSQL transactions run again after a serialization failure or deadlock.",
	"paystate_store_pg_commits_total":         "PostgreSQL transactions committed.",

	// The Go runtime.
	"go_info":                             "Always 1; the label is the Go version that built the binary.",
	"go_info_ext":                         "Always 1; the labels are the compiler, GOARCH, GOOS and GOROOT of the build.",
	"go_goroutines":                       "Goroutines that exist now.",
	"go_threads":                          "OS threads the Go runtime created.",
	"go_gomaxprocs":                       "GOMAXPROCS: OS threads that may run Go code at once.",
	"go_cpu_count":                        "Logical CPUs usable by the process.",
	"go_cgo_calls_count":                  "cgo calls made by the process.",
	"go_memlimit_bytes":                   "The Go runtime's soft memory limit (GOMEMLIMIT).",
	"go_sched_latencies_seconds":          "Time goroutines waited in the scheduler before running (Go runtime histogram, no _sum and _count).",
	"go_mutex_wait_seconds_total":         "Time goroutines spent blocked on a sync.Mutex or sync.RWMutex.",
	"go_gc_duration_seconds":              "Stop-the-world pauses of the garbage collector.",
	"go_gc_pauses_seconds":                "Stop-the-world pauses of the garbage collector (Go runtime histogram, no _sum and _count).",
	"go_gc_forced_count":                  "Garbage collections forced by the application (runtime.GC).",
	"go_gc_cpu_seconds_total":             "CPU time spent by the garbage collector.",
	"go_gc_mark_assist_cpu_seconds_total": "CPU time goroutines spent assisting the garbage collector.",
	"go_scavenge_cpu_seconds_total":       "CPU time spent returning memory to the OS.",
	"go_memstats_alloc_bytes":             "Bytes of allocated heap objects.",
	"go_memstats_alloc_bytes_total":       "Bytes allocated for heap objects since the start, freed ones included.",
	"go_memstats_buck_hash_sys_bytes":     "Bytes of memory in profiling bucket hash tables.",
	"go_memstats_frees_total":             "Heap objects freed since the start.",
	"go_memstats_gc_cpu_fraction":         "Fraction of the available CPU time used by the garbage collector since the start.",
	"go_memstats_gc_sys_bytes":            "Bytes of memory in garbage collection metadata.",
	"go_memstats_heap_alloc_bytes":        "Bytes of allocated heap objects.",
	"go_memstats_heap_idle_bytes":         "Bytes in idle (unused) heap spans.",
	"go_memstats_heap_inuse_bytes":        "Bytes in in-use heap spans.",
	"go_memstats_heap_objects":            "Allocated heap objects.",
	"go_memstats_heap_released_bytes":     "Bytes of physical memory returned to the OS.",
	"go_memstats_heap_sys_bytes":          "Bytes of heap memory obtained from the OS.",
	"go_memstats_last_gc_time_seconds":    "Time the last garbage collection finished, in seconds since 1970.",
	"go_memstats_lookups_total":           "Pointer lookups performed by the runtime.",
	"go_memstats_mallocs_total":           "Heap objects allocated since the start.",
	"go_memstats_mcache_inuse_bytes":      "Bytes of allocated mcache structures.",
	"go_memstats_mcache_sys_bytes":        "Bytes of memory obtained from the OS for mcache structures.",
	"go_memstats_mspan_inuse_bytes":       "Bytes of allocated mspan structures.",
	"go_memstats_mspan_sys_bytes":         "Bytes of memory obtained from the OS for mspan structures.",
	"go_memstats_next_gc_bytes":           "Heap size at which the next garbage collection starts.",
	"go_memstats_other_sys_bytes":         "Bytes of memory in miscellaneous off-heap runtime allocations.",
	"go_memstats_stack_inuse_bytes":       "Bytes in stack spans.",
	"go_memstats_stack_sys_bytes":         "Bytes of stack memory obtained from the OS.",
	"go_memstats_sys_bytes":               "Bytes of memory obtained from the OS in all.",

	// The process (Linux /proc and the cgroup).
	"process_cpu_seconds_total":                     "CPU time of the process, user and system.",
	"process_cpu_seconds_user_total":                "CPU time of the process in user space.",
	"process_cpu_seconds_system_total":              "CPU time of the process in the kernel (system calls).",
	"process_major_pagefaults_total":                "Page faults that needed disk I/O.",
	"process_minor_pagefaults_total":                "Page faults resolved without disk I/O.",
	"process_num_threads":                           "OS threads of the process.",
	"process_resident_memory_bytes":                 "Resident memory of the process.",
	"process_resident_memory_peak_bytes":            "Peak resident memory of the process.",
	"process_resident_memory_anon_bytes":            "Resident anonymous memory of the process.",
	"process_resident_memory_file_bytes":            "Resident file-backed memory of the process (the mapped database file included).",
	"process_resident_memory_shared_bytes":          "Resident shared memory of the process.",
	"process_virtual_memory_bytes":                  "Virtual memory of the process.",
	"process_virtual_memory_peak_bytes":             "Peak virtual memory of the process.",
	"process_start_time_seconds":                    "Time the process started, in seconds since 1970.",
	"process_open_fds":                              "Open file descriptors.",
	"process_max_fds":                               "Maximum number of open file descriptors.",
	"process_io_read_bytes_total":                   "Bytes the process read, from any source.",
	"process_io_written_bytes_total":                "Bytes the process wrote, to any destination.",
	"process_io_read_syscalls_total":                "Read system calls of the process.",
	"process_io_write_syscalls_total":               "Write system calls of the process.",
	"process_io_storage_read_bytes_total":           "Bytes the process read from storage devices.",
	"process_io_storage_written_bytes_total":        "Bytes the process wrote to storage devices.",
	"process_pressure_cpu_waiting_seconds_total":    "Time tasks of the process's cgroup waited for a CPU (pressure stall information).",
	"process_pressure_cpu_stalled_seconds_total":    "Time all tasks of the process's cgroup were stalled waiting for a CPU.",
	"process_pressure_io_waiting_seconds_total":     "Time tasks of the process's cgroup waited for I/O.",
	"process_pressure_io_stalled_seconds_total":     "Time all tasks of the process's cgroup were stalled waiting for I/O.",
	"process_pressure_memory_waiting_seconds_total": "Time tasks of the process's cgroup waited for memory.",
	"process_pressure_memory_stalled_seconds_total": "Time all tasks of the process's cgroup were stalled waiting for memory.",
	"process_cgroup_cpu_throttled_seconds_total":    "Time the process's cgroup was throttled by its CPU limit.",
}
