package ubus

import (
	"context"
	"sync"

	"github.com/packet-steering/packet-steering/internal/outline"
)

// notifyFunc receives events and notifications for a client-side object.
type notifyFunc func(method string, data []Attr)

// sinkMax bounds the events or notifications queued for one slow callback;
// beyond it the oldest are dropped.
const sinkMax = 4096

// sink is a client-side object that receives events or notifications; its
// callback runs on its own goroutine, one item after another, in order.
type sink struct {
	mu      outline.Mutex
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

// Send sends the event with name event and data (a table) to every
// listener whose pattern matches, through the broker's event object.
func (c *Conn) Send(ctx context.Context, event string, data []Attr) error {
	_, err := c.Invoke(ctx, EventObjectID, "send", []Attr{String("id", event), Table("data", data...)})
	if err != nil {
		return outline.Errorf("ubus: send %s: %w", event, err)
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
		return nil, outline.Errorf("ubus: listen %q: %w", pattern, err)
	}
	if _, err := c.Invoke(ctx, EventObjectID, "register", []Attr{Int32("object", int32(id)), String("pattern", pattern)}); err != nil {
		c.dropSink(id)
		_ = c.removeRemote(context.Background(), id)
		return nil, outline.Errorf("ubus: listen %q: %w", pattern, err)
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
		return nil, outline.Errorf("ubus: subscribe %q: %w", path, err)
	}
	target, err := c.LookupID(ctx, path)
	if err == nil {
		_, err = c.roundTrip(ctx, &Message{Type: MsgSubscribe, Attrs: []MsgAttr{
			U32Attr(AttrObjID, id), U32Attr(AttrTarget, target)}}, nil)
	}
	if err != nil {
		c.dropSink(id)
		_ = c.removeRemote(context.Background(), id)
		return nil, outline.Errorf("ubus: subscribe %q: %w", path, err)
	}
	return c.stopper(id), nil
}
