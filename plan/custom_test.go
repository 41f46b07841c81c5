package plan

import (
	"testing"

	"github.com/packet-steering/packet-steering/platform"
)

func withOverrides(m *machine, mode string, devs ...platform.DeviceOverride) *machine {
	m.s.Config.Steering = &platform.SteeringConfig{Mode: mode, Devices: devs}
	return m
}

func actionMap(p *Plan) map[string]string {
	out := map[string]string{}
	for _, a := range p.Actions {
		out[string(a.Kind)+" "+a.Target()] = a.Value
	}
	return out
}

func TestCustomOverrides(t *testing.T) {
	m := withOverrides(ipq807x(), "custom",
		platform.DeviceOverride{Name: "eth0", RPSCPUs: "6", Flows: "32", XPSCPUs: "1", NAPICPUs: "2-3",
			QueueRPSCPUs: map[string]string{"rx-1": "8"}},
	)
	p := mustPlan(t, m.snap(), "")
	if p.Mode != ModeCustom || p.Policy != "qualcommax-ipq807x" {
		t.Fatalf("mode %s policy %s", p.Mode, p.Policy)
	}
	got := actionMap(p)
	want := map[string]string{
		"rps_cpus eth0/rx-0":                    "6",
		"rps_cpus eth0/rx-1":                    "8", // queue_rps wins over rps_cpus
		"rps_cpus eth0/rx-3":                    "6",
		"rps_flow_cnt eth0/rx-2":                "32",
		"xps_cpus eth0/tx-2":                    "1",
		"napi_affinity pid 302 napi/eth0-259":   "2-3",
		"irq_affinity irq 62 edma_rxdesc_2":     "4", // untouched auto value
		"sysctl net.core.rps_sock_flow_entries": "128",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if len(p.Hints) != 1 || p.Hints[0].ID != HintSWOffloadHelps {
		t.Errorf("hints %v", hintIDs(p))
	}
	// The same overrides in auto mode are not applied.
	auto := mustPlan(t, m.snap(), ModeAuto)
	if v := actionMap(auto)["rps_cpus eth0/rx-0"]; v != "0" {
		t.Errorf("auto applied an override: %s", v)
	}
}

func TestCustomBadOverrides(t *testing.T) {
	m := withOverrides(ipq807x(), "custom",
		platform.DeviceOverride{Name: "eth9", RPSCPUs: "1"},
		platform.DeviceOverride{Name: "eth0", RPSCPUs: "xyz", XPSCPUs: "10", NAPICPUs: "0-9",
			Flows: "-1", QueueRPSCPUs: map[string]string{"rx-7": "1", "rx-2": "2"}},
		platform.DeviceOverride{},
	)
	p, err := NewPlan(m.snap(), PlanRequest{})
	if err != nil {
		t.Fatalf("bad overrides failed the plan: %v", err)
	}
	counts := map[string]int{}
	for _, h := range p.Hints {
		counts[h.ID]++
	}
	// eth9 unknown; eth0: rps_cpus, xps_cpus (CPU 4 absent), napi_cpus
	// (CPUs 4-9 absent), flows, queue_rps rx-7 (no such queue); one unnamed.
	if counts[HintOverrideUnknownDevice] != 1 || counts[HintOverrideInvalid] != 6 {
		t.Errorf("hints %v", hintIDs(p))
	}
	got := actionMap(p)
	// The valid part of the section still applies; the rest keeps auto.
	if got["rps_cpus eth0/rx-2"] != "2" || got["rps_cpus eth0/rx-0"] != "0" || got["xps_cpus eth0/tx-1"] != "2" ||
		got["napi_affinity pid 301 napi/eth0-258"] != "1" || got["rps_flow_cnt eth0/rx-0"] != "0" {
		t.Errorf("actions %v", render(p.Actions))
	}
}

// A device named in a `config device` section is managed even where the
// stock rules skip it (a veth pair in a test namespace, a bridge), in every
// mode that follows the rules.
func TestConfiguredVirtualDevices(t *testing.T) {
	m := newMachine(2)
	m.dev("v0", platform.KindVirtual, "", "veth", 4, 4)
	m.dev("br-lan", platform.KindBridge, "", "", 1, 1)
	for i := 0; i < 4; i++ {
		m.thread(500+i, "napi/v0-"+itoa(9000+i))
	}
	m.s.NAPIThreads[3].Device = "v0"
	// Not named: nothing to manage.
	if p := mustPlan(t, m.snap(), ModeLegacy); len(p.Actions) != 0 {
		t.Fatalf("unnamed virtual devices managed: %v", render(p.Actions))
	}
	withOverrides(m, "", platform.DeviceOverride{Name: "v0"}, platform.DeviceOverride{Name: "br-lan", RPSCPUs: "1"})
	// Legacy: br-lan single queue, no threads -> CPU0 (load .75); v0 four
	// queues and threads on 2 CPUs -> thread i on CPU i%2, RPS CPU (i+1)%2.
	sameLines(t, "legacy", render(mustPlan(t, m.snap(), ModeLegacy).Actions), []string{
		"rps_cpus br-lan/rx-0 1", "rps_flow_cnt br-lan/rx-0 0",
		"rps_cpus v0/rx-0 2", "rps_flow_cnt v0/rx-0 0",
		"rps_cpus v0/rx-1 1", "rps_flow_cnt v0/rx-1 0",
		"rps_cpus v0/rx-2 2", "rps_flow_cnt v0/rx-2 0",
		"rps_cpus v0/rx-3 1", "rps_flow_cnt v0/rx-3 0",
		"napi_affinity pid 500 napi/v0-9000 0",
		"napi_affinity pid 501 napi/v0-9001 1",
		"napi_affinity pid 502 napi/v0-9002 0",
		"napi_affinity pid 503 napi/v0-9003 1",
	})
	sameLines(t, "off", render(mustPlan(t, m.snap(), ModeOff).Actions), []string{
		"rps_cpus br-lan/rx-0 0", "rps_flow_cnt br-lan/rx-0 0",
		"rps_cpus v0/rx-0 0", "rps_flow_cnt v0/rx-0 0",
		"rps_cpus v0/rx-1 0", "rps_flow_cnt v0/rx-1 0",
		"rps_cpus v0/rx-2 0", "rps_flow_cnt v0/rx-2 0",
		"rps_cpus v0/rx-3 0", "rps_flow_cnt v0/rx-3 0",
		"napi_affinity pid 500 napi/v0-9000 0-1",
		"napi_affinity pid 501 napi/v0-9001 0-1",
		"napi_affinity pid 502 napi/v0-9002 0-1",
		"napi_affinity pid 503 napi/v0-9003 0-1",
	})
	// Auto: v0 has a queue per CPU -> rss-per-cpu; br-lan the stock rule.
	auto := []string{
		"rps_cpus br-lan/rx-0 1", "rps_flow_cnt br-lan/rx-0 0",
		"rps_cpus v0/rx-0 0", "rps_flow_cnt v0/rx-0 0",
		"rps_cpus v0/rx-1 0", "rps_flow_cnt v0/rx-1 0",
		"rps_cpus v0/rx-2 0", "rps_flow_cnt v0/rx-2 0",
		"rps_cpus v0/rx-3 0", "rps_flow_cnt v0/rx-3 0",
		"xps_cpus v0/tx-0 1", "xps_cpus v0/tx-1 2", "xps_cpus v0/tx-2 1", "xps_cpus v0/tx-3 2",
		"napi_affinity pid 500 napi/v0-9000 0",
		"napi_affinity pid 501 napi/v0-9001 1",
		"napi_affinity pid 502 napi/v0-9002 0",
		"napi_affinity pid 503 napi/v0-9003 1",
	}
	p := mustPlan(t, m.snap(), ModeAuto)
	sameLines(t, "auto", render(p.Actions), auto)
	if p.Policy != PolicyRSSPerCPU {
		t.Errorf("auto policy %s", p.Policy)
	}
	// Custom: the br-lan override (rps_cpus 1) equals auto here; change it.
	m.s.Config.Steering.Devices[1].RPSCPUs = "2"
	if v := actionMap(mustPlan(t, m.snap(), ModeCustom))["rps_cpus br-lan/rx-0"]; v != "2" {
		t.Errorf("custom br-lan = %s", v)
	}
}

func itoa(n int) string {
	s := ""
	if n == 0 {
		return "0"
	}
	for n > 0 {
		s = string(rune('0'+n%10)) + s
		n /= 10
	}
	return s
}
