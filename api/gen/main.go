// Command gen writes docs/api.md, the API reference page, from the OpenAPI
// document of package api: the routes by tag with their parameters,
// bodies and answers, the merchant webhook events with their examples,
// and every schema. It is run by go generate in package api:
//
//	go generate ./api
//
// (go run ./api/gen -o docs/api.md from the repository's root does the
// same). A test fails while the checked-in page differs from what the
// document gives.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/pb33f/go-yaml"
	"github.com/pb33f/libopenapi"
	"github.com/pb33f/libopenapi/datamodel/high/base"
	v3 "github.com/pb33f/libopenapi/datamodel/high/v3"
	"github.com/pb33f/libopenapi/orderedmap"

	"github.com/paystate/paystate/api"
)

func main() {
	out := flag.String("o", "", "write the page to this file (default: standard output)")
	flag.Parse()
	page, err := Render(api.YAML())
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
	if *out == "" {
		_, err = os.Stdout.Write(page)
	} else {
		err = os.WriteFile(*out, page, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

// Render returns the Markdown page of an OpenAPI 3.1 document.
func Render(doc []byte) ([]byte, error) {
	d, err := libopenapi.NewDocument(doc)
	if err != nil {
		return nil, fmt.Errorf("read the document: %w", err)
	}
	m, err := d.BuildV3Model()
	if err != nil {
		return nil, fmt.Errorf("build the model: %w", err)
	}
	r := &renderer{m: &m.Model}
	r.page()
	return r.b.Bytes(), nil
}

type renderer struct {
	m *v3.Document
	b bytes.Buffer
}

func (r *renderer) printf(format string, args ...any) { fmt.Fprintf(&r.b, format, args...) }

// page writes the whole page: the introduction, the routes by tag, the
// merchant events and the schemas.
func (r *renderer) page() {
	r.printf("# %s reference\n\n", r.m.Info.Title)
	r.printf("<!-- Generated from api/openapi.yaml by `go generate ./api`: edit the document, not this page. -->\n\n")
	r.printf("Every paystate serves this reference as OpenAPI %s at `GET /openapi.yaml` and `GET /openapi.json`.\n\n", r.m.Version)
	r.printf("%s\n", strings.TrimSpace(r.m.Info.Description))

	ops := r.operationsByTag()
	r.printf("\n## Contents\n\n")
	for _, tg := range r.m.Tags {
		if len(ops[tg.Name]) > 0 {
			r.printf("- [%s](#%s)\n", tg.Name, anchor(tg.Name))
		}
	}
	r.printf("- [Merchant webhook events](#merchant-webhook-events)\n")
	r.printf("- [Error codes](#errorcode)\n")
	r.printf("- [Schemas](#schemas)\n")

	for _, tg := range r.m.Tags {
		if len(ops[tg.Name]) == 0 {
			continue
		}
		r.printf("\n## %s\n\n%s\n", tg.Name, strings.TrimSpace(tg.Description))
		for _, op := range ops[tg.Name] {
			r.operation(op)
		}
	}

	r.printf("\n## Merchant webhook events\n\n")
	r.printf("%s\n", strings.TrimSpace(r.schema("MerchantEvent").Description))
	first := true
	for name, item := range r.m.Webhooks.FromOldest() {
		op := item.Post
		if first {
			r.printf("\nEach event is a POST with the headers:\n\n")
			r.parameters(op.Parameters)
			r.printf("\nAnswers: %s\n", oneLine(firstResponse(op).Description))
			first = false
		}
		r.printf("\n### %s\n\n%s\n", name, strings.TrimSpace(op.Description))
		if c, ok := op.RequestBody.Content.Get("application/json"); ok && c.Example != nil {
			r.printf("\n```json\n%s\n```\n", exampleJSON(c.Example))
		}
	}

	r.printf("\n## Schemas\n")
	for name, sp := range r.m.Components.Schemas.FromOldest() {
		r.schemaSection(name, sp.Schema())
	}
}

// route is one operation with its method and path.
type route struct {
	method, path string
	op           *v3.Operation
}

// operationsByTag groups the operations by their first tag, in the
// document's order.
func (r *renderer) operationsByTag() map[string][]route {
	out := map[string][]route{}
	for path, item := range r.m.Paths.PathItems.FromOldest() {
		for method, op := range item.GetOperations().FromOldest() {
			if len(op.Tags) == 0 {
				continue
			}
			op.Parameters = append(append([]*v3.Parameter(nil), item.Parameters...), op.Parameters...)
			out[op.Tags[0]] = append(out[op.Tags[0]], route{strings.ToUpper(method), path, op})
		}
	}
	return out
}

// operation writes one route: what it does, its parameters, body and
// answers.
func (r *renderer) operation(rt route) {
	op := rt.op
	r.printf("\n### %s\n\n`%s %s`", op.Summary, rt.method, rt.path)
	r.printf(" · %s\n", r.auth(op))
	if d := strings.TrimSpace(op.Description); d != "" {
		r.printf("\n%s\n", d)
	}
	if len(op.Parameters) > 0 {
		r.printf("\n**Parameters**\n\n")
		r.parameters(op.Parameters)
	}
	if rb := op.RequestBody; rb != nil {
		req := "required"
		if rb.Required == nil || !*rb.Required {
			req = "optional"
		}
		for mt, c := range rb.Content.FromOldest() {
			r.printf("\n**Request body** (`%s`, %s): %s\n", mt, req, r.typeOf(c.Schema))
			if c.Example != nil {
				r.printf("\n```json\n%s\n```\n", exampleJSON(c.Example))
			}
		}
	}
	r.printf("\n**Responses**\n\n| status | body | meaning |\n| --- | --- | --- |\n")
	for code, resp := range op.Responses.Codes.FromOldest() {
		r.printf("| %s | %s | %s |\n", code, r.bodies(resp.Content), cell(resp.Description))
	}
}

// auth says how an operation is authenticated.
func (r *renderer) auth(op *v3.Operation) string {
	sec := r.m.Security
	if op.Security != nil {
		sec = op.Security
	}
	if len(sec) == 0 {
		return "no authentication"
	}
	var names []string
	for _, req := range sec {
		for name := range req.Requirements.KeysFromOldest() {
			names = append(names, "`"+name+"`")
		}
	}
	return "authentication: " + strings.Join(names, " or ")
}

// parameters writes a table of parameters.
func (r *renderer) parameters(ps []*v3.Parameter) {
	r.printf("| name | in | type | required | description |\n| --- | --- | --- | --- | --- |\n")
	for _, p := range ps {
		req := ""
		if p.Required != nil && *p.Required {
			req = "yes"
		}
		r.printf("| `%s` | %s | %s | %s | %s |\n", p.Name, p.In, r.typeOf(p.Schema), req, cell(p.Description))
	}
}

// bodies names the schema of each media type of an answer.
func (r *renderer) bodies(content *orderedmap.Map[string, *v3.MediaType]) string {
	var out []string
	for mt, c := range content.FromOldest() {
		out = append(out, fmt.Sprintf("`%s` %s", mt, r.typeOf(c.Schema)))
	}
	if len(out) == 0 {
		return "—"
	}
	return strings.Join(out, "<br>")
}

// schema returns the component schema of that name.
func (r *renderer) schema(name string) *base.Schema {
	return r.m.Components.Schemas.GetOrZero(name).Schema()
}

// schemaSection writes one component schema: its description, its values
// or its fields.
func (r *renderer) schemaSection(name string, s *base.Schema) {
	r.printf("\n### %s\n\n", name)
	if d := strings.TrimSpace(s.Description); d != "" {
		r.printf("%s\n\n", d)
	}
	if s.Properties == nil || s.Properties.Len() == 0 {
		r.printf("%s\n", r.describe(s))
		return
	}
	r.fields(s)
	if s.Example != nil {
		r.printf("\nExample:\n\n```json\n%s\n```\n", exampleJSON(s.Example))
	}
}

// fields writes the table of an object's fields, nested objects' fields
// named with dots.
func (r *renderer) fields(s *base.Schema) {
	r.printf("| field | type | required | description |\n| --- | --- | --- | --- |\n")
	var walk func(prefix string, s *base.Schema)
	walk = func(prefix string, s *base.Schema) {
		required := map[string]bool{}
		for _, f := range s.Required {
			required[f] = true
		}
		for name, sp := range s.Properties.FromOldest() {
			req := ""
			if required[name] {
				req = "yes"
			}
			fs := sp.Schema()
			desc := fs.Description
			if sp.IsReference() {
				desc = "" // the link says it, in the schema's own section
			}
			r.printf("| `%s%s` | %s | %s | %s |\n", prefix, name, r.typeOf(sp), req, cell(desc))
			if !sp.IsReference() && fs.Properties != nil && fs.Properties.Len() > 0 {
				walk(prefix+name+".", fs)
			}
		}
	}
	walk("", s)
}

// typeOf is a short description of a schema: a link to a component, or
// its type with its constraints.
func (r *renderer) typeOf(sp *base.SchemaProxy) string {
	if sp == nil {
		return "—"
	}
	if sp.IsReference() {
		name := strings.TrimPrefix(sp.GetReference(), "#/components/schemas/")
		return fmt.Sprintf("[%s](#%s)", name, anchor(name))
	}
	return r.describe(sp.Schema())
}

// describe is typeOf of a schema that is not a reference.
func (r *renderer) describe(s *base.Schema) string {
	if s == nil {
		return "—"
	}
	var alts []*base.SchemaProxy
	var sep string
	switch {
	case len(s.OneOf) > 0:
		alts, sep = s.OneOf, " or "
	case len(s.AnyOf) > 0:
		alts, sep = s.AnyOf, " or "
	case len(s.AllOf) > 0:
		alts, sep = s.AllOf, " and "
	}
	if alts != nil {
		var parts []string
		for _, a := range alts {
			parts = append(parts, r.typeOf(a))
		}
		return strings.Join(parts, sep)
	}
	if s.Const != nil {
		return "`" + scalarJSON(s.Const) + "`"
	}
	t := strings.Join(s.Type, " or ")
	if t == "" {
		t = "any"
	}
	if t == "array" && s.Items != nil && s.Items.IsA() {
		t = "array of " + r.typeOf(s.Items.A)
	}
	if s.Format != "" {
		t += " (" + s.Format + ")"
	}
	var notes []string
	if len(s.Enum) > 0 {
		var vs []string
		for _, n := range s.Enum {
			vs = append(vs, "`"+n.Value+"`")
		}
		notes = append(notes, "one of "+strings.Join(vs, ", "))
	}
	if s.Pattern != "" {
		notes = append(notes, "pattern `"+strings.ReplaceAll(s.Pattern, "|", `\|`)+"`")
	}
	if s.MinLength != nil || s.MaxLength != nil {
		notes = append(notes, bounds("length", s.MinLength, s.MaxLength))
	}
	if s.Minimum != nil || s.Maximum != nil {
		notes = append(notes, rangeOf(s.Minimum, s.Maximum))
	}
	if s.Default != nil {
		notes = append(notes, "default `"+scalarJSON(s.Default)+"`")
	}
	if len(notes) > 0 {
		t += ", " + strings.Join(notes, ", ")
	}
	return t
}

// bounds describes a length's bounds.
func bounds(what string, min, max *int64) string {
	switch {
	case min != nil && max != nil:
		return fmt.Sprintf("%s %d to %d", what, *min, *max)
	case min != nil:
		return fmt.Sprintf("%s at least %d", what, *min)
	default:
		return fmt.Sprintf("%s at most %d", what, *max)
	}
}

// rangeOf describes a number's bounds.
func rangeOf(min, max *float64) string {
	f := func(v float64) string { return fmt.Sprintf("%.0f", v) }
	switch {
	case min != nil && max != nil:
		return "from " + f(*min) + " to " + f(*max)
	case min != nil:
		return "at least " + f(*min)
	default:
		return "at most " + f(*max)
	}
}

// firstResponse is the first answer an operation lists.
func firstResponse(op *v3.Operation) *v3.Response {
	for _, resp := range op.Responses.Codes.FromOldest() {
		return resp
	}
	return &v3.Response{}
}

// cell is text made fit for a table cell: one line, no bare pipe.
func cell(s string) string { return strings.ReplaceAll(oneLine(s), "|", `\|`) }

// oneLine joins the lines of s; a Markdown list becomes a sentence.
func oneLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(strings.TrimSpace(l), "- ")
	}
	return strings.Join(lines, " ")
}

// anchor is the GitHub anchor of a heading.
func anchor(heading string) string {
	var b strings.Builder
	for _, c := range strings.ToLower(heading) {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_':
			b.WriteRune(c)
		case c == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

// exampleJSON is an example as indented JSON, its keys in the document's
// order.
func exampleJSON(n *yaml.Node) string {
	var b bytes.Buffer
	writeNode(&b, n)
	var out bytes.Buffer
	if err := json.Indent(&out, b.Bytes(), "", "  "); err != nil {
		return b.String()
	}
	return out.String()
}

// writeNode writes a YAML node as compact JSON, mappings in order.
func writeNode(b *bytes.Buffer, n *yaml.Node) {
	switch n.Kind {
	case yaml.DocumentNode:
		writeNode(b, n.Content[0])
	case yaml.MappingNode:
		b.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			if i > 0 {
				b.WriteByte(',')
			}
			k, _ := json.Marshal(n.Content[i].Value)
			b.Write(k)
			b.WriteByte(':')
			writeNode(b, n.Content[i+1])
		}
		b.WriteByte('}')
	case yaml.SequenceNode:
		b.WriteByte('[')
		for i, c := range n.Content {
			if i > 0 {
				b.WriteByte(',')
			}
			writeNode(b, c)
		}
		b.WriteByte(']')
	case yaml.AliasNode:
		writeNode(b, n.Alias)
	default:
		b.WriteString(scalarJSON(n))
	}
}

// scalarJSON is a YAML scalar in JSON.
func scalarJSON(n *yaml.Node) string {
	var v any
	if err := n.Decode(&v); err != nil {
		v = n.Value
	}
	js, err := json.Marshal(v)
	if err != nil {
		return n.Value
	}
	return string(js)
}
