package plan

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/packet-steering/packet-steering/internal/outline"
	"github.com/packet-steering/packet-steering/platform"
)

// MaxFlows is the largest accepted flows value (rps_flow_cnt per rx queue).
// The kernel takes far more (store_rps_dev_flow_table_cnt in
// net/core/net-sysfs.c rounds up to a power of two and only refuses what
// would overflow), but each entry of the per-queue flow table is kernel
// memory (8 bytes on 64-bit); 65536 entries per queue is 512 KiB, already
// far past the kernel scaling guide's suggestion (rps_sock_flow_entries
// 32768 divided over the queues) and a sane ceiling for a router.
const MaxFlows = 65536

// Setting sources, as Settings.Source reports them.
const (
	SourcePacketSteering = "packet_steering" // /etc/config/packet_steering globals
	SourceNetwork        = "network"         // network.globals.packet_steering
	SourceDefault        = "default"         // nothing configured
	SourceLive           = "live"            // set_mode without persist
)

// Offload states of the firewall's flow offloading.
const (
	OffloadNone     = "none"
	OffloadSoftware = "software"
	OffloadHardware = "hardware"
)

// acceptedModes is the user-facing list of mode names.
func acceptedModes() string {
	names := make([]string, len(Modes))
	for i, m := range Modes {
		names[i] = string(m)
	}
	return strings.Join(names, ", ")
}

// ParseMode returns the mode named s. An unknown name is an error wrapping
// ErrInvalid that lists the accepted names.
func ParseMode(s string) (Mode, error) {
	for _, m := range Modes {
		if s == string(m) {
			return m, nil
		}
	}
	return "", outline.Errorf("%w: unknown mode %q (accepted: %s)", ErrInvalid, s, acceptedModes())
}

// CheckFlows returns an error wrapping ErrInvalid unless 0 <= n <= MaxFlows.
//
//go:noinline
func CheckFlows(n int) error {
	if n < 0 || n > MaxFlows {
		return outline.Errorf("%w: flows %d out of range (accepted: 0 to %d flow entries per rx queue)", ErrInvalid, n, MaxFlows)
	}
	return nil
}

// ParseFlows parses a flows value as UCI holds it (decimal, surrounding
// blanks allowed) and checks its range.
func ParseFlows(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return 0, outline.Errorf("%w: flows %q is not a whole number (accepted: 0 to %d)", ErrInvalid, s, MaxFlows)
	}
	if err := CheckFlows(n); err != nil {
		return 0, err
	}
	return n, nil
}

// SettingsError lists configuration values that were invalid and were
// replaced by their defaults. It never means steering stopped: the Settings
// returned with it are complete and usable.
type SettingsError struct {
	Problems []string
}

func (e *SettingsError) Error() string {
	return "invalid steering configuration: " + strings.Join(e.Problems, "; ")
}

// ResolveSettings turns the raw UCI values of a snapshot into the effective
// mode and flows. It never fails as a whole; invalid values are replaced by
// their defaults and reported in a *SettingsError, which status and the plan
// show as a hint.
//
// Mode, in order:
//  1. /etc/config/packet_steering `globals.mode`, when the file exists and the
//     option is set: one of off, legacy, all, auto, custom, adaptive (Source
//     "packet_steering"). An unknown value falls back to auto (Source
//     "default") with a problem reported: a typo must not switch steering off
//     nor leave the previous state half-applied.
//  2. otherwise network.globals.packet_steering as the stock init script
//     (package/network/config/netifd/files/etc/init.d/packet_steering) passes
//     it to packet-steering.uc: "0" off, "2" all, "1" auto (Source
//     "network"); unset or empty auto (Source "default": upstream treats
//     unset as enabled, the .uc script runs mode 1 for anything but 0 and 2).
//     Any other value (e.g. "yes") also gives auto, as the stock script would
//     run it, but is reported (Source "network").
//
// Flows: packet_steering `globals.flows` when set, else
// network.globals.steering_flows, else 0. A value that is not a whole number
// in 0..MaxFlows gives 0 and a problem. (The stock init script passes `-l N`
// only when N > 0, so a negative value there meant 0 as well.)
func ResolveSettings(s *platform.Snapshot) (Settings, error) {
	set := Settings{Mode: ModeAuto, Source: SourceDefault}
	if s == nil {
		return set, nil
	}
	var problems []string
	cfg := s.Config
	modeDone := false
	if st := cfg.Steering; st != nil && strings.TrimSpace(st.Mode) != "" {
		m, err := ParseMode(strings.TrimSpace(st.Mode))
		if err != nil {
			problems = append(problems, fmt.Sprintf("packet_steering.globals.mode: unknown mode %q, using auto (accepted: %s)", st.Mode, acceptedModes()))
			set.Mode, set.Source = ModeAuto, SourceDefault
		} else {
			set.Mode, set.Source = m, SourcePacketSteering
		}
		modeDone = true
	}
	if !modeDone {
		v := strings.TrimSpace(cfg.PacketSteering)
		switch {
		case !cfg.PacketSteeringSet || v == "":
			set.Mode, set.Source = ModeAuto, SourceDefault
		case v == "0":
			set.Mode, set.Source = ModeOff, SourceNetwork
		case v == "1":
			set.Mode, set.Source = ModeAuto, SourceNetwork
		case v == "2":
			set.Mode, set.Source = ModeAll, SourceNetwork
		default:
			set.Mode, set.Source = ModeAuto, SourceNetwork
			problems = append(problems, fmt.Sprintf("network.globals.packet_steering: unknown value %q, using auto (accepted: 0, 1, 2)", cfg.PacketSteering))
		}
	}

	flowsText, flowsOpt := "", ""
	if st := cfg.Steering; st != nil && strings.TrimSpace(st.Flows) != "" {
		flowsText, flowsOpt = st.Flows, "packet_steering.globals.flows"
	} else if strings.TrimSpace(cfg.SteeringFlows) != "" {
		flowsText, flowsOpt = cfg.SteeringFlows, "network.globals.steering_flows"
	}
	if flowsOpt != "" {
		n, err := ParseFlows(flowsText)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %q is not a flow count in 0..%d, using 0", flowsOpt, flowsText, MaxFlows))
		} else {
			set.Flows = n
		}
	}
	if len(problems) > 0 {
		return set, &SettingsError{Problems: problems}
	}
	return set, nil
}

// Offload reports the firewall's flow offloading as the stock target hooks
// (target/linux/bcm53xx and bcm4908 .../usr/libexec/platform/
// packet-steering.sh) read it: flow_offloading_hw > 0 is hardware, else
// flow_offloading > 0 is software, else none. Values that are not numbers
// count as 0, as `[ x -gt 0 ]` is false for them in the hooks' shell.
func Offload(s *platform.Snapshot) string {
	if s == nil {
		return OffloadNone
	}
	if positive(s.Config.FlowOffloadingHW) {
		return OffloadHardware
	}
	if positive(s.Config.FlowOffloading) {
		return OffloadSoftware
	}
	return OffloadNone
}

func positive(v string) bool {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	return err == nil && n > 0
}

// IsSettingsError reports whether err carries a *SettingsError.
func IsSettingsError(err error) bool {
	var se *SettingsError
	return errors.As(err, &se)
}
