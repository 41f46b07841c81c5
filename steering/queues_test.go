package steering

import (
	"context"
	"fmt"
	"testing"

	"github.com/packet-steering/packet-steering/internal/testenv"
	"github.com/packet-steering/packet-steering/plan"
	"github.com/packet-steering/packet-steering/platform/fixture/fixturetest"
)

// TestVirtioQueuesRegression: on the 4-queue virtio-net guest, `queues` and
// get_queues (Engine.Queues) show rx-i with its rx thread and tx-i with its
// tx thread, and after an apply in auto each queue's rx thread, tx thread
// and both IRQs sit on CPU i.
func TestVirtioQueuesRegression(t *testing.T) {
	ctx := context.Background()
	e := NewEngine(fixturetest.Root(t, "virtio-4q", nil))
	if _, err := e.SetMode(ctx, SetModeRequest{Mode: plan.ModeAuto}); err != nil {
		t.Fatal(err)
	}
	qs, err := e.Queues(ctx, "eth0")
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) != 1 || len(qs[0].Rx) != 4 || len(qs[0].Tx) != 4 {
		t.Fatalf("eth0 queues %+v", qs)
	}
	for i, rx := range qs[0].Rx {
		want := fmt.Sprintf("napi/eth0-%d", 8193+i)
		if rx.NAPI == nil || rx.NAPI.Thread != want {
			t.Errorf("%s: thread %+v, want %s", rx.Queue, rx.NAPI, want)
			continue
		}
		if rx.NAPI.CPUs != fmt.Sprint(i) || rx.NAPI.WantCPUs != fmt.Sprint(i) {
			t.Errorf("%s: rx thread on %q (want %q), want CPU %d", rx.Queue, rx.NAPI.CPUs, rx.NAPI.WantCPUs, i)
		}
		if rx.IRQ == nil || rx.IRQ.Name != fmt.Sprintf("virtio0-input.%d", i) || rx.IRQ.CPUs != fmt.Sprint(i) {
			t.Errorf("%s: irq %+v", rx.Queue, rx.IRQ)
		}
	}
	for i, tx := range qs[0].Tx {
		if tx.NAPI == nil || tx.NAPI.Thread != "napi/eth0-0" || tx.NAPI.PID != 406-2*i {
			t.Errorf("%s: thread %+v, want napi/eth0-0 PID %d", tx.Queue, tx.NAPI, 406-2*i)
			continue
		}
		if tx.NAPI.CPUs != fmt.Sprint(i) || tx.NAPI.WantCPUs != fmt.Sprint(i) {
			t.Errorf("%s: tx thread on %q (want %q), want CPU %d", tx.Queue, tx.NAPI.CPUs, tx.NAPI.WantCPUs, i)
		}
		if tx.IRQ == nil || tx.IRQ.Name != fmt.Sprintf("virtio0-output.%d", i) || tx.IRQ.CPUs != fmt.Sprint(i) {
			t.Errorf("%s: irq %+v", tx.Queue, tx.IRQ)
		}
	}
	// `status` lists the same pairing: rx threads with their rx queue, then
	// tx threads with their tx queue.
	threads, err := e.Threads(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, th := range threads {
		if th.Device == "eth0" {
			got = append(got, fmt.Sprintf("%s %v %s %d %s/%s", th.Direction, th.Queues, th.Thread, th.PID, th.CPUs, th.WantCPUs))
		}
	}
	want := []string{
		"rx [rx-0] napi/eth0-8193 407 0/0", "rx [rx-1] napi/eth0-8194 405 1/1",
		"rx [rx-2] napi/eth0-8195 403 2/2", "rx [rx-3] napi/eth0-8196 401 3/3",
		"tx [tx-0] napi/eth0-0 406 0/0", "tx [tx-1] napi/eth0-0 404 1/1",
		"tx [tx-2] napi/eth0-0 402 2/2", "tx [tx-3] napi/eth0-0 400 3/3",
	}
	if d := testenv.Diff(want, got); d != "" {
		t.Errorf("status threads (-want +got):\n%s", d)
	}
	// A second apply changes nothing.
	res, err := e.Apply(ctx, ApplyRequest{Reason: "again"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Changed) != 0 || len(res.Failed) != 0 {
		t.Errorf("second apply changed %v failed %v", res.Changed, res.Failed)
	}
}
