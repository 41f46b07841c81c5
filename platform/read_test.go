package platform

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/packet-steering/packet-steering/internal/cpuset"
	"github.com/packet-steering/packet-steering/internal/testenv"
	"github.com/packet-steering/packet-steering/internal/uci"
	"github.com/packet-steering/packet-steering/platform/fixture"
	"github.com/packet-steering/packet-steering/platform/fixture/fixturetest"
	"golang.org/x/sys/unix"
)

func readRoot(t testing.TB, root string) *Snapshot {
	t.Helper()
	s, err := Read(context.Background(), root)
	if err != nil {
		t.Fatalf("Read(%s): %v", root, err)
	}
	return s
}

func devByName(s *Snapshot, name string) *Device {
	for i := range s.Devices {
		if s.Devices[i].Name == name {
			return &s.Devices[i]
		}
	}
	return nil
}

// presetWant is what a preset's snapshot must show.
type presetWant struct {
	cpus     int
	siblings map[int][]int     // cpu -> siblings (only listed CPUs checked)
	kinds    map[string]string // device -> kind
	drivers  map[string]string
	rx, tx   map[string]int    // device -> queue count
	threads  map[string]string // thread name -> device ("" = none)
	irqs     map[string]string // irq name -> "dev/q" ("" = untied); all IRQs with that name
	board    string
	target   string
	steering string
	offload  [2]string // flow_offloading, flow_offloading_hw
	procs    []string
	threaded []string // devices with threaded NAPI
	// txThreads counts the DirTX threads per device (devices not listed:
	// none).
	txThreads map[string]int
}

func presetWants() map[string]presetWant {
	dsa := func(conduit, drv string, users ...string) (map[string]string, map[string]string) {
		k := map[string]string{conduit: KindDSAConduit, "br-lan": KindBridge, "lo": KindVirtual}
		d := map[string]string{conduit: drv}
		for _, u := range users {
			k[u] = KindDSAUser
		}
		return k, d
	}
	bcmKinds, bcmDrv := dsa("eth0", "bgmac_bcma", "lan1", "lan2", "lan3", "lan4", "wan")
	b4908Kinds, b4908Drv := dsa("eth0", "bcm4908_enet", "lan1", "lan2", "lan3", "lan4", "wan")
	ipqKinds, ipqDrv := dsa("eth0", "qca_edma", "lan1", "lan2", "lan3", "lan4", "wan")
	ipqKinds["wlan0"], ipqDrv["wlan0"] = KindWifi, "ath11k_ahb"
	i40Kinds, i40Drv := dsa("eth0", "ipqess-edma", "lan1", "lan2", "wan")
	i40Kinds["wlan0"], i40Kinds["wlan1"] = KindWifi, KindWifi
	mtKinds, mtDrv := dsa("eth0", "mtk_soc_eth", "lan1", "lan2", "wan")
	mtKinds["wlan0"], mtKinds["wlan1"] = KindWifi, KindWifi
	mtDrv["wlan0"], mtDrv["wlan1"], mtDrv["lan1"] = "mt7603e", "mt7615e", "mt7530-mdio"
	bcm := presetWant{
		cpus: 2, siblings: map[int][]int{0: nil, 1: nil},
		kinds: bcmKinds, drivers: bcmDrv,
		rx: map[string]int{"eth0": 1, "lan1": 1, "br-lan": 1}, tx: map[string]int{"eth0": 1},
		threads: map[string]string{},
		irqs:    map[string]string{"eth0": "eth0/-1", "b53-srab": ""},
		board:   "netgear,r7000", target: "bcm53xx/generic", steering: "1",
	}
	bcmSW, bcmHW, b47 := bcm, bcm, bcm
	bcmSW.offload = [2]string{"1", ""}
	bcmHW.offload = [2]string{"1", "1"}
	b47.cpus, b47.siblings, b47.board = 1, map[int][]int{0: nil}, "buffalo,wzr-600dhp2"
	ipqThreads := map[string]string{}
	for i := 0; i < 4; i++ {
		ipqThreads[fmt.Sprintf("napi/eth0-%d", 257+i)] = "eth0"
	}
	x86Threads := map[string]string{}
	x86IRQs := map[string]string{"eth0": "eth0/-1", "eth1": "eth1/-1"}
	for n := 0; n < 2; n++ {
		for q := 0; q < 8; q++ {
			x86Threads[fmt.Sprintf("napi/eth%d-%d", n, 8193+8*n+q)] = fmt.Sprintf("eth%d", n)
			x86IRQs[fmt.Sprintf("eth%d-TxRx-%d", n, q)] = fmt.Sprintf("eth%d/%d", n, q)
		}
	}
	x86Kinds := map[string]string{"eth0": KindEthernet, "eth1": KindEthernet, "br-lan": KindBridge, "lo": KindVirtual}
	x86 := presetWant{
		cpus: 8, siblings: map[int][]int{0: nil, 7: nil}, kinds: x86Kinds,
		drivers: map[string]string{"eth0": "igc", "eth1": "igc"},
		rx:      map[string]int{"eth0": 8, "eth1": 8}, tx: map[string]int{"eth0": 8},
		threads: map[string]string{}, irqs: x86IRQs,
		board: "default-string-default-string", target: "x86/64", procs: []string{"irqbalance"},
	}
	x86T := x86
	x86T.threads, x86T.threaded = x86Threads, []string{"eth0", "eth1"}
	srvThreads := map[string]string{}
	srvIRQs := map[string]string{"ice-0000:3b:00.0:misc": "", "eth1-rx-0": "eth1/0", "eth1-rx-1": "eth1/1", "eth1-tx-0": "eth1/0"}
	for q := 0; q < 48; q++ {
		srvThreads[fmt.Sprintf("napi/eth0-%d", 8193+q)] = "eth0"
		srvIRQs[fmt.Sprintf("ice-eth0-TxRx-%d", q)] = fmt.Sprintf("eth0/%d", q)
	}
	ipq := presetWant{
		cpus: 4, siblings: map[int][]int{0: nil, 3: nil}, kinds: ipqKinds, drivers: ipqDrv,
		rx: map[string]int{"eth0": 4, "wan": 1}, tx: map[string]int{"eth0": 4},
		threads: ipqThreads, threaded: []string{"eth0"},
		irqs:  map[string]string{"edma_rxdesc_0": "eth0/0", "edma_rxdesc_3": "eth0/3", "edma_txcmpl_0": "eth0/0", "ce0": ""},
		board: "netgear,rax120v1", target: "qualcommax/ipq807x", steering: "1",
	}
	boards := boardPresetWants() // boards_test.go
	wants := map[string]presetWant{
		"bcm53xx": bcm, "bcm53xx-sw": bcmSW, "bcm53xx-hw": bcmHW, "bcm47081": b47,
		"bcm4908": {
			cpus: 4, kinds: b4908Kinds, drivers: b4908Drv, rx: map[string]int{"eth0": 1},
			threads: map[string]string{}, irqs: map[string]string{"enet": ""},
			board: "asus,gt-ac5300", target: "bcm4908/generic", steering: "1",
		},
		"ipq807x": ipq,
		"demo":    ipq,
		"ipq40xx": {
			cpus: 4, kinds: i40Kinds, drivers: i40Drv, rx: map[string]int{"eth0": 4}, tx: map[string]int{"eth0": 4},
			threads: map[string]string{"napi/eth0-257": "eth0", "napi/eth0-260": "eth0", "napi/eth0-0": "eth0"}, threaded: []string{"eth0"},
			txThreads: map[string]int{"eth0": 4},
			irqs: map[string]string{"c080000.ethernet:rx0": "eth0/0", "c080000.ethernet:rx3": "eth0/3",
				"c080000.ethernet:tx0": "", "ath10k_ahb": ""},
			board: "glinet,gl-b1300", target: "ipq40xx/generic", steering: "1",
		},
		"mt7621": {
			cpus: 4, siblings: map[int][]int{0: {1}, 1: {0}, 2: {3}, 3: {2}},
			kinds: mtKinds, drivers: mtDrv, rx: map[string]int{"eth0": 1}, tx: map[string]int{"eth0": 16},
			threads: map[string]string{"napi/mtk_eth-257": "eth0", "napi/mtk_eth-258": "eth0",
				"napi/phy0-259": "", "napi/phy0-260": "", "napi/phy0-261": ""},
			threaded: []string{"eth0"}, txThreads: map[string]int{"eth0": 1},
			irqs: map[string]string{"1e100000.ethernet": "eth0/-1", "mt7603e": "wlan0/-1", "mt7615e": "wlan1/-1",
				"mt7530": ""},
			board: "xiaomi,mi-router-ac2100", target: "ramips/mt7621", steering: "1",
		},
		"mochabin": {
			cpus: 4, kinds: map[string]string{"eth0": KindEthernet, "eth1": KindEthernet, "eth2": KindEthernet},
			drivers: map[string]string{"eth0": "mvpp2", "eth2": "mvpp2"},
			rx:      map[string]int{"eth0": 4, "eth1": 4, "eth2": 4}, tx: map[string]int{"eth0": 8},
			threads: map[string]string{}, irqs: map[string]string{"eth0": "eth0/-1", "eth2": "eth2/-1"},
			board: "globalscale,mochabin", target: "mvebu/cortexa72", steering: "1",
		},
		"virtio-4q": {
			cpus: 4, kinds: map[string]string{"eth0": KindEthernet, "eth1": KindEthernet, "br-lan": KindBridge},
			drivers: map[string]string{"eth0": "virtio_net", "eth1": "virtio_net"},
			rx:      map[string]int{"eth0": 4, "eth1": 1}, tx: map[string]int{"eth0": 4, "eth1": 1},
			threads: map[string]string{"napi/eth0-8193": "eth0", "napi/eth0-8196": "eth0", "napi/eth0-0": "eth0",
				"napi/eth1-8197": "eth1", "napi/eth1-0": "eth1"},
			threaded: []string{"eth0", "eth1"}, txThreads: map[string]int{"eth0": 4, "eth1": 1},
			irqs: map[string]string{"virtio0-config": "", "virtio0-control": "", "virtio0-input.0": "eth0/0",
				"virtio0-output.3": "eth0/3", "virtio1-input.0": "eth1/0", "virtio1-output.0": "eth1/0"},
			board: "qemu-standard-pc-i440fx-piix-1996", target: "x86/64",
		},
		"x86-8":          x86,
		"x86-8-threaded": x86T,
		"server-48": {
			cpus: 48, siblings: map[int][]int{0: {24}, 24: {0}, 23: {47}},
			kinds:   map[string]string{"eth0": KindEthernet, "eth1": KindEthernet, "br-lan": KindBridge},
			drivers: map[string]string{"eth0": "ice", "eth1": "igb"},
			rx:      map[string]int{"eth0": 48, "eth1": 2}, tx: map[string]int{"eth0": 48},
			threads: srvThreads, threaded: []string{"eth0"}, irqs: srvIRQs,
			board: "supermicro-super-server", target: "x86/64",
		},
	}
	for name, w := range boards {
		wants[name] = w
	}
	return wants
}

func TestPresetsDetectedStructure(t *testing.T) {
	wants := presetWants()
	names := fixture.PresetNames()
	if len(names) != len(wants) {
		t.Errorf("presets %v, expectations for %d", names, len(wants))
	}
	for _, name := range names {
		want, ok := wants[name]
		if !ok {
			t.Errorf("preset %s has no expectations", name)
			continue
		}
		t.Run(name, func(t *testing.T) {
			s := readRoot(t, fixturetest.Root(t, name, nil))
			if len(s.Gaps) != 0 {
				t.Errorf("gaps on a complete fixture: %+v", s.Gaps)
			}
			if len(s.Config.Errors) != 0 {
				t.Errorf("config errors: %+v", s.Config.Errors)
			}
			if len(s.CPUs) != want.cpus {
				t.Errorf("%d CPUs, want %d", len(s.CPUs), want.cpus)
			}
			for _, c := range s.CPUs {
				if !c.Online || c.Core < 0 || c.Package != 0 {
					t.Errorf("cpu %+v: want online with topology", c)
				}
				if sib, ok := want.siblings[c.ID]; ok && !reflect.DeepEqual(c.Siblings, sib) {
					t.Errorf("cpu %d siblings %v, want %v", c.ID, c.Siblings, sib)
				}
			}
			if len(s.Softnet) != want.cpus {
				t.Errorf("%d softnet rows, want %d", len(s.Softnet), want.cpus)
			}
			for i, sn := range s.Softnet {
				if sn.CPU != i || sn.Processed != uint64(120000*(i+1)) {
					t.Errorf("softnet row %d: %+v", i, sn)
				}
			}
			if s.RPSSockFlowEntries != 0 {
				t.Errorf("rps_sock_flow_entries %d", s.RPSSockFlowEntries)
			}
			for dev, kind := range want.kinds {
				d := devByName(s, dev)
				if d == nil {
					t.Errorf("no device %s", dev)
					continue
				}
				if d.Kind != kind {
					t.Errorf("%s kind %q, want %q", dev, d.Kind, kind)
				}
			}
			for dev, drv := range want.drivers {
				if d := devByName(s, dev); d == nil || d.Driver != drv {
					t.Errorf("%s driver %+v, want %q", dev, d, drv)
				}
			}
			for dev, n := range want.rx {
				d := devByName(s, dev)
				if d == nil || len(d.RxQueues) != n {
					t.Errorf("%s: want %d rx queues, got %+v", dev, n, d)
					continue
				}
				for i, q := range d.RxQueues {
					if q.Index != i || q.Name != fmt.Sprintf("rx-%d", i) || q.RPSCPUs != fixture.MaskWidth(want.cpus) {
						t.Errorf("%s rx queue %d = %+v (want index order, zero mask %q)", dev, i, q, fixture.MaskWidth(want.cpus))
					}
				}
			}
			for dev, n := range want.tx {
				if d := devByName(s, dev); d == nil || len(d.TxQueues) != n {
					t.Errorf("%s: want %d tx queues, got %+v", dev, n, d)
				}
			}
			threaded := map[string]bool{}
			for _, d := range want.threaded {
				threaded[d] = true
			}
			for _, d := range s.Devices {
				if d.Threaded != threaded[d.Name] {
					t.Errorf("%s threaded = %v", d.Name, d.Threaded)
				}
				if d.Name == "lo" && (d.Kind != KindVirtual || d.Ifindex != 1) {
					t.Errorf("lo = %+v", d)
				}
			}
			gotThreads := map[string]string{}
			for i, th := range s.NAPIThreads {
				gotThreads[th.Name] = th.Device
				if th.PID == fixture.FakeNAPIPID {
					t.Errorf("user process %d taken for a NAPI thread", th.PID)
				}
				if i > 0 && s.NAPIThreads[i-1].PID >= th.PID {
					t.Errorf("threads not in PID order: %d then %d", s.NAPIThreads[i-1].PID, th.PID)
				}
				if th.CPUs != fmt.Sprintf("0-%d", want.cpus-1) {
					t.Errorf("thread %s cpus %q", th.Name, th.CPUs)
				}
			}
			if len(gotThreads) < len(want.threads) || (len(want.threads) == 0) != (len(gotThreads) == 0) {
				t.Errorf("threads %v, want %v", gotThreads, want.threads)
			}
			for name, dev := range want.threads {
				if got, ok := gotThreads[name]; !ok || got != dev {
					t.Errorf("thread %s device %q (found %v), want %q", name, got, ok, dev)
				}
			}
			gotTX := map[string]int{}
			for _, th := range s.NAPIThreads {
				if th.Direction == DirTX {
					gotTX[th.Device]++
				} else if th.Direction != DirRX {
					t.Errorf("thread %d %s: direction %q", th.PID, th.Name, th.Direction)
				}
			}
			for dev, n := range gotTX {
				if want.txThreads[dev] != n {
					t.Errorf("%s: %d tx threads, want %d", dev, n, want.txThreads[dev])
				}
			}
			for dev, n := range want.txThreads {
				if gotTX[dev] != n {
					t.Errorf("%s: %d tx threads, want %d", dev, gotTX[dev], n)
				}
			}
			gotIRQ := map[string][]string{}
			for _, q := range s.IRQs {
				tie := ""
				if q.Device != "" {
					tie = fmt.Sprintf("%s/%d", q.Device, q.Queue)
				}
				gotIRQ[q.Name] = append(gotIRQ[q.Name], tie)
				if len(q.Counts) != want.cpus || q.SMPAffinity == "" {
					t.Errorf("irq %d: counts %v affinity %q", q.Number, q.Counts, q.SMPAffinity)
				}
			}
			for name, tie := range want.irqs {
				ties, ok := gotIRQ[name]
				if !ok {
					t.Errorf("no irq %s", name)
				}
				for _, got := range ties {
					if got != tie {
						t.Errorf("irq %s tied to %q, want %q", name, got, tie)
					}
				}
			}
			if s.Identity.Board != want.board || s.Identity.Target != want.target || s.Identity.Model == "" {
				t.Errorf("identity %+v, want board %s target %s", s.Identity, want.board, want.target)
			}
			c := s.Config
			if c.PacketSteering != want.steering || c.PacketSteeringSet != (want.steering != "") {
				t.Errorf("packet_steering %q set=%v, want %q", c.PacketSteering, c.PacketSteeringSet, want.steering)
			}
			if c.FlowOffloading != want.offload[0] || c.FlowOffloadingHW != want.offload[1] {
				t.Errorf("offload %q/%q, want %v", c.FlowOffloading, c.FlowOffloadingHW, want.offload)
			}
			if c.Steering != nil {
				t.Errorf("steering config %+v without the file", c.Steering)
			}
			if !reflect.DeepEqual(s.Processes, want.procs) {
				t.Errorf("processes %v, want %v", s.Processes, want.procs)
			}
		})
	}
}

// TestBridgeAndDSALinks checks the stacked-device links on bcm53xx.
func TestBridgeAndDSALinks(t *testing.T) {
	s := readRoot(t, fixturetest.Root(t, "bcm53xx", nil))
	br := devByName(s, "br-lan")
	if !reflect.DeepEqual(br.BridgePorts, []string{"lan1", "lan2", "lan3", "lan4"}) {
		t.Errorf("br-lan ports %v", br.BridgePorts)
	}
	lan1 := devByName(s, "lan1")
	if lan1.Master != "br-lan" || !reflect.DeepEqual(lan1.Lowers, []string{"eth0"}) || !reflect.DeepEqual(lan1.Uppers, []string{"br-lan"}) {
		t.Errorf("lan1 = %+v", lan1)
	}
	if wan := devByName(s, "wan"); wan.Master != "" || len(wan.Uppers) != 0 {
		t.Errorf("wan = %+v", wan)
	}
	eth0 := devByName(s, "eth0")
	if eth0.DSATagging != "brcm" || eth0.BusDevice != "sys/devices/platform/bcma-bus@18000000/18024000.ethernet" {
		t.Errorf("eth0 = %+v", eth0)
	}
	if !reflect.DeepEqual(eth0.Uppers, []string{"lan1", "lan2", "lan3", "lan4", "wan"}) {
		t.Errorf("eth0 uppers %v", eth0.Uppers)
	}
	if eth0.TxQueues[0].XPSCPUs != "" {
		t.Errorf("single tx queue xps %q, want \"\" (kernel gives ENOENT)", eth0.TxQueues[0].XPSCPUs)
	}
	// Ifindex follows list order; lo is 1.
	if devByName(s, "lo").Ifindex != 1 || eth0.Ifindex != 2 {
		t.Errorf("ifindex lo %d eth0 %d", devByName(s, "lo").Ifindex, eth0.Ifindex)
	}
}

// TestServer48Masks checks comma-grouped masks and numeric orders on the
// 48-CPU preset.
func TestServer48Masks(t *testing.T) {
	s := readRoot(t, fixturetest.Root(t, "server-48", nil))
	eth0 := devByName(s, "eth0")
	if eth0.RxQueues[10].Name != "rx-10" || eth0.RxQueues[2].Name != "rx-2" {
		t.Errorf("queues out of numeric order: %s, %s", eth0.RxQueues[2].Name, eth0.RxQueues[10].Name)
	}
	if got := eth0.RxQueues[0].RPSCPUs; got != "0000,00000000" {
		t.Errorf("rps_cpus %q", got)
	}
	if got := eth0.TxQueues[32].XPSCPUs; got != "0001,00000000" {
		t.Errorf("tx-32 xps %q", got)
	}
	cpus, err := cpuset.ParseMask(eth0.TxQueues[40].XPSCPUs)
	if err != nil || !reflect.DeepEqual(cpus.CPUs(), []int{40}) {
		t.Errorf("tx-40 mask cpus %v %v", cpus, err)
	}
	if s.NAPIThreads[0].PID != 90 || s.NAPIThreads[10].PID != 100 || s.NAPIThreads[0].NAPIID != 8193 {
		t.Errorf("threads not in numeric PID order: %+v %+v", s.NAPIThreads[0], s.NAPIThreads[10])
	}
	if s.IRQs[0].SMPAffinity != "ffff,ffffffff" {
		t.Errorf("irq affinity %q", s.IRQs[0].SMPAffinity)
	}
}

// TestJSONRoundTrip: every preset's snapshot marshals and unmarshals to an
// equal value, and re-marshals to the same bytes.
func TestJSONRoundTrip(t *testing.T) {
	names := append(fixture.PresetNames(), "with-steering-config")
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			var root string
			if name == "with-steering-config" {
				spec, _ := fixture.Preset("mt7621")
				spec.Config["packet_steering"] = steeringConfText
				spec.Devices[1].RPS = []string{"e"}
				spec.Devices[1].FlowCnt = []int{512}
				root = fixturetest.Build(t, spec)
			} else {
				root = fixturetest.Root(t, name, nil)
			}
			s := readRoot(t, root)
			b, err := json.Marshal(s)
			if err != nil {
				t.Fatal(err)
			}
			var back Snapshot
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			if d := testenv.Diff(*s, back); d != "" {
				t.Errorf("round trip differs (-read +decoded):\n%s", d)
			}
			b2, _ := json.Marshal(&back)
			if string(b) != string(b2) {
				t.Errorf("re-marshal differs")
			}
		})
	}
}

const steeringConfText = `
config globals 'globals'
	option mode 'custom'
	option flows '256'

config device
	option name 'eth0'
	option rps_cpus '2'
	option xps_cpus '1'
	option napi_cpus '2-3'
	option flows '128'
	list queue_rps 'rx-0=4'
	list queue_rps 'rx-1 = 8'
	list queue_rps 'bogus'

config device
	option name 'wlan0'
	option defer_hard_irqs '2'
	option gro_flush_timeout '20000'
	option napi_threaded '0'
	list queue_defer_hard_irqs 'rx-1=0'
	list queue_gro_flush_timeout 'rx-1 = 200000'
	list queue_napi_threaded 'napi-8193=1'
	list queue_napi_threaded 'rx-2'

config adaptive 'adaptive'
	option interval '1'
	option high_load '70%'
	list bogus 'a'
	list bogus 'b'

config adaptive 'ignored'
	option interval '9'
`

func TestSteeringConfig(t *testing.T) {
	spec, _ := fixture.Preset("mt7621")
	spec.Config["packet_steering"] = steeringConfText
	spec.Config["network"] = "config globals\n\toption packet_steering '2'\n\toption steering_flows '128'\n"
	s := readRoot(t, fixturetest.Build(t, spec))
	want := &SteeringConfig{Mode: "custom", Flows: "256", Devices: []DeviceOverride{
		{Name: "eth0", RPSCPUs: "2", XPSCPUs: "1", NAPICPUs: "2-3", Flows: "128",
			QueueRPSCPUs: map[string]string{"rx-0": "4", "rx-1": "8"}},
		{Name: "wlan0", DeferHardIRQs: "2", GROFlushTimeout: "20000", NAPIThreaded: "0",
			QueueNAPI: map[string]NAPIOverride{"rx-1": {DeferHardIRQs: "0", GROFlushTimeout: "200000"}, "napi-8193": {Threaded: "1"}}},
	}, Adaptive: map[string]string{"interval": "1", "high_load": "70%", "bogus": "a b"}}
	if d := testenv.Diff(want, s.Config.Steering); d != "" {
		t.Errorf("steering config (-want +got):\n%s", d)
	}
	if s.Config.PacketSteering != "2" || !s.Config.PacketSteeringSet || s.Config.SteeringFlows != "128" {
		t.Errorf("network globals (anonymous section): %+v", s.Config)
	}
	if len(s.Config.Errors) != 2 || !strings.Contains(s.Config.Errors[0].Error, "bogus") ||
		!strings.Contains(s.Config.Errors[1].Error, `queue_napi_threaded "rx-2": want QUEUE=VALUE`) {
		t.Errorf("config errors %+v, want the bogus queue_rps and the queue_napi_threaded without a value", s.Config.Errors)
	}
}

func TestConfigParseErrorsAndAbsence(t *testing.T) {
	spec, _ := fixture.Preset("bcm53xx")
	spec.Config["firewall"] = "config defaults\n\toption flow_offloading '1\n"
	delete(spec.Config, "network")
	s := readRoot(t, fixturetest.Build(t, spec))
	if len(s.Config.Errors) != 1 || s.Config.Errors[0].Path != "etc/config/firewall" {
		t.Errorf("config errors %+v, want etc/config/firewall", s.Config.Errors)
	}
	if s.Config.FlowOffloading != "" || s.Config.PacketSteeringSet {
		t.Errorf("values from broken or missing files: %+v", s.Config)
	}
	if !hasGap(s, "etc/config/network") {
		t.Errorf("missing network config not a gap: %+v", s.Gaps)
	}
}

// TestRefusedConfigFiles: a config file beyond the uci limits, a directory,
// a FIFO or a symlink loop in its place is listed in Config.Errors with the
// reason, before anything is parsed, and its values stay unset.
func TestRefusedConfigFiles(t *testing.T) {
	tests := []struct {
		name string
		edit func(t *testing.T, path string)
		want string
	}{
		{"too large", func(t *testing.T, path string) {
			if err := os.WriteFile(path, []byte("config defaults\n\toption flow_offloading '1'\n"+strings.Repeat("#\n", uci.MaxFileSize/2)), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "1048620 bytes, over the limit of 1048576 bytes per config file"},
		{"too many sections", func(t *testing.T, path string) {
			if err := os.WriteFile(path, []byte("config defaults\n\toption flow_offloading '1'\n"+strings.Repeat("config rule\n", uci.MaxSections)), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "more than 10000 sections"},
		{"directory", func(t *testing.T, path string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(path, 0o755); err != nil {
				t.Fatal(err)
			}
		}, "not a regular file"},
		{"fifo", func(t *testing.T, path string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			if err := unix.Mkfifo(path, 0o644); err != nil {
				t.Fatal(err)
			}
		}, "not a regular file"},
		{"symlink loop", func(t *testing.T, path string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("firewall", path); err != nil {
				t.Fatal(err)
			}
		}, "cannot open"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec, _ := fixture.Preset("bcm53xx")
			root := fixturetest.Build(t, spec)
			tc.edit(t, filepath.Join(root, "etc/config/firewall"))
			s := readRoot(t, root)
			if len(s.Config.Errors) != 1 || s.Config.Errors[0].Path != "etc/config/firewall" ||
				!strings.Contains(s.Config.Errors[0].Error, tc.want) {
				t.Errorf("config errors %+v, want etc/config/firewall with %q", s.Config.Errors, tc.want)
			}
			if s.Config.FlowOffloading != "" {
				t.Errorf("values from a refused file: %+v", s.Config)
			}
		})
	}
}

func hasGap(s *Snapshot, path string) bool {
	for _, g := range s.Gaps {
		if g.Path == path {
			return true
		}
	}
	return false
}

// TestGapsNotFatal removes or breaks files one at a time: Read still
// succeeds, records the path as a gap, and keeps everything else.
func TestGapsNotFatal(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(root string) error
		gap   string
		check func(t *testing.T, s *Snapshot)
	}{
		{"no interrupts", rm("proc/interrupts"), "proc/interrupts", func(t *testing.T, s *Snapshot) {
			if len(s.IRQs) != 0 || len(s.Devices) == 0 {
				t.Errorf("irqs %d devices %d", len(s.IRQs), len(s.Devices))
			}
		}},
		{"no softnet", rm("proc/net/softnet_stat"), "proc/net/softnet_stat", nil},
		{"no sysctl", rm("proc/sys/net/core/rps_sock_flow_entries"), "proc/sys/net/core/rps_sock_flow_entries", func(t *testing.T, s *Snapshot) {
			if s.RPSSockFlowEntries != -1 {
				t.Errorf("rps_sock_flow_entries %d, want -1", s.RPSSockFlowEntries)
			}
		}},
		{"garbage sysctl", put("proc/sys/net/core/rps_sock_flow_entries", "lots\n"), "proc/sys/net/core/rps_sock_flow_entries", nil},
		{"no possible", rm("sys/devices/system/cpu/possible"), "sys/devices/system/cpu/possible", func(t *testing.T, s *Snapshot) {
			if len(s.CPUs) != 4 {
				t.Errorf("fallback to cpuN dirs: %d CPUs", len(s.CPUs))
			}
		}},
		{"garbage online", put("sys/devices/system/cpu/online", "0-x\n"), "sys/devices/system/cpu/online", func(t *testing.T, s *Snapshot) {
			if len(s.CPUs) != 4 || !s.CPUs[3].Online {
				t.Errorf("per-cpu online fallback: %+v", s.CPUs)
			}
		}},
		{"no core_id", rm("sys/devices/system/cpu/cpu2/topology/core_id"), "sys/bus/cpu/devices/cpu2/topology/core_id", func(t *testing.T, s *Snapshot) {
			if s.CPUs[2].Core != -1 || s.CPUs[2].Siblings != nil {
				t.Errorf("cpu2 %+v", s.CPUs[2])
			}
		}},
		{"garbage core_id", put("sys/devices/system/cpu/cpu1/topology/core_id", "one\n"), "sys/bus/cpu/devices/cpu1/topology/core_id", nil},
		{"no rps_cpus", rm("sys/devices/platform/soc@0/3ab00000.ethernet/net/eth0/queues/rx-2/rps_cpus"), "sys/class/net/eth0/queues/rx-2/rps_cpus", func(t *testing.T, s *Snapshot) {
			if d := devByName(s, "eth0"); len(d.RxQueues) != 4 || d.RxQueues[2].RPSCPUs != "" {
				t.Errorf("eth0 queues %+v", d.RxQueues)
			}
		}},
		{"garbage flow cnt", put("sys/devices/platform/soc@0/3ab00000.ethernet/net/eth0/queues/rx-1/rps_flow_cnt", "-\n"), "sys/class/net/eth0/queues/rx-1/rps_flow_cnt", nil},
		{"no ifindex", rm("sys/devices/virtual/net/lo/ifindex"), "sys/class/net/lo/ifindex", nil},
		{"dangling device link", rm("sys/devices/platform/soc@0/c000000.wifi/driver"), "", func(t *testing.T, s *Snapshot) {
			if d := devByName(s, "wlan0"); d.Kind != KindWifi || d.Driver != "" {
				t.Errorf("wlan0 without driver: %+v", d)
			}
		}},
		{"device link outside root", func(root string) error {
			p := filepath.Join(root, "sys/devices/platform/soc@0/3ab00000.ethernet/net/eth0/device")
			os.Remove(p)
			return os.Symlink("/", p)
		}, "sys/class/net/eth0/device", func(t *testing.T, s *Snapshot) {
			if d := devByName(s, "eth0"); d.BusDevice != "" || d.Kind != KindDSAConduit {
				t.Errorf("eth0 %+v", d)
			}
		}},
		{"no queues", rmAll("sys/devices/virtual/net/br-lan/queues"), "sys/class/net/br-lan/queues", nil},
		{"garbage status", put("proc/300/status", "Name:\tnapi/eth0-257\nCpus_allowed_list:\t0-z\n"), "proc/300/status", func(t *testing.T, s *Snapshot) {
			if len(s.NAPIThreads) != 4 || s.NAPIThreads[0].CPUs != "" {
				t.Errorf("threads %+v", s.NAPIThreads)
			}
		}},
		{"garbage stat", put("proc/301/stat", "301 (napi/eth0-258) S 2\n"), "proc/301/stat", func(t *testing.T, s *Snapshot) {
			if len(s.NAPIThreads) != 3 {
				t.Errorf("unverifiable thread kept: %+v", s.NAPIThreads)
			}
		}},
		{"vanished process", rm("proc/302/stat"), "", func(t *testing.T, s *Snapshot) {
			if len(s.NAPIThreads) != 3 {
				t.Errorf("threads %+v", s.NAPIThreads)
			}
		}},
		{"vanished after stat", rm("proc/303/status"), "", func(t *testing.T, s *Snapshot) {
			if len(s.NAPIThreads) != 3 || s.NAPIThreads[2].PID != 302 {
				t.Errorf("threads %+v", s.NAPIThreads)
			}
		}},
		{"comm file not needed", rm("proc/300/comm"), "", func(t *testing.T, s *Snapshot) {
			if len(s.NAPIThreads) != 4 || s.NAPIThreads[0].Name != "napi/eth0-257" {
				t.Errorf("threads %+v", s.NAPIThreads)
			}
		}},
		{"garbage affinity", put("proc/irq/61/smp_affinity", "zz\n"), "proc/irq/61/smp_affinity", nil},
		{"garbage interrupts row", put("proc/interrupts", "   CPU0 CPU1 CPU2 CPU3\n 60: 1 2 3 4 GIC-0 92 Level edma_rxdesc_0\n 61: 1 99999999999999999999999 GIC-0 x\n"),
			"proc/interrupts", func(t *testing.T, s *Snapshot) {
				if len(s.IRQs) != 1 || s.IRQs[0].Device != "eth0" || s.IRQs[0].Queue != 0 {
					t.Errorf("irqs %+v", s.IRQs)
				}
			}},
		{"no board", rm("tmp/sysinfo/board_name"), "tmp/sysinfo/board_name", nil},
		{"no release", rm("etc/openwrt_release"), "etc/openwrt_release", nil},
		{"no sys/class/net", rmAll("sys/class/net"), "sys/class/net", func(t *testing.T, s *Snapshot) {
			if len(s.Devices) != 0 || len(s.NAPIThreads) != 4 || s.NAPIThreads[0].Device != "" {
				t.Errorf("devices %d threads %+v", len(s.Devices), s.NAPIThreads)
			}
		}},
		{"no proc", rmAll("proc"), "proc", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := fixturetest.Root(t, "ipq807x", nil)
			if err := tc.edit(root); err != nil {
				t.Fatal(err)
			}
			s := readRoot(t, root)
			if tc.gap != "" && !hasGap(s, tc.gap) {
				t.Errorf("no gap %s in %+v", tc.gap, s.Gaps)
			}
			if tc.gap == "" && len(s.Gaps) != 0 {
				t.Errorf("unexpected gaps %+v", s.Gaps)
			}
			if tc.check != nil {
				tc.check(t, s)
			}
			if _, err := json.Marshal(s); err != nil {
				t.Error(err)
			}
		})
	}
}

func rm(rel string) func(string) error {
	return func(root string) error { return os.Remove(filepath.Join(root, rel)) }
}

func rmAll(rel string) func(string) error {
	return func(root string) error {
		p := filepath.Join(root, rel)
		if _, err := os.Lstat(p); err != nil {
			return err
		}
		return os.RemoveAll(p)
	}
}

func put(rel, content string) func(string) error {
	return func(root string) error { return os.WriteFile(filepath.Join(root, rel), []byte(content), 0o644) }
}

func TestReadErrors(t *testing.T) {
	if _, err := Read(context.Background(), filepath.Join(t.TempDir(), "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing root: %v", err)
	}
	file := filepath.Join(t.TempDir(), "f")
	os.WriteFile(file, nil, 0o644)
	if _, err := Read(context.Background(), file); err == nil {
		t.Errorf("file as root accepted")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Read(ctx, fixturetest.Root(t, "bcm53xx", nil)); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled ctx: %v", err)
	}
	// An empty directory is a machine with nothing visible: all gaps.
	s := readRoot(t, t.TempDir())
	if len(s.Gaps) < 5 || len(s.CPUs) != 0 || s.Devices == nil {
		t.Errorf("empty root: %+v", s)
	}
}

// TestDeviceKindsEdgeCases builds small specs for the classification order.
func TestDeviceKindsEdgeCases(t *testing.T) {
	spec := fixture.Spec{
		CPUs: []fixture.CPU{{ID: 0}, {ID: 1, Core: 1}},
		Devices: []fixture.Device{
			{Name: "eth0", Driver: "stmmac", DSATagging: "mtk"},
			{Name: "eth0.5", Lowers: []string{"eth0"}},                                          // VLAN on the conduit: virtual
			{Name: "lan1", Driver: "mt7530-mdio", Bus: "platform/sw", Lowers: []string{"eth0"}}, // dsa-user
			{Name: "eth1", Driver: "r8169", BusType: "pci", Bus: "pci0000:00/0000:00:02.0"},
			{Name: "br0", Ports: []string{"eth1"}, Driver: ""},
			{Name: "wg0"},
			{Name: "wlan0", Phy: "phy0"}, // wifi without bus device (mac80211_hwsim)
			{Name: "macvlan0", Lowers: []string{"eth1"}},
		},
		Processes: []fixture.Process{
			{PID: 77, Comm: "napi/eth0.5-3", Kernel: true},
			{PID: 78, Comm: "napi/gone-4", Kernel: true},
			{PID: 79, Comm: "napi/eth1", Kernel: true},
			{PID: 80, Comm: "irqbalance", Kernel: true}, // a kernel thread is not the daemon
		},
		RPSSockFlowEntries: 32768,
	}
	s := readRoot(t, fixturetest.Build(t, spec))
	kinds := map[string]string{}
	for _, d := range s.Devices {
		kinds[d.Name] = d.Kind
	}
	want := map[string]string{"eth0": KindDSAConduit, "eth0.5": KindVirtual, "lan1": KindDSAUser, "eth1": KindEthernet,
		"br0": KindBridge, "wg0": KindVirtual, "wlan0": KindWifi, "macvlan0": KindVirtual}
	if !reflect.DeepEqual(kinds, want) {
		t.Errorf("kinds %v\nwant %v", kinds, want)
	}
	got := map[int]NAPIThread{}
	for _, th := range s.NAPIThreads {
		got[th.PID] = th
	}
	if th := got[77]; th.Owner != "eth0.5" || th.Device != "eth0.5" || th.NAPIID != 3 {
		t.Errorf("thread 77 %+v", th)
	}
	if th := got[78]; th.Owner != "gone" || th.Device != "" {
		t.Errorf("thread 78 %+v", th)
	}
	if th := got[79]; th.Owner != "eth1" || th.NAPIID != -1 || th.Device != "eth1" {
		t.Errorf("thread 79 %+v", th)
	}
	if len(s.Processes) != 0 {
		t.Errorf("processes %v", s.Processes)
	}
	if s.RPSSockFlowEntries != 32768 {
		t.Errorf("rps_sock_flow_entries %d", s.RPSSockFlowEntries)
	}
	if len(s.Identity.Compatible) != 0 || hasGap(s, "proc/device-tree/compatible") {
		t.Errorf("no device tree must not be a gap: %+v", s.Gaps)
	}
}

// TestMtkEthPrefersConduit: napi/mtk_eth-N goes to the first mtk_soc_eth
// conduit by name, even when another mtk_soc_eth netdev sorts first.
func TestMtkEthPrefersConduit(t *testing.T) {
	spec, _ := fixture.Preset("mt7621")
	spec.Devices = append(spec.Devices, fixture.Device{Name: "eth-a", Driver: "mtk_soc_eth", Bus: "platform/1e100000.ethernet"})
	s := readRoot(t, fixturetest.Build(t, spec))
	for _, th := range s.NAPIThreads {
		if th.Owner == "mtk_eth" && th.Device != "eth0" {
			t.Errorf("%s -> %q, want eth0", th.Name, th.Device)
		}
	}
}

func TestOfflineCPU(t *testing.T) {
	spec, _ := fixture.Preset("x86-8")
	spec.CPUs[5].Offline = true
	spec.CPUs[4].Core = 5 // so CPU 4 would pair with 5 if offline CPUs counted
	s := readRoot(t, fixturetest.Build(t, spec))
	if len(s.CPUs) != 8 || s.CPUs[5].Online || !s.CPUs[4].Online {
		t.Fatalf("cpus %+v", s.CPUs)
	}
	if s.CPUs[5].Core != -1 || s.CPUs[4].Siblings != nil {
		t.Errorf("offline cpu topology: %+v %+v", s.CPUs[4], s.CPUs[5])
	}
	if len(s.Gaps) != 0 {
		t.Errorf("offline CPU without topology is no gap: %+v", s.Gaps)
	}
	if len(s.Softnet) != 7 || s.Softnet[5].CPU != 6 {
		t.Errorf("softnet of online CPUs: %+v", s.Softnet)
	}
}

// TestNoDuplicateDeviceNames guards the device listing (names come only
// from sys/class/net).
func TestDevicesSortedByName(t *testing.T) {
	s := readRoot(t, fixturetest.Root(t, "mochabin", nil))
	names := make([]string, len(s.Devices))
	for i, d := range s.Devices {
		names[i] = d.Name
	}
	if !sort.StringsAreSorted(names) {
		t.Errorf("devices not sorted: %v", names)
	}
}
