package steering

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/packet-steering/packet-steering/internal/testenv"
	"github.com/packet-steering/packet-steering/platform/fixture/fixturetest"
)

// slowWriter is the fixture writer with a pause before every write, so an
// apply can be killed midway.
type slowWriter struct {
	*FSWriter
	pause time.Duration
}

// WriteKnob and SetThreadAffinity pause before each write and print a line
// to stdout after it, which TestKillDuringApply waits for.
func (w slowWriter) WriteKnob(rel, value string) error {
	time.Sleep(w.pause)
	err := w.FSWriter.WriteKnob(rel, value)
	fmt.Println("wrote", rel)
	return err
}

func (w slowWriter) SetThreadAffinity(pid int, comm, cpus string) error {
	time.Sleep(w.pause)
	err := w.FSWriter.SetThreadAffinity(pid, comm, cpus)
	fmt.Println("moved", pid)
	return err
}

// killHelperEnv marks the re-executed test binary as the process killed
// during its apply; its value is the root.
const killHelperEnv = "STEERING_KILL_HELPER_ROOT"

// slowApplyHelper is the process of TestKillDuringApply that applies
// slowly until it is killed (see TestMain).
func slowApplyHelper() error {
	root := os.Getenv(killHelperEnv)
	e := NewEngine(root, WithWriter(slowWriter{FSWriter: NewFSWriter(root), pause: 40 * time.Millisecond}))
	if _, err := e.Apply(context.Background(), ApplyRequest{Reason: "slow"}); err != nil {
		return err
	}
	return errors.New("the slow apply finished: it should have been killed")
}

// TestKillDuringApply: an apply SIGKILLed after some of its writes leaves
// devices half-written and its marker behind; the next apply (the
// restarted daemon's "start") puts every device wholly into the configured
// state, and status says the previous apply did not finish.
func TestKillDuringApply(t *testing.T) {
	root := fixturetest.Root(t, "demo", nil)
	marker := filepath.Join(root, "var/run", ApplyMarkerFile)
	first, err := NewEngine(root).Apply(context.Background(), ApplyRequest{Reason: "count", DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	total := len(first.Changed)
	if total < 4 {
		t.Fatalf("the fixture needs %d writes: too few to kill an apply midway", total)
	}
	helper, err := testenv.HelperCommand("slow-apply", killHelperEnv+"="+root)
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	// Two writes reported (a signal, not a sleep: under an emulator the
	// helper is many times slower).
	written := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for n := 0; sc.Scan(); n++ {
			if n == 1 {
				close(written)
			}
		}
	}()
	exited := make(chan error, 1)
	go func() { exited <- helper.Wait() }()
	// The marker, then a few writes (40 ms each).
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(marker); err == nil {
			break
		}
		if time.Now().After(deadline) {
			helper.Process.Kill()
			t.Fatal("no apply marker from the slow apply")
		}
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case <-written:
	case <-time.After(30 * time.Second):
		helper.Process.Kill()
		t.Fatal("the slow apply reported no writes")
	}
	if err := helper.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := <-exited; err == nil {
		t.Fatal("the slow apply finished before it was killed")
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("marker gone after the kill: %v", err)
	}

	// Half-written: some knobs changed, not all.
	e := NewEngine(root)
	ctx := context.Background()
	dry, err := e.Apply(ctx, ApplyRequest{Reason: "check", DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(dry.Changed) == 0 || len(dry.Changed) >= total {
		t.Fatalf("%d of %d knobs left to write after the kill: want a half-done apply", len(dry.Changed), total)
	}
	if st, err := e.Status(ctx); err != nil || st.UnfinishedApply != nil {
		t.Fatalf("status before any apply: %+v, %v; a dry run or a read must not claim the marker", st, err)
	}

	// The restart: its start apply finds the marker.
	res, err := e.Apply(ctx, ApplyRequest{Reason: "start"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Failed) != 0 || len(res.Changed) != len(dry.Changed) {
		t.Errorf("start apply: %d changed, %d failed; want the %d left by the killed apply", len(res.Changed), len(res.Failed), len(dry.Changed))
	}
	st, err := e.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !st.InSync {
		t.Error("not in sync after the start apply")
	}
	u := st.UnfinishedApply
	if u == nil || u.Reason != "slow" || u.PID != helper.Process.Pid || u.FoundBy != "start" || u.Started.IsZero() {
		t.Errorf("unfinished apply %+v, want reason slow, pid %d, found by start", u, helper.Process.Pid)
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Errorf("marker after the start apply: %v", err)
	}
	again, err := e.Apply(ctx, ApplyRequest{Reason: "again", DryRun: true})
	if err != nil || len(again.Changed) != 0 {
		t.Errorf("a second apply would change %v (%v): devices not wholly configured", again, err)
	}
	t.Logf("killed with %d of %d knobs written; the start apply wrote the %d left", total-len(dry.Changed), total, len(res.Changed))
}

// markerCheckWriter is the fixture writer recording, at each write,
// whether the apply marker exists.
type markerCheckWriter struct {
	*FSWriter
	marker  string
	missing int // writes made while no marker existed
	writes  int
}

func (w *markerCheckWriter) check() {
	w.writes++
	if _, err := os.Stat(w.marker); err != nil {
		w.missing++
	}
}

func (w *markerCheckWriter) WriteKnob(rel, value string) error {
	w.check()
	return w.FSWriter.WriteKnob(rel, value)
}

func (w *markerCheckWriter) SetThreadAffinity(pid int, comm, cpus string) error {
	w.check()
	return w.FSWriter.SetThreadAffinity(pid, comm, cpus)
}

// TestApplyMarkerOnlyWhenWriting: an apply that writes has its marker in
// place at every write and removes it after; an apply that finds
// everything in sync writes no marker at all (the marker path here is a
// link to a file that must never come to exist), and one that finds a
// previous apply's marker removes it even when it writes nothing.
func TestApplyMarkerOnlyWhenWriting(t *testing.T) {
	ctx := context.Background()
	root := fixturetest.Root(t, "ipq807x", nil)
	marker := filepath.Join(root, "var/run", ApplyMarkerFile)
	w := &markerCheckWriter{FSWriter: NewFSWriter(root), marker: marker}
	e := NewEngine(root, WithWriter(w))
	res, err := e.Apply(ctx, ApplyRequest{Reason: "first"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Changed) == 0 || w.writes == 0 {
		t.Fatalf("first apply wrote nothing (%d changed)", len(res.Changed))
	}
	if w.missing != 0 {
		t.Errorf("%d of %d writes made without the marker", w.missing, w.writes)
	}
	if _, err := os.Lstat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("marker left after the apply: %v", err)
	}

	target := filepath.Join(t.TempDir(), "created")
	if err := os.Symlink(target, marker); err != nil {
		t.Fatal(err)
	}
	if res, err := e.Apply(ctx, ApplyRequest{Reason: "in sync"}); err != nil || len(res.Changed) != 0 {
		t.Fatalf("second apply: %v, changed %v", err, res)
	}
	if _, err := os.Stat(target); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("an in-sync apply wrote its marker (%v)", err)
	}
	if err := os.Remove(marker); err != nil {
		t.Fatal(err)
	}

	if err := os.WriteFile(marker, []byte("pid=4242\nreason=\"killed\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if res, err := e.Apply(ctx, ApplyRequest{Reason: "after a kill"}); err != nil || len(res.Changed) != 0 {
		t.Fatalf("third apply: %v, changed %v", err, res)
	}
	if _, err := os.Lstat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the previous apply's marker is still there: %v", err)
	}
}
