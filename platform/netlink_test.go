package platform

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/packet-steering/packet-steering/internal/genetlink"
	"github.com/packet-steering/packet-steering/platform/fixture/fixturetest"
)

// readWithNetlink reads root with a fake netlink source.
func readWithNetlink(t *testing.T, root string, src netlinkSource, level readLevel) *Snapshot {
	t.Helper()
	f, err := NewFS(root)
	if err != nil {
		t.Fatal(err)
	}
	f.netlink = src
	s, err := f.readWith(context.Background(), nil, level, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestApplyNetlink: on the x86-8-threaded fixture (igc eth0, 8 queues,
// threads napi/eth0-8193.. with PIDs 700.., IRQs eth0-TxRx-N), a kernel
// that says the queues are served in the reverse of NAPI id order, with
// each NAPI's IRQ. Netlink must win for every queue, thread and IRQ, and
// each place the inference said otherwise must be listed.
func TestApplyNetlink(t *testing.T) {
	root := fixturetest.Root(t, "x86-8-threaded", nil)
	plain := readRoot(t, root)
	if plain.Netlink != nil {
		t.Fatalf("a fixture root asked netlink: %+v", plain.Netlink)
	}
	eth0 := devByName(plain, "eth0")
	if eth0 == nil || eth0.Ifindex <= 0 {
		t.Fatalf("eth0: %+v", eth0)
	}
	irqOf := map[int]int{} // rx queue -> IRQ number, from the names
	for _, q := range plain.IRQs {
		if q.Device == "eth0" && q.Queue >= 0 {
			irqOf[q.Queue] = q.Number
		}
	}
	const n = 8
	ifx := uint32(eth0.Ifindex)
	fake := &netlinkData{status: "ok", ops: []string{"queue-get", "napi-get"}}
	for q := 0; q < n; q++ {
		id := uint32(8193 + n - 1 - q) // reversed
		fake.queues = append(fake.queues,
			genetlink.Queue{Ifindex: ifx, Type: genetlink.QueueRX, ID: uint32(q), NAPIID: id},
			genetlink.Queue{Ifindex: ifx, Type: genetlink.QueueTX, ID: uint32(q), NAPIID: id})
		fake.napis = append(fake.napis, genetlink.NAPI{ID: id, Ifindex: ifx, IRQ: irqOf[n-1-q], PID: 700 + n - 1 - q})
	}
	fake.stats = []genetlink.QStats{{Ifindex: ifx, Type: genetlink.QueueRX, QueueID: 2, RxPackets: 5, RxBytes: 300,
		Reported: 1<<genetlink.QStatRxPackets | 1<<genetlink.QStatRxBytes}}
	s := readWithNetlink(t, root, func(context.Context, bool) *netlinkData { return fake }, readAll)
	if s.Netlink == nil || s.Netlink.Status != "ok" || len(s.Netlink.NAPIs) != n {
		t.Fatalf("netlink = %+v", s.Netlink)
	}
	d := devByName(s, "eth0")
	if !d.HasNetlink() {
		t.Fatal("eth0 has no netlink map")
	}
	for i, q := range d.RxQueues {
		if want := 8193 + n - 1 - i; q.NAPIID != want || d.TxQueues[i].NAPIID != want {
			t.Errorf("%s: NAPI id %d / tx %d, want %d", q.Name, q.NAPIID, d.TxQueues[i].NAPIID, want)
		}
	}
	if st := d.RxQueues[2].Stats; st == nil || *st != (QueueStats{Packets: 5, Bytes: 300, HWDrops: -1}) {
		t.Errorf("rx-2 stats %+v", st)
	}
	if d.RxQueues[1].Stats != nil || d.TxQueues[2].Stats != nil {
		t.Errorf("stats on queues netlink gave none: %+v %+v", d.RxQueues[1].Stats, d.TxQueues[2].Stats)
	}
	for _, q := range s.IRQs {
		if q.Device != "eth0" || q.Queue < 0 {
			continue
		}
		// IRQ of old queue k now serves queue n-1-k as rx and tx.
		var k int
		for kk, num := range irqOf {
			if num == q.Number {
				k = kk
			}
		}
		if q.Queue != n-1-k || q.Direction != DirRxTx || q.QueueSource != SourceNetlink {
			t.Errorf("IRQ %d (%s): queue %d %s %q, want queue %d rxtx netlink", q.Number, q.Name, q.Queue, q.Direction, q.QueueSource, n-1-k)
		}
	}
	dis := strings.Join(s.Netlink.Disagreements, "\n")
	for _, want := range []string{"eth0 rx-0: inferred napi/eth0-8193 (napi-id-order), netlink says NAPI 8200", "IRQ"} {
		if !strings.Contains(dis, want) {
			t.Errorf("disagreements lack %q:\n%s", want, dis)
		}
	}
	// Agreeing netlink: no disagreement.
	agree := &netlinkData{status: "ok"}
	for q := 0; q < n; q++ {
		id := uint32(8193 + q)
		agree.queues = append(agree.queues, genetlink.Queue{Ifindex: ifx, Type: genetlink.QueueRX, ID: uint32(q), NAPIID: id},
			genetlink.Queue{Ifindex: ifx, Type: genetlink.QueueTX, ID: uint32(q), NAPIID: id})
		agree.napis = append(agree.napis, genetlink.NAPI{ID: id, Ifindex: ifx, IRQ: irqOf[q], PID: 700 + q})
	}
	s = readWithNetlink(t, root, func(context.Context, bool) *netlinkData { return agree }, readDecision)
	if len(s.Netlink.Disagreements) != 0 {
		t.Errorf("agreeing netlink gave disagreements: %v", s.Netlink.Disagreements)
	}
	if devByName(s, "eth0").Ifindex != eth0.Ifindex {
		t.Error("a decision read with netlink did not read ifindex")
	}
	// The snapshot round-trips with the map, and an old snapshot without
	// the fields still decodes.
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var back Snapshot
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Netlink == nil || len(back.Netlink.NAPIs) != n || devByName(&back, "eth0").RxQueues[3].NAPIID != 8196 {
		t.Errorf("round trip lost the map: %+v", back.Netlink)
	}
	old, err := json.Marshal(plain)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(old), `"netlink"`) || strings.Contains(string(old), `"queue_source"`) {
		t.Errorf("a snapshot without netlink carries netlink fields")
	}
	for _, q := range devByName(plain, "eth0").RxQueues {
		if q.NAPIID != 0 || q.Stats != nil {
			t.Errorf("%s without netlink: %+v", q.Name, q)
		}
	}
}

// TestApplyNetlinkUnavailable: a kernel without the map leaves the
// inference as it is and says why; a netlink error is a gap.
func TestApplyNetlinkUnavailable(t *testing.T) {
	root := fixturetest.Root(t, "virtio-4q", nil)
	plain := readRoot(t, root)
	for _, tc := range []struct {
		name string
		data *netlinkData
		gap  bool
	}{
		{"no family", &netlinkData{status: "unavailable: no netdev family (Linux before 6.3)"}, false},
		{"error", func() *netlinkData {
			d := &netlinkData{status: "unavailable: boom"}
			d.gaps.add(netlinkPath+" queue-get", genetlink.ErrMalformed)
			return d
		}(), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := readWithNetlink(t, root, func(context.Context, bool) *netlinkData { return tc.data }, readAll)
			if s.Netlink == nil || s.Netlink.Status != tc.data.status {
				t.Fatalf("netlink %+v", s.Netlink)
			}
			gap := false
			for _, g := range s.Gaps {
				gap = gap || strings.HasPrefix(g.Path, netlinkPath)
			}
			if gap != tc.gap {
				t.Errorf("gaps %v, want a netlink gap: %v", s.Gaps, tc.gap)
			}
			for i := range plain.NAPIThreads {
				a, b := plain.NAPIThreads[i], s.NAPIThreads[i]
				if a.Device != b.Device || a.Direction != b.Direction || a.NAPIID != b.NAPIID {
					t.Errorf("thread %d changed: %+v -> %+v", a.PID, a, b)
				}
			}
		})
	}
}
