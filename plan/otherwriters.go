package plan

import (
	"fmt"
	"sort"
	"strings"

	"github.com/packet-steering/packet-steering/internal/cpuset"
	"github.com/packet-steering/packet-steering/internal/outline"
	"github.com/packet-steering/packet-steering/platform"
)

// Other writers of the same knobs (platform.OtherWriter), and what the plan
// does about each. Every writer OpenWrt ships is either taken over (the
// package's scripts disable it and hand it back on removal, and the plan
// covers what it did) or deferred to (the plan leaves the knobs it writes
// alone). The inventory, with the public path of each, is in README.md
// ("Other writers of the same knobs"); the decision and its evidence, per
// writer:
//
//   - netifd's packet_steering service, with the target hook it runs in
//     place of its own rule (usr/libexec/platform/packet-steering.sh):
//     taken over; legacy reproduces netifd's own rule, the bcm53xx and
//     bcm4908 profiles those targets' hooks. A hook on another target runs
//     only from that service, so the takeover stops it too; no profile
//     reproduces it, and status says so.
//   - smp_affinity on qualcommax/ipq807x (etc/init.d/smp_affinity, START=93,
//     after packet-steering at every boot): taken over. Its EDMA placement
//     (every rx ring IRQ and the one RX NAPI thread on one CPU) is what seed
//     002 measured against: the qualcommax-ipq807x profile spreads the rings
//     instead. Its wifi ring placement (ath11k reo2host-destination-ring1..4
//     on CPU 0..3, wbm2host-tx-completions-ring1..3 and
//     ppdu-end-interrupts-mac1..3 on CPU 1..3, the same in every version of
//     the script) is the only evidence there is for those IRQs, so the
//     profile places them the same way (ipq807xWifiIRQs).
//   - smp_affinity on other targets (qualcommax/ipq60xx; qualcommbe/ipq95xx
//     where a board carries it): deferred. No measurement here covers those
//     SoCs. The ipq60xx script pins the EDMA rx/tx IRQs and the eth0 RX and
//     TX NAPI threads (the pinning openwrt/openwrt PR #24203 describes: it
//     reports descriptor overruns without it; older versions pinned the
//     ath11k rings, copy engines and USB), the ipq95xx one the EDMA
//     rings: those IRQs and the eth0 NAPI threads are left to it.
//   - rockchip's hotplug.d/net/40-net-smp-affinity: taken over per board
//     (writer_rockchip.go). It runs after packet-steering's hotplug script
//     on every new netdev and pins the IRQ of eth0..eth2 (and an xhci USB
//     NIC) per board. It cannot be disabled without editing base-files, so
//     packet-steering's hotplug script applies again after it instead.
//     Where the plan pins every IRQ it pins, on cores at least as big (the
//     big.LITTLE boards: R4S, R6S, by cpu_capacity), the plan's placement
//     stands; where the cores are equal (R2S, R5S) no rule here pins NIC
//     IRQs and nothing measured says its one NIC per CPU is worse, so its
//     IRQs are left to it, as on a board it has no case for.
//   - irqbalance (packages feed): when it runs, IRQ placement is left to
//     it, except the IRQs listed as `banirq` in /etc/config/irqbalance,
//     which irqbalance never moves and the plan pins.
//
// A writer whose own switch is off (smp_affinity.general.enable 0,
// irqbalance not running and not enabled) is inactive; a disabled one that
// packet-steering did not disable is inactive too.

// Writer states (WriterStatus.State).
const (
	WriterTakenOver = "taken-over"
	WriterDeferred  = "deferred"
	WriterInactive  = "inactive"
	// WriterConflict: netifd's service is enabled: it writes the same
	// knobs at its next start or reload, until packet-steering's service
	// starts (or reloads) and takes it over again.
	WriterConflict = "conflict"
)

// WriterStatus is one other writer and what the plan does about it.
type WriterStatus struct {
	Name  string `json:"name"`
	Path  string `json:"path,omitempty"`
	State string `json:"state"`
	Text  string `json:"text"`
	// IRQs and Threads are the knobs left to it (deferred); Pinned the
	// IRQs the plan pins although it runs (irqbalance's banirq, the
	// rockchip hook's IRQs where it is taken over).
	IRQs    []int `json:"irqs,omitempty"`
	Threads []int `json:"threads,omitempty"`
	Pinned  []int `json:"pinned,omitempty"`
}

// targetIPQ807x is the target whose smp_affinity script is taken over.
const targetIPQ807x = "qualcommax/ipq807x"

// smpAffinityEvidence cites the scripts.
const smpAffinityEvidence = "openwrt/openwrt target/linux/qualcommax/ipq807x/base-files/etc/init.d/smp_affinity"

// ipq807xWifiIRQs is the wifi ring placement of the ipq807x smp_affinity
// script: IRQ name -> CPU.
var ipq807xWifiIRQs = map[string]int{
	"reo2host-destination-ring1":    0,
	"reo2host-destination-ring2":    1,
	"reo2host-destination-ring3":    2,
	"reo2host-destination-ring4":    3,
	"wbm2host-tx-completions-ring1": 1,
	"wbm2host-tx-completions-ring2": 2,
	"wbm2host-tx-completions-ring3": 3,
	"ppdu-end-interrupts-mac1":      1,
	"ppdu-end-interrupts-mac2":      2,
	"ppdu-end-interrupts-mac3":      3,
}

// smpAffinityIRQ reports whether some version of a target's smp_affinity
// script pins the IRQ named name: the ath11k rings, copy engines (ce0..),
// the EDMA rings (edma_* on ipq807x; rxdesc_N, txcmpl_N, misc on ipq95xx)
// and the xhci USB controller.
func smpAffinityIRQ(name string) bool {
	for _, p := range []string{"reo2host-destination-ring", "wbm2host-tx-completions-ring", "ppdu-end-interrupts-mac", "edma_", "xhci-hcd:usb"} {
		if strings.Contains(name, p) {
			return true
		}
	}
	if name == "misc" || strings.HasSuffix(name, "_misc") {
		return true
	}
	for _, p := range []string{"rxdesc_", "txcmpl_", "ce"} {
		if rest, ok := strings.CutPrefix(name, p); ok && rest != "" && isDigits(rest) {
			return true
		}
	}
	return false
}

// rockchipIRQ reports whether 40-net-smp-affinity pins the IRQ named name:
// it takes the first /proc/interrupts row ending in eth0, eth1 or eth2, or
// matching xhci-hcd:usbN.
func rockchipIRQ(name string) bool {
	for _, d := range []string{"eth0", "eth1", "eth2"} {
		if strings.HasSuffix(name, d) {
			return true
		}
	}
	rest, ok := strings.CutPrefix(name, "xhci-hcd:usb")
	return ok && rest != "" && isDigits(rest)
}

//go:noinline
func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// handleWriters decides each other writer's state and changes the plan
// accordingly: it adds the ipq807x wifi ring placement when that target's
// script is taken over (auto and custom), and drops the actions on knobs
// left to a deferred writer. It returns the writers' states and an
// evidence sentence for what it added ("" when nothing).
func handleWriters(b *builder, s *platform.Snapshot, mode Mode) ([]WriterStatus, string) {
	var out []WriterStatus
	evidence := ""
	for _, w := range writersOf(s) {
		st := WriterStatus{Name: w.Name, Path: w.Path}
		switch w.Name {
		case platform.WriterNetifd:
			switch {
			case w.Enabled:
				st.State, st.Text = WriterConflict, "netifd's packet_steering service is enabled: it writes the same knobs when it starts or reloads; restarting packet-steering disables it again."
			default:
				st.State, st.Text = WriterTakenOver, joinText("netifd's packet_steering service is disabled; mode legacy is its rule.", restoreText(w))
			}
			if w.Hook != "" {
				st.Text = joinText(st.Text, hookText(w.Hook, s.Identity.Target))
			}
		case platform.WriterSMPAffinity:
			switch {
			case w.ConfigOff:
				st.State, st.Text = WriterInactive, "smp_affinity is switched off in /etc/config/smp_affinity."
			case w.Enabled:
				st.State = WriterDeferred
				// Every version that pins the EDMA IRQs pins eth0's
				// RX and TX NAPI threads with them.
				st.IRQs, st.Threads = deferKnobs(b, smpAffinityIRQ, true)
				st.Text = "/etc/init.d/smp_affinity pins IRQs and the eth0 NAPI threads at boot (this target's own placement; no measurement here says otherwise): those are left to it."
				if s.Identity.Target == targetIPQ807x {
					st.Text = "/etc/init.d/smp_affinity is enabled and will overwrite the plan at boot: its IRQs and the eth0 NAPI threads are left to it. Restarting packet-steering takes it over."
				}
			case w.TakenOver:
				st.State = WriterTakenOver
				st.Text = joinText("/etc/init.d/smp_affinity is disabled; the profile places what it placed (the wifi ring IRQs as it did, the EDMA rings as measured).", restoreText(w))
				if s.Identity.Target == targetIPQ807x && (mode == ModeAuto || mode == ModeCustom) {
					if n := placeIPQ807xWifi(b, s); n > 0 {
						evidence = fmt.Sprintf("Wifi ring IRQs (%d) as the target's smp_affinity script placed them (%s).", n, smpAffinityEvidence)
					}
				}
			default:
				st.State, st.Text = WriterInactive, "/etc/init.d/smp_affinity is disabled."
			}
		case platform.WriterRockchipIRQs:
			r := handleRockchipHook(b, s, mode) // writer_rockchip.go
			st.State, st.Text, st.IRQs, st.Pinned = r.State, r.Text, r.IRQs, r.Pinned
		case platform.WriterIRQBalance:
			if !w.Running && (!w.Enabled || w.ConfigOff) {
				st.State, st.Text = WriterInactive, "irqbalance is installed but not running."
				break
			}
			st.State = WriterDeferred
			st.IRQs, st.Pinned = deferIRQBalance(b, w.BanIRQs)
			switch {
			case len(st.IRQs) == 0 && len(st.Pinned) > 0:
				st.Text = "irqbalance runs; the IRQs the plan pins are listed as banirq in /etc/config/irqbalance, so it leaves them alone."
			case len(st.IRQs) > 0:
				st.Text = "irqbalance runs: IRQ placement is left to it (the plan does not pin IRQs " + intList(st.IRQs) + "); list them as banirq in /etc/config/irqbalance to have packet-steering pin them."
			default:
				st.Text = "irqbalance runs: IRQ placement is left to it."
			}
		default:
			continue
		}
		out = append(out, st)
	}
	return out, evidence
}

// writersOf is the snapshot's writers; a running irqbalance counts even in
// a snapshot that lists only its process (one written before writers were
// read).
func writersOf(s *platform.Snapshot) []platform.OtherWriter {
	ws := s.Writers
	for _, w := range ws {
		if w.Name == platform.WriterIRQBalance {
			return ws
		}
	}
	for _, p := range s.Processes {
		if p == "irqbalance" {
			return append(append([]platform.OtherWriter(nil), ws...), platform.OtherWriter{Name: platform.WriterIRQBalance, Running: true})
		}
	}
	return ws
}

// hookText says what netifd's service ran on this target instead of its
// own rule, and whether a profile reproduces it (the bcm53xx and bcm4908
// profiles are those targets' hooks; see docs/platforms.md).
func hookText(hook, target string) string {
	t := "On this target it runs /" + hook + " in place of its own rule"
	if strings.HasPrefix(target, "bcm53xx/") || strings.HasPrefix(target, "bcm4908/") {
		return t + "; mode auto's profile for this target reproduces that hook."
	}
	return t + "; no profile reproduces that hook, so mode legacy is netifd's own rule, not the hook's."
}

// joinText joins the non-empty sentences with a space.
func joinText(parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, " ")
}

// restoreText says what removal restores.
func restoreText(w platform.OtherWriter) string {
	if !w.TakenOver {
		return ""
	}
	if w.WasEnabled {
		return "Removing packet-steering enables it again."
	}
	return "It was disabled before packet-steering was installed and stays so on removal."
}

// placeIPQ807xWifi pins the ath11k ring IRQs as the smp_affinity script
// did, where the plan does not place them otherwise and the CPU is online.
func placeIPQ807xWifi(b *builder, s *platform.Snapshot) int {
	online := map[int]bool{}
	for _, c := range s.CPUs {
		online[c.ID] = c.Online
	}
	n := 0
	for i := range s.IRQs {
		irq := &s.IRQs[i]
		cpu, ok := ipq807xWifiIRQs[irq.Name]
		if !ok || !online[cpu] {
			continue
		}
		if _, planned := b.acts[actionKey{kind: KindIRQAffinity, irq: irq.Number}]; planned {
			continue
		}
		b.irq(irq, cpuset.Of(cpu))
		n++
	}
	return n
}

// deferKnobs drops the plan's IRQ actions whose IRQ name matches, and with
// eth0Threads its eth0 NAPI thread actions; it returns the IRQ numbers and
// thread PIDs dropped.
func deferKnobs(b *builder, match func(name string) bool, eth0Threads bool) (irqs, threads []int) {
	for k, a := range b.acts {
		switch {
		case k.kind == KindIRQAffinity && match(a.Name):
			irqs = append(irqs, a.IRQ)
			delete(b.acts, k)
		case k.kind == KindNAPIAffinity && eth0Threads && strings.HasPrefix(a.Thread, "napi/eth0-"):
			threads = append(threads, a.PID)
			delete(b.acts, k)
		}
	}
	sort.Ints(irqs)
	sort.Ints(threads)
	return irqs, threads
}

// deferIRQBalance drops the plan's IRQ actions except for banned IRQs; it
// returns the IRQs dropped and those kept.
func deferIRQBalance(b *builder, banned []int) (dropped, kept []int) {
	ban := map[int]bool{}
	for _, n := range banned {
		ban[n] = true
	}
	for k, a := range b.acts {
		if k.kind != KindIRQAffinity {
			continue
		}
		if ban[a.IRQ] {
			kept = append(kept, a.IRQ)
			continue
		}
		dropped = append(dropped, a.IRQ)
		delete(b.acts, k)
	}
	sort.Ints(dropped)
	sort.Ints(kept)
	return dropped, kept
}

// intList writes numbers as "60-63, 70".
func intList(ns []int) string {
	var parts []string
	for i := 0; i < len(ns); {
		j := i
		for j+1 < len(ns) && ns[j+1] == ns[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, outline.Itoa(ns[i])+"-"+outline.Itoa(ns[j]))
		} else {
			parts = append(parts, outline.Itoa(ns[i]))
		}
		i = j + 1
	}
	return strings.Join(parts, ", ")
}
