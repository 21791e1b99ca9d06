package httpd

import "github.com/valyala/fasthttp"

func (s *Server) handleListDeliveries(rc *fasthttp.RequestCtx, _ []string) error {
	return notImplemented(rc)
}
func (s *Server) handleRetryDelivery(rc *fasthttp.RequestCtx, _ []string) error {
	return notImplemented(rc)
}
func (s *Server) handleGetCustomer(rc *fasthttp.RequestCtx, _ []string) error {
	return notImplemented(rc)
}
