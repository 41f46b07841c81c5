package ubus_test

import (
	"context"
	"testing"

	"github.com/packet-steering/packet-steering/internal/ubus"
	"github.com/packet-steering/packet-steering/internal/ubus/ubustest"
)

// statusObject replies like a small `status` method: a table of a dozen
// values.
func statusObject() *ubus.Object {
	reply := []ubus.Attr{
		ubus.String("mode", "auto"),
		ubus.Table("configured", ubus.String("mode", "auto"), ubus.Int32("flows", 0), ubus.String("source", "uci")),
		ubus.String("policy", "qualcommax-ipq807x"),
		ubus.Table("platform", ubus.String("board", "demo"), ubus.Int32("cpus", 4)),
		ubus.Bool("in_sync", true),
		ubus.Array("cpus", ubus.Table("", ubus.Int32("cpu", 0), ubus.Int64("processed", 123456)),
			ubus.Table("", ubus.Int32("cpu", 1), ubus.Int64("processed", 654321))),
	}
	return &ubus.Object{Path: "bench.status", Methods: []ubus.Method{{Name: "status",
		Handler: func(context.Context, *ubus.Request) ([]ubus.Attr, error) { return reply, nil }}}}
}

func benchSetup(b *testing.B) (*ubus.Conn, uint32) {
	_, sock := ubustest.Start(b)
	srv, cli := dial(b, sock), dial(b, sock)
	ctx := context.Background()
	if err := srv.AddObject(ctx, statusObject()); err != nil {
		b.Fatal(err)
	}
	id, err := cli.LookupID(ctx, "bench.status")
	if err != nil {
		b.Fatal(err)
	}
	return cli, id
}

// BenchmarkInvoke: sequential invokes of `status` by object id through the
// broker (client -> broker -> server -> broker -> client).
func BenchmarkInvoke(b *testing.B) {
	cli, id := benchSetup(b)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := cli.Invoke(ctx, id, "status", nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
}

// BenchmarkCall: sequential Calls by path (a lookup and an invoke each), as
// `ubus call` does.
func BenchmarkCall(b *testing.B) {
	cli, _ := benchSetup(b)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := cli.Call(ctx, "bench.status", "status", nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
}
