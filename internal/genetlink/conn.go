// Package genetlink is a small generic netlink client (AF_NETLINK,
// NETLINK_GENERIC) on golang.org/x/sys/unix, without cgo: it resolves a
// family by name through the nlctrl family, sends requests and dumps with
// sequence numbers, reassembles multipart dump replies, and turns
// NLMSG_ERROR replies with extended acks into *Error values. Its attribute
// Encoder and DecodeAttrs handle nested attributes.
//
// Every read is bounded: one datagram is at most RecvBufferSize bytes, one
// request's reply at most MaxReplyBytes bytes and MaxReplyMessages
// messages, and each wait for the kernel is bounded by the context or, when
// the context has no deadline, by DefaultTimeout.
//
// A socket answers for the network namespace it was opened in.
//
// The netdev family (Documentation/netlink/specs/netdev.yaml) is in
// netdev.go.
package genetlink

import (
	"context"
	"errors"
	"os"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/packet-steering/packet-steering/internal/outline"
)

// Bounds on what one request may make the client read.
const (
	// RecvBufferSize is the receive buffer. The kernel sizes dump
	// datagrams by the largest buffer the reader offered
	// (net/netlink/af_netlink.c netlink_recvmsg, netlink_dump), and
	// replies to requests fit NLMSG_GOODSIZE (8 KiB or less); a longer
	// datagram all the same is an error (read with MSG_TRUNC).
	RecvBufferSize = 16 << 10
	// MaxReplyBytes bounds the bytes of one request's reply.
	MaxReplyBytes = 8 << 20
	// MaxReplyMessages bounds the messages of one request's reply.
	MaxReplyMessages = 1 << 16
	// DefaultTimeout bounds each wait for the kernel when the context has
	// no deadline.
	DefaultTimeout = 5 * time.Second
)

// ErrDumpInterrupted is returned when the kernel flagged a dump
// NLM_F_DUMP_INTR (the set changed while it was dumped) on every try.
var ErrDumpInterrupted = errors.New("genetlink: dump interrupted by a concurrent change")

// Conn is a generic netlink socket. Its methods may be called from several
// goroutines; requests are serialised.
type Conn struct {
	mu  outline.Mutex
	fd  int
	seq uint32
	buf []byte
}

// Dial opens a generic netlink socket in the calling thread's network
// namespace, connected to the kernel: the kernel then refuses to queue
// messages from any other sender on it (net/netlink/af_netlink.c
// netlink_getsockbyportid), so every reply is the kernel's. Extended acks
// (NETLINK_EXT_ACK, Linux 4.12) and capped acks (NETLINK_CAP_ACK, 4.3)
// are asked for; a kernel without them still works.
func Dial() (*Conn, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_GENERIC)
	if err != nil {
		return nil, outline.Errorf("genetlink: socket: %w", err)
	}
	if err := unix.Connect(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, outline.Errorf("genetlink: connect: %w", err)
	}
	_ = unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_EXT_ACK, 1)
	_ = unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_CAP_ACK, 1)
	return &Conn{fd: fd, buf: make([]byte, RecvBufferSize)}, nil
}

// Close closes the socket.
func (c *Conn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fd < 0 {
		return nil
	}
	err := unix.Close(c.fd)
	c.fd = -1
	return err
}

// Request is one generic netlink request.
type Request struct {
	// Op names the request in errors, e.g. "netdev queue-get".
	Op      string
	Family  uint16
	Cmd     uint8
	Version uint8
	// Attrs is the encoded attribute stream (Encoder.Bytes).
	Attrs []byte
	// Dump sets NLM_F_DUMP: the reply is every matching object, in
	// multipart messages up to NLMSG_DONE.
	Dump bool
}

// Execute sends req and returns the reply's messages: for a dump every
// message up to NLMSG_DONE, otherwise the reply messages before the
// acknowledgement (none for a command that only acknowledges). A
// kernel error is an *Error; a dump the kernel marks interrupted is retried
// twice, then ErrDumpInterrupted.
func (c *Conn) Execute(ctx context.Context, req Request) ([]Message, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fd < 0 {
		return nil, outline.Errorf("genetlink: %s: %w", req.Op, os.ErrClosed)
	}
	for try := 0; ; try++ {
		msgs, err := c.execute(ctx, req)
		if errors.Is(err, ErrDumpInterrupted) && try < 2 {
			continue
		}
		return msgs, err
	}
}

func (c *Conn) execute(ctx context.Context, req Request) ([]Message, error) {
	c.seq++
	seq := c.seq
	flags := uint16(unix.NLM_F_REQUEST)
	if req.Dump {
		flags |= unix.NLM_F_DUMP
	} else {
		flags |= unix.NLM_F_ACK
	}
	// Port id 0: the kernel fills in the socket's own.
	b := encodeRequest(req.Family, flags, seq, 0, req.Cmd, req.Version, req.Attrs)
	if _, err := unix.Write(c.fd, b); err != nil {
		return nil, outline.Errorf("genetlink: %s: send: %w", req.Op, err)
	}
	var out []Message
	total, count := 0, 0
	intr := false
	for {
		n, err := c.recv(ctx)
		if err != nil {
			return nil, outline.Errorf("genetlink: %s: %w", req.Op, err)
		}
		if total += n; total > MaxReplyBytes {
			return nil, outline.Errorf("genetlink: %s: reply longer than %d bytes", req.Op, MaxReplyBytes)
		}
		raws, err := splitMessages(c.buf[:n])
		if err != nil {
			return nil, outline.Errorf("genetlink: %s: %w", req.Op, err)
		}
		for _, m := range raws {
			if m.Seq != seq {
				continue // a late answer to an earlier, abandoned request
			}
			if count++; count > MaxReplyMessages {
				return nil, outline.Errorf("genetlink: %s: reply of more than %d messages", req.Op, MaxReplyMessages)
			}
			if m.Flags&unix.NLM_F_DUMP_INTR != 0 {
				intr = true
			}
			switch m.Type {
			case unix.NLMSG_NOOP:
				continue
			case unix.NLMSG_ERROR:
				if err := parseError(m, b); err != nil {
					return nil, withOp(err, req.Op)
				}
				if !req.Dump {
					return out, nil // the acknowledgement ends the reply
				}
				continue
			case unix.NLMSG_DONE:
				if err := parseError(m, b); err != nil {
					return nil, withOp(err, req.Op)
				}
				if intr {
					return nil, outline.Errorf("%s: %w", req.Op, ErrDumpInterrupted)
				}
				return out, nil
			case unix.NLMSG_OVERRUN:
				return nil, outline.Errorf("genetlink: %s: overrun", req.Op)
			}
			gm, err := genlMessage(m)
			if err != nil {
				return nil, outline.Errorf("genetlink: %s: %w", req.Op, err)
			}
			// Copy: the buffer is reused by the next read.
			gm.Attrs = append([]byte(nil), gm.Attrs...)
			out = append(out, gm)
		}
	}
}

// withOp names the request in a kernel error.
func withOp(err error, op string) error {
	var e *Error
	if errors.As(err, &e) {
		e.Op = op
		return e
	}
	return outline.Errorf("genetlink: %s: %w", op, err)
}

// recv waits for one datagram from the kernel, up to ctx's deadline (or
// DefaultTimeout), and returns its length in c.buf.
func (c *Conn) recv(ctx context.Context) (int, error) {
	deadline := time.Now().Add(DefaultTimeout)
	if d, ok := ctx.Deadline(); ok {
		deadline = d
	}
	for {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return 0, outline.Errorf("no reply: %w", os.ErrDeadlineExceeded)
		}
		// Wake up at least every 100 ms to notice a cancelled context.
		ms := int(min(left, 100*time.Millisecond) / time.Millisecond)
		fds := []unix.PollFd{{Fd: int32(c.fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, max(ms, 1))
		if errors.Is(err, unix.EINTR) || (err == nil && n == 0) {
			continue
		}
		if err != nil {
			return 0, outline.Errorf("poll: %w", err)
		}
		// recv(2) with MSG_TRUNC returns the datagram's whole length, so
		// that one longer than the buffer is an error, not a silent cut.
		// (The raw call: unix.Recvfrom would decode a sender address.)
		r, _, errno := unix.Syscall6(unix.SYS_RECVFROM, uintptr(c.fd), uintptr(unsafe.Pointer(&c.buf[0])),
			uintptr(len(c.buf)), unix.MSG_TRUNC|unix.MSG_DONTWAIT, 0, 0)
		if errno == unix.EAGAIN || errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return 0, outline.Errorf("recv: %w", errno)
		}
		if int(r) > len(c.buf) {
			return 0, outline.Errorf("datagram of %d bytes, longer than the %d-byte buffer", r, len(c.buf))
		}
		return int(r), nil
	}
}

// Family is a generic netlink family as nlctrl describes it.
type Family struct {
	ID      uint16
	Name    string
	Version uint32
	MaxAttr uint32
	// Ops are the command numbers the kernel implements (CTRL_ATTR_OPS).
	Ops []uint32
}

// HasOp reports whether the kernel implements command cmd of the family.
func (f *Family) HasOp(cmd uint8) bool {
	for _, o := range f.Ops {
		if o == uint32(cmd) {
			return true
		}
	}
	return false
}

// nlctrl attributes and command (include/uapi/linux/genetlink.h).
const (
	ctrlVersion        = 2
	ctrlAttrFamilyID   = unix.CTRL_ATTR_FAMILY_ID   // u16
	ctrlAttrFamilyName = unix.CTRL_ATTR_FAMILY_NAME // string
	ctrlAttrVersion    = 3                          // u32
	ctrlAttrMaxAttr    = 5                          // u32
	ctrlAttrOps        = 6                          // nested array of nested {op id, flags}
	ctrlAttrOpID       = 1                          // u32
)

// Family resolves a family by name (CTRL_CMD_GETFAMILY). A family the
// kernel does not have is an error for which errors.Is(err,
// fs.ErrNotExist) (and unix.ENOENT) holds.
func (c *Conn) Family(ctx context.Context, name string) (*Family, error) {
	var e Encoder
	e.String(ctrlAttrFamilyName, name)
	attrs, err := e.Bytes()
	if err != nil {
		return nil, err
	}
	msgs, err := c.Execute(ctx, Request{Op: "nlctrl getfamily " + name, Family: unix.GENL_ID_CTRL,
		Cmd: unix.CTRL_CMD_GETFAMILY, Version: ctrlVersion, Attrs: attrs})
	if err != nil {
		return nil, err
	}
	if len(msgs) != 1 {
		return nil, outline.Errorf("genetlink: family %s: %d replies, want 1", name, len(msgs))
	}
	f, err := parseFamily(msgs[0].Attrs)
	if err != nil {
		return nil, outline.Errorf("genetlink: family %s: %w", name, err)
	}
	if f.Name != name {
		return nil, outline.Errorf("genetlink: asked for family %q, the kernel answered %q", name, f.Name)
	}
	return f, nil
}

// parseFamily decodes a CTRL_CMD_NEWFAMILY reply's attributes.
func parseFamily(b []byte) (*Family, error) {
	attrs, err := DecodeAttrs(b)
	if err != nil {
		return nil, err
	}
	f := &Family{}
	for _, a := range attrs {
		switch a.Type {
		case ctrlAttrFamilyID:
			f.ID, err = a.U16()
		case ctrlAttrFamilyName:
			f.Name, err = a.String()
		case ctrlAttrVersion:
			f.Version, err = a.U32()
		case ctrlAttrMaxAttr:
			f.MaxAttr, err = a.U32()
		case ctrlAttrOps:
			f.Ops, err = parseOps(a)
		}
		if err != nil {
			return nil, err
		}
	}
	if f.ID == 0 {
		return nil, outline.Errorf("%w: no family id", ErrMalformed)
	}
	return f, nil
}

func parseOps(a Attr) ([]uint32, error) {
	list, err := a.Attrs()
	if err != nil {
		return nil, err
	}
	ops := make([]uint32, 0, len(list))
	for _, item := range list {
		fields, err := item.Attrs()
		if err != nil {
			return nil, err
		}
		for _, f := range fields {
			if f.Type == ctrlAttrOpID {
				id, err := f.U32()
				if err != nil {
					return nil, err
				}
				ops = append(ops, id)
			}
		}
	}
	return ops, nil
}
