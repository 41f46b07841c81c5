package vmtest

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/packet-steering/packet-steering/plan"
	"github.com/packet-steering/packet-steering/steering"
)

// The adaptive mode's functional check (init.sh adaptive_check): the
// router build's daemon in mode adaptive with the loop's options
// from UCI, a host-side flood into every rx queue, then a process filling
// the CPU of rx-1. Emulated CPUs make the loads meaningless as figures;
// what is checked is what the loop did.

// appliedEvent is one packet_steering.applied line of `vmguest events`.
type appliedEvent struct {
	Reason string `json:"reason"`
	Mode   string `json:"mode"`
}

// parseEvents reads the "EVENT JSON" lines of `vmguest events`, keeping
// packet_steering.applied.
func parseEvents(s string) ([]appliedEvent, error) {
	var out []appliedEvent
	for _, line := range strings.Split(s, "\n") {
		name, data, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok || name != "packet_steering.applied" {
			continue
		}
		var ev appliedEvent
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			return nil, fmt.Errorf("event %q: %w", line, err)
		}
		out = append(out, ev)
	}
	return out, nil
}

// moveReason matches an adaptive apply's reason (adaptive.Reason of
// one move): queue, kind, from, to, why.
var moveReason = regexp.MustCompile(`^adaptive: (\S+)/(rx-[0-9]+) (napi|rps) cpu([0-9]+)->cpu([0-9]+): (.+)$`)

// adaptiveSummary is what the check found, for the log.
type adaptiveSummary struct {
	away, back string
	steady     string
}

// checkAdaptive checks the adaptive sections of a guest.
func checkAdaptive(c *checker, con *consoleOut, mq string) adaptiveSummary {
	var sum adaptiveSummary
	queue, hogText := con.info["adaptive_queue"], con.info["adaptive_cpu"]
	hog, err := strconv.Atoi(hogText)
	if queue == "" || err != nil {
		c.errorf("adaptive: the guest named no queue and CPU (INFO adaptive_queue=%q adaptive_cpu=%q)", queue, hogText)
		return sum
	}
	key := mq + "/" + queue
	status := func(name string) *steering.Status {
		var st steering.Status
		if !c.getJSON(con, name, &st) {
			return nil
		}
		if st.Mode != plan.ModeAdaptive || st.Adaptive == nil {
			c.errorf("%s: mode %s, adaptive %v", name, st.Mode, st.Adaptive != nil)
			return nil
		}
		return &st
	}

	// Start: the options from UCI, nothing moved.
	if st := status("adaptive-start"); st != nil {
		want := map[string]string{"interval": "1s", "max_idle_interval": "2s", "dwell": "6s", "busy_load": "80%", "high_load": "85%"}
		for _, o := range st.Adaptive.Config {
			if v, ok := want[o.Name]; ok {
				src := plan.SourcePacketSteering
				if o.Name == "high_load" {
					src = plan.SourceDefault
				}
				if o.Value != v || o.Source != src {
					c.errorf("adaptive-start: option %s = %s (%s), want %s (%s)", o.Name, o.Value, o.Source, v, src)
				}
				delete(want, o.Name)
			}
		}
		if len(want) > 0 || len(st.ConfigErrors) > 0 {
			c.errorf("adaptive-start: options missing %v, config errors %+v", want, st.ConfigErrors)
		}
	}
	// Steady and balanced: traffic seen, nothing moved.
	if st := status("adaptive-steady"); st != nil {
		a := st.Adaptive
		if a.Sampling == nil || !a.Sampling.Active || len(a.Moves) != 0 || len(a.Deviations) != 0 {
			c.errorf("adaptive-steady: want traffic seen and no moves: sampling %+v, moves %+v, deviations %+v", a.Sampling, a.Moves, a.Deviations)
		}
		if a.Sampling != nil {
			var loads []string
			for _, l := range a.Sampling.Loads {
				loads = append(loads, fmt.Sprintf("cpu%d net %.0f%% busy %.0f%%", l.CPU, 100*l.Net, 100*l.Busy))
			}
			sum.steady = fmt.Sprintf("%.0f packets/s; %s", a.Sampling.PPS, strings.Join(loads, ", "))
		}
	}

	// The moves, as announced: exactly one away from the hog's CPU and
	// one back.
	text, err := con.get("adaptive-events")
	if err != nil {
		c.errorf("%v", err)
		return sum
	}
	events, err := parseEvents(text)
	if err != nil {
		c.errorf("adaptive-events: %v", err)
	}
	var moves [][]string
	for _, ev := range events {
		if m := moveReason.FindStringSubmatch(ev.Reason); m != nil {
			moves = append(moves, m)
		} else if strings.HasPrefix(ev.Reason, "adaptive") {
			c.errorf("adaptive event with an unexpected reason %q", ev.Reason)
		}
	}
	if len(moves) != 2 {
		c.errorf("adaptive: %d moves announced, want 2 (away from cpu%d under the hog, back after it): %q", len(moves), hog, text)
		return sum
	}
	away, back := moves[0], moves[1]
	to, _ := strconv.Atoi(away[5])
	if away[1]+"/"+away[2] != key || away[3] != "napi" || away[4] != hogText || to == hog || !strings.HasPrefix(away[6], "cpu"+hogText+" saturated (") {
		c.errorf("adaptive: first move %q, want %s (napi) away from cpu%d, saturated", away[0], key, hog)
	}
	if back[1]+"/"+back[2] != key || back[4] != away[5] || back[5] != hogText || !strings.HasPrefix(back[6], "back to the auto placement") {
		c.errorf("adaptive: second move %q, want %s back from cpu%d to cpu%d", back[0], key, to, hog)
	}
	sum.away, sum.back = away[0], back[0]

	// While moved: status, get_queues (thread and IRQ on the new CPU), the
	// one-shot status, and the daemon restarted: all keep the deviation.
	deviated := func(name string, st *steering.Status) {
		if st == nil {
			return
		}
		d := st.Adaptive.Deviations
		if len(d) != 1 || d[0].Key() != key || d[0].CPU != to || d[0].Home != hog || !strings.Contains(d[0].Reason, "saturated") {
			c.errorf("%s: deviations %+v, want %s on cpu%d (auto cpu%d)", name, d, key, to, hog)
		}
		if !st.InSync {
			c.errorf("%s: not in sync", name)
		}
	}
	deviated("adaptive-moved", status("adaptive-moved"))
	deviated("adaptive-restarted", status("adaptive-restarted"))
	placedOn(c, con, "adaptive-moved-queues", mq, queue, to, true)
	if s, err := con.get("adaptive-moved-oneshot"); err != nil {
		c.errorf("%v", err)
	} else if !regexp.MustCompile(`(?m)^in sync\s+yes$`).MatchString(s) || !strings.Contains(s, fmt.Sprintf("%s (napi) on cpu%d, auto: cpu%d", key, to, hog)) {
		c.errorf("one-shot status while moved: want in sync and the deviation:\n%s", s)
	}

	// Back: no deviation, the thread and the IRQ home again.
	if st := status("adaptive-back"); st != nil {
		a := st.Adaptive
		if len(a.Deviations) != 0 || len(a.Moves) != 2 || a.Moves[1].To != hog || a.Moves[1].Error != "" {
			c.errorf("adaptive-back: deviations %+v, moves %+v; want none, and the two moves (kept across the restart)", a.Deviations, a.Moves)
		}
	}
	placedOn(c, con, "adaptive-back-queues", mq, queue, hog, false)
	if log, err := con.get("adaptive-log"); err != nil {
		c.errorf("%v", err)
	} else if !strings.Contains(log, `msg="adaptive loop started" interval=1s`) || strings.Count(log, `msg="adaptive move"`) != 2 {
		c.errorf("adaptive-log: want the loop started with the UCI interval and two moves logged:\n%s", log)
	}
	return sum
}

// placedOn checks a get_queues section: the queue's NAPI thread and IRQ
// are planned and live on cpu, and the queue is marked adaptive (or not).
func placedOn(c *checker, con *consoleOut, name, dev, queue string, cpu int, marked bool) {
	var q queuesOut
	if !c.getJSON(con, name, &q) {
		return
	}
	want := strconv.Itoa(cpu)
	for _, d := range q.Devices {
		if d.Name != dev {
			continue
		}
		for _, rx := range d.Rx {
			if rx.Queue != queue {
				continue
			}
			if rx.NAPI == nil || rx.NAPI.CPUs != want || rx.NAPI.want() != want {
				c.errorf("%s: %s %s NAPI thread %+v, want it on cpu%d", name, dev, queue, rx.NAPI, cpu)
			}
			if rx.IRQ == nil || !sameList(rx.IRQ.CPUs, want) || !sameList(rx.IRQ.want(), want) {
				c.errorf("%s: %s %s IRQ %+v, want it on cpu%d", name, dev, queue, rx.IRQ, cpu)
			}
			if (rx.Adaptive != nil) != marked {
				c.errorf("%s: %s %s adaptive mark %+v, want marked %v", name, dev, queue, rx.Adaptive, marked)
			}
			return
		}
	}
	c.errorf("%s: no %s %s", name, dev, queue)
}

func TestParseAdaptiveEvents(t *testing.T) {
	in := "packet_steering.applied {\"reason\": \"start\", \"mode\": \"adaptive\"}\n" +
		"packet_steering.applied {\"reason\":\"adaptive: eth0/rx-1 napi cpu1->cpu3: cpu1 saturated (busy 100% with net load 9%)\",\"mode\":\"adaptive\"}\n" +
		"other.event {}\n\n"
	evs, err := parseEvents(in)
	if err != nil || len(evs) != 2 || evs[1].Mode != "adaptive" {
		t.Fatalf("events %+v, %v", evs, err)
	}
	m := moveReason.FindStringSubmatch(evs[1].Reason)
	if m == nil || m[1] != "eth0" || m[2] != "rx-1" || m[3] != "napi" || m[4] != "1" || m[5] != "3" || !strings.HasPrefix(m[6], "cpu1 saturated") {
		t.Errorf("move %q", m)
	}
	if _, err := parseEvents("packet_steering.applied {bad"); err == nil {
		t.Error("bad event JSON: no error")
	}
}
