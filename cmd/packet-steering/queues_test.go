package main

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/packet-steering/packet-steering/platform"
	"github.com/packet-steering/packet-steering/platform/fixture/fixturetest"
	"github.com/packet-steering/packet-steering/steering"
)

func TestQueuesCommandTable(t *testing.T) {
	root := fixturetest.Root(t, "ipq807x", nil)
	code, out, stderr := runSnapQ("queues", "--root", root)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.HasPrefix(out, "netgear,rax120v1 (qualcommax/ipq807x), 4 CPUs online\n") {
		t.Errorf("machine line: %.80q", out)
	}
	// Each ring: its RPS mask, its NAPI thread and CPUs, its IRQ and CPUs
	// (live values; a wanted value may follow "->").
	for i := 0; i < 4; i++ {
		re := regexp.MustCompile(`(?m)^  rx-` + strconv.Itoa(i) + ` +rps 0 \(none\)( -> [^ ]+ \([^)]*\))? +0 +napi/eth0-` + strconv.Itoa(257+i) +
			` \[` + strconv.Itoa(300+i) + `\] +0-3( -> \S+)? +` + strconv.Itoa(60+i) + ` edma_rxdesc_` + strconv.Itoa(i) + ` +0-3`)
		if !re.MatchString(out) {
			t.Errorf("no row for eth0 rx-%d in:\n%s", i, out)
		}
	}
	if !regexp.MustCompile(`(?m)^eth0  dsa-conduit  driver qca_edma  4 rx, 4 tx$`).MatchString(out) {
		t.Errorf("no eth0 header in:\n%s", out)
	}
	if !regexp.MustCompile(`(?m)^wlan0  wifi  driver ath11k_ahb  1 rx, 1 tx$`).MatchString(out) {
		t.Errorf("no wlan0 header")
	}
}

func TestQueuesCommandJSON(t *testing.T) {
	root := fixturetest.Root(t, "x86-8-threaded", nil)
	code, out, stderr := runSnapQ("queues", "--root", root, "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var reply struct {
		Devices []steering.DeviceQueues `json:"devices"`
	}
	if err := json.Unmarshal([]byte(out), &reply); err != nil {
		t.Fatal(err)
	}
	var eth1 *steering.DeviceQueues
	for i := range reply.Devices {
		if reply.Devices[i].Name == "eth1" {
			eth1 = &reply.Devices[i]
		}
	}
	if eth1 == nil || len(eth1.Rx) != 8 || len(eth1.Tx) != 8 || eth1.Driver != "igc" {
		t.Fatalf("eth1 = %+v", eth1)
	}
	for i, q := range eth1.Rx {
		if q.NAPI == nil || q.NAPI.Thread != "napi/eth1-"+strconv.Itoa(8201+i) || q.NAPI.CPUs != "0-7" {
			t.Errorf("eth1 %s napi %+v", q.Queue, q.NAPI)
		}
		if q.IRQ == nil || q.IRQ.Name != "eth1-TxRx-"+strconv.Itoa(i) || q.IRQ.CPUs != "0-7" {
			t.Errorf("eth1 %s irq %+v", q.Queue, q.IRQ)
		}
		if q.RPSCPUs != "00" {
			t.Errorf("eth1 %s rps %q", q.Queue, q.RPSCPUs)
		}
	}
}

func TestQueuesCommandErrors(t *testing.T) {
	for _, args := range [][]string{{"queues", "--json=maybe"}, {"queues", "--nope"}, {"queues", "x"}} {
		if code, _, _ := runSnapQ(args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
	if code, _, stderr := runSnapQ("queues", "--root", "/nonexistent/pa"); code != 2 || stderr == "" {
		t.Errorf("missing root: exit %d %q", code, stderr)
	}
}

// TestLiveQueuesPairing: the live view (no plan): NAPI threads pair with rx queues in NAPI id order,
// not PID text order (server-48: PIDs 90..137).
func TestLiveQueuesPairing(t *testing.T) {
	s, err := platform.Read(context.Background(), fixturetest.Root(t, "server-48", nil))
	if err != nil {
		t.Fatal(err)
	}
	views := steering.QueueViews(s, nil, "")
	var eth0 *steering.DeviceQueues
	for i := range views {
		if views[i].Name == "eth0" {
			eth0 = &views[i]
		}
	}
	if eth0 == nil || len(eth0.Rx) != 48 {
		t.Fatalf("eth0 %+v", eth0)
	}
	for i, q := range eth0.Rx {
		if q.Queue != "rx-"+strconv.Itoa(i) || q.NAPI == nil || q.NAPI.PID != 90+i || q.IRQ == nil || q.IRQ.IRQ != 201+i {
			t.Errorf("rx-%d: %+v napi %+v irq %+v", i, q, q.NAPI, q.IRQ)
		}
		if q.WantRPSCPUs != "" || q.NAPI.WantCPUs != "" {
			t.Errorf("live view has wanted values: %+v", q)
		}
	}
	if eth0.Tx[33].XPSCPUs != "0002,00000000" {
		t.Errorf("tx-33 xps %q", eth0.Tx[33].XPSCPUs)
	}
	// Single-queue device: its whole-device IRQ serves rx-0.
	s2, _ := platform.Read(context.Background(), fixturetest.Root(t, "bcm53xx", nil))
	for _, d := range steering.QueueViews(s2, nil, "") {
		if d.Name == "eth0" && (d.Rx[0].IRQ == nil || d.Rx[0].IRQ.IRQ != 38) {
			t.Errorf("bcm53xx eth0 rx-0 irq %+v", d.Rx[0].IRQ)
		}
	}
}

func TestPrintQueues(t *testing.T) {
	devs := []steering.DeviceQueues{{
		Name: "eth0", Kind: "ethernet", Driver: "igc",
		Rx: []steering.RxQueueView{
			{Queue: "rx-0", RPSCPUs: "f", WantRPSCPUs: "0", RPSFlowCnt: 0,
				NAPI: &steering.NAPIView{PID: 300, Thread: "napi/eth0-257", CPUs: "0-3", WantCPUs: "0"},
				IRQ:  &steering.IRQView{IRQ: 60, Name: "eth0-TxRx-0", CPUs: "0-3", WantCPUs: "0-3"}},
			{Queue: "rx-1", RPSCPUs: "2", WantRPSCPUs: "00000002", RPSFlowCnt: 256},
			{Queue: "rx-2", RPSCPUs: ""},
		},
		Tx: []steering.TxQueueView{
			{Queue: "tx-0", XPSCPUs: "1"}, {Queue: "tx-1", XPSCPUs: "1"}, {Queue: "tx-2", XPSCPUs: "1"},
			{Queue: "tx-3", XPSCPUs: "8", WantXPSCPUs: "4"},
		},
	}, {Name: "empty", Kind: "virtual"}}
	var b bytes.Buffer
	if err := printQueues(&b, "box, 4 CPUs online", devs); err != nil {
		t.Fatal(err)
	}
	want := `box, 4 CPUs online

eth0  ethernet  driver igc  3 rx, 4 tx
  QUEUE    STEERING                 FLOWS  NAPI THREAD          NAPI CPUS  IRQ             IRQ CPUS
  rx-0     rps f (0-3) -> 0 (none)  0      napi/eth0-257 [300]  0-3 -> 0   60 eth0-TxRx-0  0-3
  rx-1     rps 2 (1)                256    -                    -          -               -
  rx-2     rps -                    0      -                    -          -               -
  tx-0..2  xps 1 (0)
  tx-3     xps 8 (3) -> 4 (2)

empty  virtual  0 rx, 0 tx
`
	if got := b.String(); got != want {
		t.Errorf("printQueues:\n%s\nwant:\n%s", got, want)
	}
}

// TestQueuesCommandVirtio: the 4-queue virtio-net guest. Each rx row shows
// the queue's rx thread napi/eth0-(8193+i) and virtio0-input.i, each tx row
// its tx thread (a napi/eth0-0) and virtio0-output.i; no rx row shows a
// napi/eth0-0 thread.
func TestQueuesCommandVirtio(t *testing.T) {
	root := fixturetest.Root(t, "virtio-4q", nil)
	code, out, stderr := runSnapQ("queues", "--root", root)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	t.Logf("\n%s", out)
	for i := 0; i < 4; i++ {
		rx := regexp.MustCompile(`(?m)^  rx-` + strconv.Itoa(i) + ` +rps 0 \(none\) +0 +napi/eth0-` + strconv.Itoa(8193+i) +
			` \[` + strconv.Itoa(407-2*i) + `\] +0-3 -> ` + strconv.Itoa(i) + ` +` + strconv.Itoa(25+2*i) + ` virtio0-input\.` + strconv.Itoa(i) + ` +0-3 -> ` + strconv.Itoa(i) + `$`)
		if !rx.MatchString(out) {
			t.Errorf("no row for eth0 rx-%d", i)
		}
		tx := regexp.MustCompile(`(?m)^  tx-` + strconv.Itoa(i) + ` +xps \S+ \(` + strconv.Itoa(i) + `\) +- +napi/eth0-0 \[` + strconv.Itoa(406-2*i) +
			`\] +0-3 -> ` + strconv.Itoa(i) + ` +` + strconv.Itoa(26+2*i) + ` virtio0-output\.` + strconv.Itoa(i) + ` +0-3 -> ` + strconv.Itoa(i) + `$`)
		if !tx.MatchString(out) {
			t.Errorf("no row for eth0 tx-%d", i)
		}
	}
	if regexp.MustCompile(`(?m)^  rx-\d+ .*napi/eth0-0 `).MatchString(out) {
		t.Errorf("an rx queue is shown with a tx thread")
	}
}

// TestStatusCommandVirtioThreads: `status` lists each NAPI thread with the
// queues it serves: rx-i with napi/eth0-(8193+i), tx-i with a napi/eth0-0.
func TestStatusCommandVirtioThreads(t *testing.T) {
	root := fixturetest.Root(t, "virtio-4q", nil)
	code, out, stderr := runSnapQ("status", "--root", root)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for i := 0; i < 4; i++ {
		for _, re := range []string{
			`(?m)^  eth0 +rx-` + strconv.Itoa(i) + ` +napi/eth0-` + strconv.Itoa(8193+i) + ` \[` + strconv.Itoa(407-2*i) + `\] +0-3 -> ` + strconv.Itoa(i) + `$`,
			`(?m)^  eth0 +tx-` + strconv.Itoa(i) + ` +napi/eth0-0 \[` + strconv.Itoa(406-2*i) + `\] +0-3 -> ` + strconv.Itoa(i) + `$`,
		} {
			if !regexp.MustCompile(re).MatchString(out) {
				t.Errorf("status lacks %s in:\n%s", re, out)
			}
		}
	}
}

func TestQueueRange(t *testing.T) {
	for _, c := range []struct {
		in   []string
		want string
	}{
		{nil, "-"},
		{[]string{"rx-0"}, "rx-0"},
		{[]string{"tx-0", "tx-1"}, "tx-0,tx-1"},
		{[]string{"tx-0", "tx-1", "tx-2", "tx-3"}, "tx-0..3"},
		{[]string{"tx-2", "tx-3", "tx-4"}, "tx-2..4"},
		{[]string{"tx-0", "tx-2", "tx-3"}, "tx-0,tx-2,tx-3"},
		{[]string{"tx-0", "rx-1", "tx-2"}, "tx-0,rx-1,tx-2"},
	} {
		if got := queueRange(c.in); got != c.want {
			t.Errorf("queueRange(%v) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestQueueRangeOddNames(t *testing.T) {
	for _, in := range [][]string{{"a", "b", "c"}, {"tx", "tx-1", "tx-2"}, {"", "", ""}} {
		if got := queueRange(in); got != strings.Join(in, ",") {
			t.Errorf("queueRange(%q) = %q", in, got)
		}
	}
}
