package platform

import (
	"strconv"

	"github.com/packet-steering/packet-steering/internal/cpuset"
	"github.com/packet-steering/packet-steering/internal/outline"
)

// CPU topology files (Documentation/ABI/stable/sysfs-devices-system-cpu,
// drivers/base/topology.c):
//
//	sys/devices/system/cpu/possible, online   cpu lists
//	sys/bus/cpu/devices/cpuN/topology/core_id, physical_package_id
//	sys/bus/cpu/devices/cpuN/online           "0"/"1" (absent when the CPU
//	                                          cannot be hot-unplugged)
const (
	cpuPossiblePath = "sys/devices/system/cpu/possible"
	cpuOnlinePath   = "sys/devices/system/cpu/online"
	cpuDevicesDir   = "sys/bus/cpu/devices"
)

// readCPUs reads every possible CPU with its topology. When the possible
// list is unreadable it falls back to the cpuN entries that exist.
func (f *reader) readCPUs(g *gaps) []CPU {
	possible, err := f.cpuListFile(cpuPossiblePath)
	if err != nil {
		g.add(cpuPossiblePath, err)
		possible = f.listCPUDirs()
	}
	onlineList, onlineErr := f.cpuListFile(cpuOnlinePath)
	if onlineErr != nil {
		g.add(cpuOnlinePath, onlineErr)
	}
	online := map[int]bool{}
	for _, c := range onlineList {
		online[c] = true
	}
	cpus := make([]CPU, 0, len(possible))
	for _, id := range possible {
		dir := cpuDevicesDir + "/cpu" + outline.Itoa(id)
		c := CPU{ID: id, Core: -1, Package: -1, Online: online[id]}
		if onlineErr != nil {
			// Without the online list, trust the per-CPU file; a CPU
			// without one cannot go offline.
			s, err := f.str(f.dir, dir+"/online")
			c.Online = err != nil || s == "1"
		}
		var terr error
		c.Core, terr = f.num(f.dir, dir+"/topology/core_id")
		if terr != nil {
			c.Core = -1
			if c.Online {
				g.add(dir+"/topology/core_id", terr)
			}
		}
		c.Package, terr = f.num(f.dir, dir+"/topology/physical_package_id")
		if terr != nil {
			c.Package = -1
			if c.Online {
				g.add(dir+"/topology/physical_package_id", terr)
			}
		}
		if c.Online {
			f.readCPUCapacity(&c, dir, g)
		}
		cpus = append(cpus, c)
	}
	fillSiblings(cpus)
	f.clusterSiblings(cpus, g) // boards.go
	return cpus
}

// fillSiblings sets each CPU's Siblings: the other CPUs with the same
// (package, core), when both are known.
func fillSiblings(cpus []CPU) {
	type key struct{ pkg, core int }
	byCore := map[key][]int{}
	for _, c := range cpus {
		if c.Core >= 0 && c.Package >= 0 {
			k := key{c.Package, c.Core}
			byCore[k] = append(byCore[k], c.ID)
		}
	}
	for i := range cpus {
		c := &cpus[i]
		if c.Core < 0 || c.Package < 0 {
			continue
		}
		for _, id := range byCore[key{c.Package, c.Core}] {
			if id != c.ID {
				c.Siblings = append(c.Siblings, id)
			}
		}
	}
}

func (f *reader) cpuListFile(rel string) ([]int, error) {
	s, err := f.str(f.dir, rel)
	if err != nil {
		return nil, err
	}
	set, err := cpuset.ParseList(s)
	if err != nil || set.IsEmpty() {
		return nil, err
	}
	return set.CPUs(), nil
}

// listCPUDirs lists N of sys/bus/cpu/devices/cpuN, sorted.
func (f *reader) listCPUDirs() []int {
	names, err := f.names(f.dir, cpuDevicesDir)
	if err != nil {
		return nil
	}
	var ids []int
	for _, n := range names {
		if len(n) > 3 && n[:3] == "cpu" {
			if id, err := strconv.Atoi(n[3:]); err == nil && id >= 0 && id < cpuset.MaxCPUs {
				ids = append(ids, id)
			}
		}
	}
	return sortedInts(ids)
}
