package genetlink

import (
	"encoding/binary"
	"testing"

	"golang.org/x/sys/unix"
)

// FuzzDecodeReply feeds arbitrary bytes through everything a reply
// datagram goes through: message framing, the genetlink header, error and
// extended-ack parsing, and each netdev decoder. Bad input must give an
// error, never a panic; what decodes must re-encode to attributes that
// decode again.
func FuzzDecodeReply(f *testing.F) {
	var e Encoder
	e.U32(queueID, 1)
	e.U32(queueIfindex, 2)
	e.U32(queueType, queueTypeRX)
	e.U32(queueNAPIID, 513)
	q, _ := e.Bytes()
	f.Add(nlmsg(20, unix.NLM_F_MULTI, 1, 9, append([]byte{netdevCmdQueueGet, 1, 0, 0}, q...)))
	var n Encoder
	n.U32(napiIfindex, 2)
	n.U32(napiID, 513)
	n.U32(napiPID, 77)
	n.Uint(napiGROFlushTimeout, 1<<40)
	nb, _ := n.Bytes()
	f.Add(nlmsg(20, unix.NLM_F_MULTI, 1, 9, append([]byte{netdevCmdNAPIGet, 1, 0, 0}, nb...)))
	var tlv Encoder
	tlv.String(unix.NLMSGERR_ATTR_MSG, "nope")
	tlv.U32(unix.NLMSGERR_ATTR_OFFS, 20)
	tb, _ := tlv.Bytes()
	errp := binary.NativeEndian.AppendUint32(nil, uint32(0xffffffea)) // -EINVAL
	errp = append(errp, make([]byte, 16)...)
	f.Add(nlmsg(unix.NLMSG_ERROR, unix.NLM_F_CAPPED|unix.NLM_F_ACK_TLVS, 1, 9, append(errp, tb...)))
	f.Add(nlmsg(unix.NLMSG_DONE, unix.NLM_F_ACK_TLVS, 1, 9, append([]byte{0xa1, 0xff, 0xff, 0xff}, tb...)))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 0})
	req := encodeRequest(20, unix.NLM_F_REQUEST, 1, 9, netdevCmdNAPIGet, 1, q)
	f.Fuzz(func(t *testing.T, b []byte) {
		msgs, err := splitMessages(b)
		if err != nil {
			return
		}
		for _, m := range msgs {
			switch m.Type {
			case unix.NLMSG_ERROR, unix.NLMSG_DONE:
				_ = parseError(m, req)
				continue
			}
			gm, err := genlMessage(m)
			if err != nil {
				continue
			}
			_, _ = DecodeQueue(gm.Attrs)
			_, _ = DecodeNAPI(gm.Attrs)
			_, _ = DecodeQStats(gm.Attrs)
			_, _ = DecodeDev(gm.Attrs)
			_, _ = parseFamily(gm.Attrs)
			attrs, err := DecodeAttrs(gm.Attrs)
			if err != nil {
				continue
			}
			var re Encoder
			for _, a := range attrs {
				if !a.Nested {
					re.put(a.Type, a.Data)
				}
				if a.Nested {
					_, _ = a.Attrs()
				}
			}
			out, err := re.Bytes()
			if err != nil {
				t.Fatalf("re-encode: %v", err)
			}
			if _, err := DecodeAttrs(out); err != nil {
				t.Fatalf("re-encoded attributes do not decode: %v", err)
			}
		}
	})
}
