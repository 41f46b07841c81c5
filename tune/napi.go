package tune

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/packet-steering/packet-steering/internal/outline"
	"github.com/packet-steering/packet-steering/plan"
	"github.com/packet-steering/packet-steering/platform"
)

// Per-NAPI knob candidates (Linux 6.13+, netlink napi-set): a custom
// candidate part "DEV:napi=D,T" sets defer-hard-irqs D and
// gro-flush-timeout T ns on every NAPI instance of DEV, as `config
// device` options defer_hard_irqs and gro_flush_timeout do. What they
// trade: a NAPI that polled nothing keeps its IRQ masked for up to D
// polls, re-polled by a timer after T, so a busy queue takes fewer
// interrupts at up to T of added latency. --napi adds the grid below for
// each swept device, so the report shows the throughput against the
// interrupts (and NET_RX runs) each setting costs.

// napiGrid is the --napi grid, 6 candidates per device, one device at a
// time: gro-flush-timeout 0, 20000 and 200000 ns x defer-hard-irqs 0 and 2.
func napiGrid(devs []string) []candidate {
	var out []candidate
	for _, d := range devs {
		for _, t := range [...]string{"0", "20000", "200000"} {
			for _, n := range [...]string{"0", "2"} {
				out = append(out, customCandidateWith(nil, []deviceNAPI{{d, n, t}}))
			}
		}
	}
	return out
}

// deviceNAPI is a per-NAPI knob setting for every NAPI of a device, in
// the kernel's decimal form.
type deviceNAPI struct {
	Device            string `json:"device"`
	DeferHardIRQs     string `json:"defer_hard_irqs"`
	GROFlushTimeoutNS string `json:"gro_flush_timeout_ns"`
}

func (d deviceNAPI) part() string {
	return d.Device + ":napi=" + d.DeferHardIRQs + "," + d.GROFlushTimeoutNS
}

// parseNAPIPart reads the value of a "DEV:napi=D,T" part (after "napi=").
func parseNAPIPart(dev, v string) (deviceNAPI, error) {
	ds, ts, ok := strings.Cut(v, ",")
	d, err := plan.ParseNAPIKnob(plan.KindNAPIDeferHardIRQs, ds)
	what := "defer-hard-irqs"
	if err == nil {
		what = "gro-flush-timeout"
		ts, err = plan.ParseNAPIKnob(plan.KindNAPIGROFlushTimeout, ts)
	}
	if !ok || err != nil {
		return deviceNAPI{}, outline.Errorf("napi=%s: want napi=DEFER_HARD_IRQS,GRO_FLUSH_TIMEOUT_NS (%s: %v)", v, what, err)
	}
	return deviceNAPI{dev, d, ts}, nil
}

// planSetsNAPI reports whether p sets a per-NAPI knob of dev; when not,
// the hint that says why, if the plan has one.
func planSetsNAPI(p *plan.Plan, dev string) (bool, string) {
	for _, a := range p.Actions {
		if plan.IsNAPIKnob(a.Kind) && a.Device == dev {
			return true, ""
		}
	}
	for _, h := range p.Hints {
		if h.Device == dev && (h.ID == plan.HintNAPIKnobsUnsupported || h.ID == plan.HintOverrideInvalid) {
			return false, h.Text
		}
	}
	return false, "the plan sets no per-NAPI knob on " + dev
}

// padNAPIKnobs gives every plan each per-NAPI knob and NAPI thread
// affinity some plan sets, at the value captured before the sweep where
// the plan leaves it alone: a mode candidate measured after a per-NAPI or
// thread one must not run with the other's knobs still set. (Every plan's
// Current is the same snapshot's.)
func padNAPIKnobs(plans map[string]*plan.Plan) {
	var orig []plan.Action
	have := map[string]bool{}
	for _, p := range plans {
		for _, a := range p.Actions {
			pad := plan.IsNAPIKnob(a.Kind) || a.Kind == plan.KindNAPIAffinity
			if k := knobKey(a); pad && a.Current != "" && !have[k] {
				have[k] = true
				a.Value = a.Current
				orig = append(orig, a)
			}
		}
	}
	for _, p := range plans {
		for _, o := range orig {
			if !slices.ContainsFunc(p.Actions, func(a plan.Action) bool { return knobKey(a) == knobKey(o) }) {
				p.Actions = append(p.Actions, o)
			}
		}
	}
}

// irqCounting wraps a load driver and counts the hardware interrupts of
// each run: the numbered rows of proc/interrupts below root, summed over
// CPUs (machine-wide, like the other counters), before and after.
type irqCounting struct {
	_ outline.NoCompare
	loadDriver
	root string
}

// Run implements loadDriver.
func (c *irqCounting) Run(ctx context.Context, run int) (measurement, error) {
	before, berr := readInterruptTotal(c.root)
	m, err := c.loadDriver.Run(ctx, run)
	if err != nil || berr != nil {
		return m, err
	}
	if after, aerr := readInterruptTotal(c.root); aerr == nil && after >= before {
		n := float64(after - before)
		m.Interrupts = &n
	}
	return m, nil
}

// Estimate implements loadDriver.
func (c *irqCounting) Estimate() time.Duration { return c.loadDriver.Estimate() }

// readInterruptTotal sums the per-CPU counts of every numbered row of
// proc/interrupts (at most 4 MiB read).
func readInterruptTotal(root string) (uint64, error) {
	f, err := os.Open(outline.JoinPath(root, "proc", "interrupts"))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(io.LimitReader(f, 4<<20)); err != nil {
		return 0, err
	}
	return interruptTotal(buf.Bytes()), nil
}

// interruptTotal sums the per-CPU columns of the numbered rows ("  24:
// 10 20 PCI-MSI ..."): the numbers after the IRQ number up to the first
// field that is not one.
func interruptTotal(b []byte) uint64 {
	var total uint64
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || !strings.HasSuffix(f[0], ":") {
			continue
		}
		if _, err := strconv.Atoi(strings.TrimSuffix(f[0], ":")); err != nil {
			continue
		}
		for _, v := range f[1:] {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				break
			}
			total += n
		}
	}
	return total
}

// summarizeInterrupts summarises the runs' interrupt counts; nil when no
// run has one.
func summarizeInterrupts(runs []run) *summary {
	var v []float64
	for _, r := range runs {
		if r.Interrupts != nil {
			v = append(v, *r.Interrupts)
		}
	}
	if len(v) == 0 {
		return nil
	}
	s := summarize(v)
	return &s
}

// napiCandidates are the --napi sweep: auto, then napiGrid of devs, or
// of every device netlink lists NAPI instances with per-NAPI config of
// (Linux 6.13+; Prepare refuses a device whose plan cannot set them, with
// the plan's reason), at most o.MaxConfigs in all.
func (o *Options) napiCandidates(s *platform.Snapshot, devs []string, stderr io.Writer) ([]candidate, error) {
	if len(devs) == 0 && s.Netlink != nil {
		for _, n := range s.Netlink.NAPIs {
			if n.DeferHardIRQs != nil && n.Device != "" && !slices.Contains(devs, n.Device) {
				devs = append(devs, n.Device)
			}
		}
	}
	if len(devs) == 0 {
		return nil, errors.New("--napi: no device with per-NAPI knobs here (netlink napi-set, Linux 6.13+)")
	}
	cs := append([]candidate{modeCandidate(plan.ModeAuto)}, napiGrid(devs)...)
	if len(cs) > o.MaxConfigs {
		fmt.Fprintf(stderr, "tune: --max-configs %d leaves out %d per-NAPI candidates; raise it or name --devices\n", o.MaxConfigs, len(cs)-o.MaxConfigs)
		cs = cs[:o.MaxConfigs]
	}
	return cs, nil
}
