package ubus_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/packet-steering/packet-steering/internal/ubus"
	"github.com/packet-steering/packet-steering/internal/ubus/ubustest"
)

// recordLogger keeps the messages logged through it.
type recordLogger struct {
	mu   sync.Mutex
	msgs []string
}

func (l *recordLogger) add(msg string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs = append(l.msgs, fmt.Sprint(append([]any{msg}, args...)...))
}

func (l *recordLogger) Debug(msg string, args ...any) { l.add(msg, args...) }
func (l *recordLogger) Info(msg string, args ...any)  { l.add(msg, args...) }
func (l *recordLogger) Warn(msg string, args ...any)  { l.add(msg, args...) }

func (l *recordLogger) all() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.msgs, "\n")
}

// floodInvokes writes n INVOKEs of method on objID to a new connection that
// never reads, and returns that connection (closed at the end of the test).
func floodInvokes(t *testing.T, sock string, objID uint32, method string, n int) {
	t.Helper()
	nc, err := ubus.DialUnix(context.Background(), sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	data, err := ubus.BlobmsgAttr(ubus.AttrData, nil)
	if err != nil {
		t.Fatal(err)
	}
	var buf []byte
	for i := range n {
		m := &ubus.Message{Type: ubus.MsgInvoke, Seq: uint16(i + 1), Peer: objID, Attrs: []ubus.MsgAttr{
			ubus.U32Attr(ubus.AttrObjID, objID), ubus.StringAttr(ubus.AttrMethod, method), data}}
		if buf, err = m.AppendBinary(buf); err != nil {
			t.Fatal(err)
		}
	}
	_ = nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := nc.Write(buf); err != nil {
		t.Fatalf("flood write: %v", err)
	}
}

// TestFloodIsBounded: a client that sends many slow calls and never reads
// its replies gets at most MaxCallWorkers handlers running and
// MaxCallsPerPeer calls admitted; the rest are answered UNKNOWN_ERROR and
// logged, goroutines stay bounded, and another client's call is answered
// within a second while the flood is being served.
func TestFloodIsBounded(t *testing.T) {
	tests := []struct {
		name  string
		calls int
		slow  time.Duration
	}{
		{"slow handlers", 400, 20 * time.Millisecond},
		{"fast handlers", 3000, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, sock := ubustest.Start(t)
			b.DropWhenFull()
			srv := dial(t, sock)
			log := &recordLogger{}
			srv.SetLogger(log)
			ctx := testCtx(t)
			var running, peak, served atomic.Int64
			obj := &ubus.Object{Path: "flooded", Methods: []ubus.Method{
				{Name: "slow", Handler: func(ctx context.Context, _ *ubus.Request) ([]ubus.Attr, error) {
					n := running.Add(1)
					defer running.Add(-1)
					for {
						p := peak.Load()
						if n <= p || peak.CompareAndSwap(p, n) {
							break
						}
					}
					served.Add(1)
					time.Sleep(tc.slow)
					return []ubus.Attr{ubus.String("pad", strings.Repeat("x", 2000))}, nil
				}},
				{Name: "status", Handler: func(context.Context, *ubus.Request) ([]ubus.Attr, error) {
					return []ubus.Attr{ubus.Bool("ok", true)}, nil
				}},
			}}
			if err := srv.AddObject(ctx, obj); err != nil {
				t.Fatal(err)
			}
			cli := dial(t, sock)
			id, err := cli.LookupID(ctx, "flooded")
			if err != nil {
				t.Fatal(err)
			}
			goBefore := runtime.NumGoroutine()
			floodInvokes(t, sock, id, "slow", tc.calls)

			// Goroutines sampled while the flood is served; another
			// client's call answered meanwhile.
			var goPeak atomic.Int64
			stop := make(chan struct{})
			sampled := make(chan struct{})
			go func() {
				defer close(sampled)
				for {
					if n := int64(runtime.NumGoroutine()); n > goPeak.Load() {
						goPeak.Store(n)
					}
					select {
					case <-stop:
						return
					case <-time.After(time.Millisecond):
					}
				}
			}()
			for i := range 5 {
				cctx, cancel := context.WithTimeout(ctx, time.Second)
				t0 := time.Now()
				_, err := cli.Invoke(cctx, id, "status", nil)
				cancel()
				if err != nil {
					t.Fatalf("status %d during the flood: %v after %v", i, err, time.Since(t0))
				}
				time.Sleep(20 * time.Millisecond)
			}
			// Wait for the flood to be through: nothing running, all
			// refusals summed up in the log.
			deadline := time.Now().Add(10 * time.Second)
			for !strings.Contains(log.all(), "refused calls") && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			close(stop)
			<-sampled

			if p := peak.Load(); p > ubus.MaxCallWorkers {
				t.Errorf("%d handlers ran at once, limit %d", p, ubus.MaxCallWorkers)
			}
			if s := served.Load(); s >= int64(tc.calls) {
				t.Errorf("all %d flood calls were served; none refused", s)
			}
			// The reader, the workers, the sampler and the test's own
			// goroutines: a fixed number, not one per call.
			if extra := goPeak.Load() - int64(goBefore); extra > ubus.MaxCallWorkers+8 {
				t.Errorf("%d goroutines above the %d before the flood", extra, goBefore)
			}
			logged := log.all()
			if !strings.Contains(logged, "refusing calls: too many in flight") || !strings.Contains(logged, "refused calls") {
				t.Errorf("refusals not logged:\n%s", logged)
			}
			// A burst ends whenever nothing is in flight: fast handlers
			// under an emulator drain the queue often (24 bursts of 3,000
			// calls were seen under qemu-user), so the bound is relative.
			if n := strings.Count(logged, "refusing calls"); n > tc.calls/20 {
				t.Errorf("refusals logged %d times for %d calls: one line per burst, not per call", n, tc.calls)
			}
		})
	}
}

// TestRefusedCallStatus: a caller beyond MaxCallsPerPeer gets
// UNKNOWN_ERROR at once, not silence; once the calls in flight are done it
// is served again.
func TestRefusedCallStatus(t *testing.T) {
	_, sock := ubustest.Start(t)
	srv := dial(t, sock)
	ctx := testCtx(t)
	release := make(chan struct{})
	var started atomic.Int64
	obj := &ubus.Object{Path: "held", Methods: []ubus.Method{{Name: "hold",
		Handler: func(ctx context.Context, _ *ubus.Request) ([]ubus.Attr, error) {
			started.Add(1)
			select {
			case <-release:
				return nil, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}}}}
	if err := srv.AddObject(ctx, obj); err != nil {
		t.Fatal(err)
	}
	cli := dial(t, sock)
	errc := make(chan error, ubus.MaxCallsPerPeer)
	for range ubus.MaxCallsPerPeer {
		go func() {
			_, err := cli.Call(ctx, "held", "hold", nil)
			errc <- err
		}()
	}
	for deadline := time.Now().Add(5 * time.Second); started.Load() < ubus.MaxCallWorkers; {
		if time.Now().After(deadline) {
			t.Fatalf("%d handlers started, want %d", started.Load(), ubus.MaxCallWorkers)
		}
		time.Sleep(time.Millisecond)
	}
	// The queue fills as the calls arrive; one more is refused.
	var err error
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err = cli.Call(cctx, "held", "hold", nil)
		cancel()
		if errors.Is(err, ubus.StatusUnknownError) {
			break
		}
	}
	if !errors.Is(err, ubus.StatusUnknownError) {
		t.Fatalf("call beyond the limit: err = %v, want UNKNOWN_ERROR", err)
	}
	close(release)
	// Under an emulator a probe can reach the queue before the last of
	// the first calls does; that call is then the one refused. Each call
	// is answered either way: served, or refused with UNKNOWN_ERROR.
	served := 0
	for range ubus.MaxCallsPerPeer {
		switch err := <-errc; {
		case err == nil:
			served++
		case errors.Is(err, ubus.StatusUnknownError):
		default:
			t.Fatalf("held call: %v", err)
		}
	}
	if served < ubus.MaxCallWorkers {
		t.Fatalf("%d of the first %d calls served, want at least %d", served, ubus.MaxCallsPerPeer, ubus.MaxCallWorkers)
	}
	if _, err := cli.Call(ctx, "held", "hold", nil); err != nil {
		t.Fatalf("call after the burst: %v", err)
	}
}
