package httpd

import "github.com/valyala/fasthttp"

// AddPanicRoute adds, before Open, a route GET path whose handler panics
// with v: the way a test reaches the recovery in serve, which no real
// route should take.
func AddPanicRoute(s *Server, path string, v any) {
	s.extraRoutes = append(s.extraRoutes, route{method: "GET", pattern: path,
		handle: func(*fasthttp.RequestCtx, []string) error { panic(v) }})
}
