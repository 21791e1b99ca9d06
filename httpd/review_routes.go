package httpd

import "github.com/valyala/fasthttp"

func (s *Server) handleListReview(rc *fasthttp.RequestCtx, _ []string) error {
	return notImplemented(rc)
}
func (s *Server) handleResolveReview(rc *fasthttp.RequestCtx, _ []string) error {
	return notImplemented(rc)
}
