package ubustest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/packet-steering/packet-steering/internal/ubus"
)

// raw is a protocol-level client for checking the broker's exact answers.
type raw struct {
	t  *testing.T
	nc net.Conn
	id uint32
}

func rawDial(t *testing.T, sock string) *raw {
	t.Helper()
	nc, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	r := &raw{t: t, nc: nc}
	hello := r.read()
	if hello.Type != ubus.MsgHello || hello.Seq != 0 || len(hello.Attrs) != 0 || hello.Peer < systemObjectMax {
		t.Fatalf("hello %s", hello.String())
	}
	r.id = hello.Peer
	return r
}

func (r *raw) send(m *ubus.Message) {
	r.t.Helper()
	b, err := m.MarshalBinary()
	if err != nil {
		r.t.Fatal(err)
	}
	if _, err := r.nc.Write(b); err != nil {
		r.t.Fatal(err)
	}
}

func (r *raw) read() *ubus.Message {
	r.t.Helper()
	_ = r.nc.SetReadDeadline(time.Now().Add(3 * time.Second))
	m, err := ubus.ReadMessage(r.nc, 0)
	if err != nil {
		r.t.Fatalf("read: %v", err)
	}
	return m
}

func (r *raw) expectStatus(seq uint16, peer uint32, st ubus.Status) {
	r.t.Helper()
	m := r.read()
	want := &ubus.Message{Type: ubus.MsgStatus, Seq: seq, Peer: peer, Attrs: []ubus.MsgAttr{ubus.U32Attr(ubus.AttrStatus, uint32(st))}}
	if !reflect.DeepEqual(m, want) {
		r.t.Fatalf("got %s %+v, want STATUS %v", m.String(), m.Attrs, st)
	}
}

// addObject registers an object with the given attributes and returns the
// DATA reply.
func (r *raw) addObject(seq uint16, attrs ...ubus.MsgAttr) *ubus.Message {
	r.t.Helper()
	r.send(&ubus.Message{Type: ubus.MsgAddObject, Seq: seq, Attrs: attrs})
	d := r.read()
	if d.Type != ubus.MsgData {
		r.t.Fatalf("add object: %s", d.String())
	}
	r.expectStatus(seq, 0, ubus.StatusOK)
	return d
}

func sig(t *testing.T) ubus.MsgAttr {
	a, err := ubus.BlobmsgAttr(ubus.AttrSignature, []ubus.Attr{ubus.Table("m", ubus.Int32("x", int32(ubus.TypeString)))})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestPingAndInvalidCommands(t *testing.T) {
	_, sock := Start(t)
	r := rawDial(t, sock)
	r.send(&ubus.Message{Type: ubus.MsgPing, Seq: 5, Peer: 9})
	if m := r.read(); m.Type != ubus.MsgData || m.Seq != 5 || m.Peer != 9 {
		t.Fatalf("pong %s", m.String())
	}
	r.expectStatus(5, 9, ubus.StatusOK)
	for _, typ := range []ubus.MsgType{ubus.MsgHello, ubus.MsgMonitor, 42} {
		r.send(&ubus.Message{Type: typ, Seq: 6, Peer: 7})
		r.expectStatus(6, 7, ubus.StatusInvalidCommand)
	}
	tests := []struct {
		m    *ubus.Message
		want ubus.Status
	}{
		{&ubus.Message{Type: ubus.MsgLookup, Attrs: []ubus.MsgAttr{ubus.StringAttr(ubus.AttrObjPath, "")}}, ubus.StatusInvalidArgument},
		{&ubus.Message{Type: ubus.MsgInvoke, Attrs: []ubus.MsgAttr{ubus.U32Attr(ubus.AttrObjID, 5000)}}, ubus.StatusInvalidArgument},
		{&ubus.Message{Type: ubus.MsgInvoke, Attrs: []ubus.MsgAttr{ubus.U32Attr(ubus.AttrObjID, 1), ubus.StringAttr(ubus.AttrMethod, "other")}}, ubus.StatusInvalidCommand},
		{&ubus.Message{Type: ubus.MsgRemoveObject}, ubus.StatusInvalidArgument},
		{&ubus.Message{Type: ubus.MsgRemoveObject, Attrs: []ubus.MsgAttr{ubus.U32Attr(ubus.AttrObjID, 1)}}, ubus.StatusNotFound},
		{&ubus.Message{Type: ubus.MsgSubscribe, Attrs: []ubus.MsgAttr{ubus.U32Attr(ubus.AttrObjID, 1)}}, ubus.StatusInvalidArgument},
		{&ubus.Message{Type: ubus.MsgNotify, Attrs: []ubus.MsgAttr{ubus.U32Attr(ubus.AttrObjID, 5000), ubus.StringAttr(ubus.AttrMethod, "x")}}, ubus.StatusNotFound},
		// A wrongly sized OBJID is ignored, as ubusd's policy check does.
		{&ubus.Message{Type: ubus.MsgInvoke, Attrs: []ubus.MsgAttr{{ID: ubus.AttrObjID, Data: []byte{1}}, ubus.StringAttr(ubus.AttrMethod, "x")}}, ubus.StatusInvalidArgument},
	}
	for i, tc := range tests {
		tc.m.Seq = uint16(10 + i)
		r.send(tc.m)
		r.expectStatus(tc.m.Seq, 0, tc.want)
	}
}

func TestObjectTypesAndRemoval(t *testing.T) {
	_, sock := Start(t)
	r := rawDial(t, sock)
	d1 := r.addObject(1, ubus.StringAttr(ubus.AttrObjPath, "a"), sig(t))
	id1, _ := d1.U32(ubus.AttrObjID)
	typ, ok := d1.U32(ubus.AttrObjType)
	if !ok || len(d1.Attrs) != 2 {
		t.Fatalf("first object reply %+v", d1.Attrs)
	}
	// Reusing the type by id: the reply carries no type (no signature sent).
	d2 := r.addObject(2, ubus.StringAttr(ubus.AttrObjPath, "b"), ubus.U32Attr(ubus.AttrObjType, typ))
	id2, _ := d2.U32(ubus.AttrObjID)
	if len(d2.Attrs) != 1 || id2 == id1 {
		t.Fatalf("second object reply %+v", d2.Attrs)
	}
	r.send(&ubus.Message{Type: ubus.MsgLookup, Seq: 3, Attrs: []ubus.MsgAttr{ubus.StringAttr(ubus.AttrObjPath, "b")}})
	l := r.read()
	if got, _ := l.U32(ubus.AttrObjType); got != typ {
		t.Fatalf("lookup of b: type %08x, want %08x", got, typ)
	}
	r.expectStatus(3, 0, ubus.StatusOK)
	// Removing a: the type is still used by b, so it is not reported.
	r.send(&ubus.Message{Type: ubus.MsgRemoveObject, Seq: 4, Attrs: []ubus.MsgAttr{ubus.U32Attr(ubus.AttrObjID, id1)}})
	if m := r.read(); len(m.Attrs) != 1 {
		t.Fatalf("remove a: %+v", m.Attrs)
	}
	r.expectStatus(4, 0, ubus.StatusOK)
	r.send(&ubus.Message{Type: ubus.MsgRemoveObject, Seq: 5, Attrs: []ubus.MsgAttr{ubus.U32Attr(ubus.AttrObjID, id2)}})
	if m := r.read(); !reflect.DeepEqual(m.Attrs, []ubus.MsgAttr{ubus.U32Attr(ubus.AttrObjID, id2), ubus.U32Attr(ubus.AttrObjType, typ)}) {
		t.Fatalf("remove b: %+v", m.Attrs)
	}
	r.expectStatus(5, 0, ubus.StatusOK)
	// A signature with an unnamed method is refused, as ubusd does.
	bad, _ := ubus.BlobmsgAttr(ubus.AttrSignature, []ubus.Attr{ubus.Table("")})
	r.send(&ubus.Message{Type: ubus.MsgAddObject, Seq: 9, Attrs: []ubus.MsgAttr{ubus.StringAttr(ubus.AttrObjPath, "bad"), bad}})
	r.expectStatus(9, 0, ubus.StatusInvalidArgument)
	// Someone else's object cannot be removed.
	d3 := r.addObject(6, ubus.StringAttr(ubus.AttrObjPath, "c"), sig(t))
	id3, _ := d3.U32(ubus.AttrObjID)
	other := rawDial(t, sock)
	other.send(&ubus.Message{Type: ubus.MsgRemoveObject, Seq: 1, Attrs: []ubus.MsgAttr{ubus.U32Attr(ubus.AttrObjID, id3)}})
	other.expectStatus(1, 0, ubus.StatusPermissionDenied)
}

func TestObjectEventsAndRegistrationRules(t *testing.T) {
	_, sock := Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	watcher, err := ubus.Dial(ctx, sock)
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close()
	events := make(chan string, 4)
	if _, err := watcher.Listen(ctx, "ubus.object.*", func(ev string, data []ubus.Attr) {
		p, _ := ubus.Find(data, "path")
		events <- ev + " " + p.Str
	}); err != nil {
		t.Fatal(err)
	}
	srv, err := ubus.Dial(ctx, sock)
	if err != nil {
		t.Fatal(err)
	}
	obj := &ubus.Object{Path: "announce.me"}
	if err := srv.AddObject(ctx, obj); err != nil {
		t.Fatal(err)
	}
	removedID := obj.ID()
	if err := srv.RemoveObject(ctx, obj); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ubus.object.add announce.me", "ubus.object.remove announce.me"} {
		select {
		case got := <-events:
			if got != want {
				t.Fatalf("event %q, want %q", got, want)
			}
		case <-ctx.Done():
			t.Fatalf("no %q", want)
		}
	}
	// Registering a pattern for an object of another client, a removed
	// object or a system object is refused.
	live := &ubus.Object{Path: "live"}
	if err := srv.AddObject(ctx, live); err != nil {
		t.Fatal(err)
	}
	r := rawDial(t, sock)
	tests := []struct {
		id   uint32
		want ubus.Status
	}{
		{live.ID(), ubus.StatusPermissionDenied},
		{removedID, ubus.StatusNotFound},
		{1, ubus.StatusPermissionDenied},
	}
	for i, tc := range tests {
		seq := uint16(1 + i)
		data, err := ubus.BlobmsgAttr(ubus.AttrData, []ubus.Attr{ubus.Int32("object", int32(tc.id)), ubus.String("pattern", "x")})
		if err != nil {
			t.Fatal(err)
		}
		r.send(&ubus.Message{Type: ubus.MsgInvoke, Seq: seq, Peer: 1, Attrs: []ubus.MsgAttr{
			ubus.U32Attr(ubus.AttrObjID, 1), ubus.StringAttr(ubus.AttrMethod, "register"), data}})
		r.expectStatus(seq, 1, tc.want)
	}
}

func TestSubscriptionLifecycle(t *testing.T) {
	_, sock := Start(t)
	srv, sub := rawDial(t, sock), rawDial(t, sock)
	target := srv.addObject(1, ubus.StringAttr(ubus.AttrObjPath, "t"), sig(t))
	tid, _ := target.U32(ubus.AttrObjID)
	s := sub.addObject(1)
	sid, _ := s.U32(ubus.AttrObjID)
	sub.send(&ubus.Message{Type: ubus.MsgSubscribe, Seq: 2, Attrs: []ubus.MsgAttr{
		ubus.U32Attr(ubus.AttrObjID, sid), ubus.U32Attr(ubus.AttrTarget, tid)}})
	sub.expectStatus(2, 0, ubus.StatusOK)
	// The target's owner learns it has a subscriber.
	want := &ubus.Message{Type: ubus.MsgNotify, Seq: 1, Attrs: []ubus.MsgAttr{
		ubus.U32Attr(ubus.AttrObjID, tid), ubus.U8Attr(ubus.AttrActive, 1)}}
	if m := srv.read(); !reflect.DeepEqual(m, want) {
		t.Fatalf("got %s %+v", m.String(), m.Attrs)
	}
	// A notification that wants replies: the notifier gets the subscriber
	// list first, the subscriber's answer is forwarded with peer = its id.
	data, _ := ubus.BlobmsgAttr(ubus.AttrData, []ubus.Attr{ubus.Int32("v", 1)})
	srv.send(&ubus.Message{Type: ubus.MsgNotify, Seq: 7, Peer: tid, Attrs: []ubus.MsgAttr{
		ubus.U32Attr(ubus.AttrObjID, tid), ubus.StringAttr(ubus.AttrMethod, "tick"), data}})
	st := srv.read()
	subs, _ := st.Get(ubus.AttrSubscribers)
	if st.Type != ubus.MsgStatus || st.Seq != 7 || !reflect.DeepEqual(subs.Data, ubus.MsgAttr{Data: append([]byte{0, 0, 0, 8}, ubus.U32Attr(0, sid).Data...)}.Data) {
		t.Fatalf("notify status %s %+v", st.Type, st.Attrs)
	}
	inv := sub.read()
	if _, noReply := inv.Get(ubus.AttrNoReply); inv.Type != ubus.MsgInvoke || inv.Seq != 7 || inv.Peer != srv.id || noReply {
		t.Fatalf("notification %s %+v", inv.String(), inv.Attrs)
	}
	sub.send(&ubus.Message{Type: ubus.MsgStatus, Seq: inv.Seq, Peer: inv.Peer, Attrs: []ubus.MsgAttr{
		ubus.U32Attr(ubus.AttrStatus, 0), ubus.U32Attr(ubus.AttrObjID, sid)}})
	if m := srv.read(); m.Type != ubus.MsgStatus || m.Peer != sid || m.Seq != 7 {
		t.Fatalf("forwarded reply %s", m.String())
	}
	// The target goes away: the subscriber is told.
	srv.send(&ubus.Message{Type: ubus.MsgRemoveObject, Seq: 8, Attrs: []ubus.MsgAttr{ubus.U32Attr(ubus.AttrObjID, tid)}})
	srv.read() // DATA
	srv.expectStatus(8, 0, ubus.StatusOK)
	want = &ubus.Message{Type: ubus.MsgUnsubscribe, Seq: 1, Attrs: []ubus.MsgAttr{
		ubus.U32Attr(ubus.AttrObjID, sid), ubus.U32Attr(ubus.AttrTarget, tid)}}
	if m := sub.read(); !reflect.DeepEqual(m, want) {
		t.Fatalf("got %s %+v", m.String(), m.Attrs)
	}
}

func TestListenReplacesStaleSocket(t *testing.T) {
	dir, err := os.MkdirTemp("", "ubustest")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "ubus.sock")
	// A stale socket file, as a crashed broker leaves behind.
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	b, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := net.Dial("unix", path); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket left after Close: %v", err)
	}
	// A regular file is never replaced.
	if err := os.WriteFile(path, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(path); err == nil {
		t.Fatal("Listen replaced a regular file")
	}
}

// TestSlowClientIsDropped: a client that stops reading is disconnected once
// its queue is full (or, with DropWhenFull, keeps its connection and loses
// what does not fit, as with the stock ubusd); the broker keeps serving
// everyone else.
func TestSlowClientIsDropped(t *testing.T) {
	for _, keep := range []bool{false, true} {
		t.Run(fmt.Sprintf("DropWhenFull=%v", keep), func(t *testing.T) { testSlowClient(t, keep) })
	}
}

func testSlowClient(t *testing.T, dropWhenFull bool) {
	b, sock := Start(t)
	if dropWhenFull {
		b.DropWhenFull()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	slow := rawDial(t, sock)
	s := slow.addObject(1)
	sid, _ := s.U32(ubus.AttrObjID)
	data, _ := ubus.BlobmsgAttr(ubus.AttrData, []ubus.Attr{ubus.Int32("object", int32(sid)), ubus.String("pattern", "flood")})
	slow.send(&ubus.Message{Type: ubus.MsgInvoke, Seq: 2, Peer: 1, Attrs: []ubus.MsgAttr{
		ubus.U32Attr(ubus.AttrObjID, 1), ubus.StringAttr(ubus.AttrMethod, "register"), data}})
	slow.expectStatus(2, 1, ubus.StatusOK)
	sender, err := ubus.Dial(ctx, sock)
	if err != nil {
		t.Fatal(err)
	}
	defer sender.Close()
	payload := []ubus.Attr{ubus.String("pad", string(make([]byte, 200)))}
	dropped := false
	n := 100000
	if dropWhenFull {
		n = 3 * txQueueLen
	}
	for i := 0; i < n && !dropped; i++ {
		if err := sender.Send(ctx, "flood", payload); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		if i%500 == 0 {
			dropped = b.Clients() == 1
		}
	}
	if dropped == dropWhenFull {
		t.Fatalf("slow client disconnected: %v, want %v", dropped, !dropWhenFull)
	}
	if _, err := sender.Lookup(ctx, ""); err != nil {
		t.Fatalf("broker stopped serving: %v", err)
	}
}
