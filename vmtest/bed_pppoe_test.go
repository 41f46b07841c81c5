package vmtest

import (
	_ "embed"
	"encoding/binary"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/packet-steering/packet-steering/internal/cpuset"
)

// The PPPoE test bed (docs/platforms.md, "Test beds"; `make beds`): a
// 4-vCPU x86_64 guest with Debian's kernel (ppp_generic, pppoe, pppox are
// modules there; the host's kernel has none) is the router. Its
// single-queue virtio NIC is the WAN with a kernel-only PPPoE session
// (vmguest pppoe: no discovery, no LCP, the kernel's data path only); the
// host sends the session's frames into the NIC's tap from an AF_PACKET
// socket: UDP in PPPoE, bedFlows flows, at bedPPS, open loop. The guest
// decapsulates (pppoe_rcv, ppp_input, netif_rx on pppoe-wan), routes and
// sends out of a dummy LAN device, whose tx_packets count the forwarded
// packets. Inside the guest `packet-steering tune` runs the stock rule
// (legacy), auto, off and every RPS mask of pppoe-wan with the rest as
// auto places it, and prints forwarded packets/s per candidate; this test
// prints them as ratios to auto's and checks (a functional check, not a
// timing one) that auto did steer pppoe-wan.

// bedPPPoEInit is the bed guest's /init.
//
//go:embed bed_pppoe.sh
var bedPPPoEInit []byte

// bedWANMAC is the guest's WAN MAC (the host side's is bedPeerMAC, the
// access concentrator's).
var bedWANMAC = net.HardwareAddr{0x02, 0x00, 0x5e, 0x10, 0x00, 0x02}

const (
	bedSID = 0x1234
	// bedPPSDefault is the offered load: above what the guest forwards
	// on one vCPU under TCG here, so that the steering decides the rate.
	bedPPSDefault = 150000
)

// pppoeBedGuest is the x86_64 guest with the bed's modules and script.
func pppoeBedGuest(pps, runs, seconds, interleave int) *guest {
	g := guests()[0] // x86_64, the system's kernel
	g.name = "bed-pppoe"
	g.modules = []string{"virtio_pci", "virtio_net", "pppoe", "dummy"}
	g.adaptive = false
	g.timeout = 40 * time.Minute
	g.init = bedPPPoEInit
	g.conf = fmt.Sprintf("BED_WAN_MAC=%s\nBED_PEER_MAC=%s\nBED_SID=%d\nBED_RUNS=%d\nBED_LOAD_SECONDS=%d\nBED_PPS=%d\nBED_INTERLEAVE=%d\n",
		bedWANMAC, bedPeerMAC, bedSID, runs, seconds, pps, interleave)
	g.files = map[string][]byte{"etc/bed-count.sh": []byte(bedCount)}
	return g
}

func TestBedPPPoE(t *testing.T) {
	requireBeds(t)
	pps := envInt(t, "BED_PPS", bedPPSDefault, 1000, 1_000_000)
	runs := envInt(t, "BED_RUNS", 5, 1, 20)
	seconds := envInt(t, "BED_SECONDS", 3, 1, 60)
	// In rounds (tune --interleave) unless BED_INTERLEAVE=0.
	interleave := envInt(t, "BED_INTERLEAVE", 1, 0, 1)
	g := pppoeBedGuest(pps, runs, seconds, interleave)
	flood := &frameFlood{tap: tapSQ, pps: pps, frames: bedFrames(pppoeFrame)}
	con := bedBoot(t, g, flood, nil, nil)
	if body, err := con.get("pppoe"); err != nil || !strings.Contains(body, "pppoe-wan") {
		t.Fatalf("PPPoE session: %v %s", err, body)
	}
	// auto steers the ppp device: its rx-0 RPS is set.
	if m := con.info["ppp_rps_auto"]; m == "" || cpuset.SameMask(m, "0") {
		q, _ := con.get("queues-auto")
		t.Errorf("auto left pppoe-wan rx-0 rps_cpus at %q:\n%s", m, q)
	}
	rep := bedSweep(t, con)
	state, _ := con.get("state-auto")
	t.Logf("auto's placement in the guest:\n%s", state)
	header := fmt.Sprintf("PPPoE bed: x86_64 guest, %s vCPUs (TCG), WAN %s with a PPPoE session, %d flows offered at %d pps from the host, forwarded pppoe-wan -> lan0; packets/s, median (min-max) of %d runs of %d s%s",
		con.info["cpus"], con.info["wan"], bedFlows, pps, runs, seconds, bedInterleaved[interleave])
	t.Log("\n" + rep.table(header))
}

// pppoeFrame is flow i's frame: Ethernet to the guest's WAN, PPPoE session
// bedSID, PPP protocol IPv4, the flow's UDP packet (ipv4UDP).
func pppoeFrame(i int) []byte {
	b := make([]byte, 14+6+2+ipLen)
	copy(b[0:], bedWANMAC)
	copy(b[6:], bedPeerMAC)
	binary.BigEndian.PutUint16(b[12:], 0x8864) // PPPoE session
	p := b[14:]
	p[0] = 0x11 // version 1, type 1
	p[1] = 0    // code: session data
	binary.BigEndian.PutUint16(p[2:], bedSID)
	binary.BigEndian.PutUint16(p[4:], 2+ipLen) // PPP protocol + payload
	binary.BigEndian.PutUint16(p[6:], 0x0021)  // PPP_IP
	copy(p[8:], ipv4UDP(i))
	return b
}

func TestPPPoEFrame(t *testing.T) {
	for _, i := range []int{0, 1, bedFlows - 1} {
		b := pppoeFrame(i)
		ip := b[22:]
		tests := []struct {
			what      string
			got, want int
		}{
			{"length", len(b), 14 + 8 + 46},
			{"ethertype", int(binary.BigEndian.Uint16(b[12:])), 0x8864},
			{"session", int(binary.BigEndian.Uint16(b[16:])), bedSID},
			{"pppoe length", int(binary.BigEndian.Uint16(b[18:])), len(b) - 20},
			{"header checksum over all", int(ipChecksum(ip[:20])), 0},
			{"source port", int(binary.BigEndian.Uint16(ip[20:])), 20000 + i},
		}
		for _, tt := range tests {
			if tt.got != tt.want {
				t.Errorf("flow %d: %s = %#x, want %#x", i, tt.what, tt.got, tt.want)
			}
		}
	}
}
