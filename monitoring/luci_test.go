package monitoring_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestLuCIDefinition loads the Statistics graph definition as LuCI's
// loader does (the file's body as a function of the baseclass and the
// translation function) and checks its graphs (LuCI draws them for each
// CPU instance): the types and instances the exec script writes, none
// per_instance. vmtest's mon-graph-page has the image's LuCI draw them.
func TestLuCIDefinition(t *testing.T) {
	requireMonitoring(t, "node")
	js := `
const src = require("fs").readFileSync(process.argv[1], "utf8");
const def = new Function("baseclass", "_", src)({ extend: o => o }, s => s);
const graphs = def.rrdargs(null, "router", "packet_steering", "cpu0", null);
const seen = [];
for (const g of graphs) {
	// per_instance is one graph per type instance, and LuCI then ignores
	// data.instances (the 22.03.4 image drew 8 graphs per CPU, without the
	// options); the graphs per CPU come from LuCI rendering each plugin
	// instance.
	if (g.per_instance) throw new Error("graph " + g.title + " is per_instance");
	for (const ty of g.data.types)
		for (const inst of g.data.instances[ty]) {
			if (!g.data.options[ty + "_" + inst]) throw new Error("no options for " + ty + "_" + inst);
			seen.push(ty + "-" + inst);
		}
}
console.log(def.title + ": " + seen.sort().join(" "));
`
	out, err := exec.Command("node", "-e", js, filepath.Join(top(t), "monitoring/luci/packet_steering.js")).CombinedOutput()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, out)
	}
	want := "Packet steering: derive-time_squeeze packets-dropped packets-flow_limit packets-processed packets-rps_received"
	if got := strings.TrimSpace(string(out)); got != want {
		t.Errorf("graphs: %q, want %q (every value the script writes, each with its options)", got, want)
	}
}

// TestCollectdPackageScripts runs collectd-packet-steering's uci-defaults
// script and its prerm (from the package Makefile) with the 22.03.4
// rootfs' own uci in a chroot: the install adds one exec input (also when
// run twice) and turns the exec plugin on; the removal takes the input out
// and leaves the rest of luci_statistics as it was.
func TestCollectdPackageScripts(t *testing.T) {
	requireMonitoring(t, "chroot")
	rootfs := unpackRootfs(t, "openwrt-22.03.4-x86_64-rootfs.tar.xz")
	pkg := filepath.Join(top(t), "openwrt/collectd-packet-steering")
	install(t, rootfs, filepath.Join(pkg, "files/etc/uci-defaults/90-packet-steering-collectd"), "tmp/uci-defaults", 0o755)
	mk, err := os.ReadFile(filepath.Join(pkg, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)define Package/collectd-packet-steering/prerm\n(.*?)\nendef`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("no prerm in the Makefile")
	}
	prerm := strings.ReplaceAll(string(m[1]), "$$", "$") // as make expands it
	if err := os.WriteFile(filepath.Join(rootfs, "tmp/prerm"), []byte(prerm+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	show := func() string {
		t.Helper()
		out, err := exec.Command("chroot", rootfs, "/sbin/uci", "-X", "show", "luci_statistics").CombinedOutput()
		if err != nil {
			t.Fatalf("uci show: %v\n%s", err, out)
		}
		return string(out)
	}
	run := func(script string) {
		t.Helper()
		if out, err := exec.Command("chroot", rootfs, "/bin/sh", script).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", script, err, out)
		}
	}
	before := show()
	run("/tmp/uci-defaults")
	run("/tmp/uci-defaults")
	after := show()
	inputs := regexp.MustCompile(`(?m)^luci_statistics\.(\w+)=collectd_exec_input$`).FindAllStringSubmatch(after, -1)
	if len(inputs) != 1 {
		t.Fatalf("%d exec inputs after installing twice, want 1:\n%s", len(inputs), after)
	}
	s := "luci_statistics." + inputs[0][1]
	for _, line := range []string{s + ".cmdline='/usr/libexec/packet-steering/collectd-softnet'", s + ".cmduser='nobody'", s + ".cmdgroup='nogroup'", "luci_statistics.collectd_exec.enable='1'"} {
		if !strings.Contains(after, line+"\n") {
			t.Errorf("after the uci-defaults: no %s", line)
		}
	}
	run("/tmp/prerm")
	removed := show()
	if strings.Contains(removed, "collectd_exec_input") {
		t.Errorf("the exec input is still there after prerm:\n%s", removed)
	}
	// Everything else as before, but the exec plugin stays turned on.
	if got, want := removed, strings.Replace(before, "luci_statistics.collectd_exec.enable='0'", "luci_statistics.collectd_exec.enable='1'", 1); got != want {
		t.Errorf("luci_statistics changed beyond the exec input:\n-%s\n+%s", want, got)
	}
}
