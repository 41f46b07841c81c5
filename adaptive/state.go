package adaptive

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"github.com/packet-steering/packet-steering/internal/outline"
	"github.com/packet-steering/packet-steering/internal/ubus"
	"github.com/packet-steering/packet-steering/plan"
	"github.com/packet-steering/packet-steering/platform"
)

// StateFile is where, below the engine's <root>/var/run (a tmpfs on
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
// MaxStateSize, one that does not parse, or one with more than
// MaxStoredDeviations deviations is ignored as a whole (status says so in
// adaptive.state_file) and replaced at the next apply; a deviation whose
// fields make no sense, or whose queue or CPU no longer exists, is dropped
// and listed in adaptive.dropped with the reason.
const StateFile = "packet-steering/adaptive"

// Bounds of the state file.
const (
	MaxStateSize        = 64 << 10
	MaxStoredDeviations = 256
	maxStoredCPU        = 4095
)

// badStateFile is what written holds after a load refused the file: the
// next save replaces (or removes) it whatever the state is.
const badStateFile = "\x00bad"

// StoredState is the state file's JSON (written and read with the
// project's own JSON codec, internal/ubus, so that the router binary does
// not link encoding/json).
type StoredState struct {
	Deviations []Deviation  `json:"deviations"`
	Moves      []MoveRecord `json:"moves"`
}

// State is the adaptive mode's runtime state: the deviations from the auto
// plan, the recent moves, the dropped deviations, the loop's sampling state
// and its options as the last apply in mode adaptive resolved them. The
// engine owns one and calls it from its applies; the control loop (Run)
// reads the deviations and notes its sampling. It is safe for concurrent
// use. The state file (StateFile below the run directory) is read at the
// first use and written by Save.
type State struct {
	path string
	now  func() time.Time

	mu       outline.Mutex
	devs     []Deviation
	moves    []MoveRecord
	sampling *SamplingStatus
	dropped  []DroppedDev
	// cfg is the loop's configuration as the last apply in mode adaptive
	// resolved it (cfgSet); before one, status resolves it from the view.
	cfg    Settings
	cfgSet bool
	// loaded: the state file was read (once); written is what was last
	// written to it ("" none); note says why the file was not used.
	loaded  bool
	written string
	note    string
}

// NewState returns the state kept in runDir/StateFile (runDir is the
// engine's <root>/var/run), with now as its clock (time.Now when nil).
func NewState(runDir string, now func() time.Time) *State {
	if now == nil {
		now = time.Now
	}
	return &State{path: outline.JoinPath(runDir, StateFile), now: now}
}

// loadLocked reads the state file, once; the caller holds s.mu. What the
// state already holds (moves made before the first read) stays.
func (s *State) loadLocked() {
	if s.loaded {
		return
	}
	s.loaded = true
	f, err := readAdaptiveFile(s.path)
	if err != nil {
		s.note = fmt.Sprintf("%v; ignored, starting from the auto plan", err)
		s.written = badStateFile
		return
	}
	if f == nil {
		return
	}
	now := s.now()
	var devs []Deviation
	for _, d := range f.Deviations {
		if why := checkStoredDeviation(d); why != "" {
			s.noteDroppedLocked(DroppedDev{Deviation: d, Why: why, Time: now})
			continue
		}
		if slices.ContainsFunc(devs, func(o Deviation) bool { return o.Key() == d.Key() }) {
			s.noteDroppedLocked(DroppedDev{Deviation: d, Why: "a second deviation of the same queue in " + StateFile, Time: now})
			continue
		}
		devs = append(devs, d)
	}
	if len(s.devs) == 0 {
		s.devs = devs
	}
	moves := f.Moves
	if n := len(moves) - maxMoveHistory; n > 0 {
		moves = moves[n:]
	}
	s.moves = append(moves, s.moves...)
	if n := len(s.moves) - maxMoveHistory; n > 0 {
		s.moves = slices.Delete(s.moves, 0, n)
	}
	if b, err := ubus.MarshalJSON(f, ""); err == nil && len(devs) == len(f.Deviations) && len(moves) == len(f.Moves) {
		s.written = string(b)
	} else {
		s.written = badStateFile
	}
}

// readAdaptiveFile reads and parses the state file; nil when there is
// none.
func readAdaptiveFile(path string) (*StoredState, error) {
	fh, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, outline.Errorf("%s: %w", StateFile, err)
	}
	defer fh.Close()
	// One byte over the limit tells an oversized file from one at it.
	b, err := io.ReadAll(io.LimitReader(fh, MaxStateSize+1))
	if err != nil {
		return nil, outline.Errorf("%s: %w", StateFile, err)
	}
	if len(b) > MaxStateSize {
		return nil, outline.Errorf("%s: over %d bytes", StateFile, MaxStateSize)
	}
	var f StoredState
	if err := ubus.UnmarshalJSON(b, &f); err != nil {
		return nil, outline.Errorf("%s: corrupt: %w", StateFile, err)
	}
	if len(f.Deviations) > MaxStoredDeviations {
		return nil, outline.Errorf("%s: %d deviations, over the limit of %d", StateFile, len(f.Deviations), MaxStoredDeviations)
	}
	return &f, nil
}

// checkStoredDeviation says what is wrong with a stored deviation's
// fields, "" when nothing.
func checkStoredDeviation(d Deviation) string {
	switch {
	case !plan.ValidDeviceName(d.Device):
		return "device name " + outline.Quote(d.Device) + " is not valid"
	case len(d.Queue) < 4 || d.Queue[:3] != "rx-":
		return "queue " + outline.Quote(d.Queue) + " is not an rx queue"
	case d.Kind != UnitRPS && d.Kind != UnitNAPI:
		return "kind " + outline.Quote(d.Kind) + " is not rps or napi"
	case d.CPU < 0 || d.CPU > maxStoredCPU:
		return "cpu " + outline.Itoa(d.CPU) + " is out of range"
	}
	return ""
}

// noteDroppedLocked records a dropped deviation for status (bounded,
// newest last); the caller holds s.mu.
//
//go:noinline
func (s *State) noteDroppedLocked(d DroppedDev) {
	s.dropped = append(s.dropped, d)
	if n := len(s.dropped) - maxDropped; n > 0 {
		s.dropped = slices.Delete(s.dropped, 0, n)
	}
}

// saveLocked writes the deviations and moves to the state file when they
// differ from what was written last (removes it when both are empty); the
// caller holds s.mu and the engine's apply lock. The file is advisory: a
// failed write leaves memory as the truth and is tried again at the next
// apply.
func (s *State) saveLocked() error {
	want := ""
	if len(s.devs) > 0 || len(s.moves) > 0 {
		b, err := ubus.MarshalJSON(StoredState{Deviations: s.devs, Moves: s.moves}, "")
		if err != nil {
			return outline.Errorf("%s: %w", StateFile, err)
		}
		want = string(b)
	}
	if want == s.written {
		return nil
	}
	if want == "" {
		if err := os.Remove(s.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return outline.Errorf("%s: %w", StateFile, err)
		}
		s.written = ""
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(s.path), 0o755); err != nil {
		return outline.Errorf("%s: %w", StateFile, err)
	}
	tmp := s.path + ".new"
	if err := os.WriteFile(tmp, []byte(want), 0o644); err != nil {
		return outline.Errorf("%s: %w", StateFile, err)
	}
	if err := os.Rename(tmp, s.path); err != nil {
		os.Remove(tmp)
		return outline.Errorf("%s: %w", StateFile, err)
	}
	s.written = want
	s.note = ""
	return nil
}

// Applied follows an apply of the engine (not a dry run; the caller holds
// the apply lock): in mode adaptive it resolves the loop's options from the
// apply's snapshot and saves the state; in any other mode it forgets the
// state and removes the file.
func (s *State) Applied(snap *platform.Snapshot, m plan.Mode) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m != plan.ModeAdaptive {
		s.forgetLocked()
		if !s.loaded {
			// A file of an earlier adaptive run (another process's)
			// goes too, unread.
			s.loaded, s.written = true, badStateFile
		}
	} else {
		s.cfg, s.cfgSet = ResolveConfig(snap), true
	}
	_ = s.saveLocked()
}

// Forget drops the deviations, moves and dropped list: a mode change
// starts from the plain plan (adaptive from auto).
func (s *State) Forget() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loadLocked()
	s.forgetLocked()
}

func (s *State) forgetLocked() {
	s.devs, s.moves, s.dropped, s.note = nil, nil, nil, ""
}

// Lay lays the deviations over p (the auto plan for snap, in mode
// adaptive) and forgets those that no longer apply; the dropped ones are
// listed for status and leave the file at the next apply.
func (s *State) Lay(snap *platform.Snapshot, p *plan.Plan) *plan.Plan {
	s.mu.Lock()
	s.loadLocked()
	devs := s.devs
	s.mu.Unlock()
	if len(devs) == 0 {
		return p
	}
	out, kept, dropped := layDeviations(snap, p, devs)
	if len(dropped) > 0 {
		s.mu.Lock()
		// Only if no move changed them meanwhile.
		if slices.Equal(s.devs, devs) {
			s.devs = kept
			now := s.now()
			for _, d := range dropped {
				d.Time = now
				s.noteDroppedLocked(d)
			}
		}
		s.mu.Unlock()
	}
	return out
}

// Begin sets the deviations the moves make (the caller holds the engine's
// apply lock and applies the adaptive plan next) and returns the
// deviations before them, for End.
func (s *State) Begin(moves []Move, now time.Time) (before []Deviation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loadLocked()
	before = s.devs
	s.devs = withMoves(before, moves, now)
	return before
}

// End records how the apply of moves went (changed and failed writes, or
// err) and saves the state: when the apply failed, or some writes did, the
// deviations go back to before (from Begin). It reports whether they did.
func (s *State) End(moves []Move, now time.Time, before []Deviation, changed, failed int, firstFailure string, err error) (restored bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil || failed > 0 {
		s.devs = before
		restored = true
	}
	for _, m := range moves {
		r := MoveRecord{Time: now, Move: m}
		if err != nil {
			r.Error = err.Error()
		} else {
			r.Changed, r.Failed, r.Error = changed, failed, firstFailure
		}
		s.moves = append(s.moves, r)
	}
	if n := len(s.moves) - maxMoveHistory; n > 0 {
		s.moves = slices.Delete(s.moves, 0, n)
	}
	// The apply saved the new deviations; the record of the moves (and a
	// rollback) goes to the state file here.
	_ = s.saveLocked()
	return restored
}

// withMoves returns devs after the moves: a move to the auto CPU removes
// the queue's deviation, any other sets it.
func withMoves(devs []Deviation, moves []Move, now time.Time) []Deviation {
	out := slices.Clone(devs)
	for _, m := range moves {
		out = slices.DeleteFunc(out, func(d Deviation) bool { return d.Key() == m.Key() })
		if m.To != m.Home {
			out = append(out, Deviation{Device: m.Device, Queue: m.Queue, Kind: m.Kind, Home: m.Home, CPU: m.To, Reason: m.Reason, Since: now})
		}
	}
	// sort.Slice, not slices.SortFunc: the generic sort instantiated for
	// Deviation costs the router binary about 10 KB.
	sort.Slice(out, func(i, j int) bool { return out[i].Key() < out[j].Key() })
	return out
}
