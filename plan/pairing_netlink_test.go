package plan

import (
	"encoding/json"
	"testing"

	"github.com/packet-steering/packet-steering/platform"
)

// TestPairNetlink: the pairing takes the kernel's queue -> NAPI map where
// the snapshot carries one, and the NAPI-id-order rule elsewhere, and says
// which it used per queue.
func TestPairNetlink(t *testing.T) {
	// A copy: presetSnapshot's snapshots are shared by the other tests and
	// this one sets NAPI ids on it.
	raw, err := json.Marshal(presetSnapshot(t, "x86-8-threaded"))
	if err != nil {
		t.Fatal(err)
	}
	s := &platform.Snapshot{}
	if err := json.Unmarshal(raw, s); err != nil {
		t.Fatal(err)
	}
	dev := func(s *platform.Snapshot) *platform.Device {
		for i := range s.Devices {
			if s.Devices[i].Name == "eth0" {
				return &s.Devices[i]
			}
		}
		t.Fatal("no eth0")
		return nil
	}
	d := dev(s)
	n := len(d.RxQueues)
	if n != 8 {
		t.Fatalf("eth0 has %d rx queues", n)
	}
	inferred := PairQueues(s).Device("eth0")
	for i, q := range inferred.Rx {
		if q.Thread == nil || q.ThreadSource != platform.SourceNAPIOrder {
			t.Fatalf("rx-%d inferred: %+v", i, q)
		}
		if q.IRQ == nil || q.IRQSource != platform.SourceIRQName {
			t.Fatalf("rx-%d IRQ inferred: %+v", i, q)
		}
	}
	// The kernel says rx-i is served by the NAPI of inferred rx-(n-1-i),
	// except rx-0, about which it says nothing.
	for i := 1; i < n; i++ {
		d.RxQueues[i].NAPIID = inferred.Rx[n-1-i].Thread.NAPIID
	}
	p := PairQueues(s).Device("eth0")
	// rx-0 takes the one thread netlink gave no queue: inferred rx-7's.
	if p.Rx[0].ThreadSource != platform.SourceNAPIOrder || p.Rx[0].Thread != inferred.Rx[n-1].Thread {
		t.Errorf("rx-0 (no netlink id): %+v, want %s", p.Rx[0], inferred.Rx[n-1].Thread.Name)
	}
	for i := 1; i < n; i++ {
		q := p.Rx[i]
		if q.ThreadSource != platform.SourceNetlink || q.Thread == nil || q.Thread.NAPIID != d.RxQueues[i].NAPIID {
			t.Errorf("rx-%d: %+v, want the thread of NAPI %d from netlink", i, q, d.RxQueues[i].NAPIID)
		}
	}
	// RxThreads follows the queue order netlink gives.
	for i := 0; i < n; i++ {
		if p.RxThreads[i] != p.Rx[i].Thread {
			t.Errorf("RxThreads[%d] = %s, rx-%d's thread is %s", i, p.RxThreads[i].Name, i, p.Rx[i].Thread.Name)
		}
	}
}
