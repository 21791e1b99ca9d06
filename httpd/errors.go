package httpd

import (
	"errors"

	"github.com/valyala/fasthttp"

	"github.com/paystate/paystate/pay"
)

// statusOf is the one table from error codes to HTTP statuses.
var statusOf = map[string]int{
	pay.EINVALID:      fasthttp.StatusBadRequest,
	pay.ESIGNATURE:    fasthttp.StatusBadRequest,
	pay.EKEYMISSING:   fasthttp.StatusBadRequest,
	pay.EUNAUTHORIZED: fasthttp.StatusUnauthorized,
	pay.ENOTFOUND:     fasthttp.StatusNotFound,
	pay.ENOTALLOWED:   fasthttp.StatusMethodNotAllowed,
	pay.ECONFLICT:     fasthttp.StatusConflict,
	pay.ELEASEHELD:    fasthttp.StatusConflict,
	pay.ELEASELOST:    fasthttp.StatusConflict,
	pay.EKEYINUSE:     fasthttp.StatusConflict,
	pay.ETOOLARGE:     fasthttp.StatusRequestEntityTooLarge,
	pay.EKEYREUSED:    fasthttp.StatusUnprocessableEntity,
	pay.EUNSUPPORTED:  fasthttp.StatusUnprocessableEntity,
	pay.EINTERNAL:     fasthttp.StatusInternalServerError,
	pay.EPSP:          fasthttp.StatusBadGateway,
	pay.EUNAVAILABLE:  fasthttp.StatusServiceUnavailable,
	pay.EDISKFULL:     fasthttp.StatusServiceUnavailable,

	pay.EUNKNOWNPROVIDER: fasthttp.StatusBadRequest,
	pay.EMISDIRECTED:     fasthttp.StatusMisdirectedRequest,
	pay.EPROXIED:         fasthttp.StatusForbidden,
	pay.EMEDIATYPE:       fasthttp.StatusUnsupportedMediaType,
}

// HTTPStatus returns the HTTP status of an error code.
func HTTPStatus(code string) int {
	if st, ok := statusOf[code]; ok {
		return st
	}
	return fasthttp.StatusInternalServerError
}

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code      string `json:"code"`
	Message   string `json:"message"`
	RequestID string `json:"request_id,omitempty"`
}

// writeError answers with err in the SPEC's shape. An internal error is
// logged with the request id (a recovered panic with its stack), and the
// client sees only that id.
func (s *Server) writeError(rc *fasthttp.RequestCtx, err error) {
	code := pay.ErrorCode(err)
	msg := pay.ErrorMessage(err)
	rid := requestID(rc)
	if code == pay.EINTERNAL || code == pay.EUNAVAILABLE || code == pay.EDISKFULL {
		ev := s.Logger.Error().Err(err).Str("request_id", rid).Str("path", string(rc.Path()))
		var pe *panicError
		if errors.As(err, &pe) {
			ev = ev.Bytes("stack", pe.stack)
		}
		ev.Msg("request failed")
		if code == pay.EINTERNAL {
			msg = "internal error; quote request id " + rid
		}
	}
	writeJSON(rc, HTTPStatus(code), errorBody{Error: errorDetail{Code: code, Message: msg, RequestID: rid}})
}
