package vmtest

import (
	"strings"

	"github.com/packet-steering/packet-steering/internal/cpuset"
	"github.com/packet-steering/packet-steering/steering"
)

// checkPPPoE checks init.sh's pppoe_check: auto gave the ppp device of a
// PPPoE session over the single-queue NIC an rx-0 RPS mask, without the CPU
// of the carrier's rx NAPI thread (plan/rule_ppp.go).
func checkPPPoE(c *checker, con *consoleOut) {
	if body, err := con.get("pppoe-session"); err != nil || !strings.Contains(body, "pppoe-wan") {
		c.errorf("PPPoE session: %v %s", err, body)
		return
	}
	var res steering.Result
	if c.getJSON(con, "pppoe-apply", &res) && len(res.Failed) > 0 {
		c.errorf("apply with pppoe-wan: %d actions failed: %+v", len(res.Failed), res.Failed)
	}
	m, napi := con.info["pppoe_rps"], con.info["pppoe_carrier_napi"]
	mask, err := cpuset.ParseMask(m)
	if err != nil || mask.IsEmpty() {
		c.errorf("auto left pppoe-wan rx-0 rps_cpus at %q, want a mask", m)
		return
	}
	if cpus, err := cpuset.ParseList(napi); err == nil && cpus.Len() == 1 && mask.Has(cpus.CPUs()[0]) {
		c.errorf("pppoe-wan rx-0 RPS %s includes the carrier's rx NAPI CPU %s", m, napi)
	}
}
