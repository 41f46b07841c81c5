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
			{ID: 3, Core: 1, Package: 1},
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
	if want := [][2]int{{414, 1800000}, {414, 1800000}, {1024, 2352000}, {0, 0}}; !reflect.DeepEqual(caps, want) {
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
