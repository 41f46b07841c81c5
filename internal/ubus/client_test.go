package ubus_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/packet-steering/packet-steering/internal/ubus"
	"github.com/packet-steering/packet-steering/internal/ubus/ubustest"
)

func socketPath(t testing.TB) string {
	dir, err := os.MkdirTemp("", "ubusclient")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "ubus.sock")
}

// waitFor polls cond until it holds or d passes.
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return cond()
}

// dialFailures is a ubus.Logger that signals each failed connect attempt
// (the Client logs them at debug level).
type dialFailures struct{ c chan<- struct{} }

func (d dialFailures) Debug(msg string, _ ...any) {
	if msg == "ubus connect" {
		select {
		case d.c <- struct{}{}:
		default:
		}
	}
}
func (dialFailures) Info(string, ...any) {}
func (dialFailures) Warn(string, ...any) {}

// TestClientReconnect: the broker stops and restarts on the same path; the
// Client registers its object again within 2 s, and meanwhile its callers
// get errors at once instead of hanging.
func TestClientReconnect(t *testing.T) {
	sock := socketPath(t)
	b, err := ubustest.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	var connects atomic.Int32
	failed := make(chan struct{}, 64)
	cl := ubus.NewClient(sock, ubus.WithOnConnect(func(context.Context, *ubus.Conn) { connects.Add(1) }),
		ubus.WithLogger(dialFailures{failed}))
	obj := demoObject("steer.test")
	cl.Register(obj)
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan error, 1)
	go func() { runDone <- cl.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-runDone
	})

	callOK := func(b *ubustest.Broker) bool {
		c, err := ubus.Dial(context.Background(), sock)
		if err != nil {
			return false
		}
		defer c.Close()
		cctx, ccancel := context.WithTimeout(context.Background(), time.Second)
		defer ccancel()
		_, err = c.Call(cctx, "steer.test", "empty", nil)
		return err == nil
	}
	if !waitFor(2*time.Second, func() bool { return callOK(b) }) {
		t.Fatal("object not registered after start")
	}
	if _, err := cl.Call(context.Background(), "steer.test", "empty", nil); err != nil {
		t.Fatalf("client call: %v", err)
	}

	b.Close()
	if !waitFor(2*time.Second, func() bool { _, ok := cl.Conn(); return !ok }) {
		t.Fatal("client still reports a connection after the broker stopped")
	}
	start := time.Now()
	_, err = cl.Call(context.Background(), "steer.test", "empty", nil)
	if !errors.Is(err, ubus.ErrNotConnected) || time.Since(start) > 100*time.Millisecond {
		t.Fatalf("call while down: %v after %v", err, time.Since(start))
	}
	if err := cl.Send(context.Background(), "x", nil); !errors.Is(err, ubus.ErrNotConnected) {
		t.Fatalf("send while down: %v", err)
	}
	// Two reconnect attempts fail while the broker is away.
	for i := 0; i < 2; i++ {
		waitSignal(t, failed, 3*time.Second, "no failed reconnect attempt while the broker is away")
	}

	restarted := time.Now()
	b2, err := ubustest.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b2.Close() })
	if !waitFor(2*time.Second, func() bool { return callOK(b2) }) {
		t.Fatal("object not back within 2 s of the broker's restart")
	}
	t.Logf("object back %v after the restart", time.Since(restarted).Round(time.Millisecond))
	if n := connects.Load(); n != 2 {
		t.Errorf("%d connections, want 2", n)
	}
	cancel()
	select {
	case err := <-runDone:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		runDone <- nil
	case <-time.After(2 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}

// TestClientCallerDuringOutage: calls in flight when the broker dies return
// an error, not a hang.
func TestClientCallerDuringOutage(t *testing.T) {
	sock := socketPath(t)
	b, err := ubustest.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := dial(t, sock)
	obj, entered := slowObject("slow.obj")
	if err := srv.AddObject(testCtx(t), obj); err != nil {
		t.Fatal(err)
	}
	cl := ubus.NewClient(sock)
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan error, 1)
	go func() { runDone <- cl.Run(ctx) }()
	defer func() { cancel(); <-runDone }()
	if !waitFor(2*time.Second, func() bool { _, ok := cl.Conn(); return ok }) {
		t.Fatal("client did not connect")
	}
	errc := make(chan error, 1)
	go func() {
		_, err := cl.Call(context.Background(), "slow.obj", "slow", nil)
		errc <- err
	}()
	waitSignal(t, entered, 2*time.Second, "the call never reached the server")
	b.Close()
	select {
	case err := <-errc:
		if err == nil {
			t.Fatal("call succeeded though the broker died")
		}
	case <-time.After(2 * time.Second):
		t.Fatal("call hangs after the broker died")
	}
}

func TestClientRegisterWhileConnected(t *testing.T) {
	_, sock := ubustest.Start(t)
	cl := ubus.NewClient(sock, ubus.WithBackoff(10*time.Millisecond, 100*time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan error, 1)
	go func() { runDone <- cl.Run(ctx) }()
	defer func() { cancel(); <-runDone }()
	if !waitFor(2*time.Second, func() bool { _, ok := cl.Conn(); return ok }) {
		t.Fatal("client did not connect")
	}
	obj := demoObject("late.obj")
	cl.Register(obj)
	if obj.ID() == 0 {
		t.Fatal("object registered while connected has no id")
	}
	other := dial(t, sock)
	if _, err := other.Call(testCtx(t), "late.obj", "empty", nil); err != nil {
		t.Fatal(err)
	}
}
