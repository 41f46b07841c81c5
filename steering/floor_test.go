package steering

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/packet-steering/packet-steering/internal/kfs"
	"github.com/packet-steering/packet-steering/platform"
	"github.com/packet-steering/packet-steering/platform/fixture"
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
func applyFloor(t *testing.T, root string, snap *platform.Snapshot, p *Plan) (int, map[string]int) {
	t.Helper()
	parts := map[string]int{}
	parts["cpus"] = (2 + 2*len(snap.CPUs)) * floorFile
	parts["devices"] = floorDir
	for _, d := range snap.Devices {
		parts["devices"] += floorDir
		if len(d.RxQueues)+len(d.TxQueues) > 0 {
			parts["devices"] += floorDir
		}
		if d.Driver != "" {
			parts["devices"] += floorLink
		}
	}
	parts["interrupts"] = floorFile
	ents, err := os.ReadDir(filepath.Join(root, "proc"))
	if err != nil {
		t.Fatal(err)
	}
	parts["processes"] = floorDir
	for _, e := range ents {
		if n := e.Name(); n != "" && n[0] >= '1' && n[0] <= '9' {
			parts["processes"] += floorFile
		}
	}
	if snap.Identity.Target != "" {
		parts["identity"] += floorFile
	}
	if snap.Identity.Board != "" {
		parts["identity"] += floorFile
	}
	if len(snap.Identity.Compatible) > 0 {
		parts["identity"] += floorFile
	}
	for _, f := range []string{"packet_steering", "network", "firewall"} {
		if _, err := os.Stat(filepath.Join(root, "etc", "config", f)); err == nil {
			parts["config"] += floorFile
		}
	}
	for _, a := range p.Actions {
		if a.Kind != KindNAPIAffinity {
			parts["knobs"] += floorFile
		}
	}
	total := 0
	for _, n := range parts {
		total += n
	}
	return total, parts
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
	spec.Processes = dropPIDClashes(spec.Processes)
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

	snap, p, err := e.Plan(ctx, PlanRequest{})
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
