package ubus

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/packet-steering/packet-steering/internal/outline"
)

// Type is a blobmsg value type, as in libubox's blobmsg.h (enum blobmsg_type).
type Type uint8

// The blobmsg types. TypeInt8 doubles as boolean (BLOBMSG_TYPE_BOOL).
const (
	TypeUnspec Type = iota // no value (JSON null)
	TypeArray              // list of unnamed values
	TypeTable              // list of named values
	TypeString             // NUL-terminated string
	TypeInt64              // 64-bit big-endian integer
	TypeInt32              // 32-bit big-endian integer
	TypeInt16              // 16-bit big-endian integer
	TypeInt8               // 8-bit integer, also used for booleans
	TypeDouble             // IEEE-754 double, big-endian bits
)

// TypeBool is the blobmsg boolean type, the same code as TypeInt8.
const TypeBool = TypeInt8

var typeNames = [...]string{"unspec", "array", "table", "string", "int64", "int32", "int16", "bool", "double"}

// String returns the lower-case name of the type ("string", "int32", "bool"...).
func (t Type) String() string {
	if int(t) < len(typeNames) {
		return typeNames[t]
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// Limits that keep hostile input from allocating without bound.
const (
	// MaxMessageLen is the largest message body accepted or produced, the
	// stock broker's UBUS_MAX_MSGLEN (1 MiB, ubusmsg.h).
	MaxMessageLen = 1 << 20
	// MaxDepth is the deepest nesting of tables and arrays accepted.
	MaxDepth = 32
	// maxAttrLen is the largest length a blob attribute header can express.
	maxAttrLen = 1<<24 - 1
)

// ErrMalformed is wrapped by every decoding error caused by bad input.
var ErrMalformed = errors.New("ubus: malformed data")

// Attr is one blobmsg value with its name. Order matters: a list of Attr is
// encoded in order, so decoding and re-encoding gives the same bytes.
//
// The value lives in the field that fits Type: Str for TypeString; Int for
// TypeInt64, TypeInt32 (signed), TypeInt16 (0..65535, as libubox reads it)
// and TypeInt8 (0..255; booleans are 0 or 1); Float for TypeDouble; Children
// for TypeTable and TypeArray (array members have empty names).
type Attr struct {
	Name     string
	Type     Type
	Str      string
	Int      int64
	Float    float64
	Children []Attr
}

// String returns a string attribute.
func String(name, v string) Attr { return Attr{Name: name, Type: TypeString, Str: v} }

// Int32 returns an int32 attribute.
func Int32(name string, v int32) Attr { return Attr{Name: name, Type: TypeInt32, Int: int64(v)} }

// Int64 returns an int64 attribute.
func Int64(name string, v int64) Attr { return Attr{Name: name, Type: TypeInt64, Int: v} }

// Int16 returns an int16 attribute.
func Int16(name string, v uint16) Attr { return Attr{Name: name, Type: TypeInt16, Int: int64(v)} }

// Bool returns a boolean (int8) attribute.
func Bool(name string, v bool) Attr {
	a := Attr{Name: name, Type: TypeBool}
	if v {
		a.Int = 1
	}
	return a
}

// Double returns a double attribute.
func Double(name string, v float64) Attr { return Attr{Name: name, Type: TypeDouble, Float: v} }

// Table returns a table attribute holding children (named values).
func Table(name string, children ...Attr) Attr {
	if children == nil {
		children = []Attr{}
	}
	return Attr{Name: name, Type: TypeTable, Children: children}
}

// Array returns an array attribute holding children; their names are not
// encoded.
func Array(name string, children ...Attr) Attr {
	if children == nil {
		children = []Attr{}
	}
	return Attr{Name: name, Type: TypeArray, Children: children}
}

// Find returns the first attribute named name in attrs.
//
//go:noinline
func Find(attrs []Attr, name string) (Attr, bool) {
	for _, a := range attrs {
		if a.Name == name {
			return a, true
		}
	}
	return Attr{}, false
}

// Bool reports the value of a boolean (int8) attribute, or of any integer
// attribute as non-zero.
func (a Attr) Bool() bool { return a.Int != 0 }

// Value returns the attribute's value as a plain Go value: map[string]any
// for a table (later duplicates win), []any for an array, string, int64
// for every integer type but int8, bool for int8, float64 for double, nil for
// unspec.
func (a Attr) Value() any {
	switch a.Type {
	case TypeTable:
		m := make(map[string]any, len(a.Children))
		for _, c := range a.Children {
			m[c.Name] = c.Value()
		}
		return m
	case TypeArray:
		l := make([]any, len(a.Children))
		for i, c := range a.Children {
			l[i] = c.Value()
		}
		return l
	case TypeString:
		return a.Str
	case TypeInt64, TypeInt32, TypeInt16:
		return a.Int
	case TypeInt8:
		return a.Int != 0
	case TypeDouble:
		return a.Float
	default:
		return nil
	}
}

// AttrsValue returns a list of attributes as a map, as Value does for a table.
func AttrsValue(attrs []Attr) map[string]any {
	return Table("", attrs...).Value().(map[string]any)
}

func pad4(n int) int { return (n + 3) &^ 3 }

// blobmsg header: namelen u16 BE, name, NUL, padded to 4 (blobmsg_hdrlen).
func blobmsgHdrLen(nameLen int) int { return pad4(2 + nameLen + 1) }

// EncodeAttrs encodes attrs as a blobmsg list: the payload of a table (or of
// a ubus DATA attribute) without an outer header. Array members are written
// without names.
func EncodeAttrs(attrs []Attr) ([]byte, error) {
	n, err := attrsSize(attrs, false, 0)
	if err != nil {
		return nil, err
	}
	return appendAttrs(make([]byte, 0, n), attrs, false), nil
}

// AppendAttrs appends the blobmsg encoding of attrs to b, as EncodeAttrs.
func AppendAttrs(b []byte, attrs []Attr) ([]byte, error) {
	if _, err := attrsSize(attrs, false, 0); err != nil {
		return b, err
	}
	return appendAttrs(b, attrs, false), nil
}

func valueSize(a *Attr, depth int) (int, error) {
	switch a.Type {
	case TypeUnspec:
		return 0, nil
	case TypeString:
		return len(a.Str) + 1, nil
	case TypeInt64, TypeDouble:
		return 8, nil
	case TypeInt32:
		return 4, nil
	case TypeInt16:
		return 2, nil
	case TypeInt8:
		return 1, nil
	case TypeTable, TypeArray:
		if depth >= MaxDepth {
			return 0, outline.Errorf("ubus: encode %q: nesting deeper than %d", a.Name, MaxDepth)
		}
		return attrsSize(a.Children, a.Type == TypeArray, depth+1)
	default:
		return 0, outline.Errorf("ubus: encode %q: unknown blobmsg type %d", a.Name, a.Type)
	}
}

// attrsSize returns the encoded size of a list (each member padded).
func attrsSize(attrs []Attr, array bool, depth int) (int, error) {
	total := 0
	for i := range attrs {
		a := &attrs[i]
		name := len(a.Name)
		if array {
			name = 0
		}
		if name > math.MaxUint16 {
			return 0, outline.Errorf("ubus: encode: name of %d bytes too long", name)
		}
		v, err := valueSize(a, depth)
		if err != nil {
			return 0, err
		}
		l := 4 + blobmsgHdrLen(name) + v
		if l > maxAttrLen {
			return 0, outline.Errorf("ubus: encode %q: %d bytes exceed the blob length field", a.Name, l)
		}
		total += pad4(l)
		if total > MaxMessageLen {
			return 0, outline.Errorf("ubus: encode: more than %d bytes", MaxMessageLen)
		}
	}
	return total, nil
}

func appendZeros(b []byte, n int) []byte {
	for ; n > 0; n-- {
		b = append(b, 0)
	}
	return b
}

// appendAttrs writes a list whose sizes were checked by attrsSize.
func appendAttrs(b []byte, attrs []Attr, array bool) []byte {
	for i := range attrs {
		a := &attrs[i]
		name := a.Name
		if array {
			name = ""
		}
		start := len(b)
		b = append(b, 0, 0, 0, 0) // header, filled in below
		b = binary.BigEndian.AppendUint16(b, uint16(len(name)))
		b = append(b, name...)
		b = append(b, 0)
		b = appendZeros(b, blobmsgHdrLen(len(name))-2-len(name)-1)
		switch a.Type {
		case TypeString:
			b = append(b, a.Str...)
			b = append(b, 0)
		case TypeInt64:
			b = binary.BigEndian.AppendUint64(b, uint64(a.Int))
		case TypeInt32:
			b = binary.BigEndian.AppendUint32(b, uint32(a.Int))
		case TypeInt16:
			b = binary.BigEndian.AppendUint16(b, uint16(a.Int))
		case TypeInt8:
			b = append(b, uint8(a.Int))
		case TypeDouble:
			b = binary.BigEndian.AppendUint64(b, math.Float64bits(a.Float))
		case TypeTable, TypeArray:
			b = appendAttrs(b, a.Children, a.Type == TypeArray)
		}
		l := len(b) - start
		binary.BigEndian.PutUint32(b[start:], 1<<31|uint32(a.Type)<<24|uint32(l))
		b = appendZeros(b, pad4(l)-l)
	}
	return b
}

// DecodeAttrs decodes a blobmsg list (a table's payload when isArray is
// false, an array's when true). Every member must be an extended (blobmsg)
// attribute of a known type with a length that fits its type; nesting deeper
// than MaxDepth is refused. Errors wrap ErrMalformed.
func DecodeAttrs(b []byte, isArray bool) ([]Attr, error) {
	if len(b) > MaxMessageLen {
		return nil, outline.Errorf("%w: %d bytes exceed %d", ErrMalformed, len(b), MaxMessageLen)
	}
	return decodeList(b, isArray, 0)
}

func decodeList(b []byte, isArray bool, depth int) ([]Attr, error) {
	if depth > MaxDepth {
		return nil, outline.Errorf("%w: nesting deeper than %d", ErrMalformed, MaxDepth)
	}
	// Count first so the slice is allocated once and never beyond the input.
	n := 0
	for off := 0; off < len(b); n++ {
		l, err := blobLen(b[off:])
		if err != nil {
			return nil, err
		}
		off += pad4(l)
	}
	attrs := make([]Attr, 0, n)
	for off := 0; off < len(b); {
		a, l, err := decodeOne(b[off:], isArray, depth)
		if err != nil {
			return nil, outline.Errorf("blobmsg at offset %d: %w", off, err)
		}
		attrs = append(attrs, a)
		off += pad4(l)
	}
	return attrs, nil
}

// blobLen returns the length of the attribute at the start of b.
func blobLen(b []byte) (int, error) {
	if len(b) < 4 {
		return 0, outline.Errorf("%w: %d trailing bytes", ErrMalformed, len(b))
	}
	l := int(binary.BigEndian.Uint32(b) & maxAttrLen)
	if l < 4 || l > len(b) {
		return 0, outline.Errorf("%w: attribute length %d outside 4..%d", ErrMalformed, l, len(b))
	}
	return l, nil
}

func decodeOne(b []byte, isArray bool, depth int) (Attr, int, error) {
	l, err := blobLen(b)
	if err != nil {
		return Attr{}, 0, err
	}
	h := binary.BigEndian.Uint32(b)
	if h&(1<<31) == 0 {
		return Attr{}, 0, outline.Errorf("%w: not a blobmsg (extended) attribute", ErrMalformed)
	}
	t := Type(h >> 24 & 0x7f)
	if t > TypeDouble {
		return Attr{}, 0, outline.Errorf("%w: unknown blobmsg type %d", ErrMalformed, t)
	}
	p := b[4:l]
	if len(p) < 3 {
		return Attr{}, 0, outline.Errorf("%w: blobmsg header of %d bytes", ErrMalformed, len(p))
	}
	nl := int(binary.BigEndian.Uint16(p))
	hl := blobmsgHdrLen(nl)
	if hl > len(p) || p[2+nl] != 0 {
		return Attr{}, 0, outline.Errorf("%w: name of %d bytes does not fit or is not terminated", ErrMalformed, nl)
	}
	a := Attr{Type: t}
	if !isArray {
		a.Name = string(p[2 : 2+nl])
	}
	d := p[hl:]
	switch t {
	case TypeUnspec:
	case TypeString:
		if len(d) == 0 || d[len(d)-1] != 0 {
			return Attr{}, 0, outline.Errorf("%w: string %q not NUL-terminated", ErrMalformed, a.Name)
		}
		a.Str = string(d[:len(d)-1])
	case TypeInt64, TypeInt32, TypeInt16, TypeInt8, TypeDouble:
		if len(d) != fixedSize(t) {
			return Attr{}, 0, outline.Errorf("%w: %s %q of %d bytes", ErrMalformed, t, a.Name, len(d))
		}
		switch t {
		case TypeInt64:
			a.Int = int64(binary.BigEndian.Uint64(d))
		case TypeInt32:
			a.Int = int64(int32(binary.BigEndian.Uint32(d)))
		case TypeInt16:
			a.Int = int64(binary.BigEndian.Uint16(d))
		case TypeInt8:
			a.Int = int64(d[0])
		case TypeDouble:
			a.Float = math.Float64frombits(binary.BigEndian.Uint64(d))
		}
	case TypeTable, TypeArray:
		c, err := decodeList(d, t == TypeArray, depth+1)
		if err != nil {
			return Attr{}, 0, err
		}
		a.Children = c
	}
	return a, l, nil
}

// fixedSize is the payload size of a fixed-size blobmsg type.
func fixedSize(t Type) int {
	switch t {
	case TypeInt64, TypeDouble:
		return 8
	case TypeInt32:
		return 4
	case TypeInt16:
		return 2
	case TypeInt8:
		return 1
	}
	return 0
}
