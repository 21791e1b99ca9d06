package httpd

// MetricHelp is metricHelp, for the test that every declared metric has
// a HELP text.
var MetricHelp = metricHelp
