package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/packet-steering/packet-steering/internal/ubus"
)

// UbusCaller is the part of a ubus connection the bridge uses; *ubus.Conn
// and *ubus.Client have it.
type UbusCaller interface {
	Call(ctx context.Context, path, method string, args []ubus.Attr) ([]ubus.Attr, error)
	Lookup(ctx context.Context, pattern string) ([]ubus.ObjectInfo, error)
}

// UbusBus bridges the JSON-RPC endpoint to a ubus connection, converting
// JSON to blobmsg and back the way uhttpd does through libubox's
// blobmsg_json (ubus.AttrsFromJSON, ubus.AttrsToJSON).
type UbusBus struct {
	C UbusCaller
}

var _ Bus = UbusBus{}

// Call implements Bus. A ubus status from the method is returned as status
// with a nil error; only a failed transport is an error.
func (b UbusBus) Call(ctx context.Context, object, method string, args json.RawMessage) (int, json.RawMessage, error) {
	attrs, err := ubus.AttrsFromJSON(args)
	if err != nil {
		return int(ubus.StatusInvalidArgument), nil, nil
	}
	out, err := b.C.Call(ctx, object, method, attrs)
	if err != nil {
		var st ubus.Status
		if errors.As(err, &st) {
			return int(st), nil, nil
		}
		return 0, nil, fmt.Errorf("ubus call %s %s: %w", object, method, err)
	}
	if len(out) == 0 {
		return int(ubus.StatusOK), nil, nil
	}
	data, err := ubus.AttrsToJSON(out, "")
	if err != nil {
		return 0, nil, fmt.Errorf("ubus call %s %s: reply: %w", object, method, err)
	}
	return int(ubus.StatusOK), data, nil
}

// Lookup implements Bus.
func (b UbusBus) Lookup(ctx context.Context, pattern string) ([]Object, error) {
	infos, err := b.C.Lookup(ctx, pattern)
	if err != nil {
		var st ubus.Status
		if errors.As(err, &st) && st == ubus.StatusNotFound {
			return nil, nil
		}
		return nil, fmt.Errorf("ubus lookup %q: %w", pattern, err)
	}
	out := make([]Object, 0, len(infos))
	for _, in := range infos {
		o := Object{Path: in.Path}
		if in.Signature != nil {
			o.Methods = []Method{}
		}
		for _, m := range in.Signature {
			mm := Method{Name: m.Name}
			for _, a := range m.Args {
				mm.Args = append(mm.Args, Arg{Name: a.Name, Type: int(a.Type)})
			}
			o.Methods = append(o.Methods, mm)
		}
		out = append(out, o)
	}
	return out, nil
}
