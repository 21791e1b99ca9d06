package api_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/pb33f/go-yaml"
	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	verrors "github.com/pb33f/libopenapi-validator/errors"
	"github.com/pb33f/libopenapi-validator/schema_validation"
	"github.com/pb33f/libopenapi/datamodel/high/base"
	v3 "github.com/pb33f/libopenapi/datamodel/high/v3"
	"github.com/pb33f/libopenapi/orderedmap"

	"github.com/paystate/paystate/api"
	"github.com/paystate/paystate/pay"
)

// describe is a validation error with the failures it carries.
func describe(e *verrors.ValidationError) string {
	var b strings.Builder
	b.WriteString(e.Error())
	for _, f := range e.SchemaValidationErrors {
		fmt.Fprintf(&b, "\n\t%s (line %d): %s", f.FieldPath, f.Line, f.Reason)
	}
	return b.String()
}

// model builds the v3 model of doc, failing the test on any error.
func model(t *testing.T, doc []byte) (libopenapi.Document, *v3.Document) {
	t.Helper()
	d, err := libopenapi.NewDocument(doc)
	if err != nil {
		t.Fatalf("NewDocument: %v", err)
	}
	m, err := d.BuildV3Model()
	if err != nil {
		t.Fatalf("BuildV3Model: %v", err)
	}
	return d, &m.Model
}

func TestDocument_BuildsV31Model(t *testing.T) {
	t.Parallel()
	d, m := model(t, api.YAML())
	if got, want := d.GetVersion(), "3.1.1"; got != want {
		t.Fatalf("openapi=%s, want %s", got, want)
	}
	if m.Paths == nil || m.Paths.PathItems.Len() == 0 {
		t.Fatal("the document has no paths")
	}
	// Every schema resolves: a $ref to nothing or a malformed schema is
	// a build error of its proxy.
	for name, sp := range m.Components.Schemas.FromOldest() {
		if sp.Schema() == nil {
			t.Errorf("schema %s does not build: %v", name, sp.GetBuildError())
		}
	}
}

func TestDocument_ValidOpenAPI31(t *testing.T) {
	t.Parallel()
	d, _ := model(t, api.YAML())
	v, errs := validator.NewValidator(d)
	if len(errs) > 0 {
		t.Fatalf("NewValidator: %v", errs)
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		for _, e := range verrs {
			t.Error(describe(e))
		}
	}
}

// operations returns every operation of the document's paths and
// webhooks, named "METHOD path" (webhooks: "webhook name").
func operations(m *v3.Document) map[string]*v3.Operation {
	ops := map[string]*v3.Operation{}
	for path, item := range m.Paths.PathItems.FromOldest() {
		for method, op := range item.GetOperations().FromOldest() {
			ops[strings.ToUpper(method)+" "+path] = op
		}
	}
	for name, item := range m.Webhooks.FromOldest() {
		for method, op := range item.GetOperations().FromOldest() {
			ops["webhook "+name+" "+strings.ToUpper(method)] = op
		}
	}
	return ops
}

func TestDocument_Operations(t *testing.T) {
	t.Parallel()
	_, m := model(t, api.YAML())
	tags := map[string]bool{}
	for _, tg := range m.Tags {
		tags[tg.Name] = true
	}
	ids := map[string]string{}
	for name, op := range operations(m) {
		if op.OperationId == "" || op.Summary == "" {
			t.Errorf("%s: operationId %q, summary %q: both are required", name, op.OperationId, op.Summary)
		}
		if prev, ok := ids[op.OperationId]; ok {
			t.Errorf("%s: operationId %s is %s's too", name, op.OperationId, prev)
		}
		ids[op.OperationId] = name
		if len(op.Tags) == 0 {
			t.Errorf("%s: no tag", name)
		}
		for _, tg := range op.Tags {
			if !tags[tg] {
				t.Errorf("%s: tag %q is not declared in tags", name, tg)
			}
		}
		if op.Responses == nil || op.Responses.Codes.Len() == 0 {
			t.Errorf("%s: no response", name)
		}
	}
}

// examples returns every example of the document with the schema it must
// match, by where it is.
func examples(t *testing.T, m *v3.Document) map[string][2]any {
	t.Helper()
	out := map[string][2]any{}
	decode := func(where string, n *yaml.Node) any {
		var v any
		if err := n.Decode(&v); err != nil {
			t.Fatalf("%s: decode example: %v", where, err)
		}
		return v
	}
	media := func(where string, content *orderedmap.Map[string, *v3.MediaType]) {
		for mt, c := range content.FromOldest() {
			if c.Example != nil && c.Schema != nil {
				out[where+" "+mt] = [2]any{c.Schema.Schema(), decode(where, c.Example)}
			}
		}
	}
	for name, sp := range m.Components.Schemas.FromOldest() {
		if s := sp.Schema(); s != nil && s.Example != nil {
			out["schema "+name] = [2]any{s, decode(name, s.Example)}
		}
	}
	for name, r := range m.Components.Responses.FromOldest() {
		media("response "+name, r.Content)
	}
	for name, op := range operations(m) {
		if op.RequestBody != nil {
			media(name+" request", op.RequestBody.Content)
		}
		for code, r := range op.Responses.Codes.FromOldest() {
			media(name+" "+code, r.Content)
		}
	}
	return out
}

func TestDocument_ExamplesMatchTheirSchemas(t *testing.T) {
	t.Parallel()
	_, m := model(t, api.YAML())
	sv := schema_validation.NewSchemaValidator()
	ex := examples(t, m)
	if len(ex) < 10 {
		t.Fatalf("only %d examples found", len(ex))
	}
	for where, e := range ex {
		if ok, errs := sv.ValidateSchemaObject(e[0].(*base.Schema), e[1]); !ok {
			for _, err := range errs {
				t.Errorf("%s: %s", where, describe(err))
			}
		}
	}
}

// TestDocument_EventCatalog: the merchant event catalog is pay's list of
// event types (pay.EventTypes, which config checks [[webhooks]] events
// against): one event per status a payment can move to (ripple sends
// "payment." + the new status of every real transition, pay.EventType)
// and the events of refunds and disputes, each with an example of its own
// type.
func TestDocument_EventCatalog(t *testing.T) {
	t.Parallel()
	_, m := model(t, api.YAML())
	want := pay.EventTypes()
	var got []string
	for name, item := range m.Webhooks.FromOldest() {
		got = append(got, name)
		if item.Post == nil || item.Post.RequestBody == nil {
			t.Errorf("webhook %s: no POST with a body", name)
			continue
		}
		c, ok := item.Post.RequestBody.Content.Get("application/json")
		if !ok || c.Example == nil {
			t.Errorf("webhook %s: no application/json example", name)
			continue
		}
		var ex struct {
			Type string `yaml:"type"`
			Data struct {
				Status  string         `yaml:"status"`
				Refund  map[string]any `yaml:"refund"`
				Dispute map[string]any `yaml:"dispute"`
			} `yaml:"data"`
		}
		if err := c.Example.Decode(&ex); err != nil {
			t.Fatalf("webhook %s: %v", name, err)
		}
		object := strings.HasPrefix(name, "payment.refund.") && ex.Data.Refund != nil ||
			strings.HasPrefix(name, "payment.dispute.") && ex.Data.Dispute != nil
		if ex.Type != name || "payment."+ex.Data.Status != name && !object {
			t.Errorf("webhook %s: the example is of type %q, status %q", name, ex.Type, ex.Data.Status)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("webhooks=%v, want %v", got, want)
	}
	ev := m.Components.Schemas.GetOrZero("MerchantEvent").Schema()
	var enum []string
	for _, n := range ev.Properties.GetOrZero("type").Schema().Enum {
		enum = append(enum, n.Value)
	}
	if !slices.Equal(enum, want) {
		t.Errorf("MerchantEvent.type enum=%v, want %v", enum, want)
	}
}

// TestDocument_StatusEnum: the status enum is pay's list of statuses.
func TestDocument_StatusEnum(t *testing.T) {
	t.Parallel()
	_, m := model(t, api.YAML())
	var got, want []string
	for _, n := range m.Components.Schemas.GetOrZero("PaymentStatus").Schema().Enum {
		got = append(got, n.Value)
	}
	for _, st := range pay.Statuses {
		want = append(want, string(st))
	}
	if !slices.Equal(got, want) {
		t.Errorf("PaymentStatus enum=%v, want %v", got, want)
	}
}

// TestJSON: the JSON form is the same document: it builds a model with
// the same paths, webhooks and schemas.
func TestJSON(t *testing.T) {
	t.Parallel()
	js, err := api.JSON()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(js), "{") {
		t.Fatalf("JSON starts with %.20q", js)
	}
	_, fromYAML := model(t, api.YAML())
	_, fromJSON := model(t, js)
	count := func(m *v3.Document) string {
		return fmt.Sprintf("%d paths, %d operations, %d schemas", m.Paths.PathItems.Len(), len(operations(m)), m.Components.Schemas.Len())
	}
	if got, want := count(fromJSON), count(fromYAML); got != want {
		t.Errorf("JSON has %s, YAML %s", got, want)
	}
	if again, _ := api.JSON(); &again[0] != &js[0] {
		t.Error("JSON converted the document again")
	}
}
