package httpd

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paystate/paystate/api"
)

// openapiDoc is what these tests read of the OpenAPI document.
type openapiDoc struct {
	Paths      map[string]map[string]json.RawMessage `json:"paths"`
	Components struct {
		Parameters map[string]openapiParam `json:"parameters"`
		Schemas    struct {
			ErrorCode struct {
				Enum        []string `json:"enum"`
				Description string   `json:"description"`
			} `json:"ErrorCode"`
		} `json:"schemas"`
	} `json:"components"`
}

// openapiParam is a parameter of an operation, or a reference to one of
// the document's components.
type openapiParam struct {
	Ref  string `json:"$ref"`
	Name string `json:"name"`
	In   string `json:"in"`
}

func readOpenAPI(t *testing.T) openapiDoc {
	t.Helper()
	js, err := api.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var doc openapiDoc
	if err := json.Unmarshal(js, &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// TestOpenAPI_EveryRoute: the document describes every route of the
// route table (pprof's included) and no route the server does not have,
// and a route needs the API key exactly when the document says it needs
// authentication; a GET of the API takes exactly the query parameters the
// document declares (any other is refused, checkQuery).
func TestOpenAPI_EveryRoute(t *testing.T) {
	t.Parallel()
	doc := readOpenAPI(t)
	s := &Server{Pprof: true}
	served := map[string]bool{}
	for _, r := range s.routeTable() {
		name := r.method + " " + r.pattern
		served[name] = true
		raw, ok := doc.Paths[r.pattern][strings.ToLower(r.method)]
		if !ok {
			t.Errorf("%s is not in api/openapi.yaml", name)
			continue
		}
		var op struct {
			Security   *[]map[string][]string `json:"security"`
			Parameters []openapiParam         `json:"parameters"`
		}
		if err := json.Unmarshal(raw, &op); err != nil {
			t.Fatal(err)
		}
		open := op.Security != nil && len(*op.Security) == 0
		if r.auth == open {
			t.Errorf("%s: the route needs the API key: %v, the document says it needs authentication: %v", name, r.auth, !open)
		}
		var query []string
		for _, p := range op.Parameters {
			if ref, ok := strings.CutPrefix(p.Ref, "#/components/parameters/"); ok {
				p = doc.Components.Parameters[ref]
			}
			if p.In == "query" {
				query = append(query, p.Name)
			}
		}
		if r.checksQuery() && !slices.Equal(r.query, query) {
			t.Errorf("%s: the route takes the query parameters %q, the document declares %q", name, r.query, query)
		}
	}
	for path, item := range doc.Paths {
		for method := range item {
			switch method {
			case "get", "put", "post", "delete", "patch", "head", "options", "trace":
				if name := strings.ToUpper(method) + " " + path; !served[name] {
					t.Errorf("api/openapi.yaml describes %s, which the server does not serve", name)
				}
			}
		}
	}
}

// TestOpenAPI_ErrorCodes: the document's ErrorCode enum is every code the
// server can answer with (the status table's, in their wire names, and
// the two answered outside it), and its description gives each one the
// HTTP status the table gives it.
func TestOpenAPI_ErrorCodes(t *testing.T) {
	t.Parallel()
	doc := readOpenAPI(t)
	outside := map[string]int{"request_timeout": 408, "not_implemented": 501} // server.go parseError, notimpl.go
	want := map[string]int{}
	for code := range statusOf {
		want[WireCode(code)] = HTTPStatus(code)
	}
	for code, st := range outside {
		want[code] = st
	}
	got := slices.Clone(doc.Components.Schemas.ErrorCode.Enum)
	sort.Strings(got)
	var wantCodes []string
	for code := range want {
		wantCodes = append(wantCodes, code)
	}
	sort.Strings(wantCodes)
	if !slices.Equal(got, wantCodes) {
		t.Errorf("ErrorCode enum=%v\nwant %v", got, wantCodes)
	}
	described := map[string]int{}
	for _, m := range regexp.MustCompile("(?m)^- `([a-z_]+)` \\((\\d{3})\\)").FindAllStringSubmatch(doc.Components.Schemas.ErrorCode.Description, -1) {
		described[m[1]], _ = strconv.Atoi(m[2])
	}
	for code, st := range want {
		if got := described[code]; got != st {
			t.Errorf("ErrorCode's description gives %s the status %d, want %d", code, got, st)
		}
	}
	if len(described) != len(want) {
		t.Errorf("ErrorCode's description lists %d codes, want %d", len(described), len(want))
	}
}

// TestOpenAPI_Served: the server answers the document as written in YAML
// and converted in JSON, without an API key.
func TestOpenAPI_Served(t *testing.T) {
	t.Parallel()
	s := &Server{Addr: "127.0.0.1:0", APIKeys: []string{"k"}}
	if err := s.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	js, _ := api.JSON()
	for _, c := range []struct {
		path, contentType string
		body              []byte
	}{
		{"/openapi.yaml", "application/yaml", api.YAML()},
		{"/openapi.json", "application/json", js},
	} {
		res, err := hc.Get(s.URL() + c.path)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode != 200 || res.Header.Get("Content-Type") != c.contentType {
			t.Errorf("GET %s: %d %s, want 200 %s", c.path, res.StatusCode, res.Header.Get("Content-Type"), c.contentType)
		}
		if string(body) != string(c.body) {
			t.Errorf("GET %s: the body is not the document (%d bytes, want %d)", c.path, len(body), len(c.body))
		}
	}
}
