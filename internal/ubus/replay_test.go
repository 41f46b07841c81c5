package ubus_test

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/packet-steering/packet-steering/internal/ubus"
	"github.com/packet-steering/packet-steering/internal/ubus/ubustest"
)

// captureEcho is the Go twin of the C server in the captures: the object
// capture.echo with the same methods, signature and replies.
func captureEcho() *ubus.Object {
	echo := func(_ context.Context, r *ubus.Request) ([]ubus.Attr, error) { return r.Args, nil }
	return &ubus.Object{Path: "capture.echo", Methods: []ubus.Method{
		{Name: "echo", Args: []ubus.ArgSig{{"mode", ubus.TypeString}, {"force", ubus.TypeBool}, {"n", ubus.TypeInt32}}, Handler: echo},
		{Name: "types", Handler: func(context.Context, *ubus.Request) ([]ubus.Attr, error) {
			return []ubus.Attr{
				ubus.String("mode", "auto"),
				ubus.Bool("enabled", true),
				ubus.Int16("u16", 513),
				ubus.Int32("cpus", 4),
				ubus.Int64("bytes", 1234567890123),
				ubus.Double("load", 0.75),
				ubus.String("", "unnamed-at-top"),
				ubus.Table("queue", ubus.String("device", "eth0"), ubus.String("rps_cpus", "e")),
				ubus.Array("cpulist", ubus.Int32("", 0), ubus.Int32("", 1), ubus.String("", "two"),
					ubus.Table("", ubus.Bool("x", false))),
				ubus.Array("empty_array"),
				ubus.Table("empty_table"),
			}, nil
		}},
		{Name: "alltypes", Args: []ubus.ArgSig{{"s", ubus.TypeString}, {"b", ubus.TypeBool}, {"i16", ubus.TypeInt16},
			{"i32", ubus.TypeInt32}, {"i64", ubus.TypeInt64}, {"d", ubus.TypeDouble}, {"t", ubus.TypeTable},
			{"a", ubus.TypeArray}, {"u", ubus.TypeUnspec}}, Handler: echo},
		{Name: "fail", Handler: func(context.Context, *ubus.Request) ([]ubus.Attr, error) {
			return nil, ubus.StatusInvalidArgument
		}},
		{Name: "noreply", Handler: func(context.Context, *ubus.Request) ([]ubus.Attr, error) { return nil, nil }},
	}}
}

// idMap binds the ids of a capture (chosen at random by the stock broker)
// to the ids of the replay: "the id that the earlier message gave".
type idMap map[uint32]uint32

func (m idMap) bind(t testing.TB, what string, capt, actual uint32) {
	t.Helper()
	if prev, ok := m[capt]; ok && prev != actual {
		t.Fatalf("%s: captured id %08x was %08x before, now %08x", what, capt, prev, actual)
	}
	m[capt] = actual
}

func (m idMap) get(t testing.TB, capt uint32) uint32 {
	t.Helper()
	v, ok := m[capt]
	if !ok {
		t.Fatalf("captured id %08x not seen yet", capt)
	}
	return v
}

// idAttrs are the message attributes that hold ids.
var idAttrs = []ubus.AttrID{ubus.AttrObjID, ubus.AttrObjType, ubus.AttrTarget}

// learn binds the ids of a captured broker message to the actual one's.
func (m idMap) learn(t testing.TB, capt, actual *ubus.Message, seqs idMap) {
	t.Helper()
	if capt.Type != actual.Type {
		t.Fatalf("got %s, want %s", actual.String(), capt.String())
	}
	m.bind(t, "peer", capt.Peer, actual.Peer)
	for _, id := range idAttrs {
		c, okC := capt.U32(id)
		a, okA := actual.U32(id)
		if okC && okA {
			m.bind(t, "attr", c, a)
		}
	}
	if _, ok := capt.Get(ubus.AttrNoReply); ok && capt.Type == ubus.MsgInvoke {
		// A notification carries the notifier's own sequence number.
		seqs.bind(t, "notify seq", uint32(capt.Seq), uint32(actual.Seq))
	}
}

// substitute rewrites the ids (and, when not root, the credentials) of a
// captured message to the replay's.
func (m idMap) substitute(t testing.TB, capt *ubus.Message, seqs idMap, user, group string) []byte {
	t.Helper()
	out := *capt
	out.Attrs = append([]ubus.MsgAttr(nil), capt.Attrs...)
	out.Peer = m.get(t, capt.Peer)
	if v, ok := seqs[uint32(capt.Seq)]; ok && capt.Type == ubus.MsgInvoke {
		out.Seq = uint16(v)
	}
	for i, a := range out.Attrs {
		switch a.ID {
		case ubus.AttrObjID, ubus.AttrObjType, ubus.AttrTarget:
			v, err := a.U32()
			if err != nil {
				t.Fatal(err)
			}
			out.Attrs[i] = ubus.U32Attr(a.ID, m.get(t, v))
		case ubus.AttrUser:
			out.Attrs[i] = ubus.StringAttr(a.ID, user)
		case ubus.AttrGroup:
			out.Attrs[i] = ubus.StringAttr(a.ID, group)
		case ubus.AttrData:
			attrs, err := a.Blobmsg()
			if err != nil {
				t.Fatal(err)
			}
			changed := false
			for j := range attrs {
				if attrs[j].Name == "object" && attrs[j].Type == ubus.TypeInt32 {
					attrs[j].Int = int64(int32(m.get(t, uint32(attrs[j].Int))))
					changed = true
				}
			}
			if changed {
				na, err := ubus.BlobmsgAttr(ubus.AttrData, attrs)
				if err != nil {
					t.Fatal(err)
				}
				out.Attrs[i] = na
			}
		}
	}
	b, err := out.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// credentials returns the user and group names the broker will report for
// this process: the captures were made as root.
func credentials() (string, string) {
	if os.Getuid() == 0 && os.Getgid() == 0 {
		return "root", "root"
	}
	return "", ""
}

// TestReplayClientCaptures plays the client side of each capture against
// ubustest, with the Go twin of the captured server registered, and compares
// every answer of the broker with the stock ubusd's, byte for byte, ids
// substituted.
func TestReplayClientCaptures(t *testing.T) {
	for _, name := range captureNames(t) {
		if name == "server_register_and_serve" {
			continue
		}
		t.Run(name, func(t *testing.T) { replayClient(t, name) })
	}
}

func replayClient(t *testing.T, name string) {
	_, sock := ubustest.Start(t)
	ctx := testCtx(t)
	srv := dial(t, sock)
	obj := captureEcho()
	if err := srv.AddObject(ctx, obj); err != nil {
		t.Fatal(err)
	}
	user, group := credentials()
	if user == "" {
		// Not root: the broker reports this process's names instead.
		who := &ubus.Object{Path: "whoami", Methods: []ubus.Method{{Name: "who",
			Handler: func(_ context.Context, r *ubus.Request) ([]ubus.Attr, error) {
				return []ubus.Attr{ubus.String("u", r.User), ubus.String("g", r.Group)}, nil
			}}}}
		if err := srv.AddObject(ctx, who); err != nil {
			t.Fatal(err)
		}
		c := dial(t, sock)
		got, err := c.Call(ctx, "whoami", "who", nil)
		if err != nil {
			t.Fatal(err)
		}
		user, group = got[0].Str, got[1].Str
		if err := srv.RemoveObject(ctx, who); err != nil {
			t.Fatal(err)
		}
	}
	ids, seqs := idMap{0: 0, 1: 1}, idMap{}
	conns := map[int]net.Conn{}
	conn := func(n int) net.Conn {
		if c, ok := conns[n]; ok {
			return c
		}
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		conns[n] = c
		return c
	}
	for i, cm := range loadCapture(t, name) {
		var capt ubus.Message
		if err := capt.UnmarshalBinary(cm.raw); err != nil {
			t.Fatal(err)
		}
		c := conn(cm.conn)
		if cm.toBroker {
			if _, err := c.Write(ids.substitute(t, &capt, seqs, user, group)); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if capt.Type == ubus.MsgInvoke {
			// An unsolicited INVOKE: an event or a notification, fired by
			// the captured server (or `ubus send`) at this point.
			trigger(t, ctx, srv, obj, &capt)
		}
		_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
		actual, err := ubus.ReadMessage(c, 0)
		if err != nil {
			t.Fatalf("message %d: want %s: %v", i, capt.String(), err)
		}
		ids.learn(t, &capt, actual, seqs)
		want := ids.substitute(t, &capt, seqs, user, group)
		got, err := actual.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("message %d (%s) differs:\n got %x\nwant %x", i, capt.String(), got, want)
		}
	}
	for n, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		if m, err := ubus.ReadMessage(c, 0); err == nil {
			t.Errorf("conn %d: unexpected extra message %s", n, m.String())
		}
	}
}

// trigger makes the server send the event or notification the capture shows.
func trigger(t *testing.T, ctx context.Context, srv *ubus.Conn, obj *ubus.Object, capt *ubus.Message) {
	t.Helper()
	method, _ := capt.Str(ubus.AttrMethod)
	data, err := ubus.DecodeAttrs(dataOf(t, capt), false)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := capt.Get(ubus.AttrNoReply); ok {
		if err := srv.Notify(ctx, obj, method, data); err != nil {
			t.Fatal(err)
		}
		return
	}
	if err := srv.Send(ctx, method, data); err != nil {
		t.Fatal(err)
	}
}

// TestReplayServerCapture plays the broker's side of
// server_register_and_serve against a Conn serving the Go twin of the
// captured server: registration and every reply must match the stock
// libubus byte for byte (ids are the captured ones, no substitution).
func TestReplayServerCapture(t *testing.T) {
	dir, err := os.MkdirTemp("", "ubusreplay")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	l, err := net.Listen("unix", filepath.Join(dir, "s"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	msgs := loadCapture(t, "server_register_and_serve")
	ctx := testCtx(t)
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			close(accepted)
			return
		}
		if _, err := c.Write(msgs[0].raw); err != nil { // HELLO
			c.Close()
		}
		accepted <- c
	}()
	conn, err := ubus.Dial(ctx, filepath.Join(dir, "s"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	broker := <-accepted
	if broker == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { broker.Close() })
	var hello ubus.Message
	if err := hello.UnmarshalBinary(msgs[0].raw); err != nil {
		t.Fatal(err)
	}
	if conn.ID() != hello.Peer {
		t.Fatalf("client id %08x, HELLO said %08x", conn.ID(), hello.Peer)
	}
	obj := captureEcho()
	added := make(chan error, 1)
	go func() { added <- conn.AddObject(ctx, obj) }()
	for i, cm := range msgs[1:] {
		if !cm.toBroker {
			if _, err := broker.Write(cm.raw); err != nil {
				t.Fatal(err)
			}
			continue
		}
		_ = broker.SetReadDeadline(time.Now().Add(3 * time.Second))
		m, err := ubus.ReadMessage(broker, 0)
		if err != nil {
			t.Fatalf("message %d: %v", i+1, err)
		}
		got, _ := m.MarshalBinary()
		if !bytes.Equal(got, cm.raw) {
			t.Fatalf("message %d (%s) differs:\n got %x\nwant %x", i+1, m.String(), got, cm.raw)
		}
	}
	if err := <-added; err != nil {
		t.Fatal(err)
	}
	if obj.ID() != 0x243dd1bd || obj.TypeID() != 0x353d15be {
		t.Fatalf("object ids %08x/%08x, want those of the captured DATA", obj.ID(), obj.TypeID())
	}
}
