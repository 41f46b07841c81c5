package ubusobj

import (
	"context"
	"github.com/packet-steering/packet-steering/platform/fixture/fixturetest"
	"testing"
	"time"

	"github.com/packet-steering/packet-steering/internal/ubus"
	"github.com/packet-steering/packet-steering/internal/ubus/ubustest"
	"github.com/packet-steering/packet-steering/steering"
	"golang.org/x/sys/unix"
)

// benchCalls makes sequential calls of method through an in-process broker
// to an Object served by eng, and reports calls per second. The allocations
// counted are the whole process's: caller, broker, object and engine.
func benchCalls(b *testing.B, eng Engine, method string, args []ubus.Attr) {
	_, sock := ubustest.Start(b)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	server, err := ubus.Dial(ctx, sock)
	if err != nil {
		b.Fatal(err)
	}
	defer server.Close()
	o := New(eng, Options{Events: server})
	if err := server.AddObject(ctx, o.UbusObject()); err != nil {
		b.Fatal(err)
	}
	caller, err := ubus.Dial(ctx, sock)
	if err != nil {
		b.Fatal(err)
	}
	defer caller.Close()
	id, err := caller.LookupID(ctx, Path)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU(b)
	start := time.Now()
	for i := 0; i < b.N; i++ {
		if _, err := caller.Invoke(ctx, id, method, args); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "calls/s")
	// CPU time (user+system, all threads) per call: less at the mercy of
	// other load on the machine than the wall-clock figures.
	b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/float64(b.N), "cpu-us/call")
}

// processCPU is the process's user plus system CPU time so far.
func processCPU(b *testing.B) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkStatusDemo is `ubus call packet_steering status` on the demo
// router fixture with the real engine (every call reads the machine).
func BenchmarkStatusDemo(b *testing.B) {
	root := fixturetest.Root(b, "demo", nil)
	eng := steering.NewEngine(root)
	if _, err := eng.Apply(context.Background(), steering.ApplyRequest{Reason: "bench"}); err != nil {
		b.Fatal(err)
	}
	benchCalls(b, eng, "status", nil)
}

// BenchmarkStatusFake isolates the bus and the reply encoding: the same
// call with an engine that reads nothing.
func BenchmarkStatusFake(b *testing.B) {
	benchCalls(b, newFakeEngine(), "status", nil)
}
