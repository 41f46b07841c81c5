package plan

import (
	"errors"
	"strconv"

	"github.com/packet-steering/packet-steering/internal/cpuset"
	"github.com/packet-steering/packet-steering/internal/outline"
)

// ErrInvalid marks a request the caller got wrong (unknown mode or device,
// negative or absurd flows). Errors wrapping it map to ubus INVALID_ARGUMENT
// and CLI exit status 2; nothing has been changed when it is returned.
var ErrInvalid = errors.New("invalid argument")

// PlanRequest selects what to  Zero values mean "as configured".
type PlanRequest struct {
	Mode  Mode
	Flows *int
}

// Settings is the effective configuration: mode and flows and where they
// came from ("packet_steering", "network", "default" or "live").
type Settings struct {
	Mode   Mode   `json:"mode"`
	Flows  int    `json:"flows"`
	Source string `json:"source"`
}

// Mode is a steering mode.
type Mode string

// The modes, as in docs/design.md "Modes".
const (
	ModeOff    Mode = "off"
	ModeLegacy Mode = "legacy"
	ModeAll    Mode = "all"
	ModeAuto   Mode = "auto"
	ModeCustom Mode = "custom"
	// ModeAdaptive is experimental: the auto plan, with queues moved off a
	// CPU that cannot keep up while traffic flows (steering/adaptive.go).
	ModeAdaptive Mode = "adaptive"
)

// Modes lists every mode in the order they are shown to users.
var Modes = []Mode{ModeOff, ModeLegacy, ModeAll, ModeAuto, ModeCustom, ModeAdaptive}

// ActionKind is the kind of knob an Action sets; its string is the "kind"
// field of plan, apply and set_mode replies.
type ActionKind string

// Action kinds.
const (
	KindRPSCPUs      ActionKind = "rps_cpus"
	KindRPSFlowCnt   ActionKind = "rps_flow_cnt"
	KindXPSCPUs      ActionKind = "xps_cpus"
	KindNAPIAffinity ActionKind = "napi_affinity"
	KindIRQAffinity  ActionKind = "irq_affinity"
	KindSysctl       ActionKind = "sysctl"
	// The per-NAPI knobs (netlink napi-set; napi_knobs.go), keyed by the
	// NAPI id: defer-hard-irqs and gro-flush-timeout (ns) on Linux 6.13+,
	// the NAPI's own threaded mode (0 or 1) on 6.17+.
	KindNAPIDeferHardIRQs   ActionKind = "napi_defer_hard_irqs"
	KindNAPIGROFlushTimeout ActionKind = "napi_gro_flush_timeout"
	KindNAPIThreaded        ActionKind = "napi_threaded"
)

// Plan is the full desired state of every knob a mode manages, whether or not
// it already holds, with the live value of each.
type Plan struct {
	Mode Mode `json:"mode"`
	// Policy names the rule set that decided (a profile name, "legacy",
	// "rss-per-cpu", "single-cpu", ...); Evidence says why, with references.
	Policy   string   `json:"policy"`
	Evidence string   `json:"evidence,omitempty"`
	Flows    int      `json:"flows"`
	Actions  []Action `json:"actions"`
	Hints    []Hint   `json:"hints"`
	// Writers are the other programs that write these knobs, and whether
	// the plan took them over or left their knobs to them (otherwriters.go).
	Writers []WriterStatus `json:"writers,omitempty"`
}

// Action is one knob's desired value. Masks (rps_cpus, xps_cpus, irq_affinity)
// are kernel hex masks; napi_affinity is a cpu list.
type Action struct {
	_      outline.NoCompare
	Kind   ActionKind `json:"kind"`
	Device string     `json:"device,omitempty"`
	Queue  string     `json:"queue,omitempty"`
	PID    int        `json:"pid,omitempty"`
	Thread string     `json:"thread,omitempty"`
	IRQ    int        `json:"irq,omitempty"`
	// NAPIID is the NAPI instance of a per-NAPI knob (Queue then names
	// the rx queue it serves, when known).
	NAPIID  int    `json:"napi_id,omitempty"`
	Name    string `json:"name,omitempty"`
	Key     string `json:"key,omitempty"`
	Value   string `json:"value"`
	Current string `json:"current"`
}

// Hint is advice about a setting that cannot work or fights the
type Hint struct {
	_      outline.NoCompare
	ID     string `json:"id"`
	Device string `json:"device,omitempty"`
	Text   string `json:"text"`
}

// SameValue compares a live value with a wanted one the way the kernel
// means them: masks and cpu lists as sets, counts as numbers after the
// kernel's rounding.
func SameValue(kind ActionKind, live, want string) bool {
	switch kind {
	case KindRPSCPUs, KindXPSCPUs, KindIRQAffinity:
		return cpuset.SameMask(live, want)
	case KindNAPIAffinity:
		return cpuset.SameList(live, want)
	case KindNAPIDeferHardIRQs, KindNAPIGROFlushTimeout, KindNAPIThreaded:
		l, err1 := strconv.ParseUint(live, 10, 64)
		w, err2 := strconv.ParseUint(want, 10, 64)
		return err1 == nil && err2 == nil && l == w
	case KindRPSFlowCnt, KindSysctl:
		l, err1 := strconv.ParseUint(live, 10, 64)
		w, err2 := strconv.ParseUint(want, 10, 64)
		return err1 == nil && err2 == nil && l == roundCount(w)
	}
	return live == want
}

// roundCount is what the kernel stores for a flow count: rps_flow_cnt and
// net.core.rps_sock_flow_entries are rounded up to a power of two
// (net/core/net-sysfs.c store_rps_dev_flow_table_cnt,
// net/core/sysctl_net_core.c rps_sock_flow_sysctl), 0 stays 0.
func roundCount(n uint64) uint64 {
	if n == 0 {
		return 0
	}
	p := uint64(1)
	for p < n && p != 0 {
		p <<= 1
	}
	if p == 0 {
		return n
	}
	return p
}

// ValidDeviceName reports whether name may be joined into a sysfs path:
// 1 to IFNAMSIZ-1 bytes of [A-Za-z0-9_.:@-], and not "." or ".." (the
// kernel's dev_valid_name refuses the same).
func ValidDeviceName(name string) bool {
	if len(name) == 0 || len(name) > 15 || name == "." || name == ".." {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '_', c == '.', c == ':', c == '@', c == '-':
		default:
			return false
		}
	}
	return true
}
