package tune

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/packet-steering/packet-steering/internal/outline"
	"github.com/packet-steering/packet-steering/internal/ubus"
	"github.com/packet-steering/packet-steering/plan"
	"github.com/packet-steering/packet-steering/platform"
	"github.com/packet-steering/packet-steering/steering"
)

// ErrUsage marks a command-line mistake: nothing was changed.
var ErrUsage = errors.New("usage")

//go:noinline
func usagef(format string, a ...any) error {
	return outline.Errorf("%w: %s", ErrUsage, fmt.Sprintf(format, a...))
}

// Options are one sweep: the command line of `packet-steering tune`, whose
// flags (cmd/packet-steering) set the fields of the same names.
type Options struct {
	_    outline.NoCompare
	Root string

	Target   string
	Port     int
	UDP      bool
	Bitrate  string
	Length   int
	Bidir    bool
	Reverse  bool
	Seconds  int
	Parallel int
	CPort    int
	Iperf3   string
	LoadCmd  string
	LoadTime time.Duration

	Runs   int
	Settle time.Duration
	// Interleave runs the candidates in rounds (--interleave; sweep.Interleave).
	Interleave  bool
	Candidates  string
	Devices     string
	MaxConfigs  int
	Metric      string
	MaxDuration time.Duration

	JSON bool
	Save bool
	List bool

	// NAPI sweeps the per-NAPI knobs instead of the RPS masks (--napi):
	// auto, then for each device (--devices, else every device whose
	// NAPIs the kernel lets the plan set) gro-flush-timeout 0, 20000 and
	// 200000 ns x defer-hard-irqs 0 and 2 (napi.go), capped by
	// --max-configs.
	NAPI bool
	// Threads sweeps the CPUs of the NAPI threads instead (--threads):
	// auto, legacy, then for each device (--devices, else every device
	// with NAPI threads) its threads on each single CPU and on all CPUs
	// (threads.go), capped by --max-configs.
	Threads bool
}

// DefaultOptions are the options `packet-steering tune` starts from: the
// defaults of its flags.
func DefaultOptions() Options {
	return Options{
		Root: "/", Port: 5201, Seconds: 10, Parallel: 1, Iperf3: "iperf3",
		LoadTime: 10 * time.Second, Runs: 3, Settle: 2 * time.Second, MaxConfigs: 12,
		Metric: string(metricThroughput), MaxDuration: 15 * time.Minute,
	}
}

// Check refuses options that cannot make a sweep; its errors wrap ErrUsage.
// Run calls it first.
func (o *Options) Check() error {
	switch {
	case o.Target == "":
		return usagef("--target HOST is required: tune sends load only to a host you name")
	case o.Runs < 1 || o.Runs > 100:
		return usagef("--runs must be 1 to 100")
	case o.Seconds < 1 || o.Seconds > 3600:
		return usagef("--time must be 1 to 3600 seconds")
	case o.Parallel < 1 || o.Parallel > 128:
		return usagef("--parallel must be 1 to 128")
	case o.Port < 1 || o.Port > 65535:
		return usagef("--port must be 1 to 65535")
	case o.CPort < 0 || o.CPort+13*o.Runs > 65535:
		return usagef("--cport must leave room for 13 ports per run below 65536")
	case o.Length < 0:
		return usagef("--length must not be negative")
	case o.Settle < 0 || o.LoadTime <= 0:
		return usagef("--settle must not be negative and --load-time must be positive")
	case o.MaxConfigs < 1:
		return usagef("--max-configs must be at least 1")
	case o.MaxDuration <= 0:
		return usagef("--max-duration must be positive")
	}
	switch metric(o.Metric) {
	case metricThroughput:
	case metricLoss:
		if !o.UDP && o.LoadCmd == "" {
			return usagef("--metric loss needs --udp")
		}
	case metricRetransmits:
		if o.UDP {
			return usagef("--metric retransmits needs TCP")
		}
	default:
		return usagef("--metric %q: want throughput, loss or retransmits", o.Metric)
	}
	if o.Bidir && o.Reverse {
		return usagef("--bidir and --reverse exclude each other")
	}
	if o.NAPI && o.Candidates != "" {
		return usagef("--napi generates its candidates; with --candidates list them as DEV:napi=DEFER,TIMEOUT_NS")
	}
	if o.Threads && o.Candidates != "" {
		return usagef("--threads generates its candidates; with --candidates list them as DEV:threads=CPUS")
	}
	if o.Threads && o.NAPI {
		return usagef("--threads and --napi exclude each other: sweep one at a time")
	}
	if o.Candidates != "" && o.Devices != "" {
		return usagef("--devices only applies to generated candidates, not with --candidates")
	}
	if o.Candidates != "" {
		if _, err := parseCandidates(o.Candidates); err != nil {
			return usagef("--candidates: %v", err)
		}
	}
	return nil
}

// resolveTarget turns the target into the one IP address load is sent
// to: an address literal, or a name from root's etc/hosts (read once, so
// nothing can move the load later). Names are not looked up in DNS: the
// resolver would add about half a megabyte to the router binary, and a
// sweep that sends traffic to a host should be told exactly which one.
// Addresses that reach more than one host or no NIC are refused.
func resolveTarget(root, host string) (addr, error) {
	ip, ok := parseAddr(host)
	if !ok {
		var err error
		ip, ok, err = lookupHosts(outline.JoinPath(root, "etc", "hosts"), host)
		switch {
		case err != nil:
			return addr{}, outline.Errorf("%w: --target %s is not an address, and etc/hosts could not be read: %v", ErrUsage, host, err)
		case !ok:
			return addr{}, usagef("--target %s is neither an IP address nor a name in /etc/hosts; give the address", host)
		}
	}
	switch {
	case ip.isUnspecified():
		return addr{}, usagef("--target %s is the unspecified address", host)
	case ip.isMulticast() || ip.isBroadcast():
		return addr{}, usagef("--target %s reaches more than one host", host)
	case ip.isLoopback():
		return addr{}, usagef("--target %s is this machine's loopback: that traffic crosses no NIC queue", host)
	}
	return ip, nil
}

// lookupHosts finds name in a hosts(5) file: "ADDRESS NAME [ALIAS...]" per
// line, '#' starts a comment; the first line naming it wins. ok is false
// when no line names it (also when the file does not exist).
func lookupHosts(path, name string) (a addr, ok bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return addr{}, false, nil
	}
	if err != nil {
		return addr{}, false, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		a, ok := parseAddr(f[0])
		if !ok {
			continue
		}
		for _, n := range f[1:] {
			if strings.EqualFold(n, name) {
				return a, true, nil
			}
		}
	}
	return addr{}, false, nil
}

// Run performs the sweep the options describe, after Check.
func (o *Options) Run(ctx context.Context, stdout, stderr io.Writer) error {
	if err := o.Check(); err != nil {
		return err
	}
	ip, err := resolveTarget(o.Root, o.Target)
	if err != nil {
		return err
	}
	var load loadDriver
	if o.LoadCmd != "" {
		load = &loadCommand{Line: o.LoadCmd, Target: ip.String(), Expect: o.LoadTime}
		fmt.Fprintf(stderr, "tune: the --load command gets PS_TUNE_TARGET=%s; where it sends traffic is up to it\n", ip)
	} else {
		bin, err := lookPath(o.Iperf3)
		if err != nil {
			return outline.Errorf("iperf3 is needed for the built-in load (or give --load): %w", err)
		}
		if o.UDP && o.Bitrate == "" {
			fmt.Fprintln(stderr, "tune: note: without -b, iperf3 sends UDP at 1 Mbit/s, which no steering limits; give the rate to test, e.g. -b 900M")
		}
		load = &iperf{Binary: bin, Host: ip.String(), Port: o.Port, UDP: o.UDP, Bitrate: o.Bitrate, Length: o.Length,
			Bidir: o.Bidir, Reverse: o.Reverse, Seconds: o.Seconds, Parallel: o.Parallel, ClientPort: o.CPort}
	}
	// Each run's per-rx-queue counts (qstats, else IRQs), read around it.
	qr := platform.NewReader()
	load = &queueCounting{loadDriver: load, read: func(ctx context.Context) ([]QueueCounters, error) {
		return ReadQueueCounters(ctx, qr, o.Root)
	}}
	eng := steering.NewEngine(o.Root)
	cands, err := o.candidates(ctx, eng, stderr)
	if err != nil {
		return err
	}
	st := newMachine(eng, steering.NewFSWriter(o.Root))
	for _, c := range cands {
		if c.Mode != plan.ModeAdaptive {
			continue
		}
		// The adaptive candidate's engine takes its locks in a private
		// directory: the sweep holds the real ones throughout.
		lockDir, err := os.MkdirTemp("", "packet-steering-tune-")
		if err != nil {
			return outline.Errorf("adaptive candidate: %w", err)
		}
		defer os.RemoveAll(lockDir)
		st.Adaptive = steering.NewEngine(o.Root, steering.WithLockDir(lockDir))
		break
	}
	sw := &sweep{
		Candidates: cands, Runs: o.Runs, Settle: o.Settle, Interleave: o.Interleave, Load: &irqCounting{loadDriver: load, root: o.Root}, Steerer: st,
		Counters: func() ([]CPUCounters, error) { return ReadCounters(o.Root) },
		Metric:   metric(o.Metric), Progress: stderr,
	}
	est := sw.Estimate()
	if o.Interleave {
		fmt.Fprintf(stderr, "tune: %d rounds x %d candidates x (settle %s + %s) = about %s (limit --max-duration %s)\n",
			o.Runs, len(cands), o.Settle, load.Estimate(), est.Round(time.Second), o.MaxDuration)
	} else {
		fmt.Fprintf(stderr, "tune: %d candidates x (settle %s + %d runs x %s) = about %s (limit --max-duration %s)\n",
			len(cands), o.Settle, o.Runs, load.Estimate(), est.Round(time.Second), o.MaxDuration)
	}
	fmt.Fprintf(stderr, "tune: load: %s\n", load)
	if est > o.MaxDuration {
		return usagef("the estimate %s exceeds --max-duration %s: fewer --candidates/--max-configs, --runs or --time",
			est.Round(time.Second), o.MaxDuration)
	}
	if o.List {
		for i, c := range cands {
			fmt.Fprintf(stdout, "%d\t%s\n", i+1, c.Name)
		}
		return nil
	}
	lctx, lcancel := context.WithTimeout(ctx, 10*time.Second)
	release, err := steering.LockApplies(lctx, outline.JoinPath(o.Root, "var", "lock"))
	lcancel()
	if err != nil {
		return err
	}
	// The limit holds while running too: a sweep that overruns it is
	// stopped (and restored) rather than left to run on.
	errLimit := outline.Errorf("--max-duration %s reached", o.MaxDuration)
	sctx, cancel := context.WithTimeoutCause(ctx, o.MaxDuration, errLimit)
	rep, err := sw.Run(sctx)
	cancel()
	release()
	for name, n := range st.Moves {
		fmt.Fprintf(stderr, "tune: %s: the adaptive loop made %d moves during its runs\n", name, n)
	}
	if err != nil && errors.Is(context.Cause(sctx), errLimit) && ctx.Err() == nil {
		err = outline.Errorf("%w: %w", errLimit, err)
	}
	if rep != nil {
		if werr := o.write(stdout, rep); werr != nil {
			err = outline.JoinErrors(err, werr)
		}
	}
	if err != nil {
		return err
	}
	if !o.Save {
		return nil
	}
	return o.save(ctx, eng, rep, stderr)
}

func (o *Options) write(w io.Writer, rep *report) error {
	if o.JSON {
		b, err := ubus.MarshalJSON(rep, "  ")
		if err != nil {
			return outline.Errorf("write JSON: %w", err)
		}
		_, err = w.Write(append(b, '\n'))
		return err
	}
	return rep.WriteTable(w)
}

// candidates returns the user's list or the generated one.
func (o *Options) candidates(ctx context.Context, eng *steering.Engine, stderr io.Writer) ([]candidate, error) {
	if o.Candidates != "" {
		cs, err := parseCandidates(o.Candidates)
		if err != nil {
			return nil, usagef("--candidates: %v", err)
		}
		if len(cs) > o.MaxConfigs {
			return nil, usagef("%d candidates given, --max-configs is %d", len(cs), o.MaxConfigs)
		}
		return cs, nil
	}
	snap, err := eng.Snapshot(ctx)
	if err != nil {
		return nil, outline.Errorf("read the machine: %w", err)
	}
	var plans []*plan.Plan
	for _, m := range sweepModes() {
		p, err := planCandidate(snap, modeCandidate(m))
		if err != nil {
			return nil, err
		}
		plans = append(plans, p)
	}
	var devs []string
	if o.Devices != "" {
		for _, d := range strings.Split(o.Devices, ",") {
			if d = strings.TrimSpace(d); d != "" {
				devs = append(devs, d)
			}
		}
	}
	if o.NAPI {
		return o.napiCandidates(snap, devs, stderr)
	}
	if o.Threads {
		return o.threadCandidates(snap, devs, stderr) // threads.go
	}
	l := layoutFor(snap, plans, devs)
	cs, dropped := generate(sweepModes(), l, o.MaxConfigs)
	if dropped > 0 {
		fmt.Fprintf(stderr, "tune: --max-configs %d leaves out %d mask variants; raise it or name --candidates\n", o.MaxConfigs, dropped)
	}
	return cs, nil
}

// save persists the recommendation and applies it.
func (o *Options) save(ctx context.Context, eng *steering.Engine, rep *report, stderr io.Writer) error {
	configDir := outline.JoinPath(o.Root, "etc", "config")
	name := rep.Recommendation.Candidate
	if name == "" {
		return errors.New("--save: nothing to save: no candidate was measured")
	}
	if !rep.Restore.Verified {
		return errors.New("--save: not saving: the restore was not verified")
	}
	if !rep.Recommendation.Clear {
		return outline.Errorf("--save: not saving: %s is tied with %s within the run-to-run spread; measure again with more --runs, or name the candidates to compare",
			rep.Recommendation.Best, strings.Join(rep.Recommendation.Tied, ", "))
	}
	var c *candidate
	for i := range rep.Results {
		if rep.Results[i].Candidate.Name == name {
			c = &rep.Results[i].Candidate
		}
	}
	if c == nil {
		return outline.Errorf("--save: candidate %s not in the report", name)
	}
	res, err := saveCandidate(ctx, eng, configDir, *c)
	if err != nil {
		return outline.Errorf("--save: %w", err)
	}
	fmt.Fprintf(stderr, "tune: saved %s (mode %s) in %s and applied it: %d changed, %d failed\n",
		c.Name, c.Mode, outline.JoinPath(configDir, "packet_steering"), len(res.Changed), len(res.Failed))
	return nil
}

// saveCandidate persists candidate c in the UCI config dir and applies it through
// the engine: a mode candidate sets packet_steering.globals.mode; a custom
// candidate first sets rps_cpus (and drops any per-queue queue_rps list) in
// the `config device` section of each of its devices, adding sections as
// needed, then sets mode custom. Other device sections are left as they
// are. The mode is written by Engine.SetMode with Persist, which also keeps
// network.globals.packet_steering truthful.
func saveCandidate(ctx context.Context, eng *steering.Engine, configDir string, c candidate) (*steering.Result, error) {
	if len(c.NAPI) > 0 {
		return nil, outline.Errorf("per-NAPI candidates are not saved: set options defer_hard_irqs '%s' and gro_flush_timeout '%s' in the `config device` section of %s",
			c.NAPI[0].DeferHardIRQs, c.NAPI[0].GROFlushTimeoutNS, c.NAPI[0].Device)
	}
	if len(c.Threads) > 0 {
		return nil, outline.Errorf("NAPI thread candidates are not saved: set option napi_cpus '%s' in the `config device` section of %s and mode custom",
			c.Threads[0].Mask, c.Threads[0].Device)
	}
	if c.Mode == plan.ModeCustom {
		rps := make([]steering.DeviceRPS, len(c.RPS))
		for i, r := range c.RPS {
			rps[i] = steering.DeviceRPS{Device: r.Device, Mask: r.Mask}
		}
		if err := steering.PersistDeviceRPS(configDir, rps); err != nil {
			return nil, err
		}
	}
	res, err := eng.SetMode(ctx, steering.SetModeRequest{Mode: c.Mode, Persist: true, Reason: "tune --save " + c.Name})
	if err != nil {
		return nil, outline.Errorf("set mode %s: %w", c.Mode, err)
	}
	return res, nil
}
