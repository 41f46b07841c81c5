package tune

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/packet-steering/packet-steering/plan"
)

// fakeSteerer stands in for the steering engine: its "machine" is the name
// of the candidate applied last, "original" before and after.
type fakeSteerer struct {
	live       string
	applied    []string
	failApply  map[string]error
	restores   int
	restoreCtx error // ctx.Err() seen by Restore
	restoreErr error
}

func (f *fakeSteerer) Prepare(ctx context.Context, cands []candidate) (*prepared, error) {
	p := &prepared{Devices: []string{"eth0"}, Knobs: 2}
	for _, c := range cands {
		m := "-"
		for _, r := range c.RPS {
			m = r.Mask
		}
		p.Masks = append(p.Masks, []string{m})
	}
	return p, nil
}

func (f *fakeSteerer) Apply(ctx context.Context, c candidate) error {
	if err := f.failApply[c.Name]; err != nil {
		return err
	}
	f.live = c.Name
	f.applied = append(f.applied, c.Name)
	return nil
}

func (f *fakeSteerer) Restore(ctx context.Context) (restoreResult, error) {
	f.restores++
	f.restoreCtx = ctx.Err()
	if f.restoreErr != nil {
		return restoreResult{Knobs: 2}, f.restoreErr
	}
	f.live = "original"
	return restoreResult{Knobs: 2, Changed: 1, Verified: true}, nil
}

// fakeLoad returns a throughput per live candidate, spread by run number;
// hook runs before each run.
type fakeLoad struct {
	st   *fakeSteerer
	bps  map[string][]float64
	hook func(cand string, run int) error
	runs int
}

func (l *fakeLoad) Run(ctx context.Context, run int) (measurement, error) {
	l.runs++
	if l.hook != nil {
		if err := l.hook(l.st.live, run); err != nil {
			return measurement{}, err
		}
	}
	if err := ctx.Err(); err != nil {
		return measurement{}, err
	}
	v := l.bps[l.st.live]
	loss := float64(run)
	return measurement{Throughput: v[run%len(v)], Unit: unitBPS, LossPercent: &loss}, nil
}
func (l *fakeLoad) Estimate() time.Duration { return time.Second }
func (l *fakeLoad) String() string          { return "fake" }

func fakeCounters() func() ([]CPUCounters, error) {
	n := uint64(0)
	return func() ([]CPUCounters, error) {
		n += 10
		return []CPUCounters{{CPU: 0, Processed: n, NetRX: n, SoftirqTicks: n / 10}, {CPU: 1, Processed: 2 * n, Dropped: n / 10}}, nil
	}
}

func newFakeSweep(t *testing.T, cands string) (*sweep, *fakeSteerer, *fakeLoad, *bytes.Buffer) {
	t.Helper()
	cs, err := parseCandidates(cands)
	if err != nil {
		t.Fatal(err)
	}
	st := &fakeSteerer{live: "original"}
	load := &fakeLoad{st: st, bps: map[string][]float64{
		"off": {300e6, 310e6}, "auto": {380e6, 400e6}, "eth0:2": {570e6, 580e6}, "eth0:1": {390e6, 575e6},
	}}
	progress := &bytes.Buffer{}
	s := &sweep{
		Candidates: cs, Runs: 2, Settle: time.Second, Load: load, Steerer: st, Counters: fakeCounters(),
		Progress: progress,
		Sleep:    func(ctx context.Context, d time.Duration) error { return ctx.Err() },
	}
	return s, st, load, progress
}

func TestSweepSuccessRestores(t *testing.T) {
	s, st, _, progress := newFakeSweep(t, "off;auto;eth0:2")
	if got := s.Estimate(); got != 3*(time.Second+2*time.Second) {
		t.Errorf("estimate %v", got)
	}
	rep, err := s.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.restores != 1 || st.live != "original" {
		t.Errorf("restores %d, live %q", st.restores, st.live)
	}
	if !rep.Complete || !rep.Restore.Verified {
		t.Errorf("complete %v restore %+v", rep.Complete, rep.Restore)
	}
	if got := strings.Join(st.applied, ","); got != "off,auto,eth0:2" {
		t.Errorf("applied %s", got)
	}
	r := rep.Results[2]
	if r.Throughput != (summary{Median: 575e6, Min: 570e6, Max: 580e6, N: 2}) {
		t.Errorf("throughput %+v", r.Throughput)
	}
	if r.LossPercent == nil || *r.LossPercent != (summary{Median: 0.5, Min: 0, Max: 1, N: 2}) {
		t.Errorf("loss %+v", r.LossPercent)
	}
	if len(r.CPUs) != 2 || r.CPUs[0].NetRX != (summary{Median: 10, Min: 10, Max: 10, N: 2}) || r.CPUs[0].SoftirqMS.Median != 10 {
		t.Errorf("cpus %+v", r.CPUs)
	}
	if r.Dropped.Median != 1 {
		t.Errorf("dropped %+v", r.Dropped)
	}
	rec := rep.Recommendation
	if rec.Candidate != "eth0:2" || rec.Best != "eth0:2" || len(rec.Tied) != 0 || rec.VsAutoPercent == nil || !rec.Clear {
		t.Fatalf("recommendation %+v", rec)
	}
	if want := 100 * (575.0 - 390) / 390; *rec.VsAutoPercent < want-1e-9 || *rec.VsAutoPercent > want+1e-9 {
		t.Errorf("vs auto %v, want %v", *rec.VsAutoPercent, want)
	}
	for _, want := range []string{"[1/3] off: apply", "[2/3] auto: run 2/2, about", "[3/3] eth0:2: run 1/2", "restoring the original state (2 knobs)"} {
		if !strings.Contains(progress.String(), want) {
			t.Errorf("progress lacks %q:\n%s", want, progress)
		}
	}
}

func TestSweepApplyErrorMidway(t *testing.T) {
	s, st, _, _ := newFakeSweep(t, "off;eth0:1;auto")
	st.failApply = map[string]error{"eth0:1": errors.New("write rps_cpus: invalid argument")}
	rep, err := s.Run(context.Background())
	if err != nil {
		t.Fatalf("an apply failure of one candidate should not stop the sweep: %v", err)
	}
	if st.restores != 1 || st.live != "original" {
		t.Errorf("restores %d, live %q", st.restores, st.live)
	}
	if r := rep.Results[1]; !strings.Contains(r.Error, "invalid argument") || len(r.Runs) != 0 {
		t.Errorf("failed candidate: %+v", r)
	}
	if rep.Recommendation.Candidate != "auto" {
		t.Errorf("recommendation %+v", rep.Recommendation)
	}
}

func TestSweepLoadErrorMidwayRestores(t *testing.T) {
	s, st, load, _ := newFakeSweep(t, "off;auto;eth0:2")
	load.hook = func(cand string, run int) error {
		if cand == "auto" && run == 1 {
			return errors.New("iperf3: unable to connect")
		}
		return nil
	}
	rep, err := s.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "unable to connect") || !strings.Contains(err.Error(), "candidate auto run 2") {
		t.Fatalf("err = %v", err)
	}
	if st.restores != 1 || st.live != "original" {
		t.Errorf("restores %d, live %q", st.restores, st.live)
	}
	if rep.Complete || len(rep.Results[0].Runs) != 2 || len(rep.Results[1].Runs) != 1 || len(rep.Results[2].Runs) != 0 {
		t.Errorf("partial report wrong: complete %v runs %d %d %d", rep.Complete,
			len(rep.Results[0].Runs), len(rep.Results[1].Runs), len(rep.Results[2].Runs))
	}
	if !rep.Restore.Verified {
		t.Errorf("restore %+v", rep.Restore)
	}
}

func TestSweepCancelRestores(t *testing.T) {
	s, st, load, _ := newFakeSweep(t, "off;auto;eth0:2")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	load.hook = func(cand string, run int) error {
		if cand == "auto" {
			cancel() // Ctrl-C during the second candidate
		}
		return nil
	}
	rep, err := s.Run(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if st.restores != 1 || st.live != "original" {
		t.Errorf("restores %d, live %q", st.restores, st.live)
	}
	if st.restoreCtx != nil {
		t.Errorf("restore ran with a dead context: %v", st.restoreCtx)
	}
	if rep.Complete || strings.Join(st.applied, ",") != "off,auto" {
		t.Errorf("complete %v applied %v", rep.Complete, st.applied)
	}
}

func TestSweepCancelDuringSettle(t *testing.T) {
	s, st, _, _ := newFakeSweep(t, "off;auto")
	s.Sleep = nil // real sleep, cancelled
	s.Settle = time.Hour
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := s.Run(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
	if st.restores != 1 || st.live != "original" {
		t.Errorf("restores %d, live %q", st.restores, st.live)
	}
}

func TestSweepRestoreErrorReported(t *testing.T) {
	s, st, _, _ := newFakeSweep(t, "off;auto")
	st.restoreErr = errors.New("write napi affinity: no such process")
	rep, err := s.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "restore: write napi affinity") {
		t.Fatalf("err = %v", err)
	}
	if rep.Restore.Error == "" || rep.Restore.Verified {
		t.Errorf("restore %+v", rep.Restore)
	}
	var out bytes.Buffer
	if err := rep.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "restore: FAILED") {
		t.Errorf("table does not say the restore failed:\n%s", out.String())
	}
}

type failingPrepare struct{ fakeSteerer }

func (f *failingPrepare) Prepare(context.Context, []candidate) (*prepared, error) {
	return nil, errors.New("device eth9 not found")
}

func TestSweepPrepareErrorChangesNothing(t *testing.T) {
	s, _, _, _ := newFakeSweep(t, "off")
	fp := &failingPrepare{}
	s.Steerer = fp
	if rep, err := s.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "eth9") || rep != nil {
		t.Fatalf("report %v, err = %v", rep, err)
	}
	if len(fp.applied) != 0 || fp.restores != 0 {
		t.Errorf("applied %v restores %d", fp.applied, fp.restores)
	}
}

func TestRecommendTies(t *testing.T) {
	mk := func(name string, bps ...float64) result {
		r := result{Candidate: candidate{Name: name, Mode: plan.Mode(name)}}
		for _, b := range bps {
			r.Runs = append(r.Runs, run{measurement: measurement{Throughput: b, Unit: unitBPS}})
		}
		return r
	}
	tests := []struct {
		name     string
		results  []result
		metric   metric
		want     string
		best     string
		tied     []string
		textHas  string
		noVsAuto bool
		clear    bool
	}{
		{"auto kept when tied with the best", []result{mk("auto", 930e6, 941e6), mk("eth0:2", 935e6, 942e6), mk("off", 500e6, 510e6)},
			metricThroughput, "auto", "eth0:2", []string{"auto"}, "keep auto", true, true},
		{"tie without auto", []result{mk("off", 930e6, 941e6), mk("eth0:2", 935e6, 942e6)},
			metricThroughput, "eth0:2", "eth0:2", []string{"off"}, "no clear winner", true, false},
		{"clear win", []result{mk("auto", 380e6, 390e6), mk("eth0:2", 570e6, 580e6)},
			metricThroughput, "eth0:2", "eth0:2", nil, "+49.4% against auto", false, true},
		{"loss not measured on TCP", []result{mk("auto", 1)}, metricLoss, "", "", nil, "nothing to recommend", true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := &report{Metric: tt.metric, Results: tt.results}
			rep.finish()
			rec := rep.Recommendation
			if rec.Candidate != tt.want || rec.Best != tt.best || strings.Join(rec.Tied, ",") != strings.Join(tt.tied, ",") {
				t.Errorf("got %+v", rec)
			}
			if !strings.Contains(rec.Text, tt.textHas) {
				t.Errorf("text %q lacks %q", rec.Text, tt.textHas)
			}
			if rec.Clear != tt.clear {
				t.Errorf("clear = %v, want %v", rec.Clear, tt.clear)
			}
			if (rec.VsAutoPercent == nil) != tt.noVsAuto {
				t.Errorf("vs auto %v", rec.VsAutoPercent)
			}
		})
	}
}

func TestWriteTable(t *testing.T) {
	s, _, _, _ := newFakeSweep(t, "off;auto;eth0:2")
	rep, err := s.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := rep.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	txt := out.String()
	for _, want := range []string{
		"candidate|", "eth0 rps|", "Mbit/s|", "loss %|", "drops|", "squeezed|", "rps ipi|", "net_rx/cpu|", "softirq ms/cpu|",
		"575 (570-580)|", "0.5 (0-1)|", "10/0|", "*|", "recommendation: eth0:2 is best", "restore: 2 knobs back", "note: net_rx/cpu",
	} {
		if !strings.Contains(txt, want) {
			t.Errorf("table lacks %q:\n%s", want, txt)
		}
	}
	t.Logf("\n%s", txt)
}

// driftLoad measures every candidate alike, less with each run the machine
// makes: a background job slowly taking the CPUs.
type driftLoad struct{ runs int }

func (l *driftLoad) Run(ctx context.Context, run int) (measurement, error) {
	l.runs++
	return measurement{Throughput: 1000e6 - 10e6*float64(l.runs), Unit: unitBPS}, ctx.Err()
}
func (l *driftLoad) Estimate() time.Duration { return time.Second }
func (l *driftLoad) String() string          { return "drift" }

func TestSweepInterleave(t *testing.T) {
	tests := []struct {
		name       string
		interleave bool
		cands      string
		failApply  map[string]error
		applied    string
		estimate   time.Duration
		// what the drift load makes of three identical candidates
		clear  bool
		best   string
		failed map[int]string
	}{
		{name: "blocked", cands: "off;auto;eth0:2", applied: "off,auto,eth0:2",
			estimate: 3 * (time.Second + 3*time.Second), clear: true, best: "off"},
		{name: "interleaved", interleave: true, cands: "off;auto;eth0:2",
			applied:  "off,auto,eth0:2,off,auto,eth0:2,off,auto,eth0:2",
			estimate: 3 * 3 * (time.Second + time.Second), clear: true, best: "auto"},
		{name: "interleaved, one apply fails", interleave: true, cands: "off;eth0:1;auto",
			failApply: map[string]error{"eth0:1": errors.New("write rps_cpus: invalid argument")},
			applied:   "off,auto,off,auto,off,auto",
			estimate:  3 * 3 * (time.Second + time.Second), clear: true, best: "auto",
			failed: map[int]string{1: "apply: write rps_cpus: invalid argument"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, st, _, _ := newFakeSweep(t, tt.cands)
			st.failApply = tt.failApply
			load := &driftLoad{}
			s.Load, s.Runs, s.Interleave = load, 3, tt.interleave
			if got := s.Estimate(); got != tt.estimate {
				t.Errorf("estimate %v, want %v", got, tt.estimate)
			}
			rep, err := s.Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(st.applied, ","); got != tt.applied {
				t.Errorf("applied %s, want %s", got, tt.applied)
			}
			if rep.Interleaved != tt.interleave || !rep.Complete || st.live != "original" {
				t.Errorf("interleaved %v complete %v live %q", rep.Interleaved, rep.Complete, st.live)
			}
			for i, r := range rep.Results {
				if want := tt.failed[i]; r.Error != want || (want == "") != (len(r.Runs) == 3) {
					t.Errorf("%s: error %q with %d runs, want %q", r.Candidate.Name, r.Error, len(r.Runs), want)
				}
			}
			rec := rep.Recommendation
			if rec.Best == "" || rec.Clear != tt.clear {
				t.Fatalf("recommendation %+v", rec)
			}
			// Blocked, the drift makes the first candidate a clear
			// winner over identical ones; interleaved, their ranges
			// overlap and auto is kept.
			if rec.Candidate != tt.best {
				t.Errorf("recommended %s, want %s (%+v)", rec.Candidate, tt.best, rec)
			}
			if !tt.interleave && len(rec.Tied) != 0 {
				t.Errorf("blocked: ties %v", rec.Tied)
			}
			if tt.interleave && len(rec.Tied) == 0 {
				t.Errorf("interleaved: no ties: the drift decided (%+v)", rec)
			}
		})
	}
}

func TestSweepInterleaveLaterApplyFails(t *testing.T) {
	s, st, _, _ := newFakeSweep(t, "off;eth0:2;auto")
	s.Interleave = true
	applies := 0
	st.failApply = nil
	s.Steerer = steererFunc{st, func(c candidate) error {
		if c.Name == "eth0:2" {
			applies++
			if applies == 2 {
				return errors.New("write rps_cpus: no such device")
			}
		}
		return nil
	}}
	rep, err := s.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	r := rep.Results[1]
	if r.Error != "apply (round 2): write rps_cpus: no such device" || len(r.Runs) != 0 || applies != 2 {
		t.Errorf("eth0:2: error %q, %d runs, %d applies", r.Error, len(r.Runs), applies)
	}
	if rep.Recommendation.Best == "eth0:2" {
		t.Errorf("a candidate that failed to apply was ranked: %+v", rep.Recommendation)
	}
}

// steererFunc is fakeSteerer with an apply check of its own.
type steererFunc struct {
	*fakeSteerer
	check func(candidate) error
}

func (f steererFunc) Apply(ctx context.Context, c candidate) error {
	if err := f.check(c); err != nil {
		return err
	}
	return f.fakeSteerer.Apply(ctx, c)
}
