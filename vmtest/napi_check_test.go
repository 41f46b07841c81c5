package vmtest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/packet-steering/packet-steering/plan"
	"github.com/packet-steering/packet-steering/platform"
	"github.com/packet-steering/packet-steering/steering"
)

// The per-NAPI knobs the guest's init.sh configures on the multi-queue
// NIC (custom mode): defer_hard_irqs 2 and gro_flush_timeout 20000 ns on
// every NAPI, 200000 ns on rx-1's, and rx-3's NAPI out of its thread
// (per-NAPI threaded 0, Linux 6.17+).
const (
	napiWantDefer     = 2
	napiWantTimeout   = 20000
	napiWantTimeoutR1 = 200000
)

// napiKnobsQueues is `queues --json` as far as the per-NAPI knobs go.
type napiKnobsQueues struct {
	Devices []struct {
		Name string `json:"name"`
		Rx   []struct {
			Queue     string                  `json:"queue"`
			NAPIKnobs *steering.NAPIKnobsView `json:"napi_knobs"`
		} `json:"rx"`
	} `json:"devices"`
}

// mqNAPIs returns the NAPI instances of dev in the snapshot, by id.
func mqNAPIs(s *platform.Snapshot, dev string) map[int]platform.NAPI {
	out := map[int]platform.NAPI{}
	if s.Netlink == nil {
		return out
	}
	for _, n := range s.Netlink.NAPIs {
		if n.Device == dev {
			out[n.ID] = n
		}
	}
	return out
}

// napiKnobText is "defer/timeout[/threaded]" of a NAPI.
func napiKnobText(n platform.NAPI) string {
	t := "-/-"
	if n.DeferHardIRQs != nil && n.GROFlushTimeoutNS != nil {
		t = fmt.Sprintf("%d/%d", *n.DeferHardIRQs, *n.GROFlushTimeoutNS)
	}
	if n.Threaded != nil {
		t += "/" + strconv.Itoa(int(*n.Threaded))
	}
	return t
}

// checkNAPIKnobs checks the guest's per-NAPI knob phase (init.sh): on a
// kernel without napi-set the custom plan has the hint "not supported by
// this kernel" and no per-NAPI action; on one with it (sid's 7.2 must
// have it) the apply writes them, the snapshot (netlink napi-get) reads
// them back as configured, get_queues shows them, a second apply writes
// nothing, release puts every NAPI back where it was before, and the
// plain apply after it fails nothing. It returns a line describing it.
func checkNAPIKnobs(c *checker, g *guest, con *consoleOut, mq string) string {
	var before platform.Snapshot
	if !c.getJSON(con, "snapshot", &before) {
		return ""
	}
	var pl plan.Plan
	if !c.getJSON(con, "napi-plan", &pl) {
		return ""
	}
	var acts []plan.Action
	for _, a := range pl.Actions {
		if plan.IsNAPIKnob(a.Kind) {
			acts = append(acts, a)
		}
	}
	var reapply steering.Result
	if c.getJSON(con, "napi-reapply", &reapply) && len(reapply.Failed) != 0 {
		c.errorf("napi: the apply after release failed %+v", reapply.Failed)
	}
	hasSet := before.Netlink != nil && slices.Contains(before.Netlink.Ops, "napi-set")
	if g.suite == "sid" && !hasSet {
		c.errorf("napi: sid's kernel has no napi-set (ops %v)", before.Netlink)
	}
	if !hasSet {
		for _, h := range pl.Hints {
			if h.ID == plan.HintNAPIKnobsUnsupported && strings.Contains(h.Text, "not supported by this kernel") {
				if len(acts) != 0 {
					c.errorf("napi: a kernel without napi-set got per-NAPI actions %+v", acts)
				}
				return "per-NAPI knobs: " + h.Text
			}
		}
		c.errorf("napi: no %s hint on a kernel without napi-set: %+v", plan.HintNAPIKnobsUnsupported, pl.Hints)
		return ""
	}
	napis := mqNAPIs(&before, mq)
	dev := before.Device(mq)
	if dev == nil || len(napis) == 0 {
		c.errorf("napi: no NAPIs of %s in the snapshot", mq)
		return ""
	}
	// Which NAPI serves which rx queue, as the plan says (the queue map
	// of queue-get on 7.2's virtio_net).
	queueOf := map[int]string{}
	for _, a := range acts {
		if a.Device == mq && a.Queue != "" {
			queueOf[a.NAPIID] = a.Queue
		}
	}
	threaded := false
	for _, n := range napis {
		threaded = threaded || n.Threaded != nil
	}
	if want := 2 * len(napis); threaded && len(acts) != want+1 || !threaded && len(acts) != want {
		c.errorf("napi: %d per-NAPI actions for %d NAPIs (threaded per NAPI: %v): %+v", len(acts), len(napis), threaded, acts)
	}
	var applied steering.Result
	if !c.getJSON(con, "napi-apply", &applied) {
		return ""
	}
	if len(applied.Failed) != 0 {
		c.errorf("napi: apply failed %+v", applied.Failed)
	}
	changed := 0
	for _, a := range applied.Changed {
		if plan.IsNAPIKnob(a.Kind) {
			changed++
		}
	}
	var after, released platform.Snapshot
	if !c.getJSON(con, "napi-snapshot", &after) || !c.getJSON(con, "napi-released", &released) {
		return ""
	}
	var got []string
	for id, n := range mqNAPIs(&after, mq) {
		q := queueOf[id]
		wantT := uint64(napiWantTimeout)
		if q == "rx-1" {
			wantT = napiWantTimeoutR1
		}
		if n.DeferHardIRQs == nil || *n.DeferHardIRQs != napiWantDefer || n.GROFlushTimeoutNS == nil || *n.GROFlushTimeoutNS != wantT {
			c.errorf("napi: NAPI %d (%s) reads back %s, want %d/%d", id, q, napiKnobText(n), napiWantDefer, wantT)
		}
		if q == "rx-3" && threaded && (n.Threaded == nil || *n.Threaded != 0 || n.PID != 0) {
			c.errorf("napi: NAPI %d (rx-3) threaded %s pid %d, want 0 and no thread", id, napiKnobText(n), n.PID)
		}
		got = append(got, fmt.Sprintf("%d(%s) %s", id, q, napiKnobText(n)))
	}
	slices.Sort(got)
	var again steering.Result
	if c.getJSON(con, "napi-apply-again", &again) && (len(again.Changed) != 0 || len(again.Failed) != 0) {
		c.errorf("napi: second apply changed %+v failed %+v", again.Changed, again.Failed)
	}
	text, err := con.get("napi-queues-json")
	if err != nil {
		c.errorf("%v", err)
	} else {
		var q napiKnobsQueues
		if err := json.Unmarshal([]byte(text), &q); err != nil {
			c.errorf("napi-queues-json: %v", err)
		}
		for _, d := range q.Devices {
			for _, r := range d.Rx {
				if d.Name != mq || r.Queue != "rx-1" {
					continue
				}
				if k := r.NAPIKnobs; k == nil || k.GROFlushTimeoutNS != "200000" || k.WantGROFlushTimeoutNS != "200000" || k.DeferHardIRQs != "2" {
					c.errorf("napi: get_queues %s rx-1: %+v", mq, k)
				}
			}
		}
	}
	var rel steering.Result
	if c.getJSON(con, "napi-release", &rel) && len(rel.Failed) != 0 {
		c.errorf("napi: release failed %+v", rel.Failed)
	}
	for id, n := range mqNAPIs(&released, mq) {
		if b, ok := napis[id]; !ok || napiKnobText(b) != napiKnobText(n) {
			c.errorf("napi: NAPI %d after release %s, before %s", id, napiKnobText(n), napiKnobText(b))
		}
	}
	return fmt.Sprintf("per-NAPI knobs: apply changed %d (%d µs), read back %s; second apply 0; release restored %d NAPIs",
		changed, applied.DurationUS, strings.Join(got, ", "), len(napis))
}
