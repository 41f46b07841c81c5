package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/packet-steering/packet-steering/steering"
)

// TestPrintQueuesSources: a device's table ends with how its queues are
// known to be paired.
func TestPrintQueuesSources(t *testing.T) {
	devs := []steering.DeviceQueues{{Name: "eth0", Kind: "ethernet",
		Rx: []steering.RxQueueView{{Queue: "rx-0", RPSCPUs: "0",
			NAPI: &steering.NAPIView{PID: 300, Thread: "napi/eth0-257", CPUs: "0", Source: "netlink"},
			IRQ:  &steering.IRQView{IRQ: 60, Name: "eth0-rx-0", CPUs: "0", Source: "irq-name"}}},
		Tx: []steering.TxQueueView{{Queue: "tx-0", XPSCPUs: "1",
			NAPI: &steering.NAPIView{PID: 301, Thread: "napi/eth0-0", CPUs: "0", Source: "tx-thread-order"}}},
	}}
	var b bytes.Buffer
	if err := printQueues(&b, "", devs); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "\n  paired by: irq-name, netlink, tx-thread-order\n") {
		t.Errorf("no sources line:\n%s", b.String())
	}
}
