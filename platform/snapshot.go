// Package platform reads everything the steering decision depends on from a
// machine laid out below a root directory (the real "/" or a fixture root)
// into a Snapshot.
//
// It only reads. It never writes a kernel knob, never changes an affinity and
// never fails as a whole because one file is missing: what it could not read is
// listed in Snapshot.Gaps, so a half-visible machine still gets a plan.
package platform

import "github.com/packet-steering/packet-steering/internal/outline"

// Device kinds, in the kernel's words as far as it has them.
const (
	KindEthernet   = "ethernet"    // a physical netdev with a bus device and a driver
	KindWifi       = "wifi"        // a netdev with phy80211
	KindBridge     = "bridge"      // a netdev with bridge/
	KindDSAConduit = "dsa-conduit" // a netdev with dsa/tagging (the CPU port's netdev)
	KindDSAUser    = "dsa-user"    // a DSA user port: lower_ link to a conduit
	KindVirtual    = "virtual"     // anything else: veth, vlan, tunnels, loopback...
	// KindPPP is a ppp netdev (sysfs type 512, ARPHRD_PPP), e.g. netifd's
	// pppoe-wan: no bus device, one rx queue reached through netif_rx.
	KindPPP = "ppp"
)

// Snapshot is every input of a steering decision, read at one moment.
// It marshals to JSON and back without loss; a snapshot file stands in for the
// machine that made it (`plan --snapshot FILE`).
type Snapshot struct {
	// Root is the directory the snapshot was read under ("/" on a router).
	Root string `json:"root"`
	// CPUs lists every possible CPU, ordered by ID.
	CPUs []CPU `json:"cpus"`
	// Devices lists every netdev under sys/class/net, ordered by name.
	Devices []Device `json:"devices"`
	// NAPIThreads lists the threaded-NAPI kernel threads, ordered by PID.
	NAPIThreads []NAPIThread `json:"napi_threads"`
	// IRQs lists /proc/interrupts rows with a number, ordered by number.
	IRQs []IRQ `json:"irqs"`
	// Softnet is /proc/net/softnet_stat, one entry per row (per CPU).
	Softnet []SoftnetStat `json:"softnet"`
	// RPSSockFlowEntries is net.core.rps_sock_flow_entries; -1 if unreadable.
	RPSSockFlowEntries int `json:"rps_sock_flow_entries"`
	// Processes holds the comm names of running user processes that matter to
	// steering (irqbalance), not every process.
	Processes []string `json:"processes,omitempty"`
	// Writers are the other programs found that write steering knobs
	// (otherwriters.go).
	Writers []OtherWriter `json:"writers,omitempty"`
	// Identity says which board and target this is.
	Identity Identity `json:"identity"`
	// Config is the user's configuration as read from UCI.
	Config Config `json:"config"`
	// Workers are driver tx worker kernel threads that are no NAPI thread
	// (mt76's "mt76-tx phyN"), ordered by PID (boards.go).
	Workers []NAPIThread `json:"workers,omitempty"`
	// Gaps lists what could not be read; empty on a fully visible machine.
	Gaps []Gap `json:"gaps,omitempty"`
	// Netlink is what the kernel's netdev netlink family said (netlink.go);
	// nil when it was not asked (a fixture root, an older snapshot file).
	Netlink *NetlinkInfo `json:"netlink,omitempty"`
}

// CPU is one logical CPU.
type CPU struct {
	ID      int  `json:"id"`
	Core    int  `json:"core"`    // topology/core_id; -1 if unknown
	Package int  `json:"package"` // topology/physical_package_id; -1 if unknown
	Online  bool `json:"online"`
	// Siblings are the other CPUs on the same core and package (SMT threads).
	Siblings []int `json:"siblings,omitempty"`
	// Capacity is cpu_capacity (the scheduler's relative capacity, 1024 for
	// the biggest core) and MaxFreqKHz cpufreq/cpuinfo_max_freq, read only
	// where cpu_capacity is absent; 0 when the kernel does not show them
	// (boards.go).
	Capacity   int `json:"capacity,omitempty"`
	MaxFreqKHz int `json:"max_freq_khz,omitempty"`
}

// Device is one netdev.
type Device struct {
	Name    string `json:"name"`
	Ifindex int    `json:"ifindex"`
	Kind    string `json:"kind"`
	// Driver is the bus device's driver name (e.g. "bgmac-bcma", "mtk_soc_eth").
	Driver string `json:"driver,omitempty"`
	// BusDevice is the resolved `device` link, relative to the root
	// (e.g. "sys/devices/platform/soc/c080000.ethernet").
	BusDevice string `json:"bus_device,omitempty"`
	// Phy is the wifi phy name (phy80211/name), PhyIndex its index.
	Phy      string `json:"phy,omitempty"`
	PhyIndex int    `json:"phy_index,omitempty"`
	// Lowers and Uppers are the names from lower_* and upper_* links.
	Lowers []string `json:"lowers,omitempty"`
	Uppers []string `json:"uppers,omitempty"`
	// BridgePorts are the names under brif/ (bridges only).
	BridgePorts []string `json:"bridge_ports,omitempty"`
	// Master is the bridge this device is a port of, if any.
	Master string `json:"master,omitempty"`
	// Carrier is, for a ppp device, the netdev its PPPoE session runs over
	// (netifd's `proto pppoe` interface `device`), else "" (boards.go).
	Carrier string `json:"carrier,omitempty"`
	// DSATagging is dsa/tagging of a DSA conduit.
	DSATagging string `json:"dsa_tagging,omitempty"`
	OperState  string `json:"operstate,omitempty"`
	// Threaded is the `threaded` file: true when NAPI runs in kernel threads.
	Threaded bool `json:"threaded"`
	// RxQueues and TxQueues are ordered by queue number (rx-2 before rx-10).
	RxQueues []RxQueue `json:"rx_queues"`
	TxQueues []TxQueue `json:"tx_queues"`
}

// RxQueue is queues/rx-N of a device. RPSCPUs holds the file's text as the
// kernel printed it (a hex mask with comma groups).
type RxQueue struct {
	_          outline.NoCompare
	Index      int    `json:"index"`
	Name       string `json:"name"` // "rx-N"
	RPSCPUs    string `json:"rps_cpus"`
	RPSFlowCnt int    `json:"rps_flow_cnt"`
	// NAPIID is the NAPI instance serving the queue as netlink queue-get
	// states it; 0 when the kernel or the driver does not say.
	NAPIID int `json:"napi_id,omitempty"`
	// Stats are the queue's qstats-get counters; nil when the kernel or
	// the driver does not report them.
	Stats *QueueStats `json:"stats,omitempty"`
}

// TxQueue is queues/tx-N of a device.
type TxQueue struct {
	_       outline.NoCompare
	Index   int    `json:"index"`
	Name    string `json:"name"` // "tx-N"
	XPSCPUs string `json:"xps_cpus"`
	XPSRxQs string `json:"xps_rxqs,omitempty"`
	// NAPIID and Stats are as for RxQueue.
	NAPIID int         `json:"napi_id,omitempty"`
	Stats  *QueueStats `json:"stats,omitempty"`
}

// NAPIThread is a threaded-NAPI kernel thread (PF_KTHREAD set).
type NAPIThread struct {
	_    outline.NoCompare
	PID  int    `json:"pid"`
	Name string `json:"name"` // comm, e.g. "napi/eth0-257"
	// Owner is the part between "napi/" and the last "-": a device name,
	// "mtk_eth" or a wifi phy such as "phy0".
	Owner string `json:"owner"`
	// Device is the netdev the thread serves, when known ("" otherwise).
	Device string `json:"device,omitempty"`
	NAPIID int    `json:"napi_id"`
	// Direction is DirRX for a thread that receives (on most drivers the
	// same NAPI instance also completes transmits) and DirTX for a thread
	// that only completes transmits; see classifyThreads for the rules.
	// A snapshot file without it means DirRX.
	Direction string `json:"direction,omitempty"`
	// CPUs is the live affinity as a cpu list (Cpus_allowed_list), e.g. "0-3".
	CPUs string `json:"cpus"`
	// CPUTicks is the CPU time the thread has used (stat's utime + stime,
	// clock ticks): how much work it carries (boards.go).
	CPUTicks uint64 `json:"cpu_ticks,omitempty"`
}

// Directions of NAPI threads and per-queue IRQs.
const (
	DirRX   = "rx"   // receive (a thread: may also complete transmits)
	DirTX   = "tx"   // transmit completion only
	DirRxTx = "rxtx" // an IRQ serving rx queue N and tx queue N ("-TxRx-N")
)

// IRQ is one numbered row of /proc/interrupts.
type IRQ struct {
	Number int    `json:"number"`
	Name   string `json:"name"` // the action name, last column
	Chip   string `json:"chip,omitempty"`
	// Counts are the per-CPU counts, indexed by CPU column.
	Counts []uint64 `json:"counts"`
	// SMPAffinity is proc/irq/N/smp_affinity (hex mask text); "" if unreadable.
	SMPAffinity string `json:"smp_affinity,omitempty"`
	// Device and Queue tie the IRQ to a netdev and a queue index when the
	// name says so; Queue is -1 when the IRQ serves the whole device.
	// Direction says which queue: DirRX (rx queue Queue), DirTX (tx queue
	// Queue) or DirRxTx (both rx and tx queue Queue); "" with Queue -1. A
	// snapshot file without it means DirRX for a queue IRQ.
	Device    string `json:"device,omitempty"`
	Queue     int    `json:"queue"`
	Direction string `json:"direction,omitempty"`
	// Effective is effective_affinity_list, the CPUs the IRQ really
	// arrives on; read for refused IRQs and those tied to a netdev without
	// NAPI threads ("" when unreadable or not read).
	Effective string `json:"effective,omitempty"`
	// Refused is the kernel's error from an earlier apply's write of
	// smp_affinity that it refused (EINVAL, EIO: the irq chip cannot
	// move it), as recorded in RefusedIRQsFile; "" for a movable IRQ.
	Refused string `json:"refused,omitempty"`
	// QueueSource is SourceNetlink when netlink napi-get tied the IRQ to
	// its NAPI (and so Device, Queue and Direction are the kernel's); ""
	// when they come from the IRQ's name.
	QueueSource string `json:"queue_source,omitempty"`
}

// SoftnetStat is one row of /proc/net/softnet_stat.
type SoftnetStat struct {
	CPU         int    `json:"cpu"`
	Processed   uint64 `json:"processed"`
	Dropped     uint64 `json:"dropped"`
	TimeSqueeze uint64 `json:"time_squeeze"`
	RPSReceived uint64 `json:"rps_received"`
	FlowLimit   uint64 `json:"flow_limit_count"`
}

// Identity names the board and the OpenWrt target.
type Identity struct {
	Board      string   `json:"board,omitempty"`  // tmp/sysinfo/board_name
	Model      string   `json:"model,omitempty"`  // tmp/sysinfo/model
	Target     string   `json:"target,omitempty"` // DISTRIB_TARGET, e.g. "qualcommax/ipq807x"
	Compatible []string `json:"compatible,omitempty"`
}

// Config is the steering configuration as the user left it in UCI. Values
// are the raw option strings; an unset option is "" with its Set flag false.
// Resolving them into a mode is the steering package's job.
type Config struct {
	// network.globals.packet_steering and steering_flows (first `globals`
	// section, as the stock init script reads them).
	PacketSteering    string `json:"packet_steering,omitempty"`
	PacketSteeringSet bool   `json:"packet_steering_set"`
	SteeringFlows     string `json:"steering_flows,omitempty"`
	// firewall.@defaults[0].flow_offloading and flow_offloading_hw.
	FlowOffloading   string `json:"flow_offloading,omitempty"`
	FlowOffloadingHW string `json:"flow_offloading_hw,omitempty"`
	// PPPoE lists netifd's `proto pppoe` interfaces with the device each
	// runs over (etc/config/network), in file order (boards.go).
	PPPoE []PPPoELink `json:"pppoe,omitempty"`
	// Steering is /etc/config/packet_steering; nil when the file is absent.
	Steering *SteeringConfig `json:"steering,omitempty"`
	// Errors lists config files that exist but do not parse.
	Errors []Gap `json:"errors,omitempty"`
}

// SteeringConfig is /etc/config/packet_steering.
type SteeringConfig struct {
	Mode  string `json:"mode,omitempty"`  // globals.mode, raw
	Flows string `json:"flows,omitempty"` // globals.flows, raw
	// Daemon is globals.daemon, raw: who serves the ubus object (the
	// daemon, or rpcd running the same binary as an exec plugin).
	Daemon  string           `json:"daemon,omitempty"`
	Devices []DeviceOverride `json:"devices,omitempty"`
	// Adaptive holds the options of the first `config adaptive` section,
	// raw, by name (the adaptive mode's loop; the steering package owns
	// their names and meaning); nil without the section.
	Adaptive map[string]string `json:"adaptive,omitempty"`
}

// DeviceOverride is one `config device` section. Empty fields are unset.
type DeviceOverride struct {
	Name string `json:"name"`
	// RPSCPUs is a mask for every rx queue of the device.
	RPSCPUs string `json:"rps_cpus,omitempty"`
	// QueueRPSCPUs maps an rx queue name ("rx-1") to its own mask, from
	// `list queue_rps 'rx-1=2'` options.
	QueueRPSCPUs map[string]string `json:"queue_rps_cpus,omitempty"`
	// XPSCPUs is a mask for every tx queue of the device.
	XPSCPUs string `json:"xps_cpus,omitempty"`
	// NAPICPUs is a cpu list for every NAPI thread of the device.
	NAPICPUs string `json:"napi_cpus,omitempty"`
	// Flows overrides rps_flow_cnt for the device's rx queues.
	Flows string `json:"flows,omitempty"`
	// DeferHardIRQs, GROFlushTimeout (ns) and NAPIThreaded (0 or 1) set
	// the per-NAPI knobs (netlink napi-set, Linux 6.13+; threaded 6.17+)
	// of every NAPI instance of the device: options defer_hard_irqs,
	// gro_flush_timeout, napi_threaded.
	DeferHardIRQs   string `json:"defer_hard_irqs,omitempty"`
	GROFlushTimeout string `json:"gro_flush_timeout,omitempty"`
	NAPIThreaded    string `json:"napi_threaded,omitempty"`
	// QueueNAPI sets them for one NAPI instance, named by the rx queue it
	// serves ("rx-1") or by its id ("napi-8193"), from `list
	// queue_defer_hard_irqs 'rx-1=2'`, queue_gro_flush_timeout and
	// queue_napi_threaded items.
	QueueNAPI map[string]NAPIOverride `json:"queue_napi,omitempty"`
}

// NAPIOverride is the per-NAPI knobs one NAPI instance is given (raw
// option values; "" unset).
type NAPIOverride struct {
	_               outline.NoCompare
	DeferHardIRQs   string `json:"defer_hard_irqs,omitempty"`
	GROFlushTimeout string `json:"gro_flush_timeout,omitempty"`
	Threaded        string `json:"threaded,omitempty"`
}

// Gap is something that could not be read.
type Gap struct {
	_     outline.NoCompare
	Path  string `json:"path"` // relative to the root
	Error string `json:"error"`
}

// IsTX reports a transmit-completion thread. A snapshot written before
// threads carried a Direction marks them by NAPI id 0 alone.
func (t *NAPIThread) IsTX() bool {
	return t.Direction == DirTX || (t.Direction == "" && t.NAPIID == 0)
}

// RxQueue returns the rx queue a per-queue IRQ serves, or -1.
func (q *IRQ) RxQueue() int {
	if q.Queue < 0 || q.Direction == DirTX {
		return -1
	}
	return q.Queue
}

// TxQueue returns the tx queue a per-queue IRQ serves, or -1.
func (q *IRQ) TxQueue() int {
	if q.Queue < 0 || (q.Direction != DirTX && q.Direction != DirRxTx) {
		return -1
	}
	return q.Queue
}

// Device returns the netdev named name, nil when the snapshot has none.
//
//go:noinline
func (s *Snapshot) Device(name string) *Device {
	for i := range s.Devices {
		if s.Devices[i].Name == name {
			return &s.Devices[i]
		}
	}
	return nil
}
