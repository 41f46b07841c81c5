package tune

import (
	"strings"

	"github.com/packet-steering/packet-steering/internal/cpuset"
	"github.com/packet-steering/packet-steering/internal/outline"
	"github.com/packet-steering/packet-steering/plan"
)

// candidate is one configuration to measure: a mode, or (Mode custom) the
// auto plan with the RPS mask of some devices overridden, exactly what
// `config device` sections with rps_cpus do in custom mode.
type candidate struct {
	// Name is the canonical text form, as parseCandidates reads it:
	// "auto", or "eth0:2/br-lan:0".
	Name string `json:"name"`
	// Mode is the steering mode the candidate's plan is made with: off,
	// legacy, all, auto, or custom for RPS overrides on top of auto.
	Mode plan.Mode `json:"mode"`
	// RPS holds the per-device masks of a custom candidate.
	RPS []deviceMask `json:"rps,omitempty"`
	// NAPI holds its per-NAPI knobs per device (napi.go).
	NAPI []deviceNAPI `json:"napi,omitempty"`
	// Threads holds the CPUs of each device's NAPI threads (threads.go):
	// Mask is a cpu list there ("0-3").
	Threads []deviceMask `json:"threads,omitempty"`
}

// deviceMask is an RPS mask (kernel hex format) for every rx queue of a
// device.
type deviceMask struct {
	Device string `json:"device"`
	Mask   string `json:"mask"`
}

// sweepModes are the modes measured by default, in the order shown: every
// mode but custom, which candidates with RPS overrides stand for, and
// adaptive, which is measured only when listed in --candidates (the auto
// plan with the adaptive loop running through the candidate's runs).
func sweepModes() []plan.Mode {
	var out []plan.Mode
	for _, m := range plan.Modes {
		if m != plan.ModeCustom && m != plan.ModeAdaptive {
			out = append(out, m)
		}
	}
	return out
}

// modeCandidate is the candidate for a plain mode.
func modeCandidate(m plan.Mode) candidate { return candidate{Name: string(m), Mode: m} }

// customCandidate is the candidate that overrides the given devices' masks.
func customCandidate(rps []deviceMask) candidate { return customCandidateWith(rps, nil) }

// customCandidateWith is the candidate with RPS masks and per-NAPI knobs.
func customCandidateWith(rps []deviceMask, napi []deviceNAPI) candidate {
	return customCandidateOf(rps, napi, nil)
}

// customCandidateOf is the candidate with RPS masks, per-NAPI knobs and
// NAPI thread CPUs, named in that order.
func customCandidateOf(rps []deviceMask, napi []deviceNAPI, threads []deviceMask) candidate {
	parts := make([]string, 0, len(rps)+len(napi)+len(threads))
	for _, d := range rps {
		parts = append(parts, d.Device+":"+d.Mask)
	}
	for _, d := range napi {
		parts = append(parts, d.part())
	}
	for _, d := range threads {
		parts = append(parts, d.Device+":threads="+d.Mask)
	}
	return candidate{Name: strings.Join(parts, "/"), Mode: plan.ModeCustom, RPS: rps, NAPI: napi, Threads: threads}
}

// parseCandidates reads a candidate list. Candidates are separated by ';'
// or whitespace. Each is a mode (off, legacy, all, auto, adaptive) or a custom
// candidate: DEV:MASK pairs joined by '/', as in "eth0:0/br-lan:2", and
// DEV:napi=D,T per-NAPI knobs (napi.go), as in "eth0:2/eth0:napi=2,20000",
// and DEV:threads=LIST for the CPUs of its NAPI threads (threads.go). MASK
// is a kernel hex mask and may hold commas above 32 CPUs ("1,00000000").
// The separators are the characters the kernel forbids in device names
// (':', '/' and whitespace, net/core/dev.c dev_valid_name), so no device
// name is ambiguous. Duplicates are an error.
func parseCandidates(s string) ([]candidate, error) {
	fields := strings.FieldsFunc(s, func(r rune) bool {
		return r == ';' || r == ' ' || r == '\t' || r == '\n'
	})
	if len(fields) == 0 {
		return nil, outline.Errorf("candidate list %q is empty", s)
	}
	seen := map[string]bool{}
	var out []candidate
	for _, f := range fields {
		var c candidate
		if !strings.Contains(f, ":") {
			m, err := plan.ParseMode(f)
			if err != nil || m == plan.ModeCustom {
				return nil, outline.Errorf("candidate %q: not a mode (off, legacy, all, auto, adaptive) nor DEV:MASK", f)
			}
			c = modeCandidate(m)
		} else {
			var rps []deviceMask
			var napi []deviceNAPI
			var threads []deviceMask
			devs := map[string]bool{}
			for _, p := range strings.Split(f, "/") {
				dev, mask, ok := strings.Cut(p, ":")
				if !ok || dev == "" || mask == "" {
					return nil, outline.Errorf("candidate %q: %q is not DEV:MASK", f, p)
				}
				if len(dev) > 15 {
					return nil, outline.Errorf("candidate %q: device name %q is longer than 15 bytes", f, dev)
				}
				// The knob: "napi=", "threads=" or "" (an RPS mask).
				knob, v := "", mask
				for _, k := range [...]string{"napi=", "threads="} {
					if rest, ok := strings.CutPrefix(mask, k); ok {
						knob, v = k, rest
					}
				}
				if devs[knob+dev] {
					if knob != "" {
						knob += " "
					}
					return nil, outline.Errorf("candidate %q: device %s given %stwice", f, dev, knob)
				}
				devs[knob+dev] = true
				var err error
				switch knob {
				case "napi=":
					var n deviceNAPI
					n, err = parseNAPIPart(dev, v)
					napi = append(napi, n)
				case "threads=":
					var th deviceMask
					th, err = parseThreadsPart(dev, v)
					threads = append(threads, th)
				default:
					_, err = cpuset.ParseMask(mask)
					rps = append(rps, deviceMask{Device: dev, Mask: mask})
				}
				if err != nil {
					return nil, outline.Errorf("candidate %q: device %s: %w", f, dev, err)
				}
			}
			c = customCandidateOf(rps, napi, threads)
		}
		if seen[c.Name] {
			return nil, outline.Errorf("candidate %q given twice", c.Name)
		}
		seen[c.Name] = true
		out = append(out, c)
	}
	return out, nil
}

// layout is what candidate generation needs to know about the machine.
type layout struct {
	// CPUs are the online CPU numbers.
	CPUs []int
	// Devices are the devices whose RPS masks the variants vary, in order.
	Devices []string
	// RxCPUs maps a device to the CPUs its receive interrupts or NAPI
	// threads are pinned to, when they are pinned to fewer than all CPUs.
	RxCPUs map[string][]int
}

// Variants returns a device's RPS mask variants in the spirit of the
// bcm53xx commit fcbd39689ebf (docs/platforms.md): 0 (RPS off), each single CPU, and all
// CPUs but those its receive interrupt or NAPI thread is pinned to (when
// known and not already listed).
func (l layout) Variants(dev string) []string {
	out := []string{"0"}
	seen := map[string]bool{"0": true}
	add := func(m string) {
		if !seen[m] {
			seen[m] = true
			out = append(out, m)
		}
	}
	for _, c := range l.CPUs {
		add(cpuset.Of(c).Mask())
	}
	if rx := l.RxCPUs[dev]; len(rx) > 0 {
		pinned := map[int]bool{}
		for _, c := range rx {
			pinned[c] = true
		}
		var rest []int
		for _, c := range l.CPUs {
			if !pinned[c] {
				rest = append(rest, c)
			}
		}
		if len(rest) > 0 && len(rest) < len(l.CPUs) {
			add(cpuset.Of(rest...).Mask())
		}
	}
	return out
}

// generate lists the candidates: the modes first, then RPS mask variants
// of the layout's devices, max in all (max <= 0: no cap). When every
// combination of the devices' variants fits (the bcm53xx commit's full table), all
// are measured; otherwise each device is varied alone, the others left as
// auto plans them. It returns how many variants the cap left out.
func generate(modes []plan.Mode, l layout, max int) (cands []candidate, dropped int) {
	for _, m := range modes {
		cands = append(cands, modeCandidate(m))
	}
	room := max - len(cands)
	var variants [][]deviceMask
	product := 1
	for _, d := range l.Devices {
		product *= len(l.Variants(d))
		if product > 1<<16 {
			break
		}
	}
	if len(l.Devices) > 1 && (max <= 0 || product <= room) {
		variants = [][]deviceMask{nil}
		for _, d := range l.Devices {
			var next [][]deviceMask
			for _, prefix := range variants {
				for _, m := range l.Variants(d) {
					v := append(append([]deviceMask(nil), prefix...), deviceMask{Device: d, Mask: m})
					next = append(next, v)
				}
			}
			variants = next
		}
	} else {
		for _, d := range l.Devices {
			for _, m := range l.Variants(d) {
				variants = append(variants, []deviceMask{{Device: d, Mask: m}})
			}
		}
	}
	for _, v := range variants {
		if max > 0 && len(cands) >= max {
			dropped++
			continue
		}
		cands = append(cands, customCandidate(v))
	}
	if max > 0 && len(cands) > max {
		cands = cands[:max]
	}
	return cands, dropped
}

// sortedKeys returns the keys of m in order.
//
//go:noinline
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	outline.SortStrings(out)
	return out
}
