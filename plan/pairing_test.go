package plan

import (
	"fmt"
	"testing"
)

// TestPairQueuesPresets: the one pairing, on every preset with threads.
// Each row names, per queue, the thread (PID) and IRQ (number) serving it
// ("-" for none).
func TestPairQueuesPresets(t *testing.T) {
	type want struct{ rx, tx []string }
	rows := []struct {
		preset, dev string
		want        want
	}{
		// The real 4-queue virtio-net guest: rx-i is served by
		// napi/eth0-(8193+i) (PIDs 407, 405, 403, 401) and virtio0-input.i;
		// tx-i by the napi/eth0-0 created right before its rx thread (PIDs
		// 406, 404, 402, 400) and virtio0-output.i. Never rx-i with a
		// napi/eth0-0 thread.
		{"virtio-4q", "eth0", want{
			rx: []string{"407/25", "405/27", "403/29", "401/31"},
			tx: []string{"406/26", "404/28", "402/30", "400/32"}}},
		{"virtio-4q", "eth1", want{rx: []string{"409/35"}, tx: []string{"408/36"}}},
		// ipqess: the tx thread of a queue is created just before its rx
		// thread, in queue order.
		{"ipq40xx", "eth0", want{
			rx: []string{"281/40", "283/41", "285/42", "287/43"},
			tx: []string{"280/-", "282/-", "284/-", "286/-"}}},
		// qca_edma (the ipq807x report, docs/platforms.md): one rx thread per ring; edma_txcmpl_0 is tx-0's.
		{"ipq807x", "eth0", want{
			rx: []string{"300/60", "301/61", "302/62", "303/63"},
			tx: []string{"-/64", "-/-", "-/-", "-/-"}}},
		// mtk_soc_eth: the lower-id thread completes every tx queue.
		{"mt7621", "eth0", want{rx: []string{"251/21"}, tx: repeat("250/-", 16)}},
		// igc TxRx vectors serve rx and tx queue i alike.
		{"x86-8-threaded", "eth1", want{
			rx: []string{"720/134", "721/135", "722/136", "723/137", "724/138", "725/139", "726/140", "727/141"},
			tx: []string{"-/134", "-/135", "-/136", "-/137", "-/138", "-/139", "-/140", "-/141"}}},
	}
	for _, r := range rows {
		t.Run(r.preset+"/"+r.dev, func(t *testing.T) {
			s := presetSnapshot(t, r.preset)
			dp := PairQueues(s).Device(r.dev)
			sameLines(t, "rx", pairLines(dp.Rx), r.want.rx)
			sameLines(t, "tx", pairLines(dp.Tx), r.want.tx)
		})
	}
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func pairLines(ps []QueuePair) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		th, irq := "-", "-"
		if p.Thread != nil {
			th = fmt.Sprint(p.Thread.PID)
		}
		if p.IRQ != nil {
			irq = fmt.Sprint(p.IRQ.Number)
		}
		out[i] = th + "/" + irq
	}
	return out
}

// TestPairQueuesForwardAndReversed: tx threads without NAPI ids follow the
// order in which the rx threads were created, whichever it was.
func TestPairQueuesForwardAndReversed(t *testing.T) {
	for _, c := range []struct {
		name    string
		threads []string // "PID name" in any order
		want    []string // tx-i's thread PID
	}{
		{"created in queue order, rx then tx", []string{"10 napi/eth0-8193", "11 napi/eth0-0", "12 napi/eth0-8194", "13 napi/eth0-0"}, []string{"11", "13"}},
		{"created last queue first", []string{"10 napi/eth0-0", "11 napi/eth0-8194", "12 napi/eth0-0", "13 napi/eth0-8193"}, []string{"12", "10"}},
		{"one rx thread", []string{"10 napi/eth0-0", "11 napi/eth0-8193", "12 napi/eth0-0"}, []string{"10", "12"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := newMachine(2).eth("eth0", "sys/devices/pci0000:00/0000:00:03.0/virtio0", "virtio_net", 2, 2)
			for _, th := range c.threads {
				var pid int
				var name string
				fmt.Sscan(th, &pid, &name)
				m.thread(pid, name)
			}
			dp := PairQueues(m.snap()).Device("eth0")
			var got []string
			for _, p := range dp.Tx {
				if p.Thread == nil {
					got = append(got, "-")
					continue
				}
				got = append(got, fmt.Sprint(p.Thread.PID))
			}
			sameLines(t, "tx threads", got, c.want)
			for _, p := range dp.Rx {
				if p.Thread != nil && p.Thread.NAPIID == 0 {
					t.Errorf("rx queue paired with tx thread %d", p.Thread.PID)
				}
			}
		})
	}
}
