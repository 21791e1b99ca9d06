package httpd

import "github.com/valyala/fasthttp"

// notImplemented answers routes of the contract that this build does not
// serve yet, with 501 and a code saying so.
func notImplemented(rc *fasthttp.RequestCtx) error {
	writeJSON(rc, fasthttp.StatusNotImplemented, errorBody{Error: errorDetail{
		Code: "not_implemented", Message: "this endpoint is not available in this build yet", RequestID: requestID(rc),
	}})
	return nil
}
