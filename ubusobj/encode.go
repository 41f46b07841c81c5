package ubusobj

import (
	"reflect"

	"github.com/packet-steering/packet-steering/internal/outline"
	"github.com/packet-steering/packet-steering/internal/ubus"
)

// encodeReply turns a reply value (a struct with encoding/json tags) into
// blobmsg attributes: ubus.AttrsFromValue, which gives what JSON encoding
// and the stock CLI's JSON-to-blobmsg rules would (integers as int32 when
// they fit, else int64; bool as int8; omitempty honoured), built directly
// with reflection.
func encodeReply(v any) ([]ubus.Attr, error) {
	var e encoder
	return e.encodeReply(v)
}

// encoder is encodeReply with the field lists of the struct types it has
// met kept for the next reply (an Object answers the same types call after
// call). Its zero value is ready; it is safe for concurrent use.
type encoder struct {
	codec ubus.ValueCodec
}

// encodeReply is the package-level encodeReply; a nil pointer is refused.
func (e *encoder) encodeReply(v any) ([]ubus.Attr, error) {
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return nil, outline.Errorf("ubusobj: encode: nil reply")
		}
		rv = rv.Elem()
	}
	attrs, err := e.codec.Attrs(v)
	if err != nil {
		return nil, outline.Errorf("ubusobj: encode: %w", err)
	}
	return attrs, nil
}
