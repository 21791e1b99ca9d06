package httpd

import (
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/rs/zerolog"
	"github.com/valyala/fasthttp"
)

// MaxRequestIDLen is the longest X-Request-Id taken from a request.
const MaxRequestIDLen = 128

// Keys of the request's user values.
type ctxKey int

const (
	ridKey ctxKey = iota // the request id, a string
	logKey               // the request's logger, a *zerolog.Logger (log)
)

// beginRequest gives the request its id, taken from X-Request-Id or
// made, and echoes it in the response.
func (s *Server) beginRequest(rc *fasthttp.RequestCtx) string {
	rid := acceptRequestID(rc.Request.Header.Peek("X-Request-Id"))
	rc.SetUserValue(ridKey, rid)
	rc.Response.Header.Set("X-Request-Id", rid)
	return rid
}

// requestID returns the id beginRequest gave the request.
func requestID(rc *fasthttp.RequestCtx) string {
	if v, ok := rc.UserValue(ridKey).(string); ok {
		return v
	}
	return ""
}

// log returns the logger for lines about the request rc: the server's,
// with the request's request_id, so that every line of a request can be
// found from its access line or from the id a client quotes. It is made
// on first use.
func (s *Server) log(rc *fasthttp.RequestCtx) *zerolog.Logger {
	if l, ok := rc.UserValue(logKey).(*zerolog.Logger); ok {
		return l
	}
	l := s.Logger.With().Str("request_id", requestID(rc)).Logger()
	rc.SetUserValue(logKey, &l)
	return &l
}

// accessLog writes the request's one access line, at info: method, route
// pattern (never the raw path), status, duration with its unit, bytes of
// the response body and the request id. The line is written when the
// handler returns; a body streamed after that with no length known in
// advance (the CSV export) is logged as streamed=true without bytes, and
// the stream's own line says how many bytes it sent.
func (s *Server) accessLog(rc *fasthttp.RequestCtx, route string, elapsed time.Duration) {
	e := s.Logger.Info().Str("request_id", requestID(rc)).
		Str("method", truncate(string(rc.Method()), 32)).Str("route", route).
		Int("status", rc.Response.StatusCode()).
		Stringer("duration", elapsed.Round(time.Microsecond))
	switch n := rc.Response.Header.ContentLength(); {
	case !rc.Response.IsBodyStream():
		e = e.Int("bytes", len(rc.Response.Body()))
	case n >= 0:
		e = e.Int("bytes", n)
	default:
		e = e.Bool("streamed", true)
	}
	e.Msg("request")
}

// acceptRequestID keeps a client's X-Request-Id when it is 1 to
// MaxRequestIDLen bytes of printable ASCII (space to tilde: it ends up in
// logs and in a response header), else makes a new one, "req_" and 24
// hex digits.
func acceptRequestID(v []byte) string {
	if n := len(v); n > 0 && n <= MaxRequestIDLen {
		ok := true
		for _, c := range v {
			if c < 0x20 || c > 0x7e {
				ok = false
				break
			}
		}
		if ok {
			return string(v)
		}
	}
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "req_" + hex.EncodeToString(b[:])
}
