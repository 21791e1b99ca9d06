package httpd

import (
	"bufio"
	"fmt"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/paystate/paystate/pay"
)

// handleBackup streams a consistent copy of the database (a bbolt read
// transaction's WriteTo), so a running paystate can be backed up without
// stopping it.
func (s *Server) handleBackup(rc *fasthttp.RequestCtx, _ []string) error {
	if s.Backup == nil {
		return pay.Errorf(pay.EUNSUPPORTED, "this storage backend has no backup endpoint")
	}
	name := fmt.Sprintf("paystate-%s.db", s.now().Format("20060102T150405Z"))
	rc.Response.Header.SetContentType("application/octet-stream")
	rc.Response.Header.Set("Content-Disposition", `attachment; filename="`+name+`"`)
	rc.Response.Header.Set("Cache-Control", "no-store")
	rid := requestID(rc)
	start := time.Now()
	rc.SetBodyStreamWriter(func(w *bufio.Writer) {
		n, err := s.Backup.WriteTo(w)
		if err == nil {
			err = w.Flush()
		}
		if err != nil {
			// The status line is gone; the client sees a truncated body
			// and its copy fails to open.
			s.Logger.Error().Err(err).Str("request_id", rid).Msg("backup stream")
			return
		}
		s.Logger.Info().Str("request_id", rid).Int64("bytes", n).Dur("duration", time.Since(start)).Msg("backup streamed")
	})
	return nil
}
