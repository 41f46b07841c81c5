package genetlink

import (
	"encoding/binary"
	"errors"

	"github.com/packet-steering/packet-steering/internal/outline"
)

// Netlink attributes (include/uapi/linux/netlink.h, struct nlattr): a
// 4-byte header {u16 len, u16 type} in host byte order, then len-4 bytes of
// payload, padded to a multiple of 4. The top two bits of type are flags
// (NLA_F_NESTED, NLA_F_NET_BYTEORDER); the rest is the attribute number.
const (
	attrHeaderLen = 4
	attrAlign     = 4
	// attrTypeMask keeps the attribute number (NLA_TYPE_MASK).
	attrTypeMask = 0x3fff
	// attrNested is NLA_F_NESTED.
	attrNested = 0x8000
	// maxAttrs bounds how many attributes one Decode returns, so that a
	// message of tiny attributes cannot make a caller keep a huge slice.
	maxAttrs = 4096
	// maxDepth bounds nesting for callers that recurse.
	maxDepth = 8
)

// ErrMalformed is wrapped by every error about bytes that do not form
// valid netlink messages or attributes.
var ErrMalformed = errors.New("genetlink: malformed message")

// Attr is one decoded attribute. Data aliases the buffer it was decoded
// from.
type Attr struct {
	Type   uint16 // the attribute number, flags removed
	Nested bool   // NLA_F_NESTED was set
	Data   []byte // the payload without padding
}

// DecodeAttrs splits b into attributes. A length below the header, a
// length past the end of b, or more than maxAttrs attributes is an error
// wrapping ErrMalformed; trailing padding shorter than a header is ignored
// only when it is zero.
func DecodeAttrs(b []byte) ([]Attr, error) {
	var out []Attr
	for off := 0; off < len(b); {
		if len(b)-off < attrHeaderLen {
			for _, c := range b[off:] {
				if c != 0 {
					return nil, outline.Errorf("%w: %d trailing bytes at offset %d", ErrMalformed, len(b)-off, off)
				}
			}
			break
		}
		l := int(binary.NativeEndian.Uint16(b[off:]))
		t := binary.NativeEndian.Uint16(b[off+2:])
		if l < attrHeaderLen || l > len(b)-off {
			return nil, outline.Errorf("%w: attribute %d at offset %d has length %d, %d bytes left", ErrMalformed, t&attrTypeMask, off, l, len(b)-off)
		}
		if len(out) == maxAttrs {
			return nil, outline.Errorf("%w: more than %d attributes", ErrMalformed, maxAttrs)
		}
		out = append(out, Attr{Type: t & attrTypeMask, Nested: t&attrNested != 0, Data: b[off+attrHeaderLen : off+l]})
		off += align(l)
	}
	return out, nil
}

// align rounds n up to the netlink alignment (NLA_ALIGN, NLMSG_ALIGN).
func align(n int) int { return (n + attrAlign - 1) &^ (attrAlign - 1) }

// U8 returns a 1-byte payload.
func (a Attr) U8() (uint8, error) {
	if len(a.Data) != 1 {
		return 0, a.badLen("u8")
	}
	return a.Data[0], nil
}

// U16 returns a 2-byte payload (host byte order).
func (a Attr) U16() (uint16, error) {
	if len(a.Data) != 2 {
		return 0, a.badLen("u16")
	}
	return binary.NativeEndian.Uint16(a.Data), nil
}

// U32 returns a 4-byte payload (host byte order).
func (a Attr) U32() (uint32, error) {
	if len(a.Data) != 4 {
		return 0, a.badLen("u32")
	}
	return binary.NativeEndian.Uint32(a.Data), nil
}

// U64 returns an 8-byte payload (host byte order).
func (a Attr) U64() (uint64, error) {
	if len(a.Data) != 8 {
		return 0, a.badLen("u64")
	}
	return binary.NativeEndian.Uint64(a.Data), nil
}

// Uint returns a payload of the spec type "uint" (NLA_UINT,
// include/net/netlink.h nla_put_uint): 4 bytes when the value fits, else 8.
func (a Attr) Uint() (uint64, error) {
	switch len(a.Data) {
	case 4:
		return uint64(binary.NativeEndian.Uint32(a.Data)), nil
	case 8:
		return binary.NativeEndian.Uint64(a.Data), nil
	}
	return 0, a.badLen("uint")
}

// String returns a NUL-terminated string payload without its NUL.
func (a Attr) String() (string, error) {
	if len(a.Data) == 0 || a.Data[len(a.Data)-1] != 0 {
		return "", outline.Errorf("%w: attribute %d: string without NUL", ErrMalformed, a.Type)
	}
	return string(a.Data[:len(a.Data)-1]), nil
}

// Attrs decodes the payload as nested attributes.
//
//go:noinline
func (a Attr) Attrs() ([]Attr, error) { return DecodeAttrs(a.Data) }

//go:noinline
func (a Attr) badLen(kind string) error {
	return outline.Errorf("%w: attribute %d: %d bytes for a %s", ErrMalformed, a.Type, len(a.Data), kind)
}

// Encoder builds an attribute stream. The zero value is ready to use.
type Encoder struct {
	b    []byte
	nest []int // offsets of open nested attributes' headers
	err  error
}

// maxAttrLen is the largest attribute length a u16 can carry.
const maxAttrLen = 0xffff

func (e *Encoder) put(typ uint16, data []byte) {
	if e.err != nil {
		return
	}
	if typ&^attrTypeMask != 0 {
		e.err = outline.Errorf("genetlink: attribute type %#x has flag bits", typ)
		return
	}
	l := attrHeaderLen + len(data)
	if l > maxAttrLen {
		e.err = outline.Errorf("genetlink: attribute %d: %d bytes is too long", typ, len(data))
		return
	}
	e.b = binary.NativeEndian.AppendUint16(e.b, uint16(l))
	e.b = binary.NativeEndian.AppendUint16(e.b, typ)
	e.b = append(e.b, data...)
	for len(e.b)%attrAlign != 0 {
		e.b = append(e.b, 0)
	}
}

// U8 appends a 1-byte attribute.
func (e *Encoder) U8(typ uint16, v uint8) { e.put(typ, []byte{v}) }

// U16 appends a 2-byte attribute.
func (e *Encoder) U16(typ uint16, v uint16) {
	e.put(typ, binary.NativeEndian.AppendUint16(nil, v))
}

// U32 appends a 4-byte attribute.
func (e *Encoder) U32(typ uint16, v uint32) {
	e.put(typ, binary.NativeEndian.AppendUint32(nil, v))
}

// U64 appends an 8-byte attribute.
func (e *Encoder) U64(typ uint16, v uint64) {
	e.put(typ, binary.NativeEndian.AppendUint64(nil, v))
}

// Uint appends an attribute of the spec type "uint": 4 bytes when v fits,
// else 8 (what nla_put_uint sends and NLA_UINT accepts).
func (e *Encoder) Uint(typ uint16, v uint64) {
	if v <= 0xffffffff {
		e.U32(typ, uint32(v))
		return
	}
	e.U64(typ, v)
}

// String appends a NUL-terminated string attribute.
func (e *Encoder) String(typ uint16, s string) {
	e.put(typ, append([]byte(s), 0))
}

// Nested opens a nested attribute; every attribute appended until the
// matching End goes inside it.
func (e *Encoder) Nested(typ uint16) {
	if e.err != nil {
		return
	}
	if len(e.nest) == maxDepth {
		e.err = outline.Errorf("genetlink: nesting deeper than %d", maxDepth)
		return
	}
	e.nest = append(e.nest, len(e.b))
	e.put(typ, nil)
	binary.NativeEndian.PutUint16(e.b[len(e.b)-2:], typ|attrNested)
}

// End closes the innermost nested attribute.
func (e *Encoder) End() {
	if e.err != nil {
		return
	}
	if len(e.nest) == 0 {
		e.err = errors.New("genetlink: End without Nested")
		return
	}
	off := e.nest[len(e.nest)-1]
	e.nest = e.nest[:len(e.nest)-1]
	l := len(e.b) - off
	if l > maxAttrLen {
		e.err = outline.Errorf("genetlink: nested attribute of %d bytes is too long", l)
		return
	}
	binary.NativeEndian.PutUint16(e.b[off:], uint16(l))
}

// Bytes returns the encoded attributes, or the first error (an attribute
// too long, End without Nested, a Nested left open).
func (e *Encoder) Bytes() ([]byte, error) {
	if e.err != nil {
		return nil, e.err
	}
	if len(e.nest) != 0 {
		return nil, outline.Errorf("genetlink: %d nested attributes left open", len(e.nest))
	}
	return e.b, nil
}
