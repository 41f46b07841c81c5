package genetlink

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"github.com/packet-steering/packet-steering/internal/testenv"
	"io/fs"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func u32p(v uint32) *uint32 { return &v }
func u64p(v uint64) *uint64 { return &v }

func TestEncoderRoundTrip(t *testing.T) {
	var e Encoder
	e.U8(1, 7)
	e.U16(2, 0xbeef)
	e.U32(3, 0xdeadbeef)
	e.U64(4, 1<<40)
	e.Uint(5, 3)
	e.Uint(6, 1<<33)
	e.String(7, "netdev")
	e.Nested(8)
	e.U32(1, 42)
	e.Nested(2)
	e.String(3, "x")
	e.End()
	e.End()
	b, err := e.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	if len(b)%4 != 0 {
		t.Fatalf("length %d not aligned", len(b))
	}
	attrs, err := DecodeAttrs(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(attrs) != 8 {
		t.Fatalf("%d attributes, want 8", len(attrs))
	}
	check := func(what string, got, want any, err error) {
		t.Helper()
		if err != nil || got != want {
			t.Errorf("%s = %v, %v; want %v", what, got, err, want)
		}
	}
	v8, err := attrs[0].U8()
	check("u8", v8, uint8(7), err)
	v16, err := attrs[1].U16()
	check("u16", v16, uint16(0xbeef), err)
	v32, err := attrs[2].U32()
	check("u32", v32, uint32(0xdeadbeef), err)
	v64, err := attrs[3].U64()
	check("u64", v64, uint64(1<<40), err)
	if len(attrs[4].Data) != 4 || len(attrs[5].Data) != 8 {
		t.Errorf("uint sizes %d, %d; want 4, 8", len(attrs[4].Data), len(attrs[5].Data))
	}
	u, err := attrs[4].Uint()
	check("uint small", u, uint64(3), err)
	u, err = attrs[5].Uint()
	check("uint large", u, uint64(1<<33), err)
	s, err := attrs[6].String()
	check("string", s, "netdev", err)
	if !attrs[7].Nested || attrs[7].Type != 8 {
		t.Fatalf("nested attribute %+v", attrs[7])
	}
	inner, err := attrs[7].Attrs()
	if err != nil || len(inner) != 2 {
		t.Fatalf("inner = %v, %v", inner, err)
	}
	v32, err = inner[0].U32()
	check("inner u32", v32, uint32(42), err)
	deeper, err := inner[1].Attrs()
	if err != nil || len(deeper) != 1 {
		t.Fatalf("deeper = %v, %v", deeper, err)
	}
	s, err = deeper[0].String()
	check("deeper string", s, "x", err)
}

func TestEncoderErrors(t *testing.T) {
	tests := []struct {
		name string
		do   func(*Encoder)
	}{
		{"end without nested", func(e *Encoder) { e.End() }},
		{"nested left open", func(e *Encoder) { e.Nested(1) }},
		{"flag bits in type", func(e *Encoder) { e.U32(0x8001, 1) }},
		{"too long", func(e *Encoder) { e.String(1, strings.Repeat("a", 70000)) }},
		{"too deep", func(e *Encoder) {
			for i := 0; i < maxDepth+1; i++ {
				e.Nested(1)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var e Encoder
			tc.do(&e)
			if _, err := e.Bytes(); err == nil {
				t.Fatal("no error")
			}
		})
	}
}

// attr builds one raw attribute with an explicit length field.
func attr(l, typ uint16, data ...byte) []byte {
	b := binary.NativeEndian.AppendUint16(nil, l)
	b = binary.NativeEndian.AppendUint16(b, typ)
	return append(b, data...)
}

func TestDecodeAttrsMalformed(t *testing.T) {
	tests := []struct {
		name string
		b    []byte
		ok   bool
	}{
		{"empty", nil, true},
		{"zero padding", []byte{0, 0}, true},
		{"garbage tail", []byte{1, 0}, false},
		{"length below header", attr(3, 1), false},
		{"length past end", attr(12, 1, 1, 2, 3, 4), false},
		{"header only", attr(4, 1), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeAttrs(tc.b)
			if (err == nil) != tc.ok {
				t.Fatalf("err = %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrMalformed) {
				t.Fatalf("err %v does not wrap ErrMalformed", err)
			}
		})
	}
}

func TestAttrWrongLengths(t *testing.T) {
	a := Attr{Type: 1, Data: []byte{1, 2, 3}}
	if _, err := a.U32(); !errors.Is(err, ErrMalformed) {
		t.Errorf("U32 on 3 bytes: %v", err)
	}
	if _, err := a.Uint(); !errors.Is(err, ErrMalformed) {
		t.Errorf("Uint on 3 bytes: %v", err)
	}
	if _, err := a.String(); !errors.Is(err, ErrMalformed) {
		t.Errorf("String without NUL: %v", err)
	}
}

// nlmsg builds one netlink message.
func nlmsg(typ, flags uint16, seq, pid uint32, payload []byte) []byte {
	b := binary.NativeEndian.AppendUint32(nil, uint32(16+len(payload)))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = binary.NativeEndian.AppendUint16(b, flags)
	b = binary.NativeEndian.AppendUint32(b, seq)
	b = binary.NativeEndian.AppendUint32(b, pid)
	b = append(b, payload...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

func TestSplitMessages(t *testing.T) {
	two := append(nlmsg(20, 2, 1, 9, []byte{1, 1, 0, 0}), nlmsg(3, 2, 1, 9, []byte{0, 0, 0, 0})...)
	ms, err := splitMessages(two)
	if err != nil || len(ms) != 2 || ms[0].Type != 20 || ms[1].Type != unix.NLMSG_DONE || ms[0].Seq != 1 || ms[0].Pid != 9 {
		t.Fatalf("split = %+v, %v", ms, err)
	}
	bad := [][]byte{
		two[:10],
		append(binary.NativeEndian.AppendUint32(nil, 8), make([]byte, 12)...),    // length below header
		append(binary.NativeEndian.AppendUint32(nil, 4000), make([]byte, 12)...), // length past end
	}
	for i, b := range bad {
		if _, err := splitMessages(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("bad %d: err = %v", i, err)
		}
	}
}

func TestParseError(t *testing.T) {
	req := encodeRequest(20, unix.NLM_F_REQUEST, 5, 9, 11, 1, func() []byte {
		var e Encoder
		e.U32(1, 3)
		e.U32(2, 7)
		b, _ := e.Bytes()
		return b
	}())
	errno := func(n int32) []byte { return binary.NativeEndian.AppendUint32(nil, uint32(n)) }
	var tlv Encoder
	tlv.String(unix.NLMSGERR_ATTR_MSG, "bad napi id")
	tlv.U32(unix.NLMSGERR_ATTR_OFFS, 28) // 16 + 4 + the first 8-byte attribute
	tlvs, _ := tlv.Bytes()
	capped := append(append(errno(-int32(unix.EINVAL)), req[:16]...), tlvs...)
	full := append(append(errno(-int32(unix.ENOENT)), req...), tlvs...)

	tests := []struct {
		name     string
		m        rawMessage
		errno    unix.Errno
		msg      string
		attr     uint16
		notExist bool
	}{
		{"ack", rawMessage{Type: unix.NLMSG_ERROR, Data: append(errno(0), req[:16]...)}, 0, "", 0, false},
		{"plain", rawMessage{Type: unix.NLMSG_ERROR, Data: append(errno(-int32(unix.EPERM)), req[:16]...)}, unix.EPERM, "", 0, false},
		{"capped with tlvs", rawMessage{Type: unix.NLMSG_ERROR, Flags: unix.NLM_F_CAPPED | unix.NLM_F_ACK_TLVS, Data: capped}, unix.EINVAL, "bad napi id", 2, false},
		{"full echo with tlvs", rawMessage{Type: unix.NLMSG_ERROR, Flags: unix.NLM_F_ACK_TLVS, Data: full}, unix.ENOENT, "bad napi id", 2, true},
		{"done with tlvs", rawMessage{Type: unix.NLMSG_DONE, Flags: unix.NLM_F_ACK_TLVS, Data: append(errno(-int32(unix.EOPNOTSUPP)), tlvs...)}, unix.EOPNOTSUPP, "bad napi id", 2, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := parseError(tc.m, req)
			if tc.errno == 0 {
				if err != nil {
					t.Fatalf("ack gave %v", err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %v, not *Error", err)
			}
			if e.Errno != tc.errno || e.Message != tc.msg || e.Attr != tc.attr {
				t.Fatalf("got %+v, want errno %v msg %q attr %d", e, tc.errno, tc.msg, tc.attr)
			}
			if !errors.Is(err, tc.errno) {
				t.Fatalf("errors.Is(%v, %v) false", err, tc.errno)
			}
			if errors.Is(err, fs.ErrNotExist) != tc.notExist {
				t.Fatalf("errors.Is(%v, fs.ErrNotExist) = %v", err, !tc.notExist)
			}
		})
	}
	// A short or nonsensical error message is malformed, not a panic.
	for i, d := range [][]byte{nil, {1, 2}, errno(5), errno(-int32(unix.EINVAL))} {
		m := rawMessage{Type: unix.NLMSG_ERROR, Flags: unix.NLM_F_ACK_TLVS, Data: d}
		if err := parseError(m, req); err == nil {
			t.Errorf("case %d: no error", i)
		}
	}
}

func TestDecodeNetdev(t *testing.T) {
	enc := func(f func(*Encoder)) []byte {
		var e Encoder
		f(&e)
		b, err := e.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	q, err := DecodeQueue(enc(func(e *Encoder) {
		e.U32(queueID, 3)
		e.U32(queueIfindex, 7)
		e.U32(queueType, queueTypeTX)
		e.U32(queueNAPIID, 513)
		e.U32(99, 1) // unknown: skipped
	}))
	if err != nil || q != (Queue{Ifindex: 7, Type: QueueTX, ID: 3, NAPIID: 513}) {
		t.Errorf("queue = %+v, %v", q, err)
	}
	if _, err := DecodeQueue(enc(func(e *Encoder) { e.U32(queueID, 1); e.U32(queueIfindex, 2) })); err == nil {
		t.Error("queue without type decoded")
	}
	if _, err := DecodeQueue(enc(func(e *Encoder) {
		e.U32(queueID, 1)
		e.U32(queueIfindex, 2)
		e.U32(queueType, 9)
	})); err == nil {
		t.Error("queue type 9 decoded")
	}
	n, err := DecodeNAPI(enc(func(e *Encoder) {
		e.U32(napiIfindex, 7)
		e.U32(napiID, 513)
		e.U32(napiIRQ, 41)
		e.U32(napiPID, 1234)
		e.U32(napiDeferHardIRQs, 2)
		e.Uint(napiGROFlushTimeout, 20000)
		e.Uint(napiIRQSuspendTimeout, 1<<33)
		e.U32(napiThreaded, 1)
	}))
	want := NAPI{ID: 513, Ifindex: 7, IRQ: 41, PID: 1234, Config: NAPIConfig{DeferHardIRQs: u32p(2),
		GROFlushTimeout: u64p(20000), IRQSuspendTimeout: u64p(1 << 33), Threaded: u32p(1)}}
	if err != nil || n.ID != want.ID || n.IRQ != want.IRQ || n.PID != want.PID ||
		*n.Config.DeferHardIRQs != 2 || *n.Config.GROFlushTimeout != 20000 ||
		*n.Config.IRQSuspendTimeout != 1<<33 || *n.Config.Threaded != 1 {
		t.Errorf("napi = %+v, %v", n, err)
	}
	n, err = DecodeNAPI(enc(func(e *Encoder) { e.U32(napiIfindex, 7); e.U32(napiID, 9) }))
	if err != nil || n.IRQ != -1 || n.PID != 0 || n.Config.DeferHardIRQs != nil {
		t.Errorf("bare napi = %+v, %v", n, err)
	}
	if _, err := DecodeNAPI(enc(func(e *Encoder) { e.U32(napiIfindex, 7); e.U16(napiID, 9) })); err == nil {
		t.Error("napi id of 2 bytes decoded")
	}
	s, err := DecodeQStats(enc(func(e *Encoder) {
		e.U32(qstatsIfindex, 7)
		e.U32(qstatsQueueType, queueTypeRX)
		e.U32(qstatsQueueID, 1)
		e.Uint(8, 100)
		e.Uint(9, 1<<40)
		e.Uint(13, 5)
		e.Uint(200, 1) // unknown counter: skipped
	}))
	if err != nil || s.Type != QueueRX || s.QueueID != 1 || s.RxPackets != 100 ||
		s.RxBytes != 1<<40 || s.RxHWDrops != 5 || !s.Has(QStatRxHWDrops) || s.Has(QStatTxPackets) {
		t.Errorf("qstats = %+v, %v", s, err)
	}
	d, err := DecodeDev(enc(func(e *Encoder) { e.U32(devIfindex, 4); e.U64(devXDPFeatures, 43) }))
	if err != nil || d.Ifindex != 4 || d.XDPFeatures != 43 {
		t.Errorf("dev = %+v, %v", d, err)
	}
}

func TestParseFamily(t *testing.T) {
	var e Encoder
	e.U16(ctrlAttrFamilyID, 20)
	e.String(ctrlAttrFamilyName, "netdev")
	e.U32(ctrlAttrVersion, 1)
	e.Nested(ctrlAttrOps)
	for i, op := range []uint32{1, 10, 14} {
		e.Nested(uint16(i + 1))
		e.U32(ctrlAttrOpID, op)
		e.U32(2, 0xe)
		e.End()
	}
	e.End()
	b, _ := e.Bytes()
	f, err := parseFamily(b)
	if err != nil || f.ID != 20 || f.Name != "netdev" || !f.HasOp(14) || f.HasOp(12) {
		t.Fatalf("family = %+v, %v", f, err)
	}
	if _, err := parseFamily(nil); err == nil {
		t.Fatal("family without id parsed")
	}
}

// TestKernelNlctrl resolves the nlctrl family itself on the running
// kernel (every kernel with generic netlink has it; no privileges needed)
// and a family that does not exist.
func TestKernelNlctrl(t *testing.T) {
	// qemu-user (make test-cross) has no NETLINK_GENERIC sockets: "protocol
	// not supported"; the cross run is -short.
	testenv.Short(t, "kernel test")
	c, err := Dial()
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c.Close()
	ctx := context.Background()
	f, err := c.Family(ctx, "nlctrl")
	if err != nil {
		t.Fatalf("nlctrl: %v", err)
	}
	if f.ID != unix.GENL_ID_CTRL || !f.HasOp(unix.CTRL_CMD_GETFAMILY) {
		t.Fatalf("nlctrl = %+v", f)
	}
	_, err = c.Family(ctx, "no-such-family")
	if !errors.Is(err, fs.ErrNotExist) || !errors.Is(err, unix.ENOENT) {
		t.Fatalf("missing family: %v, want ENOENT / fs.ErrNotExist", err)
	}
	if !bytes.Contains([]byte(err.Error()), []byte("no-such-family")) {
		t.Errorf("error %q does not name the family", err)
	}
	c.Close()
	if _, err := c.Family(ctx, "nlctrl"); err == nil {
		t.Fatal("request on a closed socket succeeded")
	}
}

// TestNetdevNotSupported: a command the family's op list lacks is refused
// before anything is sent (the Netdev has no socket here).
func TestNetdevNotSupported(t *testing.T) {
	n := &Netdev{family: &Family{ID: 20, Name: NetdevFamily, Ops: []uint32{netdevCmdDevGet}}}
	ctx := context.Background()
	checks := map[string]error{}
	_, checks["queue-get"] = n.Queues(ctx, 1)
	_, checks["napi-get"] = n.NAPIs(ctx, 1)
	_, checks["napi-get one"] = n.NAPI(ctx, 1)
	_, checks["qstats-get"] = n.QStats(ctx, 1)
	checks["napi-set"] = n.SetNAPI(ctx, 1, NAPIConfig{DeferHardIRQs: u32p(1)})
	for op, err := range checks {
		if !errors.Is(err, errors.ErrUnsupported) || !strings.Contains(err.Error(), "not supported by this kernel") {
			t.Errorf("%s: %v", op, err)
		}
	}
	if !n.Supports("dev-get") || n.Supports("napi-set") || n.Supports("no-such-op") {
		t.Error("Supports disagrees with the op list")
	}
}
