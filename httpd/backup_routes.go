package httpd

import (
	"fmt"
	"io"
	"net"
	"time"

	"github.com/rs/zerolog"
	"github.com/valyala/fasthttp"

	"github.com/paystate/paystate/pay"
)

// handleBackup answers a consistent copy of the database, so a running
// paystate can be backed up without stopping it. The copy is taken first,
// to a local file (Backup.Snapshot), and that file is streamed: no read
// transaction is held while the client downloads, however slowly, so
// writers are never held up by it. A copy that cannot be taken is an
// error answer, not a truncated body.
func (s *Server) handleBackup(rc *fasthttp.RequestCtx, _ []string) error {
	if s.Backup == nil {
		return pay.Errorf(pay.EUNSUPPORTED, "this storage backend has no backup endpoint")
	}
	start := time.Now()
	snap, size, err := s.Backup.Snapshot()
	if err != nil {
		return err
	}
	name := fmt.Sprintf("paystate-%s.db", s.Now().UTC().Format("20060102T150405Z"))
	rc.Response.Header.SetContentType("application/octet-stream")
	rc.Response.Header.Set("Content-Disposition", `attachment; filename="`+name+`"`)
	rc.Response.Header.Set("Cache-Control", "no-store")
	// fasthttp closes the stream when the body is sent or the connection
	// fails; closing removes the copy. The server's write timeout would
	// cut any download longer than it: the stream moves the deadline on
	// at every read, so only a client that takes nothing for that long is
	// cut off.
	rc.SetBodyStream(&backupStream{
		r: snap, size: size, start: start, rid: requestID(rc), log: s.Logger,
		conn: rc.Conn(), stall: s.RequestTimeout + 5*time.Second,
	}, int(size))
	return nil
}

// backupStream is the copy being sent; Close logs how it went.
type backupStream struct {
	r     io.ReadCloser
	size  int64
	sent  int64
	start time.Time
	rid   string
	log   zerolog.Logger
	conn  net.Conn
	stall time.Duration // longest wait for the client to take more
}

// Read reads the copy on, once the client has taken what came before.
func (b *backupStream) Read(p []byte) (int, error) {
	_ = b.conn.SetWriteDeadline(time.Now().Add(b.stall))
	n, err := b.r.Read(p)
	b.sent += int64(n)
	return n, err
}

// Close removes the copy and logs whether all of it was sent.
func (b *backupStream) Close() error {
	err := b.r.Close()
	if b.sent < b.size {
		// The status line is gone; the client sees a short body (the
		// Content-Length says so) and its copy fails to open.
		b.log.Error().Str("request_id", b.rid).Int64("bytes", b.sent).Int64("size", b.size).Msg("backup stream ended early")
		return err
	}
	b.log.Info().Str("request_id", b.rid).Int64("bytes", b.sent).Stringer("duration", time.Since(b.start).Round(time.Microsecond)).Msg("backup streamed")
	return err
}
