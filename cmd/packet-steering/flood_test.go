package main

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/packet-steering/packet-steering/internal/testenv"
	"github.com/packet-steering/packet-steering/internal/ubus"
	"github.com/packet-steering/packet-steering/internal/ubus/ubustest"
	"github.com/packet-steering/packet-steering/platform/fixture/fixturetest"
)

// The daemon with the real engine on the demo router, flooded with
// get_queues by a client that never reads its replies (through a broker
// that, like ubusd, drops what it cannot queue for that client): status
// from another client answers within a second, goroutines stay bounded,
// the refusals are logged. scripts/flood measures the same on the router
// binary, with its RSS.
func TestDaemonUnderInvokeFlood(t *testing.T) {
	root := fixturetest.Root(t, "demo", nil)
	b, sock := ubustest.Start(t)
	b.DropWhenFull()
	d := startServing(t, sock, root)
	ctx := context.Background()
	cli, err := ubus.Dial(ctx, sock)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	id, err := cli.LookupID(ctx, "packet_steering")
	if err != nil {
		t.Fatal(err)
	}
	goBefore := runtime.NumGoroutine()

	flood, err := ubus.DialUnix(ctx, sock)
	if err != nil {
		t.Fatal(err)
	}
	defer flood.Close()
	data, err := ubus.BlobmsgAttr(ubus.AttrData, nil)
	if err != nil {
		t.Fatal(err)
	}
	var buf []byte
	const calls = 5000
	for i := range calls {
		m := &ubus.Message{Type: ubus.MsgInvoke, Seq: uint16(i + 1), Peer: id, Attrs: []ubus.MsgAttr{
			ubus.U32Attr(ubus.AttrObjID, id), ubus.StringAttr(ubus.AttrMethod, "get_queues"), data}}
		if buf, err = m.AppendBinary(buf); err != nil {
			t.Fatal(err)
		}
	}
	_ = flood.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := flood.Write(buf); err != nil {
		t.Fatal(err)
	}
	// Under an emulator (make test-cross) everything runs many times
	// slower: status must still be answered during the flood, later.
	limit := time.Second
	if testenv.Emulator() != "" {
		limit = 15 * time.Second
	}
	goPeak := 0
	for i := range 10 {
		goPeak = max(goPeak, runtime.NumGoroutine())
		cctx, cancel := context.WithTimeout(ctx, limit)
		t0 := time.Now()
		_, err := cli.Invoke(cctx, id, "status", nil)
		cancel()
		if err != nil {
			t.Fatalf("status %d during the flood: %v after %v", i, err, time.Since(t0))
		}
		time.Sleep(20 * time.Millisecond)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(d.log.String(), "refused calls: too many in flight") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(d.log.String(), "refused calls: too many in flight") {
		t.Errorf("refusals not logged:\n%s", d.log.String())
	}
	if extra := goPeak - goBefore; extra > ubus.MaxCallWorkers+10 {
		t.Errorf("%d goroutines above the %d before the flood", extra, goBefore)
	}
}
