package httpd_test

import (
	"context"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/httpd"
	"github.com/paystate/paystate/pay"
)

// scrape reads GET /metrics of d and parses it as Prometheus does, failing
// the test on anything the parser refuses (a second HELP or TYPE line of a
// family, a bucket without le, ...). It returns the families and the text.
func scrape(t *testing.T, d *dashServer) (map[string]*dto.MetricFamily, string) {
	t.Helper()
	a := d.do("GET", "/metrics", "", "", nil)
	if a.status != http.StatusOK {
		t.Fatalf("GET /metrics: status=%d: %.300s", a.status, a.body)
	}
	if ct := a.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("Content-Type=%q, want the Prometheus text format", ct)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(a.body))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams, a.body
}

// TestServer_Metrics: every family of /metrics has a TYPE and a HELP text;
// paystate's histograms are Prometheus histograms (le buckets, _sum and
// _count); the build, Go runtime and process metrics are there; and
// paystate_payments counts the stored payments by status. Not parallel:
// paystate_payments is a gauge of the process-wide registry, which only
// this test's server sets.
func TestServer_Metrics(t *testing.T) {
	d := newDashServerWith(t, func(s *httpd.Server) { s.Counts = s.Payments.(*finalize.Payments) }, dashKey)
	auth := map[string]string{"Authorization": "Bearer " + dashKey}

	// Payments of several statuses, through the API.
	statuses := []string{"captured", "captured", "failed", "processing", "requires_action", ""}
	for i, st := range statuses {
		id := d.createPayment(dashKey)
		if st == "" {
			continue // stays created
		}
		body := fmt.Sprintf(`{"status":%q,"provider_ref":"psp_metrics_%d"}`, st, i)
		if a := d.do("POST", "/v1/payments/"+id+"/sync", "application/json", body, auth); a.status != http.StatusOK {
			t.Fatalf("sync %s: status=%d: %s", st, a.status, a.body)
		}
	}

	fams, text := scrape(t, d)
	if len(fams) < 50 {
		t.Fatalf("%d families in /metrics, want paystate's, the Go runtime's and the process's", len(fams))
	}
	for name, mf := range fams {
		if mf.GetType() == dto.MetricType_UNTYPED || !strings.Contains(text, "\n# TYPE "+name+" ") && !strings.HasPrefix(text, "# TYPE "+name+" ") {
			t.Errorf("family %s has no TYPE line (parsed as %s)", name, mf.GetType())
		}
		if strings.TrimSpace(mf.GetHelp()) == "" {
			t.Errorf("family %s has no HELP text", name)
		}
	}

	// Histograms: le buckets, _sum and _count; never VictoriaMetrics'
	// vmrange buckets, which histogram_quantile cannot use.
	if strings.Contains(text, "vmrange") {
		t.Error("/metrics has vmrange buckets")
	}
	var histograms []string
	for name, mf := range fams {
		if mf.GetType() != dto.MetricType_HISTOGRAM || !strings.HasPrefix(name, "paystate_") {
			continue
		}
		histograms = append(histograms, name)
		for _, m := range mf.GetMetric() {
			h := m.GetHistogram()
			if len(h.GetBucket()) < 5 {
				t.Errorf("%s%v: %d buckets, want le buckets", name, m.GetLabel(), len(h.GetBucket()))
			}
		}
		if len(mf.GetMetric()) == 0 {
			continue // registered, nothing observed yet in this process
		}
		for _, suffix := range []string{`_bucket`, `_sum`, `_count`} {
			// _sum and _count of a histogram without labels have none.
			if !strings.Contains(text, "\n"+name+suffix+"{") && !strings.Contains(text, "\n"+name+suffix+" ") {
				t.Errorf("histogram %s: no %s series", name, suffix)
			}
		}
		if !strings.Contains(text, `le="+Inf"`) {
			t.Errorf("histogram %s: no +Inf bucket", name)
		}
	}
	if !slices.Contains(histograms, "paystate_http_request_duration_seconds") {
		t.Fatalf("histograms %v: want paystate_http_request_duration_seconds", histograms)
	}
	h := findMetric(fams["paystate_http_request_duration_seconds"], "route", "/v1/payments/{id}/sync")
	if h == nil {
		t.Fatal("no request duration histogram for the route /v1/payments/{id}/sync")
	}
	if got, want := h.GetHistogram().GetSampleCount(), uint64(len(statuses)-1); got < want {
		t.Errorf("sync duration histogram: count=%d, want at least %d", got, want)
	}

	// The build, the Go runtime, the process.
	bi := fams["paystate_build_info"]
	if bi.GetType() != dto.MetricType_GAUGE || len(bi.GetMetric()) != 1 || bi.GetMetric()[0].GetGauge().GetValue() != 1 {
		t.Fatalf("paystate_build_info: %v, want one gauge at 1", bi)
	}
	var labels []string
	for _, l := range bi.GetMetric()[0].GetLabel() {
		labels = append(labels, l.GetName())
		if l.GetName() == "goversion" && !strings.HasPrefix(l.GetValue(), "go1.") {
			t.Errorf("paystate_build_info goversion=%q", l.GetValue())
		}
		if l.GetName() == "version" && l.GetValue() == "" {
			t.Error("paystate_build_info has an empty version")
		}
	}
	slices.Sort(labels)
	if got, want := strings.Join(labels, ","), "goversion,revision,version"; got != want {
		t.Errorf("paystate_build_info labels=%s, want %s", got, want)
	}
	for _, name := range []string{"go_goroutines", "go_memstats_heap_inuse_bytes", "go_gc_duration_seconds", "process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds"} {
		if fams[name] == nil {
			t.Errorf("no %s in /metrics", name)
		}
	}

	// Payments by status, every status exported.
	pm := fams["paystate_payments"]
	if pm.GetType() != dto.MetricType_GAUGE {
		t.Fatalf("paystate_payments: type %s, want gauge", pm.GetType())
	}
	want := map[string]float64{"created": 1, "processing": 1, "requires_action": 1, "captured": 2, "failed": 1,
		"finalize_pending": 0, "expired": 0, "refunded": 0}
	for st, n := range want {
		m := findMetric(pm, "status", st)
		if m == nil {
			t.Errorf("paystate_payments{status=%q} missing", st)
			continue
		}
		if got := m.GetGauge().GetValue(); got != n {
			t.Errorf("paystate_payments{status=%q}=%g, want %g", st, got, n)
		}
	}
	if got, want := len(pm.GetMetric()), len(want); got != want {
		t.Errorf("paystate_payments has %d series, want %d", got, want)
	}

	// The gauge follows the next change at the next scrape.
	id := d.createPayment(dashKey)
	if a := d.do("POST", "/v1/payments/"+id+"/sync", "application/json", `{"status":"captured","provider_ref":"psp_metrics_more"}`, auth); a.status != http.StatusOK {
		t.Fatalf("sync: status=%d: %s", a.status, a.body)
	}
	fams, _ = scrape(t, d)
	if got := findMetric(fams["paystate_payments"], "status", "captured").GetGauge().GetValue(); got != 3 {
		t.Errorf("after one more capture: paystate_payments{status=\"captured\"}=%g, want 3", got)
	}
}

// findMetric returns the series of mf whose label name has value, or nil.
func findMetric(mf *dto.MetricFamily, name, value string) *dto.Metric {
	for _, m := range mf.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == name && l.GetValue() == value {
				return m
			}
		}
	}
	return nil
}

// declaredMetric matches a metric declared through the registry
// (metrics.NewCounter, GetOrCreateGauge, ...), named by a literal, maybe
// inside fmt.Sprintf for its labels.
var declaredMetric = regexp.MustCompile("metrics\\.(?:New|GetOrCreate)[A-Za-z]*\\(\\s*(?:fmt\\.Sprintf\\(\\s*)?[`\"](paystate_[a-z0-9_]+)")

// sourceFiles returns the module's Go files that are not tests, with their
// text.
func sourceFiles(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir("..", func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() && (strings.HasPrefix(e.Name(), ".") && path != ".." || e.Name() == "testdata" || e.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if e.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		out[path] = string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMetrics_Documented: every metric family paystate declares anywhere
// in the module has a HELP text in /metrics and a section in
// docs/metrics.md, and the page documents no family that is gone; so a
// new metric cannot ship unexplained, whether or not a test scrapes it.
func TestMetrics_Documented(t *testing.T) {
	t.Parallel()
	declared := map[string]string{} // family -> a file declaring it
	for path, src := range sourceFiles(t) {
		for _, m := range declaredMetric.FindAllStringSubmatch(src, -1) {
			declared[m[1]] = path
		}
	}
	// The families httpd makes at the scrape.
	declared["paystate_build_info"] = "httpd/metrics.go"
	declared["paystate_payments"] = "httpd/metrics.go"
	if len(declared) < 30 {
		t.Fatalf("found %d declared families, want every paystate_ metric: is the pattern still right?", len(declared))
	}
	doc, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^### `(paystate_[a-z0-9_]+)`").FindAllStringSubmatch(string(doc), -1) {
		documented[m[1]] = true
	}
	for name, path := range declared {
		if strings.TrimSpace(httpd.MetricHelp[name]) == "" {
			t.Errorf("%s (declared in %s) has no HELP text in httpd/metrics.go's metricHelp", name, path)
		}
		if !documented[name] {
			t.Errorf("%s (declared in %s) has no \"### `%s`\" section in docs/metrics.md", name, path, name)
		}
	}
	for name := range documented {
		if _, ok := declared[name]; !ok {
			t.Errorf("docs/metrics.md documents %s, which no code declares", name)
		}
	}
	for name := range httpd.MetricHelp {
		if _, ok := declared[name]; strings.HasPrefix(name, "paystate_") && !ok {
			t.Errorf("metricHelp has a text for %s, which no code declares", name)
		}
	}
}

// loggedDuration matches zerolog's Dur and Durs, which log a bare number
// of DurationFieldUnit ("timeout":10000).
var loggedDuration = regexp.MustCompile(`\.Durs?\(`)

// TestLogs_DurationsCarryUnits: no log line of paystate writes a duration
// as a bare number; Stringer (time.Duration.String: "1.5s") carries the
// unit.
func TestLogs_DurationsCarryUnits(t *testing.T) {
	t.Parallel()
	for path, src := range sourceFiles(t) {
		for i, line := range strings.Split(src, "\n") {
			if loggedDuration.MatchString(line) {
				t.Errorf("%s:%d logs a duration without its unit (use Stringer): %s", path, i+1, strings.TrimSpace(line))
			}
		}
	}
}

// promtool returns the path of Prometheus' promtool. Without one the test
// is skipped, except in CI (CI set), where .ci/run installs it
// (scripts/install-promtool.sh) and its absence fails the test.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("promtool is not installed: run scripts/install-promtool.sh")
		}
		t.Skip("promtool is not installed (scripts/install-promtool.sh)")
	}
	return p
}

// TestMetrics_Promtool: promtool's lint finds nothing to say about
// paystate's families (the Go runtime's and the process's names are the
// library's), and the alert rules pass `promtool check rules` and their
// unit tests (deploy/prometheus/alerts_test.yml).
func TestMetrics_Promtool(t *testing.T) {
	tool := promtool(t)
	d := newDashServerWith(t, func(s *httpd.Server) { s.Counts = s.Payments.(*finalize.Payments) }, dashKey)
	d.createPayment(dashKey)
	a := d.do("GET", "/metrics", "", "", nil)
	cmd := exec.Command(tool, "check", "metrics")
	cmd.Stdin = strings.NewReader(a.body)
	out, _ := cmd.CombinedOutput() // exit 3 for the library's names
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "paystate_") || strings.Contains(l, "error") {
			t.Errorf("promtool check metrics: %s", l)
		}
	}
	for _, args := range [][]string{{"check", "rules", "alerts.yml"}, {"test", "rules", "alerts_test.yml"}} {
		cmd := exec.Command(tool, args...)
		cmd.Dir = filepath.Join("..", "deploy", "prometheus")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestServer_StoredStateGauges: paystate_review_queue_size and
// paystate_disputes_open are read from the store at the scrape, like
// paystate_payments: an item queued for review a moment ago (an
// amount_mismatch webhook) and a dispute just opened are in the next
// scrape, with no sweeper pass (none runs here). The dashboard's Review
// badge shows this gauge (app.js, pollMetrics). Not parallel: the gauges
// are of the process-wide registry.
func TestServer_StoredStateGauges(t *testing.T) {
	d := newDashServerWith(t, func(s *httpd.Server) { s.Counts = s.Payments.(*finalize.Payments) }, dashKey)
	gauge := func(name string) float64 {
		t.Helper()
		fams, _ := scrape(t, d)
		mf := fams[name]
		if mf == nil || len(mf.GetMetric()) != 1 {
			t.Fatalf("%s: %v, want one gauge", name, mf)
		}
		return mf.GetMetric()[0].GetGauge().GetValue()
	}
	if got := gauge("paystate_review_queue_size"); got != 0 {
		t.Fatalf("paystate_review_queue_size=%g on an empty store, want 0", got)
	}

	// A webhook whose amount is not the payment's puts it on review.
	id := d.createPayment(dashKey)
	body := fmt.Sprintf(`{"id":"evt_gauge","type":"payment.captured","created":%d,"data":{"payment_id":%q,"provider_ref":"psp_gauge","amount":999,"currency":"EUR"}}`, d.clock.Now().Unix(), id)
	a := d.sendWebhook("evt_gauge", "application/json", body)
	if a.status != http.StatusOK {
		t.Fatalf("webhook: status=%d: %s", a.status, a.body)
	}
	if got, want := gauge("paystate_review_queue_size"), 1.0; got != want {
		t.Errorf("paystate_review_queue_size=%g right after an item was queued, want %g", got, want)
	}

	// A dispute opened on a captured payment.
	other := d.createPayment(dashKey)
	if a := d.do("POST", "/v1/payments/"+other+"/sync", "application/json", `{"status":"captured","provider_ref":"psp_gauge_2"}`, bearer()); a.status != http.StatusOK {
		t.Fatalf("sync: status=%d: %s", a.status, a.body)
	}
	payments := d.srv.Payments.(*finalize.Payments)
	if _, err := payments.Finalizer.Finalize(context.Background(), pay.Observation{PaymentID: other, Source: pay.SourceWebhook,
		Dispute: &pay.DisputeChange{ID: "dp_gauge", Amount: 1500, Status: pay.DisputeNeedsResponse}}); err != nil {
		t.Fatal(err)
	}
	if got, want := gauge("paystate_disputes_open"), 1.0; got != want {
		t.Errorf("paystate_disputes_open=%g right after a dispute opened, want %g", got, want)
	}
}
