package ubus_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/packet-steering/packet-steering/internal/ubus"
)

// fakeBroker plays the ubusd side of a capture (with its captured ids) to
// Conns dialled by the test, and checks that every message the Conns send
// is, byte for byte, what the stock ubus CLI sent.
func fakeBroker(t *testing.T, name string) (sock string, done <-chan error) {
	t.Helper()
	dir, err := os.MkdirTemp("", "ubusfake")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock = filepath.Join(dir, "s")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	msgs := loadCapture(t, name)
	errc := make(chan error, 1)
	conns := map[int]net.Conn{}
	t.Cleanup(func() {
		l.Close()
		for _, c := range conns {
			c.Close()
		}
	})
	go func() {
		errc <- func() error {
			for i, cm := range msgs {
				c, ok := conns[cm.conn]
				if !ok {
					var err error
					if c, err = l.Accept(); err != nil {
						return err
					}
					conns[cm.conn] = c
				}
				if !cm.toBroker {
					if _, err := c.Write(cm.raw); err != nil {
						return err
					}
					continue
				}
				_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
				m, err := ubus.ReadMessage(c, 0)
				if err != nil {
					return fmt.Errorf("message %d: %w", i, err)
				}
				got, _ := m.MarshalBinary()
				if !bytes.Equal(got, cm.raw) {
					return fmt.Errorf("message %d (%s) differs from the stock CLI's:\n got %x\nwant %x", i, m.String(), got, cm.raw)
				}
			}
			// Nothing more: in particular no reply to a NO_REPLY notification.
			for n, c := range conns {
				_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
				if m, err := ubus.ReadMessage(c, 0); err == nil {
					return fmt.Errorf("conn %d: unexpected %s %+v", n, m.String(), m.Attrs)
				}
			}
			return nil
		}()
	}()
	return sock, errc
}

// TestClientBytesAsStockCLI: the Conn, doing what each captured `ubus`
// command did, sends exactly the stock CLI's bytes and reads the stock
// broker's answers to the same results.
func TestClientBytesAsStockCLI(t *testing.T) {
	echoArgs, _ := ubus.AttrsFromJSON([]byte(`{"mode":"auto","force":true,"n":7}`))
	allArgs, _ := ubus.AttrsFromJSON([]byte(`{"s":"x","b":false,"i32":-5,"i64":5000000000,"d":1.5,"t":{"k":"v"},"a":[1,"two",true]}`))
	tests := []struct {
		name string
		run  func(ctx context.Context, dial func() *ubus.Conn) error
	}{
		{"client_call_echo", func(ctx context.Context, dial func() *ubus.Conn) error {
			got, err := dial().Call(ctx, "capture.echo", "echo", echoArgs)
			if err == nil && fmt.Sprint(ubus.AttrsValue(got)) != "map[force:true mode:auto n:7]" {
				err = fmt.Errorf("reply %v", ubus.AttrsValue(got))
			}
			return err
		}},
		{"client_call_types_reply", func(ctx context.Context, dial func() *ubus.Conn) error {
			got, err := dial().Call(ctx, "capture.echo", "types", nil)
			if err == nil && len(got) != 11 {
				err = fmt.Errorf("reply has %d members", len(got))
			}
			return err
		}},
		{"client_call_json_to_blobmsg", func(ctx context.Context, dial func() *ubus.Conn) error {
			_, err := dial().Call(ctx, "capture.echo", "alltypes", allArgs)
			return err
		}},
		{"client_call_noreply", func(ctx context.Context, dial func() *ubus.Conn) error {
			got, err := dial().Call(ctx, "capture.echo", "noreply", nil)
			if err == nil && got != nil {
				err = fmt.Errorf("reply %v", got)
			}
			return err
		}},
		{"client_call_errors", func(ctx context.Context, dial func() *ubus.Conn) error {
			for _, tc := range []struct {
				path, method string
				want         ubus.Status
			}{
				{"capture.echo", "fail", ubus.StatusInvalidArgument},
				{"capture.echo", "nosuch", ubus.StatusMethodNotFound},
				{"no.such.object", "x", ubus.StatusNotFound},
			} {
				c := dial()
				_, err := c.Call(ctx, tc.path, tc.method, nil)
				if !errors.Is(err, tc.want) {
					return fmt.Errorf("%s %s: %v, want %v", tc.path, tc.method, err, tc.want)
				}
				c.Close()
			}
			return nil
		}},
		{"client_list_all", func(ctx context.Context, dial func() *ubus.Conn) error {
			infos, err := dial().Lookup(ctx, "")
			if err == nil && (len(infos) != 1 || infos[0].Path != "capture.echo" || infos[0].ID != 0xbeef9cb9) {
				err = fmt.Errorf("lookup %+v", infos)
			}
			return err
		}},
		{"client_list_verbose", func(ctx context.Context, dial func() *ubus.Conn) error {
			infos, err := dial().Lookup(ctx, "capture.echo")
			if err != nil {
				return err
			}
			sig := fmt.Sprint(infos[0].Signature)
			want := "[{echo [{mode string} {force bool} {n int32}]} {types []} {alltypes [{s string} {b bool} {i16 int16} " +
				"{i32 int32} {i64 int64} {d double} {t table} {a array} {u unspec}]} {fail []} {noreply []}]"
			if sig != want || infos[0].TypeID != 0x453023ae {
				return fmt.Errorf("signature %s type %08x", sig, infos[0].TypeID)
			}
			return nil
		}},
		{"client_send_event", func(ctx context.Context, dial func() *ubus.Conn) error {
			return dial().Send(ctx, "network.interface", []ubus.Attr{ubus.String("action", "ifup"), ubus.String("interface", "lan")})
		}},
		{"client_listen_event", func(ctx context.Context, dial func() *ubus.Conn) error {
			got := make(chan string, 1)
			_, err := dial().Listen(ctx, "steering.test", func(ev string, data []ubus.Attr) {
				got <- ev + fmt.Sprint(ubus.AttrsValue(data))
			})
			if err != nil {
				return err
			}
			select {
			case s := <-got:
				if s != "steering.testmap[device:eth0 reason:hotplug]" {
					return fmt.Errorf("event %s", s)
				}
			case <-ctx.Done():
				return ctx.Err()
			}
			return nil
		}},
		{"client_subscribe_notify", func(ctx context.Context, dial func() *ubus.Conn) error {
			got := make(chan string, 2)
			_, err := dial().Subscribe(ctx, "capture.echo", func(typ string, data []ubus.Attr) {
				got <- typ + fmt.Sprint(ubus.AttrsValue(data))
			})
			if err != nil {
				return err
			}
			for range 2 {
				select {
				case s := <-got:
					if s != "tickmap[event:tick]" {
						return fmt.Errorf("notification %s", s)
					}
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return nil
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sock, done := fakeBroker(t, tc.name)
			ctx := testCtx(t)
			dialFn := func() *ubus.Conn { return dial(t, sock) }
			if err := tc.run(ctx, dialFn); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(3 * time.Second):
				t.Fatal("the capture was not played to its end")
			}
		})
	}
}

// TestConnAgainstBadBrokers: a broker that never greets makes Dial fail
// when its context ends; one that sends garbage ends the connection and
// fails the pending request instead of leaving it hanging.
func TestConnAgainstBadBrokers(t *testing.T) {
	tests := []struct {
		name  string
		greet []byte // sent on accept
		after []byte // sent after the first request arrives
	}{
		{"silent", nil, nil},
		{"garbage reply", mustHex(t, "000000000000abcd00000004"), mustHex(t, "0002000100000000ff000004")},
		{"hostile length", mustHex(t, "000000000000abcd00000004"), mustHex(t, "0002000100000000007fffff")},
		{"not hello", mustHex(t, "000100000000abcd00000004"), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir, err := os.MkdirTemp("", "ubusbad")
			if err != nil {
				t.Fatal(err)
			}
			defer os.RemoveAll(dir)
			l, err := net.Listen("unix", filepath.Join(dir, "s"))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			go func() {
				c, err := l.Accept()
				if err != nil {
					return
				}
				defer c.Close()
				if tc.greet != nil {
					c.Write(tc.greet)
				}
				if tc.after != nil {
					if _, err := ubus.ReadMessage(c, 0); err == nil {
						c.Write(tc.after)
					}
				}
				_, _ = io.Copy(io.Discard, c) // until the client hangs up
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			start := time.Now()
			conn, err := ubus.Dial(ctx, filepath.Join(dir, "s"))
			if tc.after == nil {
				if err == nil {
					conn.Close()
					t.Fatal("Dial succeeded")
				}
				if time.Since(start) > 2*time.Second {
					t.Fatalf("Dial took %v", time.Since(start))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_, err = conn.Lookup(context.Background(), "")
			if !errors.Is(err, ubus.ErrClosed) {
				t.Fatalf("lookup: %v, want ErrClosed", err)
			}
		})
	}
}
