package httpd

import (
	"fmt"

	"github.com/valyala/fasthttp"

	"github.com/paystate/paystate/api"
)

// openapiRoutes are the routes of the API reference (package api): the
// OpenAPI document as written at GET /openapi.yaml and in JSON at GET
// /openapi.json. They need no API key: the document describes the API,
// it holds no data. The JSON is converted once, here, when Open builds
// the route table; a document that could not be converted (a test makes
// sure it can) makes /openapi.json answer 500.
func (s *Server) openapiRoutes() []route {
	js, err := api.JSON()
	return []route{
		{method: "GET", pattern: "/openapi.yaml", handle: s.handleOpenAPIYAML},
		{method: "GET", pattern: "/openapi.json", handle: func(rc *fasthttp.RequestCtx, _ []string) error {
			return s.handleOpenAPIJSON(rc, js, err)
		}},
	}
}

// handleOpenAPIYAML answers the OpenAPI document as written.
func (s *Server) handleOpenAPIYAML(rc *fasthttp.RequestCtx, _ []string) error {
	writeDocument(rc, "application/yaml", api.YAML())
	return nil
}

// handleOpenAPIJSON answers the OpenAPI document in JSON, converted when
// the server opened (js, or why it could not be, err).
func (s *Server) handleOpenAPIJSON(rc *fasthttp.RequestCtx, js []byte, err error) error {
	if err != nil {
		return fmt.Errorf("convert the OpenAPI document: %w", err)
	}
	writeDocument(rc, "application/json", js)
	return nil
}

// writeDocument answers the document b. It changes only with the binary,
// but a client revalidates it, so an upgrade is seen at once.
func writeDocument(rc *fasthttp.RequestCtx, contentType string, b []byte) {
	rc.Response.Header.SetContentType(contentType)
	rc.Response.Header.Set("Cache-Control", "no-cache")
	rc.SetStatusCode(fasthttp.StatusOK)
	rc.SetBody(b)
}
