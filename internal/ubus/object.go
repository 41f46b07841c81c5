package ubus

import (
	"context"
	"errors"
	"fmt"
	"sync"
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
// as that code, any other error as StatusUnknownError. The context is
// cancelled when the connection closes.
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

	mu         sync.Mutex
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
	go c.serve(m, id, meth, req)
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
	if err != nil {
		data = nil
	}
	c.reply(m, id, data, StatusOf(err))
}

// callHandler runs h, turning a panic into StatusUnknownError.
func callHandler(ctx context.Context, h Handler, req *Request) (data []Attr, err error) {
	defer func() {
		if r := recover(); r != nil {
			data, err = nil, fmt.Errorf("%w: handler panic: %v", StatusUnknownError, r)
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

// AddObject registers obj on this connection with a signature built from
// its Methods, so `ubus -v list` shows each argument's type. Invokes are
// served from then on, each on its own goroutine.
func (c *Conn) AddObject(ctx context.Context, obj *Object) error {
	if obj.Path == "" {
		return fmt.Errorf("ubus: add object: %w: empty path", StatusInvalidArgument)
	}
	obj.mu.Lock()
	if obj.conn != nil {
		obj.mu.Unlock()
		return fmt.Errorf("ubus: add object %s: already registered", obj.Path)
	}
	obj.conn = c
	obj.mu.Unlock()
	sig, err := BlobmsgAttr(AttrSignature, obj.signature())
	if err != nil {
		obj.mu.Lock()
		obj.conn = nil
		obj.mu.Unlock()
		return fmt.Errorf("ubus: add object %s: %w", obj.Path, err)
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
		return fmt.Errorf("ubus: add object %s: %w", obj.Path, err)
	}
	return nil
}

// RemoveObject unregisters obj from this connection.
func (c *Conn) RemoveObject(ctx context.Context, obj *Object) error {
	obj.mu.Lock()
	id, owner := obj.id, obj.conn
	obj.mu.Unlock()
	if owner != c || id == 0 {
		return fmt.Errorf("ubus: remove object %s: not registered on this connection", obj.Path)
	}
	if err := c.removeRemote(ctx, id); err != nil {
		return fmt.Errorf("ubus: remove object %s: %w", obj.Path, err)
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
		return fmt.Errorf("ubus: notify %s: not registered on this connection", obj.Path)
	}
	da, err := BlobmsgAttr(AttrData, data)
	if err != nil {
		return fmt.Errorf("ubus: notify %s: %w", obj.Path, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("ubus: notify %s: %w", obj.Path, err)
	}
	c.mu.Lock()
	seq, err := c.newRequestLocked(nil)
	c.mu.Unlock()
	if err != nil {
		return fmt.Errorf("ubus: notify %s: %w", obj.Path, err)
	}
	m := &Message{Type: MsgNotify, Seq: seq, Peer: id, Attrs: []MsgAttr{
		U32Attr(AttrObjID, id), StringAttr(AttrMethod, typ), U8Attr(AttrNoReply, 1), da}}
	if err := c.write(m); err != nil {
		return fmt.Errorf("ubus: notify %s: %w", obj.Path, err)
	}
	return nil
}
