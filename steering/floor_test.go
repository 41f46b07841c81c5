package steering

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/packet-steering/packet-steering/internal/kfs"
	"github.com/packet-steering/packet-steering/plan"
	"github.com/packet-steering/packet-steering/platform"
	"github.com/packet-steering/packet-steering/platform/fixture"
	"github.com/packet-steering/packet-steering/platform/fixture/fixturetest"
	"golang.org/x/sys/unix"
)

// System calls of the floor's reads, as kfs makes them: a file the kernel
// prints in one go is openat, one read, close; a directory is openat,
// getdents64 until it returns 0 (twice for a small one), close; a link is
// one readlinkat.
const (
	floorFile = 3
	floorDir  = 4
	floorLink = 1
)

// floorRead is one read of the floor: a file, a directory listing or a
// link, below the root, and the part of the decision it serves.
type floorRead struct {
	part string
	cost int // floorFile, floorDir or floorLink
	rel  string
}

// applyFloor is the least an in-sync apply of the machine below root can
// read to decide that nothing needs writing, in system calls, with the
// parts it is made of. It reads each input of the decision once and each
// knob the plan manages once:
//
//   - CPUs: cpu/possible and cpu/online, and each CPU's core_id and
//     physical_package_id (SMT siblings);
//   - devices: the sys/class/net listing, each device's directory (its
//     kind: phy80211, bridge, dsa, device links), its queues/ listing and
//     its driver link where it has one;
//   - proc/interrupts (queue IRQs);
//   - processes: the proc listing and one file per process (its name, to
//     find NAPI threads and other writers); a NAPI thread's affinity is
//     in that same file, so its knob costs nothing more;
//   - identity: the target, the board name and the device-tree
//     compatible strings (profile match);
//   - config: the UCI files the settings and the offload come from, those
//     that exist (read without the locking protocol's flock and stats);
//   - every other knob of the plan (rps_cpus, rps_flow_cnt, xps_cpus,
//     IRQ affinities, the sysctl): one file each.
func applyFloor(t testing.TB, root string, snap *platform.Snapshot, p *plan.Plan) (int, map[string]int) {
	t.Helper()
	return floorCost(floorReads(t, root, snap, p, "", true))
}

// floorCost adds up the system calls of reads, in all and per part.
func floorCost(reads []floorRead) (int, map[string]int) {
	parts := map[string]int{}
	total := 0
	for _, r := range reads {
		parts[r.part] += r.cost
		total += r.cost
	}
	return total, parts
}

// floorReads lists the reads of the floor (applyFloor). With dev set it
// is the floor of the apply of that netdev: its own directory, queues
// listing and driver link and, when others (its decision depends on the
// other netdevs), those of every other netdev; and its knobs only.
func floorReads(t testing.TB, root string, snap *platform.Snapshot, p *plan.Plan, dev string, others bool) []floorRead {
	t.Helper()
	var out []floorRead
	add := func(part string, cost int, rel string) { out = append(out, floorRead{part, cost, rel}) }
	add("cpus", floorFile, "sys/devices/system/cpu/possible")
	add("cpus", floorFile, "sys/devices/system/cpu/online")
	for _, c := range snap.CPUs {
		dir := "sys/bus/cpu/devices/cpu" + strconv.Itoa(c.ID) + "/topology/"
		add("cpus", floorFile, dir+"core_id")
		add("cpus", floorFile, dir+"physical_package_id")
	}
	add("devices", floorDir, "sys/class/net")
	for _, d := range snap.Devices {
		if dev != "" && d.Name != dev && !others {
			continue
		}
		add("devices", floorDir, "sys/class/net/"+d.Name)
		if len(d.RxQueues)+len(d.TxQueues) > 0 {
			add("devices", floorDir, "sys/class/net/"+d.Name+"/queues")
		}
		if d.Driver != "" {
			add("devices", floorLink, "sys/class/net/"+d.Name+"/device/driver")
		}
	}
	add("interrupts", floorFile, "proc/interrupts")
	ents, err := os.ReadDir(filepath.Join(root, "proc"))
	if err != nil {
		t.Fatal(err)
	}
	add("processes", floorDir, "proc")
	for _, e := range ents {
		if n := e.Name(); n != "" && n[0] >= '1' && n[0] <= '9' {
			add("processes", floorFile, "proc/"+n+"/status")
		}
	}
	if snap.Identity.Target != "" {
		add("identity", floorFile, "etc/openwrt_release")
	}
	if snap.Identity.Board != "" {
		add("identity", floorFile, "tmp/sysinfo/board_name")
	}
	if len(snap.Identity.Compatible) > 0 {
		add("identity", floorFile, "proc/device-tree/compatible")
	}
	for _, f := range []string{"packet_steering", "network", "firewall"} {
		if _, err := os.Stat(filepath.Join(root, "etc", "config", f)); err == nil {
			add("config", floorFile, "etc/config/"+f)
		}
	}
	pair := plan.PairQueues(snap)
	for _, a := range p.Actions {
		if a.Kind == plan.KindNAPIAffinity || (dev != "" && pair.ActionDevice(a) != dev) {
			continue
		}
		rel := ""
		switch a.Kind {
		case plan.KindRPSCPUs, plan.KindRPSFlowCnt:
			rel = "sys/class/net/" + a.Device + "/queues/" + a.Queue + "/" + string(a.Kind)
		case plan.KindXPSCPUs:
			rel = "sys/class/net/" + a.Device + "/queues/" + a.Queue + "/xps_cpus"
		case plan.KindIRQAffinity:
			rel = "proc/irq/" + strconv.Itoa(a.IRQ) + "/smp_affinity"
		case plan.KindSysctl:
			rel = "proc/sys/" + strings.ReplaceAll(a.Key, ".", "/")
		default:
			t.Fatalf("floor: no path for %s", a.Kind)
		}
		add("knobs", floorFile, rel)
	}
	return out
}

// readFloor makes the floor's reads below the open root directory dir
// with r, as the platform reader makes them (kfs); a read that fails
// fails b.
func readFloor(b *testing.B, r *kfs.Reader, dir kfs.Dir, reads []floorRead) {
	for _, fr := range reads {
		var err error
		switch fr.cost {
		case floorFile:
			_, err = r.Attr(dir, fr.rel)
		case floorDir:
			err = r.Names(dir, func([]byte) {}, fr.rel)
		case floorLink:
			_, err = r.Readlink(dir, fr.rel)
		}
		if err != nil {
			b.Fatalf("floor read %s: %v", fr.rel, err)
		}
	}
}

// processCPU is the process's user plus system CPU time so far: under
// load steadier than the wall clock.
func processCPU(b *testing.B) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkApplyFloor times, on the ipq807x fixture in sync, the floor's
// reads alone (floorReads, made through kfs as the platform reader makes
// them) against the daemon's in-sync apply (an Engine kept between
// applies), for the whole machine and for `apply --device eth0`: the
// time side of TestApplyNearFloor and TestDeviceApplyNearFloor. Besides
// the wall time it reports the process's CPU time per operation
// (cpu-ns/op), which another load on the machine disturbs less.
func BenchmarkApplyFloor(b *testing.B) {
	ctx := context.Background()
	root := fixturetest.Root(b, "ipq807x", func(s *fixture.Spec) { s.Processes = fixture.DropPIDClashes(s.Processes) })
	e := NewEngine(root)
	if _, err := e.Apply(ctx, ApplyRequest{Reason: "sync"}); err != nil {
		b.Fatal(err)
	}
	snap, p, err := e.Plan(ctx, plan.PlanRequest{})
	if err != nil {
		b.Fatal(err)
	}
	floor := func(dev string) func(b *testing.B) {
		return func(b *testing.B) {
			reads := floorReads(b, root, snap, p, dev, true)
			r := kfs.Reader{BufSize: 4096, DentsSize: 8192}
			cpu := processCPU(b)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				dir, err := r.Open(root)
				if err != nil {
					b.Fatal(err)
				}
				readFloor(b, &r, dir, reads)
				dir.Close()
			}
			b.ReportMetric(float64((processCPU(b)-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
		}
	}
	apply := func(dev string) func(b *testing.B) {
		return func(b *testing.B) {
			b.ReportAllocs()
			cpu := processCPU(b)
			for i := 0; i < b.N; i++ {
				res, err := e.Apply(ctx, ApplyRequest{Reason: "bench", Device: dev})
				if err != nil || len(res.Changed)+len(res.Failed) != 0 {
					b.Fatalf("in-sync apply: %v %+v", err, res)
				}
			}
			b.ReportMetric(float64((processCPU(b)-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
		}
	}
	b.Run("floor", floor(""))
	b.Run("apply", apply(""))
	b.Run("floor-device-eth0", floor("eth0"))
	b.Run("apply-device-eth0", apply("eth0"))
}

// TestApplyNearFloor counts the file system calls of one daemon apply of
// the ipq807x fixture in sync (an Engine kept between applies, as the
// daemon keeps it) and holds them within twice the floor: what the
// decision must read at the least (applyFloor). The calls are counted in
// the internal/kfs layer the machine is read through; the apply's lock
// and marker files (a fixed handful, outside that layer) are not in it;
// scripts/syscount.sh counts a whole process with strace.
func TestApplyNearFloor(t *testing.T) {
	spec, ok := fixture.Preset("ipq807x")
	if !ok {
		t.Fatal("no preset ipq807x")
	}
	spec.Processes = fixture.DropPIDClashes(spec.Processes)
	root := t.TempDir()
	if err := fixture.Build(root, spec); err != nil {
		t.Fatalf("build ipq807x: %v", err)
	}
	var count kfs.Counts
	pr := platform.NewCountingReader(&count)
	e := NewEngine(root, WithPlatformReader(pr))
	ctx := context.Background()
	if _, err := e.Apply(ctx, ApplyRequest{Reason: "sync"}); err != nil {
		t.Fatalf("first apply: %v", err)
	}
	count = kfs.Counts{}
	res, err := e.Apply(ctx, ApplyRequest{Reason: "test"})
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	if len(res.Changed) != 0 || len(res.Failed) != 0 {
		t.Fatalf("second apply not in sync: changed %v, failed %v", res.Changed, res.Failed)
	}
	got := count.Total()
	calls := count.String()

	snap, p, err := e.Plan(ctx, plan.PlanRequest{})
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	floor, parts := applyFloor(t, root, snap, p)
	t.Logf("ipq807x in-sync apply: floor %d file system calls %v (%d knobs managed); daemon apply %d (%s): %.2fx the floor",
		floor, parts, len(p.Actions), got, calls, float64(got)/float64(floor))
	if got > int64(2*floor) {
		t.Errorf("daemon apply makes %d file system calls, more than twice the floor of %d", got, floor)
	}
}
