package platform

import (
	"reflect"
	"testing"

	"github.com/packet-steering/packet-steering/platform/fixture"
)

// boardSpec is a small big.LITTLE machine with a PPPoE WAN over a VLAN,
// an mt76 phy with its tx worker, an IRQ the kernel keeps on CPU0 and a
// record of it refusing a move.
func boardSpec() fixture.Spec {
	return fixture.Spec{
		CPUs: []fixture.CPU{
			{ID: 0, Core: 0, Capacity: 414, MaxFreqKHz: 1800000},
			{ID: 1, Core: 1, Capacity: 414, MaxFreqKHz: 1800000},
			{ID: 2, Core: 0, Package: 1, Capacity: 1024, MaxFreqKHz: 2352000},
			{ID: 3, Core: 1, Package: 1, MaxFreqKHz: 2352000}, // max_freq read: no cpu_capacity
		},
		Devices: []fixture.Device{
			{Name: "lo"},
			{Name: "eth0", Driver: "r8169", BusType: "pci", Bus: "pci0000:00/0000:01:00.0"},
			{Name: "eth0.7", Lowers: []string{"eth0"}},
			{Name: "pppoe-wan", PPP: true},
			{Name: "pppoe-x", PPP: true},
			{Name: "wg0"},
			{Name: "wlan0", Driver: "mt7915e", BusType: "pci", Bus: "pci0000:00/0000:02:00.0", Phy: "phy0"},
		},
		Processes: []fixture.Process{
			{PID: 2, Comm: "kthreadd", Kernel: true},
			{PID: 300, Comm: "napi/phy0-0", Kernel: true},
			{PID: 301, Comm: "napi/phy0-259", Kernel: true},
			{PID: 302, Comm: "mt76-tx phy0", Kernel: true, CPUs: "1"},
			{PID: 303, Comm: "mt76-tx phy1"}, // a user process: never a worker
		},
		IRQs: []fixture.IRQ{
			{Number: 106, Name: "eth0", Affinity: "f", Effective: "0"},
			{Number: 107, Name: "mt7915e", Effective: "1"},
			{Number: 108, Name: "xhci-hcd:usb1"},
		},
		Config: map[string]string{
			"network": "config interface 'wan'\n\toption device 'eth0.7'\n\toption proto 'pppoe'\n\toption username 'u'\n\n" +
				"config interface 'x'\n\toption ifname 'nosuchdev'\n\toption proto 'pppoe'\n\n" +
				"config interface 'lan'\n\toption device 'br-lan'\n\toption proto 'static'\n",
		},
		Files: map[string]string{
			RefusedIRQsFile: "106\teth0\tinvalid argument\n108\tother-name\tinvalid argument\nbad line\n",
		},
	}
}

func TestReadBoardFacts(t *testing.T) {
	root := t.TempDir()
	if err := fixture.Build(root, boardSpec()); err != nil {
		t.Fatal(err)
	}
	s := readRoot(t, root)
	for _, g := range s.Gaps {
		switch g.Path {
		case "etc/config/firewall", "tmp/sysinfo/board_name", "tmp/sysinfo/model", "etc/openwrt_release":
		default:
			t.Errorf("gap %s: %s", g.Path, g.Error)
		}
	}
	caps := [][2]int{}
	for _, c := range s.CPUs {
		caps = append(caps, [2]int{c.Capacity, c.MaxFreqKHz})
	}
	// cpuinfo_max_freq is read only where cpu_capacity is absent.
	if want := [][2]int{{414, 0}, {414, 0}, {1024, 0}, {0, 2352000}}; !reflect.DeepEqual(caps, want) {
		t.Errorf("capacities %v, want %v", caps, want)
	}
	kinds := map[string]string{}
	for _, d := range s.Devices {
		kinds[d.Name] = d.Kind
	}
	for dev, want := range map[string]string{"pppoe-wan": KindPPP, "pppoe-x": KindPPP, "wg0": KindVirtual, "eth0.7": KindVirtual, "lo": KindVirtual, "eth0": KindEthernet} {
		if kinds[dev] != want {
			t.Errorf("%s: kind %q, want %q", dev, kinds[dev], want)
		}
	}
	if c := devByName(s, "pppoe-wan").Carrier; c != "eth0.7" {
		t.Errorf("pppoe-wan carrier %q, want eth0.7", c)
	}
	if c := devByName(s, "pppoe-x").Carrier; c != "" {
		t.Errorf("pppoe-x carrier %q, want none (its device does not exist)", c)
	}
	if want := []PPPoELink{{"wan", "eth0.7"}, {"x", "nosuchdev"}}; !reflect.DeepEqual(s.Config.PPPoE, want) {
		t.Errorf("pppoe links %v, want %v", s.Config.PPPoE, want)
	}
	if len(s.Workers) != 1 || s.Workers[0].PID != 302 || s.Workers[0].Owner != "phy0" || s.Workers[0].CPUs != "1" ||
		s.Workers[0].Direction != DirTX || s.Workers[0].NAPIID != -1 {
		t.Errorf("workers %+v, want pid 302 of phy0 on CPU1", s.Workers)
	}
	for _, th := range s.NAPIThreads {
		if th.PID == 302 || th.PID == 303 {
			t.Errorf("%s is among the NAPI threads", th.Name)
		}
	}
	irq := map[int]IRQ{}
	for _, q := range s.IRQs {
		irq[q.Number] = q
	}
	if q := irq[106]; q.Effective != "0" || q.Refused != "invalid argument" {
		t.Errorf("irq 106 effective %q refused %q, want 0 and the record's error", q.Effective, q.Refused)
	}
	if q := irq[107]; q.Effective != "1" || q.Refused != "" {
		t.Errorf("irq 107 effective %q refused %q", q.Effective, q.Refused)
	}
	if q := irq[108]; q.Refused != "" {
		t.Errorf("irq 108 is refused under another name in the record, yet marked %q", q.Refused)
	}
}

func TestRefusedIRQsRoundTrip(t *testing.T) {
	rec := map[int][2]string{7: {"eth0", "invalid\targument"}, 3: {"a b", "input/output error"}}
	got := ParseRefusedIRQs(FormatRefusedIRQs(rec))
	want := map[int][2]string{7: {"eth0", "invalid argument"}, 3: {"a b", "input/output error"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("round trip %v, want %v", got, want)
	}
	var big []byte
	for i := 0; i < MaxRefusedIRQs+10; i++ {
		big = append(big, []byte(itoa(i)+"\tx\te\n")...)
	}
	if n := len(ParseRefusedIRQs(big)); n != MaxRefusedIRQs {
		t.Errorf("parsed %d entries, want the bound %d", n, MaxRefusedIRQs)
	}
}

// boardPresetWants are the presetWants of the boards presets
// (fixture/boards_presets.go).
func boardPresetWants() map[string]presetWant {
	filogic := func(ncpu int, eths []string, ports []string, wifi map[string]string, threads map[string]string) presetWant {
		k := map[string]string{"lo": KindVirtual, "br-lan": KindBridge}
		d := map[string]string{}
		for i, e := range eths {
			k[e], d[e] = KindEthernet, "mtk_soc_eth"
			if i == 0 && len(ports) > 0 {
				k[e] = KindDSAConduit
			}
		}
		for _, p := range ports {
			k[p] = KindDSAUser
		}
		for w, drv := range wifi {
			k[w], d[w] = KindWifi, drv
		}
		th := map[string]string{"napi/mtk_eth-5": "eth0", "napi/mtk_eth-6": "eth0"}
		for n, dev := range threads {
			th[n] = dev
		}
		return presetWant{cpus: ncpu, kinds: k, drivers: d, rx: map[string]int{"eth0": 1}, tx: map[string]int{"eth0": 16},
			threads: th, threaded: eths, txThreads: map[string]int{"eth0": 1},
			irqs: map[string]string{"15100000.ethernet": ""}, target: "mediatek/filogic", steering: "1"}
	}
	mt6000 := filogic(4, []string{"eth0", "eth1"}, []string{"lan1", "lan2", "lan3", "lan4", "lan5"},
		map[string]string{"wlan0": "mt7986-wmac", "wlan1": "mt7986-wmac"},
		map[string]string{"napi/phy0-7": "", "napi/phy0-11": "", "napi/phy0-0": ""})
	mt6000.kinds["pppoe-wan"], mt6000.board = KindPPP, "glinet,gl-mt6000"
	mt3000 := filogic(2, []string{"eth0", "eth1"}, nil, map[string]string{"wlan0": "mt7981-wmac"}, map[string]string{"napi/phy0-7": ""})
	mt3000.board = "glinet,gl-mt3000"
	r4 := filogic(4, []string{"eth0", "eth1", "eth2"}, []string{"lan1", "lan2", "lan3"},
		map[string]string{"phy0-ap0": "mt7996e", "phy0-ap2": "mt7996e"}, map[string]string{"napi/phy0-7": "", "napi/phy0-12": ""})
	r4.board, r4.irqs["mt7996e"] = "bananapi,bpi-r4", "phy0-ap0/-1"
	edma := func(ncpu int, board, target string) presetWant {
		k := map[string]string{"eth0": KindDSAConduit, "wan": KindDSAUser, "lan1": KindDSAUser, "wlan0": KindWifi, "br-lan": KindBridge}
		return presetWant{cpus: ncpu, kinds: k, drivers: map[string]string{"eth0": "qca_edma"}, rx: map[string]int{"eth0": 1}, tx: map[string]int{"eth0": 4},
			threads: map[string]string{"napi/eth0-257": "eth0", "napi/eth0-258": "eth0"}, threaded: []string{"eth0"}, txThreads: map[string]int{"eth0": 1},
			irqs:  map[string]string{"edma_rxdesc_0": "eth0/0", "edma_txcmpl_0": "eth0/0", "edma_misc": ""},
			board: board, target: target, steering: "1"}
	}
	rock := func(ncpu int, board string, kinds map[string]string, irqs map[string]string) presetWant {
		kinds["lo"], kinds["br-lan"] = KindVirtual, KindBridge
		return presetWant{cpus: ncpu, kinds: kinds, rx: map[string]int{}, threads: map[string]string{}, irqs: irqs,
			board: board, target: "rockchip/armv8", steering: "1"}
	}
	little := func(n int) map[int][]int {
		m := map[int][]int{}
		for i := 0; i < n; i++ {
			m[i] = nil
		}
		return m
	}
	r4s := rock(6, "friendlyarm,nanopi-r4s", map[string]string{"eth0": KindEthernet, "eth1": KindEthernet}, map[string]string{"eth0": "eth0/-1", "eth1": "eth1/-1"})
	r4s.siblings = little(6)
	r6s := rock(8, "friendlyarm,nanopi-r6s", map[string]string{"eth0": KindEthernet, "eth2": KindEthernet, "pppoe-wan": KindPPP},
		map[string]string{"eth0-0": "eth0/0", "eth0-3": "eth0/3", "eth1-2": "eth1/2", "eth2": "eth2/-1"})
	r6s.siblings, r6s.rx = little(8), map[string]int{"eth0": 4, "eth1": 4, "eth2": 1, "pppoe-wan": 1}
	return map[string]presetWant{
		"mt6000":  mt6000,
		"mt3000":  mt3000,
		"bpi-r4":  r4,
		"ipq60xx": edma(4, "linksys,mr7350", "qualcommax/ipq60xx"),
		"ipq50xx": edma(2, "glinet,gl-b3000", "qualcommax/ipq50xx"),
		"ipq806x": {
			cpus: 2, kinds: map[string]string{"eth0": KindDSAConduit, "eth1": KindDSAConduit, "lan1": KindDSAUser, "wan": KindDSAUser, "wlan1": KindWifi},
			rx: map[string]int{"eth0": 1}, threads: map[string]string{}, irqs: map[string]string{"eth0": "eth0/-1", "eth1": "eth1/-1", "ath10k_pci": ""},
			board: "netgear,r7800", target: "ipq806x/generic", steering: "1", offload: [2]string{"1", ""},
		},
		"lantiq": {
			cpus: 2, siblings: map[int][]int{0: {1}, 1: {0}},
			kinds:   map[string]string{"eth0": KindDSAConduit, "dsl0": KindEthernet, "lan1": KindDSAUser, "wlan0": KindWifi, "pppoe-wan": KindPPP},
			threads: map[string]string{}, irqs: map[string]string{"ath9k": "wlan0/-1", "xrx200_net_rx": "", "ptm_mailbox_isr": ""},
			board: "avm,fritz7490", target: "lantiq/xrx200", steering: "1",
		},
		"r2s":      rock(4, "friendlyarm,nanopi-r2s", map[string]string{"eth0": KindEthernet, "eth1": KindEthernet, "pppoe-wan": KindPPP}, map[string]string{"eth0": "eth0/-1", "xhci-hcd:usb1": ""}),
		"r4s":      r4s,
		"r5s":      rock(4, "friendlyarm,nanopi-r5s", map[string]string{"eth1": KindEthernet, "eth2": KindEthernet}, map[string]string{"eth1": "eth1/-1", "eth2": "eth2/-1"}),
		"r6s":      r6s,
		"r6s-skew": r6s,
		"rpi4": {
			cpus: 4, kinds: map[string]string{"eth0": KindEthernet, "eth1": KindEthernet}, drivers: map[string]string{"eth0": "bcmgenet"},
			rx: map[string]int{"eth0": 1}, tx: map[string]int{"eth0": 5}, threads: map[string]string{},
			irqs: map[string]string{"eth0": "eth0/-1", "xhci_hcd": ""}, board: "raspberrypi,4-model-b", target: "bcm27xx/bcm2711", steering: "1",
		},
		"rpi5": {
			cpus: 4, kinds: map[string]string{"eth0": KindEthernet, "pppoe-wan": KindPPP}, drivers: map[string]string{"eth0": "macb"},
			rx: map[string]int{"eth0": 1}, threads: map[string]string{},
			irqs: map[string]string{"eth0": "eth0/-1", "xhci-hcd:usb1": ""}, board: "raspberrypi,5-model-b", target: "bcm27xx/bcm2712", steering: "1",
		},
	}
}
