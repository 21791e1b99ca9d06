// Package api is paystate's API reference: openapi.yaml, the OpenAPI 3.1
// document of every route the HTTP server serves (the merchant API, review,
// deliveries, customers, ledger, backup, PSP webhooks, health, metrics,
// the dashboard), every request and answer body, every error code, and
// the catalog of the events sent to merchant webhooks. It is embedded in
// the binary and served at GET /openapi.yaml and GET /openapi.json.
//
// The document is written by hand and kept true by tests: it must build
// as an OpenAPI 3.1 model without errors (libopenapi), its examples must
// match their schemas, its error codes must be the server's, its routes
// the server's routes (httpd), and the requests and answers of the
// end-to-end tests must validate against it (daemon, with
// libopenapi-validator). docs/api.md is generated from it:
//
//	go generate ./api
package api

//go:generate go run ./gen -o ../docs/api.md

import (
	_ "embed"
	"sync"

	"sigs.k8s.io/yaml"
)

//go:embed openapi.yaml
var yamlDoc []byte

// jsonDoc converts the document to JSON the first time it is called (the
// HTTP server does when it opens) and returns that conversion ever after.
// The error is why it could not (a test makes sure it can).
var jsonDoc = sync.OnceValues(func() ([]byte, error) { return yaml.YAMLToJSON(yamlDoc) })

// YAML returns the document as written. The caller must not modify it.
func YAML() []byte { return yamlDoc }

// JSON returns the document converted to JSON (object keys in sorted
// order), converting it on the first call only. The caller must not
// modify it.
func JSON() ([]byte, error) { return jsonDoc() }
