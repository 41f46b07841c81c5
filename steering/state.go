package steering

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/packet-steering/packet-steering/internal/outline"
	"github.com/packet-steering/packet-steering/plan"
)

// StateFile is where engines that live for one call (the rpcd exec plugin
// and the one-shot commands) keep what a daemon keeps in memory: the live
// settings of a set_mode without persist and the last apply, below the
// root. /var/run is a tmpfs on OpenWrt, so like the daemon's memory it
// does not outlive a reboot.
const StateFile = "var/run/packet-steering/state"

// TotalsFile is where the same engines keep the totals (Status.Totals),
// beside StateFile: since the first apply after boot instead of since the
// daemon started.
const TotalsFile = "var/run/packet-steering/totals"

// WithStateFile makes the engine keep its live settings and last apply
// record in path as well as in memory: read before each use, written after
// each apply under the apply lock, so that engines in successive processes
// behave as one long-lived engine would.
func WithStateFile(path string) Option { return func(e *Engine) { e.stateFile = path } }

// totalsPath is the totals file beside the state file.
func (e *Engine) totalsPath() string {
	return outline.JoinPath(filepath.Dir(e.stateFile), filepath.Base(TotalsFile))
}

// The state file holds seven lines: the live mode and flows (empty without
// a live setting), then the last apply's time in Unix nanoseconds (empty
// without one), its changed, failed and duration_us counts, and its reason
// last (the rest of the file, so any text fits).

// loadStateLocked refreshes e.live and e.lastApply from the state file; the
// caller holds e.mu. A missing, unreadable or malformed file is an empty
// state: the record is advisory and must never stop steering.
func (e *Engine) loadStateLocked() {
	if e.stateFile == "" {
		return
	}
	e.loadTotalsLocked()
	e.live, e.lastApply = nil, nil
	b, err := os.ReadFile(e.stateFile)
	f := strings.SplitN(string(b), "\n", 7)
	if err != nil || len(b) > 4096 || len(f) != 7 {
		return
	}
	if m, err := plan.ParseMode(f[0]); err == nil {
		if n, err := plan.ParseFlows(f[1]); err == nil {
			e.live = &plan.Settings{Mode: m, Flows: n, Source: plan.SourceLive}
		}
	}
	if ns, err := strconv.ParseInt(f[2], 10, 64); err == nil {
		r := &ApplyRecord{Time: time.Unix(0, ns), Reason: f[6]}
		r.Changed, _ = strconv.Atoi(f[3])
		r.Failed, _ = strconv.Atoi(f[4])
		r.DurationUS, _ = strconv.ParseInt(f[5], 10, 64)
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
	f := make([]string, 7)
	if e.live != nil {
		f[0], f[1] = string(e.live.Mode), outline.Itoa(e.live.Flows)
	}
	if r := e.lastApply; r != nil {
		f[2] = strconv.FormatInt(r.Time.UnixNano(), 10)
		f[3], f[4] = outline.Itoa(r.Changed), outline.Itoa(r.Failed)
		f[5], f[6] = strconv.FormatInt(r.DurationUS, 10), r.Reason
	}
	if err := os.MkdirAll(filepath.Dir(e.stateFile), 0o755); err != nil {
		return err
	}
	if err := writeAtomic(e.stateFile, strings.Join(f, "\n")); err != nil {
		return err
	}
	t := e.totals
	return writeAtomic(e.totalsPath(), strings.Join([]string{
		strconv.FormatInt(t.Since.UnixNano(), 10),
		outline.FormatUint(t.Applies, 10), outline.FormatUint(t.Changed, 10),
		outline.FormatUint(t.Failed, 10), outline.FormatUint(t.IRQsRefused, 10),
		outline.FormatUint(t.Rollbacks, 10), outline.FormatUint(t.AdaptiveMoves, 10),
	}, " ")+"\n")
}

// loadTotalsLocked refreshes e.totals from the totals file (one line: the
// start in Unix nanoseconds, then the counts in Totals' order); the caller
// holds e.mu. A missing or malformed file leaves them as they are (zero
// since the engine was made, in a process that never applied): advisory,
// like the state file.
func (e *Engine) loadTotalsLocked() {
	b, err := os.ReadFile(e.totalsPath())
	f := strings.Fields(string(b))
	if err != nil || len(b) > 512 || len(f) != 7 {
		return
	}
	var n [6]uint64
	for i := range n {
		if n[i], err = strconv.ParseUint(f[i+1], 10, 64); err != nil {
			return
		}
	}
	ns, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return
	}
	e.totals = Totals{Since: time.Unix(0, ns), Applies: n[0], Changed: n[1], Failed: n[2],
		IRQsRefused: n[3], Rollbacks: n[4], AdaptiveMoves: n[5]}
}

// writeAtomic writes s to path by write and rename, so a reader sees the
// old or the new contents.
func writeAtomic(path, s string) error {
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(s), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
