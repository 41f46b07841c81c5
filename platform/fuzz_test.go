package platform

import (
	"bytes"
	"strconv"
	"strings"
	"testing"

	"github.com/packet-steering/packet-steering/internal/cpuset"
)

// FuzzParseInterrupts: any input gives rows or an error, never a panic;
// rows are sorted, unique, with at most as many counts as CPU columns, and
// ties never point at a queue without a device.
func FuzzParseInterrupts(f *testing.F) {
	f.Add("           CPU0       CPU1\n 38:     812345          7     GIC-0 179 Level     eth0\nNMI: 0 0 x\n")
	f.Add("  CPU0 CPU1 CPU2\n 60: 1 2 PCI-MSIX-0000:01:00.0 1-edge eth0-TxRx-0\n 61: 1\n 62:\n")
	f.Add("  CPU0\n 61: 1 IO-APIC 9-fasteoi acpi, i801_smbus\n")
	f.Add("")
	f.Fuzz(func(t *testing.T, in string) {
		irqs, _ := parseInterrupts(strings.NewReader(in))
		header := strings.Fields(strings.SplitN(in, "\n", 2)[0])
		for i, q := range irqs {
			if i > 0 && irqs[i-1].Number >= q.Number {
				t.Fatalf("rows not sorted/unique: %d then %d", irqs[i-1].Number, q.Number)
			}
			if len(q.Counts) > len(header) {
				t.Fatalf("irq %d: %d counts for %d columns", q.Number, len(q.Counts), len(header))
			}
		}
		devs := []Device{{Name: "eth0", Kind: KindEthernet, RxQueues: make([]RxQueue, 2)}}
		tieIRQs(irqs, devs)
		for _, q := range irqs {
			if q.Device == "" && q.Queue != -1 || q.Queue >= 2 {
				t.Fatalf("bad tie %+v", q)
			}
		}
	})
}

// FuzzParseSoftnet: never a panic; CPU ids stay in range.
func FuzzParseSoftnet(f *testing.F) {
	f.Add("0002bedd 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000\n")
	f.Add("00000001 00000002 00000003 00000000 00000000 00000000 00000000 00000000 00000000\n")
	f.Add("1 2\n")
	f.Fuzz(func(t *testing.T, in string) {
		stats, _ := ParseSoftnet(strings.NewReader(in))
		for _, s := range stats {
			if s.CPU < 0 || s.CPU >= cpuset.MaxCPUs {
				t.Fatalf("cpu %d out of range", s.CPU)
			}
		}
	})
}

// FuzzParseStat: never a panic; a parsed stat's comm sits between the
// first '(' and the last ')'.
func FuzzParseStat(f *testing.F) {
	f.Add([]byte("300 (napi/eth0-257) S 2 0 0 0 -1 2129984 0 0 0 0\n"))
	f.Add([]byte("42 (a ) b) R 1 42 42 0 -1 4194560\n"))
	f.Add([]byte("1 ("))
	f.Fuzz(func(t *testing.T, in []byte) {
		st, err := parseStat(bytes.NewReader(in))
		if err != nil {
			return
		}
		if !strings.Contains(string(in), "("+st.Comm+")") {
			t.Fatalf("comm %q not found in input", st.Comm)
		}
	})
}

// FuzzNumbers: the allocation-free number parsers agree with strconv.
func FuzzNumbers(f *testing.F) {
	for _, s := range []string{"0", "42", "-7", "+3", "ffffffff", "100000000", "18446744073709551615",
		"18446744073709551616", "ffffffffffffffff", "10000000000000000", "999999999999999999", "1x", "", " 1", "0x10", "-", "FfFf"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if n, ok := atoiBytes([]byte(s)); ok {
			if w, err := strconv.Atoi(s); err != nil || w != n {
				t.Fatalf("atoiBytes(%q) = %d, strconv says %d, %v", s, n, w, err)
			}
		}
		u, ok := parseUintBytes([]byte(s))
		w, err := strconv.ParseUint(s, 10, 64)
		if ok != (err == nil) || (ok && u != w) {
			t.Fatalf("parseUintBytes(%q) = %d %v, strconv says %d %v", s, u, ok, w, err)
		}
		h, ok := parseHex64([]byte(s))
		w, err = strconv.ParseUint(s, 16, 64)
		if ok != (err == nil) || (ok && h != w) {
			t.Fatalf("parseHex64(%q) = %d %v, strconv says %d %v", s, h, ok, w, err)
		}
	})
}

// FuzzCounterParsers: the load parsers never panic on any input.
func FuzzCounterParsers(f *testing.F) {
	f.Add([]byte(softirqsFixture))
	f.Add([]byte(statFixture))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = ParseSoftirqRow(b, "NET_RX")
		_, _ = ParseCPUTimes(b)
	})
}
