package plan

import (
	"fmt"
	"strings"

	"github.com/packet-steering/packet-steering/internal/cpuset"
	"github.com/packet-steering/packet-steering/platform"
)

// PPPoE and other devices without a bus. No NIC's RSS hashes PPPoE (the
// session header hides the IP flow from it), so every PPPoE packet of a
// WAN arrives on one rx queue; after the carrier's receive path
// decapsulates it (pppoe_rcv, ppp_input), ppp_generic hands it to the ppp
// netdev with netif_rx, which is where RPS of pppoe-wan/queues/rx-0 spreads
// the routing, NAT and firewall work over CPUs. The stock script skips the
// ppp device (it has no bus device). Reports: openwrt/openwrt#15207
// (GL-MT6000: PPPoE capped at 1.3 Gb/s, one core at 100%), #24219 (MT7986:
// 1490 against 2200 Mb/s on the vendor SDK), #18044 (Cudy WR1300, mt7621:
// 150-160 Mb/s on 24.10, full speed with RPS on all CPUs), FriendlyWrt#77
// (NanoPi R2S: 190-200 of 700 Mb/s).
//
// So auto gives a ppp device's rx queues RPS to the preferred CPUs (the big
// cores on big.LITTLE) except those its carrier's receive work already
// runs on: the carrier is the device netifd runs the PPPoE session over
// (platform.Device.Carrier, from /etc/config/network), followed through
// VLAN and DSA lower links to the physical device; its work runs on its rx
// NAPI threads' CPUs (the threads of every netdev on its bus device:
// mtk_soc_eth's shared napi/mtk_eth threads), else where its IRQ runs,
// and on its RPS CPU when that is a single one. With fewer than two CPUs
// left, only the NAPI CPUs are left out.
//
// A ppp device is created when the session comes up, after the boot apply:
// the hotplug net `add` event (files/etc/hotplug.d/net/20-packet-steering)
// applies it then, scoped to that device. net.core.rps_default_mask
// (kernel 6.3+) is not used: it applies to every netdev created later
// (veth, VLANs, tunnels the plan does not manage), cannot exclude the
// carrier's CPU per device, and does not exist on the 5.15 kernel of
// OpenWrt 23.05.
//
// Other upper devices are not steered: RPS on a VLAN or a DSA user port is
// never consulted (their packets are delivered in the same receive call,
// without a netif_rx backlog: the dsa-user-rps hint; the ipq807x report
// measured no effect on lan1/wan); wireguard's decrypted packets do pass
// get_rps_cpu through its NAPI, but no public measurement says RPS there
// helps, so it is left to `tune`.

const evPPP = "PPPoE: RPS on the ppp device's rx-0, where netif_rx spreads the work after decapsulation, which no NIC's RSS can hash (openwrt/openwrt#15207: GL-MT6000 PPPoE capped at 1.3 Gb/s with one core at 100%%; #24219: MT7986 1490 against 2200 Mb/s; #18044: mt7621 150-160 Mb/s, full speed with RPS on all CPUs; FriendlyWrt#77: R2S 190-200 of 700 Mb/s): %s. A ppp device that appears later is steered by the hotplug add event, not net.core.rps_default_mask (which would reach every new netdev)."

// physicalOf follows lower links from name to a device with a bus device
// (VLAN -> port, DSA user port -> conduit); nil when there is none.
func physicalOf(s *platform.Snapshot, name string) *platform.Device {
	for depth := 0; depth < 8 && name != ""; depth++ {
		d := findDevice(s, name)
		if d == nil {
			return nil
		}
		if d.Kind == platform.KindDSAUser && len(d.Lowers) > 0 {
			name = d.Lowers[0] // the conduit does the receive work
			continue
		}
		if d.BusDevice != "" {
			return d
		}
		if len(d.Lowers) == 0 {
			return nil
		}
		name = d.Lowers[0]
	}
	return nil
}

// carrierCPUs is where a physical device's receive work runs in the plan:
// its and its bus siblings' rx NAPI threads, else its IRQs; plus its rx
// queues' RPS CPUs when each is a single CPU. napi reports the first part.
func carrierCPUs(b *builder, s *platform.Snapshot, p *platform.Device) (napi, rps cpuset.Set) {
	pair := b.pairing()
	for i := range s.Devices {
		d := &s.Devices[i]
		if d.BusDevice != p.BusDevice {
			continue
		}
		for _, t := range pair.Device(d.Name).RxThreads {
			napi = napi.Union(b.plannedCPUs(actionKey{kind: KindNAPIAffinity, pid: t.PID}))
		}
	}
	if napi.IsEmpty() {
		// Without threads the IRQs' CPUs; with counts, only the IRQs
		// that carry a tenth of the busiest one's (RSS may leave the
		// others idle).
		irqs := b.deviceIRQs(p.Name)
		var top uint64
		for _, q := range irqs {
			top = max(top, irqTotal(q))
		}
		for _, q := range irqs {
			if (q.TxQueue() >= 0 && q.RxQueue() < 0) || irqTotal(q)*10 < top {
				continue
			}
			if set := b.irqRunsOn(q); set.Len() < len(onlineCPUs(s)) {
				napi = napi.Union(set)
			}
		}
	}
	// RPS CPUs of the queues that carry traffic (by their IRQ counts,
	// when there are any).
	dp := pair.Device(p.Name)
	var top uint64
	for _, qp := range dp.Rx {
		if qp.IRQ != nil {
			top = max(top, irqTotal(qp.IRQ))
		}
	}
	for i, q := range p.RxQueues {
		if top > 0 && (dp.Rx[i].IRQ == nil || irqTotal(dp.Rx[i].IRQ)*10 < top) {
			continue
		}
		if c := b.plannedRPS(p.Name, q.Name); c >= 0 {
			rps = rps.Add(c)
		}
	}
	return napi, rps
}

// steerPPP gives every ppp device RPS away from its carrier's work.
func steerPPP(b *builder, s *platform.Snapshot, flows int) (string, []Hint) {
	pic := newPicture(b, s, nil)
	var done []string
	for _, d := range sortedDevices(s) {
		if d.Kind != platform.KindPPP || len(d.RxQueues) == 0 {
			continue
		}
		targets := pic.big
		if targets.IsEmpty() {
			targets = pic.all
		}
		why := "no carrier known (no netifd pppoe interface names it)"
		if p := physicalOf(s, d.Carrier); p != nil {
			napi, rps := carrierCPUs(b, s, p)
			// The preferred CPUs without the carrier's work, else
			// without its NAPI CPUs, else any CPU without them.
			pref := targets
			targets = cpuset.Set{}
			cands := []cpuset.Set{minus(pref, napi.Union(rps)), minus(pref, napi), minus(pic.all, napi.Union(rps)), minus(pic.all, napi), pref}
			for _, cand := range cands {
				if cand.Len() >= 2 {
					targets = cand
					break
				}
			}
			for _, cand := range cands {
				if targets.IsEmpty() && !cand.IsEmpty() {
					targets = cand
				}
			}
			why = fmt.Sprintf("carrier %s (%s) receives on %s", d.Carrier, p.Name, cpuWord(napi.Union(rps)))
			if napi.Union(rps).IsEmpty() {
				why = fmt.Sprintf("carrier %s (%s), its receive CPU unknown", d.Carrier, p.Name)
			}
		}
		if targets.IsEmpty() {
			continue
		}
		for _, q := range d.RxQueues {
			b.rps(d, q, targets)
			b.flowCnt(d, q, flows)
		}
		done = append(done, fmt.Sprintf("%s RPS to %s (%s)", d.Name, cpuWord(targets), why))
	}
	if len(done) == 0 {
		return "", nil
	}
	return fmt.Sprintf(evPPP, strings.Join(done, "; ")), nil
}

// minus is a without the CPUs of b.
func minus(a, b cpuset.Set) cpuset.Set {
	for _, c := range b.CPUs() {
		a = a.Remove(c)
	}
	return a
}

// irqTotal is an IRQ's count over all CPUs.
func irqTotal(q *platform.IRQ) uint64 {
	var n uint64
	for _, c := range q.Counts {
		n += c
	}
	return n
}
