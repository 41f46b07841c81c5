package main

import (
	"context"
	"errors"
	"strings"

	"github.com/packet-steering/packet-steering/tune"
)

// tuneSummary is tune's line in the usage.
const tuneSummary = "measure steering alternatives and recommend one"

// tuneAbout is the help text under tune's synopsis.
const tuneAbout = `Measures steering alternatives on this machine and recommends one. For each
candidate it applies the candidate's plan, waits --settle, runs the load
--runs times towards --target (and nowhere else), and records throughput,
UDP loss, TCP retransmits and per-CPU softnet and softirq counter deltas.
The original value of every knob a candidate touches is captured first and
written back at the end: after success, after an error and on Ctrl-C.

Candidates (--candidates), separated by ';' or spaces:
  off, legacy, all, auto   a mode's plan
  DEV:MASK[/DEV:MASK...]   auto, with that RPS mask (kernel hex) on every rx
                           queue of each DEV (custom mode), e.g. eth0:0/br-lan:2
  DEV:napi=D,T             per-NAPI knobs (Linux 6.13+) on every NAPI of DEV:
                           defer-hard-irqs D, gro-flush-timeout T ns (fewer
                           interrupts for up to T of latency), e.g. eth0:napi=2,20000
  DEV:threads=CPUS         auto, with every NAPI thread of DEV (a Wi-Fi device:
                           its phy's, e.g. napi/phy0-N) on the cpu list CPUS
Without --candidates: the four modes, then per steered device (or --devices)
the masks 0, each single CPU, and all CPUs but its IRQ's/NAPI thread's; every
combination when it fits in --max-configs, else one device at a time.
With --napi: auto, then per device gro-flush-timeout 0, 20000, 200000 ns x
defer-hard-irqs 0, 2; the table's irqs column is each run's interrupts.
With --threads: auto, legacy, then per device with NAPI threads its threads
on each single CPU and on all CPUs.

The recommendation is the best median of --metric; candidates whose min-max
ranges overlap it are ties, not wins, and when auto (the default) is among
them, auto is kept. --save writes a clear recommendation (not a tie) to UCI
(packet_steering: globals.mode, and for DEV:MASK winners mode custom with
'config device' sections holding rps_cpus) and applies it, after the restore.

The built-in load is an iperf3 client on this machine: it measures the
machine's own receive and send path. To measure forwarding, run the client
on a LAN host through --load (e.g. ssh HOST iperf3 -c "$PS_TUNE_TARGET" -J).
While it runs, tune holds the apply locks, so the daemon, a one-shot apply
and the stock hotplug script wait until the original state is back.

flags:`

// runTune is `packet-steering tune`: a measured sweep of steering
// candidates with a recommendation (package tune does the work).
func runTune(ctx context.Context, env *cliEnv, args []string) error {
	o, help, err := parseTune(env, args)
	if help || err != nil {
		return err
	}
	err = o.Run(ctx, env.stdout, env.stderr)
	if errors.Is(err, tune.ErrUsage) {
		return usagef("%s", strings.TrimPrefix(err.Error(), tune.ErrUsage.Error()+": "))
	}
	return err
}

// parseTune reads tune's command line into tune.Options and checks them.
func parseTune(env *cliEnv, args []string) (o *tune.Options, help bool, err error) {
	opts := tune.DefaultOptions()
	o = &opts
	c := newSubcommand(env, "tune", "tune --target HOST [flags]", tuneAbout).withRoot().
		withJSON("print the report as JSON")
	fs := c.fs
	fs.StringVar(&o.Target, "target", o.Target, "host to send load to (required); an IP address, or a name from /etc/hosts (no DNS)")
	fs.IntVar(&o.Port, "port", o.Port, "iperf3 server port")
	fs.BoolVar(&o.UDP, "udp", o.UDP, "UDP instead of TCP (-u)")
	fs.BoolVar(&o.UDP, "u", o.UDP, "short for --udp")
	fs.StringVar(&o.Bitrate, "bitrate", o.Bitrate, "iperf3 -b target rate, e.g. 900M (UDP default 1M)")
	fs.StringVar(&o.Bitrate, "b", o.Bitrate, "short for --bitrate")
	fs.IntVar(&o.Length, "length", o.Length, "iperf3 -l datagram/write size in bytes")
	fs.IntVar(&o.Length, "l", o.Length, "short for --length")
	fs.BoolVar(&o.Bidir, "bidir", o.Bidir, "traffic in both directions at once")
	fs.BoolVar(&o.Reverse, "reverse", o.Reverse, "the target sends, this machine receives (iperf3 -R)")
	fs.BoolVar(&o.Reverse, "R", o.Reverse, "short for --reverse")
	fs.IntVar(&o.Seconds, "time", o.Seconds, "seconds per run (iperf3 -t)")
	fs.IntVar(&o.Seconds, "t", o.Seconds, "short for --time")
	fs.IntVar(&o.Parallel, "parallel", o.Parallel, "parallel flows (iperf3 -P)")
	fs.IntVar(&o.Parallel, "P", o.Parallel, "short for --parallel")
	fs.IntVar(&o.CPort, "cport", o.CPort, "pin client ports: run j uses PORT+13*j, so every candidate sees the same flows")
	fs.StringVar(&o.Iperf3, "iperf3", o.Iperf3, "iperf3 binary")
	fs.StringVar(&o.LoadCmd, "load", o.LoadCmd, "shell command to run instead of iperf3; its JSON (\"bps\"/\"value\" or iperf3's) or last line gives the number; it gets PS_TUNE_TARGET and PS_TUNE_RUN")
	fs.DurationVar(&o.LoadTime, "load-time", o.LoadTime, "how long one --load run takes, for the estimate")
	fs.IntVar(&o.Runs, "runs", o.Runs, "runs per candidate")
	fs.DurationVar(&o.Settle, "settle", o.Settle, "wait after each apply")
	fs.BoolVar(&o.Interleave, "interleave", o.Interleave, "run in rounds, each candidate once per round (docs/tune.md)")
	fs.StringVar(&o.Candidates, "candidates", o.Candidates, "candidate list (see above)")
	fs.StringVar(&o.Devices, "devices", o.Devices, "comma-separated devices whose RPS masks are varied (default: the steered ones)")
	fs.IntVar(&o.MaxConfigs, "max-configs", o.MaxConfigs, "at most this many candidates")
	fs.StringVar(&o.Metric, "metric", o.Metric, "rank by throughput, loss (UDP) or retransmits (TCP)")
	fs.DurationVar(&o.MaxDuration, "max-duration", o.MaxDuration, "refuse to start when the estimate is longer; stop (and restore) a sweep that runs longer")
	fs.BoolVar(&o.Save, "save", o.Save, "persist and apply the recommendation in UCI after the restore")
	fs.BoolVar(&o.List, "list", o.List, "print the candidates and the estimate, change nothing")
	fs.BoolVar(&o.NAPI, "napi", o.NAPI, "sweep the per-NAPI knobs (defer-hard-irqs x gro-flush-timeout, Linux 6.13+) instead of the RPS masks")
	fs.BoolVar(&o.Threads, "threads", o.Threads, "sweep the CPUs of each device's NAPI threads (one CPU each, all CPUs) instead of the RPS masks")
	if help, err := c.parse(args); help || err != nil {
		return nil, help, err
	}
	o.Root, o.JSON = c.rootDir(), *c.json
	if err := o.Check(); err != nil {
		return nil, false, usagef("%s", strings.TrimPrefix(err.Error(), tune.ErrUsage.Error()+": "))
	}
	return o, false, nil
}
