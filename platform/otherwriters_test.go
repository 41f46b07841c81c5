package platform

import (
	"context"
	"reflect"
	"testing"

	"github.com/packet-steering/packet-steering/platform/fixture"
	"github.com/packet-steering/packet-steering/platform/fixture/fixturetest"
)

// TestReadWriters: the other writers are found from the files that install
// and enable them, with their own switches, the takeover note and the
// target hook netifd's service runs.
func TestReadWriters(t *testing.T) {
	const initScript = "#!/bin/sh /etc/rc.common\n"
	tests := []struct {
		name  string
		files map[string]string
		procs []string // extra process comm names
		want  []OtherWriter
	}{
		{"none", nil, nil, nil},
		{"netifd's service enabled, no hook", map[string]string{
			"etc/init.d/packet_steering":  initScript,
			"etc/rc.d/S25packet_steering": "",
		}, nil, []OtherWriter{{Name: WriterNetifd, Path: "etc/init.d/packet_steering", Enabled: true}}},
		{"netifd's service taken over, with a target hook", map[string]string{
			"etc/init.d/packet_steering":              initScript,
			"usr/libexec/platform/packet-steering.sh": "#!/bin/sh\n",
			"etc/packet-steering/takeover":            "packet_steering disabled\n",
		}, nil, []OtherWriter{{Name: WriterNetifd, Path: "etc/init.d/packet_steering", TakenOver: true,
			Hook: "usr/libexec/platform/packet-steering.sh"}}},
		{"a hook without netifd's service is no writer", map[string]string{
			"usr/libexec/platform/packet-steering.sh": "#!/bin/sh\n",
		}, nil, nil},
		{"smp_affinity enabled, switched off in its config", map[string]string{
			"etc/init.d/smp_affinity":  initScript,
			"etc/rc.d/S94smp_affinity": "",
			"etc/config/smp_affinity":  "config smp_affinity 'general'\n\toption enable '0'\n",
		}, nil, []OtherWriter{{Name: WriterSMPAffinity, Path: "etc/init.d/smp_affinity", Enabled: true, ConfigOff: true}}},
		{"smp_affinity disabled by packet-steering", map[string]string{
			"etc/init.d/smp_affinity":      initScript,
			"etc/packet-steering/takeover": "smp_affinity enabled\n",
		}, nil, []OtherWriter{{Name: WriterSMPAffinity, Path: "etc/init.d/smp_affinity", TakenOver: true, WasEnabled: true}}},
		{"rockchip's hotplug script", map[string]string{
			"etc/hotplug.d/net/40-net-smp-affinity": "#!/bin/sh\n",
		}, nil, []OtherWriter{{Name: WriterRockchipIRQs, Path: "etc/hotplug.d/net/40-net-smp-affinity", Enabled: true}}},
		{"irqbalance running, banned IRQs", map[string]string{
			"etc/init.d/irqbalance":  initScript,
			"etc/rc.d/S90irqbalance": "",
			"etc/config/irqbalance":  "config irqbalance 'irqbalance'\n\toption enabled '1'\n\tlist banirq '61'\n\tlist banirq '60'\n\tlist banirq 'x'\n",
		}, []string{"irqbalance"}, []OtherWriter{{Name: WriterIRQBalance, Path: "etc/init.d/irqbalance", Enabled: true,
			Running: true, BanIRQs: []int{60, 61}}}},
		{"irqbalance running without its package's files", nil, []string{"irqbalance"},
			[]OtherWriter{{Name: WriterIRQBalance, Running: true, ConfigOff: true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := fixturetest.Root(t, "ipq807x", func(s *fixture.Spec) {
				if s.Files == nil {
					s.Files = map[string]string{}
				}
				for k, v := range tt.files {
					s.Files[k] = v
				}
				for i, c := range tt.procs {
					s.Processes = append(s.Processes, fixture.Process{PID: 5000 + i, Comm: c})
				}
			})
			snap, err := Read(context.Background(), root)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(snap.Writers, tt.want) {
				t.Errorf("writers\n got %+v\nwant %+v", snap.Writers, tt.want)
			}
		})
	}
}
