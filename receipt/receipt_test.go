package receipt_test

import (
	"strings"
	"testing"

	"github.com/paystate/paystate/receipt"
)

// TestParseTemplates: a template that does not parse, or names a
// field a receipt does not have, is refused when it is parsed.
func TestParseTemplates(t *testing.T) {
	t.Parallel()
	for name, src := range map[string]string{
		"Syntax":         `Thanks {{.Amount`,
		"UnknownField":   `Thanks {{.Amout}}`,
		"SubjectUnknown": `{{define "subject"}}{{.Nope}}{{end}}ok`,
	} {
		if _, err := receipt.ParseText(src); err == nil {
			t.Errorf("text %s: parsed", name)
		}
		if name == "SubjectUnknown" {
			continue
		}
		if _, err := receipt.ParseHTML("<p>" + src + "</p>"); err == nil {
			t.Errorf("HTML %s: parsed", name)
		}
	}
	if _, err := receipt.ParseText(`{{.Merchant}} {{.OrderID}} {{.PaymentID}} {{.Amount}} {{.AmountMinor}} {{.Currency}} {{.Date}} {{.Time.Year}} {{.Email}}`); err != nil {
		t.Errorf("every field: %v", err)
	}
}

// TestParseTLSMode: the four modes of receipt.tls, spelt exactly.
func TestParseTLSMode(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"starttls", "starttls_optional", "tls", "none"} {
		if m, err := receipt.ParseTLSMode(s); err != nil || string(m) != s {
			t.Errorf("ParseTLSMode(%q)=%q, %v", s, m, err)
		}
	}
	if _, err := receipt.ParseTLSMode("STARTTLS"); err == nil {
		t.Error(`ParseTLSMode("STARTTLS") succeeded`)
	}
}

// TestTemplates_Render: the built-in templates, and a text template
// without a subject of its own, get the built-in subject; a subject over
// several lines is sent on one; a template that does not parse is named.
func TestTemplates_Render(t *testing.T) {
	t.Parallel()
	d := receipt.Data{Merchant: "Ada's Bakery", OrderID: "order-7", Amount: "12.50 EUR"}
	for name, tc := range map[string]struct {
		cfg                 receipt.Config
		subject, text, html string
	}{
		"BuiltIn":   {receipt.Config{}, "Your receipt from Ada's Bakery for order order-7", "Amount:   12.50 EUR", "<td>12.50 EUR</td>"},
		"NoSubject": {receipt.Config{TextTemplate: "Paid {{.Amount}}"}, "Your receipt from Ada's Bakery for order order-7", "Paid 12.50 EUR", "Ada&#39;s Bakery"},
		"Subject": {
			receipt.Config{TextTemplate: "{{define \"subject\"}}\n  Order {{.OrderID}}\n  paid {{end}}ok", HTMLTemplate: "<b>{{.Merchant}}</b>"},
			"Order order-7 paid", "ok", "<b>Ada&#39;s Bakery</b>",
		},
	} {
		tpl, err := receipt.ParseTemplates(tc.cfg)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		subject, text, html, err := tpl.Render(d)
		if err != nil || subject != tc.subject || !strings.Contains(text, tc.text) || !strings.Contains(html, tc.html) {
			t.Errorf("%s: Render=%q, %q, %q, %v; want subject %q, text with %q, HTML with %q", name, subject, text, html, err, tc.subject, tc.text, tc.html)
		}
	}
	if _, err := receipt.ParseTemplates(receipt.Config{HTMLTemplate: "{{.Nope}}"}); err == nil || !strings.HasPrefix(err.Error(), "HTML template: ") {
		t.Errorf("ParseTemplates with a bad HTML template=%v, want an error naming the HTML template", err)
	}
}
