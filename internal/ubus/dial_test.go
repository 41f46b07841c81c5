package ubus

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestDialUnixErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// A socket nobody listens on any more.
	stale := filepath.Join(dir, "stale.sock")
	ln, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		path string
		is   error
		text string
	}{
		{"missing", context.Background(), filepath.Join(dir, "missing.sock"), fs.ErrNotExist, "connect " + dir},
		{"not a socket", context.Background(), file, syscall.ECONNREFUSED, "connection refused"},
		{"no listener", context.Background(), stale, syscall.ECONNREFUSED, "connection refused"},
		{"too long", context.Background(), "/" + strings.Repeat("x", 120), nil, "socket path too long"},
		{"cancelled", cancelled, filepath.Join(dir, "missing.sock"), context.Canceled, "canceled"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := DialUnix(tc.ctx, tc.path)
			if err == nil {
				tr.Close()
				t.Fatal("no error")
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %v is not %v", err, tc.is)
			}
			if !strings.Contains(err.Error(), tc.text) {
				t.Errorf("error %q does not contain %q", err, tc.text)
			}
		})
	}
}

// A dialed socket carries bytes both ways, honours read deadlines, and a
// Close unblocks a Read in progress.
func TestDialUnixStream(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	tr, err := DialUnix(context.Background(), sock)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	peer := <-accepted
	if peer == nil {
		t.Fatal("accept failed")
	}
	defer peer.Close()

	if _, err := tr.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(peer, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("peer read %q, %v", buf, err)
	}
	if _, err := peer.Write([]byte("pong")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(tr, buf); err != nil || string(buf) != "pong" {
		t.Fatalf("read %q, %v", buf, err)
	}

	if err := tr.SetReadDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := tr.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("deadline took %v", d)
	}
	if err := tr.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	readErr := make(chan error, 1)
	go func() {
		_, err := tr.Read(buf)
		readErr <- err
	}()
	waitBlockedIn(t, "os.(*File).Read", "TestDialUnixStream")
	tr.Close()
	select {
	case err := <-readErr:
		if err == nil {
			t.Error("read after close: no error")
		}
	case <-time.After(2 * time.Second):
		t.Fatal("close did not unblock a read")
	}

	// The peer sees end of stream.
	if _, err := peer.Read(buf); err != io.EOF {
		t.Errorf("peer read after close: %v, want EOF", err)
	}
}

// waitBlockedIn waits until a goroutine started by the function creator
// is blocked (in the netpoller or a system call) inside fn, both as
// runtime.Stack prints them, so a test that closes something under a
// blocked call knows the call has started, instead of sleeping and hoping
// it has.
func waitBlockedIn(t *testing.T, fn, creator string) {
	t.Helper()
	buf := make([]byte, 1<<20)
	for deadline := time.Now().Add(2 * time.Second); ; {
		n := runtime.Stack(buf, true)
		for _, g := range strings.Split(string(buf[:n]), "\n\n") {
			if strings.Contains(g, fn) && strings.Contains(g, "created by") && strings.Contains(g, creator) &&
				(strings.Contains(g, "[IO wait") || strings.Contains(g, "[syscall")) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no goroutine blocked in %s within 2s", fn)
		}
		runtime.Gosched()
	}
}
