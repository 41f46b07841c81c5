package platform

import (
	"fmt"
	"strings"
	"testing"
)

// TestTieIRQDirections: per-queue IRQ names say rx, tx or both, and a tx
// IRQ ties only to a tx queue the device has.
func TestTieIRQDirections(t *testing.T) {
	devs := []Device{
		{Name: "eth0", Kind: KindEthernet, Driver: "virtio_net", BusDevice: "sys/devices/pci0000:00/0000:00:03.0/virtio0",
			RxQueues: make([]RxQueue, 4), TxQueues: make([]TxQueue, 4)},
		{Name: "eth1", Kind: KindEthernet, Driver: "igc", BusDevice: "sys/devices/pci0000:00/0000:02:00.0",
			RxQueues: make([]RxQueue, 2), TxQueues: make([]TxQueue, 1)},
		{Name: "eth2", Kind: KindDSAConduit, Driver: "qca_edma", BusDevice: "sys/devices/platform/soc/3ab00000.ethernet",
			RxQueues: make([]RxQueue, 4), TxQueues: make([]TxQueue, 2)},
	}
	cases := map[string]string{
		"virtio0-input.0":  "eth0 0 rx",
		"virtio0-output.3": "eth0 3 tx",
		"virtio0-output.4": "",
		"virtio0-config":   "",
		"virtio0":          "eth0 -1 ",
		"eth1-TxRx-1":      "eth1 1 rxtx",
		"eth1-rx-1":        "eth1 1 rx",
		"eth1-tx-0":        "eth1 0 tx",
		"eth1-tx-1":        "", // eth1 has one tx queue
		"edma_rxdesc_3":    "eth2 3 rx",
		"edma_txcmpl_1":    "eth2 1 tx",
		"edma_txcmpl_2":    "",
	}
	var irqs []IRQ
	for name := range cases {
		irqs = append(irqs, IRQ{Name: name, Device: "stale", Queue: 7, Direction: DirTX})
	}
	tieIRQs(irqs, devs)
	for _, q := range irqs {
		got := ""
		if q.Device != "" {
			got = fmt.Sprintf("%s %d %s", q.Device, q.Queue, q.Direction)
		} else if q.Queue != -1 || q.Direction != "" {
			got = "queue without device"
		}
		if got != cases[q.Name] {
			t.Errorf("tie %q = %q, want %q", q.Name, got, cases[q.Name])
		}
	}
}

// TestClassifyThreads: the rules that tell rx from tx-completion threads,
// one row per driver shape. Threads are "PID:name", the want lists the
// PIDs of the tx threads.
func TestClassifyThreads(t *testing.T) {
	type row struct {
		name    string
		dev     Device
		irqs    []string // IRQ names, tied as tieIRQs ties them
		threads []string
		wantTX  []int
	}
	eth := func(drv string, rx, tx int) Device {
		return Device{Name: "eth0", Kind: KindEthernet, Driver: drv, BusDevice: "sys/devices/platform/x/virtio0",
			RxQueues: make([]RxQueue, rx), TxQueues: make([]TxQueue, tx)}
	}
	rows := []row{
		{name: "virtio_net: tx NAPIs have no id (the real 4-queue guest)", dev: eth("virtio_net", 4, 4),
			threads: []string{"400:napi/eth0-0", "401:napi/eth0-8196", "402:napi/eth0-0", "403:napi/eth0-8195",
				"404:napi/eth0-0", "405:napi/eth0-8194", "406:napi/eth0-0", "407:napi/eth0-8193"},
			wantTX: []int{400, 402, 404, 406}},
		{name: "mtk_soc_eth: tx NAPI added first, own id", dev: Device{Name: "eth0", Kind: KindDSAConduit, Driver: "mtk_soc_eth",
			RxQueues: make([]RxQueue, 1), TxQueues: make([]TxQueue, 16)},
			threads: []string{"250:napi/mtk_eth-257", "251:napi/mtk_eth-258"}, wantTX: []int{250}},
		{name: "qca-nss-dp EDMA: lowest id is tx (stock smp_affinity)", dev: eth("nss-dp", 4, 4),
			threads: []string{"300:napi/eth0-12", "301:napi/eth0-11"}, wantTX: []int{301}},
		{name: "EDMA with one rx thread per ring and no surplus", dev: eth("qca_edma", 4, 4),
			threads: []string{"300:napi/eth0-257", "301:napi/eth0-258", "302:napi/eth0-259", "303:napi/eth0-260"}},
		{name: "EDMA with more threads than rx rings", dev: eth("qca_edma", 2, 2),
			threads: []string{"300:napi/eth0-257", "301:napi/eth0-258", "302:napi/eth0-259"}, wantTX: []int{300}},
		{name: "igc with separate rx and tx vectors", dev: eth("igc", 2, 1),
			irqs:    []string{"eth0-rx-0", "eth0-rx-1", "eth0-tx-0"},
			threads: []string{"700:napi/eth0-8193", "701:napi/eth0-8194", "702:napi/eth0-8195"}, wantTX: []int{702}},
		{name: "igc TxRx vectors: every thread rx", dev: eth("igc", 2, 2),
			irqs:    []string{"eth0-TxRx-0", "eth0-TxRx-1"},
			threads: []string{"700:napi/eth0-8193", "701:napi/eth0-8194"}},
		{name: "mvpp2: one NAPI per vector, both directions", dev: eth("mvpp2", 4, 8), irqs: []string{"eth0", "eth0"},
			threads: []string{"800:napi/eth0-9000", "801:napi/eth0-9001", "802:napi/eth0-9002", "803:napi/eth0-9003"}},
		{name: "single rx thread", dev: eth("bgmac_bcma", 1, 1), threads: []string{"90:napi/eth0-5"}},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			devs := []Device{r.dev}
			var threads []NAPIThread
			for _, s := range r.threads {
				pid, name, _ := strings.Cut(s, ":")
				owner, id, _ := parseNAPIName(name)
				n, _ := atoiBytes([]byte(pid))
				threads = append(threads, NAPIThread{PID: n, Name: name, Owner: owner, NAPIID: id})
			}
			var irqs []IRQ
			for i, n := range r.irqs {
				irqs = append(irqs, IRQ{Number: 100 + i, Name: n})
			}
			tieThreads(threads, devs)
			tieIRQs(irqs, devs)
			classifyThreads(threads, devs, irqs)
			var got []int
			for _, th := range threads {
				if th.Device != "eth0" {
					t.Errorf("thread %s tied to %q", th.Name, th.Device)
				}
				if th.Direction == DirTX {
					got = append(got, th.PID)
				} else if th.Direction != DirRX {
					t.Errorf("thread %s direction %q", th.Name, th.Direction)
				}
				if th.IsTX() != (th.Direction == DirTX) {
					t.Errorf("thread %s IsTX %v with direction %q", th.Name, th.IsTX(), th.Direction)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(r.wantTX) && !(len(got) == 0 && len(r.wantTX) == 0) {
				t.Errorf("tx threads %v, want %v", got, r.wantTX)
			}
		})
	}
}

// TestIsTXOldSnapshot: a snapshot file from before threads carried a
// direction marks tx threads by NAPI id 0.
func TestIsTXOldSnapshot(t *testing.T) {
	for _, c := range []struct {
		t    NAPIThread
		want bool
	}{
		{NAPIThread{NAPIID: 0}, true},
		{NAPIThread{NAPIID: 8193}, false},
		{NAPIThread{NAPIID: -1}, false},
		{NAPIThread{NAPIID: 0, Direction: DirRX}, false},
		{NAPIThread{NAPIID: 258, Direction: DirTX}, true},
	} {
		if got := c.t.IsTX(); got != c.want {
			t.Errorf("%+v IsTX = %v, want %v", c.t, got, c.want)
		}
	}
}
