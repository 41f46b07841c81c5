package steering

// The profiles of the routers people run now (docs/platforms.md "Boards"),
// after the seeded rows of Profiles. Where the public evidence is thin
// they say so and point at `tune`.

const (
	evFilogic  = "MediaTek filogic (MT7981/MT7986/MT7988): the generic auto rule with the board rules. Its mt76 Wi-Fi runs several NAPI threads and a tx worker that the stock script pins to one CPU (openwrt/mt76#1072: MT7996 threads on CPU3 at 94-99%, CPU0-2 under 20%; openwrt/openwrt#24697: 1.45 -> 2.09 Gbit/s with the tx worker moved off the NAPI core; #25016), and PPPoE WANs are capped by one CPU (openwrt/openwrt#15207: GL-MT6000 1.3 Gb/s, one core at 100%; #24219: MT7986 1490 against 2200 Mb/s)."
	evIPQ60xx  = "qualcommax ipq60xx: the generic auto rule with the board rules. openwrt/openwrt#24203 (qca-edma) measured 600+ Mb/s more with threaded NAPI and pinned IRQs, which the driver now sets itself; no public measurement compares RPS placements on this target."
	evIPQ50xx  = "qualcommax ipq50xx: the generic auto rule with the board rules; no public measurement of RPS placements without hardware acceleration."
	evIPQ50HW  = "qualcommax ipq50xx with hardware flow offload: steering off. Telecominfraproject/wlan-ap#1283: with PPE/NSS/SFE acceleration software RPS brings no benefit and makes the CPU load uneven, so the AP image sets network.globals.packet_steering=0."
	evIPQ806x  = "ipq806x (IPQ8064/8065, 2 Krait cores): the generic auto rule with the board rules. openwrt/openwrt#11676 reports 650 -> 1019 Mb/s with packet steering and flow offload together; openwrt/openwrt#9887 reports negligible differences from steering alone on ipq8064/ipq8065."
	evLantiq   = "lantiq xrx200 (34Kc, 2 VPEs): RPS to all CPUs (stock mode 2) and the board rules. openwrt/openwrt#2553 reports lower throughput with RPS to the CPU without the IRQ only and all-CPU masks as the better choice; one report, 2 VPEs sharing one core."
	evRockchip = "rockchip: the generic auto rule with the board rules, which weigh big and little cores (RK3399, RK3588) by cpu_capacity. StarWhiz/NanoPi-R6S-CPU-Optimization-for-Gigabit-SQM: cake SQM near 800 Mb/s with the NIC work on the A55 cores, over 1,400 Mb/s on the A76; sbwml/builder#38 (RK3576): RPS on the big cores improved bursts; OpenWrt's 40-net-smp-affinity puts the R4S IRQs on its A72 cores; FriendlyWrt#77 (R2S): PPPoE 190-200 of 700 Mb/s on one core."
	evBCM27xx  = "bcm27xx (Raspberry Pi 4, 5): the generic auto rule with the board rules. The Pi 5's RP1 refuses IRQ affinity (raspberrypi/linux#6077: write error: Invalid argument), so its IRQs are planned around; no public measurement compares RPS placements on these boards."
	tuneText   = "The public evidence for this board is thin: `packet-steering tune` measures the alternatives on it."
)

// boardProfiles are the rows for today's boards.
func boardProfiles() []Profile {
	tune := []ProfileHint{{Offload: []string{OffloadNone, OffloadSoftware, OffloadHardware}, ID: HintTune, Text: tuneText}}
	return []Profile{
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
			Hints:    tune,
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
			Hints:    tune,
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
			Hints:    tune,
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
			Hints:    tune,
		},
	}
}
