package vmtest

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/packet-steering/packet-steering/adaptive"
	"github.com/packet-steering/packet-steering/internal/cpuset"
	"github.com/packet-steering/packet-steering/internal/procmem"
	"github.com/packet-steering/packet-steering/plan"
	"github.com/packet-steering/packet-steering/platform"
	"github.com/packet-steering/packet-steering/steering"
)

// queuesOut is `queues --json` / get_queues as this test reads it. The tx
// side's napi and irq are optional: present where the project pairs a TX
// NAPI thread or IRQ with the tx queue.
type queuesOut struct {
	Devices []struct {
		Name   string   `json:"name"`
		Driver string   `json:"driver"`
		Rx     []rxView `json:"rx"`
		Tx     []txView `json:"tx"`
	} `json:"devices"`
}

type rxView struct {
	Queue       string `json:"queue"`
	RPSCPUs     string `json:"rps_cpus"`
	WantRPSCPUs string `json:"want_rps_cpus"`
	queueWork
	// Adaptive is set where the adaptive mode moved the queue.
	Adaptive *adaptive.Deviation `json:"adaptive"`
}

type txView struct {
	Queue       string `json:"queue"`
	XPSCPUs     string `json:"xps_cpus"`
	WantXPSCPUs string `json:"want_xps_cpus"`
	queueWork
}

// queueWork is where a queue's work runs: its NAPI thread and IRQ (either
// may be absent).
type queueWork struct {
	NAPI *napiView `json:"napi"`
	IRQ  *irqView  `json:"irq"`
}

type napiView struct {
	PID    int    `json:"pid"`
	Thread string `json:"thread"`
	placed
}

type irqView struct {
	IRQ  int    `json:"irq"`
	Name string `json:"name"`
	placed
}

// placed is a thread's or IRQ's live and planned CPUs (cpu lists).
type placed struct {
	CPUs     string `json:"cpus"`
	WantCPUs string `json:"want_cpus"`
}

// want is the planned value where the plan sets one, else the live one
// (the plan leaves the knob alone).
func (p placed) want() string {
	if p.WantCPUs != "" {
		return p.WantCPUs
	}
	return p.CPUs
}

// kernelState is the "state" section: the kernel's files read with cat
// after apply.
type kernelState struct {
	irqList map[int]string    // /proc/irq/N/smp_affinity_list
	threads map[int]string    // pid -> Cpus_allowed_list
	comms   map[int]string    // pid -> comm
	rps     map[string]string // "dev rx-N" -> rps_cpus
	flows   map[string]string // "dev rx-N" -> rps_flow_cnt
	xps     map[string]string // "dev tx-N" -> xps_cpus
	sysctl  map[string]string
	busdev  map[string]string // netdev -> virtio device ("virtio0")
}

func parseState(s string) kernelState {
	k := kernelState{irqList: map[int]string{}, threads: map[int]string{}, comms: map[int]string{},
		rps: map[string]string{}, flows: map[string]string{}, xps: map[string]string{},
		sysctl: map[string]string{}, busdev: map[string]string{}}
	for _, line := range strings.Split(s, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "irq":
			if n, err := strconv.Atoi(f[1]); err == nil && len(f) == 3 {
				k.irqList[n] = f[2]
			}
		case "thread":
			if n, err := strconv.Atoi(f[1]); err == nil && len(f) == 4 {
				k.comms[n], k.threads[n] = f[2], f[3]
			}
		case "rps":
			if len(f) == 5 {
				k.rps[f[1]+" "+f[2]], k.flows[f[1]+" "+f[2]] = f[3], f[4]
			}
		case "xps":
			if len(f) >= 3 {
				k.xps[f[1]+" "+f[2]] = strings.Join(f[3:], "")
			}
		case "sysctl":
			if len(f) == 3 {
				k.sysctl[f[1]] = f[2]
			}
		case "busdev":
			if len(f) == 3 {
				k.busdev[f[1]] = f[2]
			}
		}
	}
	return k
}

// threadSample is one NAPI thread in a counters dump.
type threadSample struct {
	pid       int
	comm      string
	ticks     uint64 // utime+stime from /proc/PID/stat, clock ticks
	runNS     uint64 // first field of /proc/PID/schedstat: time on a CPU
	processor int    // the CPU it last ran on (stat field 39)
}

// counters is one "counters" section: the NAPI threads and packet-
// steering's snapshot (softnet and /proc/interrupts counts).
type counters struct {
	threads map[int]threadSample
	snap    platform.Snapshot
}

// parseTaskTimes reads utime+stime (platform.ParseTaskTicks) and the
// processor field (39) of a /proc/PID/stat line (fs/proc/array.c
// do_task_stat): the CPU the thread last ran on. Fields are counted after
// the comm's closing parenthesis, as comm may hold spaces.
func parseTaskTimes(line string) (ticks uint64, processor int, err error) {
	ticks, err = platform.ParseTaskTicks([]byte(line))
	if err != nil {
		return 0, 0, fmt.Errorf("stat: %w", err)
	}
	f := strings.Fields(line[strings.LastIndexByte(line, ')')+1:])
	// f[0] is field 3 (state): field 39 is f[36].
	if len(f) < 37 {
		return 0, 0, fmt.Errorf("stat: %d fields after comm, want at least 37", len(f))
	}
	if processor, err = strconv.Atoi(f[39-3]); err != nil {
		return 0, 0, fmt.Errorf("stat: bad processor field: %w", err)
	}
	return ticks, processor, nil
}

func parseCounters(s string) (counters, error) {
	c := counters{threads: map[int]threadSample{}}
	for _, line := range strings.Split(s, "\n") {
		switch {
		case strings.HasPrefix(line, "stat "):
			statLine, sched, _ := strings.Cut(line[len("stat "):], " schedstat ")
			ts, err := platform.ParseTaskStat([]byte(statLine))
			if err != nil {
				return c, fmt.Errorf("counters: %w", err)
			}
			ticks, cpu, err := parseTaskTimes(statLine)
			if err != nil {
				return c, fmt.Errorf("counters: %w", err)
			}
			smp := threadSample{pid: ts.PID, comm: ts.Comm, ticks: ticks, processor: cpu}
			if f := strings.Fields(sched); len(f) > 0 {
				smp.runNS, _ = strconv.ParseUint(f[0], 10, 64)
			}
			c.threads[ts.PID] = smp
		case strings.HasPrefix(line, "snapshot "):
			if err := json.Unmarshal([]byte(line[len("snapshot "):]), &c.snap); err != nil {
				return c, fmt.Errorf("counters: snapshot: %w", err)
			}
		}
	}
	if c.snap.Softnet == nil {
		return c, fmt.Errorf("counters: no snapshot")
	}
	return c, nil
}

// napiName splits "napi/eth0-8193" into the owner and the NAPI id.
var napiName = regexp.MustCompile(`^napi/(.+)-([0-9]+)$`)

// isTxThread reports a virtio-net TX NAPI thread: netif_napi_add_tx gives
// TX NAPIs no NAPI id (they are not hashed for busy polling), so their
// threads are all named napi/<dev>-0; RX NAPIs have ids from 8192 up.
func isTxThread(comm string) bool {
	m := napiName.FindStringSubmatch(comm)
	return m != nil && m[2] == "0"
}

func threadOwner(comm string) string {
	if m := napiName.FindStringSubmatch(comm); m != nil {
		return m[1]
	}
	return ""
}

// phaseResult is what one traffic phase measured.
type phaseResult struct {
	phase    phaseLine
	sent     int
	received int
	// rxq and txq: the queue indexes whose input/output IRQ counted the
	// most interrupts (-1: none fired).
	rxq, txq             int
	rxIRQ, txIRQ         int // IRQ numbers, 0 if none
	rxIRQCPU, txIRQCPU   int // the CPU column that counted them (-1 none)
	rxThread, txThread   threadSample
	rxDeltaNS, txDeltaNS uint64
	rxTicks, txTicks     uint64
	softnetCPU           int // CPU with the most `processed` packets
	softnetShare         float64
	softnetTotal         uint64
}

// measure compares the counters before and after phase ph.
func measure(ph phaseLine, busdev string, before, after counters, load string) (phaseResult, error) {
	r := phaseResult{phase: ph, rxq: -1, txq: -1, rxIRQCPU: -1, txIRQCPU: -1, softnetCPU: -1}
	if _, err := fmt.Sscanf(strings.TrimSpace(load), "sent %d received %d", &r.sent, &r.received); err != nil {
		return r, fmt.Errorf("load output %q: %w", load, err)
	}
	irqName := regexp.MustCompile(`^` + regexp.QuoteMeta(busdev) + `-(input|output)\.([0-9]+)$`)
	beforeIRQ := map[int]platform.IRQ{}
	for _, q := range before.snap.IRQs {
		beforeIRQ[q.Number] = q
	}
	var bestIn, bestOut uint64
	for _, q := range after.snap.IRQs {
		m := irqName.FindStringSubmatch(q.Name)
		if m == nil {
			continue
		}
		idx, _ := strconv.Atoi(m[2])
		var total, best uint64
		bestCPU := -1
		for cpu, n := range q.Counts {
			var was uint64
			if b, ok := beforeIRQ[q.Number]; ok && cpu < len(b.Counts) {
				was = b.Counts[cpu]
			}
			d := n - was
			total += d
			if d > best {
				best, bestCPU = d, cpu
			}
		}
		if m[1] == "input" && total > bestIn {
			bestIn, r.rxq, r.rxIRQ, r.rxIRQCPU = total, idx, q.Number, bestCPU
		}
		if m[1] == "output" && total > bestOut {
			bestOut, r.txq, r.txIRQ, r.txIRQCPU = total, idx, q.Number, bestCPU
		}
	}
	for pid, a := range after.threads {
		b, ok := before.threads[pid]
		if !ok || threadOwner(a.comm) != ph.dev {
			continue
		}
		d := a.runNS - b.runNS
		if isTxThread(a.comm) {
			if d > r.txDeltaNS || r.txThread.pid == 0 {
				r.txThread, r.txDeltaNS, r.txTicks = a, d, a.ticks-b.ticks
			}
		} else if d > r.rxDeltaNS || r.rxThread.pid == 0 {
			r.rxThread, r.rxDeltaNS, r.rxTicks = a, d, a.ticks-b.ticks
		}
	}
	was := map[int]uint64{}
	for _, s := range before.snap.Softnet {
		was[s.CPU] = s.Processed
	}
	var best uint64
	for _, s := range after.snap.Softnet {
		d := s.Processed - was[s.CPU]
		r.softnetTotal += d
		if d > best {
			best, r.softnetCPU = d, s.CPU
		}
	}
	if r.softnetTotal > 0 {
		r.softnetShare = float64(best) / float64(r.softnetTotal)
	}
	return r, nil
}

// sameList compares two cpu lists as sets.
func sameList(a, b string) bool {
	return cpuset.SameList(a, b)
}

// listHas reports whether cpu list l holds cpu.
func listHas(l string, cpu int) bool {
	s, err := cpuset.ParseList(l)
	return err == nil && s.Has(cpu)
}

// maskToList turns a kernel hex mask into a cpu list ("" stays "").
func maskToList(m string) string {
	if m == "" {
		return ""
	}
	s, err := cpuset.ParseMask(m)
	if err != nil {
		return "?" + m
	}
	if s.IsEmpty() {
		return "none"
	}
	return s.List()
}

// checker collects failures of one guest so the table is printed first.
type checker struct {
	errs []string
}

func (c *checker) errorf(format string, a ...any) {
	c.errs = append(c.errs, fmt.Sprintf(format, a...))
}

// getJSON decodes the JSON section name into v; a section that is missing,
// failed or does not decode is a failure, and false.
func (c *checker) getJSON(con *consoleOut, name string, v any) bool {
	s, err := con.get(name)
	if err != nil {
		c.errorf("%v", err)
		return false
	}
	if err := json.Unmarshal([]byte(s), v); err != nil {
		c.errorf("%s: %v", name, err)
		return false
	}
	return true
}

// checkGuest checks everything the guest printed and prints its table.
func checkGuest(t *testing.T, g *guest, con *consoleOut) {
	c := &checker{}
	defer func() {
		for _, e := range c.errs {
			t.Error(e)
		}
	}()
	for _, name := range []string{"snapshot", "status-before", "queues"} {
		if _, err := con.get(name); err != nil {
			c.errorf("%v", err)
		}
	}
	var pl plan.Plan
	c.getJSON(con, "plan", &pl)
	if g.wantPolicy != "" && pl.Policy != g.wantPolicy {
		c.errorf("plan chose policy %q, want %q", pl.Policy, g.wantPolicy)
	}
	var first, again steering.Result
	if c.getJSON(con, "apply", &first) && len(first.Failed) > 0 {
		c.errorf("apply: %d actions failed: %+v", len(first.Failed), first.Failed)
	}
	if c.getJSON(con, "apply-again", &again) && (len(again.Changed) != 0 || len(again.Failed) != 0) {
		c.errorf("second apply changed %d and failed %d actions, want none: %+v", len(again.Changed), len(again.Failed), again.Changed)
	}
	var st steering.Status
	if c.getJSON(con, "call-status", &st) {
		if st.Policy != pl.Policy {
			c.errorf("daemon status: policy %q, plan said %q", st.Policy, pl.Policy)
		}
		if !st.InSync {
			c.errorf("daemon status: not in sync after apply")
		}
		if st.Platform.CPUs != g.cpus {
			c.errorf("daemon status: %d CPUs, the guest has %d", st.Platform.CPUs, g.cpus)
		}
	}
	if g.pppoe {
		checkPPPoE(c, con)
	}
	var viaDaemon steering.Result
	if c.getJSON(con, "call-apply", &viaDaemon) && (len(viaDaemon.Changed) != 0 || len(viaDaemon.Failed) != 0) {
		c.errorf("apply through the daemon changed %d and failed %d actions, want none", len(viaDaemon.Changed), len(viaDaemon.Failed))
	}
	checkMemory(t, c, g, con)
	var q, qcli queuesOut
	c.getJSON(con, "call-queues", &q)
	c.getJSON(con, "queues-json", &qcli)
	stateText, err := con.get("state")
	if err != nil {
		c.errorf("%v", err)
	}
	k := parseState(stateText)
	checkKernel(c, pl, k)

	mq := con.info["mq"]
	t.Logf("%s: %s", g.name, checkNetlink(c, g, con, mq))
	if mq != "" {
		t.Logf("%s: %s", g.name, checkNAPIKnobs(c, g, con, mq)) // napi_check_test.go
	}
	if g.queues == 0 {
		t.Logf("\n%s: %d CPU; plan: policy %s, %d actions; apply: changed %d, failed %d; second apply: changed %d; "+
			"daemon on the bus: status policy %s, in sync %v, get_queues %d devices, apply changed %d",
			g.name, g.cpus, pl.Policy, len(pl.Actions), len(first.Changed), len(first.Failed), len(again.Changed),
			st.Policy, st.InSync, len(q.Devices), len(viaDaemon.Changed))
		return
	}
	sq := con.info["sq"]
	if mq == "" || sq == "" {
		c.errorf("the guest did not find both NICs (mq %q, sq %q)", mq, sq)
		return
	}
	var results []phaseResult
	var qstats []string
	for _, ph := range con.phases {
		load, err1 := con.get(ph.name + "-load")
		b, err2 := con.get(ph.name + "-before")
		a, err3 := con.get(ph.name + "-after")
		if err1 != nil || err2 != nil || err3 != nil {
			c.errorf("phase %s: %v %v %v", ph.name, err1, err2, err3)
			continue
		}
		before, err1 := parseCounters(b)
		after, err2 := parseCounters(a)
		if err1 != nil || err2 != nil {
			c.errorf("phase %s: %v %v", ph.name, err1, err2)
			continue
		}
		if line := checkPhaseQstats(c, g, ph, before, after); line != "" {
			qstats = append(qstats, line)
		}
		r, err := measure(ph, k.busdev[ph.dev], before, after, load)
		if err != nil {
			c.errorf("phase %s: %v", ph.name, err)
			continue
		}
		results = append(results, r)
	}
	t.Logf("%s per-queue rx counts of each phase (* the loaded queue):\n  %s", g.name, strings.Join(qstats, "\n  "))
	rows := checkTraffic(c, g, q, k, results, mq)
	t.Logf("\n%s", formatTable(g, pl, first, mq, sq, rows))
	if g.adaptive {
		sum := checkAdaptive(c, con, mq)
		t.Logf("\n%s adaptive (functional; emulated CPUs):\n  steady, flood into every rx queue: %s; nothing moved\n  hog on rx-1's CPU: %s\n  hog and flood gone: %s",
			g.name, sum.steady, sum.away, sum.back)
	}
}

// checkKernel compares every action of the plan with what the kernel
// reports after the apply.
func checkKernel(c *checker, pl plan.Plan, k kernelState) {
	for _, a := range pl.Actions {
		key := a.Device + " " + a.Queue
		switch a.Kind {
		case plan.KindNAPIAffinity:
			if got, ok := k.threads[a.PID]; !ok {
				c.errorf("kernel: NAPI thread %d (%s) not found after apply", a.PID, a.Thread)
			} else if !sameList(got, a.Value) {
				c.errorf("kernel: %s [%d] Cpus_allowed_list %s, plan %s", a.Thread, a.PID, got, a.Value)
			}
		case plan.KindIRQAffinity:
			if got, ok := k.irqList[a.IRQ]; !ok {
				c.errorf("kernel: IRQ %d (%s) has no smp_affinity_list", a.IRQ, a.Name)
			} else if !sameList(got, maskToList(a.Value)) {
				c.errorf("kernel: IRQ %d (%s) smp_affinity_list %s, plan %s (mask %s)", a.IRQ, a.Name, got, maskToList(a.Value), a.Value)
			}
		case plan.KindRPSCPUs:
			if got := k.rps[key]; !cpuset.SameMask(got, a.Value) {
				c.errorf("kernel: %s rps_cpus %q, plan %s", key, got, a.Value)
			}
		case plan.KindXPSCPUs:
			if got := k.xps[key]; !cpuset.SameMask(got, a.Value) {
				c.errorf("kernel: %s xps_cpus %q, plan %s", key, got, a.Value)
			}
		case plan.KindRPSFlowCnt:
			if got := k.flows[key]; got != a.Value {
				c.errorf("kernel: %s rps_flow_cnt %q, plan %s", key, got, a.Value)
			}
		}
	}
}

// queueRow is one queue pair in a guest's tables: planned/kernel values
// after apply, and what the traffic phase measured.
type queueRow struct {
	queue                                                  string
	napi, irq, rps, xps, txNAPI, txIRQ                     string
	sentFrom, arrived, rxRan, softnet, txRan, txIRQRan, ok string
}

// pk is "planned/kernel" of one knob.
func pk(plan, kernel string) string {
	if plan == "" {
		plan = "-"
	}
	if kernel == "" {
		kernel = "-"
	}
	return plan + "/" + kernel
}

// checkTraffic checks, for each phase, that the queue's work ran where
// the plan (as `queues`/get_queues pair it) says, and builds the rows.
func checkTraffic(c *checker, g *guest, q queuesOut, k kernelState, results []phaseResult, mq string) []queueRow {
	byPhase := map[string]phaseResult{}
	loaded := map[int]bool{}
	for _, r := range results {
		byPhase[r.phase.dev+" "+r.phase.txq] = r
		if r.phase.dev == mq && r.rxq >= 0 {
			loaded[r.rxq] = true
		}
	}
	var rows []queueRow
	for _, d := range q.Devices {
		if !strings.HasPrefix(d.Name, "eth") {
			continue
		}
		if d.Name == mq && len(d.Rx) != g.queues {
			c.errorf("%s: %d rx queues, want %d", d.Name, len(d.Rx), g.queues)
		}
		for i, rx := range d.Rx {
			txq := "tx-" + strings.TrimPrefix(rx.Queue, "rx-")
			row := queueRow{queue: d.Name + " " + rx.Queue + "/" + txq,
				rps: pk(maskToList(rx.WantRPSCPUs), maskToList(k.rps[d.Name+" "+rx.Queue])), napi: "-", irq: "-", txNAPI: "-", txIRQ: "-"}
			if rx.NAPI != nil {
				row.napi = fmt.Sprintf("%s [%d] %s", rx.NAPI.Thread, rx.NAPI.PID, pk(rx.NAPI.want(), k.threads[rx.NAPI.PID]))
			}
			if rx.IRQ != nil {
				row.irq = fmt.Sprintf("%d %s", rx.IRQ.IRQ, pk(rx.IRQ.want(), k.irqList[rx.IRQ.IRQ]))
			}
			var tx *txView
			if i < len(d.Tx) && d.Tx[i].Queue == txq {
				tx = &d.Tx[i]
				row.xps = pk(maskToList(tx.WantXPSCPUs), maskToList(k.xps[d.Name+" "+txq]))
				if tx.NAPI != nil {
					row.txNAPI = fmt.Sprintf("%s [%d] %s", tx.NAPI.Thread, tx.NAPI.PID, pk(tx.NAPI.want(), k.threads[tx.NAPI.PID]))
				}
				if tx.IRQ != nil {
					row.txIRQ = fmt.Sprintf("%d %s", tx.IRQ.IRQ, pk(tx.IRQ.want(), k.irqList[tx.IRQ.IRQ]))
				}
			}
			r, ok := byPhase[d.Name+" "+txq]
			if !ok {
				c.errorf("%s %s: no traffic phase", d.Name, txq)
				row.ok = "no traffic"
				rows = append(rows, row)
				continue
			}
			fails := checkPhase(c, d.Name, rx.Queue, txq, rx.NAPI, rx.IRQ, rx.WantRPSCPUs, tx, r, &row)
			row.ok = "ok"
			if fails > 0 {
				row.ok = fmt.Sprintf("%d FAILED", fails)
			}
			rows = append(rows, row)
		}
	}
	for i := 0; i < g.queues; i++ {
		if !loaded[i] {
			c.errorf("%s rx-%d: no phase sent traffic into it (the input IRQ never fired)", mq, i)
		}
	}
	return rows
}

// checkPhase checks one phase against the plan and fills the row's
// measured columns; it returns the number of failed checks.
func checkPhase(c *checker, dev, rxq, txq string, napi *napiView, irq *irqView, wantRPS string, tx *txView, r phaseResult, row *queueRow) int {
	fails := 0
	fail := func(format string, a ...any) {
		fails++
		c.errorf("%s %s/%s: "+format, append([]any{dev, rxq, txq}, a...)...)
	}
	// Replies lost on a loaded host do not matter to where the work ran;
	// most of them must come back for the counters to mean anything.
	if r.received < r.sent/2 {
		fail("only %d of %d echo datagrams came back", r.received, r.sent)
	}
	idx, _ := strconv.Atoi(strings.TrimPrefix(rxq, "rx-"))
	if r.rxq != idx {
		fail("traffic sent from CPU %d (XPS %s) arrived on rx-%d, not %s", r.phase.cpu, txq, r.rxq, rxq)
	}
	row.sentFrom = fmt.Sprintf("%d (%d/%d echoed)", r.phase.cpu, r.received, r.sent)
	row.arrived = "-"
	if r.rxq >= 0 {
		row.arrived = fmt.Sprintf("rx-%d (IRQ %d on CPU %d)", r.rxq, r.rxIRQ, r.rxIRQCPU)
	}
	row.rxRan = fmt.Sprintf("%s [%d] CPU %d, %.0f ms (%d ticks)", r.rxThread.comm, r.rxThread.pid, r.rxThread.processor, float64(r.rxDeltaNS)/1e6, r.rxTicks)
	row.txRan = fmt.Sprintf("%s [%d] CPU %d, %.0f ms (%d ticks)", r.txThread.comm, r.txThread.pid, r.txThread.processor, float64(r.txDeltaNS)/1e6, r.txTicks)
	row.softnet = fmt.Sprintf("CPU %d: %.0f%% of %d", r.softnetCPU, 100*r.softnetShare, r.softnetTotal)
	row.txIRQRan = "-"
	if r.txIRQ != 0 {
		row.txIRQRan = fmt.Sprintf("%d on CPU %d", r.txIRQ, r.txIRQCPU)
	}
	// RX: the thread that did the work is the one paired with the queue,
	// it ran on the planned CPU, and so did the packets (softnet).
	switch {
	case r.rxDeltaNS == 0:
		fail("no RX NAPI thread of %s got CPU time", dev)
	case napi == nil:
		fail("queues pairs no NAPI thread with %s", rxq)
	case r.rxThread.pid != napi.PID:
		fail("the RX work ran in %s [%d], but queues pairs %s with %s [%d]", r.rxThread.comm, r.rxThread.pid, rxq, napi.Thread, napi.PID)
	case !listHas(napi.want(), r.rxThread.processor):
		fail("%s ran on CPU %d, plan %s", napi.Thread, r.rxThread.processor, napi.want())
	}
	where := ""
	if napi != nil {
		where = napi.want()
	}
	if rps := maskToList(wantRPS); rps != "" && rps != "none" {
		where = rps // RPS moves the protocol work to these CPUs
	}
	if r.softnetCPU < 0 || !listHas(where, r.softnetCPU) || r.softnetShare < 0.8 {
		fail("softnet: %d packets processed, %.0f%% on CPU %d; plan %s", r.softnetTotal, 100*r.softnetShare, r.softnetCPU, where)
	}
	if irq != nil && r.rxIRQ == irq.IRQ && r.rxIRQCPU >= 0 && !listHas(irq.want(), r.rxIRQCPU) {
		fail("IRQ %d fired on CPU %d, plan %s", irq.IRQ, r.rxIRQCPU, irq.want())
	}
	// TX completion: the TX NAPI thread that did the work is the one paired
	// with the tx queue and ran on its planned CPU.
	switch {
	case r.txDeltaNS == 0:
		fail("no TX NAPI thread of %s got CPU time", dev)
	case tx == nil:
		fail("no %s", txq)
	case tx.NAPI == nil:
		fail("TX completion ran in %s [%d] on CPU %d, but queues pairs no NAPI thread with %s, so the plan does not place it", r.txThread.comm, r.txThread.pid, r.txThread.processor, txq)
	case r.txThread.pid != tx.NAPI.PID:
		fail("TX completion ran in %s [%d], but queues pairs %s with %s [%d]", r.txThread.comm, r.txThread.pid, txq, tx.NAPI.Thread, tx.NAPI.PID)
	case !listHas(tx.NAPI.want(), r.txThread.processor):
		fail("%s ran on CPU %d, plan %s", tx.NAPI.Thread, r.txThread.processor, tx.NAPI.want())
	}
	if tx != nil && tx.IRQ != nil && r.txIRQ == tx.IRQ.IRQ && r.txIRQCPU >= 0 && !listHas(tx.IRQ.want(), r.txIRQCPU) {
		fail("TX IRQ %d fired on CPU %d, plan %s", tx.IRQ.IRQ, r.txIRQCPU, tx.IRQ.want())
	}
	return fails
}

// formatTable prints a guest's two tables: what was planned and what the
// kernel reports after apply, then where each queue pair's work ran under
// traffic.
func formatTable(g *guest, pl plan.Plan, first steering.Result, mq, sq string, rows []queueRow) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d vCPUs, %s virtio-net %d queue pairs (MSI-X) + %s 1 queue, threaded NAPI; policy %s; apply changed %d, a second apply 0\n\n",
		g.name, g.cpus, mq, g.queues, sq, pl.Policy, len(first.Changed))
	applied := [][]string{{"QUEUES", "RX NAPI THREAD CPUS plan/kernel", "RX IRQ", "RPS", "XPS", "TX NAPI THREAD", "TX IRQ"}}
	traffic := [][]string{{"QUEUES", "SENT FROM CPU", "ARRIVED ON", "RX WORK RAN IN", "SOFTNET PROCESSED", "TX COMPLETION RAN IN", "TX IRQ", "RESULT"}}
	for _, r := range rows {
		applied = append(applied, []string{r.queue, r.napi, r.irq, r.rps, r.xps, r.txNAPI, r.txIRQ})
		traffic = append(traffic, []string{r.queue, r.sentFrom, r.arrived, r.rxRan, r.softnet, r.txRan, r.txIRQRan, r.ok})
	}
	writeCells(&b, applied)
	b.WriteString("\n")
	writeCells(&b, traffic)
	return strings.TrimRight(b.String(), "\n")
}

// writeCells writes rows as a table with aligned columns.
func writeCells(b *strings.Builder, cells [][]string) {
	width := map[int]int{}
	for _, row := range cells {
		for i, s := range row {
			width[i] = max(width[i], len(s))
		}
	}
	for _, row := range cells {
		line := ""
		for i, s := range row {
			if i > 0 {
				line += " | "
			}
			line += fmt.Sprintf("%-*s", width[i], s)
		}
		b.WriteString(strings.TrimRight(line, " ") + "\n")
	}
}

// rssBudgetKB is the router build's resident memory after 1,000 calls on
// mipsel_24kc (issue 20: at most 6 MiB), checked on the guest of that
// architecture once the daemon's idle trim has run.
const rssBudgetKB = 6 << 10

// daemonMemory is `vmguest calls`'s report (vmguest/calls.go).
type daemonMemory struct {
	Calls   int            `json:"calls"`
	Seconds float64        `json:"seconds"`
	Before  procmem.Status `json:"before"`
	After   procmem.Status `json:"after"`
	Idle    procmem.Status `json:"idle"`
}

// checkMemory logs the daemon's memory around the 1,000 calls of a guest
// that measures it (the 32-bit MIPS one, the budget's architecture) and
// holds it to rssBudgetKB. The binary is in the initramfs, so its pages
// count as shared memory rather than file pages; VmRSS counts both.
func checkMemory(t *testing.T, c *checker, g *guest, con *consoleOut) {
	if !g.memory {
		return
	}
	var m daemonMemory
	if !c.getJSON(con, "daemon-memory", &m) {
		return
	}
	if m.Calls != 1000 || m.Before.RSS == 0 || m.Idle.RSS == 0 {
		c.errorf("daemon-memory: %d calls, RSS %d kB before and %d kB idle", m.Calls, m.Before.RSS, m.Idle.RSS)
		return
	}
	t.Logf("%s: daemon RSS %d kB (anon %d, file %d, shmem %d) before, %d kB after %d calls in %.1f s, %d kB (anon %d, file %d, shmem %d) 3 s later",
		g.name, m.Before.RSS, m.Before.Anon, m.Before.File, m.Before.Shmem, m.After.RSS, m.Calls, m.Seconds, m.Idle.RSS, m.Idle.Anon, m.Idle.File, m.Idle.Shmem)
	if m.Idle.RSS > rssBudgetKB {
		c.errorf("daemon RSS %d kB 3 s after %d calls, over the budget of %d kB", m.Idle.RSS, m.Calls, rssBudgetKB)
	}
}
