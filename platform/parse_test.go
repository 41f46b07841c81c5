package platform

import (
	"reflect"
	"strings"
	"testing"

	"github.com/packet-steering/packet-steering/internal/testenv"
)

func TestParseInterrupts(t *testing.T) {
	const in = `           CPU0       CPU1       CPU2       CPU3
 17:          0          0          0          0     GICv3  25 Level     vgic
 38:     812345          7          0          0     GIC-0 179 Level     eth0
 60:       1000          0  PCI-MSIX-0000:01:00.0 1-edge      eth0-TxRx-0
 61:          1          2          3          4  IO-APIC   9-fasteoi   acpi, i801_smbus
 62:          5          6          7          8  MIPS GIC  21  1e100000.ethernet
 70:          9
 71:          0          0          0          0    XT-PIC  cascade
 72:          0          0          0          0    dummy  Level  Edge  x
 38:          1          1          1          1     GIC-0 179 Level     duplicate
NMI:          0          0          0          0   Non-maskable interrupts
LOC:     123456     234567     345678     456789   Local timer interrupts
IPI0:         1          2          3          4       Rescheduling interrupts
ERR:          0
MIS:          0
`
	got, err := parseInterrupts(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []IRQ{
		{Number: 17, Name: "vgic", Chip: "GICv3", Counts: []uint64{0, 0, 0, 0}, Queue: -1},
		{Number: 38, Name: "eth0", Chip: "GIC-0", Counts: []uint64{812345, 7, 0, 0}, Queue: -1},
		{Number: 60, Name: "eth0-TxRx-0", Chip: "PCI-MSIX-0000:01:00.0", Counts: []uint64{1000, 0}, Queue: -1},
		{Number: 61, Name: "acpi, i801_smbus", Chip: "IO-APIC", Counts: []uint64{1, 2, 3, 4}, Queue: -1},
		{Number: 62, Name: "1e100000.ethernet", Chip: "MIPS GIC", Counts: []uint64{5, 6, 7, 8}, Queue: -1},
		{Number: 70, Counts: []uint64{9}, Queue: -1},
		{Number: 71, Name: "cascade", Chip: "XT-PIC", Counts: []uint64{0, 0, 0, 0}, Queue: -1},
		{Number: 72, Name: "x", Chip: "dummy", Counts: []uint64{0, 0, 0, 0}, Queue: -1},
	}
	if d := testenv.Diff(want, got); d != "" {
		t.Errorf("parseInterrupts (-want +got):\n%s", d)
	}
}

func TestParseInterruptsMalformed(t *testing.T) {
	cases := []struct {
		name  string
		in    string
		rows  int
		isErr bool
	}{
		{"empty", "", 0, true},
		{"no header", " 38: 1 2 GIC eth0\n", 0, true},
		{"header only", "  CPU0 CPU1\n", 0, false},
		{"truncated row", "  CPU0 CPU1\n 38:", 1, false},
		{"no colon", "  CPU0\n 38 1 GIC eth0\n 39: 1 GIC eth1\n", 1, true},
		{"huge count", "  CPU0\n 38: 99999999999999999999999 GIC eth0\n", 0, true},
		{"negative irq", "  CPU0\n -3: 1 GIC eth0\n", 0, true},
		{"garbage number", "  CPU0\n 3x: 1 GIC eth0\n", 0, true},
		{"binary", "\x00\xff\n\x01:\x02\n", 0, true},
	}
	for _, c := range cases {
		got, err := parseInterrupts(strings.NewReader(c.in))
		if len(got) != c.rows || (err != nil) != c.isErr {
			t.Errorf("%s: %d rows, err %v; want %d rows, error %v", c.name, len(got), err, c.rows, c.isErr)
		}
	}
}

func TestTieIRQs(t *testing.T) {
	devs := []Device{
		{Name: "eth0", Kind: KindDSAConduit, Driver: "qca_edma", BusDevice: "sys/devices/platform/soc/3ab00000.ethernet", RxQueues: make([]RxQueue, 4)},
		{Name: "eth1", Kind: KindEthernet, Driver: "ice", BusDevice: "sys/devices/pci0000:00/0000:3b:00.0", RxQueues: make([]RxQueue, 2)},
		{Name: "eth10", Kind: KindEthernet, RxQueues: make([]RxQueue, 1)},
		{Name: "lan1", Kind: KindDSAUser, Driver: "qca8k", BusDevice: "sys/devices/platform/soc/switch", RxQueues: make([]RxQueue, 1)},
		{Name: "wlan0", Kind: KindWifi, Driver: "ath11k_ahb", Phy: "phy0", BusDevice: "sys/devices/platform/soc/c000000.wifi"},
		{Name: "wlan0-1", Kind: KindWifi, Driver: "ath11k_ahb", Phy: "phy0", BusDevice: "sys/devices/platform/soc/c000000.wifi"},
	}
	cases := map[string]string{
		"eth0":                    "eth0/-1",
		"eth1-TxRx-1":             "eth1/1",
		"eth1-TxRx-2":             "", // no such rx queue
		"ice-eth1-TxRx-0":         "eth1/0",
		"i40e-eth10-TxRx-0":       "eth10/0", // longest suffix, not eth1
		"eth1-rx-0":               "eth1/0",
		"eth1-tx-0":               "",
		"eth1-TxRx-01":            "",
		"edma_rxdesc_3":           "eth0/3",
		"edma_rxdesc_4":           "",
		"edma_rxdesc_x":           "",
		"3ab00000.ethernet:rx2":   "eth0/2",
		"3ab00000.ethernet":       "eth0/-1",
		"switch":                  "", // a DSA user's bus device
		"ath11k_ahb":              "wlan0/-1",
		"ath10k_ahb":              "",
		"c000000.wifi":            "",
		"unknown-TxRx-1":          "",
		"":                        "",
		"lan1":                    "lan1/-1",
		"0000:3b:00.0:rx1":        "eth1/1",
		"0000:3b:00.0-input.1":    "eth1/1",
		"0000:3b:00.0-output.1":   "",
		"0000:3b:00.0:rx99999999": "",
	}
	var irqs []IRQ
	for name := range cases {
		irqs = append(irqs, IRQ{Name: name, Device: "stale", Queue: 7})
	}
	tieIRQs(irqs, devs)
	for _, q := range irqs {
		got := ""
		if q.Device != "" {
			got = q.Device + "/" + itoa(q.Queue)
		} else if q.Queue != -1 {
			got = "queue without device"
		}
		if got != cases[q.Name] {
			t.Errorf("tie %q = %q, want %q", q.Name, got, cases[q.Name])
		}
	}
	// Two EDMA-driven netdevs: ambiguous.
	two := append([]Device(nil), devs...)
	two[1].Driver = "edma2"
	irqs = []IRQ{{Name: "edma_rxdesc_0"}}
	tieIRQs(irqs, two)
	if irqs[0].Device != "" {
		t.Errorf("ambiguous edma tied to %s", irqs[0].Device)
	}
}

func TestParseSoftnet(t *testing.T) {
	row := func(cols int, cpu uint64) string {
		v := []uint64{0x10, 2, 3, 0, 0, 0, 0, 0, 0, 0x20, 5, 0, cpu, 0, 0}
		var b strings.Builder
		for i, x := range v[:cols] {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(hex8(x))
		}
		return b.String() + "\n"
	}
	cases := []struct {
		name string
		in   string
		want []SoftnetStat
	}{
		{"9 columns", row(9, 0) + row(9, 0), []SoftnetStat{
			{CPU: 0, Processed: 16, Dropped: 2, TimeSqueeze: 3}, {CPU: 1, Processed: 16, Dropped: 2, TimeSqueeze: 3}}},
		{"11 columns", row(11, 0), []SoftnetStat{{CPU: 0, Processed: 16, Dropped: 2, TimeSqueeze: 3, RPSReceived: 32, FlowLimit: 5}}},
		{"13 columns, CPU 1 offline", row(13, 0) + row(13, 2), []SoftnetStat{
			{CPU: 0, Processed: 16, Dropped: 2, TimeSqueeze: 3, RPSReceived: 32, FlowLimit: 5},
			{CPU: 2, Processed: 16, Dropped: 2, TimeSqueeze: 3, RPSReceived: 32, FlowLimit: 5}}},
		{"15 columns", row(15, 7), []SoftnetStat{{CPU: 7, Processed: 16, Dropped: 2, TimeSqueeze: 3, RPSReceived: 32, FlowLimit: 5}}},
		{"64-bit columns", "fffffffffffffffe 100000000 80000000 0 0 0 0 0 0 123456789abc 0 0 3\n", []SoftnetStat{
			{CPU: 3, Processed: 1<<64 - 2, Dropped: 1 << 32, TimeSqueeze: 1 << 31, RPSReceived: 0x123456789abc}}},
		{"blank lines", "\n" + row(9, 0) + "  \n", []SoftnetStat{{CPU: 0, Processed: 16, Dropped: 2, TimeSqueeze: 3}}},
		{"empty", "", []SoftnetStat{}},
	}
	for _, c := range cases {
		got, err := ParseSoftnet(strings.NewReader(c.in))
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %+v, %v; want %+v", c.name, got, err, c.want)
		}
	}
	for _, bad := range []string{
		"0000001 00000002\n",                    // truncated row
		"zz 0 0 0 0 0 0 0 0\n",                  // not hex
		"1 2 3 4 5 6 7 8 9 10 11 12 ffffffff\n", // cpu out of range
		"10000000000000000 0 0 0 0 0 0 0 0\n",   // more than 64 bits
		"1 2 3\n",                               // 3 columns
	} {
		if got, err := ParseSoftnet(strings.NewReader(bad)); err == nil {
			t.Errorf("ParseSoftnet(%q) = %+v, want error", bad, got)
		}
	}
}

func hex8(x uint64) string {
	const digits = "0123456789abcdef"
	b := []byte("00000000")
	for i := 7; i >= 0; i-- {
		b[i] = digits[x&0xf]
		x >>= 4
	}
	return string(b)
}

func TestParseStat(t *testing.T) {
	cases := []struct {
		in   string
		want procStat
		bad  bool
	}{
		{"300 (napi/eth0-257) S 2 0 0 0 -1 2129984 0 0 0 0\n", procStat{PID: 300, Comm: "napi/eth0-257", State: "S", Flags: 0x208040}, false},
		{"42 (my (weird) name) ) R 1 42 42 0 -1 4194560 1 2\n", procStat{PID: 42, Comm: "my (weird) name) ", State: "R", Flags: 4194560}, false},
		{"7 () S 1 1 1 0 -1 64\n", procStat{PID: 7, Comm: "", State: "S", Flags: 64}, false},
		{"", procStat{}, true},
		{"300 (napi/eth0-257", procStat{}, true},
		{"300 (x) S 2 0 0 0 -1", procStat{}, true},
		{"300 (x) S 2 0 0 0 -1 -5", procStat{}, true},
		{"x (y) S 2 0 0 0 -1 1", procStat{}, true},
		{"300 )x( S 2 0 0 0 -1 1", procStat{}, true},
		{"300 (x) S 2 0 0 0 -1 99999999999999999999999", procStat{}, true},
	}
	for _, c := range cases {
		got, err := parseStat(strings.NewReader(c.in))
		if (err != nil) != c.bad || (!c.bad && got != c.want) {
			t.Errorf("parseStat(%q) = %+v, %v; want %+v bad=%v", c.in, got, err, c.want, c.bad)
		}
	}
}

func TestParseCpusAllowedList(t *testing.T) {
	cases := []struct {
		in, want string
		bad      bool
	}{
		{"Name:\tx\nCpus_allowed:\tf\nCpus_allowed_list:\t0-3\nMems_allowed:\t1\n", "0-3", false},
		{"Cpus_allowed_list:\t1,3\n", "1,3", false},
		{"Cpus_allowed_list:\n", "", false},
		{"Name:\tx\n", "", true},
		{"Cpus_allowed_list:\t0-\n", "", true},
		{"", "", true},
	}
	for _, c := range cases {
		got, err := parseCpusAllowedList(strings.NewReader(c.in))
		if got != c.want || (err != nil) != c.bad {
			t.Errorf("parseCpusAllowedList(%q) = %q, %v; want %q bad=%v", c.in, got, err, c.want, c.bad)
		}
	}
}

func TestParseNAPIName(t *testing.T) {
	cases := []struct {
		in    string
		owner string
		id    int
		ok    bool
	}{
		{"napi/eth0-257", "eth0", 257, true},
		{"napi/mtk_eth-8193", "mtk_eth", 8193, true},
		{"napi/eth0.5-3", "eth0.5", 3, true},
		{"napi/br-lan-9", "br-lan", 9, true},
		{"napi/phy0", "phy0", -1, true},
		{"napi/eth0-x", "eth0", -1, true},
		{"napi/-3", "-3", -1, true},
		{"napi/", "", 0, false},
		{"kworker/0:1", "", 0, false},
	}
	for _, c := range cases {
		o, id, ok := parseNAPIName(c.in)
		if o != c.owner || id != c.id || ok != c.ok {
			t.Errorf("parseNAPIName(%q) = %q %d %v; want %q %d %v", c.in, o, id, ok, c.owner, c.id, c.ok)
		}
	}
}

func TestParseShellAssignments(t *testing.T) {
	in := `DISTRIB_ID='OpenWrt'
DISTRIB_TARGET='qualcommax/ipq807x'
# comment
DISTRIB_DESCRIPTION="OpenWrt \"24.10\" \$x"
MIXED=a'b c'"d"
EMPTY=''
TRAIL=x # comment
export EXP=1
not an assignment
BROKEN='open
`
	got, err := parseShellAssignments(strings.NewReader(in))
	want := map[string]string{
		"DISTRIB_ID": "OpenWrt", "DISTRIB_TARGET": "qualcommax/ipq807x",
		"DISTRIB_DESCRIPTION": `OpenWrt "24.10" $x`, "MIXED": "ab cd", "EMPTY": "", "TRAIL": "x", "EXP": "1",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v\nwant %v", got, want)
	}
	if err == nil || !strings.Contains(err.Error(), "line 9") || !strings.Contains(err.Error(), "line 10") {
		t.Errorf("errors for lines 9 and 10, got %v", err)
	}
	for _, bad := range []string{`A="x`, `A=x\`} {
		if _, err := parseShellAssignments(strings.NewReader(bad)); bad == `A="x` && err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestParseCompatible(t *testing.T) {
	got := parseCompatible([]byte("netgear,rax120v1\x00qcom,ipq8074\x00"))
	if !reflect.DeepEqual(got, []string{"netgear,rax120v1", "qcom,ipq8074"}) {
		t.Errorf("got %q", got)
	}
	if got := parseCompatible([]byte("\x00\x00")); got != nil {
		t.Errorf("empty: %q", got)
	}
}

func TestQueueIndex(t *testing.T) {
	cases := map[string]int{"rx-0": 0, "rx-12": 12, "rx-": -1, "rx-01": -1, "rx--1": -1, "rx-1a": -1, "tx-1": -1, "rx-+1": -1}
	for in, want := range cases {
		got, ok := queueIndex(in, "rx-")
		if (want < 0) == ok || (ok && got != want) {
			t.Errorf("queueIndex(%q) = %d %v, want %d", in, got, ok, want)
		}
	}
}
