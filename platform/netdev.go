package platform

import (
	"bytes"
	"errors"
	"io/fs"
	"sort"
	"strings"

	"github.com/packet-steering/packet-steering/internal/kfs"
	"github.com/packet-steering/packet-steering/internal/outline"
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

// deviceWork is the netdevs of one Read, read by several goroutines: each
// slot is written by the one that reads that device.
type deviceWork struct {
	names  []string
	devs   []Device
	hasBus []bool
	gaps   []gaps // per device, so that they keep the listing's order
}

// listDevices lists sys/class/net; nil when it cannot be listed (recorded
// in g).
func (f *reader) listDevices(g *gaps) *deviceWork {
	names, err := f.names(f.dir, classNetDir)
	if err != nil {
		g.add(classNetDir, err)
		return nil
	}
	return &deviceWork{
		names:  names,
		devs:   make([]Device, len(names)),
		hasBus: make([]bool, len(names)),
		gaps:   make([]gaps, len(names)),
	}
}

// scopeDevices reads the scope's own netdev (read then skips it) and then
// keeps in w only it when scope.Others says the decision does not depend
// on the others. scope.Others sees the netdev as read, before its Kind is
// decided (nil when there is no such netdev).
func (f *reader) scopeDevices(w *deviceWork, scope *DeviceScope, cfg *Config) *deviceWork {
	if w == nil {
		return nil
	}
	i := 0
	for i < len(w.names) && w.names[i] < scope.Device {
		i++
	}
	var dev *Device
	if i < len(w.names) && w.names[i] == scope.Device {
		w.devs[i], w.hasBus[i] = f.readDevice(w.names[i], &w.gaps[i], false)
		dev = &w.devs[i]
	}
	if scope.Others == nil || scope.Others(cfg, dev) {
		return w
	}
	j := i
	if dev != nil {
		j++
	}
	w.names, w.devs, w.hasBus, w.gaps = w.names[i:j], w.devs[i:j], w.hasBus[i:j], w.gaps[i:j]
	return w
}

// finish classifies the netdevs once all are read and appends their gaps
// to g in name order.
func (w *deviceWork) finish(g *gaps) []Device {
	classifyDevices(w.devs, w.hasBus)
	for i := range w.gaps {
		g.list = append(g.list, w.gaps[i].list...)
	}
	return w.devs
}

// kindPending is the Kind of a device classifyDevices has not decided yet.
const kindPending = ""

// readDevice reads one netdev; the bool says whether it has a `device` link
// (even one that does not resolve). With shape, only what another netdev's
// decision uses (see Reader.ReadDevice): no knob values, no Threaded.
func (f *reader) readDevice(name string, g *gaps, shape bool) (Device, bool) {
	dir := classNetDir + "/" + name
	d := Device{Name: name, RxQueues: []RxQueue{}, TxQueues: []TxQueue{}}
	// Files are read below the device directory held open, so the
	// sys/class/net link is walked once. Gaps name the sys/class/net path
	// a user knows.
	dev, err := f.Sub(f.dir, dir)
	if err != nil {
		g.add(dir, err)
		return d, false
	}
	defer dev.Close()
	if !f.inputsOnly || f.netlink != nil {
		// netlink names devices by ifindex (netlink.go).
		if d.Ifindex, err = f.num(dev, "ifindex"); err != nil {
			g.add(dir+"/ifindex", err)
		}
	}
	if !f.inputsOnly {
		if d.OperState, err = f.str(dev, "operstate"); err != nil {
			g.add(dir+"/operstate", err)
		}
	}
	if shape || f.inputsOnly {
		// no input of a decision: the NAPI threads themselves are
	} else if b, err := f.Attr(dev, "threaded"); err == nil {
		// "0"/"1"; newer kernels may print other non-zero modes.
		s := trimNewlines(b)
		d.Threaded = len(s) != 0 && string(s) != "0" && string(s) != "disabled"
	} else if !errors.Is(err, fs.ErrNotExist) {
		g.add(dir+"/threaded", err)
	}
	var hasPhy, hasDevice, hasBridge, hasDSA, hasMaster, hasBrport, hasQueues bool
	err = f.Names(dev, func(e []byte) {
		switch string(e) {
		case "phy80211":
			hasPhy = true
		case "device":
			hasDevice = true
		case "bridge":
			hasBridge = true
		case "dsa":
			hasDSA = true
		case "master":
			hasMaster = true
		case "brport":
			hasBrport = true
		case "queues":
			hasQueues = true
		}
		if l, ok := bytes.CutPrefix(e, []byte("lower_")); ok && len(l) != 0 {
			d.Lowers = append(d.Lowers, string(l))
		}
		if u, ok := bytes.CutPrefix(e, []byte("upper_")); ok && len(u) != 0 {
			d.Uppers = append(d.Uppers, string(u))
		}
	})
	if err != nil {
		g.add(dir, err)
		return d, false
	}
	outline.SortStrings(d.Lowers)
	outline.SortStrings(d.Uppers)
	if hasPhy {
		if d.Phy, err = f.str(dev, "phy80211/name"); err != nil {
			g.add(dir+"/phy80211/name", err)
		}
		if d.PhyIndex, err = f.num(dev, "phy80211/index"); err != nil {
			g.add(dir+"/phy80211/index", err)
		}
		if d.Phy == "" {
			// Keep the wifi kind even when the phy files are unreadable.
			d.Phy, _ = f.LinkBase(dev, "phy80211")
		}
	}
	if hasDevice {
		// The bus device's path is relative to the real device directory.
		real := dir
		if r, err := f.resolveLink(dir); err == nil {
			real = r
		}
		if t, err := f.Readlink(dev, "device"); err != nil {
			g.add(dir+"/device", err)
		} else if d.BusDevice, err = joinLink(real+"/device", t); err != nil {
			g.add(dir+"/device", err)
		}
		if drv, err := f.LinkBase(dev, "device/driver"); err == nil {
			d.Driver = drv
		} else if !errors.Is(err, fs.ErrNotExist) {
			g.add(dir+"/device/driver", err)
		}
	} else if !hasBridge && !hasPhy && len(d.Lowers) == 0 && f.isPPPType(dev) {
		d.Kind = KindPPP // boards.go
	}
	if hasBridge {
		d.Kind = KindBridge
	}
	if hasBridge && !f.inputsOnly {
		ports, err := f.names(dev, "brif")
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			g.add(dir+"/brif", err)
		}
		d.BridgePorts = ports
	}
	if hasDSA {
		if d.DSATagging, err = f.str(dev, "dsa/tagging"); err != nil {
			g.add(dir+"/dsa/tagging", err)
		}
	}
	if f.inputsOnly {
		// the master is no input of any decision
	} else if hasMaster {
		if m, err := f.LinkBase(dev, "master"); err == nil {
			d.Master = m
		} else {
			g.add(dir+"/master", err)
		}
	} else if hasBrport {
		if m, err := f.LinkBase(dev, "brport/bridge"); err == nil {
			d.Master = m
		} else if !errors.Is(err, fs.ErrNotExist) {
			g.add(dir+"/brport/bridge", err)
		}
	}
	if hasQueues {
		d.RxQueues, d.TxQueues = f.readQueues(dev, dir+"/queues", g, shape)
	} else {
		g.add(dir+"/queues", fs.ErrNotExist)
	}
	return d, hasDevice
}

// readQueues reads queues/rx-N and tx-N below the device directory dev,
// ordered by N; gaps are named below dir. With namesOnly, the queues'
// files are not read.
func (f *reader) readQueues(dev kfs.Dir, dir string, g *gaps, namesOnly bool) ([]RxQueue, []TxQueue) {
	qfd, err := f.Sub(dev, "queues")
	if err != nil {
		g.add(dir, err)
		return []RxQueue{}, []TxQueue{}
	}
	defer qfd.Close()
	names, err := f.names(qfd)
	if err != nil {
		g.add(dir, err)
		return []RxQueue{}, []TxQueue{}
	}
	nrx := 0
	for _, n := range names {
		if strings.HasPrefix(n, "rx-") {
			nrx++
		}
	}
	rx, tx := make([]RxQueue, 0, nrx), make([]TxQueue, 0, len(names)-nrx)
	for _, n := range names {
		if i, ok := queueIndex(n, "rx-"); ok {
			q := RxQueue{Index: i, Name: n}
			var err error
			if !namesOnly {
				if q.RPSCPUs, err = f.str(qfd, n, "rps_cpus"); err != nil {
					g.add(dir+"/"+n+"/rps_cpus", err)
				}
				if q.RPSFlowCnt, err = f.num(qfd, n, "rps_flow_cnt"); err != nil {
					g.add(dir+"/"+n+"/rps_flow_cnt", err)
				}
			}
			rx = append(rx, q)
		} else if i, ok := queueIndex(n, "tx-"); ok {
			q := TxQueue{Index: i, Name: n}
			var err error
			if namesOnly {
				// the knobs are not read
			} else if q.XPSCPUs, err = f.str(qfd, n, "xps_cpus"); err != nil && !errors.Is(err, fs.ErrNotExist) {
				g.add(dir+"/"+n+"/xps_cpus", err)
			}
			if f.inputsOnly {
				// not an input of any decision
			} else if q.XPSRxQs, err = f.str(qfd, n, "xps_rxqs"); err != nil && !errors.Is(err, fs.ErrNotExist) {
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
//
//go:noinline
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

// itoa is strconv.Itoa, short for path building.
//
//go:noinline
func itoa(n int) string { return outline.Itoa(n) }
