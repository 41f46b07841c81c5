package steering

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/packet-steering/packet-steering/internal/outline"
)

// ApplyMarkerFile is the file, in <root>/var/run (tmpfs on OpenWrt), that
// exists while an apply writes knobs: it is written, under the apply lock,
// before the first write and removed after the last. Found by the next apply
// (which holds the same lock, so its writer is gone), it means the previous
// apply was killed midway (OOM killer, SIGKILL): some devices may have been
// left half-written. The next apply reads every knob and writes every one
// that differs, so it puts every device wholly into the configured state;
// the daemon applies at start anyway. A reboot clears /var/run, and the boot
// apply writes everything too.
const ApplyMarkerFile = "packet-steering.applying"

// UnfinishedApply describes an apply that did not finish, as its marker file
// recorded it; status shows it.
type UnfinishedApply struct {
	_       outline.NoCompare
	Reason  string    `json:"reason"`
	Started time.Time `json:"started"`
	PID     int       `json:"pid"`
	// FoundBy is the reason of the apply that found the marker and put
	// every device into the configured state.
	FoundBy string    `json:"found_by"`
	FoundAt time.Time `json:"found_at"`
}

// markerPath is the marker file of the engine's root.
//
//go:noinline
func (e *Engine) markerPath() string { return outline.JoinPath(e.runDir, ApplyMarkerFile) }

// beginApply prepares an apply that may write (the caller holds the apply
// lock): it takes note of a previous apply's marker and returns whether
// there was one, and the function to call before each write, which writes
// this apply's marker before the first (an apply that finds everything in
// sync writes none). A marker that cannot be written does not stop the
// apply.
func (e *Engine) beginApply(reason string) (before func(), found bool) {
	path := e.markerPath()
	if prev, err := readMarker(path); err == nil && prev != nil {
		prev.FoundBy, prev.FoundAt = reason, e.now()
		e.mu.Lock()
		e.unfinished = prev
		e.mu.Unlock()
		found = true
	}
	marked := false
	return func() {
		if !marked {
			marked = true
			_ = writeMarker(path, reason, os.Getpid(), e.now())
		}
	}, found
}

// endApply removes the marker once every write of the apply is done: its
// own, when the apply tried to write anything (wrote: it changed, failed or
// skipped a knob), or the one it found.
func (e *Engine) endApply(wrote, found bool) {
	if wrote || found {
		_ = os.Remove(e.markerPath())
	}
}

func writeMarker(path, reason string, pid int, now time.Time) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return outline.Errorf("apply marker: %w", err)
	}
	body := "pid=" + outline.Itoa(pid) + "\nstarted_ns=" + strconv.FormatInt(now.UnixNano(), 10) +
		"\nreason=" + outline.Quote(reason) + "\n"
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		return outline.Errorf("apply marker: %w", err)
	}
	return nil
}

// readMarker returns the apply a marker file describes, nil when there is
// none. Unreadable fields are left zero: the marker's existence is what
// counts.
func readMarker(path string) (*UnfinishedApply, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, outline.Errorf("apply marker: %w", err)
	}
	u := &UnfinishedApply{}
	for _, line := range bytes.Split(b, []byte("\n")) {
		k, v, ok := bytes.Cut(line, []byte("="))
		if !ok {
			continue
		}
		switch string(k) {
		case "pid":
			u.PID, _ = strconv.Atoi(string(v))
		case "started_ns":
			// Unix nanoseconds: no time.Parse in the router binary (its
			// layout parser is about 20 KB on mipsle).
			if ns, err := strconv.ParseInt(string(v), 10, 64); err == nil {
				u.Started = time.Unix(0, ns).UTC()
			}
		case "reason":
			if s, err := strconv.Unquote(string(v)); err == nil {
				u.Reason = s
			}
		}
	}
	return u, nil
}
