package httpd

import "github.com/valyala/fasthttp"

func (s *Server) handleBackup(rc *fasthttp.RequestCtx, _ []string) error { return notImplemented(rc) }
