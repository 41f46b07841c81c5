package ubustest

import (
	"bytes"
	"net"
	"testing"

	"github.com/packet-steering/packet-steering/internal/ubus"
)

// FuzzBrokerHandle feeds a stream of messages from two clients to the
// broker's handler: whatever the input, it must not panic, and dropping the
// clients afterwards must leave no object, type, pattern or pending call.
func FuzzBrokerHandle(f *testing.F) {
	sig, _ := ubus.BlobmsgAttr(ubus.AttrSignature, []ubus.Attr{ubus.Table("m", ubus.Int32("a", 3))})
	seeds := [][]*ubus.Message{
		{{Type: ubus.MsgAddObject, Seq: 1, Attrs: []ubus.MsgAttr{ubus.StringAttr(ubus.AttrObjPath, "a"), sig}},
			{Type: ubus.MsgLookup, Seq: 2}},
		{{Type: ubus.MsgAddObject, Seq: 1}, {Type: ubus.MsgInvoke, Seq: 2, Attrs: []ubus.MsgAttr{
			ubus.U32Attr(ubus.AttrObjID, 1), ubus.StringAttr(ubus.AttrMethod, "register")}}},
		{{Type: ubus.MsgPing, Seq: 3}, {Type: ubus.MsgNotify, Seq: 4}, {Type: ubus.MsgSubscribe, Seq: 5}},
	}
	for _, msgs := range seeds {
		var buf []byte
		for _, m := range msgs {
			buf, _ = m.AppendBinary(buf)
		}
		f.Add(buf)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		b := New()
		var clients [2]*client
		for i := range clients {
			a, z := net.Pipe()
			defer a.Close()
			defer z.Close()
			clients[i] = &client{nc: a, tx: make(chan []byte, 64), quit: make(chan struct{}), objects: map[uint32]*object{}}
			clients[i].id = uint32(5000 + i)
			b.clients[clients[i].id] = clients[i]
		}
		r := bytes.NewReader(data)
		for n := 0; n < 64; n++ {
			m, err := ubus.ReadMessage(r, 0)
			if err != nil {
				break
			}
			cl := clients[m.Seq&1]
			// Let the first client's objects be addressed by the other's
			// messages: ids are random, so map small ids onto real ones.
			for i := range m.Attrs {
				if v, err := m.Attrs[i].U32(); err == nil && v >= 2 && v < 64 {
					for id := range b.objects {
						if id%62 == v-2 {
							m.Attrs[i] = ubus.U32Attr(m.Attrs[i].ID, id)
						}
					}
				}
			}
			b.handle(cl, m)
		}
		for _, cl := range clients {
			b.dropClient(cl)
		}
		if len(b.objects) != 0 || len(b.paths) != 0 || len(b.types) != 0 || len(b.patterns) != 0 || len(b.pending) != 0 {
			t.Fatalf("state left: %d objects, %d paths, %d types, %d patterns, %d pending",
				len(b.objects), len(b.paths), len(b.types), len(b.patterns), len(b.pending))
		}
	})
}
