package plan

import (
	"strings"

	"github.com/packet-steering/packet-steering/internal/cpuset"
	"github.com/packet-steering/packet-steering/internal/outline"
	"github.com/packet-steering/packet-steering/platform"
)

// Choice is what a profile does.
type Choice string

// The choices a profile can make.
const (
	// ChoiceNothing manages no knob at all.
	ChoiceNothing Choice = "nothing"
	// ChoiceOff, ChoiceLegacy and ChoiceAll run the stock script's modes
	// 0, 1 and 2 exactly as the modes off, legacy and all do.
	ChoiceOff    Choice = "off"
	ChoiceLegacy Choice = "legacy"
	ChoiceAll    Choice = "all"
	// ChoiceRSSPerCPU runs the generic auto rule: rss-per-cpu for devices
	// with at least one rx queue per CPU, no funnelling of other multi-queue
	// devices, the stock rule for the rest.
	ChoiceRSSPerCPU Choice = "rss-per-cpu"
	// ChoiceFixed writes the profile's RPS masks and nothing else, as the
	// stock per-target hooks do.
	ChoiceFixed Choice = "fixed"
)

// Match selects the machines a profile is for. The identity fields (Targets,
// Boards, Compatible) match when any entry matches, or when all are empty;
// CPUs and Offload narrow it further when set.
type Match struct {
	// Targets are OpenWrt targets (DISTRIB_TARGET): "qualcommax/ipq807x"
	// matches exactly, "bcm53xx/*" any subtarget.
	Targets []string
	// Boards are board names (tmp/sysinfo/board_name).
	Boards []string
	// Compatible are device-tree compatible strings; one is enough.
	Compatible []string
	// CPUs are the online CPU counts the profile was measured on; empty is
	// any count.
	CPUs []int
	// MaxCPUs, when > 0, matches only machines with at most that many
	// online CPUs.
	MaxCPUs int
	// Offload lists the flow-offload states (OffloadNone, OffloadSoftware,
	// OffloadHardware); empty is any.
	Offload []string
}

// FixedRPS is one rx queue's RPS mask in a ChoiceFixed profile.
type FixedRPS struct {
	_      outline.NoCompare
	Device string
	Queue  string
	Mask   string
}

// ProfileHint is advice a profile gives under a flow-offload state.
type ProfileHint struct {
	Offload []string
	ID      string
	Text    string
}

// Profile is one row of the auto table: a target, what matches it, what
// auto does there and the evidence for it.
type Profile struct {
	Name     string
	Match    Match
	Choice   Choice
	RPS      []FixedRPS
	Evidence string
	Hints    []ProfileHint
	// Rules runs auto's board rules (rule_board.go) after the choice;
	// ChoiceBoard always does.
	Rules bool
}

// Evidence texts, with their references.
const (
	evSingleCPU = "Any steering on a single CPU only adds work: the bcm53xx commit fcbd39689ebf (target/linux/bcm53xx fastnetwork) skips BCM47081 (1 CPU) because \"any steering on 1 CPU worsens network performance\"; the stock script itself exits below 2 CPUs."
	evBCM53xx   = "OpenWrt commit fcbd39689ebf \"bcm53xx: enable & setup packet steering\" (target/linux/bcm53xx/base-files/usr/libexec/platform/packet-steering.sh): iperf TCP LAN->WAN through NAT, eth0 IRQ on CPU0. "
	evBCM4908   = "The stock bcm4908 hook (openwrt/openwrt target/linux/bcm4908/base-files/usr/libexec/platform/packet-steering.sh): "
	evIPQ807x   = "openwrt-devel report \"packet steering and bidirectional forwarding on ipq807x\" (RAX120 v1, ipq807x, 4 EDMA rx rings, 4 CPUs, threaded NAPI; iperf3 UDP 900 Mb/s bidirectional, 8 runs): the stock next-CPU rule (queue i RPS to CPU i+1) lost 28.6-49.0% in 4 of 6 flow pairs; RPS off 0.35-1.61%; RPS off with software flow offload 0.00-0.37%. RPS on the DSA user ports (lan1, wan) had no effect: RPS runs on the conduit's rings. Kernel Documentation/networking/scaling.rst: with one RSS queue per CPU, RPS is redundant."
	evIPQ40xx   = "Keep the stock next-CPU rule: it was written for ipq40xx (openwrt/openwrt acce25b789 \"improve packet steering on ipq40xx (and possibly others)\") and no measurement here says otherwise. Users reported single-CPU load on 24.10 (openwrt/openwrt#17611): get_queues shows the placement."
	evMT7621    = "RPS to all CPUs (stock mode 2) measured 350/350 Mb/s against 220/350 with the default rule on a 350/350 line (openwrt/openwrt#19369, #18901)."
	evMochabin  = "Steering off: with the stock rule 1511 Mb/s down, with steering off 6758 Mb/s (openwrt/openwrt#24023)."
	evRSS       = "rss-per-cpu: a device with at least one rx queue per CPU keeps RSS spreading: rx NAPI thread and per-queue IRQ of rx queue i on CPU i mod n, RPS off, XPS tx-i from CPU i, and the tx-completion thread and tx IRQ of tx queue i on the CPUs XPS sends tx-i from (Documentation/networking/scaling.rst: with one hardware queue per CPU RPS is redundant; the openwrt-devel ipq807x report measured the stock next-CPU rule as the worst choice on such a device). Other devices follow the stock rule, multi-queue ones without funnelling all queues into one CPU."
)

// The bcm53xx and bcm4908 rows identify their targets by these (also
// without DISTRIB_TARGET).
var (
	bcm53xxTargets    = []string{"bcm53xx/*"}
	bcm53xxCompatible = []string{"brcm,bcm4708", "brcm,bcm4709", "brcm,bcm47094", "brcm,bcm53012", "brcm,bcm53016"}
	bcm4908Targets    = []string{"bcm4908/*"}
	bcm4908Compatible = []string{"brcm,bcm4908", "brcm,bcm4906"}
)

// Profiles is the auto table, first match wins. Adding a target is adding a
// row with its evidence. Each row has a section in docs/platforms.md with
// its public source. The slice is the caller's; the rows' own slices are
// shared with the table and must not be changed.
func Profiles() []Profile {
	out := make([]Profile, 0, len(seededProfiles)+len(boardProfiles))
	return append(append(out, seededProfiles...), boardProfiles...)
}

// seededProfiles are the first rows of the table. A package-level table,
// never written, that the compiler lays out as data: built by a function
// at each call it was 4 KB of code.
var seededProfiles = []Profile{
	{
		Name:     "single-cpu",
		Match:    Match{MaxCPUs: 1},
		Choice:   ChoiceNothing,
		Evidence: evSingleCPU,
	},
	{
		Name:     "bcm53xx",
		Match:    Match{Targets: bcm53xxTargets, Compatible: bcm53xxCompatible, CPUs: []int{2}, Offload: []string{OffloadNone}},
		Choice:   ChoiceFixed,
		RPS:      []FixedRPS{{Device: "br-lan", Queue: "rx-0", Mask: "2"}, {Device: "eth0", Queue: "rx-0", Mask: "0"}},
		Evidence: evBCM53xx + "Without flow offload the best row is eth0 0, br-lan 2 (574 Mb/s BCM4708, 941 BCM47094; no RPS at all: 387, 671).",
	},
	{
		Name:     "bcm53xx-sw-offload",
		Match:    Match{Targets: bcm53xxTargets, Compatible: bcm53xxCompatible, CPUs: []int{2}, Offload: []string{OffloadSoftware}},
		Choice:   ChoiceFixed,
		RPS:      []FixedRPS{{Device: "eth0", Queue: "rx-0", Mask: "2"}},
		Evidence: evBCM53xx + "With software flow offload the best rows have eth0 2 (940-942 Mb/s BCM4708 against 707 without RPS); br-lan does not matter.",
	},
	{
		Name:     "bcm53xx-hw-offload",
		Match:    Match{Targets: bcm53xxTargets, Compatible: bcm53xxCompatible, CPUs: []int{2}, Offload: []string{OffloadHardware}},
		Choice:   ChoiceFixed,
		RPS:      []FixedRPS{{Device: "br-lan", Queue: "rx-0", Mask: "0"}, {Device: "eth0", Queue: "rx-0", Mask: "0"}},
		Evidence: evBCM53xx + "With hardware flow offload forwarding bypasses the CPU: both 0, as the target hook sets.",
	},
	{
		Name:     "bcm4908-2cpu",
		Match:    Match{Targets: bcm4908Targets, Compatible: bcm4908Compatible, CPUs: []int{2}, Offload: []string{OffloadNone}},
		Choice:   ChoiceFixed,
		RPS:      []FixedRPS{{Device: "br-lan", Queue: "rx-0", Mask: "2"}, {Device: "eth0", Queue: "rx-0", Mask: "2"}},
		Evidence: evBCM4908 + "without flow offload eth0 and br-lan RPS to every CPU but CPU0 (2 on 2 CPUs).",
	},
	{
		Name:     "bcm4908-4cpu",
		Match:    Match{Targets: bcm4908Targets, Compatible: bcm4908Compatible, CPUs: []int{4}, Offload: []string{OffloadNone}},
		Choice:   ChoiceFixed,
		RPS:      []FixedRPS{{Device: "br-lan", Queue: "rx-0", Mask: "e"}, {Device: "eth0", Queue: "rx-0", Mask: "e"}},
		Evidence: evBCM4908 + "without flow offload eth0 and br-lan RPS to every CPU but CPU0 (e on 4 CPUs).",
	},
	{
		Name:     "bcm4908-offload",
		Match:    Match{Targets: bcm4908Targets, Compatible: bcm4908Compatible, CPUs: []int{2, 4}, Offload: []string{OffloadSoftware, OffloadHardware}},
		Choice:   ChoiceFixed,
		RPS:      []FixedRPS{{Device: "br-lan", Queue: "rx-0", Mask: "0"}, {Device: "eth0", Queue: "rx-0", Mask: "0"}},
		Evidence: evBCM4908 + "with software or hardware flow offload RPS off on eth0 and br-lan (\"BCM4908 always reaches ~940 Mb/s\").",
	},
	{
		Name: "qualcommax-ipq807x",
		Match: Match{
			Targets:    []string{"qualcommax/ipq807x"},
			Compatible: []string{"qcom,ipq8074", "qcom,ipq8072", "qcom,ipq8078"},
		},
		Choice:   ChoiceRSSPerCPU,
		Evidence: evIPQ807x,
		Hints: []ProfileHint{{
			Offload: []string{OffloadNone},
			ID:      "swoffload-helps",
			Text:    "Software flow offload helps on ipq807x: with RPS off it cut the worse direction's loss from 0.35-1.61% to 0.00-0.37% (openwrt-devel ipq807x report). Enable it in Network > Firewall > Routing/NAT Offloading.",
		}},
	},
	{
		Name: "ipq40xx",
		Match: Match{
			Targets:    []string{"ipq40xx/*"},
			Compatible: []string{"qcom,ipq4019", "qcom,ipq4018"},
		},
		Choice:   ChoiceLegacy,
		Evidence: evIPQ40xx,
	},
	{
		Name: "ramips-mt7621",
		Match: Match{
			Targets:    []string{"ramips/mt7621"},
			Compatible: []string{"mediatek,mt7621-soc"},
		},
		Choice:   ChoiceAll,
		Evidence: evMT7621,
	},
	{
		Name: "mvebu-mochabin",
		Match: Match{
			Boards:     []string{"globalscale,mochabin"},
			Compatible: []string{"globalscale,mochabin"},
		},
		Choice:   ChoiceOff,
		Evidence: evMochabin,
	},
}

// The rows for today's boards follow (boardProfiles, profiles_boards.go).

// matches reports whether the profile applies to the machine.
func (m Match) matches(id platform.Identity, cpus int, offload string) bool {
	if m.MaxCPUs > 0 && cpus > m.MaxCPUs {
		return false
	}
	if len(m.CPUs) > 0 && !containsInt(m.CPUs, cpus) {
		return false
	}
	if len(m.Offload) > 0 && !containsString(m.Offload, offload) {
		return false
	}
	if len(m.Targets) == 0 && len(m.Boards) == 0 && len(m.Compatible) == 0 {
		return true
	}
	for _, t := range m.Targets {
		if targetMatches(t, id.Target) {
			return true
		}
	}
	for _, b := range m.Boards {
		if b == id.Board {
			return true
		}
	}
	for _, c := range m.Compatible {
		if containsString(id.Compatible, c) {
			return true
		}
	}
	return false
}

// targetMatches matches "family/*" against any subtarget of family, and
// anything else exactly.
func targetMatches(pattern, target string) bool {
	if target == "" {
		return false
	}
	if fam, ok := strings.CutSuffix(pattern, "/*"); ok {
		return target == fam || strings.HasPrefix(target, fam+"/")
	}
	return pattern == target
}

func containsInt(list []int, n int) bool {
	for _, x := range list {
		if x == n {
			return true
		}
	}
	return false
}

// MatchProfile returns the first profile of the table that applies to the
// snapshot, or false. cpus is the number of online CPUs.
func MatchProfile(s *platform.Snapshot) (Profile, bool) {
	n := len(onlineCPUs(s))
	off := Offload(s)
	for _, p := range Profiles() {
		if p.Match.matches(s.Identity, n, off) {
			return p, true
		}
	}
	return Profile{}, false
}

// planContext is what auto decided.
type planContext struct {
	policy   string
	evidence string
	hints    []Hint
}

// planAuto plans auto: the first matching profile, else the generic rule.
func planAuto(b *builder, s *platform.Snapshot, flows int, extra map[string]bool, offload string) planContext {
	prof, ok := MatchProfile(s)
	if !ok {
		r := newStockRun(b, s, true)
		weighCapacity(r, s) // rule_capacity.go
		r.flows, r.rss, r.spread = flows, true, true
		r.run(collectStockDevices(s, extra))
		bev, bhints := boardRules(b, s, flows) // rule_board.go
		bev = joinEvidence(r.bigEvidence(), bev)
		if len(r.rssDevices) > 0 || len(r.rssBigDevices) > 0 {
			ev := ""
			if len(r.rssDevices) > 0 {
				ev = evRSS + " Applied to: " + strings.Join(r.rssDevices, ", ") + "."
			}
			return planContext{policy: PolicyRSSPerCPU, evidence: joinEvidence(ev, bev), hints: bhints}
		}
		return planContext{
			policy:   PolicyLegacy,
			evidence: joinEvidence("No profile and no device with one rx queue per CPU: the stock rule ("+stockScript+"), multi-queue devices without funnelling.", bev),
			hints: append([]Hint{{
				ID:   HintNoEvidence,
				Text: "No measurement covers this board (target " + orUnknown(s.Identity.Target) + ", board " + orUnknown(s.Identity.Board) + "): auto falls back to the stock rule. `packet-steering tune` can measure alternatives.",
			}}, bhints...),
		}
	}
	ctx := planContext{policy: prof.Name, evidence: prof.Evidence}
	for _, h := range prof.Hints {
		if containsString(h.Offload, offload) {
			ctx.hints = append(ctx.hints, Hint{ID: h.ID, Text: h.Text})
		}
	}
	switch prof.Choice {
	case ChoiceNothing:
	case ChoiceOff, ChoiceLegacy, ChoiceAll:
		r := newStockRun(b, s, false)
		r.flows = flows
		r.disable = prof.Choice == ChoiceOff
		r.allCPUs = prof.Choice == ChoiceAll
		r.run(collectStockDevices(s, extra))
	case ChoiceRSSPerCPU, ChoiceBoard:
		r := newStockRun(b, s, true)
		weighCapacity(r, s) // rule_capacity.go
		r.flows, r.rss, r.spread = flows, true, true
		r.run(collectStockDevices(s, extra))
		ctx.evidence = joinEvidence(ctx.evidence, r.bigEvidence())
	case ChoiceFixed:
		applyFixed(b, s, prof.RPS, flows)
	}
	if prof.Rules || prof.Choice == ChoiceBoard || prof.Choice == ChoiceRSSPerCPU {
		bev, bhints := boardRules(b, s, flows) // rule_board.go
		ctx.evidence = joinEvidence(ctx.evidence, bev)
		ctx.hints = append(ctx.hints, bhints...)
	}
	return ctx
}

// applyFixed writes a fixed profile's masks; a device or queue the machine
// does not have is left out.
func applyFixed(b *builder, s *platform.Snapshot, rps []FixedRPS, flows int) {
	for _, f := range rps {
		d := findDevice(s, f.Device)
		if d == nil {
			continue
		}
		set, err := cpuset.ParseMask(f.Mask)
		if err != nil {
			continue
		}
		for _, q := range d.RxQueues {
			if q.Name == f.Queue {
				b.rps(d, q, set)
				b.flowCnt(d, q, flows)
			}
		}
	}
}

func findDevice(s *platform.Snapshot, name string) *platform.Device {
	for i := range s.Devices {
		if s.Devices[i].Name == name {
			return &s.Devices[i]
		}
	}
	return nil
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
