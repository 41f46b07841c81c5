package platform

import (
	"errors"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/packet-steering/packet-steering/internal/cpuset"
	"github.com/packet-steering/packet-steering/internal/kfs"
	"github.com/packet-steering/packet-steering/internal/outline"
)

// IRQs, from proc/interrupts (kernel/irq/proc.c show_interrupts) and
// proc/irq/N/smp_affinity (kernel/irq/proc.c irq_affinity_proc_show):
//
//	           CPU0       CPU1
//	 38:     123456          0     GIC-0 179 Level     eth0
//	 60:       1000          0  PCI-MSIX-0000:01:00.0 1-edge  eth0-TxRx-0
//	NMI:          0          0   Non-maskable interrupts
//
// The header names one column per online CPU. Each numbered row holds the
// IRQ number, one count per column, the chip name, chip-specific hwirq and
// trigger fields, and last the action names, joined by ", " when shared.
// Rows with a non-numeric label (NMI, LOC, ERR, IPI0...) are summaries and
// skipped. Some rows print fewer count columns; they are kept as they are.
const (
	interruptsPath = "proc/interrupts"
	irqDir         = "proc/irq"
)

// maxIRQLine bounds one line of proc/interrupts (a 8192-CPU machine prints
// about 90 KiB per row).
const maxIRQLine = 1 << 20

// parseInterrupts parses proc/interrupts. Rows that cannot be parsed are
// skipped and reported in the returned error (joined), alongside the rows
// that could; a missing header is an error with no rows.
func parseInterrupts(r io.Reader) ([]IRQ, error) {
	b, err := io.ReadAll(io.LimitReader(r, kfs.MaxFile))
	if err != nil {
		return nil, outline.Errorf("interrupts: %w", err)
	}
	return parseInterruptsText(string(b))
}

// nextLine splits text after its first line, as bufio.ScanLines does: the
// line without its "\n" or "\r\n"; ok is false at the end of text.
func nextLine(text string) (line, rest string, ok bool) {
	if text == "" {
		return "", "", false
	}
	line, rest, found := strings.Cut(text, "\n")
	if found {
		line = strings.TrimSuffix(line, "\r")
	}
	return line, rest, true
}

// parseInterruptsText is parseInterrupts on the file's contents; rows are
// substrings of text, so only what a row keeps is allocated.
func parseInterruptsText(text string) ([]IRQ, error) {
	first, text, ok := nextLine(text)
	if !ok {
		return nil, errors.New("interrupts: empty")
	}
	if len(first) > maxIRQLine {
		return nil, errors.New("interrupts: header line too long")
	}
	header := strings.Fields(first)
	ncols := 0
	for _, h := range header {
		if !strings.HasPrefix(h, "CPU") {
			return nil, outline.Errorf("interrupts: header %q: not CPU columns", first)
		}
		ncols++
	}
	if ncols == 0 {
		return nil, errors.New("interrupts: header has no CPU columns")
	}
	var irqs []IRQ
	var errs []error
	seen := map[int]bool{}
	line := 1
	for {
		var row string
		if row, text, ok = nextLine(text); !ok {
			break
		}
		line++
		if len(row) > maxIRQLine {
			errs = append(errs, outline.Errorf("interrupts line %d: line too long", line))
			break
		}
		irq, ok, err := parseInterruptRow(row, ncols)
		if err != nil {
			errs = append(errs, outline.Errorf("interrupts line %d: %w", line, err))
			continue
		}
		if !ok || seen[irq.Number] {
			continue
		}
		seen[irq.Number] = true
		irqs = append(irqs, irq)
	}
	sort.Slice(irqs, func(a, b int) bool { return irqs[a].Number < irqs[b].Number })
	return irqs, outline.JoinErrors(errs...)
}

// parseInterruptRow parses one row; ok is false for summary rows.
func parseInterruptRow(text string, ncols int) (IRQ, bool, error) {
	label, rest, found := strings.Cut(text, ":")
	if !found {
		if strings.TrimSpace(text) == "" {
			return IRQ{}, false, nil
		}
		return IRQ{}, false, outline.Errorf("no ':' in %q", text)
	}
	label = strings.TrimSpace(label)
	n, err := strconv.Atoi(label)
	if err != nil {
		if label != "" && !isDigit(label[0]) {
			return IRQ{}, false, nil // NMI, LOC, ERR, MIS, IPI0...
		}
		return IRQ{}, false, outline.Errorf("bad irq number %q", label)
	}
	if n < 0 {
		return IRQ{}, false, outline.Errorf("bad irq number %q", label)
	}
	fields := strings.Fields(rest)
	irq := IRQ{Number: n, Queue: -1, Counts: make([]uint64, 0, ncols)}
	i := 0
	for ; i < len(fields) && i < ncols; i++ {
		if !isDigit(fields[i][0]) {
			break
		}
		c, err := strconv.ParseUint(fields[i], 10, 64)
		if err != nil {
			return IRQ{}, false, outline.Errorf("irq %d: bad count %q", n, fields[i])
		}
		irq.Counts = append(irq.Counts, c)
	}
	tail := fields[i:]
	switch len(tail) {
	case 0:
	case 1:
		irq.Name = tail[0]
	default:
		// The action names are last; shared IRQs join them with ", ".
		j := len(tail) - 1
		for j > 1 && strings.HasSuffix(tail[j-1], ",") {
			j--
		}
		irq.Name = strings.Join(tail[j:], " ")
		// The chip name may hold spaces ("MIPS GIC"); it ends before the
		// numeric hwirq field or the action names.
		k := 1
		for k < j && !isDigit(tail[k][0]) {
			k++
		}
		if k == j && j > 2 {
			k = 1 // no hwirq field: the words between are trigger types
		}
		irq.Chip = strings.Join(tail[:k], " ")
	}
	return irq, true, nil
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// readIRQs reads proc/interrupts and each IRQ's smp_affinity.
func (f *reader) readIRQs(g *gaps) []IRQ {
	b, err := f.File(f.dir, interruptsPath)
	if err != nil {
		g.add(interruptsPath, err)
		return []IRQ{}
	}
	irqs, perr := parseInterruptsText(string(b))
	if perr != nil {
		g.add(interruptsPath, perr)
	}
	if irqs == nil {
		irqs = []IRQ{}
	}
	f.markRefused(irqs, g)
	if f.scope != nil {
		return irqs // affinities once the IRQs' devices are known
	}
	for i := range irqs {
		f.readIRQAffinity(&irqs[i], g)
	}
	return irqs
}

// readIRQAffinity reads one IRQ's smp_affinity.
func (f *reader) readIRQAffinity(q *IRQ, g *gaps) {
	rel := irqDir + "/" + itoa(q.Number) + "/smp_affinity"
	s, err := f.str(f.dir, rel)
	if err != nil {
		g.add(rel, err)
		return
	}
	if _, err := cpuset.ParseMask(s); err != nil {
		g.add(rel, err)
		return
	}
	q.SMPAffinity = s
}

// wifiIRQDriver reports wifi driver families whose IRQs carry the driver
// name (e.g. ath10k_ahb requests its IRQ as "ath10k_ahb", mt76 PCI drivers
// as their module name "mt7915e").
func wifiIRQDriver(family string) bool {
	switch family {
	case "ath9k", "ath10k", "ath11k", "ath12k", "mt7603e", "mt7615e", "mt7915e", "mt7921e", "mt7996e":
		return true
	}
	return false
}

// tieIRQs sets Device, Queue and Direction of each IRQ whose name says
// what it serves. Patterns, first match wins:
//
//	<dev>                          the whole device (Queue -1)
//	[<prefix>-]<dev>-TxRx-<q>      per-queue MSI-X vectors serving rx and tx
//	                               queue q (igb, igc, ixgbe, i40e
//	                               "i40e-<dev>-TxRx-<q>", ice ...)
//	[<prefix>-]<dev>-rx-<q>        a vector with only an rx ring, and one with
//	[<prefix>-]<dev>-tx-<q>        only a tx ring (igb/igc when there are
//	                               vectors enough for one per ring:
//	                               igc_main.c igc_request_msix)
//	edma_rxdesc_<q>                qualcommax EDMA rx ring q, and tx
//	edma_txcmpl_<q>                completion ring q: the netdev driven by an
//	                               *edma* driver, else the one DSA conduit
//	                               with that queue
//	<busdev>:rx<q>                 rx queue q of the netdev whose bus device
//	                               has that basename (ipqess "c080000.ethernet:rx1")
//	<busdev>-input.<q>             virtio_net rx and tx virtqueue q
//	<busdev>-output.<q>            ("virtio2-input.0": virtio_net.c names its
//	                               vqs "input.N" and "output.N", and
//	                               virtio_pci_common.c vp_find_vqs_msix
//	                               requests each vector as "<vdev>-<vq name>")
//	<busdev>                       the whole device of that bus device
//	<wifi driver>...               the wifi netdev of the only phy with that
//	                               driver family (ath10k_ahb, mt7915e ...)
//
// mvpp2 names every queue vector after its netdev (mvpp2_main.c
// mvpp2_irqs_init: request_irq(..., port->dev->name, ...)), so its IRQs tie
// to the whole device by the first pattern. A queue number is only accepted
// when the device has that queue (an rx queue for DirRX and DirRxTx, a tx
// queue for DirTX); anything else stays untied (Device ""). Ambiguous
// matches (several devices) stay untied too.
func tieIRQs(irqs []IRQ, devs []Device) {
	idx := deviceIndex(devs)
	byBus := map[string][]int{}
	for i := range devs {
		if b := busBase(&devs[i]); b != "" && devs[i].Kind != KindDSAUser && devs[i].Kind != KindWifi {
			byBus[b] = append(byBus[b], i)
		}
	}
	for i := range irqs {
		irqs[i].Device, irqs[i].Queue, irqs[i].Direction = "", -1, ""
		t := tieIRQ(irqs[i].Name, devs, idx, byBus)
		if t.dev < 0 {
			continue
		}
		if t.queue >= 0 {
			n := len(devs[t.dev].RxQueues)
			if t.dir == DirTX {
				n = len(devs[t.dev].TxQueues)
			}
			if t.queue >= n {
				continue
			}
		} else {
			t.dir = ""
		}
		irqs[i].Device, irqs[i].Queue, irqs[i].Direction = devs[t.dev].Name, t.queue, t.dir
	}
}

// irqTie is what an IRQ name says: a device position (-1: none), a queue
// (-1: the whole device) and the queue's direction.
type irqTie struct {
	dev, queue int
	dir        string
}

var noTie = irqTie{dev: -1, queue: -1}

func tieIRQ(name string, devs []Device, idx map[string]int, byBus map[string][]int) irqTie {
	if name == "" {
		return noTie
	}
	if d, ok := idx[name]; ok {
		return irqTie{d, -1, ""}
	}
	for _, sd := range []struct{ sep, dir string }{{"-TxRx-", DirRxTx}, {"-rx-", DirRX}, {"-tx-", DirTX}} {
		if p, qs, ok := cutLast(name, sd.sep); ok {
			q, qok := atoiStrict(qs)
			if !qok {
				continue
			}
			if d, ok := idx[p]; ok {
				return irqTie{d, q, sd.dir}
			}
			// "<driver>-<dev>": the longest device name that ends p after a '-'.
			best := -1
			for di, d := range devs {
				if strings.HasSuffix(p, "-"+d.Name) && (best < 0 || len(d.Name) > len(devs[best].Name)) {
					best = di
				}
			}
			if best >= 0 {
				return irqTie{best, q, sd.dir}
			}
		}
	}
	for _, ed := range []struct{ prefix, dir string }{{"edma_rxdesc_", DirRX}, {"edma_txcmpl_", DirTX}} {
		if qs, ok := strings.CutPrefix(name, ed.prefix); ok {
			if q, ok := atoiStrict(qs); ok {
				return irqTie{edmaDevice(devs, q, ed.dir), q, ed.dir}
			}
		}
	}
	for _, bd := range []struct{ sep, dir string }{{":rx", DirRX}, {"-input.", DirRX}, {"-output.", DirTX}} {
		if p, qs, ok := cutLast(name, bd.sep); ok {
			if q, ok := atoiStrict(qs); ok {
				if c := byBus[p]; len(c) == 1 {
					return irqTie{c[0], q, bd.dir}
				}
				return noTie
			}
		}
	}
	if c := byBus[name]; len(c) == 1 {
		return irqTie{c[0], -1, ""}
	}
	return irqTie{wifiDevice(name, devs), -1, ""}
}

// edmaDevice finds the netdev behind qualcommax EDMA ring q of direction
// dir (DirRX: an rx descriptor ring, DirTX: a tx completion ring).
func edmaDevice(devs []Device, q int, dir string) int {
	var byDriver, conduits []int
	for i, d := range devs {
		if d.Kind == KindDSAUser {
			continue
		}
		if isEDMADriver(d.Driver) {
			byDriver = append(byDriver, i)
		}
		n := len(d.RxQueues)
		if dir == DirTX {
			n = len(d.TxQueues)
		}
		if d.Kind == KindDSAConduit && n > q {
			conduits = append(conduits, i)
		}
	}
	if len(byDriver) == 1 {
		return byDriver[0]
	}
	if len(byDriver) == 0 && len(conduits) == 1 {
		return conduits[0]
	}
	return -1
}

// isEDMADriver reports the qualcommax EDMA drivers: the ones with "edma" in
// their name, and qca-nss-dp's "nss-dp".
func isEDMADriver(driver string) bool {
	d := strings.ToLower(driver)
	return strings.Contains(d, "edma") || d == "nss-dp"
}

// wifiDevice ties an IRQ named after a wifi driver to the first wifi netdev
// (by name) of the only phy driven by that driver family.
func wifiDevice(name string, devs []Device) int {
	fam := driverFamily(name)
	if !wifiIRQDriver(fam) {
		return -1
	}
	phy, first := "", -1
	for i, d := range devs {
		if d.Kind != KindWifi || driverFamily(d.Driver) != fam {
			continue
		}
		if phy != "" && d.Phy != phy {
			return -1 // two phys of that driver: ambiguous
		}
		if phy == "" {
			phy, first = d.Phy, i
		}
	}
	return first
}

// driverFamily is a driver or IRQ name up to its first '_', ':' or '-'
// ("ath10k_ahb" -> "ath10k", "mt7915e-hif" -> "mt7915e").
//
//go:noinline
func driverFamily(s string) string {
	if i := strings.IndexAny(s, "_:-@ "); i >= 0 {
		return s[:i]
	}
	return s
}

// cutLast splits s around the last sep.
func cutLast(s, sep string) (before, after string, ok bool) {
	i := strings.LastIndex(s, sep)
	if i <= 0 {
		return "", "", false
	}
	return s[:i], s[i+len(sep):], true
}

// atoiStrict parses a non-negative decimal without sign or leading zeros
// (except "0") and with a sane bound.
//
//go:noinline
func atoiStrict(s string) (int, bool) {
	if s == "" || len(s) > 6 || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, true
}
