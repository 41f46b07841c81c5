package genetlink

import (
	"encoding/binary"

	"golang.org/x/sys/unix"

	"github.com/packet-steering/packet-steering/internal/outline"
)

// Netlink message framing (include/uapi/linux/netlink.h): a 16-byte
// struct nlmsghdr {u32 len, u16 type, u16 flags, u32 seq, u32 pid}, then
// the payload, padded to 4 bytes. A generic netlink payload starts with
// the 4-byte struct genlmsghdr {u8 cmd, u8 version, u16 reserved}
// (include/uapi/linux/genetlink.h), then attributes.
const (
	nlmsgHeaderLen = unix.SizeofNlMsghdr // 16
	genlHeaderLen  = 4
	// nlmsgerrLen is struct nlmsgerr's {int error; struct nlmsghdr msg}.
	nlmsgerrLen = 4 + nlmsgHeaderLen
)

// Message is one generic netlink message of a reply.
type Message struct {
	Type  uint16 // the family id
	Flags uint16 // NLM_F_* of the reply
	Cmd   uint8
	// Version is the family's version as the kernel put it in the reply.
	Version uint8
	// Attrs is the attribute stream after the genetlink header; decode it
	// with DecodeAttrs.
	Attrs []byte
}

// rawMessage is one netlink message; Data aliases the receive buffer.
type rawMessage struct {
	Type, Flags uint16
	Seq, Pid    uint32
	Data        []byte // the payload without the nlmsghdr
}

// splitMessages splits one datagram into netlink messages. A message length
// below the header or past the datagram is an error wrapping ErrMalformed.
func splitMessages(b []byte) ([]rawMessage, error) {
	var out []rawMessage
	for off := 0; off < len(b); {
		if len(b)-off < nlmsgHeaderLen {
			return nil, outline.Errorf("%w: %d bytes left at offset %d, less than a message header", ErrMalformed, len(b)-off, off)
		}
		l := int(binary.NativeEndian.Uint32(b[off:]))
		if l < nlmsgHeaderLen || l > len(b)-off {
			return nil, outline.Errorf("%w: message at offset %d has length %d, %d bytes left", ErrMalformed, off, l, len(b)-off)
		}
		out = append(out, rawMessage{
			Type:  binary.NativeEndian.Uint16(b[off+4:]),
			Flags: binary.NativeEndian.Uint16(b[off+6:]),
			Seq:   binary.NativeEndian.Uint32(b[off+8:]),
			Pid:   binary.NativeEndian.Uint32(b[off+12:]),
			Data:  b[off+nlmsgHeaderLen : off+l],
		})
		off += align(l)
	}
	return out, nil
}

// genlMessage decodes a raw message's genetlink header.
func genlMessage(m rawMessage) (Message, error) {
	if len(m.Data) < genlHeaderLen {
		return Message{}, outline.Errorf("%w: message of type %d: %d payload bytes, less than a genetlink header", ErrMalformed, m.Type, len(m.Data))
	}
	return Message{Type: m.Type, Flags: m.Flags, Cmd: m.Data[0], Version: m.Data[1], Attrs: m.Data[genlHeaderLen:]}, nil
}

// encodeRequest builds one request message.
func encodeRequest(family uint16, flags uint16, seq, pid uint32, cmd, version uint8, attrs []byte) []byte {
	l := nlmsgHeaderLen + genlHeaderLen + len(attrs)
	b := make([]byte, 0, align(l))
	b = binary.NativeEndian.AppendUint32(b, uint32(l))
	b = binary.NativeEndian.AppendUint16(b, family)
	b = binary.NativeEndian.AppendUint16(b, flags)
	b = binary.NativeEndian.AppendUint32(b, seq)
	b = binary.NativeEndian.AppendUint32(b, pid)
	b = append(b, cmd, version, 0, 0)
	b = append(b, attrs...)
	for len(b)%attrAlign != 0 {
		b = append(b, 0)
	}
	return b
}

// Error is a netlink error reply (NLMSG_ERROR with a non-zero error, or a
// dump ending in NLMSG_DONE with one), with the kernel's extended ack when
// it sent one (NLM_F_ACK_TLVS; include/uapi/linux/netlink.h enum
// nlmsgerr_attrs). It unwraps to the unix.Errno, so errors.Is works with
// both errno values (unix.ENOENT) and the os/fs sentinels the errno maps
// to (ENOENT is fs.ErrNotExist, EPERM fs.ErrPermission, EOPNOTSUPP
// errors.ErrUnsupported).
type Error struct {
	_ outline.NoCompare
	// Op names the request, e.g. "netdev napi-get".
	Op    string
	Errno unix.Errno
	// Message is NLMSGERR_ATTR_MSG, the kernel's explanation; "" if none.
	Message string
	// Offset is NLMSGERR_ATTR_OFFS, the byte offset of the offending
	// attribute within the request message; -1 if none.
	Offset int
	// Attr is the type of the request's top-level attribute at Offset;
	// 0 when Offset does not fall on one.
	Attr uint16
}

// Error implements error.
func (e *Error) Error() string {
	s := "genetlink: "
	if e.Op != "" {
		s += e.Op + ": "
	}
	s += e.Errno.Error()
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Attr != 0 {
		s += " (attribute " + outline.Itoa(int(e.Attr)) + ")"
	} else if e.Offset >= 0 {
		s += " (at request offset " + outline.Itoa(e.Offset) + ")"
	}
	return s
}

// Unwrap returns the errno.
func (e *Error) Unwrap() error { return e.Errno }

// parseError decodes an NLMSG_ERROR or NLMSG_DONE payload: nil for an
// acknowledgement (error 0). req is the request the error answers, to name
// the attribute at the kernel's offset.
func parseError(m rawMessage, req []byte) error {
	if len(m.Data) < 4 {
		return outline.Errorf("%w: error message of %d bytes", ErrMalformed, len(m.Data))
	}
	code := int32(binary.NativeEndian.Uint32(m.Data))
	if code == 0 {
		return nil
	}
	if code > 0 || code < -4095 {
		return outline.Errorf("%w: error code %d", ErrMalformed, code)
	}
	e := &Error{Errno: unix.Errno(-code), Offset: -1}
	if m.Flags&unix.NLM_F_ACK_TLVS == 0 {
		return e
	}
	// The TLVs follow the echoed request: its header only when the kernel
	// capped it (NLM_F_CAPPED), else the whole request. NLMSG_DONE carries
	// no echo, only the error code.
	tlv := 4
	if m.Type == unix.NLMSG_ERROR {
		if len(m.Data) < nlmsgerrLen {
			return outline.Errorf("%w: error message of %d bytes", ErrMalformed, len(m.Data))
		}
		tlv = nlmsgerrLen
		if m.Flags&unix.NLM_F_CAPPED == 0 {
			ol := int(binary.NativeEndian.Uint32(m.Data[4:]))
			if ol < nlmsgHeaderLen || 4+align(ol) > len(m.Data) {
				return outline.Errorf("%w: echoed request of length %d in an error of %d bytes", ErrMalformed, ol, len(m.Data))
			}
			tlv = 4 + align(ol)
		}
	}
	attrs, err := DecodeAttrs(m.Data[tlv:])
	if err != nil {
		return outline.Errorf("extended ack: %w", err)
	}
	for _, a := range attrs {
		switch a.Type {
		case unix.NLMSGERR_ATTR_MSG:
			if s, err := a.String(); err == nil {
				e.Message = s
			}
		case unix.NLMSGERR_ATTR_OFFS:
			if off, err := a.U32(); err == nil && off <= 1<<20 {
				e.Offset = int(off)
				e.Attr = attrAt(req, e.Offset)
			}
		}
	}
	return e
}

// attrAt returns the type of the top-level attribute starting at offset
// off of the request message req, or 0.
func attrAt(req []byte, off int) uint16 {
	start := nlmsgHeaderLen + genlHeaderLen
	if off < start || off >= len(req) {
		return 0
	}
	attrs, err := DecodeAttrs(req[start:])
	if err != nil {
		return 0
	}
	pos := start
	for _, a := range attrs {
		if pos == off {
			return a.Type
		}
		pos += align(attrHeaderLen + len(a.Data))
	}
	return 0
}
