package daemon

import (
	"bytes"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/packet-steering/packet-steering/internal/testenv"
)

// The daemon's lines are those of log/slog's TextHandler without the time.
func TestLineLoggerMatchesSlogText(t *testing.T) {
	tests := []struct {
		name string
		msg  string
		args []any
	}{
		{"plain", "serving", []any{"object", "packet_steering", "pid", 4242}},
		{"quoted", "apply failed", []any{"reason", "set_mode auto", "err", errors.New(`write "x": no space`)}},
		{"empty and equals", "m", []any{"a", "", "b", "k=v", "c", "tab\there"}},
		{"numbers and bools", "applied", []any{"changed", 3, "unchanged", int64(-7), "id", uint32(0xffffffff), "u", uint64(1), "ok", true}},
		{"stringer", "x", []any{"d", 1500 * time.Millisecond}},
		{"unicode", "grüße", []any{"k", "a\u00a0b", "bad", "\xff"}},
		{"nil", "x", []any{"err", nil}},
		{"odd", "x", []any{"k", 1, "dangling"}},
		{"bad key", "x", []any{7, "v"}},
		{"struct", "x", []any{"v", struct{ A int }{1}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var want, got bytes.Buffer
			sl := slog.New(slog.NewTextHandler(&want, &slog.HandlerOptions{
				ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
					if len(groups) == 0 && a.Key == slog.TimeKey {
						return slog.Attr{}
					}
					return a
				},
			}))
			sl.Warn(tc.msg, tc.args...)
			NewLogger(&got, false).Warn(tc.msg, tc.args...)
			if got.String() != want.String() {
				t.Errorf("got  %q\nwant %q", got.String(), want.String())
			}
		})
	}
}

func TestLineLoggerLevels(t *testing.T) {
	for _, debug := range []bool{false, true} {
		var out bytes.Buffer
		l := NewLogger(&out, debug)
		l.Debug("d")
		l.Info("i")
		l.Warn("w")
		l.Error("e")
		want := "level=INFO msg=i\nlevel=WARN msg=w\nlevel=ERROR msg=e\n"
		if debug {
			want = "level=DEBUG msg=d\n" + want
		}
		if out.String() != want {
			t.Errorf("debug %v: got %q, want %q", debug, out.String(), want)
		}
	}
}

// Concurrent records never interleave within a line.
func TestLineLoggerConcurrent(t *testing.T) {
	var out testenv.Buffer
	l := NewLogger(&out, false)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				l.Info("applied", "reason", "hotplug eth0", "changed", i)
			}
		}()
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 1600 {
		t.Fatalf("%d lines, want 1600", len(lines))
	}
	for _, line := range lines {
		if !strings.HasPrefix(line, `level=INFO msg=applied reason="hotplug eth0" changed=`) {
			t.Fatalf("torn line %q", line)
		}
	}
}

// TestSyslogLogger: on a router the daemon logs to /dev/log with each
// record's own priority (facility daemon), as `<PRI>packet-steering[PID]:
// msg key=value`; debug records only with --debug.
func TestSyslogLogger(t *testing.T) {
	l, path, tag := testenv.ListenSyslog(t)
	for _, debug := range []bool{false, true} {
		sys, err := DialSyslog(path, "packet-steering")
		if err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		lg := NewSyslogLogger(sys, &stderr, debug)
		lg.Debug("refused call", "method", "apply")
		lg.Info("applied", "reason", "start", "changed", 3)
		lg.Notice("taking over again")
		lg.Warn("write failed", "err", errors.New("bad value"))
		lg.Error("apply failed", "reason", "start")
		want := []string{
			"<30>" + tag + "applied reason=start changed=3",
			"<29>" + tag + "taking over again",
			"<28>" + tag + `write failed err="bad value"`,
			"<27>" + tag + "apply failed reason=start",
		}
		if debug {
			want = append([]string{"<31>" + tag + "refused call method=apply"}, want...)
		}
		buf := make([]byte, 4096)
		for _, w := range want {
			_ = l.SetReadDeadline(time.Now().Add(2 * time.Second))
			n, err := l.Read(buf)
			if err != nil {
				t.Fatalf("debug %v: reading %q: %v", debug, w, err)
			}
			if got := string(buf[:n]); got != w {
				t.Errorf("debug %v: got %q, want %q", debug, got, w)
			}
		}
		if stderr.Len() != 0 {
			t.Errorf("stderr got %q while syslog works", stderr.String())
		}
		sys.Close()
	}
}

// TestSyslogLoggerFallsBack: when the socket goes away (logd restarting),
// records go to stderr as plain lines.
func TestSyslogLoggerFallsBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	l, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	sys, err := DialSyslog(path, "packet-steering")
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	l.Close()
	os.Remove(path)
	var stderr bytes.Buffer
	NewSyslogLogger(sys, &stderr, false).Warn("apply failed", "reason", "start")
	if got := stderr.String(); got != "apply failed reason=start\n" {
		t.Errorf("stderr %q", got)
	}
	if _, err := DialSyslog(path, "x"); err == nil {
		t.Error("DialSyslog of a missing socket succeeded")
	}
}
