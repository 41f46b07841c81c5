package main

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
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
			newDaemonLogger(&got, false).Warn(tc.msg, tc.args...)
			if got.String() != want.String() {
				t.Errorf("got  %q\nwant %q", got.String(), want.String())
			}
		})
	}
}

func TestLineLoggerLevels(t *testing.T) {
	for _, debug := range []bool{false, true} {
		var out bytes.Buffer
		l := newDaemonLogger(&out, debug)
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
	var out lockedBuffer
	l := newDaemonLogger(&out, false)
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
