package ubus

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/packet-steering/packet-steering/internal/outline"
)

// MsgType is the type of a ubus message (enum ubus_msg_type, ubusmsg.h).
type MsgType uint8

// The message types.
const (
	MsgHello        MsgType = iota // broker greeting; peer is the client's id
	MsgStatus                      // end of a request, with a status code
	MsgData                        // data of a reply
	MsgPing                        // ping; the broker echoes it as DATA
	MsgLookup                      // look up objects by path
	MsgInvoke                      // call a method
	MsgAddObject                   // register an object
	MsgRemoveObject                // unregister an object
	MsgSubscribe                   // subscribe to an object's notifications
	MsgUnsubscribe                 // unsubscribe; from the broker: target gone
	MsgNotify                      // notify subscribers; from the broker: subscription state
	MsgMonitor                     // monitor (not used by this package)
)

var msgTypeNames = [...]string{"HELLO", "STATUS", "DATA", "PING", "LOOKUP", "INVOKE", "ADD_OBJECT", "REMOVE_OBJECT", "SUBSCRIBE", "UNSUBSCRIBE", "NOTIFY", "MONITOR"}

// String returns the protocol name of the type ("INVOKE").
func (t MsgType) String() string {
	if int(t) < len(msgTypeNames) {
		return msgTypeNames[t]
	}
	return fmt.Sprintf("MSG(%d)", uint8(t))
}

// AttrID is the id of a message attribute (enum ubus_msg_attr, ubusmsg.h).
type AttrID uint8

// The message attribute ids.
const (
	AttrUnspec      AttrID = iota
	AttrStatus             // u32 status code
	AttrObjPath            // string object path
	AttrObjID              // u32 object id
	AttrMethod             // string method (or event) name
	AttrObjType            // u32 object type id
	AttrSignature          // blobmsg table of method tables
	AttrData               // blobmsg table: arguments or reply
	AttrTarget             // u32 subscription target object id
	AttrActive             // u8 subscription active
	AttrNoReply            // u8 no reply wanted
	AttrSubscribers        // nested u32 subscriber ids
	AttrUser               // string user of the caller
	AttrGroup              // string group of the caller
	attrMax
)

// Status is a ubus status code (enum ubus_msg_status). A non-OK Status is
// also an error, so a method handler can return StatusInvalidArgument and a
// caller can test errors.Is(err, StatusNotFound).
type Status int

// The status codes.
const (
	StatusOK Status = iota
	StatusInvalidCommand
	StatusInvalidArgument
	StatusMethodNotFound
	StatusNotFound
	StatusNoData
	StatusPermissionDenied
	StatusTimeout
	StatusNotSupported
	StatusUnknownError
	StatusConnectionFailed
	StatusNoMemory
	StatusParseError
	StatusSystemError
)

// Texts as libubus's ubus_strerror prints them (libubus.c).
var statusText = [...]string{
	"Success", "Invalid command", "Invalid argument", "Method not found",
	"Not found", "No response", "Permission denied", "Request timed out",
	"Operation not supported", "Unknown error", "Connection failed",
	"Out of memory", "Parsing message data failed", "System error",
}

// String returns the text the stock CLI prints for the code.
//
//go:noinline
func (s Status) String() string {
	if s >= 0 && int(s) < len(statusText) {
		return statusText[s]
	}
	return fmt.Sprintf("Unknown error (%d)", int(s))
}

// Error implements error with the same text as String; the requests of
// this package wrap it with the operation ("ubus: invoke status: Not found").
func (s Status) Error() string { return s.String() }

// StatusOf maps an error to the status code a server replies with: nil is
// StatusOK, a Status (also wrapped) is itself, anything else is
// StatusUnknownError.
//
//go:noinline
func StatusOf(err error) Status {
	if err == nil {
		return StatusOK
	}
	var s Status
	if errors.As(err, &s) {
		return s
	}
	return StatusUnknownError
}

// MsgAttr is one attribute of a message: its id and raw payload (without
// header and padding). For AttrData and AttrSignature the payload is a
// blobmsg list; use Blobmsg to decode it.
type MsgAttr struct {
	ID   AttrID
	Data []byte
}

// U32Attr returns an attribute holding a 32-bit value.
//
//go:noinline
func U32Attr(id AttrID, v uint32) MsgAttr {
	return MsgAttr{ID: id, Data: binary.BigEndian.AppendUint32(nil, v)}
}

// U8Attr returns an attribute holding an 8-bit value.
func U8Attr(id AttrID, v uint8) MsgAttr { return MsgAttr{ID: id, Data: []byte{v}} }

// StringAttr returns an attribute holding a NUL-terminated string.
//
//go:noinline
func StringAttr(id AttrID, s string) MsgAttr {
	d := make([]byte, len(s)+1)
	copy(d, s)
	return MsgAttr{ID: id, Data: d}
}

// BlobmsgAttr returns an attribute holding the blobmsg list attrs.
func BlobmsgAttr(id AttrID, attrs []Attr) (MsgAttr, error) {
	d, err := EncodeAttrs(attrs)
	if err != nil {
		return MsgAttr{}, err
	}
	return MsgAttr{ID: id, Data: d}, nil
}

// U32 returns the attribute's 32-bit value.
func (a MsgAttr) U32() (uint32, error) {
	if len(a.Data) != 4 {
		return 0, outline.Errorf("%w: attribute %d: %d bytes, want 4", ErrMalformed, a.ID, len(a.Data))
	}
	return binary.BigEndian.Uint32(a.Data), nil
}

// U8 returns the attribute's 8-bit value.
func (a MsgAttr) U8() (uint8, error) {
	if len(a.Data) < 1 {
		return 0, outline.Errorf("%w: attribute %d: empty", ErrMalformed, a.ID)
	}
	return a.Data[0], nil
}

// String returns the attribute's NUL-terminated string.
func (a MsgAttr) String() (string, error) {
	if len(a.Data) == 0 || a.Data[len(a.Data)-1] != 0 {
		return "", outline.Errorf("%w: attribute %d: string not NUL-terminated", ErrMalformed, a.ID)
	}
	return string(a.Data[:len(a.Data)-1]), nil
}

// Blobmsg decodes the attribute's payload as a blobmsg table payload.
//
//go:noinline
func (a MsgAttr) Blobmsg() ([]Attr, error) { return DecodeAttrs(a.Data, false) }

// HeaderLen is the size of the message header.
const HeaderLen = 8

// Message is one ubus message: the header (version, type, sequence number,
// peer) and the attributes of its body, in order.
type Message struct {
	Version uint8
	Type    MsgType
	Seq     uint16
	Peer    uint32
	Attrs   []MsgAttr
}

// Get returns the last attribute with the id (the broker's parser also keeps
// the last one).
//
//go:noinline
func (m *Message) Get(id AttrID) (MsgAttr, bool) {
	for i := len(m.Attrs) - 1; i >= 0; i-- {
		if m.Attrs[i].ID == id {
			return m.Attrs[i], true
		}
	}
	return MsgAttr{}, false
}

// U32 returns the 32-bit value of attribute id, if present and well formed.
func (m *Message) U32(id AttrID) (uint32, bool) {
	a, ok := m.Get(id)
	if !ok {
		return 0, false
	}
	v, err := a.U32()
	return v, err == nil
}

// Str returns the string value of attribute id, if present and well formed.
func (m *Message) Str(id AttrID) (string, bool) {
	a, ok := m.Get(id)
	if !ok {
		return "", false
	}
	v, err := a.String()
	return v, err == nil
}

// String returns a one-line summary such as "INVOKE seq=2 peer=0x0000abcd".
func (m *Message) String() string {
	return fmt.Sprintf("%s seq=%d peer=0x%08x attrs=%d", m.Type, m.Seq, m.Peer, len(m.Attrs))
}

// MarshalBinary encodes the message: the 8-byte header, then the body as one
// blob attribute (id 0) holding each attribute padded to 4 bytes.
func (m *Message) MarshalBinary() ([]byte, error) {
	return m.AppendBinary(nil)
}

// AppendBinary appends the encoding of MarshalBinary to b.
func (m *Message) AppendBinary(b []byte) ([]byte, error) {
	body := 4
	for _, a := range m.Attrs {
		if a.ID >= 128 {
			return b, outline.Errorf("ubus: attribute id %d out of range", a.ID)
		}
		body += pad4(4 + len(a.Data))
	}
	if body > MaxMessageLen {
		return b, outline.Errorf("ubus: message body of %d bytes exceeds %d", body, MaxMessageLen)
	}
	b = append(b, m.Version, uint8(m.Type))
	b = binary.BigEndian.AppendUint16(b, m.Seq)
	b = binary.BigEndian.AppendUint32(b, m.Peer)
	b = binary.BigEndian.AppendUint32(b, uint32(body))
	for _, a := range m.Attrs {
		l := 4 + len(a.Data)
		b = binary.BigEndian.AppendUint32(b, uint32(a.ID)<<24|uint32(l))
		b = append(b, a.Data...)
		b = appendZeros(b, pad4(l)-l)
	}
	return b, nil
}

// UnmarshalBinary decodes one complete message. The attributes' payloads
// alias data. Errors wrap ErrMalformed.
func (m *Message) UnmarshalBinary(data []byte) error {
	if len(data) < HeaderLen+4 {
		return outline.Errorf("%w: message of %d bytes", ErrMalformed, len(data))
	}
	bl, err := bodyLen(data[HeaderLen:])
	if err != nil {
		return err
	}
	if HeaderLen+bl != len(data) {
		return outline.Errorf("%w: body length %d, have %d bytes", ErrMalformed, bl, len(data)-HeaderLen)
	}
	m.Version = data[0]
	m.Type = MsgType(data[1])
	m.Seq = binary.BigEndian.Uint16(data[2:])
	m.Peer = binary.BigEndian.Uint32(data[4:])
	body := data[HeaderLen+4:]
	n := 0
	for off := 0; off < len(body); n++ {
		l, err := blobLen(body[off:])
		if err != nil {
			return err
		}
		off += pad4(l)
	}
	m.Attrs = make([]MsgAttr, 0, n)
	for off := 0; off < len(body); {
		h := binary.BigEndian.Uint32(body[off:])
		if h&(1<<31) != 0 {
			return outline.Errorf("%w: extended attribute in message body", ErrMalformed)
		}
		l := int(h & maxAttrLen)
		m.Attrs = append(m.Attrs, MsgAttr{ID: AttrID(h >> 24), Data: body[off+4 : off+l]})
		off += pad4(l)
	}
	return nil
}

// bodyLen checks the body header at the start of b and returns its length.
func bodyLen(b []byte) (int, error) {
	h := binary.BigEndian.Uint32(b)
	if h>>24 != 0 {
		return 0, outline.Errorf("%w: body header 0x%08x", ErrMalformed, h)
	}
	l := int(h)
	if l < 4 || l > MaxMessageLen {
		return 0, outline.Errorf("%w: body length %d outside 4..%d", ErrMalformed, l, MaxMessageLen)
	}
	return l, nil
}

// ReadMessage reads one message from r. A body longer than maxLen (or than
// MaxMessageLen when maxLen <= 0) is refused before anything is allocated
// for it. At the end of the stream before a header it returns io.EOF.
func ReadMessage(r io.Reader, maxLen int) (*Message, error) {
	if maxLen <= 0 || maxLen > MaxMessageLen {
		maxLen = MaxMessageLen
	}
	var buf []byte
	if br, ok := r.(*bufio.Reader); ok && br.Size() >= HeaderLen+4 {
		// Peek the header without a separate allocation.
		hdr, err := br.Peek(HeaderLen + 4)
		if err != nil {
			if len(hdr) == 0 && errors.Is(err, io.EOF) {
				return nil, io.EOF
			}
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, outline.Errorf("ubus: read header: %w", err)
		}
		bl, err := bodyLen(hdr[HeaderLen:])
		if err != nil {
			return nil, err
		}
		if bl > maxLen {
			return nil, outline.Errorf("%w: body length %d exceeds %d", ErrMalformed, bl, maxLen)
		}
		buf = make([]byte, HeaderLen+bl)
		if _, err := io.ReadFull(br, buf); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, outline.Errorf("ubus: read body: %w", err)
		}
	} else {
		var hdr [HeaderLen + 4]byte
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				return nil, outline.Errorf("ubus: read header: %w", err)
			}
			return nil, err
		}
		bl, err := bodyLen(hdr[HeaderLen:])
		if err != nil {
			return nil, err
		}
		if bl > maxLen {
			return nil, outline.Errorf("%w: body length %d exceeds %d", ErrMalformed, bl, maxLen)
		}
		buf = make([]byte, HeaderLen+bl)
		copy(buf, hdr[:])
		if _, err := io.ReadFull(r, buf[len(hdr):]); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, outline.Errorf("ubus: read body: %w", err)
		}
	}
	m := new(Message)
	if err := m.UnmarshalBinary(buf); err != nil {
		return nil, err
	}
	return m, nil
}
