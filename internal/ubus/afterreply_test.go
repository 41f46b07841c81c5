package ubus_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/packet-steering/packet-steering/internal/ubus"
	"github.com/packet-steering/packet-steering/internal/ubus/ubustest"
)

// A server that closes its connection as soon as AfterReply runs (a daemon
// whose drain has ended) still gets every reply to the caller: AfterReply
// runs only once the reply is written.
func TestAfterReplyRunsAfterTheReply(t *testing.T) {
	_, sock := ubustest.Start(t)
	cli := dial(t, sock)
	ctx := testCtx(t)
	want := []ubus.Attr{ubus.String("state", "done")}
	tests := []struct {
		method  string
		want    []ubus.Attr
		wantErr error
	}{
		{"ok", want, nil},
		{"fail", nil, ubus.StatusInvalidArgument},
	}
	for _, tc := range tests {
		t.Run(tc.method, func(t *testing.T) {
			for i := 0; i < 30; i++ {
				srv := dial(t, sock)
				ran := make(chan struct{})
				handler := func(_ context.Context, req *ubus.Request) ([]ubus.Attr, error) {
					req.AfterReply = func() {
						srv.Close()
						close(ran)
					}
					if tc.wantErr != nil {
						return nil, tc.wantErr
					}
					return want, nil
				}
				obj := &ubus.Object{Path: "test.after", Methods: []ubus.Method{{Name: tc.method, Handler: handler}}}
				if err := srv.AddObject(ctx, obj); err != nil {
					t.Fatal(err)
				}
				got, err := cli.Call(ctx, "test.after", tc.method, nil)
				if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
					t.Fatalf("call %d: err = %v, want %v", i, err, tc.wantErr)
				}
				if !reflect.DeepEqual(got, tc.want) {
					t.Fatalf("call %d: got %+v, want %+v", i, got, tc.want)
				}
				<-ran
				<-srv.Done()
				// The broker drops the object with the connection; wait for
				// that before the next round registers it again.
				for {
					if _, err := cli.LookupID(ctx, "test.after"); errors.Is(err, ubus.StatusNotFound) {
						break
					} else if ctx.Err() != nil {
						t.Fatal("object not removed")
					}
				}
			}
		})
	}
}
