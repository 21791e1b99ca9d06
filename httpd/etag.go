package httpd

import (
	"strings"

	"github.com/valyala/fasthttp"
)

// notModified answers 304 Not Modified, with no body, when the request's
// If-None-Match matches etag (the current entity tag, strong, quoted), and
// reports whether it did. Per RFC 9110 §13.1.2 the field is "*" (any
// current representation) or a list of entity tags, each compared weakly:
// W/"3" matches "3", and "2", "3" matches it too. The field may come in
// several header lines.
func notModified(rc *fasthttp.RequestCtx, etag string) bool {
	for _, v := range rc.Request.Header.PeekAll("If-None-Match") {
		if etagListMatches(string(v), etag) {
			rc.SetStatusCode(fasthttp.StatusNotModified)
			return true
		}
	}
	return false
}

// etagListMatches reports whether the If-None-Match value list is "*" or
// holds an entity tag weakly equal to etag. An element that is not an
// entity tag ends the scan: what follows cannot be read reliably.
func etagListMatches(list, etag string) bool {
	list = strings.TrimSpace(list)
	if list == "*" {
		return true
	}
	for {
		list = strings.TrimLeft(list, " \t,")
		if list == "" {
			return false
		}
		list = strings.TrimPrefix(list, "W/")
		if !strings.HasPrefix(list, `"`) {
			return false
		}
		end := strings.IndexByte(list[1:], '"')
		if end < 0 {
			return false
		}
		if list[:end+2] == etag {
			return true
		}
		list = list[end+2:]
	}
}
