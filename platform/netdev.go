package platform

import (
	"errors"
	"io/fs"
	"os"
	"sort"
	"strconv"
	"strings"
)

// Network devices, from sys/class/net (Documentation/ABI/testing/
// sysfs-class-net, sysfs-class-net-queues; net/core/net-sysfs.c):
//
//	DEV/ifindex, operstate, threaded
//	DEV/device            link to the bus device; its driver link names the driver
//	DEV/phy80211          link to the wiphy (name, index) on wifi netdevs
//	DEV/bridge/, brif/    on bridges; brport/ and master on their ports
//	DEV/dsa/tagging       on DSA conduits (net/dsa/conduit.c)
//	DEV/lower_X, upper_X  links to stacked devices (net/core/dev.c)
//	DEV/queues/rx-N/rps_cpus, rps_flow_cnt; tx-N/xps_cpus, xps_rxqs
//
// Reading xps_cpus of a device with one tx queue fails with ENOENT
// (net-sysfs.c xps_cpus_show), which is recorded as "" rather than a gap.
const classNetDir = "sys/class/net"

// readDevices reads every netdev listed in sys/class/net, ordered by name.
// Device names come from that listing only.
func (f FS) readDevices(g *gaps) []Device {
	names, err := readDirNames(f.Path(classNetDir))
	if err != nil {
		g.add(classNetDir, err)
		return nil
	}
	devs := make([]Device, 0, len(names))
	hasBus := make([]bool, 0, len(names))
	for _, name := range names {
		d, bus := f.readDevice(name, g)
		devs = append(devs, d)
		hasBus = append(hasBus, bus)
	}
	classifyDevices(devs, hasBus)
	return devs
}

// kindPending is the Kind of a device classifyDevices has not decided yet.
const kindPending = ""

// readDevice reads one netdev; the bool says whether it has a `device` link
// (even one that does not resolve).
func (f FS) readDevice(name string, g *gaps) (Device, bool) {
	dir := classNetDir + "/" + name
	// Read below the real device directory: one symlink less to walk per
	// file. Gaps still name the sys/class/net path a user knows.
	real := dir
	if r, err := f.resolveLink(dir); err == nil {
		real = r
	}
	d := Device{Name: name, RxQueues: []RxQueue{}, TxQueues: []TxQueue{}}
	var err error
	if d.Ifindex, err = f.readInt(real + "/ifindex"); err != nil {
		g.add(dir+"/ifindex", err)
	}
	if d.OperState, err = f.readString(real + "/operstate"); err != nil {
		g.add(dir+"/operstate", err)
	}
	if s, err := f.readString(real + "/threaded"); err == nil {
		// "0"/"1"; newer kernels may print other non-zero modes.
		d.Threaded = s != "" && s != "0" && s != "disabled"
	} else if !errors.Is(err, fs.ErrNotExist) {
		g.add(dir+"/threaded", err)
	}

	entries, err := readDirNames(f.Path(real))
	if err != nil {
		g.add(dir, err)
		return d, false
	}
	has := map[string]bool{}
	for _, e := range entries {
		has[e] = true
		if l, ok := strings.CutPrefix(e, "lower_"); ok && l != "" {
			d.Lowers = append(d.Lowers, l)
		}
		if u, ok := strings.CutPrefix(e, "upper_"); ok && u != "" {
			d.Uppers = append(d.Uppers, u)
		}
	}
	if has["phy80211"] {
		if d.Phy, err = f.readString(real + "/phy80211/name"); err != nil {
			g.add(dir+"/phy80211/name", err)
		}
		if d.PhyIndex, err = f.readInt(real + "/phy80211/index"); err != nil {
			g.add(dir+"/phy80211/index", err)
		}
		if d.Phy == "" {
			// Keep the wifi kind even when the phy files are unreadable.
			d.Phy, _ = f.linkBase(real + "/phy80211")
		}
	}
	if has["device"] {
		if d.BusDevice, err = f.resolveLink(real + "/device"); err != nil {
			g.add(dir+"/device", err)
		}
		if drv, err := f.linkBase(real + "/device/driver"); err == nil {
			d.Driver = drv
		} else if !errors.Is(err, fs.ErrNotExist) {
			g.add(dir+"/device/driver", err)
		}
	}
	if has["bridge"] {
		d.Kind = KindBridge
		ports, err := readDirNames(f.Path(real + "/brif"))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			g.add(dir+"/brif", err)
		}
		d.BridgePorts = ports
	}
	if has["dsa"] {
		if d.DSATagging, err = f.readString(real + "/dsa/tagging"); err != nil {
			g.add(dir+"/dsa/tagging", err)
		}
	}
	if has["master"] {
		if m, err := f.linkBase(real + "/master"); err == nil {
			d.Master = m
		} else {
			g.add(dir+"/master", err)
		}
	} else if has["brport"] {
		if m, err := f.linkBase(real + "/brport/bridge"); err == nil {
			d.Master = m
		} else if !errors.Is(err, fs.ErrNotExist) {
			g.add(dir+"/brport/bridge", err)
		}
	}
	if has["queues"] {
		d.RxQueues, d.TxQueues = f.readQueues(real+"/queues", dir+"/queues", g)
	} else {
		g.add(dir+"/queues", fs.ErrNotExist)
	}
	return d, has["device"]
}

// readQueues reads queues/rx-N and tx-N below real, ordered by N; gaps
// are named below dir.
func (f FS) readQueues(real, dir string, g *gaps) ([]RxQueue, []TxQueue) {
	rx, tx := []RxQueue{}, []TxQueue{}
	names, err := readDirNames(f.Path(real))
	if err != nil {
		g.add(dir, err)
		return rx, tx
	}
	for _, n := range names {
		if i, ok := queueIndex(n, "rx-"); ok {
			q := RxQueue{Index: i, Name: n}
			var err error
			if q.RPSCPUs, err = f.readString(real + "/" + n + "/rps_cpus"); err != nil {
				g.add(dir+"/"+n+"/rps_cpus", err)
			}
			if q.RPSFlowCnt, err = f.readInt(real + "/" + n + "/rps_flow_cnt"); err != nil {
				g.add(dir+"/"+n+"/rps_flow_cnt", err)
			}
			rx = append(rx, q)
		} else if i, ok := queueIndex(n, "tx-"); ok {
			q := TxQueue{Index: i, Name: n}
			var err error
			if q.XPSCPUs, err = f.readString(real + "/" + n + "/xps_cpus"); err != nil && !errors.Is(err, fs.ErrNotExist) {
				g.add(dir+"/"+n+"/xps_cpus", err)
			}
			if q.XPSRxQs, err = f.readString(real + "/" + n + "/xps_rxqs"); err != nil && !errors.Is(err, fs.ErrNotExist) {
				g.add(dir+"/"+n+"/xps_rxqs", err)
			}
			tx = append(tx, q)
		}
	}
	sort.Slice(rx, func(a, b int) bool { return rx[a].Index < rx[b].Index })
	sort.Slice(tx, func(a, b int) bool { return tx[a].Index < tx[b].Index })
	return rx, tx
}

// classifyDevices sets Kind, in this order: phy80211 -> wifi; bridge/ ->
// bridge; dsa/tagging -> dsa-conduit; a lower_ link to a DSA conduit plus a
// bus device (the switch: net/dsa/user.c sets it with SET_NETDEV_DEV) ->
// dsa-user; a bus device -> ethernet; else virtual. A VLAN on a conduit
// (lower link, no bus device) stays virtual.
// hasBus[i] says whether devs[i] has a `device` link.
func classifyDevices(devs []Device, hasBus []bool) {
	conduit := map[string]bool{}
	for i := range devs {
		d := &devs[i]
		switch {
		case d.Phy != "":
			d.Kind = KindWifi
		case d.Kind == KindBridge:
		case d.DSATagging != "":
			d.Kind = KindDSAConduit
			conduit[d.Name] = true
		}
	}
	for i := range devs {
		d := &devs[i]
		if d.Kind != kindPending {
			continue
		}
		bus := hasBus[i]
		onConduit := false
		for _, l := range d.Lowers {
			onConduit = onConduit || conduit[l]
		}
		switch {
		case onConduit && bus:
			d.Kind = KindDSAUser
		case bus:
			d.Kind = KindEthernet
		default:
			d.Kind = KindVirtual
		}
	}
}

// deviceIndex maps names to positions in devs.
func deviceIndex(devs []Device) map[string]int {
	m := make(map[string]int, len(devs))
	for i, d := range devs {
		m[d.Name] = i
	}
	return m
}

// busBase is the last element of a device's bus device path.
func busBase(d *Device) string {
	if d.BusDevice == "" {
		return ""
	}
	i := strings.LastIndexByte(d.BusDevice, '/')
	return d.BusDevice[i+1:]
}

// statExists reports whether rel exists (without following a final link).
func (f FS) statExists(rel string) bool {
	_, err := os.Lstat(f.Path(rel))
	return err == nil
}

// itoa is strconv.Itoa, short for path building.
func itoa(n int) string { return strconv.Itoa(n) }
