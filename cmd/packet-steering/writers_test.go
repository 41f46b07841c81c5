package main

import (
	"encoding/json"
	"github.com/packet-steering/packet-steering/internal/testenv"
	"strings"
	"testing"

	"github.com/packet-steering/packet-steering/plan"
	"github.com/packet-steering/packet-steering/steering"
)

// TestStatusOtherWriters: on an ipq807x root whose smp_affinity script
// packet-steering disabled, with irqbalance configured and running and
// netifd's service taken over (with a target hook installed, which no
// profile reproduces there), status names each writer and its state.
func TestStatusOtherWriters(t *testing.T) {
	root := planRoot(t, "ipq807x")
	files := map[string]string{
		"etc/init.d/smp_affinity":                 "#!/bin/sh /etc/rc.common\nSTART=93\n",
		"etc/init.d/packet_steering":              "#!/bin/sh /etc/rc.common\nSTART=25\n",
		"etc/init.d/irqbalance":                   "#!/bin/sh /etc/rc.common\nSTART=90\n",
		"etc/config/smp_affinity":                 "config smp_affinity 'general'\n\toption enable '1'\n",
		"etc/config/irqbalance":                   "config irqbalance 'irqbalance'\n\toption enabled '1'\n\tlist banirq '60'\n",
		"etc/packet-steering/takeover":            "packet_steering enabled\nsmp_affinity enabled\n",
		"usr/libexec/platform/packet-steering.sh": "#!/bin/sh\n",
	}
	testenv.WriteTree(t, root, files)
	testenv.WriteLinks(t, root, map[string]string{"etc/rc.d/S90irqbalance": "../init.d/irqbalance"})
	code, out, errs := runCLI(t, "status", "--root", root, "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var st steering.Status
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("--json: %v\n%s", err, out)
	}
	want := map[string]string{
		"packet_steering": plan.WriterTakenOver,
		"smp_affinity":    plan.WriterTakenOver,
		"irqbalance":      plan.WriterDeferred,
	}
	got := map[string]string{}
	for _, w := range st.Writers {
		got[w.Name] = w.State
		if w.Name == "packet_steering" && !strings.Contains(w.Text, "/usr/libexec/platform/packet-steering.sh in place of its own rule; no profile reproduces") {
			t.Errorf("packet_steering: %q does not say which hook ran and that no profile reproduces it", w.Text)
		}
	}
	for name, state := range want {
		if got[name] != state {
			t.Errorf("writer %s: %q, want %q (all: %+v)", name, got[name], state, st.Writers)
		}
	}
	code, out, _ = runCLI(t, "status", "--root", root)
	if code != 0 || !strings.Contains(out, "other writers:") || !strings.Contains(out, "smp_affinity: taken-over") ||
		!strings.Contains(out, "irqbalance: deferred") {
		t.Errorf("status output:\n%s", out)
	}
}
