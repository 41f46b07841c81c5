package tune

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

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

// napiGridTimeouts and napiGridDefers are the --napi grid: 6 candidates
// per device.
var (
	napiGridTimeouts = [...]uint64{0, 20000, 200000}
	napiGridDefers   = [...]uint32{0, 2}
)

// deviceNAPI is a per-NAPI knob setting for every NAPI of a device.
type deviceNAPI struct {
	Device            string `json:"device"`
	DeferHardIRQs     uint32 `json:"defer_hard_irqs"`
	GROFlushTimeoutNS uint64 `json:"gro_flush_timeout_ns"`
}

func (d deviceNAPI) part() string {
	return d.Device + ":napi=" + strconv.FormatUint(uint64(d.DeferHardIRQs), 10) + "," + strconv.FormatUint(d.GROFlushTimeoutNS, 10)
}

// parseNAPIPart reads the value of a "DEV:napi=D,T" part (after "napi=").
func parseNAPIPart(dev, v string) (deviceNAPI, error) {
	ds, ts, ok := strings.Cut(v, ",")
	if !ok {
		return deviceNAPI{}, fmt.Errorf("device %s: napi=%s: want napi=DEFER_HARD_IRQS,GRO_FLUSH_TIMEOUT_NS", dev, v)
	}
	d, err := plan.ParseNAPIKnob(plan.KindNAPIDeferHardIRQs, ds)
	if err != nil {
		return deviceNAPI{}, fmt.Errorf("device %s: defer-hard-irqs %q: %v", dev, ds, err)
	}
	t, err := plan.ParseNAPIKnob(plan.KindNAPIGROFlushTimeout, ts)
	if err != nil {
		return deviceNAPI{}, fmt.Errorf("device %s: gro-flush-timeout %q: %v", dev, ts, err)
	}
	dn, _ := strconv.ParseUint(d, 10, 32)
	tn, _ := strconv.ParseUint(t, 10, 64)
	return deviceNAPI{Device: dev, DeferHardIRQs: uint32(dn), GROFlushTimeoutNS: tn}, nil
}

// napiGrid is the --napi grid for each device, one device at a time.
func napiGrid(devs []string) []candidate {
	var out []candidate
	for _, d := range devs {
		for _, t := range napiGridTimeouts {
			for _, n := range napiGridDefers {
				out = append(out, customCandidateWith(nil, []deviceNAPI{{Device: d, DeferHardIRQs: n, GROFlushTimeoutNS: t}}))
			}
		}
	}
	return out
}

// napiDevices are the devices of devs (all devices when empty) whose
// NAPI instances the kernel lets the plan set (a custom plan with their
// knobs has per-NAPI actions), and why the others cannot be swept.
func napiDevices(s *platform.Snapshot, devs []string) (ok []string, why []string) {
	if len(devs) == 0 {
		for _, d := range s.Devices {
			devs = append(devs, d.Name)
		}
	}
	for _, d := range devs {
		c := customCandidateWith(nil, []deviceNAPI{{Device: d}})
		if _, err := planCandidate(s, c); err != nil {
			why = append(why, err.Error())
			continue
		}
		ok = append(ok, d)
	}
	return ok, why
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

// padNAPIKnobs gives every plan each per-NAPI knob some plan sets, at the
// value captured before the sweep where the plan leaves it alone: a mode
// candidate measured after a per-NAPI one must not run with the other's
// knobs still set.
func padNAPIKnobs(plans map[string]*plan.Plan) {
	orig := map[string]plan.Action{}
	var order []string
	for _, name := range sortedKeys(plans) {
		for _, a := range plans[name].Actions {
			if k := knobKey(a); plan.IsNAPIKnob(a.Kind) && a.Current != "" {
				if _, ok := orig[k]; !ok {
					r := a
					r.Value = a.Current
					orig[k] = r
					order = append(order, k)
				}
			}
		}
	}
	if len(orig) == 0 {
		return
	}
	for _, p := range plans {
		have := map[string]bool{}
		for _, a := range p.Actions {
			have[knobKey(a)] = true
		}
		for _, k := range order {
			if !have[k] {
				p.Actions = append(p.Actions, orig[k])
			}
		}
	}
}

// irqCounting wraps a load driver and counts the hardware interrupts of
// each run: the numbered rows of proc/interrupts below root, summed over
// CPUs (machine-wide, like the other counters), before and after.
type irqCounting struct {
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
	f, err := os.Open(filepath.Join(root, "proc", "interrupts"))
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

// napiCandidates are the --napi sweep: auto, then napiGrid of the devices
// that have per-NAPI knobs here, at most o.MaxConfigs in all.
func (o *Options) napiCandidates(s *platform.Snapshot, devs []string, stderr io.Writer) ([]candidate, error) {
	ok, why := napiDevices(s, devs)
	for _, w := range why {
		fmt.Fprintf(stderr, "tune: --napi: %s\n", w)
	}
	if len(ok) == 0 {
		return nil, fmt.Errorf("--napi: no device whose per-NAPI knobs can be set here (they need Linux 6.13 and a driver with NAPI)")
	}
	cs := append([]candidate{modeCandidate(plan.ModeAuto)}, napiGrid(ok)...)
	if len(cs) > o.MaxConfigs {
		fmt.Fprintf(stderr, "tune: --max-configs %d leaves out %d per-NAPI candidates; raise it or name --devices\n", o.MaxConfigs, len(cs)-o.MaxConfigs)
		cs = cs[:o.MaxConfigs]
	}
	return cs, nil
}
