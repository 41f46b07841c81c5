package steering

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/packet-steering/packet-steering/plan"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/packet-steering/packet-steering/platform"
)

// AdaptiveStateFile is where, below the engine's <root>/var/run (a tmpfs on
// OpenWrt, like the apply marker and the one-shot state file), the adaptive
// mode keeps its deviations from the auto plan and its recent moves, so
// that a daemon restart goes on where the last one was and the one-shot
// commands (status, apply, plan, the rpcd plugin) see the same plan as the
// daemon. It is written under the apply lock after each apply in adaptive
// mode whose state changed (write and rename: a reader sees the old or the
// new file), and removed by the first apply in any other mode. A reboot
// clears it, and the loop starts again from auto.
//
// Read once per engine, it is checked before use: a file over
// maxAdaptiveStateSize, one that does not parse, or one with more than
// maxStoredDeviations deviations is ignored as a whole (status says so in
// adaptive.state_file) and replaced at the next apply; a deviation whose
// fields make no sense, or whose queue or CPU no longer exists, is dropped
// and listed in adaptive.dropped with the reason.
const AdaptiveStateFile = "packet-steering/adaptive"

// Bounds of the state file.
const (
	maxAdaptiveStateSize = 64 << 10
	maxStoredDeviations  = 256
	maxStoredCPU         = 4095
)

// badStateFile is what written holds after a load refused the file: the
// next save replaces (or removes) it whatever the state is.
const badStateFile = "\x00bad"

// adaptiveFile is the state file's JSON.
type adaptiveFile struct {
	Deviations []Deviation  `json:"deviations"`
	Moves      []MoveRecord `json:"moves"`
}

func (e *Engine) adaptiveStatePath() string { return filepath.Join(e.runDir, AdaptiveStateFile) }

// loadAdaptiveLocked reads the state file, once per engine; the caller
// holds e.mu. What the engine already holds (moves made before the first
// read) stays.
func (e *Engine) loadAdaptiveLocked() {
	if e.adaptive.loaded {
		return
	}
	e.adaptive.loaded = true
	path := e.adaptiveStatePath()
	f, err := readAdaptiveFile(path)
	if err != nil {
		e.adaptive.note = fmt.Sprintf("%v; ignored, starting from the auto plan", err)
		e.adaptive.written = badStateFile
		return
	}
	if f == nil {
		return
	}
	now := e.now()
	var devs []Deviation
	for _, d := range f.Deviations {
		if why := checkStoredDeviation(d); why != "" {
			e.noteDroppedLocked(DroppedDev{Deviation: d, Why: why, Time: now})
			continue
		}
		if slices.ContainsFunc(devs, func(o Deviation) bool { return o.Key() == d.Key() }) {
			e.noteDroppedLocked(DroppedDev{Deviation: d, Why: "a second deviation of the same queue in " + AdaptiveStateFile, Time: now})
			continue
		}
		devs = append(devs, d)
	}
	if len(e.adaptive.devs) == 0 {
		e.adaptive.devs = devs
	}
	moves := f.Moves
	if n := len(moves) - maxMoveHistory; n > 0 {
		moves = moves[n:]
	}
	e.adaptive.moves = append(moves, e.adaptive.moves...)
	if n := len(e.adaptive.moves) - maxMoveHistory; n > 0 {
		e.adaptive.moves = slices.Delete(e.adaptive.moves, 0, n)
	}
	if b, err := json.Marshal(f); err == nil && len(devs) == len(f.Deviations) && len(moves) == len(f.Moves) {
		e.adaptive.written = string(b)
	} else {
		e.adaptive.written = badStateFile
	}
}

// readAdaptiveFile reads and parses the state file; nil when there is
// none.
func readAdaptiveFile(path string) (*adaptiveFile, error) {
	fh, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", AdaptiveStateFile, err)
	}
	defer fh.Close()
	// One byte over the limit tells an oversized file from one at it.
	b, err := io.ReadAll(io.LimitReader(fh, maxAdaptiveStateSize+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", AdaptiveStateFile, err)
	}
	if len(b) > maxAdaptiveStateSize {
		return nil, fmt.Errorf("%s: over %d bytes", AdaptiveStateFile, maxAdaptiveStateSize)
	}
	var f adaptiveFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%s: corrupt: %w", AdaptiveStateFile, err)
	}
	if len(f.Deviations) > maxStoredDeviations {
		return nil, fmt.Errorf("%s: %d deviations, over the limit of %d", AdaptiveStateFile, len(f.Deviations), maxStoredDeviations)
	}
	return &f, nil
}

// checkStoredDeviation says what is wrong with a stored deviation's
// fields, "" when nothing.
func checkStoredDeviation(d Deviation) string {
	switch {
	case !validDeviceName(d.Device):
		return "device name " + strconv.Quote(d.Device) + " is not valid"
	case len(d.Queue) < 4 || d.Queue[:3] != "rx-":
		return "queue " + strconv.Quote(d.Queue) + " is not an rx queue"
	case d.Kind != UnitRPS && d.Kind != UnitNAPI:
		return "kind " + strconv.Quote(d.Kind) + " is not rps or napi"
	case d.CPU < 0 || d.CPU > maxStoredCPU:
		return "cpu " + strconv.Itoa(d.CPU) + " is out of range"
	}
	return ""
}

// noteDroppedLocked records a dropped deviation for status (bounded,
// newest last); the caller holds e.mu.
func (e *Engine) noteDroppedLocked(d DroppedDev) {
	e.adaptive.dropped = append(e.adaptive.dropped, d)
	if n := len(e.adaptive.dropped) - maxDropped; n > 0 {
		e.adaptive.dropped = slices.Delete(e.adaptive.dropped, 0, n)
	}
}

// saveAdaptiveLocked writes the deviations and moves to the state file when
// they differ from what was written last (removes it when both are empty);
// the caller holds e.mu and the apply lock. The file is advisory: a failed
// write leaves the daemon's memory as the truth and is tried again at the
// next apply.
func (e *Engine) saveAdaptiveLocked() error {
	want := ""
	if len(e.adaptive.devs) > 0 || len(e.adaptive.moves) > 0 {
		b, err := json.Marshal(adaptiveFile{Deviations: e.adaptive.devs, Moves: e.adaptive.moves})
		if err != nil {
			return fmt.Errorf("%s: %w", AdaptiveStateFile, err)
		}
		want = string(b)
	}
	if want == e.adaptive.written {
		return nil
	}
	path := e.adaptiveStatePath()
	if want == "" {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%s: %w", AdaptiveStateFile, err)
		}
		e.adaptive.written = ""
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("%s: %w", AdaptiveStateFile, err)
	}
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(want), 0o644); err != nil {
		return fmt.Errorf("%s: %w", AdaptiveStateFile, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("%s: %w", AdaptiveStateFile, err)
	}
	e.adaptive.written = want
	e.adaptive.note = ""
	return nil
}

// adaptiveApplied follows an apply (not a dry run; the caller holds the
// apply lock): in mode adaptive it resolves the loop's options from the
// apply's snapshot and saves the state; in any other mode it forgets the
// state and removes the file.
func (e *Engine) adaptiveApplied(snap *platform.Snapshot, m plan.Mode) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if m != plan.ModeAdaptive {
		e.forgetAdaptiveLocked()
		if !e.adaptive.loaded {
			// A file of an earlier adaptive run (another process's)
			// goes too, unread.
			e.adaptive.loaded, e.adaptive.written = true, badStateFile
		}
	} else {
		e.adaptive.cfg, e.adaptive.cfgSet = ResolveAdaptiveConfig(snap), true
	}
	_ = e.saveAdaptiveLocked()
}

// forgetAdaptive drops the deviations, moves and dropped list: a mode
// change starts from the plain plan (adaptive from auto).
func (e *Engine) forgetAdaptive() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.loadAdaptiveLocked()
	e.forgetAdaptiveLocked()
}

func (e *Engine) forgetAdaptiveLocked() {
	e.adaptive.devs, e.adaptive.moves, e.adaptive.dropped, e.adaptive.note = nil, nil, nil, ""
}

// resolveAdaptiveConfig is ResolveAdaptiveConfig (a stub in the plain
// router build).
func resolveAdaptiveConfig(snap *platform.Snapshot) AdaptiveSettings {
	return ResolveAdaptiveConfig(snap)
}
