package ubus

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"
)

// Default socket paths, tried in this order when Dial is given "".
const (
	DefaultSocket = "/var/run/ubus/ubus.sock"
	LegacySocket  = "/var/run/ubus.sock"
)

// EventObjectID is the broker's built-in object that registers event
// listeners and forwards sent events (UBUS_SYSTEM_OBJECT_EVENT, ubusmsg.h).
const EventObjectID = 1

// writeTimeout bounds one write to the broker: a broker that stops reading
// breaks the connection instead of blocking every caller.
const writeTimeout = 5 * time.Second

// ErrClosed is returned (wrapped) by requests on a connection that is closed
// or was lost.
var ErrClosed = errors.New("ubus: connection closed")

// ArgSig is one argument of a method signature: its name and blobmsg type.
type ArgSig struct {
	Name string
	Type Type
}

// MethodSig is a method of an object as `ubus -v list` shows it.
type MethodSig struct {
	Name string
	Args []ArgSig
}

// ObjectInfo is one object found by Lookup.
type ObjectInfo struct {
	Path      string
	ID        uint32
	TypeID    uint32
	Signature []MethodSig
}

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

// request is one outstanding request awaiting its STATUS.
type request struct {
	// onData, if set, runs in the reader for each DATA message, before any
	// later message is handled.
	onData    func(*Message)
	data      []*Message
	status    Status
	completed bool // a STATUS arrived (else the connection ended)
	done      chan struct{}
}

// notifyFunc receives events and notifications for a client-side object.
type notifyFunc func(method string, data []Attr)

// sinkMax bounds the events or notifications queued for one slow callback;
// beyond it the oldest are dropped.
const sinkMax = 4096

// sink is a client-side object that receives events or notifications; its
// callback runs on its own goroutine, one item after another, in order.
type sink struct {
	mu      sync.Mutex
	items   []sinkItem
	closed  bool
	wake    chan struct{}
	dropped int
}

type sinkItem struct {
	method string
	data   []Attr
}

func newSink() *sink { return &sink{wake: make(chan struct{}, 1)} }

func (s *sink) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// push queues an item; it never blocks the connection's reader.
func (s *sink) push(it sinkItem) {
	s.mu.Lock()
	if !s.closed {
		if len(s.items) >= sinkMax {
			s.items = s.items[1:]
			s.dropped++
		}
		s.items = append(s.items, it)
	}
	s.mu.Unlock()
	s.signal()
}

func (s *sink) close() {
	s.mu.Lock()
	s.closed, s.items = true, nil
	s.mu.Unlock()
	s.signal()
}

func (s *sink) run(fn notifyFunc) {
	for range s.wake {
		for {
			s.mu.Lock()
			if s.closed {
				s.mu.Unlock()
				return
			}
			if len(s.items) == 0 {
				s.mu.Unlock()
				break
			}
			it := s.items[0]
			s.items = s.items[1:]
			s.mu.Unlock()
			fn(it.method, it.data)
		}
	}
}

// Conn is a connection to a ubus broker. All methods are safe for
// concurrent use. Requests are correlated with replies by sequence number;
// invokes on registered objects are served concurrently.
type Conn struct {
	nc  net.Conn
	id  uint32
	ctx context.Context // cancelled when the connection ends

	cancel context.CancelFunc
	done   chan struct{}

	wmu  sync.Mutex
	wbuf []byte

	mu      sync.Mutex
	seq     uint16
	pending map[uint16]*request
	objects map[uint32]*Object
	sinks   map[uint32]*sink
	err     error
}

// Dial connects to the broker's unix socket at path ("" tries DefaultSocket,
// then LegacySocket) and reads its HELLO. The context bounds the dial and
// the greeting only.
func Dial(ctx context.Context, path string) (*Conn, error) {
	paths := []string{path}
	if path == "" {
		paths = []string{DefaultSocket, LegacySocket}
	}
	var d net.Dialer
	var err error
	for _, p := range paths {
		var nc net.Conn
		nc, err = d.DialContext(ctx, "unix", p)
		if err != nil {
			err = fmt.Errorf("ubus: dial: %w", err)
			continue
		}
		return NewConn(ctx, nc)
	}
	return nil, err
}

// NewConn starts the protocol on an established connection to a broker: it
// reads the broker's HELLO (bounded by ctx) and starts serving. The Conn
// owns nc from then on, also when NewConn fails.
func NewConn(ctx context.Context, nc net.Conn) (*Conn, error) {
	stop := context.AfterFunc(ctx, func() { _ = nc.SetReadDeadline(time.Unix(1, 0)) })
	br := bufio.NewReaderSize(nc, 64<<10)
	hello, err := ReadMessage(br, 0)
	if !stop() || err != nil {
		nc.Close()
		if err == nil || ctx.Err() != nil {
			err = errors.Join(ctx.Err(), err)
		}
		return nil, fmt.Errorf("ubus: read HELLO: %w", err)
	}
	_ = nc.SetReadDeadline(time.Time{})
	if hello.Type != MsgHello {
		nc.Close()
		return nil, fmt.Errorf("%w: first message is %s, not HELLO", ErrMalformed, hello.Type)
	}
	cctx, cancel := context.WithCancel(context.Background())
	c := &Conn{
		nc: nc, id: hello.Peer, ctx: cctx, cancel: cancel,
		done:    make(chan struct{}),
		pending: make(map[uint16]*request),
		objects: make(map[uint32]*Object),
		sinks:   make(map[uint32]*sink),
	}
	go c.readLoop(br)
	return c, nil
}

// ID returns the client id the broker assigned in its HELLO.
func (c *Conn) ID() uint32 { return c.id }

// Done is closed when the connection has ended (Close or loss).
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err returns why the connection ended, nil while it is up.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close closes the connection; pending requests fail with ErrClosed.
func (c *Conn) Close() error {
	c.fail(ErrClosed)
	<-c.done
	return nil
}

// fail records the first reason for ending and closes the socket.
func (c *Conn) fail(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	c.mu.Unlock()
	c.nc.Close()
}

func (c *Conn) readLoop(br *bufio.Reader) {
	var err error
	for {
		var m *Message
		m, err = ReadMessage(br, 0)
		if err != nil {
			break
		}
		c.dispatch(m)
	}
	c.fail(fmt.Errorf("%w: %w", ErrClosed, err))
	c.cancel()
	c.mu.Lock()
	pending := c.pending
	c.pending = map[uint16]*request{}
	sinks := c.sinks
	c.sinks = map[uint32]*sink{}
	objects := c.objects
	c.objects = map[uint32]*Object{}
	c.mu.Unlock()
	for _, r := range pending {
		close(r.done)
	}
	for _, s := range sinks {
		s.close()
	}
	for _, o := range objects {
		o.mu.Lock()
		if o.conn == c {
			o.conn, o.id, o.typeID, o.subscribed = nil, 0, 0, false
		}
		o.mu.Unlock()
	}
	close(c.done)
}

func (c *Conn) dispatch(m *Message) {
	switch m.Type {
	case MsgData, MsgStatus:
		c.mu.Lock()
		r := c.pending[m.Seq]
		if r == nil {
			c.mu.Unlock()
			return
		}
		if m.Type == MsgData {
			r.data = append(r.data, m)
			c.mu.Unlock()
			if r.onData != nil {
				r.onData(m)
			}
			return
		}
		delete(c.pending, m.Seq)
		c.mu.Unlock()
		st, ok := m.U32(AttrStatus)
		if !ok {
			st = uint32(StatusInvalidCommand)
		}
		r.status = Status(st)
		r.completed = true
		close(r.done)
	case MsgInvoke:
		c.handleInvoke(m)
	case MsgNotify:
		id, _ := m.U32(AttrObjID)
		c.mu.Lock()
		o := c.objects[id]
		c.mu.Unlock()
		a, ok := m.Get(AttrActive)
		if o == nil || !ok {
			return
		}
		v, _ := a.U8()
		o.mu.Lock()
		o.subscribed = v != 0
		cb := o.OnSubscribe
		o.mu.Unlock()
		if cb != nil {
			go cb(v != 0)
		}
	}
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

// write sends msgs in one write.
func (c *Conn) write(msgs ...*Message) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	b := c.wbuf[:0]
	for _, m := range msgs {
		var err error
		if b, err = m.AppendBinary(b); err != nil {
			return err
		}
	}
	c.wbuf = b
	if cap(c.wbuf) > 256<<10 {
		c.wbuf = nil // do not keep a huge buffer around
	}
	_ = c.nc.SetWriteDeadline(time.Now().Add(writeTimeout))
	if _, err := c.nc.Write(b); err != nil {
		c.fail(fmt.Errorf("%w: write: %w", ErrClosed, err))
		return fmt.Errorf("%w: write: %w", ErrClosed, err)
	}
	return nil
}

// newRequest allocates a sequence number; the caller must hold c.mu.
func (c *Conn) newRequestLocked(r *request) (uint16, error) {
	if c.err != nil {
		return 0, c.err
	}
	if len(c.pending) >= 1<<16-1 {
		return 0, fmt.Errorf("ubus: %d requests in flight: %w", len(c.pending), StatusNoMemory)
	}
	for {
		c.seq++
		if c.seq == 0 {
			continue
		}
		if _, busy := c.pending[c.seq]; !busy {
			break
		}
	}
	if r != nil {
		c.pending[c.seq] = r
	}
	return c.seq, nil
}

// roundTrip sends m with a fresh sequence number and waits for its STATUS.
// It returns the DATA messages received and the status.
func (c *Conn) roundTrip(ctx context.Context, m *Message, onData func(*Message)) ([]*Message, error) {
	r := &request{onData: onData, done: make(chan struct{})}
	c.mu.Lock()
	seq, err := c.newRequestLocked(r)
	c.mu.Unlock()
	if err != nil {
		return nil, err
	}
	m.Seq = seq
	if err := c.write(m); err != nil {
		c.forget(seq, r)
		return nil, err
	}
	select {
	case <-r.done:
	case <-ctx.Done():
		c.forget(seq, r)
		return nil, fmt.Errorf("ubus: %s: %w", m.Type, ctx.Err())
	}
	// r.done was closed by the reader after its last write to r.
	if !r.completed {
		if err := c.Err(); err != nil {
			return nil, err
		}
		return nil, ErrClosed
	}
	if r.status != StatusOK {
		return r.data, r.status
	}
	return r.data, nil
}

func (c *Conn) forget(seq uint16, r *request) {
	c.mu.Lock()
	if c.pending[seq] == r {
		delete(c.pending, seq)
	}
	c.mu.Unlock()
}

// Lookup returns the objects whose path matches pattern: an exact path, a
// prefix ending in "*", or "" for all objects. No match is StatusNotFound.
func (c *Conn) Lookup(ctx context.Context, pattern string) ([]ObjectInfo, error) {
	m := &Message{Type: MsgLookup}
	if pattern != "" {
		m.Attrs = []MsgAttr{StringAttr(AttrObjPath, pattern)}
	}
	data, err := c.roundTrip(ctx, m, nil)
	if err != nil {
		return nil, fmt.Errorf("ubus: lookup %q: %w", pattern, err)
	}
	infos := make([]ObjectInfo, 0, len(data))
	for _, d := range data {
		info, err := parseObjectInfo(d)
		if err != nil {
			return nil, fmt.Errorf("ubus: lookup %q: %w", pattern, err)
		}
		infos = append(infos, info)
	}
	return infos, nil
}

func parseObjectInfo(d *Message) (ObjectInfo, error) {
	var info ObjectInfo
	var ok bool
	if info.Path, ok = d.Str(AttrObjPath); !ok {
		return info, fmt.Errorf("%w: lookup reply without path", ErrMalformed)
	}
	if info.ID, ok = d.U32(AttrObjID); !ok {
		return info, fmt.Errorf("%w: lookup reply without object id", ErrMalformed)
	}
	info.TypeID, _ = d.U32(AttrObjType)
	if a, ok := d.Get(AttrSignature); ok {
		methods, err := a.Blobmsg()
		if err != nil {
			return info, fmt.Errorf("signature of %s: %w", info.Path, err)
		}
		for _, m := range methods {
			ms := MethodSig{Name: m.Name, Args: make([]ArgSig, 0, len(m.Children))}
			for _, a := range m.Children {
				ms.Args = append(ms.Args, ArgSig{Name: a.Name, Type: Type(a.Int)})
			}
			info.Signature = append(info.Signature, ms)
		}
	}
	return info, nil
}

// LookupID returns the id of the object at exactly path.
func (c *Conn) LookupID(ctx context.Context, path string) (uint32, error) {
	if path == "" || strings.HasSuffix(path, "*") {
		return 0, fmt.Errorf("ubus: lookup %q: %w", path, StatusInvalidArgument)
	}
	infos, err := c.Lookup(ctx, path)
	if err != nil {
		return 0, err
	}
	if len(infos) == 0 {
		return 0, fmt.Errorf("ubus: lookup %q: %w", path, StatusNotFound)
	}
	return infos[0].ID, nil
}

// Call looks up the object at path and invokes method on it with args. A
// non-OK reply is returned as a Status error (errors.Is(err, StatusNotFound)).
func (c *Conn) Call(ctx context.Context, path, method string, args []Attr) ([]Attr, error) {
	id, err := c.LookupID(ctx, path)
	if err != nil {
		return nil, err
	}
	return c.Invoke(ctx, id, method, args)
}

// Invoke calls method on the object with id objID. The reply's DATA
// messages are concatenated. A non-OK status is returned as a Status error
// together with any data received.
func (c *Conn) Invoke(ctx context.Context, objID uint32, method string, args []Attr) ([]Attr, error) {
	da, err := BlobmsgAttr(AttrData, args)
	if err != nil {
		return nil, fmt.Errorf("ubus: invoke %s: %w", method, err)
	}
	m := &Message{Type: MsgInvoke, Peer: objID, Attrs: []MsgAttr{
		U32Attr(AttrObjID, objID), StringAttr(AttrMethod, method), da}}
	data, err := c.roundTrip(ctx, m, nil)
	var out []Attr
	for _, d := range data {
		a, ok := d.Get(AttrData)
		if !ok {
			continue
		}
		attrs, derr := a.Blobmsg()
		if derr != nil {
			return nil, fmt.Errorf("ubus: invoke %s: reply: %w", method, derr)
		}
		out = append(out, attrs...)
	}
	if err != nil {
		return out, fmt.Errorf("ubus: invoke %s: %w", method, err)
	}
	return out, nil
}

// Send sends the event with name event and data (a table) to every
// listener whose pattern matches, through the broker's event object.
func (c *Conn) Send(ctx context.Context, event string, data []Attr) error {
	_, err := c.Invoke(ctx, EventObjectID, "send", []Attr{String("id", event), Table("data", data...)})
	if err != nil {
		return fmt.Errorf("ubus: send %s: %w", event, err)
	}
	return nil
}

// addSink registers an anonymous object that receives invokes as events or
// notifications, and returns its id.
func (c *Conn) addSink(ctx context.Context, fn notifyFunc) (uint32, *sink, error) {
	s := newSink()
	var id uint32
	_, err := c.roundTrip(ctx, &Message{Type: MsgAddObject}, func(d *Message) {
		if v, ok := d.U32(AttrObjID); ok {
			id = v
			c.mu.Lock()
			if c.err == nil {
				c.sinks[v] = s
			}
			c.mu.Unlock()
		}
	})
	if err == nil && id == 0 {
		err = StatusNoData
	}
	if err != nil {
		if id != 0 {
			c.dropSink(id)
		}
		return 0, nil, err
	}
	go s.run(fn)
	return id, s, nil
}

func (c *Conn) dropSink(id uint32) {
	c.mu.Lock()
	s := c.sinks[id]
	delete(c.sinks, id)
	c.mu.Unlock()
	if s != nil {
		s.close()
	}
}

// removeRemote sends REMOVE_OBJECT for id.
func (c *Conn) removeRemote(ctx context.Context, id uint32) error {
	_, err := c.roundTrip(ctx, &Message{Type: MsgRemoveObject, Attrs: []MsgAttr{U32Attr(AttrObjID, id)}}, nil)
	return err
}

// Listen registers fn for events whose name matches pattern (exact, or a
// prefix ending in "*"; "*" is every event). fn runs on its own goroutine,
// one event after another, in the order received; events from this
// connection itself are not delivered (the broker does not loop them back).
// stop unregisters the listener; events still in flight are dropped, and
// fn is not called for events queued after stop (one already being
// delivered may complete). ctx bounds the registration only.
func (c *Conn) Listen(ctx context.Context, pattern string, fn func(event string, data []Attr)) (stop func() error, err error) {
	id, _, err := c.addSink(ctx, fn)
	if err != nil {
		return nil, fmt.Errorf("ubus: listen %q: %w", pattern, err)
	}
	if _, err := c.Invoke(ctx, EventObjectID, "register", []Attr{Int32("object", int32(id)), String("pattern", pattern)}); err != nil {
		c.dropSink(id)
		_ = c.removeRemote(context.Background(), id)
		return nil, fmt.Errorf("ubus: listen %q: %w", pattern, err)
	}
	return c.stopper(id), nil
}

func (c *Conn) stopper(id uint32) func() error {
	var once sync.Once
	var err error
	return func() error {
		once.Do(func() {
			c.dropSink(id)
			ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
			defer cancel()
			err = c.removeRemote(ctx, id)
		})
		return err
	}
}

// Subscribe subscribes to the notifications of the object at path; fn gets
// each notification's type and data, in order, on its own goroutine. stop
// unsubscribes. ctx bounds the subscription only.
func (c *Conn) Subscribe(ctx context.Context, path string, fn func(typ string, data []Attr)) (stop func() error, err error) {
	id, _, err := c.addSink(ctx, fn)
	if err != nil {
		return nil, fmt.Errorf("ubus: subscribe %q: %w", path, err)
	}
	target, err := c.LookupID(ctx, path)
	if err == nil {
		_, err = c.roundTrip(ctx, &Message{Type: MsgSubscribe, Attrs: []MsgAttr{
			U32Attr(AttrObjID, id), U32Attr(AttrTarget, target)}}, nil)
	}
	if err != nil {
		c.dropSink(id)
		_ = c.removeRemote(context.Background(), id)
		return nil, fmt.Errorf("ubus: subscribe %q: %w", path, err)
	}
	return c.stopper(id), nil
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
