package pay

import (
	"context"
	"errors"
	"fmt"
	"net/url"
)

// Error codes. The httpd package maps each to an HTTP status; any error that
// is not a *Error counts as EINTERNAL. Codes about the HTTP request itself
// (its method, media type, size, Host, headers) are httpd's.
//
// The list stays short: a code says what the caller can do about the
// error, the message says what was wrong. The codes are the wire's
// error.code values, but for EINVALID: the domain says "invalid", the
// HTTP API says "invalid_request" (SPEC §2, the name Stripe's API made
// familiar), mapped in one place, httpd's error encoding. A validation
// error also names the request field it is about in Error.Param.
const (
	EINVALID      = "invalid"      // the request is wrong; the message (and Param) names the field
	ENOTFOUND     = "not_found"    // no such payment, event, key or route
	ECONFLICT     = "conflict"     // compare-and-set lost, or a record already exists
	ELEASEHELD    = "lease_held"   // another worker holds the payment's lease
	ELEASELOST    = "lease_lost"   // the caller's lease token is no longer current (fencing)
	EUNAUTHORIZED = "unauthorized" // missing or wrong API key
	EINTERNAL     = "internal"     // anything else; the client sees only a request id
	EUNAVAILABLE  = "unavailable"  // storage cannot write (disk full, read-only) or shutting down
	EUNSUPPORTED  = "unsupported"  // the provider cannot do this (no status API, no refunds)
	EPSP          = "psp_error"    // the PSP answered with an error or not at all
	ESIGNATURE    = "invalid_signature"
	EKEYREUSED    = "idempotency_key_reused"
	EKEYINUSE     = "idempotency_key_in_use"
	// EUNKNOWNPROVIDER: the request names a provider that is not configured.
	EUNKNOWNPROVIDER = "unknown_provider"
	// EDISKFULL: storage refused a write because the disk is full; the
	// request may be retried once space is freed.
	EDISKFULL = "storage_full"
)

// Error is a domain error with a machine-readable code and a message that is
// safe to show to the client.
type Error struct {
	Code    string
	Message string
	// Param is the request field an EINVALID error is about, named as the
	// client sent it: "amount", "currency", "customer.email", "limit",
	// "cursor" (nested fields joined with dots). It is empty when the
	// error is about the request as a whole (a malformed body) or about
	// a header, which the message names.
	Param string
}

// Error implements the error interface.
func (e *Error) Error() string {
	return fmt.Sprintf("paystate error: code=%s message=%s", e.Code, e.Message)
}

// Errorf returns a *Error with the given code and formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// NoAnswer is the EPSP error of a call to psp (op) that got no answer:
// the context's error when it ended the call, else the transport's cause
// (the URL in front of it names only the API base, never a key).
func NoAnswer(psp, op string, err error) *Error {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return Errorf(EPSP, "%s %s: %v", psp, op, context.DeadlineExceeded)
	case errors.Is(err, context.Canceled):
		return Errorf(EPSP, "%s %s: %v", psp, op, context.Canceled)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return Errorf(EPSP, "%s %s: no answer: %s", psp, op, err)
}

// Invalidf returns an EINVALID *Error about the request field param, with
// the formatted message.
func Invalidf(param, format string, args ...any) *Error {
	return &Error{Code: EINVALID, Message: fmt.Sprintf(format, args...), Param: param}
}

// ErrorParam returns the request field err is about (Error.Param), "" if
// it names none or is not a *Error.
func ErrorParam(err error) string {
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Param
	}
	return ""
}

// ErrorCode returns the code of err if it is (or wraps) a *Error, "" for nil,
// and EINTERNAL otherwise.
func ErrorCode(err error) string {
	if err == nil {
		return ""
	} else if e, ok := errors.AsType[*Error](err); ok {
		return e.Code
	}
	return EINTERNAL
}

// ErrorMessage returns the client-safe message of err; internal errors get a
// generic text.
func ErrorMessage(err error) string {
	if err == nil {
		return ""
	} else if e, ok := errors.AsType[*Error](err); ok {
		return e.Message
	}
	return "internal error"
}
