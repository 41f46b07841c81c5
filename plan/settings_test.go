package plan

import (
	"errors"
	"strings"
	"testing"

	"github.com/packet-steering/packet-steering/platform"
)

func TestParseMode(t *testing.T) {
	for _, m := range Modes {
		got, err := ParseMode(string(m))
		if err != nil || got != m {
			t.Errorf("ParseMode(%q) = %q, %v", m, got, err)
		}
	}
	for _, bad := range []string{"", "AUTO", "1", "turbo", " auto"} {
		_, err := ParseMode(bad)
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseMode(%q) error %v, want ErrInvalid", bad, err)
			continue
		}
		if !strings.Contains(err.Error(), "off, legacy, all, auto, custom") {
			t.Errorf("ParseMode(%q) error %q does not list the modes", bad, err)
		}
	}
}

func TestParseFlows(t *testing.T) {
	tests := []struct {
		in   string
		want int
		err  bool
	}{
		{"0", 0, false}, {"256", 256, false}, {" 32 ", 32, false}, {"65536", 65536, false},
		{"65537", 0, true}, {"-1", 0, true}, {"abc", 0, true}, {"", 0, true}, {"1e3", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseFlows(tt.in)
		if tt.err != (err != nil) || got != tt.want {
			t.Errorf("ParseFlows(%q) = %d, %v", tt.in, got, err)
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseFlows(%q) error does not wrap ErrInvalid", tt.in)
		}
	}
}

func TestResolveSettings(t *testing.T) {
	tests := []struct {
		name    string
		cfg     platform.Config
		want    Settings
		problem string // substring of the SettingsError, "" = none
	}{
		{"nothing configured", platform.Config{}, Settings{ModeAuto, 0, SourceDefault}, ""},
		{"empty value", platform.Config{PacketSteeringSet: true}, Settings{ModeAuto, 0, SourceDefault}, ""},
		{"0 is off", platform.Config{PacketSteering: "0", PacketSteeringSet: true}, Settings{ModeOff, 0, SourceNetwork}, ""},
		{"1 is auto", platform.Config{PacketSteering: "1", PacketSteeringSet: true}, Settings{ModeAuto, 0, SourceNetwork}, ""},
		{"2 is all", platform.Config{PacketSteering: "2", PacketSteeringSet: true}, Settings{ModeAll, 0, SourceNetwork}, ""},
		{"bad network value", platform.Config{PacketSteering: "yes", PacketSteeringSet: true}, Settings{ModeAuto, 0, SourceNetwork}, "network.globals.packet_steering"},
		{"steering_flows", platform.Config{PacketSteering: "1", PacketSteeringSet: true, SteeringFlows: "128"}, Settings{ModeAuto, 128, SourceNetwork}, ""},
		{"bad steering_flows", platform.Config{SteeringFlows: "-5"}, Settings{ModeAuto, 0, SourceDefault}, "steering_flows"},
		{"huge steering_flows", platform.Config{SteeringFlows: "1000000"}, Settings{ModeAuto, 0, SourceDefault}, "steering_flows"},
		{"packet_steering wins", platform.Config{PacketSteering: "0", PacketSteeringSet: true, SteeringFlows: "8",
			Steering: &platform.SteeringConfig{Mode: "custom", Flows: "64"}}, Settings{ModeCustom, 64, SourcePacketSteering}, ""},
		{"packet_steering mode only", platform.Config{PacketSteering: "2", PacketSteeringSet: true, SteeringFlows: "8",
			Steering: &platform.SteeringConfig{Mode: "legacy"}}, Settings{ModeLegacy, 8, SourcePacketSteering}, ""},
		{"packet_steering file without mode", platform.Config{PacketSteering: "0", PacketSteeringSet: true,
			Steering: &platform.SteeringConfig{Flows: "16"}}, Settings{ModeOff, 16, SourceNetwork}, ""},
		{"bad packet_steering mode", platform.Config{PacketSteering: "0", PacketSteeringSet: true,
			Steering: &platform.SteeringConfig{Mode: "fast"}}, Settings{ModeAuto, 0, SourceDefault}, "packet_steering.globals.mode"},
		{"bad packet_steering flows", platform.Config{Steering: &platform.SteeringConfig{Mode: "all", Flows: "many"}},
			Settings{ModeAll, 0, SourcePacketSteering}, "packet_steering.globals.flows"},
	}
	for _, tt := range tests {
		got, err := ResolveSettings(&platform.Snapshot{Config: tt.cfg})
		if got != tt.want {
			t.Errorf("%s: got %+v, want %+v", tt.name, got, tt.want)
		}
		switch {
		case tt.problem == "" && err != nil:
			t.Errorf("%s: unexpected error %v", tt.name, err)
		case tt.problem != "" && (err == nil || !strings.Contains(err.Error(), tt.problem) || !IsSettingsError(err)):
			t.Errorf("%s: error %v, want one about %s", tt.name, err, tt.problem)
		}
	}
	if s, err := ResolveSettings(nil); err != nil || s.Mode != ModeAuto {
		t.Errorf("nil snapshot: %+v %v", s, err)
	}
}

func TestOffload(t *testing.T) {
	tests := []struct{ sw, hw, want string }{
		{"", "", OffloadNone}, {"0", "0", OffloadNone}, {"1", "", OffloadSoftware},
		{"1", "1", OffloadHardware}, {"0", "1", OffloadHardware}, {"yes", "", OffloadNone}, {" 1 ", "", OffloadSoftware},
	}
	for _, tt := range tests {
		s := &platform.Snapshot{Config: platform.Config{FlowOffloading: tt.sw, FlowOffloadingHW: tt.hw}}
		if got := Offload(s); got != tt.want {
			t.Errorf("Offload(%q,%q) = %s, want %s", tt.sw, tt.hw, got, tt.want)
		}
	}
}

// A bad configured value never stops steering: the plan is made with the
// fallback and says why in a hint.
func TestPlanWithBadConfig(t *testing.T) {
	m := ipq807x()
	m.s.Config.PacketSteering, m.s.Config.PacketSteeringSet = "on", true
	m.s.Config.SteeringFlows = "-3"
	m.s.Config.Errors = []platform.Gap{{Path: "etc/config/firewall", Error: "line 3: unterminated quote"}}
	p, err := NewPlan(m.snap(), PlanRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Mode != ModeAuto || p.Flows != 0 || p.Policy != "qualcommax-ipq807x" {
		t.Errorf("plan %s/%d/%s", p.Mode, p.Flows, p.Policy)
	}
	n := 0
	for _, h := range p.Hints {
		if h.ID == HintInvalidSetting {
			n++
		}
	}
	if n != 2 || !hasHint(p, HintConfigError) {
		t.Errorf("hints %v", hintIDs(p))
	}
}
