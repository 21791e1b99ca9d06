package main

import (
	"bytes"
	"os"
	"testing"

	"github.com/paystate/paystate/api"
)

// TestRender_UpToDate: docs/api.md is what the document gives. Run
// go generate ./api after changing api/openapi.yaml.
func TestRender_UpToDate(t *testing.T) {
	t.Parallel()
	got, err := Render(api.YAML())
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("docs/api.md is not what api/openapi.yaml gives (%d bytes, want %d): run go generate ./api", len(want), len(got))
	}
}

// TestRender_Contents: the page names every route and every event.
func TestRender_Contents(t *testing.T) {
	t.Parallel()
	page, err := Render(api.YAML())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		"`POST /v1/payments`", "`GET /v1/payments/{id}`", "`POST /webhooks/{provider}`", "`GET /openapi.json`",
		"### payment.captured", "### payment.refunded", "### Payment\n", "`invalid_request`", "### ErrorDetail", "| `param` |",
	} {
		if !bytes.Contains(page, []byte(s)) {
			t.Errorf("the page does not contain %q", s)
		}
	}
}
