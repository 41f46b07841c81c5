// Package ubustest is an in-process broker that speaks the stock ubusd's
// protocol for what this project uses: HELLO with a random client id,
// ADD_OBJECT/REMOVE_OBJECT with object and type ids, LOOKUP (exact, "prefix*"
// and all), INVOKE routing with ubusd's seq/peer handling and USER/GROUP from
// the peer's credentials, DATA/STATUS forwarding, events through object 1
// ("register", "send", ubus.object.add/remove), SUBSCRIBE/UNSUBSCRIBE/NOTIFY.
// Its behaviour follows github.com/openwrt/ubus (ubusd_proto.c, ubusd_obj.c,
// ubusd_event.c) and is checked against captures of the stock broker.
//
// Unlike ubusd, a call pending on a client that disconnects is answered with
// StatusNotFound instead of being left to time out. There are no ACLs.
//
// It is used by tests and by the `demo` command, so the core never depends
// on the testing package; Start (in start.go) is the test helper. A broker
// must never block on one slow client: each client has its own bounded
// write queue, and a client that lets it fill is disconnected.
package ubustest

import (
	"bufio"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/user"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/packet-steering/packet-steering/internal/ubus"
	"golang.org/x/sys/unix"
)

// systemObjectMax is UBUS_SYSTEM_OBJECT_MAX: ids below it are reserved.
const systemObjectMax = 1024

// txQueueLen bounds the messages queued for one client.
const txQueueLen = 4096

// Queue limits after DropWhenFull: ubusd's UBUS_CLIENT_MAX_TXQ_LEN, 1 MiB of
// queued messages per client (ubusd.h), within a channel long enough for
// that many small messages.
const (
	stockTxQueueBytes = 1 << 20
	stockTxQueueLen   = 1 << 15
)

// Broker is an in-process ubus broker. Use New and Serve, or Listen.
type Broker struct {
	mu        sync.Mutex
	closed    bool
	listeners []net.Listener
	clients   map[uint32]*client
	objects   map[uint32]*object
	types     map[uint32]*objType
	paths     map[string]*object
	patterns  []*eventPattern
	eventSeq  uint16
	pending   map[pendingKey]struct{}
	wg        sync.WaitGroup
	// dropWhenFull: see DropWhenFull.
	dropWhenFull bool
}

type client struct {
	id          uint32
	nc          net.Conn
	user, group string
	tx          chan []byte
	txBytes     atomic.Int64 // bytes queued in tx
	quit        chan struct{}
	closeOnce   sync.Once
	objects     map[uint32]*object
}

type objType struct {
	id       uint32
	refcount int
	methods  [][]byte // each method's blobmsg table, raw
}

type object struct {
	id          uint32
	path        string
	typ         *objType
	owner       *client
	subscribers []*object // objects subscribed to this one
	targets     []*object // objects this one subscribes to
	invokeSeq   uint16
}

type eventPattern struct {
	pattern string
	partial bool
	obj     *object
}

// pendingKey identifies an invoke forwarded to a server and not yet answered.
type pendingKey struct {
	server, caller, obj uint32
	seq                 uint16
}

// New returns a broker with no listeners.
func New() *Broker {
	return &Broker{
		clients: map[uint32]*client{},
		objects: map[uint32]*object{},
		types:   map[uint32]*objType{},
		paths:   map[string]*object{},
		pending: map[pendingKey]struct{}{},
	}
}

// Listen creates a unix socket at path (replacing a stale socket file) and
// serves it on a new broker in the background. Close stops it and removes
// the socket file.
func Listen(path string) (*Broker, error) {
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("ubustest: remove stale socket: %w", err)
		}
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("ubustest: %w", err)
	}
	if ul, ok := l.(*net.UnixListener); ok {
		ul.SetUnlinkOnClose(true)
	}
	b := New()
	b.track(l)
	go func() { _ = b.acceptLoop(l) }()
	return b, nil
}

// DropWhenFull makes the broker queue for each client connecting from then
// on as the stock ubusd does (ubus_msg_enqueue in ubusd.c): up to 1 MiB of
// messages (UBUS_CLIENT_MAX_TXQ_LEN); a message that does not fit is
// dropped and the client stays connected. By default a client's queue holds
// 4096 messages and a client that lets it fill is disconnected. Load tests
// use it to keep a client that never reads its replies flooding, as it
// could against ubusd. Call it before clients connect.
func (b *Broker) DropWhenFull() {
	b.mu.Lock()
	b.dropWhenFull = true
	b.mu.Unlock()
}

// Serve accepts clients on l until l fails or the broker is closed. It
// returns nil after Close.
func (b *Broker) Serve(l net.Listener) error {
	if !b.track(l) {
		return nil
	}
	return b.acceptLoop(l)
}

// track records l so that Close stops it; false if the broker is closed.
func (b *Broker) track(l net.Listener) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		l.Close()
		return false
	}
	b.listeners = append(b.listeners, l)
	b.wg.Add(1)
	return true
}

func (b *Broker) acceptLoop(l net.Listener) error {
	defer b.wg.Done()
	for {
		nc, err := l.Accept()
		if err != nil {
			b.mu.Lock()
			closed := b.closed
			b.mu.Unlock()
			if closed {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("ubustest: accept: %w", err)
		}
		b.ServeConn(nc)
	}
}

// ServeConn serves one client connection in the background.
func (b *Broker) ServeConn(nc net.Conn) {
	b.mu.Lock()
	qlen := txQueueLen
	if b.dropWhenFull {
		qlen = stockTxQueueLen
	}
	b.mu.Unlock()
	cl := &client{nc: nc, tx: make(chan []byte, qlen), quit: make(chan struct{}),
		objects: map[uint32]*object{}}
	cl.user, cl.group = credentials(nc)
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		nc.Close()
		return
	}
	cl.id = b.newID(func(id uint32) bool { _, used := b.clients[id]; return used })
	b.clients[cl.id] = cl
	b.wg.Add(2)
	b.send(cl, &ubus.Message{Type: ubus.MsgHello, Peer: cl.id})
	b.mu.Unlock()
	go b.writeLoop(cl)
	go b.readLoop(cl)
}

// Close disconnects every client, stops the listeners and waits for the
// broker's goroutines.
func (b *Broker) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	ls := b.listeners
	cls := make([]*client, 0, len(b.clients))
	for _, cl := range b.clients {
		cls = append(cls, cl)
	}
	b.mu.Unlock()
	var err error
	for _, l := range ls {
		if e := l.Close(); e != nil && !errors.Is(e, net.ErrClosed) {
			err = errors.Join(err, e)
		}
	}
	for _, cl := range cls {
		cl.stop()
	}
	b.wg.Wait()
	return err
}

// Clients returns the number of connected clients.
func (b *Broker) Clients() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.clients)
}

func (cl *client) stop() {
	cl.closeOnce.Do(func() {
		close(cl.quit)
		cl.nc.Close()
	})
}

// credentials returns the peer's user and group names, as ubusd reads them
// with SO_PEERCRED (ubusd_acl.c); empty when the connection is not a unix
// socket.
func credentials(nc net.Conn) (string, string) {
	uc, ok := nc.(*net.UnixConn)
	if !ok {
		return "", ""
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return "", ""
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil || cerr != nil {
		return "", ""
	}
	uid := strconv.FormatUint(uint64(cred.Uid), 10)
	gid := strconv.FormatUint(uint64(cred.Gid), 10)
	name, group := uid, gid
	if u, err := user.LookupId(uid); err == nil {
		name = u.Username
	}
	if g, err := user.LookupGroupId(gid); err == nil {
		group = g.Name
	}
	return name, group
}

// newID returns a random id >= systemObjectMax that used does not know.
// The caller holds b.mu.
func (b *Broker) newID(used func(uint32) bool) uint32 {
	for {
		id := rand.Uint32()
		if id >= systemObjectMax && !used(id) {
			return id
		}
	}
}

func (b *Broker) writeLoop(cl *client) {
	defer b.wg.Done()
	w := bufio.NewWriterSize(cl.nc, 64<<10)
	for {
		select {
		case <-cl.quit:
			return
		case buf := <-cl.tx:
			cl.txBytes.Add(-int64(len(buf)))
			if _, err := w.Write(buf); err != nil {
				cl.stop()
				return
			}
			// Batch what is already queued into one write.
			for more := true; more; {
				select {
				case buf = <-cl.tx:
					cl.txBytes.Add(-int64(len(buf)))
					if _, err := w.Write(buf); err != nil {
						cl.stop()
						return
					}
				default:
					more = false
				}
			}
			if err := w.Flush(); err != nil {
				cl.stop()
				return
			}
		}
	}
}

func (b *Broker) readLoop(cl *client) {
	defer b.wg.Done()
	br := bufio.NewReaderSize(cl.nc, 64<<10)
	for {
		m, err := ubus.ReadMessage(br, ubus.MaxMessageLen)
		if err != nil {
			break
		}
		b.mu.Lock()
		b.handle(cl, m)
		b.mu.Unlock()
	}
	cl.stop()
	b.mu.Lock()
	b.dropClient(cl)
	b.mu.Unlock()
}

// send queues m for cl; a client whose queue is full is disconnected
// (or, after DropWhenFull, the message is dropped).
// The caller holds b.mu.
func (b *Broker) send(cl *client, m *ubus.Message) {
	buf, err := m.MarshalBinary()
	if err != nil {
		return
	}
	b.sendRaw(cl, buf)
}

func (b *Broker) sendRaw(cl *client, buf []byte) {
	if b.dropWhenFull && cl.txBytes.Load()+int64(len(buf)) > stockTxQueueBytes {
		return
	}
	select {
	case <-cl.quit:
	case cl.tx <- buf:
		cl.txBytes.Add(int64(len(buf)))
	default:
		if !b.dropWhenFull {
			cl.stop()
		}
	}
}

// status sends the generic reply: STATUS with the request's seq and peer.
func (b *Broker) status(cl *client, req *ubus.Message, st ubus.Status) {
	b.send(cl, &ubus.Message{Type: ubus.MsgStatus, Seq: req.Seq, Peer: req.Peer,
		Attrs: []ubus.MsgAttr{ubus.U32Attr(ubus.AttrStatus, uint32(st))}})
}

// data sends a DATA reply with the request's seq and peer.
func (b *Broker) data(cl *client, req *ubus.Message, attrs ...ubus.MsgAttr) {
	b.send(cl, &ubus.Message{Type: ubus.MsgData, Seq: req.Seq, Peer: req.Peer, Attrs: attrs})
}

// attrs holds a message's attributes by id, keeping the last of each and
// dropping those whose payload does not fit the id's type, as ubusd's
// blob_parse_untrusted with ubus_policy does.
type attrs [14]*ubus.MsgAttr

func parse(m *ubus.Message) *attrs {
	var a attrs
	for i := range m.Attrs {
		ma := &m.Attrs[i]
		if int(ma.ID) >= len(a) {
			continue
		}
		switch ma.ID {
		case ubus.AttrStatus, ubus.AttrObjID, ubus.AttrObjType:
			if len(ma.Data) != 4 {
				continue
			}
		case ubus.AttrObjPath, ubus.AttrMethod, ubus.AttrUser, ubus.AttrGroup:
			if _, err := ma.String(); err != nil {
				continue
			}
		}
		a[ma.ID] = ma
	}
	return &a
}

func (a *attrs) u32(id ubus.AttrID) (uint32, bool) {
	if a[id] == nil {
		return 0, false
	}
	v, err := a[id].U32()
	return v, err == nil
}

func (a *attrs) str(id ubus.AttrID) (string, bool) {
	if a[id] == nil {
		return "", false
	}
	v, err := a[id].String()
	return v, err == nil
}

// handle runs one message from cl; the caller holds b.mu.
func (b *Broker) handle(cl *client, m *ubus.Message) {
	a := parse(m)
	var st ubus.Status
	switch m.Type {
	case ubus.MsgPing:
		b.send(cl, &ubus.Message{Type: ubus.MsgData, Seq: m.Seq, Peer: m.Peer, Attrs: m.Attrs})
		st = ubus.StatusOK
	case ubus.MsgAddObject:
		st = b.addObject(cl, m, a)
	case ubus.MsgRemoveObject:
		st = b.removeObject(cl, m, a)
	case ubus.MsgLookup:
		st = b.lookup(cl, m, a)
	case ubus.MsgInvoke:
		var done bool
		st, done = b.invoke(cl, m, a)
		if done {
			return
		}
	case ubus.MsgStatus, ubus.MsgData:
		b.response(cl, m, a)
		return
	case ubus.MsgSubscribe:
		st = b.subscribe(cl, a)
	case ubus.MsgUnsubscribe:
		st = b.unsubscribe(cl, a)
	case ubus.MsgNotify:
		var done bool
		st, done = b.notify(cl, m, a)
		if done {
			return
		}
	default:
		st = ubus.StatusInvalidCommand
	}
	b.status(cl, m, st)
}

func (b *Broker) addObject(cl *client, m *ubus.Message, a *attrs) ubus.Status {
	var typ *objType
	if id, ok := a.u32(ubus.AttrObjType); ok {
		typ = b.types[id]
	} else if a[ubus.AttrSignature] != nil {
		methods, ok := splitMethods(a[ubus.AttrSignature].Data)
		if !ok {
			return ubus.StatusInvalidArgument
		}
		typ = &objType{methods: methods}
		typ.id = b.newID(func(id uint32) bool { _, used := b.types[id]; return used })
		b.types[typ.id] = typ
	}
	path, hasPath := a.str(ubus.AttrObjPath)
	if hasPath {
		if _, dup := b.paths[path]; dup {
			if typ != nil && typ.refcount == 0 {
				delete(b.types, typ.id)
			}
			return ubus.StatusInvalidArgument
		}
	}
	obj := &object{path: path, typ: typ, owner: cl}
	obj.id = b.newID(func(id uint32) bool { _, used := b.objects[id]; return used })
	if typ != nil {
		typ.refcount++
	}
	b.objects[obj.id] = obj
	cl.objects[obj.id] = obj
	if hasPath {
		b.paths[path] = obj
		b.objectEvent(obj, true)
	}
	reply := []ubus.MsgAttr{ubus.U32Attr(ubus.AttrObjID, obj.id)}
	if a[ubus.AttrSignature] != nil && typ != nil {
		reply = append(reply, ubus.U32Attr(ubus.AttrObjType, typ.id))
	}
	b.data(cl, m, reply...)
	return ubus.StatusOK
}

// splitMethods checks a signature (a list of blobmsg tables) and returns each
// method's raw attribute, padded, as ubusd keeps them. As ubusd's
// blobmsg_check_attr(pos, true), every method must have a name.
func splitMethods(sig []byte) ([][]byte, bool) {
	methods, err := ubus.DecodeAttrs(sig, false)
	if err != nil {
		return nil, false
	}
	for _, m := range methods {
		if m.Name == "" {
			return nil, false
		}
	}
	var out [][]byte
	for off := 0; off < len(sig); {
		l := int(uint32(sig[off+1])<<16 | uint32(sig[off+2])<<8 | uint32(sig[off+3]))
		end := off + (l+3)&^3
		if end > len(sig) {
			end = len(sig)
		}
		m := make([]byte, (l+3)&^3)
		copy(m, sig[off:end])
		out = append(out, m)
		off += (l + 3) &^ 3
	}
	return out, true
}

func (b *Broker) removeObject(cl *client, m *ubus.Message, a *attrs) ubus.Status {
	id, ok := a.u32(ubus.AttrObjID)
	if !ok {
		return ubus.StatusInvalidArgument
	}
	obj := b.objects[id]
	if obj == nil || id < systemObjectMax {
		return ubus.StatusNotFound
	}
	if obj.owner != cl {
		return ubus.StatusPermissionDenied
	}
	reply := []ubus.MsgAttr{ubus.U32Attr(ubus.AttrObjID, obj.id)}
	if obj.typ != nil && obj.typ.refcount == 1 {
		reply = append(reply, ubus.U32Attr(ubus.AttrObjType, obj.typ.id))
	}
	b.data(cl, m, reply...)
	b.freeObject(obj)
	return ubus.StatusOK
}

// freeObject removes obj as ubusd_free_object does: its subscriptions end
// (targets learn they lost a subscriber, subscribers get UNSUBSCRIBE), its
// event patterns go, and a path object announces ubus.object.remove.
func (b *Broker) freeObject(obj *object) {
	for _, t := range obj.targets {
		b.dropSubscription(obj, t)
	}
	for _, s := range obj.subscribers {
		s.invokeSeq++
		b.send(s.owner, &ubus.Message{Type: ubus.MsgUnsubscribe, Seq: s.invokeSeq, Attrs: []ubus.MsgAttr{
			ubus.U32Attr(ubus.AttrObjID, s.id), ubus.U32Attr(ubus.AttrTarget, obj.id)}})
		s.targets = without(s.targets, obj)
	}
	obj.subscribers = nil
	kept := b.patterns[:0]
	for _, p := range b.patterns {
		if p.obj != obj {
			kept = append(kept, p)
		}
	}
	b.patterns = kept
	if obj.path != "" && b.paths[obj.path] == obj {
		b.objectEvent(obj, false)
		delete(b.paths, obj.path)
	}
	delete(b.objects, obj.id)
	delete(obj.owner.objects, obj.id)
	if obj.typ != nil {
		obj.typ.refcount--
		if obj.typ.refcount <= 0 {
			delete(b.types, obj.typ.id)
		}
	}
}

func without(list []*object, o *object) []*object {
	out := list[:0]
	for _, x := range list {
		if x != o {
			out = append(out, x)
		}
	}
	return out
}

// sendObj sends one lookup result, as ubusd_send_obj: objects without a
// type are skipped.
func (b *Broker) sendObj(cl *client, m *ubus.Message, obj *object) {
	if obj.typ == nil {
		return
	}
	n := 0
	for _, meth := range obj.typ.methods {
		n += len(meth)
	}
	sig := make([]byte, 0, n)
	for _, meth := range obj.typ.methods {
		sig = append(sig, meth...)
	}
	b.data(cl, m, ubus.StringAttr(ubus.AttrObjPath, obj.path), ubus.U32Attr(ubus.AttrObjID, obj.id),
		ubus.U32Attr(ubus.AttrObjType, obj.typ.id), ubus.MsgAttr{ID: ubus.AttrSignature, Data: sig})
}

func (b *Broker) sortedPaths() []string {
	paths := make([]string, 0, len(b.paths))
	for p := range b.paths {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	return paths
}

func (b *Broker) lookup(cl *client, m *ubus.Message, a *attrs) ubus.Status {
	if a[ubus.AttrObjPath] == nil {
		for _, p := range b.sortedPaths() {
			b.sendObj(cl, m, b.paths[p])
		}
		return ubus.StatusOK
	}
	path, _ := a.str(ubus.AttrObjPath)
	if path == "" {
		return ubus.StatusInvalidArgument
	}
	if !strings.HasSuffix(path, "*") {
		obj := b.paths[path]
		if obj == nil {
			return ubus.StatusNotFound
		}
		b.sendObj(cl, m, obj)
		return ubus.StatusOK
	}
	prefix := strings.TrimSuffix(path, "*")
	found := false
	for _, p := range b.sortedPaths() {
		if strings.HasPrefix(p, prefix) {
			found = true
			b.sendObj(cl, m, b.paths[p])
		}
	}
	if !found {
		return ubus.StatusNotFound
	}
	return ubus.StatusOK
}

// invoke routes an INVOKE; done reports that no status is due now.
func (b *Broker) invoke(cl *client, m *ubus.Message, a *attrs) (ubus.Status, bool) {
	id, okID := a.u32(ubus.AttrObjID)
	method, okMethod := a.str(ubus.AttrMethod)
	if !okID || !okMethod {
		return ubus.StatusInvalidArgument, false
	}
	if id == ubus.EventObjectID {
		return b.eventObject(cl, method, a[ubus.AttrData]), false
	}
	obj := b.objects[id]
	if obj == nil {
		return ubus.StatusNotFound, false
	}
	b.forwardInvoke(cl, obj, method, m.Seq, a[ubus.AttrData], false)
	b.pending[pendingKey{server: obj.owner.id, caller: cl.id, obj: obj.id, seq: m.Seq}] = struct{}{}
	return 0, true
}

// forwardInvoke sends an INVOKE to obj's owner as ubusd_forward_invoke:
// seq of the caller's request, peer = the caller's client id, then
// [NO_REPLY,] OBJID, METHOD, USER, GROUP, DATA.
func (b *Broker) forwardInvoke(cl *client, obj *object, method string, seq uint16, data *ubus.MsgAttr, noReply bool) {
	attrs := make([]ubus.MsgAttr, 0, 6)
	if noReply {
		attrs = append(attrs, ubus.U8Attr(ubus.AttrNoReply, 1))
	}
	attrs = append(attrs, ubus.U32Attr(ubus.AttrObjID, obj.id), ubus.StringAttr(ubus.AttrMethod, method))
	if cl.user != "" {
		attrs = append(attrs, ubus.StringAttr(ubus.AttrUser, cl.user))
	}
	if cl.group != "" {
		attrs = append(attrs, ubus.StringAttr(ubus.AttrGroup, cl.group))
	}
	if data != nil {
		attrs = append(attrs, ubus.MsgAttr{ID: ubus.AttrData, Data: data.Data})
	}
	b.send(obj.owner, &ubus.Message{Type: ubus.MsgInvoke, Seq: seq, Peer: cl.id, Attrs: attrs})
}

// response forwards a server's DATA or STATUS to the caller named by the
// header's peer, with the peer rewritten to the object id
// (ubusd_handle_response). Malformed or foreign replies are dropped.
func (b *Broker) response(cl *client, m *ubus.Message, a *attrs) {
	id, ok := a.u32(ubus.AttrObjID)
	if !ok || (m.Type == ubus.MsgStatus && a[ubus.AttrStatus] == nil) ||
		(m.Type == ubus.MsgData && a[ubus.AttrData] == nil) {
		return
	}
	obj := b.objects[id]
	if obj == nil || obj.owner != cl {
		return
	}
	caller := b.clients[m.Peer]
	if m.Type == ubus.MsgStatus {
		delete(b.pending, pendingKey{server: cl.id, caller: m.Peer, obj: id, seq: m.Seq})
	}
	if caller == nil {
		return
	}
	fwd := *m
	fwd.Peer = id
	b.send(caller, &fwd)
}

func (b *Broker) eventObject(cl *client, method string, data *ubus.MsgAttr) ubus.Status {
	var args []ubus.Attr
	if data != nil {
		var err error
		if args, err = data.Blobmsg(); err != nil {
			return ubus.StatusInvalidArgument
		}
	}
	switch method {
	case "register":
		return b.registerEvent(cl, args)
	case "send":
		id, okID := ubus.Find(args, "id")
		d, okData := ubus.Find(args, "data")
		if !okID || id.Type != ubus.TypeString || !okData || d.Type != ubus.TypeTable {
			return ubus.StatusInvalidArgument
		}
		if strings.HasPrefix(id.Str, "ubus.") {
			return ubus.StatusPermissionDenied
		}
		payload, err := ubus.EncodeAttrs(d.Children)
		if err != nil {
			return ubus.StatusInvalidArgument
		}
		b.sendEvent(cl, id.Str, payload)
		return ubus.StatusOK
	}
	return ubus.StatusInvalidCommand
}

func (b *Broker) registerEvent(cl *client, args []ubus.Attr) ubus.Status {
	o, okObj := ubus.Find(args, "object")
	p, okPat := ubus.Find(args, "pattern")
	if !okObj || o.Type != ubus.TypeInt32 || !okPat || p.Type != ubus.TypeString {
		return ubus.StatusInvalidArgument
	}
	id := uint32(o.Int)
	if id < systemObjectMax {
		return ubus.StatusPermissionDenied
	}
	obj := b.objects[id]
	if obj == nil {
		return ubus.StatusNotFound
	}
	if obj.owner != cl {
		return ubus.StatusPermissionDenied
	}
	pat, partial := p.Str, false
	if strings.HasSuffix(pat, "*") {
		pat, partial = strings.TrimSuffix(pat, "*"), true
	}
	b.patterns = append(b.patterns, &eventPattern{pattern: pat, partial: partial, obj: obj})
	return ubus.StatusOK
}

// sendEvent delivers an event to every matching listener object once, never
// to the sender's own objects: INVOKE with a global event seq, peer 0, and
// OBJID, METHOD (the event), DATA (ubusd_send_event).
func (b *Broker) sendEvent(from *client, event string, payload []byte) {
	seen := map[*object]bool{}
	for _, p := range b.patterns {
		match := event == p.pattern || (p.partial && strings.HasPrefix(event, p.pattern))
		if !match || seen[p.obj] || (from != nil && p.obj.owner == from) {
			continue
		}
		seen[p.obj] = true
		b.eventSeq++
		b.send(p.obj.owner, &ubus.Message{Type: ubus.MsgInvoke, Seq: b.eventSeq, Attrs: []ubus.MsgAttr{
			ubus.U32Attr(ubus.AttrObjID, p.obj.id), ubus.StringAttr(ubus.AttrMethod, event),
			{ID: ubus.AttrData, Data: payload}}})
	}
}

// objectEvent announces ubus.object.add or ubus.object.remove with the
// object's id and path.
func (b *Broker) objectEvent(obj *object, add bool) {
	name := "ubus.object.remove"
	if add {
		name = "ubus.object.add"
	}
	payload, err := ubus.EncodeAttrs([]ubus.Attr{ubus.Int32("id", int32(obj.id)), ubus.String("path", obj.path)})
	if err == nil {
		b.sendEvent(nil, name, payload)
	}
}

// subscriber resolves the OBJID and TARGET of a SUBSCRIBE or UNSUBSCRIBE:
// the subscribing object must exist and belong to the calling client.
func (b *Broker) subscriber(cl *client, a *attrs) (obj *object, target uint32, st ubus.Status) {
	id, okID := a.u32(ubus.AttrObjID)
	tid, okT := a.u32(ubus.AttrTarget)
	if !okID || !okT {
		return nil, 0, ubus.StatusInvalidArgument
	}
	obj = b.objects[id]
	if obj == nil {
		return nil, 0, ubus.StatusNotFound
	}
	if obj.owner != cl {
		return nil, 0, ubus.StatusInvalidArgument
	}
	return obj, tid, ubus.StatusOK
}

func (b *Broker) subscribe(cl *client, a *attrs) ubus.Status {
	obj, tid, st := b.subscriber(cl, a)
	if st != ubus.StatusOK {
		return st
	}
	target := b.objects[tid]
	if target == nil {
		return ubus.StatusNotFound
	}
	if target.owner == cl {
		return ubus.StatusInvalidArgument
	}
	first := len(target.subscribers) == 0
	target.subscribers = append(target.subscribers, obj)
	obj.targets = append(obj.targets, target)
	if first {
		b.subscriptionState(target)
	}
	return ubus.StatusOK
}

// subscriptionState tells a target's owner whether it has subscribers:
// NOTIFY with OBJID and ACTIVE (ubus_notify_subscription).
func (b *Broker) subscriptionState(target *object) {
	active := uint8(0)
	if len(target.subscribers) > 0 {
		active = 1
	}
	target.invokeSeq++
	b.send(target.owner, &ubus.Message{Type: ubus.MsgNotify, Seq: target.invokeSeq, Attrs: []ubus.MsgAttr{
		ubus.U32Attr(ubus.AttrObjID, target.id), ubus.U8Attr(ubus.AttrActive, active)}})
}

func (b *Broker) dropSubscription(sub, target *object) {
	target.subscribers = without(target.subscribers, sub)
	sub.targets = without(sub.targets, target)
	if len(target.subscribers) == 0 {
		b.subscriptionState(target)
	}
}

func (b *Broker) unsubscribe(cl *client, a *attrs) ubus.Status {
	obj, tid, st := b.subscriber(cl, a)
	if st != ubus.StatusOK {
		return st
	}
	for _, t := range obj.targets {
		if t.id == tid {
			b.dropSubscription(obj, t)
			return ubus.StatusOK
		}
	}
	return ubus.StatusNotFound
}

// notify forwards a NOTIFY to the object's subscribers as INVOKEs (with
// NO_REPLY when asked); without NO_REPLY the notifier first gets STATUS with
// the subscriber ids (ubusd_handle_notify).
func (b *Broker) notify(cl *client, m *ubus.Message, a *attrs) (ubus.Status, bool) {
	id, okID := a.u32(ubus.AttrObjID)
	method, okMethod := a.str(ubus.AttrMethod)
	if !okID || !okMethod {
		return ubus.StatusInvalidArgument, false
	}
	noReply := false
	if a[ubus.AttrNoReply] != nil {
		v, _ := a[ubus.AttrNoReply].U8()
		noReply = v != 0
	}
	obj := b.objects[id]
	if obj == nil {
		return ubus.StatusNotFound, false
	}
	if obj.owner != cl {
		return ubus.StatusPermissionDenied, false
	}
	if !noReply {
		var subs []byte
		for _, s := range obj.subscribers {
			subs = append(subs, 0, 0, 0, 8, byte(s.id>>24), byte(s.id>>16), byte(s.id>>8), byte(s.id))
		}
		b.send(cl, &ubus.Message{Type: ubus.MsgStatus, Seq: m.Seq, Peer: m.Peer, Attrs: []ubus.MsgAttr{
			ubus.U32Attr(ubus.AttrObjID, id), {ID: ubus.AttrSubscribers, Data: subs},
			ubus.U32Attr(ubus.AttrStatus, 0)}})
	}
	for _, s := range obj.subscribers {
		b.forwardInvoke(cl, s, method, m.Seq, a[ubus.AttrData], noReply)
	}
	return 0, true
}

// dropClient frees a disconnected client's objects and answers the calls
// still pending on it with StatusNotFound. The caller holds b.mu.
func (b *Broker) dropClient(cl *client) {
	if b.clients[cl.id] != cl {
		return
	}
	delete(b.clients, cl.id)
	ids := make([]uint32, 0, len(cl.objects))
	for id := range cl.objects {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		if obj := b.objects[id]; obj != nil {
			b.freeObject(obj)
		}
	}
	for k := range b.pending {
		if k.caller == cl.id {
			delete(b.pending, k)
			continue
		}
		if k.server != cl.id {
			continue
		}
		delete(b.pending, k)
		if caller := b.clients[k.caller]; caller != nil {
			b.send(caller, &ubus.Message{Type: ubus.MsgStatus, Seq: k.seq, Peer: k.obj, Attrs: []ubus.MsgAttr{
				ubus.U32Attr(ubus.AttrStatus, uint32(ubus.StatusNotFound)), ubus.U32Attr(ubus.AttrObjID, k.obj)}})
		}
	}
}
