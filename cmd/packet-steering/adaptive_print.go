package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/packet-steering/packet-steering/adaptive"
	"github.com/packet-steering/packet-steering/plan"
)

// printAdaptive writes the adaptive part of a status for humans: the loop,
// the deviations from the auto plan with their reasons, the recent moves.
func printAdaptive(w io.Writer, a *adaptive.Status) {
	if a == nil {
		return
	}
	fmt.Fprintln(w, "adaptive (experimental):")
	if s := a.Sampling; s != nil && s.Running {
		state := "no traffic"
		if s.Active {
			state = fmt.Sprintf("traffic, %.0f packets/s", s.PPS)
		}
		fmt.Fprintf(w, "  loop: sampling every %s (%s); %d samples, %d full\n", time.Duration(s.IntervalMS)*time.Millisecond, state, s.Wakeups, s.Full)
		for _, l := range s.Loads {
			sat := ""
			if l.Saturated != "" {
				sat = "  saturated: " + l.Saturated
			}
			fmt.Fprintf(w, "    cpu%d net %3.0f%%  softirq %3.0f%%  busy %3.0f%%%s\n", l.CPU, l.Net*100, l.Softirq*100, l.Busy*100, sat)
		}
		for _, u := range s.Units {
			pps := ""
			if u.PPS != nil {
				pps = fmt.Sprintf(", %.0f rx packets/s (qstats)", *u.PPS)
			}
			fmt.Fprintf(w, "    %s/%s %s on cpu%d: load %3.0f%% (%s%s)\n", u.Device, u.Queue, u.Kind, u.CPU, u.Load*100, u.Source, pps)
		}
		if s.Error != "" {
			fmt.Fprintf(w, "  last sample failed: %s\n", s.Error)
		}
	} else {
		fmt.Fprintln(w, "  loop: not running in this process (the daemon keeps the deviations: `ubus call packet_steering status`)")
	}
	if len(a.Config) > 0 {
		var set, def []string
		for _, o := range a.Config {
			if o.Source == plan.SourceDefault {
				def = append(def, o.Name+" "+o.Value)
			} else {
				set = append(set, o.Name+" "+o.Value)
			}
		}
		if len(set) > 0 {
			fmt.Fprintf(w, "  options (packet_steering.adaptive): %s\n", strings.Join(set, ", "))
		}
		if len(def) > 0 {
			fmt.Fprintf(w, "  options (default): %s\n", strings.Join(def, ", "))
		}
	}
	if a.StateFile != "" {
		fmt.Fprintf(w, "  state file: %s\n", a.StateFile)
	}
	if len(a.Deviations) == 0 {
		fmt.Fprintln(w, "  deviations from auto: none")
	}
	for _, d := range a.Deviations {
		fmt.Fprintf(w, "  %s (%s) on cpu%d, auto: cpu%d, since %s: %s\n", d.Key(), d.Kind, d.CPU, d.Home, d.Since.Format(time.RFC3339), d.Reason)
	}
	for _, d := range a.Dropped {
		fmt.Fprintf(w, "  dropped %s (%s) on cpu%d at %s: %s\n", d.Key(), d.Kind, d.CPU, d.Time.Format(time.RFC3339), d.Why)
	}
	if len(a.Moves) > 0 {
		fmt.Fprintln(w, "  recent moves:")
	}
	for _, m := range a.Moves {
		res := fmt.Sprintf("%d changed", m.Changed)
		if m.Error != "" {
			res = "failed: " + m.Error
		}
		fmt.Fprintf(w, "    %s %s (%s)\n", m.Time.Format(time.RFC3339), m.Move.String(), res)
	}
}
