package vmtest

import (
	"context"
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/packet-steering/packet-steering/internal/cpuset"
	"github.com/packet-steering/packet-steering/internal/netnstest"
)

// The big.LITTLE test bed (docs/platforms.md, "Test beds"; `make
// bed-biglittle`): the 4-vCPU arm64 guest of TestVM booted with a device
// tree whose cpu nodes carry capacity-dmips-mhz (CPUs 0-1 little, 485 as
// rk3399.dtsi's A53s; CPUs 2-3 big, 1024 as its A72s; one cluster each),
// so that its kernel reports different cpu_capacity, and with the little
// vCPUs made slower on the host: QEMU runs each vCPU in a thread of its own
// (-accel tcg,thread=multi), and the test puts every vCPU thread in a cpu
// cgroup (v1) of its own below one of the test's, the little ones with a
// CFS quota of BED_LITTLE_PCT% of a host CPU and as small a share. The
// guest's multi-queue virtio NIC (BED_QUEUES queue pairs, fewer than the
// CPUs, threaded NAPI) receives UDP flows the host sends into its tap from
// an AF_PACKET socket (frameFlood); the guest forwards them out of a dummy
// LAN device whose tx_packets count them. Inside the guest `packet-steering
// tune` runs the stock rule (legacy), auto, off and placements of the NIC's
// NAPI threads and RPS on the little and the big cores; the test prints
// forwarded packets/s per candidate as ratios to auto's. It fails only when
// the bed does not work: the capacities are not the device tree's, auto
// did not put the NIC's NAPI threads on the big cores, nothing was
// forwarded, or the sweep did not complete.

// bedBigLittleInit is the bed guest's /init.
//
//go:embed bed_biglittle.sh
var bedBigLittleInit []byte

// The guest's CPUs: which are little and the capacity-dmips-mhz of each
// kind (rk3399.dtsi: 485 for the Cortex-A53 cluster, 1024 for the A72s).
// The kernel normalises the largest to 1024, so these are the cpu_capacity
// values the guest must report.
const (
	blCPUs        = 4
	blLittleDMIPS = 485
	blBigDMIPS    = 1024
)

var (
	blLittle = cpuset.Range(0, 1)
	blBig    = cpuset.Range(2, 3)
	// bedNICMAC is the guest NIC's MAC, the frames' destination.
	bedNICMAC = net.HardwareAddr{0x02, 0x00, 0x5e, 0x10, 0x00, 0x03}
)

// blCandidates is the default sweep: the modes, then the NIC's NAPI
// threads on the little and on the big cores with RPS as auto places it,
// with RPS off, and with RPS on the other kind of core.
const blCandidates = "legacy;auto;off;" +
	"eth0:threads=0-1;eth0:threads=2-3;" +
	"eth0:0/eth0:threads=0-1;eth0:0/eth0:threads=2-3;" +
	"eth0:c/eth0:threads=0-1;eth0:3/eth0:threads=2-3"

const (
	// blPPSDefault is the offered load, meant to be above what the guest
	// forwards, so that the steering decides the rate: the smoke run at
	// 100000 forwarded all of it (docs/platforms.md, "big.LITTLE").
	blPPSDefault = 300000
	// blPeriodUS is the little vCPUs' CFS period: short, so that a
	// throttled vCPU is stopped for a few milliseconds at a time rather
	// than for most of the default 100 ms.
	blPeriodUS = 10000
)

// blCapacities is each CPU's capacity-dmips-mhz.
func blCapacities() []int {
	caps := make([]int, blCPUs)
	for i := range caps {
		caps[i] = blBigDMIPS
		if blLittle.Has(i) {
			caps[i] = blLittleDMIPS
		}
	}
	return caps
}

// bigLittleBedGuest is the arm64 guest with one multi-queue NIC, the bed's
// modules and script.
func bigLittleBedGuest(queues, pps, runs, seconds, interleave int, candidates string) (*guest, error) {
	var g *guest
	for _, c := range guests() {
		if c.name == "arm64" {
			g = c
		}
	}
	if g == nil {
		return nil, errors.New("no arm64 guest in guests()")
	}
	if g.cpus != blCPUs {
		return nil, fmt.Errorf("the arm64 guest has %d CPUs, the bed is laid out for %d", g.cpus, blCPUs)
	}
	g.name = "bed-biglittle"
	g.modules = []string{"virtio_pci", "virtio_net", "dummy"}
	g.adaptive = false
	g.queues = queues
	g.mqOnly = true
	g.timeout = 60 * time.Minute
	// Named threads ("CPU 0/TCG"): how the test finds each vCPU's.
	g.machine = append(append([]string(nil), g.machine...), "-name", "bed-biglittle,debug-threads=on")
	g.init = bedBigLittleInit
	g.conf = fmt.Sprintf("BED_MAC=%s\nBED_RUNS=%d\nBED_LOAD_SECONDS=%d\nBED_PPS=%d\nBED_INTERLEAVE=%d\nBED_CANDIDATES=%q\n",
		bedNICMAC, runs, seconds, pps, interleave, candidates)
	g.files = map[string][]byte{"etc/bed-count.sh": []byte(bedCount)}
	return g, nil
}

func TestBedBigLittle(t *testing.T) {
	requireBeds(t)
	pps := envInt(t, "BED_PPS", blPPSDefault, 1000, 1_000_000)
	runs := envInt(t, "BED_RUNS", 5, 1, 20)
	seconds := envInt(t, "BED_SECONDS", 3, 1, 60)
	interleave := envInt(t, "BED_INTERLEAVE", 1, 0, 1)
	queues := envInt(t, "BED_QUEUES", 2, 1, blCPUs)
	pct := envInt(t, "BED_LITTLE_PCT", 40, 5, 100)
	candidates := blCandidates
	if v := os.Getenv("BED_CANDIDATES"); v != "" {
		candidates = v
	}
	g, err := bigLittleBedGuest(queues, pps, runs, seconds, interleave, candidates)
	if err != nil {
		t.Fatal(err)
	}
	var (
		cgs       atomic.Pointer[vcpuCgroups] // set by started, read by the console's reader
		used      [2][]time.Duration          // each vCPU's run time at FLOOD start and stop
		usedStart time.Time
		usedWall  time.Duration
	)
	g.started = func(pid int) error {
		cg, err := throttleVCPUs(t, pid, blCPUs, blLittle, pct)
		cgs.Store(cg)
		return err
	}
	// How much host CPU each vCPU thread had while the host sent: the
	// little ones' share shows the throttle at work.
	g.watch = func(_ *netnstest.NS, l string) {
		cg := cgs.Load()
		if cg == nil {
			return
		}
		switch strings.TrimSpace(l) {
		case "=== FLOOD start":
			used[0], usedStart = cg.runTimes(), time.Now()
		case "=== FLOOD stop":
			used[1], usedWall = cg.runTimes(), time.Since(usedStart)
		}
	}
	prepare := func(ctx context.Context, c *cache) error {
		removeStaleCgroups(t)
		dtb, err := bigLittleDTB(ctx, g, filepath.Join(t.TempDir(), "biglittle.dtb"), blCapacities())
		if err != nil {
			return err
		}
		g.machine = append(g.machine, "-dtb", dtb)
		return nil
	}
	flood := &frameFlood{tap: tapMQ, pps: pps, frames: bedFrames(etherFrame)}
	con := bedBoot(t, g, flood, []string{"dtc"}, prepare)
	if cg := cgs.Load(); cg != nil {
		t.Logf("vCPU threads: %s", cg)
		if used[1] != nil && usedWall > 0 {
			var parts []string
			for n := range used[1] {
				parts = append(parts, fmt.Sprintf("CPU%d %.0f%%", n, 100*(used[1][n]-used[0][n]).Seconds()/usedWall.Seconds()))
			}
			t.Logf("host CPU of each vCPU thread while the host sent (%v): %s; %s", usedWall.Round(time.Second), strings.Join(parts, ", "), cg.throttled())
		}
	}
	if v := loadValue(con.sections["count"].body); v >= 0.9*float64(pps) {
		t.Logf("note: the guest forwarded %.0f of the %d packets/s offered before the sweep: the offered load, not the steering, may set the rates below (raise BED_PPS)", v, pps)
	}

	topo, _ := con.get("topology")
	t.Logf("the guest's CPUs:\n%s", topo)
	want := make([]string, blCPUs)
	for i, c := range blCapacities() {
		want[i] = strconv.Itoa(c * 1024 / blBigDMIPS)
	}
	if got := con.info["capacity"]; got != strings.Join(want, ",") {
		t.Fatalf("the guest reported cpu_capacity %q, want %q from the device tree's capacity-dmips-mhz", got, strings.Join(want, ","))
	}
	for _, m := range []string{"legacy", "auto"} {
		p, _ := con.get("plan-" + m)
		t.Logf("plan --mode %s in the guest:\n%s", m, p)
	}
	for _, m := range []string{"legacy", "off", "auto"} {
		t.Logf("%s: eth0 rx NAPI threads on %s, rps %s, input IRQs on %s", m, con.info["napi_"+m], con.info["rps_"+m], con.info["irq_"+m])
	}
	// auto puts the NIC's NAPI threads, where its receive work runs, on
	// the big cores.
	threads := strings.Split(con.info["napi_auto"], "/")
	for _, l := range threads {
		s, err := cpuset.ParseList(l)
		if err != nil || s.IsEmpty() || !s.Intersect(blLittle).IsEmpty() {
			q, _ := con.get("queues-auto")
			t.Fatalf("auto placed eth0's rx NAPI threads on %q, want big cores only (%s):\n%s", con.info["napi_auto"], blBig.List(), q)
		}
	}
	if len(threads) != queues {
		t.Errorf("eth0 has %d rx NAPI threads (%q), want one per queue (%d)", len(threads), con.info["napi_auto"], queues)
	}
	if con.info["napi_legacy"] == con.info["napi_auto"] && con.info["rps_legacy"] == con.info["rps_auto"] {
		t.Logf("note: legacy and auto placed eth0 alike with %d queues (BED_QUEUES): the sweep cannot tell them apart", queues)
	}

	rep := bedSweep(t, con)
	rep.extra.title = "eth0 napi"
	rep.extra.value = func(name string) string {
		switch name {
		case "legacy", "auto", "off", "all":
			return con.info["napi_"+name]
		}
		for _, part := range strings.Split(name, "/") {
			if _, cpus, ok := strings.Cut(part, "eth0:threads="); ok {
				return cpus
			}
		}
		return con.info["napi_auto"] // a custom candidate: auto's threads
	}
	header := fmt.Sprintf("big.LITTLE bed: arm64 guest, %s vCPUs (TCG; CPUs %s little: capacity %d, each vCPU thread at most %d%% of a host CPU; CPUs %s big: %d), eth0 %d queues (threaded NAPI), %d flows offered at %d pps from the host, forwarded eth0 -> lan0; packets/s, median (min-max) of %d runs of %d s%s",
		con.info["cpus"], blLittle.List(), blLittleDMIPS, pct, blBig.List(), blBigDMIPS, queues, bedFlows, pps, runs, seconds, bedInterleaved[interleave])
	t.Log("\n" + rep.table(header))
}

// etherFrame is flow i's frame: Ethernet to the guest's NIC, the flow's
// UDP packet (ipv4UDP), forwarded by the guest to its LAN.
func etherFrame(i int) []byte {
	b := make([]byte, 14+ipLen)
	copy(b[0:], bedNICMAC)
	copy(b[6:], bedPeerMAC)
	binary.BigEndian.PutUint16(b[12:], 0x0800)
	copy(b[14:], ipv4UDP(i))
	return b
}

// bigLittleDTB writes to path the device tree QEMU makes for g's machine
// (-M ...,dumpdtb=), with capacity-dmips-mhz caps[N] on each /cpus/cpu@N
// and the CPUs in clusters by capacity (withCapacities), compiled with dtc.
func bigLittleDTB(ctx context.Context, g *guest, path string, caps []int) (string, error) {
	machine := append([]string(nil), g.machine...)
	found := false
	for i := 0; i+1 < len(machine); i++ {
		if machine[i] == "-M" {
			machine[i+1] += ",dumpdtb=" + path + ".orig"
			found = true
		}
	}
	if !found {
		return "", fmt.Errorf("device tree: no -M in %q", machine)
	}
	args := append([]string{"-nodefaults", "-display", "none"}, machine...)
	if _, err := runCmd(ctx, "", nil, g.qemu, args...); err != nil {
		return "", fmt.Errorf("device tree: %w", err)
	}
	dts, err := runCmd(ctx, "", nil, "dtc", "-q", "-I", "dtb", "-O", "dts", path+".orig")
	if err != nil {
		return "", fmt.Errorf("device tree: %w", err)
	}
	dts, err = withCapacities(dts, caps)
	if err != nil {
		return "", fmt.Errorf("device tree: %w", err)
	}
	if err := os.WriteFile(path+".dts", []byte(dts), 0o644); err != nil {
		return "", fmt.Errorf("device tree: %w", err)
	}
	if _, err := runCmd(ctx, "", nil, "dtc", "-q", "-I", "dts", "-O", "dtb", "-o", path, path+".dts"); err != nil {
		return "", fmt.Errorf("device tree: %w", err)
	}
	return path, nil
}

var (
	dtsCPUNode = regexp.MustCompile(`(?m)^([ \t]*)cpu@([0-9a-f]+) \{\n([ \t]*)phandle = <(0x[0-9a-f]+)>;\n`)
	dtsCPUMap  = regexp.MustCompile(`(?m)^([ \t]*)cpu-map \{\n`)
)

// withCapacities returns dts (dtc's output for QEMU's virt machine) with
// capacity-dmips-mhz = caps[N] in every /cpus/cpu@N node and /cpus/cpu-map
// rewritten to one cluster per capacity, the smallest first, as on
// rk3399.dtsi (cluster0 the A53s, cluster1 the A72s). The kernel reads the
// capacities only when every CPU has one (drivers/base/arch_topology.c).
func withCapacities(dts string, caps []int) (string, error) {
	nodes := dtsCPUNode.FindAllStringSubmatchIndex(dts, -1)
	if len(nodes) != len(caps) {
		return "", fmt.Errorf("%d cpu nodes with a phandle, want %d", len(nodes), len(caps))
	}
	phandle := make([]string, len(caps))
	var b strings.Builder
	last := 0
	for _, m := range nodes {
		n, err := strconv.ParseInt(dts[m[4]:m[5]], 16, 0)
		if err != nil || n < 0 || int(n) >= len(caps) || phandle[n] != "" {
			return "", fmt.Errorf("unexpected cpu node cpu@%s", dts[m[4]:m[5]])
		}
		phandle[n] = dts[m[8]:m[9]]
		b.WriteString(dts[last:m[1]])
		fmt.Fprintf(&b, "%scapacity-dmips-mhz = <%#x>;\n", dts[m[6]:m[7]], caps[n])
		last = m[1]
	}
	b.WriteString(dts[last:])
	out := b.String()

	m := dtsCPUMap.FindStringSubmatchIndex(out)
	if m == nil {
		return "", errors.New("no cpu-map node")
	}
	end, err := nodeEnd(out, m[1])
	if err != nil {
		return "", fmt.Errorf("cpu-map: %w", err)
	}
	ind := out[m[2]:m[3]]
	var mp strings.Builder
	fmt.Fprintf(&mp, "%scpu-map {\n%s\tsocket0 {\n", ind, ind)
	var kinds []int
	for _, c := range caps {
		if !slices.Contains(kinds, c) {
			kinds = append(kinds, c)
		}
	}
	slices.Sort(kinds)
	for cl, k := range kinds {
		fmt.Fprintf(&mp, "%s\t\tcluster%d {\n", ind, cl)
		core := 0
		for n, c := range caps {
			if c == k {
				fmt.Fprintf(&mp, "%s\t\t\tcore%d {\n%s\t\t\t\tcpu = <%s>;\n%s\t\t\t};\n", ind, core, ind, phandle[n], ind)
				core++
			}
		}
		fmt.Fprintf(&mp, "%s\t\t};\n", ind)
	}
	fmt.Fprintf(&mp, "%s\t};\n%s};\n", ind, ind)
	return out[:m[0]] + mp.String() + out[end:], nil
}

// nodeEnd is the index just after the "};\n" closing the node whose body
// starts at i (just after its "{\n").
func nodeEnd(dts string, i int) (int, error) {
	depth := 1
	for ; i < len(dts); i++ {
		switch dts[i] {
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				j := strings.IndexByte(dts[i:], '\n')
				if j < 0 {
					return len(dts), nil
				}
				return i + j + 1, nil
			}
		}
	}
	return 0, errors.New("the node never ends")
}

// cgroupCPU is the cgroup v1 cpu controller's mount.
const cgroupCPU = "/sys/fs/cgroup/cpu"

// vcpuCgroups are the bed's cgroups: ps-bed-<test pid> below QEMU's own
// cpu cgroup (parent), with one child vcpuN per vCPU thread.
type vcpuCgroups struct {
	pid         int // QEMU's
	parent, dir string
	tids        map[int]int // vCPU -> thread id
	little      cpuset.Set
	pct         int
}

func (c *vcpuCgroups) String() string {
	var parts []string
	for n := 0; n < len(c.tids); n++ {
		kind := "big, unlimited"
		if c.little.Has(n) {
			kind = fmt.Sprintf("little, cfs quota %d/%d us", c.pct*blPeriodUS/100, blPeriodUS)
		}
		parts = append(parts, fmt.Sprintf("CPU %d thread %d (%s)", n, c.tids[n], kind))
	}
	return c.dir + ": " + strings.Join(parts, ", ")
}

// runTimes is each vCPU thread's time on a host CPU so far
// (/proc/PID/task/TID/schedstat); 0 for a thread that is gone.
func (c *vcpuCgroups) runTimes() []time.Duration {
	out := make([]time.Duration, len(c.tids))
	for n, tid := range c.tids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/schedstat", c.pid, tid))
		if err != nil {
			continue
		}
		if f := strings.Fields(string(b)); len(f) > 0 {
			ns, _ := strconv.ParseInt(f[0], 10, 64)
			out[n] = time.Duration(ns)
		}
	}
	return out
}

// throttled is the little vCPUs' cgroups' CFS counters: periods, periods
// throttled and time throttled.
func (c *vcpuCgroups) throttled() string {
	var parts []string
	for _, n := range c.little.CPUs() {
		b, err := os.ReadFile(filepath.Join(c.dir, fmt.Sprintf("vcpu%d", n), "cpu.stat"))
		if err != nil {
			parts = append(parts, fmt.Sprintf("CPU%d: %v", n, err))
			continue
		}
		st := map[string]int64{}
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, " "); ok {
				st[k], _ = strconv.ParseInt(v, 10, 64)
			}
		}
		parts = append(parts, fmt.Sprintf("CPU%d throttled in %d of %d periods (%v)", n, st["nr_throttled"], st["nr_periods"], time.Duration(st["throttled_time"]).Round(time.Millisecond)))
	}
	return strings.Join(parts, ", ")
}

// vcpuThread matches a vCPU thread's name under -name ...,debug-threads=on.
var vcpuThread = regexp.MustCompile(`^CPU ([0-9]+)/TCG$`)

// throttleVCPUs waits for the cpus vCPU threads of QEMU process pid and
// moves each into a cgroup of its own below the test's (vcpuCgroups):
// the little ones get a CFS quota of pct% of a host CPU per blPeriodUS and
// cpu.shares pct% of a big one's, so that they run at most pct% as much
// as a big vCPU whether the host is idle (the quota) or busy (the shares).
// The cgroups are removed when the test ends, the threads moved back
// first; also on failure. Only the threads of pid are ever moved.
func throttleVCPUs(t *testing.T, pid, cpus int, little cpuset.Set, pct int) (*vcpuCgroups, error) {
	if _, err := os.Stat(filepath.Join(cgroupCPU, "cpu.cfs_quota_us")); err != nil {
		return nil, fmt.Errorf("the big.LITTLE bed needs the cgroup v1 cpu controller at %s: %w", cgroupCPU, err)
	}
	tids, err := vcpuThreads(pid, cpus, time.Minute)
	if err != nil {
		return nil, err
	}
	parent, err := cpuCgroupOf(pid)
	if err != nil {
		return nil, err
	}
	c := &vcpuCgroups{pid: pid, parent: parent, dir: filepath.Join(parent, fmt.Sprintf("ps-bed-%d", os.Getpid())), tids: tids, little: little, pct: pct}
	t.Cleanup(func() {
		if err := removeCgroup(c.dir, c.parent); err != nil {
			t.Errorf("remove the bed's cgroup: %v", err)
		}
	})
	if err := os.Mkdir(c.dir, 0o755); err != nil {
		return nil, fmt.Errorf("vCPU cgroup: %w", err)
	}
	// The group weighs as much as its threads did beside the host's
	// other tasks (each 1024).
	if err := writeCgroup(c.dir, "cpu.shares", 1024*cpus); err != nil {
		return nil, err
	}
	for n := 0; n < cpus; n++ {
		dir := filepath.Join(c.dir, fmt.Sprintf("vcpu%d", n))
		if err := os.Mkdir(dir, 0o755); err != nil {
			return nil, fmt.Errorf("vCPU cgroup: %w", err)
		}
		if little.Has(n) {
			if err := writeCgroup(dir, "cpu.shares", max(2, 1024*pct/100)); err != nil {
				return nil, err
			}
			if err := writeCgroup(dir, "cpu.cfs_period_us", blPeriodUS); err != nil {
				return nil, err
			}
			if err := writeCgroup(dir, "cpu.cfs_quota_us", pct*blPeriodUS/100); err != nil {
				return nil, err
			}
		}
		if err := writeCgroup(dir, "tasks", tids[n]); err != nil {
			return nil, fmt.Errorf("vCPU %d: %w", n, err)
		}
	}
	return c, nil
}

// vcpuThreads waits until QEMU process pid (once `ip netns exec` has exec'd
// it) has cpus threads named "CPU N/TCG" and returns their ids by vCPU.
func vcpuThreads(pid, cpus int, timeout time.Duration) (map[int]int, error) {
	deadline := time.Now().Add(timeout)
	for {
		tids := map[int]int{}
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err != nil {
			return nil, fmt.Errorf("QEMU process %d: %w", pid, err)
		}
		if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
			if i := strings.LastIndexByte(string(st), ')'); i >= 0 && strings.HasPrefix(string(st[i:]), ") Z") {
				return nil, fmt.Errorf("QEMU process %d (%s) exited before its vCPU threads ran", pid, strings.TrimSpace(string(comm)))
			}
		}
		if strings.HasPrefix(string(comm), "qemu-system") {
			tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
			if err != nil {
				return nil, fmt.Errorf("QEMU process %d: %w", pid, err)
			}
			for _, e := range tasks {
				name, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/comm", pid, e.Name()))
				if err != nil {
					continue
				}
				m := vcpuThread.FindStringSubmatch(strings.TrimSpace(string(name)))
				tid, terr := strconv.Atoi(e.Name())
				if m == nil || terr != nil {
					continue
				}
				n, _ := strconv.Atoi(m[1])
				tids[n] = tid
			}
			if len(tids) == cpus {
				return tids, nil
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("QEMU process %d (%s): %d of %d vCPU threads (\"CPU N/TCG\") within %v",
				pid, strings.TrimSpace(string(comm)), len(tids), cpus, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// cpuCgroupOf is the directory of process pid's cgroup under the v1 cpu
// controller.
func cpuCgroupOf(pid int) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return "", fmt.Errorf("cgroup of %d: %w", pid, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) == 3 && slices.Contains(strings.Split(f[1], ","), "cpu") {
			return filepath.Join(cgroupCPU, f[2]), nil
		}
	}
	return "", fmt.Errorf("cgroup of %d: not in the v1 cpu controller", pid)
}

// writeCgroup writes v to a cgroup's file.
func writeCgroup(dir, file string, v int) error {
	if err := os.WriteFile(filepath.Join(dir, file), []byte(strconv.Itoa(v)), 0o644); err != nil {
		return fmt.Errorf("cgroup %s: %w", filepath.Join(dir, file), err)
	}
	return nil
}

// removeCgroup moves every thread in dir's children (and dir) back to
// parent and removes them. A thread that is gone is no error; dir missing
// is none either.
func removeCgroup(dir, parent string) error {
	subs, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range subs {
		if e.IsDir() {
			errs = append(errs, emptyCgroup(filepath.Join(dir, e.Name()), parent))
		}
	}
	errs = append(errs, emptyCgroup(dir, parent))
	return errors.Join(errs...)
}

// emptyCgroup moves dir's threads to parent and removes dir, waiting a
// little for threads that are exiting.
func emptyCgroup(dir, parent string) error {
	var err error
	for try := 0; try < 20; try++ {
		b, rerr := os.ReadFile(filepath.Join(dir, "tasks"))
		if rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			return rerr
		}
		for _, f := range strings.Fields(string(b)) {
			werr := os.WriteFile(filepath.Join(parent, "tasks"), []byte(f), 0o644)
			if werr != nil && !errors.Is(werr, syscall.ESRCH) {
				return fmt.Errorf("move thread %s back to %s: %w", f, parent, werr)
			}
		}
		if err = os.Remove(dir); err == nil || errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("remove %s: %w", dir, err)
}

// staleCgroup matches the cgroups this bed creates.
var staleCgroup = regexp.MustCompile(`^ps-bed-([0-9]+)$`)

// removeStaleCgroups removes the bed cgroups of earlier runs that were
// killed before their cleanup ran (their process is gone) below this
// process's own cpu cgroup, where QEMU's are made.
func removeStaleCgroups(t *testing.T) {
	parent, err := cpuCgroupOf(os.Getpid())
	if err != nil {
		return
	}
	entries, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range entries {
		m := staleCgroup.FindStringSubmatch(e.Name())
		if m == nil || !e.IsDir() {
			continue
		}
		pid, _ := strconv.Atoi(m[1])
		if pid == os.Getpid() || syscall.Kill(pid, 0) == nil {
			continue
		}
		if err := removeCgroup(filepath.Join(parent, e.Name()), parent); err != nil {
			t.Logf("remove stale cgroup %s: %v", e.Name(), err)
		}
	}
}

// virtCPUs is the /cpus node of dtc's output for QEMU 8's `-M
// virt,gic-version=3 -cpu cortex-a53 -smp 4` (cpu nodes 1-3 trimmed to
// their phandles).
const virtCPUs = `	cpus {
		#size-cells = <0x00>;
		#address-cells = <0x01>;

		cpu-map {

			socket0 {

				cluster0 {

					core0 {
						cpu = <0x8004>;
					};

					core1 {
						cpu = <0x8003>;
					};

					core2 {
						cpu = <0x8002>;
					};

					core3 {
						cpu = <0x8001>;
					};
				};
			};
		};

		cpu@0 {
			phandle = <0x8004>;
			reg = <0x00>;
			enable-method = "psci";
			compatible = "arm,cortex-a53";
			device_type = "cpu";
		};

		cpu@1 {
			phandle = <0x8003>;
		};

		cpu@2 {
			phandle = <0x8002>;
		};

		cpu@3 {
			phandle = <0x8001>;
		};
	};
`

func TestWithCapacities(t *testing.T) {
	got, err := withCapacities(virtCPUs, []int{485, 485, 1024, 1024})
	if err != nil {
		t.Fatal(err)
	}
	want := `	cpus {
		#size-cells = <0x00>;
		#address-cells = <0x01>;

		cpu-map {
			socket0 {
				cluster0 {
					core0 {
						cpu = <0x8004>;
					};
					core1 {
						cpu = <0x8003>;
					};
				};
				cluster1 {
					core0 {
						cpu = <0x8002>;
					};
					core1 {
						cpu = <0x8001>;
					};
				};
			};
		};

		cpu@0 {
			phandle = <0x8004>;
			capacity-dmips-mhz = <0x1e5>;
			reg = <0x00>;
			enable-method = "psci";
			compatible = "arm,cortex-a53";
			device_type = "cpu";
		};

		cpu@1 {
			phandle = <0x8003>;
			capacity-dmips-mhz = <0x1e5>;
		};

		cpu@2 {
			phandle = <0x8002>;
			capacity-dmips-mhz = <0x400>;
		};

		cpu@3 {
			phandle = <0x8001>;
			capacity-dmips-mhz = <0x400>;
		};
	};
`
	if got != want {
		t.Errorf("withCapacities:\n%s\nwant:\n%s", got, want)
	}
	if _, err := withCapacities(virtCPUs, []int{485, 1024}); err == nil {
		t.Error("withCapacities with 2 capacities for 4 CPUs: no error")
	}
}

func TestEtherFrame(t *testing.T) {
	b := etherFrame(3)
	if len(b) != 14+ipLen || binary.BigEndian.Uint16(b[12:]) != 0x0800 || ipChecksum(b[14:34]) != 0 {
		t.Errorf("etherFrame(3) = % x", b)
	}
	if got := net.HardwareAddr(b[:6]).String(); got != bedNICMAC.String() {
		t.Errorf("destination %s, want %s", got, bedNICMAC)
	}
}
