package config

import (
	"fmt"
	"slices"
	"strings"

	"github.com/paystate/paystate/pay"
)

// checkEventType checks an event type of [[webhooks]] events against the
// merchant event types (pay.EventTypes, the catalog of the API document):
// an unknown type, a typo or a stray space would leave the endpoint
// waiting for events that never come.
func checkEventType(e string) error {
	types := pay.EventTypes()
	if slices.Contains(types, e) {
		return nil
	}
	return fmt.Errorf("%s is not a merchant event type (one of %s)", quote(e), strings.Join(types, ", "))
}
