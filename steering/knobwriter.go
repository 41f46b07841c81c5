package steering

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/packet-steering/packet-steering/internal/cpuset"
	"github.com/packet-steering/packet-steering/internal/kfs"
	"github.com/packet-steering/packet-steering/internal/outline"
	"github.com/packet-steering/packet-steering/platform"
	"golang.org/x/sys/unix"
)

// Writer is the applier's only way to touch the machine: it reads and writes
// knob files (sysfs, procfs) below a root and reads and sets the CPU affinity
// of kernel threads. Paths are slash-separated and relative to the root; the
// applier derives them from validated names only.
//
// Errors must keep the kernel's errno reachable with errors.Is (an
// *fs.PathError or a unix.Errno), so that a vanished target (ENOENT, ENODEV,
// ESRCH) can be told from a refused value (EINVAL).
type Writer interface {
	// ReadKnob returns the file's content without surrounding white space.
	ReadKnob(rel string) (string, error)
	// WriteKnob writes value to an existing file; it never creates one.
	WriteKnob(rel, value string) error
	// ThreadAffinity returns the cpu list (e.g. "0-3") kernel thread pid
	// may run on. comm is the thread name the caller expects.
	ThreadAffinity(pid int, comm string) (string, error)
	// SetThreadAffinity restricts kernel thread pid to the cpu list. It
	// refuses (ErrNotKernelThread) when pid is no longer a kernel thread
	// named comm.
	SetThreadAffinity(pid int, comm, cpus string) error
}

// NAPIWriter is what a Writer implements to read and write the per-NAPI
// knobs (netlink napi-get and napi-set; knob is a platform.NAPIKnob*
// name, values are decimal text). A Writer without it cannot apply them:
// those actions fail with platform.ErrNAPIKnobsUnsupported. Errors keep
// fs.ErrNotExist reachable for a NAPI that is gone.
type NAPIWriter interface {
	NAPIKnob(id int, knob string) (string, error)
	SetNAPIKnob(id int, knob, value string) error
}

// ErrNotKernelThread is returned when a PID names a user process or a
// different thread than the plan expected; such a PID is never touched.
var ErrNotKernelThread = errors.New("not the expected kernel thread")

// FSWriter is the Writer for a machine below Root. With Root "/" thread
// affinity goes through sched_setaffinity(2); below any other root (a fixture)
// the Cpus_allowed_list and Cpus_allowed lines of proc/PID/status are
// rewritten instead, so tests never pin a real thread.
type FSWriter struct {
	Root string
}

// NewFSWriter returns the Writer for root.
func NewFSWriter(root string) *FSWriter { return &FSWriter{Root: root} }

//go:noinline
func (w *FSWriter) real() bool { return filepath.Clean(w.Root) == "/" }

func (w *FSWriter) path(rel string) (string, error) {
	if rel == "" || filepath.IsAbs(rel) || strings.Contains(rel, "..") {
		return "", outline.Errorf("steering: refusing knob path %q", rel)
	}
	return outline.JoinPath(w.Root, filepath.FromSlash(rel)), nil
}

// ReadKnob implements Writer.
func (w *FSWriter) ReadKnob(rel string) (string, error) {
	p, err := w.path(rel)
	if err != nil {
		return "", err
	}
	var stack [512]byte
	b, err := kfs.ReadPath(p, stack[:0])
	if err != nil {
		return "", err
	}
	return string(bytes.TrimSpace(b)), nil
}

// WriteKnob implements Writer. The value goes out in one write(2), followed by
// a newline as `echo` would send it; sysfs and procfs parse either. Below a
// fixture root the file is then cut to the new length (it is an ordinary
// file there); it is never opened with O_TRUNC, which ext4 answers with a
// flush on close (auto_da_alloc) that would make a fixture apply slow.
func (w *FSWriter) WriteKnob(rel, value string) error {
	p, err := w.path(rel)
	if err != nil {
		return err
	}
	if err := kfs.WritePath(p, []byte(value+"\n"), !w.real()); err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) && pe.Op == "close" {
			return outline.Errorf("close %s: %w", rel, err)
		}
		return err
	}
	return nil
}

// checkKernelThread reads proc/PID/stat below the root and verifies that the
// PID is a kernel thread named comm.
func (w *FSWriter) checkKernelThread(pid int, comm string) error {
	if pid <= 0 {
		return outline.Errorf("pid %d: %w", pid, ErrNotKernelThread)
	}
	rel := "proc/" + outline.Itoa(pid) + "/stat"
	stat, err := w.ReadKnob(rel)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return outline.Errorf("pid %d: %w", pid, unix.ESRCH)
		}
		return err
	}
	st, err := platform.ParseTaskStat([]byte(stat))
	if err != nil {
		return outline.Errorf("%s: %w", rel, err)
	}
	name := st.Comm
	if !st.Kernel {
		return outline.Errorf("pid %d (%s) is a user process: %w", pid, name, ErrNotKernelThread)
	}
	if name != comm {
		return outline.Errorf("pid %d is now %q, not %q: %w", pid, name, comm, ErrNotKernelThread)
	}
	return nil
}

// NAPIKnob implements NAPIWriter: with Root "/" through netlink in the
// calling thread's network namespace; below a fixture root per-NAPI knobs
// are not supported (a fixture snapshot has no netlink map).
func (w *FSWriter) NAPIKnob(id int, knob string) (string, error) {
	if !w.real() {
		return "", outline.Errorf("%w (below a fixture root)", platform.ErrNAPIKnobsUnsupported)
	}
	return platform.NAPIKnob(context.Background(), id, knob, "", false)
}

// SetNAPIKnob implements NAPIWriter (see NAPIKnob).
func (w *FSWriter) SetNAPIKnob(id int, knob, value string) error {
	if !w.real() {
		return outline.Errorf("%w (below a fixture root)", platform.ErrNAPIKnobsUnsupported)
	}
	_, err := platform.NAPIKnob(context.Background(), id, knob, value, true)
	return err
}

// ThreadAffinity implements Writer.
func (w *FSWriter) ThreadAffinity(pid int, comm string) (string, error) {
	if err := w.checkKernelThread(pid, comm); err != nil {
		return "", err
	}
	if w.real() {
		var set unix.CPUSet
		if err := unix.SchedGetaffinity(pid, &set); err != nil {
			return "", outline.Errorf("sched_getaffinity %d: %w", pid, err)
		}
		return cpuSetList(&set), nil
	}
	rel := "proc/" + outline.Itoa(pid) + "/status"
	status, err := w.ReadKnob(rel)
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(status, "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", outline.Errorf("%s: no Cpus_allowed_list line", rel)
}

// SetThreadAffinity implements Writer.
func (w *FSWriter) SetThreadAffinity(pid int, comm, cpus string) error {
	set, err := cpuset.ParseList(cpus)
	if err != nil {
		return outline.Errorf("cpu list %q: %w", cpus, err)
	}
	if err := w.checkKernelThread(pid, comm); err != nil {
		return err
	}
	if w.real() {
		var us unix.CPUSet
		for _, c := range set.CPUs() {
			if c >= len(us)*64 {
				return outline.Errorf("cpu %d beyond the sched_setaffinity set: %w", c, unix.EINVAL)
			}
			us.Set(c)
		}
		if err := unix.SchedSetaffinity(pid, &us); err != nil {
			return outline.Errorf("sched_setaffinity %d: %w", pid, err)
		}
		return nil
	}
	return w.rewriteStatus(pid, set)
}

// rewriteStatus is the fixture form of sched_setaffinity: the two lines of
// proc/PID/status that show the affinity are replaced, the rest is kept.
func (w *FSWriter) rewriteStatus(pid int, set cpuset.Set) error {
	rel := "proc/" + outline.Itoa(pid) + "/status"
	p, err := w.path(rel)
	if err != nil {
		return err
	}
	b, err := kfs.ReadPath(p, nil)
	if err != nil {
		return err
	}
	lines := strings.Split(string(b), "\n")
	found := false
	for i, line := range lines {
		switch {
		case strings.HasPrefix(line, "Cpus_allowed_list:"):
			lines[i] = "Cpus_allowed_list:\t" + set.List()
			found = true
		case strings.HasPrefix(line, "Cpus_allowed:"):
			old := strings.TrimSpace(strings.TrimPrefix(line, "Cpus_allowed:"))
			lines[i] = "Cpus_allowed:\t" + kernelWidthMask(set, old)
		}
	}
	if !found {
		return outline.Errorf("%s: no Cpus_allowed_list line", rel)
	}
	return w.WriteKnob(rel, strings.TrimRight(strings.Join(lines, "\n"), "\n"))
}

// kernelWidthMask formats set as the kernel prints Cpus_allowed: as wide as
// the mask it replaces, since the kernel prints every mask nr_cpu_ids bits
// wide (%*pb).
func kernelWidthMask(set cpuset.Set, old string) string {
	nbits := 0
	for _, g := range strings.Split(old, ",") {
		if nbits > 0 {
			nbits += 32
			continue
		}
		nbits = 4 * len(g)
	}
	if nbits < set.Max()+1 {
		return set.Mask()
	}
	return set.KernelMask(nbits)
}

// cpuSetList formats a unix.CPUSet as a cpu list ("0-3,6").
func cpuSetList(s *unix.CPUSet) string {
	return cpuset.FromFunc(len(s)*64, s.IsSet).List()
}
