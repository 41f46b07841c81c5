package plan

import (
	"errors"
	"fmt"
	"strings"

	"github.com/packet-steering/packet-steering/internal/cpuset"
	"github.com/packet-steering/packet-steering/platform"
)

// Hint IDs. A hint is advice about a setting that cannot work or fights the
// plan; it never changes the
const (
	// HintInvalidSetting: a UCI value was invalid and replaced by its default.
	HintInvalidSetting = "invalid-setting"
	// HintConfigError: a config file does not parse (Snapshot.Config.Errors).
	HintConfigError = "config-error"
	// HintNoEvidence: auto found no profile and no RSS device for this board.
	HintNoEvidence = "no-evidence"
	// HintSWOffloadHelps: ipq807x without software flow offload.
	HintSWOffloadHelps = "swoffload-helps"
	// HintDSAUserRPS: RPS set on a DSA user port.
	HintDSAUserRPS = "dsa-user-rps"
	// HintFlowsForwarding: flows > 0 on a machine that forwards.
	HintFlowsForwarding = "flows-forwarding"
	// HintIRQBalance: irqbalance is running.
	HintIRQBalance = "irqbalance"
	// HintHWOffload: hardware flow offload with RPS in the
	HintHWOffload = "hw-offload"
	// HintOverrideUnknownDevice and HintOverrideInvalid: custom-mode
	// `config device` sections that cannot apply.
	HintOverrideUnknownDevice = "override-unknown-device"
	HintOverrideInvalid       = "override-invalid"
)

// planHints gathers the plan's hints in a fixed order: configuration
// problems, what auto and custom reported, then the setting checks.
func planHints(s *platform.Snapshot, p *Plan, b *builder, serr error, offload string) []Hint {
	hints := []Hint{}
	var se *SettingsError
	if errors.As(serr, &se) {
		for _, pr := range se.Problems {
			hints = append(hints, Hint{ID: HintInvalidSetting, Text: pr})
		}
	}
	for _, g := range s.Config.Errors {
		hints = append(hints, Hint{ID: HintConfigError,
			Text: fmt.Sprintf("%s does not parse (%s); steering uses the other settings and defaults until it is fixed.", g.Path, g.Error)})
	}
	hints = append(hints, b.hints...)
	hints = append(hints, netlinkHints(s)...)
	hints = append(hints, dsaUserRPSHints(s, p)...)
	if p.Flows > 0 && forwards(s) {
		hints = append(hints, Hint{ID: HintFlowsForwarding,
			Text: fmt.Sprintf("steering_flows is %d, but RFS only steers packets to CPUs where a local socket reads them; routed traffic has no local socket, so flows only help services running on this router.", p.Flows)})
	}
	for _, w := range p.Writers {
		if w.Name == platform.WriterIRQBalance && w.State == WriterDeferred {
			hints = append(hints, Hint{ID: HintIRQBalance, Text: w.Text})
		}
	}
	if offload == OffloadHardware && hasNonZeroRPS(p) {
		hints = append(hints, Hint{ID: HintHWOffload,
			Text: "Hardware flow offload is on: offloaded flows bypass the CPU, so RPS only affects the first packets of each flow and traffic the hardware cannot offload."})
	}
	return hints
}

// dsaUserRPSHints warns about RPS on DSA user ports, live or planned: a
// user port's packets are received on the conduit's queue, so RPS on the
// user port does not move that work (the ipq807x report in docs/platforms.md:
// lan1/wan RPS behaved like RPS off).
func dsaUserRPSHints(s *platform.Snapshot, p *Plan) []Hint {
	planned := map[string]string{} // device/queue -> planned mask
	for _, a := range p.Actions {
		if a.Kind == KindRPSCPUs {
			planned[a.Device+"/"+a.Queue] = a.Value
		}
	}
	var out []Hint
	for _, d := range s.Devices {
		if d.Kind != platform.KindDSAUser {
			continue
		}
		for _, q := range d.RxQueues {
			v, ok := planned[d.Name+"/"+q.Name]
			if !ok {
				v = q.RPSCPUs
			}
			set, err := cpuset.ParseMask(v)
			if err != nil || set.IsEmpty() {
				continue
			}
			conduit := "its conduit"
			if len(d.Lowers) > 0 {
				conduit = strings.Join(d.Lowers, ", ")
			}
			out = append(out, Hint{ID: HintDSAUserRPS, Device: d.Name,
				Text: fmt.Sprintf("RPS is set on DSA user port %s (%s %s), which has no effect: the port's packets are received and steered on %s's queues.", d.Name, q.Name, v, conduit)})
			break
		}
	}
	return out
}

// forwards reports whether the machine looks like a router: a bridge, a DSA
// user port or more than one ethernet device.
func forwards(s *platform.Snapshot) bool {
	eth := 0
	for _, d := range s.Devices {
		switch d.Kind {
		case platform.KindBridge, platform.KindDSAUser:
			return true
		case platform.KindEthernet, platform.KindDSAConduit:
			eth++
		}
	}
	return eth > 1
}

func hasNonZeroRPS(p *Plan) bool {
	for _, a := range p.Actions {
		if a.Kind != KindRPSCPUs {
			continue
		}
		if set, err := cpuset.ParseMask(a.Value); err == nil && !set.IsEmpty() {
			return true
		}
	}
	return false
}
