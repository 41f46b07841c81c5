package testenv

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// ListenSyslog is a stand-in for logd's /dev/log: a datagram socket in a
// temporary directory, closed when the test ends. It returns the socket,
// its path and the tag a record of this process starts with.
func ListenSyslog(t testing.TB) (l *net.UnixConn, path, tag string) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "log")
	l, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, path, "packet-steering[" + strconv.Itoa(os.Getpid()) + "]: "
}
