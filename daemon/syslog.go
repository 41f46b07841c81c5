package daemon

import (
	"errors"
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/packet-steering/packet-steering/internal/outline"
)

// SyslogSink sends records to the local syslog socket (/dev/log, read by
// OpenWrt's logd or busybox syslogd) as datagrams in the BSD syslog format
// without time stamp, `<PRI>TAG[PID]: MESSAGE`, as libc's syslog(3) sends
// them; the daemon then shows in logread as
// `daemon.info packet-steering[442]: applied ...`. It uses a raw unix
// socket: log/syslog would link the net package into the router binary.
type SyslogSink struct {
	_    outline.NoCompare
	mu   outline.Mutex
	path string
	fd   int // -1 when not connected
	tag  string
}

// syslogFacilityDaemon is LOG_DAEMON.
const syslogFacilityDaemon = 3

// DefaultSyslogPath is where logd listens.
const DefaultSyslogPath = "/dev/log"

// DialSyslog connects to the syslog socket at path.
func DialSyslog(path, tag string) (*SyslogSink, error) {
	s := &SyslogSink{path: path, fd: -1, tag: tag + "[" + outline.Itoa(os.Getpid()) + "]: "}
	if err := s.connect(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *SyslogSink) connect() error {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return outline.Errorf("syslog socket: %w", err)
	}
	if err := unix.Connect(fd, &unix.SockaddrUnix{Name: s.path}); err != nil {
		unix.Close(fd)
		return outline.Errorf("syslog %s: %w", s.path, err)
	}
	s.fd = fd
	return nil
}

// header appends `<PRI>TAG[PID]: ` for severity sev.
func (s *SyslogSink) header(b []byte, sev int) []byte {
	b = append(b, '<')
	b = strconv.AppendInt(b, int64(syslogFacilityDaemon<<3|sev), 10)
	b = append(b, '>')
	return append(b, s.tag...)
}

// headerLen is the length of header(nil, sev).
func (s *SyslogSink) headerLen(sev int) int { return len(s.header(nil, sev)) }

// send sends one record, reconnecting once when logd was restarted.
func (s *SyslogSink) send(b []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for try := 0; try < 2; try++ {
		if s.fd < 0 {
			if err := s.connect(); err != nil {
				return err
			}
		}
		_, err := unix.Write(s.fd, b)
		if err == nil {
			return nil
		}
		if !errors.Is(err, unix.ECONNREFUSED) && !errors.Is(err, unix.ENOTCONN) && !errors.Is(err, unix.ENOENT) {
			return outline.Errorf("syslog: %w", err)
		}
		unix.Close(s.fd)
		s.fd = -1
	}
	return errors.New("syslog: not connected")
}

// Close closes the socket.
func (s *SyslogSink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fd < 0 {
		return nil
	}
	err := unix.Close(s.fd)
	s.fd = -1
	return err
}
