package httpd

import (
	"encoding/json"
	"errors"

	"github.com/valyala/fasthttp"

	"github.com/paystate/paystate/pay"
)

// Error codes about the HTTP request itself, which the domain (pay) does
// not know: the wire's error.code values, beside pay's codes.
const (
	CodeMethodNotAllowed = "method_not_allowed"
	CodeTooLarge         = "payload_too_large"
	CodeKeyMissing       = "idempotency_key_missing"
	// CodeMisdirected: the request's Host is not one this server answers
	// for (DNS rebinding in no-key mode, server.allowed_hosts with keys).
	CodeMisdirected = "misdirected_request"
	// CodeProxied: a request forwarded by a proxy reached a server without
	// API keys, which trusts only its own machine.
	CodeProxied = "proxied_request_without_api_key"
	// CodeMediaType: a request body that is not application/json.
	CodeMediaType = "unsupported_media_type"
)

// statusOf is the one table from error codes to HTTP statuses.
var statusOf = map[string]int{
	pay.EINVALID:         fasthttp.StatusBadRequest,
	pay.ESIGNATURE:       fasthttp.StatusBadRequest,
	CodeKeyMissing:       fasthttp.StatusBadRequest,
	pay.EUNAUTHORIZED:    fasthttp.StatusUnauthorized,
	pay.ENOTFOUND:        fasthttp.StatusNotFound,
	CodeMethodNotAllowed: fasthttp.StatusMethodNotAllowed,
	pay.ECONFLICT:        fasthttp.StatusConflict,
	pay.ERefundExceeds:   fasthttp.StatusConflict,
	pay.EChargeDisputed:  fasthttp.StatusConflict,
	pay.ELEASEHELD:       fasthttp.StatusConflict,
	pay.ELEASELOST:       fasthttp.StatusConflict,
	pay.EKEYINUSE:        fasthttp.StatusConflict,
	CodeTooLarge:         fasthttp.StatusRequestEntityTooLarge,
	pay.EKEYREUSED:       fasthttp.StatusUnprocessableEntity,
	pay.EUNSUPPORTED:     fasthttp.StatusUnprocessableEntity,
	pay.EINTERNAL:        fasthttp.StatusInternalServerError,
	pay.EPSP:             fasthttp.StatusBadGateway,
	pay.EUNAVAILABLE:     fasthttp.StatusServiceUnavailable,
	pay.EDISKFULL:        fasthttp.StatusServiceUnavailable,

	pay.EUNKNOWNPROVIDER: fasthttp.StatusBadRequest,
	CodeMisdirected:      fasthttp.StatusMisdirectedRequest,
	CodeProxied:          fasthttp.StatusForbidden,
	CodeMediaType:        fasthttp.StatusUnsupportedMediaType,
}

// HTTPStatus returns the HTTP status of an error code.
func HTTPStatus(code string) int {
	if st, ok := statusOf[code]; ok {
		return st
	}
	return fasthttp.StatusInternalServerError
}

// CodeInvalidRequest is the wire code of pay.EINVALID: a request that is
// wrong, with "param" naming the field when the error is about one.
const CodeInvalidRequest = "invalid_request"

// WireCode is the error.code the API sends for a domain error code. The
// codes are pay's, but for pay.EINVALID, which the API calls
// CodeInvalidRequest (SPEC §2); pay keeps its short list and this is the
// one place the two differ.
func WireCode(code string) string {
	if code == pay.EINVALID {
		return CodeInvalidRequest
	}
	return code
}

// DomainCode is the pay code of a wire error.code: WireCode's inverse.
func DomainCode(code string) string {
	if code == CodeInvalidRequest {
		return pay.EINVALID
	}
	return code
}

// errorBody is the error shape of every answer that is not 2xx:
// {"error": {"code", "message", "param"?, "request_id"?}}.
type errorBody struct {
	Error errorDetail `json:"error"`
}

// errorDetail is the error of an errorBody. Code is the domain code
// (pay.EINVALID, ...); its JSON form is the wire code (WireCode), so no
// answer can send the domain's name by mistake.
type errorDetail struct {
	Code      string `json:"code"`
	Message   string `json:"message"`
	Param     string `json:"param,omitempty"`
	RequestID string `json:"request_id,omitempty"`
}

// MarshalJSON encodes the detail with its wire code.
func (d errorDetail) MarshalJSON() ([]byte, error) {
	type plain errorDetail
	p := plain(d)
	p.Code = WireCode(d.Code)
	return json.Marshal(p)
}

// errorDetailOf is the detail of err as a client may see it: the code,
// the client-safe message and the field at fault.
func errorDetailOf(err error) errorDetail {
	return errorDetail{Code: pay.ErrorCode(err), Message: pay.ErrorMessage(err), Param: pay.ErrorParam(err)}
}

// writeError answers with err in the SPEC's shape. An internal error is
// logged with the request id (a recovered panic with its stack), and the
// client sees only that id.
func (s *Server) writeError(rc *fasthttp.RequestCtx, err error) {
	d := errorDetailOf(err)
	code, rid := d.Code, requestID(rc)
	d.RequestID = rid
	if code == pay.EINTERNAL || code == pay.EUNAVAILABLE || code == pay.EDISKFULL {
		ev := s.Logger.Error().Err(err).Str("request_id", rid).Str("path", string(rc.Path()))
		var pe *panicError
		if errors.As(err, &pe) {
			ev = ev.Bytes("stack", pe.stack)
		}
		ev.Msg("request failed")
		if code == pay.EINTERNAL {
			d.Message = "internal error; quote request id " + rid
		}
	}
	writeJSON(rc, HTTPStatus(code), errorBody{Error: d})
}
