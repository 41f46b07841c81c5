package ubus

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/packet-steering/packet-steering/internal/outline"
)

// Request is one method call received by a registered object.
type Request struct {
	Object *Object
	Method string
	Args   []Attr
	// Peer is the caller's client id.
	Peer uint32
	// User and Group are the caller's credentials as the broker reports
	// them (empty when it does not).
	User, Group string
	// NoReply is set for notifications, whose reply is never sent.
	NoReply bool
	// AfterReply, when the handler sets it, runs once the reply has been
	// written to the broker (or has failed, or was not to be sent), so a
	// server that drains its calls before closing the connection does not
	// close it between the handler's return and the reply's write.
	AfterReply func()
}

// Handler serves one method. It returns the reply's data (nil: no DATA
// message, only the status) or an error: a Status (also wrapped) is replied
// as that code, any other error as StatusUnknownError. Data returned with an
// error is sent before the failing status (as libubus lets a method send a
// reply and then return an error code): the stock CLI prints it, so it can
// say what went wrong. The context is cancelled when the connection closes.
type Handler func(ctx context.Context, req *Request) ([]Attr, error)

// Method is one method of an object: its name, the argument signature that
// `ubus -v list` shows, and its handler.
type Method struct {
	Name    string
	Args    []ArgSig
	Handler Handler
}

// Object is an object served on a connection. Set Path and Methods before
// registering it with Conn.AddObject or Client.Register; the broker's ids
// are available through ID and TypeID afterwards. An object is registered on
// at most one connection at a time.
type Object struct {
	Path    string
	Methods []Method
	// OnSubscribe, if set, is called when the object gains its first
	// subscriber (true) or loses its last one (false).
	OnSubscribe func(active bool)

	mu         outline.Mutex
	conn       *Conn
	id, typeID uint32
	subscribed bool
}

// ID returns the object id the broker assigned, 0 when not registered.
func (o *Object) ID() uint32 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.id
}

// TypeID returns the object type id the broker assigned.
func (o *Object) TypeID() uint32 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.typeID
}

// HasSubscribers reports whether the broker said the object has subscribers.
func (o *Object) HasSubscribers() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.subscribed
}

func (o *Object) signature() []Attr {
	sig := make([]Attr, 0, len(o.Methods))
	for _, m := range o.Methods {
		args := make([]Attr, 0, len(m.Args))
		for _, a := range m.Args {
			args = append(args, Int32(a.Name, int32(a.Type)))
		}
		sig = append(sig, Table(m.Name, args...))
	}
	return sig
}

func (o *Object) method(name string) *Method {
	for i := range o.Methods {
		if o.Methods[i].Name == name {
			return &o.Methods[i]
		}
	}
	return nil
}

func (c *Conn) handleInvoke(m *Message) {
	id, _ := m.U32(AttrObjID)
	noReply := false
	if a, ok := m.Get(AttrNoReply); ok {
		v, _ := a.U8()
		noReply = v != 0
	}
	method, hasMethod := m.Str(AttrMethod)
	var args []Attr
	var argErr error
	if a, ok := m.Get(AttrData); ok {
		args, argErr = a.Blobmsg()
	}
	c.mu.Lock()
	o := c.objects[id]
	s := c.sinks[id]
	c.mu.Unlock()
	switch {
	case s != nil:
		if argErr == nil && hasMethod {
			s.push(sinkItem{method: method, data: args})
		}
		if !noReply {
			c.reply(m, id, nil, StatusOf(argErr))
		}
		return
	case o == nil:
		if !noReply {
			c.reply(m, id, nil, StatusNotFound)
		}
		return
	case !hasMethod:
		if !noReply {
			c.reply(m, id, nil, StatusInvalidArgument)
		}
		return
	}
	meth := o.method(method)
	if meth == nil || argErr != nil {
		if !noReply {
			st := StatusMethodNotFound
			if meth != nil {
				st = StatusInvalidArgument
			}
			c.reply(m, id, nil, st)
		}
		return
	}
	req := &Request{Object: o, Method: method, Args: args, Peer: m.Peer, NoReply: noReply}
	req.User, _ = m.Str(AttrUser)
	req.Group, _ = m.Str(AttrGroup)
	if !c.calls.admit(c, call{m: m, id: id, meth: meth, req: req}) && !noReply {
		c.refuse(m, id)
	}
}

// Limits on the calls one connection serves at once. The reader never
// waits for a handler: a call beyond a limit is answered UNKNOWN_ERROR at
// once (and logged), so a client that floods the object costs a small,
// fixed amount of memory and cannot delay other callers by more than the
// calls already admitted.
const (
	// MaxCallWorkers is how many handlers run at once; further admitted
	// calls wait in arrival order.
	MaxCallWorkers = 4
	// MaxCallsInFlight bounds the calls admitted (running or waiting).
	MaxCallsInFlight = 32
	// MaxCallsPerPeer bounds the calls admitted for one caller (one client
	// of the broker), so one flooding client leaves room for the others.
	MaxCallsPerPeer = 8
)

// call is one admitted invoke.
type call struct {
	m    *Message
	id   uint32
	meth *Method
	req  *Request
}

// callQueue admits invokes within the limits and runs them on at most
// MaxCallWorkers goroutines, started on demand and ended when the queue is
// empty (an idle connection has none).
type callQueue struct {
	mu       outline.Mutex
	waiting  []call
	workers  int
	inFlight int
	perPeer  map[uint32]int
	// refused counts the calls refused since the last time nothing was in
	// flight; the first refusal and the total are logged.
	refused int
}

// admit queues cl; false when a limit refuses it.
func (q *callQueue) admit(c *Conn, cl call) bool {
	peer := cl.req.Peer
	q.mu.Lock()
	if q.inFlight >= MaxCallsInFlight || q.perPeer[peer] >= MaxCallsPerPeer {
		q.refused++
		first := q.refused == 1
		inFlight, forPeer := q.inFlight, q.perPeer[peer]
		q.mu.Unlock()
		if first {
			c.logger().Warn("ubus: refusing calls: too many in flight", "object", cl.req.Object.Path,
				"method", cl.req.Method, "peer", fmt.Sprintf("%08x", peer), "in_flight", inFlight,
				"peer_in_flight", forPeer, "limit", MaxCallsInFlight, "peer_limit", MaxCallsPerPeer)
		}
		return false
	}
	if q.perPeer == nil {
		q.perPeer = make(map[uint32]int)
	}
	q.inFlight++
	q.perPeer[peer]++
	q.waiting = append(q.waiting, cl)
	start := q.workers < MaxCallWorkers
	if start {
		q.workers++
	}
	q.mu.Unlock()
	if start {
		go q.work(c)
	}
	return true
}

// work serves waiting calls until there are none.
func (q *callQueue) work(c *Conn) {
	for {
		q.mu.Lock()
		if len(q.waiting) == 0 {
			q.workers--
			q.mu.Unlock()
			return
		}
		cl := q.waiting[0]
		q.waiting[0] = call{}
		q.waiting = q.waiting[1:]
		if len(q.waiting) == 0 {
			q.waiting = nil // let the backing array go
		}
		q.mu.Unlock()

		c.serve(cl.m, cl.id, cl.meth, cl.req)

		q.mu.Lock()
		q.inFlight--
		peer := cl.req.Peer
		if q.perPeer[peer]--; q.perPeer[peer] <= 0 {
			delete(q.perPeer, peer)
		}
		refused := 0
		if q.inFlight == 0 {
			refused, q.refused = q.refused, 0
		}
		q.mu.Unlock()
		if refused > 0 {
			c.logger().Warn("ubus: refused calls: too many in flight", "object", cl.req.Object.Path,
				"refused", refused, "limit", MaxCallsInFlight, "peer_limit", MaxCallsPerPeer)
		}
	}
}

func (c *Conn) serve(m *Message, id uint32, meth *Method, req *Request) {
	var data []Attr
	var err error
	if meth.Handler == nil {
		err = StatusNotSupported
	} else {
		data, err = callHandler(c.ctx, meth.Handler, req)
	}
	if req.AfterReply != nil {
		defer req.AfterReply()
	}
	if req.NoReply {
		return
	}
	c.reply(m, id, data, StatusOf(err))
}

// callHandler runs h, turning a panic into StatusUnknownError.
func callHandler(ctx context.Context, h Handler, req *Request) (data []Attr, err error) {
	defer func() {
		if r := recover(); r != nil {
			data, err = nil, outline.Errorf("%w: handler panic: %v", StatusUnknownError, r)
		}
	}()
	return h(ctx, req)
}

// reply answers an INVOKE: DATA (when data is not nil) then STATUS, both
// with the invoke's seq and peer and carrying OBJID, as libubus does.
func (c *Conn) reply(inv *Message, id uint32, data []Attr, st Status) {
	msgs := make([]*Message, 0, 2)
	if data != nil {
		da, err := BlobmsgAttr(AttrData, data)
		if err != nil {
			st = StatusUnknownError
		} else {
			msgs = append(msgs, &Message{Type: MsgData, Seq: inv.Seq, Peer: inv.Peer,
				Attrs: []MsgAttr{U32Attr(AttrObjID, id), da}})
		}
	}
	status := func(st Status) *Message {
		return &Message{Type: MsgStatus, Seq: inv.Seq, Peer: inv.Peer,
			Attrs: []MsgAttr{U32Attr(AttrStatus, uint32(st)), U32Attr(AttrObjID, id)}}
	}
	msgs = append(msgs, status(st))
	if err := c.write(msgs...); err != nil && !errors.Is(err, ErrClosed) {
		// The reply could not be encoded (too large): the caller still
		// gets an answer.
		_ = c.write(status(StatusUnknownError))
	}
}

// refuse answers an invoke refused by a limit with StatusUnknownError. The
// answer is only queued: the reader sends the queued answers in one write
// once it has no more input buffered (flushRefused), so refusing a flood
// costs one write per batch instead of one per call and the reader keeps up
// with the broker.
func (c *Conn) refuse(inv *Message, id uint32) {
	m := &Message{Type: MsgStatus, Seq: inv.Seq, Peer: inv.Peer,
		Attrs: []MsgAttr{U32Attr(AttrStatus, uint32(StatusUnknownError)), U32Attr(AttrObjID, id)}}
	c.wmu.Lock()
	c.refused, _ = m.AppendBinary(c.refused)
	c.wmu.Unlock()
}

// refusedLen is the size of the queued refusals.
func (c *Conn) refusedLen() int {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return len(c.refused)
}

// flushRefused sends the queued refusals.
func (c *Conn) flushRefused() {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if len(c.refused) == 0 {
		return
	}
	b := c.refused
	c.refused = c.refused[:0]
	if cap(c.refused) > 64<<10 {
		c.refused = nil
	}
	_ = c.nc.SetWriteDeadline(time.Now().Add(writeTimeout))
	if _, err := c.nc.Write(b); err != nil {
		c.fail(outline.Errorf("%w: write: %w", ErrClosed, err))
	}
}

// AddObject registers obj on this connection with a signature built from
// its Methods, so `ubus -v list` shows each argument's type. Invokes are
// served from then on, within the limits MaxCallWorkers, MaxCallsInFlight
// and MaxCallsPerPeer (shared by all objects of the connection).
func (c *Conn) AddObject(ctx context.Context, obj *Object) error {
	if obj.Path == "" {
		return outline.Errorf("ubus: add object: %w: empty path", StatusInvalidArgument)
	}
	obj.mu.Lock()
	if obj.conn != nil {
		obj.mu.Unlock()
		return outline.Errorf("ubus: add object %s: already registered", obj.Path)
	}
	obj.conn = c
	obj.mu.Unlock()
	sig, err := BlobmsgAttr(AttrSignature, obj.signature())
	if err != nil {
		obj.mu.Lock()
		obj.conn = nil
		obj.mu.Unlock()
		return outline.Errorf("ubus: add object %s: %w", obj.Path, err)
	}
	m := &Message{Type: MsgAddObject, Attrs: []MsgAttr{StringAttr(AttrObjPath, obj.Path), sig}}
	_, err = c.roundTrip(ctx, m, func(d *Message) {
		id, ok := d.U32(AttrObjID)
		if !ok {
			return
		}
		typ, _ := d.U32(AttrObjType)
		obj.mu.Lock()
		obj.id, obj.typeID = id, typ
		obj.mu.Unlock()
		c.mu.Lock()
		if c.err == nil {
			c.objects[id] = obj
		}
		c.mu.Unlock()
	})
	obj.mu.Lock()
	id := obj.id
	if err == nil && id == 0 {
		err = StatusNoData
	}
	if err != nil {
		obj.conn, obj.id, obj.typeID = nil, 0, 0
	}
	obj.mu.Unlock()
	if err != nil {
		if id != 0 {
			c.mu.Lock()
			delete(c.objects, id)
			c.mu.Unlock()
		}
		return outline.Errorf("ubus: add object %s: %w", obj.Path, err)
	}
	return nil
}

// RemoveObject unregisters obj from this connection.
func (c *Conn) RemoveObject(ctx context.Context, obj *Object) error {
	obj.mu.Lock()
	id, owner := obj.id, obj.conn
	obj.mu.Unlock()
	if owner != c || id == 0 {
		return outline.Errorf("ubus: remove object %s: not registered on this connection", obj.Path)
	}
	if err := c.removeRemote(ctx, id); err != nil {
		return outline.Errorf("ubus: remove object %s: %w", obj.Path, err)
	}
	c.mu.Lock()
	delete(c.objects, id)
	c.mu.Unlock()
	obj.mu.Lock()
	if obj.conn == c {
		obj.conn, obj.id, obj.typeID, obj.subscribed = nil, 0, 0, false
	}
	obj.mu.Unlock()
	return nil
}

// Notify sends a notification of type typ with data to the subscribers of
// obj, without waiting for their replies (NO_REPLY).
func (c *Conn) Notify(ctx context.Context, obj *Object, typ string, data []Attr) error {
	obj.mu.Lock()
	id, owner := obj.id, obj.conn
	obj.mu.Unlock()
	if owner != c || id == 0 {
		return outline.Errorf("ubus: notify %s: not registered on this connection", obj.Path)
	}
	da, err := BlobmsgAttr(AttrData, data)
	if err != nil {
		return outline.Errorf("ubus: notify %s: %w", obj.Path, err)
	}
	if err := ctx.Err(); err != nil {
		return outline.Errorf("ubus: notify %s: %w", obj.Path, err)
	}
	c.mu.Lock()
	seq, err := c.newRequestLocked(nil)
	c.mu.Unlock()
	if err != nil {
		return outline.Errorf("ubus: notify %s: %w", obj.Path, err)
	}
	m := &Message{Type: MsgNotify, Seq: seq, Peer: id, Attrs: []MsgAttr{
		U32Attr(AttrObjID, id), StringAttr(AttrMethod, typ), U8Attr(AttrNoReply, 1), da}}
	if err := c.write(m); err != nil {
		return outline.Errorf("ubus: notify %s: %w", obj.Path, err)
	}
	return nil
}
