package e2e

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/packet-steering/packet-steering/internal/netnstest"
	"github.com/packet-steering/packet-steering/internal/testenv"
	"github.com/packet-steering/packet-steering/internal/ubus"
	"github.com/packet-steering/packet-steering/internal/ubus/ubustest"
	"github.com/packet-steering/packet-steering/internal/uci"
	"github.com/packet-steering/packet-steering/ubusobj"
)

// queues is the rx and tx queue count of every veth.
const queues = 4

// hotWait bounds the time from the hotplug event to the applied knobs.
const hotWait = time.Second

// devNames are the veths of one run. NAPI threads are named
// napi/<dev>-<id> host-wide (and the kernel keeps only 15 bytes of a
// thread's name), so the names are short and chosen per run so that two
// runs at once (or a host device) never share a thread name.
type devNames struct {
	devA   string // named in the config, with custom overrides: RPS CPU 1, NAPI CPU 1
	devB   string // named only: follows the mode's rules
	devHot string // created later for the hotplug event; overrides: RPS CPU 0, NAPI CPU 0
	// The peers are named nowhere: they must never be touched.
	peerA, peerB, peerHot string
}

// pickNames chooses "h" + two random characters + a role letter, such that
// no NAPI thread on the host starts with that prefix yet.
func pickNames(t *testing.T) devNames {
	t.Helper()
	const chars = "abcdefghijklmnopqrstuvwxyz0123456789"
	for try := 0; try < 50; try++ {
		var b [2]byte
		if _, err := rand.Read(b[:]); err != nil {
			t.Fatal(err)
		}
		p := "h" + string(chars[int(b[0])%len(chars)]) + string(chars[int(b[1])%len(chars)])
		used := false
		for _, role := range "abcxyz" {
			if pids, err := netnstest.NAPIThreads(p+string(role), 0); err != nil || len(pids) > 0 {
				used = true
			}
		}
		if !used {
			return devNames{devA: p + "a", devB: p + "b", devHot: p + "c", peerA: p + "x", peerB: p + "y", peerHot: p + "z"}
		}
	}
	t.Fatal("no free veth name prefix")
	return devNames{}
}

func (n devNames) managed() []string   { return []string{n.devA, n.devB} }
func (n devNames) unmanaged() []string { return []string{n.peerA, n.peerB} }

const networkConfig = `config interface 'loopback'
	option device 'lo'
	option proto 'static'
	option ipaddr '127.0.0.1'
	option netmask '255.0.0.0'

config globals 'globals'
	option ula_prefix 'fd00:198:18::/48'
	option packet_steering '1'
`

const firewallConfig = `config defaults
	option input 'REJECT'
	option output 'ACCEPT'
	option forward 'REJECT'
	option flow_offloading '0'
`

// steeringConfig names the managed devices (the hotplug one too, before
// it exists).
func steeringConfig(n devNames) string {
	return fmt.Sprintf(`config globals 'globals'
	option mode 'auto'
	option flows '0'

config device
	option name '%s'
	option rps_cpus '2'
	option napi_cpus '1'

config device
	option name '%s'

config device
	option name '%s'
	option rps_cpus '1'
	option napi_cpus '0'
`, n.devA, n.devB, n.devHot)
}

// TestRouterLifecycle drives the real binary as a router would, on real
// veths with threaded NAPI: set_mode through ubus in every mode that reads
// the config (checking the kernel's files, the threads' real affinity and
// the UCI files on disk after each), a live-only change, a restart that
// re-applies the persisted state over a perturbed kernel, a hotplug event
// through the shipped hotplug.d script, and the daemon-level faults (racing
// set_mode callers, a corrupt config file, a read-only config dir).
func TestRouterLifecycle(t *testing.T) {
	testenv.Short(t, "end-to-end kernel test")
	netnstest.Skip(t)
	for _, tool := range []string{"ethtool", "chroot", "mount", "sh", "go", "grep"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Skipf(t, "needs %s: %v", tool, err)
		}
	}
	if runtime.NumCPU() < 2 || runtime.NumCPU() > 64 {
		testenv.Skipf(t, "needs 2..64 CPUs (steering manages nothing on one), have %d", runtime.NumCPU())
	}
	// net.core.rps_sock_flow_entries exists in the initial network
	// namespace only; a non-zero flows must not reach the host's.
	const sockFlows = "/proc/sys/net/core/rps_sock_flow_entries"
	hostSockFlows, err := os.ReadFile(sockFlows)
	if err != nil {
		testenv.Skipf(t, "read %s: %v", sockFlows, err)
	}
	t.Cleanup(func() {
		if now, err := os.ReadFile(sockFlows); err != nil || string(now) != string(hostSockFlows) {
			t.Errorf("host %s changed: %q -> %q (%v)", sockFlows, hostSockFlows, now, err)
		}
	})
	began := time.Now()
	r := setup(t)
	if _, err := r.ns.Exec("test", "-e", sockFlows); err == nil {
		testenv.Skipf(t, "%s is visible inside the namespace: a flows test would change the host's", sockFlows)
	}
	t.Logf("setup (build, namespace, daemon start): %v", time.Since(began).Round(time.Millisecond))

	baseline := r.baseline
	checkUnmanaged := func(step string) {
		t.Helper()
		now, err := r.readDevs(r.unmanaged()...)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range r.unmanaged() {
			if fmt.Sprint(*now[d]) != fmt.Sprint(*baseline[d]) {
				t.Errorf("%s: unmanaged %s changed: %+v -> %+v", step, d, *baseline[d], *now[d])
			}
		}
	}

	t.Run("set_mode", func(t *testing.T) {
		for _, step := range r.modeSteps() {
			r.setMode(t, step.mode, step.flows, true)
			r.checkMode(t, step.mode, step.flows, step.want)
			r.checkUCI(t, step.mode, step.flows)
			checkUnmanaged(step.mode)
		}
	})
	if t.Failed() {
		t.FailNow()
	}

	t.Run("restart", func(t *testing.T) {
		// A live-only change: the kernel follows, the files do not.
		r.setMode(t, "off", 0, false)
		r.checkMode(t, "off", 0, r.offWant())
		r.checkUCI(t, "custom", 0)

		r.daemon.stop(t)
		// Perturb while it is down (the live-only off already left every
		// knob away from custom): one RPS mask and one thread's affinity.
		r.ns.MustExec(t, "sh", "-c", "echo 1 > /sys/class/net/"+r.devB+"/queues/rx-1/rps_cpus")
		st, err := r.readDevs(r.devB)
		if err != nil {
			t.Fatal(err)
		}
		if err := setNAPIAffinity(st[r.devB].napi[0].pid, allCPUs(r.cpus)&^1); err != nil {
			t.Fatal(err)
		}

		start := time.Now()
		r.startDaemon(t)
		status := r.waitServing(t)
		t.Logf("restart to serving: %v", time.Since(start).Round(time.Millisecond))
		if status.Mode != "custom" || status.Configured.Source != "packet_steering" || !status.InSync {
			t.Errorf("after restart: mode %s (source %s), in sync %v; want the persisted custom, in sync%s",
				status.Mode, status.Configured.Source, status.InSync, r.outOfSync())
		}
		if status.LastApply.Changed == 0 || status.LastApply.Failed != 0 {
			t.Errorf("start apply changed %d, failed %d; want the perturbed knobs restored", status.LastApply.Changed, status.LastApply.Failed)
		}
		r.checkKernel(t, "custom after restart", r.customWant())
		r.checkUCI(t, "custom", 0)
		checkUnmanaged("restart")
	})
	if t.Failed() {
		t.FailNow()
	}

	t.Run("hotplug", func(t *testing.T) { r.hotplug(t) })
	if t.Failed() {
		t.FailNow()
	}

	t.Run("racing_set_mode", func(t *testing.T) { r.racingSetMode(t) })
	t.Run("corrupt_config", func(t *testing.T) { r.corruptConfig(t) })
	t.Run("read_only_config", func(t *testing.T) { r.readOnlyConfig(t) })
	checkUnmanaged("faults")

	r.daemon.stop(t)
	t.Logf("whole test: %v", time.Since(began).Round(time.Millisecond))
}

// setup builds the binary into a fresh chroot dir, creates the namespace
// and veths, writes the config, starts the broker and the daemon and waits
// for its start apply.
func setup(t *testing.T) *router {
	t.Helper()
	// A short path: the broker's socket lives inside it (108-byte limit).
	root, err := os.MkdirTemp("", "e2e-root")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Only after the daemon (registered later, so killed earlier) is
		// gone; its /sys and /proc binds lived in its own mount namespace.
		if err := os.RemoveAll(root); err != nil {
			t.Errorf("remove %s: %v", root, err)
		}
	})
	r := &router{top: t, devNames: pickNames(t), root: root, cpus: runtime.NumCPU(),
		bin:  filepath.Join(root, "usr", "bin", "packet-steering"),
		sock: filepath.Join(root, "var", "run", "ubus", "ubus.sock")}
	if len(r.sock) > 100 {
		testenv.Skipf(t, "socket path %s too long for a unix socket", r.sock)
	}
	testenv.WriteTree(t, root, map[string]string{
		"etc/config/network":         networkConfig,
		"etc/config/firewall":        firewallConfig,
		"etc/config/packet_steering": steeringConfig(r.devNames),
		"etc/openwrt_release":        "DISTRIB_ID='OpenWrt'\nDISTRIB_TARGET='x86/64'\n",
	})
	for _, d := range []string{"sys", "proc", "tmp", "var/lock", "var/run/ubus", "usr/bin"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}

	build := exec.Command("go", "build", "-o", r.bin, "./cmd/packet-steering")
	build.Dir = ".."
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	r.ns = netnstest.New(t, "h5")
	for i, dev := range r.managed() {
		r.ns.AddVeth(t, netnstest.Veth{Name: dev, Peer: r.unmanaged()[i], Queues: queues, Threaded: true,
			Addr: fmt.Sprintf("198.18.50.%d/30", 4*i+1), PeerAddr: fmt.Sprintf("198.18.50.%d/30", 4*i+2)})
	}
	for _, dev := range append(r.managed(), r.unmanaged()...) {
		if pids, err := netnstest.NAPIThreads(dev, queues); err != nil || len(pids) != queues {
			t.Fatalf("NAPI threads of %s: %v %v", dev, pids, err)
		}
	}

	broker, err := ubustest.Listen(r.sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := broker.Close(); err != nil {
			t.Errorf("broker: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	if r.conn, err = ubus.Dial(ctx, r.sock); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.conn.Close() })

	// The peers as the kernel made them, before any daemon ran.
	if r.baseline, err = r.readDevs(r.unmanaged()...); err != nil {
		t.Fatal(err)
	}
	r.startDaemon(t)
	st := r.waitServing(t)
	r.checkKernel(t, "first start", map[string]expect{r.devA: autoWant(r.cpus, 0), r.devB: autoWant(r.cpus, 0)})
	if st.Mode != "auto" || st.Configured.Source != "packet_steering" || !st.InSync {
		t.Fatalf("first start: mode %s (source %s), in sync %v, last apply %+v; want auto from packet_steering, in sync%s\n%s",
			st.Mode, st.Configured.Source, st.InSync, *st.LastApply, r.outOfSync(), r.daemon.out.String())
	}
	return r
}

// modeStep is one set_mode and the state each managed device must then
// hold, derived from the rules in the design, not from the daemon.
type modeStep struct {
	mode  string
	flows int
	want  map[string]expect
}

func (r *router) offWant() map[string]expect {
	off := expect{rps: repeat[uint64](0, queues), flows: repeat(0, queues), napi: repeat(allCPUs(r.cpus), queues)}
	return map[string]expect{r.devA: off, r.devB: off}
}

// autoWant: a queue per CPU or more is RSS (steering's rss-per-cpu rule):
// the NAPI thread of rx-i (the i-th by NAPI id: on veth with threaded NAPI
// turned on after creation, PID order is the reverse of queue order, and
// traffic sent on the peer's tx-q wakes the thread with the q-th lowest id)
// and tx-i's XPS on CPU i mod n, RPS off.
func autoWant(cpus, flows int) expect {
	return expect{rps: repeat[uint64](0, queues), flows: repeat(flows, queues),
		xps: roundRobin(queues, cpus), napi: roundRobin(queues, cpus), napiByID: true}
}

// customWant: auto, with devA's overrides (RPS mask 2, threads on CPU 1).
func (r *router) customWant() map[string]expect {
	a := autoWant(r.cpus, 0)
	a.rps = repeat[uint64](2, queues)
	a.napi = repeat[uint64](2, queues)
	return map[string]expect{r.devA: a, r.devB: autoWant(r.cpus, 0)}
}

func (r *router) modeSteps() []modeStep {
	legacy := expect{flows: repeat(0, queues), rpsAwayFromNAPI: true}
	return []modeStep{
		{"legacy", 0, map[string]expect{r.devA: legacy, r.devB: legacy}},
		{"off", 0, r.offWant()},
		{"auto", 32, map[string]expect{r.devA: autoWant(r.cpus, 32), r.devB: autoWant(r.cpus, 32)}},
		{"custom", 0, r.customWant()},
	}
}

// setMode calls set_mode and requires a complete apply.
func (r *router) setMode(t *testing.T, mode string, flows int, persist bool) {
	t.Helper()
	var rep applyReply
	args := fmt.Sprintf(`{"mode":%q,"flows":%d,"persist":%t}`, mode, flows, persist)
	if err := r.call("set_mode", args, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Mode != mode || len(rep.Failed) != 0 {
		t.Fatalf("set_mode %s: reply mode %q, failed %s", args, rep.Mode, rep.Failed)
	}
	t.Logf("set_mode %s: %d changed, %d unchanged", args, len(rep.Changed), rep.Unchanged)
}

// checkMode checks status, the kernel and that a second apply changes
// nothing.
func (r *router) checkMode(t *testing.T, mode string, flows int, want map[string]expect) {
	t.Helper()
	st, err := r.status()
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode != mode || st.Configured.Flows != flows || !st.InSync {
		t.Errorf("%s: status mode %s flows %d in sync %v%s", mode, st.Mode, st.Configured.Flows, st.InSync, r.outOfSync())
	}
	r.checkKernel(t, mode, want)
	var rep applyReply
	if err := r.call("apply", `{"reason":"e2e again"}`, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Changed) != 0 || len(rep.Failed) != 0 {
		t.Errorf("%s: a second apply changed %s, failed %s", mode, rep.Changed, rep.Failed)
	}
}

// checkKernel compares the managed devices' kernel state with want and with
// what the daemon says it wants.
func (r *router) checkKernel(t *testing.T, step string, want map[string]expect) {
	t.Helper()
	devs := make([]string, 0, len(want))
	for d := range want {
		devs = append(devs, d)
	}
	state, err := r.readDevs(devs...)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range devs {
		for _, e := range want[d].check(d, state[d], r.cpus) {
			t.Errorf("%s: %s", step, e)
		}
		for _, e := range r.checkAgainstDaemon(d, state[d]) {
			t.Errorf("%s: %s", step, e)
		}
	}
}

// checkUCI checks the files on disk: packet_steering.globals holds the
// mode and flows, network.globals says the same to LuCI and the stock
// scripts (0 off, 2 all, else 1).
func (r *router) checkUCI(t *testing.T, mode string, flows int) {
	t.Helper()
	got, err := r.uciOptions("packet_steering.globals.mode", "packet_steering.globals.flows",
		"network.@globals[0].packet_steering", "network.@globals[0].steering_flows")
	if err != nil {
		t.Fatal(err)
	}
	network := "1"
	switch mode {
	case "off":
		network = "0"
	case "all":
		network = "2"
	}
	want := map[string]string{
		"packet_steering.globals.mode":        mode,
		"packet_steering.globals.flows":       fmt.Sprint(flows),
		"network.@globals[0].packet_steering": network,
		"network.@globals[0].steering_flows":  fmt.Sprint(flows),
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %s = %q on disk, want %q", mode, k, got[k], v)
		}
	}
}

// hotplug creates a veth named in the config and runs the shipped hotplug.d
// script for it the way procd's hotplug-call does (sourced in a subshell),
// with a `ubus` stand-in that forwards to `packet-steering call`; the new
// device's knobs must be applied within a second of the event.
func (r *router) hotplug(t *testing.T) {
	r.ns.AddVeth(t, netnstest.Veth{Name: r.devHot, Peer: r.peerHot, Queues: queues, Threaded: true})
	if pids, err := netnstest.NAPIThreads(r.devHot, queues); err != nil || len(pids) != queues {
		t.Fatalf("NAPI threads of %s: %v %v", r.devHot, pids, err)
	}
	want := autoWant(r.cpus, 0)
	want.rps = repeat[uint64](1, queues)
	want.napi = repeat[uint64](1, queues)
	before, err := r.readDevs(r.devHot, r.peerHot)
	if err != nil {
		t.Fatal(err)
	}
	if len(want.check(r.devHot, before[r.devHot], r.cpus)) == 0 {
		t.Fatalf("%s already holds the wanted state before the event: the check could not fail", r.devHot)
	}

	dir := t.TempDir()
	calls := filepath.Join(dir, "calls")
	testenv.WriteTree(t, dir, map[string]string{
		"bin/ubus": fmt.Sprintf(`#!/bin/sh
# ubus stand-in: list and call of packet_steering through packet-steering call.
echo "ubus $*" >>%[1]q
t=30
while :; do
	case "$1" in
	-t) t=$2; shift 2 ;;
	-s) shift 2 ;;
	-v) shift ;;
	*) break ;;
	esac
done
case "$1 $2" in
"list packet_steering") exec %[2]q call --socket %[3]q --timeout "$t" status >/dev/null 2>>%[1]q ;;
"call packet_steering") shift 2; exec %[2]q call --socket %[3]q --timeout "$t" "$@" 2>>%[1]q ;;
esac
exit 1
`, calls, r.bin, r.sock),
		// The one-shot fallback must not run while the daemon serves (and
		// must never steer the host): this stand-in only records.
		"bin/packet-steering":                  fmt.Sprintf("#!/bin/sh\necho \"packet-steering $*\" >>%q\nexit 1\n", calls),
		"bin/logger":                           fmt.Sprintf("#!/bin/sh\necho \"logger $*\" >>%q\n", calls),
		"instroot/etc/rc.d/S95packet-steering": "",
		"instroot/var/lock/.keep":              "",
	})
	script, err := filepath.Abs("../files/etc/hotplug.d/net/20-packet-steering")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", `( . "$1" )`, "hotplug-call", script)
	cmd.Env = []string{
		"PATH=" + filepath.Join(dir, "bin") + ":/usr/sbin:/usr/bin:/sbin:/bin",
		"ACTION=add", "DEVICENAME=" + r.devHot, "INTERFACE=" + r.devHot,
		"IPKG_INSTROOT=" + filepath.Join(dir, "instroot"),
	}

	events := r.listenApplied(t)
	event := time.Now()
	out, err := cmd.CombinedOutput()
	scriptTime := time.Since(event)
	if err != nil {
		t.Fatalf("hotplug script: %v\n%s", err, out)
	}
	var last *devState
	for {
		state, err := r.readDevs(r.devHot)
		if err != nil {
			t.Fatal(err)
		}
		last = state[r.devHot]
		if len(want.check(r.devHot, last, r.cpus)) == 0 {
			break
		}
		if time.Since(event) > hotWait {
			rec, _ := os.ReadFile(calls)
			t.Fatalf("%s not applied within %v of the event: %v\ncalls:\n%s\ndaemon:\n%s", r.devHot, hotWait,
				want.check(r.devHot, last, r.cpus), rec, r.daemon.out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("hotplug: script ran %v, knobs applied within %v of the event",
		scriptTime.Round(time.Millisecond), time.Since(event).Round(time.Millisecond))
	select {
	case ev := <-events:
		if ev["reason"] != "hotplug" || fmt.Sprint(ev["changed"]) == "0" {
			t.Errorf("applied event %v, want reason hotplug with changes", ev)
		}
	case <-time.After(time.Until(event.Add(hotWait))):
		t.Errorf("no %s event within %v of the hotplug event", ubusobj.EventApplied, hotWait)
	}
	for _, e := range r.checkAgainstDaemon(r.devHot, last) {
		t.Error(e)
	}

	b, err := os.ReadFile(calls)
	if err != nil {
		t.Fatal(err)
	}
	rec := string(b)
	wantCall := `ubus -t 2 call packet_steering apply {"device":"` + r.devHot + `","reason":"hotplug"}`
	if !strings.Contains(rec, wantCall) || strings.Contains(rec, "packet-steering ") || strings.Contains(rec, "logger ") {
		t.Errorf("hotplug calls:\n%swant %s and no one-shot fallback", rec, wantCall)
	}
	st, err := r.status()
	if err != nil {
		t.Fatal(err)
	}
	if st.LastApply == nil || st.LastApply.Reason != "hotplug" || !st.InSync {
		t.Errorf("after hotplug: last apply %+v, in sync %v%s", st.LastApply, st.InSync, r.outOfSync())
	}
	r.checkKernel(t, "others after hotplug", r.customWant())
	after, err := r.readDevs(r.peerHot)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(*after[r.peerHot]) != fmt.Sprint(*before[r.peerHot]) {
		t.Errorf("unmanaged %s changed by the hotplug apply: %+v -> %+v", r.peerHot, *before[r.peerHot], *after[r.peerHot])
	}
}

// racingSetMode has two ubus clients call set_mode (persist) at the same
// time, repeatedly, while this process (another writer, as `uci commit`
// would be) commits packet_steering too: no file is torn, no commit is
// lost, the files hold one of the requests (mode and flows together, in
// both files) and the kernel the state that request names.
func (r *router) racingSetMode(t *testing.T) {
	reqs := []struct {
		mode  string
		flows int
	}{{"legacy", 16}, {"off", 0}}
	const commits = 20
	var wg sync.WaitGroup
	errs := make([]error, len(reqs)+1)
	for i, req := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
			defer cancel()
			conn, err := ubus.Dial(ctx, r.sock)
			if err != nil {
				errs[i] = err
				return
			}
			defer conn.Close()
			args, err := ubus.AttrsFromJSON([]byte(fmt.Sprintf(`{"mode":%q,"flows":%d,"persist":true}`, req.mode, req.flows)))
			if err != nil {
				errs[i] = err
				return
			}
			for j := 0; j < 5 && errs[i] == nil; j++ {
				_, errs[i] = conn.Call(ctx, "packet_steering", "set_mode", args)
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < commits && errs[len(reqs)] == nil; i++ {
			errs[len(reqs)] = uci.Update(r.configDir(), "packet_steering", func(p *uci.Package) error {
				if p.Section("e2e") == nil {
					if _, err := p.AddSection("note", "e2e"); err != nil {
						return err
					}
				}
				return p.Set("e2e", "n", strconv.Itoa(i))
			})
		}
	}()
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("writer %d: %v", i, err)
		}
	}
	p, err := uci.Load(r.configDir(), "packet_steering")
	if err != nil {
		t.Fatalf("packet_steering after the race: %v", err)
	}
	final, _ := p.Get("globals", "mode")
	if n, _ := p.Get("e2e", "n"); n != strconv.Itoa(commits-1) {
		t.Errorf("the other writer's last commit was lost: n = %q, want %d", n, commits-1)
	}
	if d := len(p.SectionsOfType("device")); d != 3 || len(p.SectionsOfType("globals")) != 1 {
		t.Errorf("sections after the race: %d device (want 3), %d globals", d, len(p.SectionsOfType("globals")))
	}
	var want map[string]expect
	switch final {
	case "legacy":
		legacy := expect{flows: repeat(16, queues), rpsAwayFromNAPI: true}
		want = map[string]expect{r.devA: legacy, r.devB: legacy}
		r.checkUCI(t, final, 16)
		r.checkMode(t, final, 16, want)
	case "off":
		r.checkUCI(t, final, 0)
		r.checkMode(t, final, 0, r.offWant())
	default:
		t.Fatalf("after the race the file holds mode %q, not one of the requests", final)
	}
	t.Logf("race ended in %s", final)
}

// corruptConfig: a packet_steering file that does not parse. Status reports
// it, applies keep the last good state, set_mode with persist refuses and
// the file stays as the user left it.
func (r *router) corruptConfig(t *testing.T) {
	path := filepath.Join(r.configDir(), "packet_steering")
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	before, err := r.status()
	if err != nil {
		t.Fatal(err)
	}
	corrupt := []byte("config globals 'globals'\n\toption mode 'all\n")
	if err := os.WriteFile(path, corrupt, 0o600); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := os.WriteFile(path, good, 0o600); err != nil {
			t.Error(err)
		}
	}()
	kernelBefore, err := r.readDevs(r.managed()...)
	if err != nil {
		t.Fatal(err)
	}

	st, err := r.status()
	if err != nil {
		t.Fatal(err)
	}
	if len(st.ConfigErrors) != 1 || st.ConfigErrors[0].Path != "etc/config/packet_steering" {
		t.Errorf("status config_errors %+v, want the packet_steering parse error", st.ConfigErrors)
	}
	if st.Mode != before.Mode || st.Configured != before.Configured {
		t.Errorf("corrupt file changed the settings: %+v -> %+v", before.Configured, st.Configured)
	}
	var rep applyReply
	if err := r.call("apply", `{"reason":"e2e corrupt"}`, &rep); err != nil {
		t.Errorf("apply with a corrupt file: %v", err)
	} else if len(rep.Changed) != 0 || len(rep.Failed) != 0 {
		t.Errorf("apply with a corrupt file changed %s, failed %s; want the last good state kept", rep.Changed, rep.Failed)
	}
	logged := len(r.daemon.out.String())
	err = r.call("set_mode", `{"mode":"auto","flows":0,"persist":true}`, nil)
	if err == nil {
		t.Errorf("set_mode persisted over a corrupt file")
	} else {
		t.Logf("set_mode over a corrupt file: %v (status %d)", err, errStatus(err))
	}
	r.checkLogged(t, logged, "save /etc/config/packet_steering", "parse error")
	if b, _ := os.ReadFile(path); string(b) != string(corrupt) {
		t.Errorf("corrupt file rewritten:\n%s", b)
	}
	r.checkUnchanged(t, "corrupt config", kernelBefore)
}

// readOnlyConfig: set_mode with persist on an immutable config dir fails
// with an error and leaves the kernel, the files and the mode as they were.
func (r *router) readOnlyConfig(t *testing.T) {
	dir := r.configDir()
	if _, err := exec.LookPath("chattr"); err != nil {
		testenv.Skipf(t, "needs chattr to make a directory read-only for root")
	}
	if out, err := exec.Command("chattr", "+i", dir).CombinedOutput(); err != nil {
		testenv.Skipf(t, "chattr +i not supported on %s: %v %s", dir, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("chattr", "-i", dir).CombinedOutput(); err != nil {
			t.Errorf("chattr -i %s: %v %s", dir, err, out)
		}
	})
	filesBefore := readDir(t, dir)
	before, err := r.status()
	if err != nil {
		t.Fatal(err)
	}
	kernelBefore, err := r.readDevs(r.managed()...)
	if err != nil {
		t.Fatal(err)
	}
	mode := "auto"
	if before.Mode == "auto" {
		mode = "off"
	}
	logged := len(r.daemon.out.String())
	err = r.call("set_mode", fmt.Sprintf(`{"mode":%q,"flows":0,"persist":true}`, mode), nil)
	if err == nil {
		t.Fatalf("set_mode %s persisted into a read-only config dir", mode)
	}
	// The caller gets only a ubus status; the log (syslog on a router)
	// says which file could not be written.
	r.checkLogged(t, logged, "save /etc/config/packet_steering")
	if errStatus(err) == ubus.StatusInvalidArgument {
		t.Errorf("read-only config dir reported as the caller's error: %v", err)
	}
	t.Logf("set_mode on a read-only config dir: %v", err)
	after, err := r.status()
	if err != nil {
		t.Fatal(err)
	}
	if after.Mode != before.Mode || after.Configured != before.Configured {
		t.Errorf("live settings changed: %+v -> %+v", before.Configured, after.Configured)
	}
	r.checkUnchanged(t, "read-only config", kernelBefore)
	if got := readDir(t, dir); fmt.Sprint(got) != fmt.Sprint(filesBefore) {
		t.Errorf("config files changed:\n%v\n%v", filesBefore, got)
	}
}

// checkLogged requires the daemon's output after the first `from` bytes to
// contain every one of want.
func (r *router) checkLogged(t *testing.T, from int, want ...string) {
	t.Helper()
	out := r.daemon.out.String()[from:]
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("daemon log lacks %q:\n%s", w, out)
		}
	}
}

// checkUnchanged requires the managed devices' kernel state to equal before.
func (r *router) checkUnchanged(t *testing.T, step string, before map[string]*devState) {
	t.Helper()
	now, err := r.readDevs(r.managed()...)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range r.managed() {
		if fmt.Sprint(*now[d]) != fmt.Sprint(*before[d]) {
			t.Errorf("%s: kernel state of %s changed: %+v -> %+v", step, d, *before[d], *now[d])
		}
	}
}

// readDir returns every file's content in dir by name.
func readDir(t *testing.T, dir string) map[string]string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = string(b)
	}
	return out
}
