package httpd

import (
	"net/http/pprof"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"
)

// pprofHandlers are net/http/pprof's handlers behind fasthttp's adaptor,
// by the last segment of their path; any other name is a runtime/pprof
// profile (heap, goroutine, allocs, block, mutex, threadcreate), served by
// pprof.Index.
var pprofHandlers = map[string]fasthttp.RequestHandler{
	"cmdline": fasthttpadaptor.NewFastHTTPHandlerFunc(pprof.Cmdline),
	"profile": fasthttpadaptor.NewFastHTTPHandlerFunc(pprof.Profile),
	"symbol":  fasthttpadaptor.NewFastHTTPHandlerFunc(pprof.Symbol),
	"trace":   fasthttpadaptor.NewFastHTTPHandlerFunc(pprof.Trace),
}

var pprofIndex = fasthttpadaptor.NewFastHTTPHandlerFunc(pprof.Index)

// pprofRoutes are the routes of /debug/pprof when Server.Pprof is set, none
// otherwise (the paths answer 404). They need the API key: a profile shows
// the process's command line, its goroutines' stacks and its memory.
//
//	go tool pprof -http=: -H 'Authorization: Bearer <key>' http://host/debug/pprof/profile?seconds=30
//
// (or curl with the header and go tool pprof on the file).
func (s *Server) pprofRoutes() []route {
	if !s.Pprof {
		return nil
	}
	return []route{
		{method: "GET", pattern: "/debug/pprof", auth: true, handle: s.handlePprof},
		{method: "GET", pattern: "/debug/pprof/{name}", auth: true, handle: s.handlePprof},
		{method: "POST", pattern: "/debug/pprof/symbol", auth: true, handle: s.handlePprof},
	}
}

// handlePprof serves the index (no name), a named handler or a named
// profile. pprof.Index reads the profile's name from the path itself.
func (s *Server) handlePprof(rc *fasthttp.RequestCtx, params []string) error {
	h := pprofIndex
	if len(params) == 1 {
		if named, ok := pprofHandlers[params[0]]; ok {
			h = named
		}
	} else if string(rc.Path()) == "/debug/pprof/symbol" {
		h = pprofHandlers["symbol"]
	}
	h(rc)
	return nil
}
