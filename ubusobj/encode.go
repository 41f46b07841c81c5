package ubusobj

import (
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/packet-steering/packet-steering/internal/ubus"
)

// errUnsupported makes encodeReply fall back to the JSON path.
var errUnsupported = errors.New("ubusobj: type not handled by the direct encoder")

// encodeReply turns a reply value (a struct with encoding/json tags) into
// blobmsg attributes. The result is the same as ubus.AttrsFromValue (JSON
// encoding, then the stock CLI's JSON-to-blobmsg rules: integers as int32
// when they fit, else int64; bool as int8; omitempty honoured), built
// directly with reflection so that a status call does not pay for a JSON
// text and its tokenizer. Types the direct path does not handle (embedded
// structs, custom marshalers other than time.Time, non-string map keys) go
// through AttrsFromValue.
func encodeReply(v any) ([]ubus.Attr, error) {
	var e encoder
	return e.encodeReply(v)
}

// encoder is encodeReply with the field lists of the struct types it has
// met kept for the next reply (an Object answers the same types call after
// call). Its zero value is ready; it is safe for concurrent use.
type encoder struct {
	fields sync.Map // reflect.Type -> []jsonField
}

// encodeReply is the package-level encodeReply.
func (e *encoder) encodeReply(v any) ([]ubus.Attr, error) {
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return nil, fmt.Errorf("ubusobj: encode: nil reply")
		}
		rv = rv.Elem()
	}
	if rv.Kind() != reflect.Struct {
		return ubus.AttrsFromValue(v)
	}
	attrs, err := e.encodeStruct(rv, 0)
	if errors.Is(err, errUnsupported) {
		return ubus.AttrsFromValue(v)
	}
	return attrs, err
}

var (
	timeType      = reflect.TypeFor[time.Time]()
	marshalerType = reflect.TypeFor[json.Marshaler]()
	textType      = reflect.TypeFor[encoding.TextMarshaler]()
)

// jsonField is one struct field as encoding/json sees it.
type jsonField struct {
	index     int
	name      string
	omitEmpty bool
}

// jsonFields lists the fields encoding/json would encode, in order.
func jsonFields(t reflect.Type) ([]jsonField, error) {
	out := make([]jsonField, 0, t.NumField())
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Anonymous {
			return nil, errUnsupported
		}
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		if strings.Contains(opts, "string") {
			return nil, errUnsupported
		}
		out = append(out, jsonField{index: i, name: name, omitEmpty: hasOpt(opts, "omitempty")})
	}
	return out, nil
}

func hasOpt(opts, want string) bool {
	for opts != "" {
		var o string
		o, opts, _ = strings.Cut(opts, ",")
		if o == want {
			return true
		}
	}
	return false
}

// isEmpty is encoding/json's notion of an empty value for omitempty.
func isEmpty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool:
		return !v.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int() == 0
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return v.Uint() == 0
	case reflect.Float32, reflect.Float64:
		return v.Float() == 0
	case reflect.Interface, reflect.Pointer:
		return v.IsNil()
	}
	return false
}

// structFields is jsonFields of t, from the encoder's memory when it has
// met t before.
func (e *encoder) structFields(t reflect.Type) ([]jsonField, error) {
	if f, ok := e.fields.Load(t); ok {
		return f.([]jsonField), nil
	}
	f, err := jsonFields(t)
	if err != nil {
		return nil, err
	}
	e.fields.Store(t, f)
	return f, nil
}

func (e *encoder) encodeStruct(v reflect.Value, depth int) ([]ubus.Attr, error) {
	fields, err := e.structFields(v.Type())
	if err != nil {
		return nil, err
	}
	attrs := make([]ubus.Attr, 0, len(fields))
	for _, f := range fields {
		fv := v.Field(f.index)
		if f.omitEmpty && isEmpty(fv) {
			continue
		}
		a, err := e.encodeValue(f.name, fv, depth+1)
		if err != nil {
			return nil, err
		}
		attrs = append(attrs, a)
	}
	return attrs, nil
}

func (e *encoder) encodeValue(name string, v reflect.Value, depth int) (ubus.Attr, error) {
	if depth > ubus.MaxDepth {
		return ubus.Attr{}, fmt.Errorf("ubusobj: encode %q: nesting deeper than %d", name, ubus.MaxDepth)
	}
	t := v.Type()
	if t == timeType {
		b, err := v.Interface().(time.Time).MarshalText()
		if err != nil {
			return ubus.Attr{}, fmt.Errorf("ubusobj: encode %q: %w", name, err)
		}
		return ubus.String(name, string(b)), nil
	}
	if t.Implements(marshalerType) || t.Implements(textType) ||
		reflect.PointerTo(t).Implements(marshalerType) || reflect.PointerTo(t).Implements(textType) {
		return ubus.Attr{}, errUnsupported
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return ubus.Attr{Name: name, Type: ubus.TypeUnspec}, nil
		}
		return e.encodeValue(name, v.Elem(), depth)
	case reflect.Struct:
		c, err := e.encodeStruct(v, depth)
		return ubus.Table(name, c...), err
	case reflect.Slice:
		if v.IsNil() {
			return ubus.Attr{Name: name, Type: ubus.TypeUnspec}, nil
		}
		if t.Elem().Kind() == reflect.Uint8 {
			return ubus.Attr{}, errUnsupported // []byte is base64 in JSON
		}
		fallthrough
	case reflect.Array:
		c := make([]ubus.Attr, v.Len())
		for i := range c {
			var err error
			if c[i], err = e.encodeValue("", v.Index(i), depth+1); err != nil {
				return ubus.Attr{}, err
			}
		}
		return ubus.Array(name, c...), nil
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return ubus.Attr{}, errUnsupported
		}
		if v.IsNil() {
			return ubus.Attr{Name: name, Type: ubus.TypeUnspec}, nil
		}
		keys := make([]string, 0, v.Len())
		for _, k := range v.MapKeys() {
			keys = append(keys, k.String())
		}
		sort.Strings(keys)
		c := make([]ubus.Attr, len(keys))
		for i, k := range keys {
			var err error
			if c[i], err = e.encodeValue(k, v.MapIndex(reflect.ValueOf(k).Convert(t.Key())), depth+1); err != nil {
				return ubus.Attr{}, err
			}
		}
		return ubus.Table(name, c...), nil
	case reflect.String:
		if !utf8.ValidString(v.String()) {
			return ubus.Attr{}, errUnsupported // encoding/json substitutes U+FFFD
		}
		return ubus.String(name, v.String()), nil
	case reflect.Bool:
		return ubus.Bool(name, v.Bool()), nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return intAttr(name, v.Int()), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		u := v.Uint()
		if u > math.MaxInt64 {
			return ubus.Attr{}, fmt.Errorf("ubusobj: encode %q: %d out of range", name, u)
		}
		return intAttr(name, int64(u)), nil
	case reflect.Float32, reflect.Float64:
		f := v.Float()
		if f == math.Trunc(f) && math.Abs(f) < 1e21 {
			// encoding/json prints a whole float without a fraction, which
			// the CLI's rules then read as an integer.
			return ubus.Attr{}, errUnsupported
		}
		return ubus.Double(name, f), nil
	}
	return ubus.Attr{}, errUnsupported
}
