package ubus

import (
	"bufio"
	"context"
	"errors"
	"strings"
	"time"

	"github.com/packet-steering/packet-steering/internal/outline"
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

// Conn is a connection to a ubus broker. All methods are safe for
// concurrent use. Requests are correlated with replies by sequence number;
// invokes on registered objects are served concurrently, within limits (see
// MaxCallsInFlight).
type Conn struct {
	nc  Transport
	id  uint32
	ctx context.Context // cancelled when the connection ends

	cancel context.CancelFunc
	done   chan struct{}

	wmu  outline.Mutex
	wbuf []byte
	// refused holds answers to refused invokes not yet written (see refuse).
	refused []byte

	mu      outline.Mutex
	seq     uint16
	pending map[uint16]*request
	objects map[uint32]*Object
	sinks   map[uint32]*sink
	err     error
	log     Logger

	calls callQueue
}

// Dial connects to the broker's unix socket at path ("" tries DefaultSocket,
// then LegacySocket) and reads its HELLO. The context bounds the dial and
// the greeting only.
func Dial(ctx context.Context, path string) (*Conn, error) {
	paths := []string{path}
	if path == "" {
		paths = []string{DefaultSocket, LegacySocket}
	}
	var err error
	for _, p := range paths {
		var nc Transport
		nc, err = DialUnix(ctx, p)
		if err != nil {
			err = outline.Errorf("ubus: dial: %w", err)
			continue
		}
		return NewConn(ctx, nc)
	}
	return nil, err
}

// NewConn starts the protocol on an established connection to a broker: it
// reads the broker's HELLO (bounded by ctx) and starts serving. The Conn
// owns nc from then on, also when NewConn fails.
func NewConn(ctx context.Context, nc Transport) (*Conn, error) {
	stop := context.AfterFunc(ctx, func() { _ = nc.SetReadDeadline(time.Unix(1, 0)) })
	br := bufio.NewReaderSize(nc, 64<<10)
	hello, err := ReadMessage(br, 0)
	if !stop() || err != nil {
		nc.Close()
		if err == nil || ctx.Err() != nil {
			err = outline.JoinErrors(ctx.Err(), err)
		}
		return nil, outline.Errorf("ubus: read HELLO: %w", err)
	}
	_ = nc.SetReadDeadline(time.Time{})
	if hello.Type != MsgHello {
		nc.Close()
		return nil, outline.Errorf("%w: first message is %s, not HELLO", ErrMalformed, hello.Type)
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

// SetLogger sets where the connection logs what its callers should know
// about, such as calls refused beyond the limits (default: nowhere).
func (c *Conn) SetLogger(l Logger) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.log = l
}

func (c *Conn) logger() Logger {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.log == nil {
		return discardLogger{}
	}
	return c.log
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
//
//go:noinline
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
		if br.Buffered() == 0 || c.refusedLen() >= 32<<10 {
			c.flushRefused()
		}
	}
	c.fail(outline.Errorf("%w: %w", ErrClosed, err))
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
		c.fail(outline.Errorf("%w: write: %w", ErrClosed, err))
		return outline.Errorf("%w: write: %w", ErrClosed, err)
	}
	return nil
}

// newRequest allocates a sequence number; the caller must hold c.mu.
func (c *Conn) newRequestLocked(r *request) (uint16, error) {
	if c.err != nil {
		return 0, c.err
	}
	if len(c.pending) >= 1<<16-1 {
		return 0, outline.Errorf("ubus: %d requests in flight: %w", len(c.pending), StatusNoMemory)
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
		return nil, outline.Errorf("ubus: %s: %w", m.Type, ctx.Err())
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
		return nil, outline.Errorf("ubus: lookup %q: %w", pattern, err)
	}
	infos := make([]ObjectInfo, 0, len(data))
	for _, d := range data {
		info, err := parseObjectInfo(d)
		if err != nil {
			return nil, outline.Errorf("ubus: lookup %q: %w", pattern, err)
		}
		infos = append(infos, info)
	}
	return infos, nil
}

func parseObjectInfo(d *Message) (ObjectInfo, error) {
	var info ObjectInfo
	var ok bool
	if info.Path, ok = d.Str(AttrObjPath); !ok {
		return info, outline.Errorf("%w: lookup reply without path", ErrMalformed)
	}
	if info.ID, ok = d.U32(AttrObjID); !ok {
		return info, outline.Errorf("%w: lookup reply without object id", ErrMalformed)
	}
	info.TypeID, _ = d.U32(AttrObjType)
	if a, ok := d.Get(AttrSignature); ok {
		methods, err := a.Blobmsg()
		if err != nil {
			return info, outline.Errorf("signature of %s: %w", info.Path, err)
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
		return 0, outline.Errorf("ubus: lookup %q: %w", path, StatusInvalidArgument)
	}
	infos, err := c.Lookup(ctx, path)
	if err != nil {
		return 0, err
	}
	if len(infos) == 0 {
		return 0, outline.Errorf("ubus: lookup %q: %w", path, StatusNotFound)
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
		return nil, outline.Errorf("ubus: invoke %s: %w", method, err)
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
			return nil, outline.Errorf("ubus: invoke %s: reply: %w", method, derr)
		}
		out = append(out, attrs...)
	}
	if err != nil {
		return out, outline.Errorf("ubus: invoke %s: %w", method, err)
	}
	return out, nil
}
