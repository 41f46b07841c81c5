package vmtest

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/packet-steering/packet-steering/platform"
)

// sourcesOut is `queues --json` as far as the pairing sources go.
type sourcesOut struct {
	Devices []struct {
		Name string `json:"name"`
		Rx   []struct {
			Queue string `json:"queue"`
			NAPI  *struct {
				Thread string `json:"thread"`
				Source string `json:"source"`
			} `json:"napi"`
			IRQ *struct {
				Name   string `json:"name"`
				Source string `json:"source"`
			} `json:"irq"`
		} `json:"rx"`
	} `json:"devices"`
}

// checkNetlink checks what the guest's kernel said over netdev netlink
// (the snapshot's netlink status, each multi-queue rx queue's NAPI id) and
// how `queues` pairs the multi-queue NIC's rx queues (g.wantRxSource),
// and returns a line describing it. The traffic check (checkTraffic)
// shows separately that the pairing is where the work really ran.
func checkNetlink(c *checker, g *guest, con *consoleOut, mq string) string {
	var s platform.Snapshot
	if !c.getJSON(con, "snapshot", &s) {
		return ""
	}
	if s.Netlink == nil {
		c.errorf("the snapshot of / does not say what netlink said")
		return ""
	}
	if !strings.HasPrefix(s.Netlink.Status, g.wantNetlink) {
		c.errorf("netlink status %q, want %q", s.Netlink.Status, g.wantNetlink)
	}
	for _, d := range s.Netlink.Disagreements {
		c.errorf("netlink disagrees with the inference: %s", d)
	}
	line := fmt.Sprintf("netlink: %s; ops %v", s.Netlink.Status, s.Netlink.Ops)
	if g.queues == 0 || mq == "" {
		return line
	}
	var dev *platform.Device
	for i := range s.Devices {
		if s.Devices[i].Name == mq {
			dev = &s.Devices[i]
		}
	}
	if dev == nil {
		c.errorf("snapshot: no %s", mq)
		return line
	}
	var ids, stats []string
	for _, q := range dev.RxQueues {
		ids = append(ids, fmt.Sprintf("%s=%d", q.Name, q.NAPIID))
		if q.Stats != nil {
			stats = append(stats, fmt.Sprintf("%s %d pkts", q.Name, q.Stats.Packets))
		}
	}
	var napis []string
	for _, n := range s.Netlink.NAPIs {
		if n.Device == mq {
			napis = append(napis, fmt.Sprintf("%d irq %d pid %d", n.ID, n.IRQ, n.PID))
		}
	}
	line += fmt.Sprintf("; %s rx NAPI ids from queue-get: %s; napi-get: %s; qstats: %s", mq,
		strings.Join(ids, " "), strings.Join(napis, ", "), strings.Join(stats, ", "))
	text, err := con.get("queues-json")
	if err != nil {
		c.errorf("%v", err)
		return line
	}
	var q sourcesOut
	if err := json.Unmarshal([]byte(text), &q); err != nil {
		c.errorf("queues-json: %v", err)
		return line
	}
	var srcs []string
	for _, d := range q.Devices {
		if d.Name != mq {
			continue
		}
		for _, r := range d.Rx {
			if r.NAPI == nil {
				c.errorf("%s %s: no NAPI thread paired", mq, r.Queue)
				continue
			}
			if r.NAPI.Source != g.wantRxSource {
				c.errorf("%s %s: paired with %s by %q, want %q", mq, r.Queue, r.NAPI.Thread, r.NAPI.Source, g.wantRxSource)
			}
			irq := "-"
			if r.IRQ != nil {
				irq = r.IRQ.Source
			}
			srcs = append(srcs, r.Queue+" "+r.NAPI.Source+"/"+irq)
		}
	}
	return line + "; pairing (thread/IRQ): " + strings.Join(srcs, ", ")
}
