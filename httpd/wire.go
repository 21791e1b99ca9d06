package httpd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/valyala/fasthttp"

	"github.com/paystate/paystate/finalize"
	"github.com/paystate/paystate/pay"
)

// customerJSON is the wire form of pay.Customer.
type customerJSON struct {
	ID    string `json:"id"`
	Email string `json:"email"`
}

// paymentJSON is the client view on the wire. It is built only from a
// finalize.View, which decides whether the secrets may be shown; absent
// secrets are omitted, not empty.
type paymentJSON struct {
	ID          string `json:"id"`
	OrderID     string `json:"order_id"`
	Amount      int64  `json:"amount"`
	Currency    string `json:"currency"`
	Status      string `json:"status"`
	Terminal    bool   `json:"terminal"`
	Version     uint64 `json:"version"`
	Provider    string `json:"provider"`
	ProviderRef string `json:"provider_ref"`
	// ProviderURL is the payment's page in its PSP's own dashboard, where
	// paystate knows it (Server.PSPLinks): absent otherwise.
	ProviderURL  string       `json:"provider_url,omitempty"`
	Flow         string       `json:"flow,omitempty"`
	Customer     customerJSON `json:"customer"`
	ClientSecret *string      `json:"client_secret,omitempty"`
	RedirectURL  *string      `json:"redirect_url,omitempty"`
	CreatedAt    string       `json:"created_at"`
	UpdatedAt    string       `json:"updated_at"`
	Conflict     bool         `json:"conflict,omitempty"`

	// AmountRefunded is the sum of the payment's succeeded refunds,
	// AmountRefundable what may still be refunded (0 unless captured, 0
	// while its dispute is open or lost).
	AmountRefunded   int64 `json:"amount_refunded"`
	AmountRefundable int64 `json:"amount_refundable"`
	// Dispute is the status of the payment's dispute, absent if it has
	// none.
	Dispute string `json:"dispute,omitempty"`
}

// toJSON builds the wire view of a payment.
func toJSON(v finalize.View) paymentJSON {
	out := paymentJSON{
		ID: v.ID, OrderID: v.OrderID, Amount: v.Amount, Currency: v.Currency,
		Status: string(v.Status), Terminal: v.Terminal, Version: v.Version,
		Provider: v.Provider, ProviderRef: v.ProviderRef, Flow: v.Flow,
		Customer:  customerJSON{ID: v.Customer.ID, Email: v.Customer.Email},
		CreatedAt: rfc3339(v.CreatedAt), UpdatedAt: rfc3339(v.UpdatedAt),
		AmountRefunded: v.AmountRefunded, AmountRefundable: v.AmountRefundable, Dispute: string(v.Dispute),
	}
	if s, ok := v.ClientSecret(); ok {
		out.ClientSecret = &s
	}
	if u, ok := v.RedirectURL(); ok {
		out.RedirectURL = &u
	}
	return out
}

// viewJSON is toJSON of a payment's view, with the address of its page in
// its PSP's dashboard where the server knows one.
func (s *Server) viewJSON(p pay.Payment) paymentJSON {
	out := toJSON(finalize.NewView(p))
	if link := s.PSPLinks[p.Provider]; link != nil {
		out.ProviderURL = link(p)
	}
	return out
}

func rfc3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// stepJSON is one timeline step on the wire.
type stepJSON struct {
	Seq     uint64 `json:"seq"`
	At      string `json:"at"`
	Source  string `json:"source"`
	Kind    string `json:"kind"`
	From    string `json:"from,omitempty"`
	To      string `json:"to,omitempty"`
	Version uint64 `json:"version"`
	EventID string `json:"event_id,omitempty"`
	Note    string `json:"note,omitempty"`
}

func stepToJSON(s pay.Step) stepJSON {
	return stepJSON{Seq: s.Seq, At: rfc3339(s.At), Source: string(s.Source), Kind: s.Kind,
		From: string(s.From), To: string(s.To), Version: s.Version, EventID: s.EventID, Note: s.Note}
}

// writeList answers {"data": [...]}, each item in its wire form, and for a
// paged list the cursor of the next page ("next_cursor", "" at the end).
func writeList[T, W any](rc *fasthttp.RequestCtx, items []T, wire func(T) W, next ...string) {
	out := struct {
		Data       []W     `json:"data"`
		NextCursor *string `json:"next_cursor,omitempty"`
	}{Data: make([]W, 0, len(items))}
	for _, it := range items {
		out.Data = append(out.Data, wire(it))
	}
	if len(next) > 0 {
		out.NextCursor = &next[0]
	}
	writeJSON(rc, fasthttp.StatusOK, out)
}

// writePaymentList answers a list that belongs to the payment whose id is
// in the path (its refunds, its timeline): fetch reads it for that id and
// writeList sends each item in its wire form.
func writePaymentList[T, W any](s *Server, rc *fasthttp.RequestCtx, rawID string, fetch func(context.Context, string) ([]T, error), wire func(T) W) error {
	id, err := paymentID(rawID)
	if err != nil {
		return err
	}
	ctx, cancel := s.requestContext()
	defer cancel()
	items, err := fetch(ctx, id)
	if err != nil {
		return err
	}
	writeList(rc, items, wire)
	return nil
}

// writeJSON answers with v as JSON.
func writeJSON(rc *fasthttp.RequestCtx, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = fasthttp.StatusInternalServerError
		b = []byte(`{"error":{"code":"internal","message":"encode response"}}`)
	}
	writeRaw(rc, status, b)
}

func writeRaw(rc *fasthttp.RequestCtx, status int, b []byte) {
	rc.Response.Header.SetContentType("application/json")
	rc.Response.Header.Set("Cache-Control", "no-store")
	rc.SetStatusCode(status)
	rc.SetBody(b)
}

// decodeJSON decodes a request body into v strictly: the content type must
// be JSON, the body one object, no unknown fields, no duplicated keys, no
// trailing data. Errors name the field.
//
// It is the one place the merchant API reads a body, so every JSON endpoint
// gets the media-type rule: a body needs Content-Type application/json
// (utf-8 the only charset), else 415 unsupported_media_type. An empty body
// has no type to check; the endpoint decides whether it may be empty.
// Webhooks do not come through here: a PSP's body is verified by its
// signature, whatever Content-Type it was sent with.
func decodeJSON(rc *fasthttp.RequestCtx, v any) error {
	body := rc.PostBody()
	if len(body) > 0 {
		if err := checkJSONType(string(rc.Request.Header.ContentType())); err != nil {
			return err
		}
	}
	return DecodeStrict(body, v)
}

// checkJSONType accepts the Content-Type of a JSON body: application/json
// in any case, with at most a charset parameter of utf-8.
func checkJSONType(ct string) error {
	if ct == "" {
		return pay.Errorf(CodeMediaType, "Content-Type is missing: send Content-Type: application/json")
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" {
		return pay.Errorf(CodeMediaType, "Content-Type must be application/json, got %q", truncate(ct, 64))
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return pay.Errorf(CodeMediaType, "Content-Type charset must be utf-8, got %q", truncate(cs, 32))
	}
	return nil
}

// DecodeStrict decodes one JSON object from body into v and rejects unknown
// fields, duplicated keys and trailing data, with errors naming the field.
func DecodeStrict(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return pay.Errorf(pay.EINVALID, "request body is empty: a JSON object is required")
	}
	if err := checkDuplicateKeys(body); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return pay.Errorf(pay.EINVALID, "request body has data after the JSON object")
	}
	return nil
}

// jsonError turns a decoding error into an invalid error naming the field,
// in the message and as its Param: a field of the wrong type by its path
// ("customer.id"), an unknown field by its name; a malformed body names
// none.
func jsonError(err error) error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			return pay.Errorf(pay.EINVALID, "request body must be a JSON object, got %s", te.Value)
		}
		return pay.Invalidf(field, "field %s: expected %s, got %s", field, jsonKind(te.Type.Kind().String()), te.Value)
	case errors.As(err, &se):
		return pay.Errorf(pay.EINVALID, "malformed JSON at byte %d: %s", se.Offset, se.Error())
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return pay.Errorf(pay.EINVALID, "malformed JSON: the body ends early")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.TrimPrefix(err.Error(), "json: unknown field ")
		if unq, uerr := strconv.Unquote(name); uerr == nil {
			return pay.Invalidf(unq, "unknown field %s", name)
		}
		return pay.Errorf(pay.EINVALID, "unknown field %s", name)
	}
	return pay.Errorf(pay.EINVALID, "malformed JSON: %s", strings.TrimPrefix(err.Error(), "json: "))
}

func jsonKind(k string) string {
	switch k {
	case "int64", "int", "uint64", "int32":
		return "an integer"
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "struct", "ptr":
		return "an object"
	}
	return k
}

// checkDuplicateKeys rejects a JSON document in which an object has the
// same key twice (encoding/json would silently keep the last one). It reads
// the tokens with jsontext, which allocates nothing per token
// (encoding/json's Decoder.Token made a discarded syntax error for every
// scalar, a tenth of a create's allocations). A document jsontext cannot
// read is left to the json.Decoder that follows, which says what is wrong;
// invalid UTF-8 is read as that decoder reads it, as U+FFFD.
func checkDuplicateKeys(body []byte) error {
	dec := jsontext.NewDecoder(bytes.NewReader(body), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	type name struct {
		object int    // which object, by the order of its opening brace
		folded string // the key, lowercased
	}
	var (
		seen    = map[name]bool{}
		objects int   // objects opened so far
		open    []int // the objects that are open, innermost last
	)
	for {
		tok, err := dec.ReadToken()
		if err != nil {
			return nil // the end, or malformed: the decoder reports it
		}
		switch tok.Kind() {
		case '{':
			objects++
			open = append(open, objects)
		case '}':
			open = open[:len(open)-1]
		case '"':
			// In an object, the tokens read so far count names and values:
			// an odd count means this string was a name.
			if kind, n := dec.StackIndex(dec.StackDepth()); kind != '{' || n%2 == 0 {
				continue
			}
			// encoding/json matches keys to fields ignoring case, so
			// "status" and "STATUS" are the same key here.
			key := tok.String()
			k := name{open[len(open)-1], strings.ToLower(key)}
			if seen[k] {
				return pay.Invalidf(key, "duplicated key %q in JSON object", key)
			}
			seen[k] = true
		}
	}
}

// parseLimit reads a limit query parameter.
func parseLimit(rc *fasthttp.RequestCtx, def, max int) (int, error) {
	v := rc.QueryArgs().Peek("limit")
	if len(v) == 0 {
		return def, nil
	}
	n, err := fasthttp.ParseUint(v)
	if err != nil || n < 1 || n > max {
		return 0, pay.Invalidf("limit", "limit must be an integer from 1 to %d", max)
	}
	return n, nil
}
