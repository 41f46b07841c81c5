package plan

import (
	"fmt"
	"sort"
	"strings"

	"github.com/packet-steering/packet-steering/internal/cpuset"
	"github.com/packet-steering/packet-steering/internal/outline"
	"github.com/packet-steering/packet-steering/platform"
)

// rockchip's hotplug.d/net/40-net-smp-affinity (openwrt/openwrt
// target/linux/rockchip/armv8/base-files, read at c795a91): on every
// ACTION=add of any netdev it writes, per board_name, one hex mask to
// /proc/irq/N/smp_affinity for each of a few devices, N being the first
// /proc/interrupts row that ends in the device's name (grep -E "DEV$",
// retried every 2 s for up to 10 s). It writes no RPS, XPS or NAPI knob.
// The boards and masks are rockchipHookPins; docs/platforms.md has them
// with the history of the script.
//
// Where the plan pins every IRQ the hook pins on this board, on cores at
// least as big as the hook's, packet-steering takes the hook over: its
// hotplug script applies again after hotplug-call has run the hook
// (files/etc/hotplug.d/net/20-packet-steering), so the plan's placement
// stands after every event the hook reacts to, and removal runs the hook
// again (files/usr/share/packet-steering/stock.sh). Elsewhere (cores of
// equal capacity, where no rule here pins NIC IRQs; the stock modes) the
// hook's IRQs are left to it.

// rockchipHookPin is one set_interface_core call of the hook: the mask it
// writes and the /proc/interrupts name suffix it looks for ("eth0", or
// the xhci controller of a USB NIC).
type rockchipHookPin struct {
	_    outline.NoCompare
	mask string
	dev  string
	xhci bool // the row matches xhci-hcd:usb[0-9]+ (the USB NIC's controller)
}

// rockchipHookPins is the hook's case statement at c795a91: the writes
// for board_name board; ok is false for a board it has no case for.
func rockchipHookPins(board string) (pins []rockchipHookPin, ok bool) {
	switch board {
	case "armsom,sige7", "friendlyarm,nanopi-r3s", "friendlyarm,nanopi-r5c", "linkease,easepi-r1",
		"lunzn,fastrhino-r66s", "radxa,e25", "sinovoip,rk3568-bpi-r2pro":
		return []rockchipHookPin{{mask: "2", dev: "eth0"}, {mask: "4", dev: "eth1"}}, true
	case "friendlyarm,nanopi-r2c", "friendlyarm,nanopi-r2c-plus", "friendlyarm,nanopi-r2s",
		"radxa,cm3-io", "xunlong,orangepi-r1-plus", "xunlong,orangepi-r1-plus-lts":
		return []rockchipHookPin{{mask: "2", dev: "eth0"}, {mask: "4", dev: "eth1", xhci: true}}, true
	case "friendlyarm,nanopi-r4s", "friendlyarm,nanopi-r4s-enterprise", "friendlyarm,nanopi-r6c", "friendlyarm,nanopc-t6":
		return []rockchipHookPin{{mask: "10", dev: "eth0"}, {mask: "20", dev: "eth1"}}, true
	case "friendlyarm,nanopi-r5s":
		return []rockchipHookPin{{mask: "2", dev: "eth0"}, {mask: "4", dev: "eth1"}, {mask: "8", dev: "eth2"}}, true
	case "friendlyarm,nanopi-r6s":
		return []rockchipHookPin{{mask: "10", dev: "eth0"}, {mask: "20", dev: "eth1"}, {mask: "40", dev: "eth2"}}, true
	}
	return nil, false
}

// rockchipHookEvidence cites the script.
const rockchipHookEvidence = "openwrt/openwrt target/linux/rockchip/armv8/base-files/etc/hotplug.d/net/40-net-smp-affinity @c795a91"

// matches reports whether the hook's grep -E "DEV$" takes the row of the
// IRQ named name.
func (p rockchipHookPin) matches(name string) bool {
	if !p.xhci {
		return strings.HasSuffix(name, p.dev)
	}
	i := strings.LastIndex(name, "xhci-hcd:usb")
	return i >= 0 && isDigits(name[i+len("xhci-hcd:usb"):])
}

// rockchipHookIRQ is one IRQ the hook pins on this machine.
type rockchipHookIRQ struct {
	irq  *platform.IRQ
	dev  string // the netdev the hook means (eth1 for the R2S's xhci IRQ)
	cpus cpuset.Set
}

// rockchipHookIRQs is what the hook writes on this machine: for each of
// the board's calls, the first IRQ (in /proc/interrupts order) whose name
// matches; ok is false when the board is not among the hook's cases.
func rockchipHookIRQs(s *platform.Snapshot) (out []rockchipHookIRQ, ok bool) {
	pins, ok := rockchipHookPins(s.Identity.Board)
	if !ok {
		return nil, false
	}
	irqs := make([]*platform.IRQ, 0, len(s.IRQs))
	for i := range s.IRQs {
		irqs = append(irqs, &s.IRQs[i])
	}
	sort.SliceStable(irqs, func(i, j int) bool { return irqs[i].Number < irqs[j].Number })
	for _, p := range pins {
		set, err := cpuset.ParseMask(p.mask)
		if err != nil {
			continue
		}
		for _, q := range irqs {
			if p.matches(q.Name) {
				out = append(out, rockchipHookIRQ{irq: q, dev: p.dev, cpus: set})
				break
			}
		}
	}
	return out, true
}

// handleRockchipHook decides whether the plan takes the hook over on this
// board (see above) and, where it does not, drops the plan's actions on
// the IRQs the hook pins.
func handleRockchipHook(b *builder, s *platform.Snapshot, mode Mode) WriterStatus {
	st := WriterStatus{}
	hook, known := rockchipHookIRQs(s)
	if !known {
		st.State = WriterDeferred
		st.IRQs, _ = deferKnobs(b, rockchipIRQ, false)
		st.Text = fmt.Sprintf("/etc/hotplug.d/net/40-net-smp-affinity may pin the IRQs of eth0..eth2 after every new netdev; OpenWrt's version has no case for board %q, so whatever it pins here is unknown and those IRQs are left to it.", s.Identity.Board)
		return st
	}
	if len(hook) == 0 {
		st.State = WriterInactive
		st.Text = "/etc/hotplug.d/net/40-net-smp-affinity finds none of the IRQs it pins on this board: it writes nothing."
		return st
	}
	caps, differ := capacities(s)
	capOf := func(c int) float64 {
		if v, ok := caps[c]; ok {
			return v
		}
		return 1
	}
	var hookParts, planParts, short []string
	var pinned []int
	taken := true
	for _, h := range hook {
		hookParts = append(hookParts, fmt.Sprintf("irq %d %s to %s", h.irq.Number, h.irq.Name, cpuWord(h.cpus)))
		if h.irq.Refused != "" {
			continue // the kernel refuses its writes as the plan's (rule_irqfixed.go)
		}
		planned := b.plannedCPUs(actionKey{kind: KindIRQAffinity, irq: h.irq.Number})
		if planned.IsEmpty() {
			taken = false
			continue
		}
		hookCap := 0.0
		for _, c := range h.cpus.CPUs() {
			hookCap = max(hookCap, capOf(c))
		}
		for _, c := range planned.CPUs() {
			if capOf(c) < hookCap {
				taken = false
				short = append(short, fmt.Sprintf("irq %d on %s", h.irq.Number, cpuWord(planned)))
				break
			}
		}
		planParts = append(planParts, fmt.Sprintf("irq %d on %s", h.irq.Number, cpuWord(planned)))
		pinned = append(pinned, h.irq.Number)
	}
	what := fmt.Sprintf("/etc/hotplug.d/net/40-net-smp-affinity pins %s on %s after every new netdev (%s).",
		strings.Join(hookParts, ", "), s.Identity.Board, rockchipHookEvidence)
	if taken && len(pinned) == 0 {
		st.State = WriterInactive
		st.Text = what + " The kernel refuses every one of those writes."
		return st
	}
	if taken {
		st.State, st.Pinned = WriterTakenOver, pinned
		sort.Ints(st.Pinned)
		st.Text = what + " The plan places them on cores as big or bigger (" + strings.Join(planParts, ", ") +
			") and packet-steering applies again after the hook on every new netdev, so the plan's placement stands; removing packet-steering runs the hook again."
		return st
	}
	// Deferred: the hook's IRQs are left to it.
	for _, h := range hook {
		k := actionKey{kind: KindIRQAffinity, irq: h.irq.Number}
		delete(b.acts, k)
		st.IRQs = append(st.IRQs, h.irq.Number)
	}
	sort.Ints(st.IRQs)
	var moved []string
	if mode == ModeAuto || mode == ModeCustom || mode == ModeAdaptive {
		moved = rpsOffHookIRQs(b, s, hook)
	}
	st.State = WriterDeferred
	var why string
	switch {
	case mode != ModeAuto && mode != ModeCustom && mode != ModeAdaptive:
		why = "mode " + string(mode) + " places no IRQs"
	case !differ:
		why = "its cores are equal, and the plan pins NIC IRQs only to tell big cores from little ones: nothing measured says its one NIC per CPU is worse"
	case len(short) > 0:
		why = "the plan would put " + strings.Join(short, ", ") + ", a smaller core than the hook's"
	default:
		why = "the plan does not place all of them"
	}
	st.Text = what + " Here " + why + ", so those IRQs are left to it"
	if len(moved) > 0 {
		st.Text += ", and RPS is planned off the CPUs it gives them: " + strings.Join(moved, ", ")
	}
	st.Text += "."
	return st
}

// rpsOffHookIRQs moves the single-CPU RPS target of a device without NAPI
// threads off the CPU the deferred hook pins its IRQ to: that CPU already
// does its receive work (the stock script keeps RPS off a device's NAPI
// CPU for the same reason; planAroundIRQs does it for IRQs tied to a
// device by name, which the R2S's USB NIC's xhci IRQ is not). The hook
// writes after every apply, so its masks count, not what is read now.
func rpsOffHookIRQs(b *builder, s *platform.Snapshot, hook []rockchipHookIRQ) []string {
	pair := b.pairing()
	pic := newPicture(b, s, nil)
	// The hook's IRQs are receive work where it pins them.
	for _, h := range hook {
		if h.cpus.Len() == 1 {
			pic.add(h.cpus.CPUs()[0], loadThread)
		}
	}
	var moved []string
	for _, h := range hook {
		var d *platform.Device
		for _, x := range sortedDevices(s) {
			if x.Name == h.dev {
				d = x
			}
		}
		if d == nil || len(d.RxQueues) != 1 || pair.HasThreads(d.Name) || h.cpus.Len() == len(pic.ids) {
			continue
		}
		c := b.plannedRPS(d.Name, d.RxQueues[0].Name)
		if c < 0 || !h.cpus.Has(c) {
			continue
		}
		to := pic.pick(loadRPS, h.cpus)
		if to < 0 {
			continue
		}
		pic.add(to, loadRPS)
		pic.add(c, -loadRPS)
		b.rps(d, d.RxQueues[0], cpuset.Of(to))
		moved = append(moved, fmt.Sprintf("%s rx-0 from CPU%d to CPU%d", d.Name, c, to))
	}
	return moved
}
