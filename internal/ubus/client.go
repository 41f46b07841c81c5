package ubus

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/packet-steering/packet-steering/internal/outline"
)

// ErrNotConnected is returned (wrapped) by Client requests while the Client
// has no connection to the broker.
var ErrNotConnected = errors.New("ubus: not connected")

// ClientOption configures a Client.
type ClientOption func(*Client)

// WithBackoff sets the first and the longest wait between connection
// attempts (defaults 50 ms and 1 s); the wait doubles after each failure.
func WithBackoff(first, longest time.Duration) ClientOption {
	return func(c *Client) {
		if first > 0 {
			c.backoffMin = first
		}
		if longest >= c.backoffMin {
			c.backoffMax = longest
		}
	}
}

// Logger is where a Client logs connection changes: a message and then
// key-value pairs, as log/slog's Logger methods take them (a *slog.Logger
// is a Logger). The interface keeps log/slog out of programs that do not
// use it.
type Logger interface {
	Debug(msg string, args ...any)
	Info(msg string, args ...any)
	Warn(msg string, args ...any)
}

// discardLogger logs nothing.
type discardLogger struct{}

func (discardLogger) Debug(string, ...any) {}
func (discardLogger) Info(string, ...any)  {}
func (discardLogger) Warn(string, ...any)  {}

// WithLogger sets where connection changes are logged (default: nowhere;
// nil also logs nothing).
func WithLogger(l Logger) ClientOption {
	return func(c *Client) {
		if l != nil {
			c.log = l
		}
	}
}

// WithOnConnect sets a function called after each (re)connection, once every
// registered object is registered again, for example to re-add listeners.
// It runs on the Client's goroutine; the connection is usable.
func WithOnConnect(fn func(ctx context.Context, conn *Conn)) ClientOption {
	return func(c *Client) { c.onConnect = fn }
}

// Client keeps a connection to the broker for a daemon: it connects with
// backoff, registers its objects on every (re)connection and reconnects
// when the broker goes away. While it is disconnected its requests fail at
// once with ErrNotConnected; they never wait for a reconnection.
type Client struct {
	path       string
	backoffMin time.Duration
	backoffMax time.Duration
	log        Logger
	onConnect  func(context.Context, *Conn)

	mu      outline.Mutex
	conn    *Conn
	objects []*Object
}

// NewClient returns a Client for the broker socket at path ("" tries the
// default paths, as Dial). Call Run to connect.
func NewClient(path string, opts ...ClientOption) *Client {
	c := &Client{path: path, backoffMin: 50 * time.Millisecond, backoffMax: time.Second,
		log: discardLogger{}}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Register adds obj to the objects registered on every (re)connection. If
// the Client is connected, obj is registered at once (best effort: a failure
// is logged and retried on the next reconnection).
func (c *Client) Register(obj *Object) {
	c.mu.Lock()
	c.objects = append(c.objects, obj)
	conn := c.conn
	c.mu.Unlock()
	if conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
		defer cancel()
		if err := conn.AddObject(ctx, obj); err != nil {
			c.log.Warn("ubus register", "object", obj.Path, "err", err)
		}
	}
}

// Run connects, registers the objects and serves until ctx is done, then
// closes the connection and returns nil. When the connection is lost (or
// registering fails) it reconnects after a backoff that doubles from the
// first to the longest wait and restarts after a successful connection.
func (c *Client) Run(ctx context.Context) error {
	wait := c.backoffMin
	for {
		conn, err := c.connect(ctx)
		if err == nil {
			wait = c.backoffMin
			c.log.Info("ubus connected", "id", fmt.Sprintf("%08x", conn.ID()))
			select {
			case <-ctx.Done():
				c.setConn(nil)
				conn.Close()
				return nil
			case <-conn.Done():
				c.setConn(nil)
				c.log.Warn("ubus connection lost", "err", conn.Err())
			}
		} else {
			c.log.Debug("ubus connect", "err", err)
		}
		if ctx.Err() != nil {
			return nil
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		wait = min(2*wait, c.backoffMax)
	}
}

// connect dials and registers every object; on success the connection is
// published for requests.
func (c *Client) connect(ctx context.Context) (*Conn, error) {
	dctx, cancel := context.WithTimeout(ctx, 2*writeTimeout)
	defer cancel()
	conn, err := Dial(dctx, c.path)
	if err != nil {
		return nil, err
	}
	conn.SetLogger(c.log)
	c.mu.Lock()
	objs := append([]*Object(nil), c.objects...)
	c.mu.Unlock()
	for _, o := range objs {
		if err := conn.AddObject(dctx, o); err != nil {
			// Unlike a broker that is down, this needs attention (another
			// process holding the path, for example): say so loudly.
			c.log.Warn("ubus register", "object", o.Path, "err", err)
			conn.Close()
			return nil, err
		}
	}
	c.setConn(conn)
	// Objects registered while connecting were missed above.
	c.mu.Lock()
	late := c.objects[len(objs):]
	late = append([]*Object(nil), late...)
	c.mu.Unlock()
	for _, o := range late {
		if o.ID() == 0 {
			if err := conn.AddObject(dctx, o); err != nil {
				c.log.Warn("ubus register", "object", o.Path, "err", err)
			}
		}
	}
	if c.onConnect != nil {
		c.onConnect(ctx, conn)
	}
	return conn, nil
}

func (c *Client) setConn(conn *Conn) {
	c.mu.Lock()
	c.conn = conn
	c.mu.Unlock()
}

// Conn returns the current connection, if there is one.
func (c *Client) Conn() (*Conn, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.conn, c.conn != nil
}

//go:noinline
func (c *Client) current() (*Conn, error) {
	if conn, ok := c.Conn(); ok {
		return conn, nil
	}
	return nil, ErrNotConnected
}

// Call is Conn.Call on the current connection.
func (c *Client) Call(ctx context.Context, path, method string, args []Attr) ([]Attr, error) {
	conn, err := c.current()
	if err != nil {
		return nil, outline.Errorf("ubus: call %s %s: %w", path, method, err)
	}
	return conn.Call(ctx, path, method, args)
}

// Invoke is Conn.Invoke on the current connection.
func (c *Client) Invoke(ctx context.Context, objID uint32, method string, args []Attr) ([]Attr, error) {
	conn, err := c.current()
	if err != nil {
		return nil, outline.Errorf("ubus: invoke %s: %w", method, err)
	}
	return conn.Invoke(ctx, objID, method, args)
}

// Lookup is Conn.Lookup on the current connection.
func (c *Client) Lookup(ctx context.Context, pattern string) ([]ObjectInfo, error) {
	conn, err := c.current()
	if err != nil {
		return nil, outline.Errorf("ubus: lookup %q: %w", pattern, err)
	}
	return conn.Lookup(ctx, pattern)
}

// Send is Conn.Send on the current connection.
func (c *Client) Send(ctx context.Context, event string, data []Attr) error {
	conn, err := c.current()
	if err != nil {
		return outline.Errorf("ubus: send %s: %w", event, err)
	}
	return conn.Send(ctx, event, data)
}

// Notify is Conn.Notify on the current connection.
func (c *Client) Notify(ctx context.Context, obj *Object, typ string, data []Attr) error {
	conn, err := c.current()
	if err != nil {
		return outline.Errorf("ubus: notify %s: %w", obj.Path, err)
	}
	return conn.Notify(ctx, obj, typ, data)
}
