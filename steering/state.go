package steering

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// StateFile is where engines that live for one call (the rpcd exec plugin
// and the one-shot commands) keep what a daemon keeps in memory: the live
// settings of a set_mode without persist and the last apply, below the
// root. /var/run is a tmpfs on OpenWrt, so like the daemon's memory it
// does not outlive a reboot.
const StateFile = "var/run/packet-steering/state"

// WithStateFile makes the engine keep its live settings and last apply
// record in path as well as in memory: read before each use, written after
// each apply under the apply lock, so that engines in successive processes
// behave as one long-lived engine would.
func WithStateFile(path string) Option { return func(e *Engine) { e.stateFile = path } }

// loadStateLocked refreshes e.live and e.lastApply from the state file; the
// caller holds e.mu. A missing or unreadable file is an empty state: the
// record is advisory and must never stop steering.
func (e *Engine) loadStateLocked() {
	if e.stateFile == "" {
		return
	}
	b, err := os.ReadFile(e.stateFile)
	if err != nil || len(b) > 4096 {
		e.live, e.lastApply = nil, nil
		return
	}
	var liveMode, liveFlows, lastNS, changed, failed, dur string
	e.live, e.lastApply = nil, nil
	r := &ApplyRecord{}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, "=")
		switch k {
		case "live_mode":
			liveMode = v
		case "live_flows":
			liveFlows = v
		case "last_time_ns":
			lastNS = v
		case "last_reason":
			r.Reason = v
		case "last_changed":
			changed = v
		case "last_failed":
			failed = v
		case "last_duration_us":
			dur = v
		}
	}
	if m, err := ParseMode(liveMode); err == nil {
		if n, err := ParseFlows(liveFlows); err == nil {
			e.live = &Settings{Mode: m, Flows: n, Source: SourceLive}
		}
	}
	// The time as Unix nanoseconds: no time parser needed.
	if ns, err := strconv.ParseInt(lastNS, 10, 64); err == nil {
		r.Time = time.Unix(0, ns)
		r.Changed, _ = strconv.Atoi(changed)
		r.Failed, _ = strconv.Atoi(failed)
		r.DurationUS, _ = strconv.ParseInt(dur, 10, 64)
		e.lastApply = r
	}
}

// saveStateLocked writes e.live and e.lastApply to the state file (write
// and rename, so a reader sees the old or the new state); the caller holds
// e.mu and the apply lock.
func (e *Engine) saveStateLocked() error {
	if e.stateFile == "" {
		return nil
	}
	var b strings.Builder
	if e.live != nil {
		b.WriteString("live_mode=" + string(e.live.Mode) + "\nlive_flows=" + strconv.Itoa(e.live.Flows) + "\n")
	}
	if r := e.lastApply; r != nil {
		reason := strings.ReplaceAll(strings.ReplaceAll(r.Reason, "\n", " "), "\r", " ")
		b.WriteString("last_time_ns=" + strconv.FormatInt(r.Time.UnixNano(), 10) + "\nlast_reason=" + reason +
			"\nlast_changed=" + strconv.Itoa(r.Changed) + "\nlast_failed=" + strconv.Itoa(r.Failed) +
			"\nlast_duration_us=" + strconv.FormatInt(r.DurationUS, 10) + "\n")
	}
	if err := os.MkdirAll(filepath.Dir(e.stateFile), 0o755); err != nil {
		return err
	}
	tmp := e.stateFile + ".new"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, e.stateFile)
}
