package steering

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

// BuiltModes returns the modes this build accepts, in the order of Modes:
// all of them but adaptive in the plain router build (adaptive_stub.go).
func BuiltModes() []Mode {
	out := make([]Mode, 0, len(Modes))
	for _, m := range Modes {
		if m != ModeAdaptive || adaptiveBuilt {
			out = append(out, m)
		}
	}
	return out
}

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
	// the plan took them over or left their knobs to them (writers.go).
	Writers []WriterStatus `json:"writers,omitempty"`
}

// Action is one knob's desired value. Masks (rps_cpus, xps_cpus, irq_affinity)
// are kernel hex masks; napi_affinity is a cpu list.
type Action struct {
	Kind    ActionKind `json:"kind"`
	Device  string     `json:"device,omitempty"`
	Queue   string     `json:"queue,omitempty"`
	PID     int        `json:"pid,omitempty"`
	Thread  string     `json:"thread,omitempty"`
	IRQ     int        `json:"irq,omitempty"`
	Name    string     `json:"name,omitempty"`
	Key     string     `json:"key,omitempty"`
	Value   string     `json:"value"`
	Current string     `json:"current"`
}

// Hint is advice about a setting that cannot work or fights the plan.
type Hint struct {
	ID     string `json:"id"`
	Device string `json:"device,omitempty"`
	Text   string `json:"text"`
}
