package plan

// The profiles of the routers people run now (docs/platforms.md "Boards"),
// after the seeded rows of Profiles. Where the public evidence is thin
// they say so and point at `tune`.

const (
	evFilogic  = "MediaTek filogic: generic auto rule and board rules. The stock script pins all mt76 NAPI threads and the tx worker to one CPU (openwrt/mt76#1072: 94-99% on CPU3, CPU0-2 under 20%; openwrt/openwrt#24697: 1.45 -> 2.09 Gbit/s with the tx worker moved; #25016); PPPoE is capped by one CPU (#15207: GL-MT6000 1.3 Gb/s; #24219: 1490 against 2200 Mb/s)."
	evIPQ60xx  = "qualcommax ipq60xx: generic auto rule and board rules. openwrt/openwrt#24203: 600+ Mb/s more with threaded NAPI and pinned IRQs (now set by qca-edma itself); nothing public compares RPS placements here."
	evIPQ50xx  = "qualcommax ipq50xx: generic auto rule and board rules; nothing public measures RPS placements without hardware acceleration."
	evIPQ50HW  = "qualcommax ipq50xx with hardware flow offload: steering off (Telecominfraproject/wlan-ap#1283: with PPE/NSS/SFE software RPS brings no benefit and uneven CPU load)."
	evIPQ806x  = "ipq806x: generic auto rule and board rules. openwrt/openwrt#11676: 650 -> 1019 Mb/s with steering and flow offload together; #9887: negligible differences from steering alone."
	evLantiq   = "lantiq xrx200 (2 VPEs): RPS to all CPUs (stock mode 2) and board rules. openwrt/openwrt#2553: all-CPU masks over RPS to the non-IRQ CPU only; one report."
	evRockchip = "rockchip: generic auto rule and board rules, big cores first by cpu_capacity (StarWhiz/NanoPi-R6S-CPU-Optimization-for-Gigabit-SQM: cake SQM near 800 Mb/s on the A55 cores, over 1,400 on the A76; sbwml/builder#38; OpenWrt's 40-net-smp-affinity: R4S IRQs on the A72 cores); Actions-FriendlyWrt#77: R2S PPPoE 190-200 of 700 Mb/s."
	evBCM27xx  = "bcm27xx (Raspberry Pi 4, 5): generic auto rule and board rules; the Pi 5's RP1 refuses IRQ affinity (raspberrypi/linux#6077), so its IRQs are planned around. Nothing public compares RPS placements here."
	tuneText   = "The public evidence for this board is thin: `packet-steering tune` measures the alternatives on it."
)

// tuneHints is the hint of the rows whose evidence is thin.
var tuneHints = []ProfileHint{{Offload: []string{OffloadNone, OffloadSoftware, OffloadHardware}, ID: HintTune, Text: tuneText}}

// boardProfiles are the rows for today's boards, after seededProfiles
// (never written; data, as seededProfiles).
var boardProfiles = []Profile{
	{
		Name: "mediatek-filogic",
		Match: Match{
			Targets:    []string{"mediatek/filogic"},
			Compatible: []string{"mediatek,mt7981", "mediatek,mt7986a", "mediatek,mt7986b", "mediatek,mt7988a"},
		},
		Choice:   ChoiceBoard,
		Evidence: evFilogic,
	},
	{
		Name:     "qualcommax-ipq60xx",
		Match:    Match{Targets: []string{"qualcommax/ipq60xx"}, Compatible: []string{"qcom,ipq6018"}},
		Choice:   ChoiceBoard,
		Evidence: evIPQ60xx,
		Hints:    tuneHints,
	},
	{
		Name:     "qualcommax-ipq50xx-hw-offload",
		Match:    Match{Targets: []string{"qualcommax/ipq50xx"}, Compatible: []string{"qcom,ipq5018"}, Offload: []string{OffloadHardware}},
		Choice:   ChoiceOff,
		Evidence: evIPQ50HW,
	},
	{
		Name:     "qualcommax-ipq50xx",
		Match:    Match{Targets: []string{"qualcommax/ipq50xx"}, Compatible: []string{"qcom,ipq5018"}},
		Choice:   ChoiceBoard,
		Evidence: evIPQ50xx,
		Hints:    tuneHints,
	},
	{
		Name:     "ipq806x",
		Match:    Match{Targets: []string{"ipq806x/*"}, Compatible: []string{"qcom,ipq8064", "qcom,ipq8065", "qcom,ipq8062"}},
		Choice:   ChoiceBoard,
		Evidence: evIPQ806x,
		Hints: []ProfileHint{{
			Offload: []string{OffloadNone},
			ID:      HintSWOffloadHelps,
			Text:    "On ipq806x packet steering helped together with flow offload (openwrt/openwrt#11676: 650 -> 1019 Mb/s). Enable software flow offload in Network > Firewall > Routing/NAT Offloading.",
		}},
	},
	{
		Name:     "lantiq-xrx200",
		Match:    Match{Targets: []string{"lantiq/xrx200"}, Compatible: []string{"lantiq,xr9", "lantiq,vr9", "lantiq,grx390"}},
		Choice:   ChoiceAll,
		Rules:    true,
		Evidence: evLantiq,
		Hints:    tuneHints,
	},
	{
		Name:     "rockchip",
		Match:    Match{Targets: []string{"rockchip/*"}, Compatible: []string{"rockchip,rk3328", "rockchip,rk3399", "rockchip,rk3568", "rockchip,rk3588", "rockchip,rk3588s", "rockchip,rk3576"}},
		Choice:   ChoiceBoard,
		Evidence: evRockchip,
	},
	{
		Name:     "bcm27xx",
		Match:    Match{Targets: []string{"bcm27xx/*"}, Compatible: []string{"brcm,bcm2711", "brcm,bcm2712"}},
		Choice:   ChoiceBoard,
		Evidence: evBCM27xx,
		Hints:    tuneHints,
	},
}
