package ubus

import (
	"context"
	"errors"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// Transport is the byte stream a Conn speaks over: a connected unix socket
// from DialUnix, or any net.Conn (tests use net.Pipe). Reads must unblock
// with an error once the deadline passes or the transport is closed.
type Transport interface {
	io.ReadWriteCloser
	SetReadDeadline(t time.Time) error
	SetWriteDeadline(t time.Time) error
}

// DialUnix connects a stream socket to the unix socket at path. It uses the
// socket system calls directly and wraps the descriptor in an *os.File
// (non-blocking, so deadlines and Close unblock a Read through the runtime's
// poller) instead of importing the net package, which would add most of its
// resolver and TCP code to every program using this package. ctx is checked
// before connecting: connect(2) on a unix stream socket either completes at
// once or fails (EAGAIN when the listener's backlog is full), it never waits.
func DialUnix(ctx context.Context, path string) (Transport, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(path) >= len(unix.RawSockaddrUnix{}.Path) {
		return nil, &os.PathError{Op: "connect", Path: path, Err: errors.New("socket path too long")}
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, os.NewSyscallError("socket", err)
	}
	for {
		err = unix.Connect(fd, &unix.SockaddrUnix{Name: path})
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "connect", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}
