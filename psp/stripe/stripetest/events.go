package stripetest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestdataDir returns the module's testdata/stripe directory, found by
// walking up from the working directory to go.mod.
func TestdataDir(tb testing.TB) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "testdata", "stripe")
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Fatal("testdata/stripe: no go.mod above the working directory")
		}
		dir = parent
	}
}

// EventSpec says how Event changes a payload of testdata/stripe. Empty
// fields keep the file's value.
type EventSpec struct {
	Type       string    // the file: testdata/stripe/<Type>.json; required
	Rename     string    // the event's type, if not Type
	ID         string    // the event id
	Created    time.Time // the event's created
	APIVersion string    // the event's api_version
	// PaymentIntent is the PaymentIntent id: data.object.id of a
	// payment_intent event, data.object.payment_intent of a charge or a
	// Checkout Session.
	PaymentIntent string
	// Session is data.object.id of a checkout.session event.
	Session string
	// PaymentID sets data.object.metadata.paystate_payment_id (and a
	// Checkout Session's client_reference_id); NoPaymentID removes the
	// metadata.
	PaymentID   string
	NoPaymentID bool
	// Object, if not nil, edits data.object last.
	Object func(obj map[string]any)
}

// Event returns a Stripe event body built from the payload of spec.Type in
// testdata/stripe.
func Event(tb testing.TB, spec EventSpec) []byte {
	tb.Helper()
	raw, err := os.ReadFile(filepath.Join(TestdataDir(tb), spec.Type+".json"))
	if err != nil {
		tb.Fatal(err)
	}
	var ev map[string]any
	if err := json.Unmarshal(raw, &ev); err != nil {
		tb.Fatalf("%s.json: %v", spec.Type, err)
	}
	obj := ev["data"].(map[string]any)["object"].(map[string]any)
	if spec.Rename != "" {
		ev["type"] = spec.Rename
	}
	if spec.ID != "" {
		ev["id"] = spec.ID
	}
	if !spec.Created.IsZero() {
		ev["created"] = spec.Created.Unix()
	}
	if spec.APIVersion != "" {
		ev["api_version"] = spec.APIVersion
	}
	if spec.PaymentIntent != "" {
		switch obj["object"] {
		case "charge", "checkout.session":
			obj["payment_intent"] = spec.PaymentIntent
		default:
			obj["id"] = spec.PaymentIntent
		}
	}
	if spec.Session != "" {
		obj["id"] = spec.Session
	}
	if spec.PaymentID != "" && obj["object"] == "checkout.session" {
		obj["client_reference_id"] = spec.PaymentID
	}
	md, _ := obj["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
		obj["metadata"] = md
	}
	if spec.PaymentID != "" {
		md["paystate_payment_id"] = spec.PaymentID
	}
	if spec.NoPaymentID {
		delete(md, "paystate_payment_id")
	}
	if spec.Object != nil {
		spec.Object(obj)
	}
	b, err := json.Marshal(ev)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}
