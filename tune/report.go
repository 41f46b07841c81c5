package tune

import (
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/packet-steering/packet-steering/internal/outline"
	"github.com/packet-steering/packet-steering/internal/table"
	"github.com/packet-steering/packet-steering/plan"
)

// report is the outcome of a sweep; it is what --json prints.
type report struct {
	Load string `json:"load"`
	Runs int    `json:"runs"`
	// Interleaved: the runs were made in rounds, every candidate once per
	// round (--interleave).
	Interleaved bool   `json:"interleaved,omitempty"`
	Settle      string `json:"settle"`
	// Metric is what the recommendation ranks by.
	Metric metric `json:"metric"`
	// Devices are the configuration columns (see Prepared.Devices).
	Devices []string `json:"devices"`
	Results []result `json:"results"`
	// Recommendation is the best candidate, ties included.
	Recommendation recommendation `json:"recommendation"`
	// Restore says how the original state was put back.
	Restore restoreResult `json:"restore"`
	// Complete is false when the sweep stopped early (error, Ctrl-C).
	Complete bool    `json:"complete"`
	Seconds  float64 `json:"seconds"`
	// Notes say what the counters are and are not.
	Notes []string `json:"notes"`
}

// result is one candidate's runs and their summaries.
type result struct {
	Candidate candidate `json:"candidate"`
	// Masks are the RPS masks per device column (see Prepared.Masks).
	Masks []string `json:"masks"`
	// SameAs names an earlier candidate with the identical plan.
	SameAs string `json:"same_plan_as,omitempty"`
	// Error says why the candidate was not measured.
	Error string `json:"error,omitempty"`
	Runs  []run  `json:"runs"`

	Throughput  summary  `json:"throughput"`
	Unit        string   `json:"unit"`
	Interrupts  *summary `json:"interrupts,omitempty"`
	LossPercent *summary `json:"loss_percent,omitempty"`
	Retransmits *summary `json:"retransmits,omitempty"`
	// Dropped, TimeSqueeze and RPSReceived are summed over all CPUs per
	// run, then summarised over runs.
	Dropped     summary      `json:"dropped"`
	TimeSqueeze summary      `json:"time_squeeze"`
	RPSReceived summary      `json:"rps_received"`
	CPUs        []cpuSummary `json:"cpus"`
	// RxQueues are the per-rx-queue counts of multi-queue devices over
	// the runs, each with its measure (queues.go).
	RxQueues []queueSummary `json:"rx_queues,omitempty"`
}

// run is one run of the load with the counter deltas it caused.
type run struct {
	measurement
	Seconds float64    `json:"seconds"`
	CPUs    []CPUDelta `json:"cpus"`
}

// cpuSummary is one CPU's counter deltas over the runs.
type cpuSummary struct {
	_           outline.NoCompare
	CPU         int     `json:"cpu"`
	Processed   summary `json:"processed"`
	Dropped     summary `json:"dropped"`
	TimeSqueeze summary `json:"time_squeeze"`
	RPSReceived summary `json:"rps_received"`
	NetRX       summary `json:"net_rx"`
	SoftirqMS   summary `json:"softirq_ms"`
}

// recommendation is the answer of the sweep.
type recommendation struct {
	// Candidate is the recommended candidate's name; "" when nothing was
	// measured on the metric.
	Candidate string `json:"candidate"`
	// Best is the candidate with the best median. It differs from
	// Candidate only when auto (the default) is tied with it: a difference
	// inside the run-to-run spread is no reason to leave the default.
	Best string `json:"best"`
	// Tied lists candidates whose min-max range overlaps Best's.
	Tied []string `json:"tied,omitempty"`
	// Clear is true when the recommendation is a decision: Best won
	// outside every other range, or auto was kept in a tie. --save saves
	// only a clear recommendation.
	Clear bool `json:"clear"`
	// VsAutoPercent is how much better Candidate's median is than auto's,
	// in percent of auto's (positive is better); absent without auto.
	VsAutoPercent *float64 `json:"vs_auto_percent,omitempty"`
	// Text says it in a sentence.
	Text string `json:"text"`
}

// metricNotes says what the counters are, so the output is honest about it.
func metricNotes() []string {
	return []string{
		"median (min-max) over the runs of each candidate",
		"tie: two candidates whose min-max ranges overlap; a tie is not a win",
		"drops, squeezed, rps ipi: /proc/net/softnet_stat deltas summed over CPUs (dropped, time_squeeze, received_rps)",
		"net_rx/cpu: NET_RX softirq runs per CPU from /proc/softirqs, a count: the kernel has no per-CPU NET_RX time without tracing",
		"softirq ms/cpu: time in ALL softirq kinds per CPU from /proc/stat, 10 ms resolution",
		"counters are machine-wide: traffic besides the load is counted too",
		"irqs: hardware interrupts per run, all numbered rows of /proc/interrupts: what defer-hard-irqs and gro-flush-timeout (DEV:napi=D,T) save, against the latency they add",
	}
}

// rxQueuesNote says what the rx queues column is, when it is there.
const rxQueuesNote = "rx queues: each rx queue's share of its device's median count per run: qstats rx packets from netlink (Linux 6.9+, drivers that keep them), else its own IRQ's interrupts (irq)"

// finish computes the summaries and the recommendation.
func (r *report) finish() {
	for i := range r.Results {
		r.Results[i].summarize()
	}
	r.recommend()
	if r.hasRxQueues() {
		r.Notes = append(r.Notes, rxQueuesNote)
	}
	if r.Runs < 3 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d run(s) per candidate: a min-max spread of so few runs says little; use --runs 3 or more to decide", r.Runs))
	}
	for _, res := range r.Results {
		if res.SameAs != "" {
			r.Notes = append(r.Notes, "(=X): the candidate's plan writes exactly what X's does; their difference is run-to-run noise")
			break
		}
	}
}

// hasRxQueues reports whether some candidate has per-rx-queue counts.
func (r *report) hasRxQueues() bool {
	for _, res := range r.Results {
		if len(res.RxQueues) > 0 {
			return true
		}
	}
	return false
}

func (res *result) summarize() {
	n := len(res.Runs)
	tp := make([]float64, n)
	var loss, retr []float64
	drop, squeeze, rps := make([]float64, n), make([]float64, n), make([]float64, n)
	type perCPU struct{ processed, dropped, squeeze, rps, netrx, softirq []float64 }
	cpus := map[int]*perCPU{}
	var order []int
	for i, run := range res.Runs {
		tp[i] = run.Throughput
		if res.Unit == "" {
			res.Unit = run.Unit
		}
		if run.LossPercent != nil {
			loss = append(loss, *run.LossPercent)
		}
		if run.Retransmits != nil {
			retr = append(retr, *run.Retransmits)
		}
		for _, c := range run.CPUs {
			drop[i] += float64(c.Dropped)
			squeeze[i] += float64(c.TimeSqueeze)
			rps[i] += float64(c.RPSReceived)
			p := cpus[c.CPU]
			if p == nil {
				p = &perCPU{}
				cpus[c.CPU] = p
				order = append(order, c.CPU)
			}
			p.processed = append(p.processed, float64(c.Processed))
			p.dropped = append(p.dropped, float64(c.Dropped))
			p.squeeze = append(p.squeeze, float64(c.TimeSqueeze))
			p.rps = append(p.rps, float64(c.RPSReceived))
			p.netrx = append(p.netrx, float64(c.NetRX))
			p.softirq = append(p.softirq, c.SoftirqMS)
		}
	}
	res.Throughput = summarize(tp)
	res.Interrupts = summarizeInterrupts(res.Runs)
	res.LossPercent, res.Retransmits = nil, nil
	if len(loss) > 0 {
		s := summarize(loss)
		res.LossPercent = &s
	}
	if len(retr) > 0 {
		s := summarize(retr)
		res.Retransmits = &s
	}
	res.Dropped, res.TimeSqueeze, res.RPSReceived = summarize(drop), summarize(squeeze), summarize(rps)
	res.RxQueues = summarizeQueues(res.Runs)
	res.CPUs = nil
	for _, cpu := range order {
		p := cpus[cpu]
		res.CPUs = append(res.CPUs, cpuSummary{
			CPU: cpu, Processed: summarize(p.processed), Dropped: summarize(p.dropped),
			TimeSqueeze: summarize(p.squeeze), RPSReceived: summarize(p.rps),
			NetRX: summarize(p.netrx), SoftirqMS: summarize(p.softirq),
		})
	}
}

// metricSummary returns the summary the report ranks by.
func (r *report) metricSummary(res *result) summary {
	switch r.Metric {
	case metricLoss:
		if res.LossPercent != nil {
			return *res.LossPercent
		}
	case metricRetransmits:
		if res.Retransmits != nil {
			return *res.Retransmits
		}
	default:
		return res.Throughput
	}
	return summary{}
}

func (r *report) recommend() {
	sums := make([]summary, len(r.Results))
	auto := -1
	for i := range r.Results {
		sums[i] = r.metricSummary(&r.Results[i])
		if r.Results[i].Candidate.Mode == plan.ModeAuto {
			auto = i
		}
	}
	dir := r.Metric.Direction()
	rank := rank(sums, dir)
	rec := recommendation{}
	if rank.Best < 0 {
		rec.Text = fmt.Sprintf("no candidate was measured on %s; nothing to recommend", r.Metric)
		r.Recommendation = rec
		return
	}
	best := rank.Best
	rec.Best = r.Results[best].Candidate.Name
	chosen := best
	for _, t := range rank.Tied {
		rec.Tied = append(rec.Tied, r.Results[t].Candidate.Name)
		if t == auto {
			chosen = auto
		}
	}
	rec.Candidate = r.Results[chosen].Candidate.Name
	rec.Clear = len(rec.Tied) == 0 || chosen == auto
	unit := r.Results[chosen].Unit
	fmtv := func(v float64) string { return r.formatMetric(v, unit) }
	var b strings.Builder
	switch {
	case chosen != best:
		fmt.Fprintf(&b, "%s has the best median %s (%s), but auto's range overlaps it: the difference is inside the run-to-run spread, so keep auto",
			rec.Best, r.Metric, fmtv(sums[best].Median))
	case len(rec.Tied) > 0:
		fmt.Fprintf(&b, "%s has the best median %s (%s), tied within the run-to-run spread with %s: no clear winner among them",
			rec.Best, r.Metric, fmtv(sums[best].Median), strings.Join(rec.Tied, ", "))
	default:
		fmt.Fprintf(&b, "%s is best on %s (%s median), outside every other candidate's run-to-run range",
			rec.Best, r.Metric, fmtv(sums[best].Median))
	}
	if auto >= 0 && chosen != auto && sums[auto].N > 0 && sums[auto].Median != 0 {
		pct := 100 * (sums[chosen].Median - sums[auto].Median) / math.Abs(sums[auto].Median)
		if dir == lowerIsBetter {
			pct = -pct
		}
		rec.VsAutoPercent = &pct
		fmt.Fprintf(&b, "; %+.1f%% against auto (%s)", pct, fmtv(sums[auto].Median))
	}
	rec.Text = b.String()
	r.Recommendation = rec
}

// formatMetric renders a value of the report's metric.
func (r *report) formatMetric(v float64, unit string) string {
	switch r.Metric {
	case metricLoss:
		return fmtNum(v) + "% loss"
	case metricRetransmits:
		return fmtNum(v) + " retransmits"
	}
	if unit == unitBPS {
		return fmtNum(v/1e6) + " Mbit/s"
	}
	return fmtNum(v)
}

// fmtNum prints a number compactly: integers without decimals, small
// values with up to three significant digits.
func fmtNum(v float64) string {
	switch a := math.Abs(v); {
	case a >= 100 || v == math.Trunc(v):
		return outline.FormatFloat(math.Round(v), 'f', -1, 64)
	case a >= 10:
		return outline.FormatFloat(v, 'f', 1, 64)
	case a >= 1:
		return outline.FormatFloat(v, 'f', 2, 64)
	default:
		return outline.FormatFloat(v, 'g', 2, 64)
	}
}

// fmtRange renders a summary as "median (min-max)"; "-" when unmeasured.
func fmtRange(s summary, scale float64) string {
	if s.N == 0 {
		return "-"
	}
	m, lo, hi := fmtNum(s.Median/scale), fmtNum(s.Min/scale), fmtNum(s.Max/scale)
	if lo == hi {
		return m
	}
	return fmt.Sprintf("%s (%s-%s)", m, lo, hi)
}

// WriteTable prints the report as a table like the bcm53xx commit's (docs/platforms.md): the
// configuration columns (the candidate, then the RPS mask its plan gives
// each device), then each
// metric as median (min-max). The recommended row is marked "*", rows tied
// with the best "~"; then the recommendation, the restore and the notes.
func (r *report) WriteTable(w io.Writer) error {
	tw := table.New(w, table.AlignRight|table.Bars)
	unit := ""
	var hasLoss, hasRetr, hasIRQs bool
	for _, res := range r.Results {
		if unit == "" {
			unit = res.Unit
		}
		hasIRQs = hasIRQs || res.Interrupts != nil
		hasLoss = hasLoss || res.LossPercent != nil
		hasRetr = hasRetr || res.Retransmits != nil
	}
	hasQueues := r.hasRxQueues()
	tpHead, tpScale := "throughput", 1.0
	if unit == unitBPS {
		tpHead, tpScale = "Mbit/s", 1e6
	}
	head := []string{"", "candidate"}
	for _, d := range r.Devices {
		head = append(head, d+" rps")
	}
	head = append(head, tpHead)
	if hasLoss {
		head = append(head, "loss %")
	}
	if hasRetr {
		head = append(head, "retransmits")
	}
	if hasIRQs {
		head = append(head, "irqs")
	}
	head = append(head, "drops", "squeezed", "rps ipi", "net_rx/cpu", "softirq ms/cpu")
	if hasQueues {
		head = append(head, "rx queues")
	}
	tied := map[string]bool{}
	for _, t := range r.Recommendation.Tied {
		tied[t] = true
	}
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	for _, res := range r.Results {
		mark := ""
		switch {
		case res.Candidate.Name == r.Recommendation.Candidate:
			mark = "*"
		case res.Candidate.Name == r.Recommendation.Best || tied[res.Candidate.Name]:
			mark = "~"
		}
		name := res.Candidate.Name
		if res.SameAs != "" {
			name += " (=" + res.SameAs + ")"
		}
		row := []string{mark, name}
		for i := range r.Devices {
			m := "-"
			if i < len(res.Masks) && res.Masks[i] != "" {
				m = res.Masks[i]
			}
			row = append(row, m)
		}
		if res.Error != "" || len(res.Runs) == 0 {
			why := res.Error
			if why == "" {
				why = "not measured"
			}
			row = append(row, why)
			fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
			continue
		}
		row = append(row, fmtRange(res.Throughput, tpScale))
		if hasLoss {
			row = append(row, fmtOpt(res.LossPercent))
		}
		if hasRetr {
			row = append(row, fmtOpt(res.Retransmits))
		}
		if hasIRQs {
			row = append(row, fmtOpt(res.Interrupts))
		}
		row = append(row, fmtRange(res.Dropped, 1), fmtRange(res.TimeSqueeze, 1), fmtRange(res.RPSReceived, 1))
		var netrx, soft []string
		for _, c := range res.CPUs {
			netrx = append(netrx, fmtNum(c.NetRX.Median))
			soft = append(soft, fmtNum(c.SoftirqMS.Median))
		}
		row = append(row, strings.Join(netrx, "/"), strings.Join(soft, "/"))
		if hasQueues {
			row = append(row, queueShares(res.RxQueues))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	if err := tw.Flush(); err != nil {
		return outline.Errorf("write table: %w", err)
	}
	fmt.Fprintf(w, "\nload: %s; %d runs per candidate, settle %s", r.Load, r.Runs, r.Settle)
	if r.Interleaved {
		fmt.Fprintf(w, "; interleaved: %d rounds, every candidate applied and run once per round", r.Runs)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "recommendation: %s\n", r.Recommendation.Text)
	if !r.Complete {
		fmt.Fprintln(w, "the sweep did not complete: the table holds what was measured before it stopped")
	}
	switch {
	case r.Restore.Error != "":
		fmt.Fprintf(w, "restore: FAILED: %s\n", r.Restore.Error)
	case r.Restore.Verified:
		fmt.Fprintf(w, "restore: %d knobs back at their original values (%d rewritten), checked by a fresh read\n", r.Restore.Knobs, r.Restore.Changed)
	default:
		fmt.Fprintf(w, "restore: %d knobs written back (%d rewritten), not checked\n", r.Restore.Knobs, r.Restore.Changed)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	return nil
}

//go:noinline
func fmtOpt(s *summary) string {
	if s == nil {
		return "-"
	}
	return fmtRange(*s, 1)
}
