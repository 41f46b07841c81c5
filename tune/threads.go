package tune

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/packet-steering/packet-steering/internal/cpuset"
	"github.com/packet-steering/packet-steering/internal/outline"
	"github.com/packet-steering/packet-steering/plan"
	"github.com/packet-steering/packet-steering/platform"
)

// NAPI thread candidates: a custom candidate part "DEV:threads=LIST" lets
// every NAPI thread of DEV run on the CPUs of LIST (a cpu list, "2" or
// "0-3"), as the `config device` option napi_cpus does in mode custom
// (plan.DeviceThreads: the device's own threads, and for a Wi-Fi device
// those of its phy, e.g. mt76's napi/phy0-N). The RPS masks stay as auto
// plans them. --threads measures, per device, every thread on one CPU
// (what the stock rule does with mt76's threads) and on all CPUs (the
// scheduler's choice) against auto's placement.

// parseThreadsPart reads the value of a "DEV:threads=LIST" part (after
// "threads="): a non-empty cpu list, kept in its canonical form.
func parseThreadsPart(dev, v string) (deviceMask, error) {
	set, err := cpuset.ParseList(v)
	if err == nil && set.IsEmpty() {
		err = errors.New("an empty cpu list would leave the threads nowhere to run")
	}
	if err != nil {
		return deviceMask{}, outline.Errorf("threads=%s: want a cpu list such as 2 or 0-3 (%v)", v, err)
	}
	return deviceMask{Device: dev, Mask: set.List()}, nil
}

// planSetsThreads reports whether p places every NAPI thread of dev on
// cpus; when not, why (the plan's hint on dev, or the snapshot's threads).
func planSetsThreads(s *platform.Snapshot, p *plan.Plan, dev, cpus string) (bool, string) {
	for _, h := range p.Hints {
		if h.Device == dev && h.ID == plan.HintOverrideInvalid {
			return false, h.Text
		}
	}
	threads := plan.DeviceThreads(s, dev)
	if len(threads) == 0 {
		return false, dev + " has no NAPI threads here (is threaded NAPI on? /sys/class/net/" + dev + "/threaded)"
	}
next:
	for _, t := range threads {
		for _, a := range p.Actions {
			if a.Kind == plan.KindNAPIAffinity && a.PID == t.PID && a.Value == cpus {
				continue next
			}
		}
		return false, "the plan does not place " + t.Name + " on CPUs " + cpus
	}
	return true, ""
}

// threadCandidates are the --threads sweep: auto, legacy (the stock
// rule), then for each device (devs, or every device with NAPI threads
// but one whose threads a device before it has, as the interfaces of one
// Wi-Fi phy share theirs) its threads on each single CPU and on all CPUs,
// at most o.MaxConfigs in all.
func (o *Options) threadCandidates(s *platform.Snapshot, devs []string, stderr io.Writer) ([]candidate, error) {
	if len(devs) == 0 {
		var seen []int
		for _, d := range s.Devices {
			threads := plan.DeviceThreads(s, d.Name)
			if len(threads) > 0 && !slices.Contains(seen, threads[0].PID) {
				devs = append(devs, d.Name)
			}
			for _, t := range threads {
				seen = append(seen, t.PID)
			}
		}
	}
	if len(devs) == 0 {
		return nil, errors.New("--threads: no device with NAPI threads here (threaded NAPI is off everywhere)")
	}
	var all cpuset.Set
	for _, c := range s.CPUs {
		all = all.Add(c.ID)
	}
	lists := []string{}
	for _, c := range all.CPUs() {
		lists = append(lists, cpuset.Of(c).List())
	}
	if all.Len() > 1 {
		lists = append(lists, all.List())
	}
	var b strings.Builder
	b.WriteString("auto legacy")
	for _, d := range devs {
		for _, l := range lists {
			b.WriteString(" " + d + ":threads=" + l)
		}
	}
	cs, err := parseCandidates(b.String())
	if err != nil {
		return nil, outline.Errorf("--threads: %w", err)
	}
	if len(cs) > o.MaxConfigs {
		fmt.Fprintf(stderr, "tune: --max-configs %d leaves out %d thread candidates; raise it or name --devices\n", o.MaxConfigs, len(cs)-o.MaxConfigs)
		cs = cs[:o.MaxConfigs]
	}
	return cs, nil
}
