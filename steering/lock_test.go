package steering

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/packet-steering/packet-steering/internal/testenv"
	"github.com/packet-steering/packet-steering/plan"
	"github.com/packet-steering/packet-steering/platform"
	"github.com/packet-steering/packet-steering/platform/fixture/fixturetest"
)

// lockHelperEnv marks the re-executed test binary as a lock-holding helper;
// its value is the lock directory.
const lockHelperEnv = "STEERING_LOCK_HELPER_DIR"

// TestMain runs the package's tests, or, in a re-executed test binary, one
// of the helper processes the tests start.
func TestMain(m *testing.M) {
	testenv.Main(m, map[string]func() int{
		"lock":       func() int { return testenv.Exit(lockHelper()) },
		"apply":      func() int { return testenv.Exit(applyHelper()) },
		"uci-writer": func() int { return testenv.Exit(uciWriterHelper()) },
		"slow-apply": func() int { return testenv.Exit(slowApplyHelper()) },
	})
}

// holdLockRounds appends "begin ID" and "end ID" lines to dir/log while
// holding the engine's locks, rounds times, with a pause inside.
func holdLockRounds(ctx context.Context, e *Engine, dir, id string, rounds int) error {
	for i := 0; i < rounds; i++ {
		unlock, err := e.lock(ctx)
		if err != nil {
			return err
		}
		err = appendLine(filepath.Join(dir, "log"), "begin "+id)
		time.Sleep(500 * time.Microsecond)
		if err == nil {
			err = appendLine(filepath.Join(dir, "log"), "end "+id)
		}
		unlock()
		if err != nil {
			return err
		}
	}
	return nil
}

func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteString(line + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// lockHelper is the body of the helper processes
// TestLockSerialisesProcesses starts (see TestMain).
func lockHelper() error {
	dir := os.Getenv(lockHelperEnv)
	e := NewEngine(dir, WithLockDir(dir))
	return holdLockRounds(context.Background(), e, dir, fmt.Sprint(os.Getpid()), 30)
}

// checkNoInterleave verifies the log holds begin/end pairs of one holder.
func checkNoInterleave(t *testing.T, log string, wantPairs int) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(log), "\n")
	if len(lines) != 2*wantPairs {
		t.Fatalf("%d log lines, want %d", len(lines), 2*wantPairs)
	}
	holders := map[string]bool{}
	for i := 0; i < len(lines); i += 2 {
		b, e := lines[i], lines[i+1]
		id := strings.TrimPrefix(b, "begin ")
		if !strings.HasPrefix(b, "begin ") || e != "end "+id {
			t.Fatalf("lines %d-%d interleave: %q, %q", i+1, i+2, b, e)
		}
		holders[id] = true
	}
	if len(holders) < 2 {
		t.Fatalf("only %d holder(s) took the lock", len(holders))
	}
}

// runTwoHelpers runs two copies of this test binary at once, each as the
// named helper process (see TestMain) with env set, and waits for both.
func runTwoHelpers(t *testing.T, helper, env string) {
	t.Helper()
	var cmds []*exec.Cmd
	for i := 0; i < 2; i++ {
		c, err := testenv.HelperCommand(helper, env)
		if err != nil {
			t.Fatal(err)
		}
		out := &strings.Builder{}
		c.Stdout, c.Stderr = out, out
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, c)
	}
	for _, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("helper: %v\n%s", err, c.Stdout)
		}
	}
}

func TestLockSerialisesProcesses(t *testing.T) {
	dir := t.TempDir()
	runTwoHelpers(t, "lock", lockHelperEnv+"="+dir)
	b, err := os.ReadFile(filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	checkNoInterleave(t, string(b), 60)
	for _, n := range []string{LockFile, StockLockFile} {
		if _, err := os.Stat(filepath.Join(dir, n)); err != nil {
			t.Errorf("lock file %s: %v", n, err)
		}
	}
}

func TestLockSerialisesGoroutines(t *testing.T) {
	dir := t.TempDir()
	e := NewEngine(dir, WithLockDir(dir))
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for i := 0; i < 3; i++ {
		wg.Add(1)
		go func(id int) {
			defer wg.Done()
			errs <- holdLockRounds(context.Background(), e, dir, fmt.Sprint("g", id), 10)
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	b, _ := os.ReadFile(filepath.Join(dir, "log"))
	checkNoInterleave(t, string(b), 30)
}

func TestLockHonoursStockLockAndContext(t *testing.T) {
	dir := t.TempDir()
	// Another holder of the stock hotplug lock only (as the stock script
	// would hold it).
	other, err := acquireFileLock(context.Background(), dir, StockLockFile)
	if err != nil {
		t.Fatal(err)
	}
	e := NewEngine(dir, WithLockDir(dir))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := e.lock(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("lock while smp_tune.lock is held: %v, want deadline exceeded", err)
	}
	// Nothing stays held after the failed attempt: our own lock is free.
	mine, err := acquireFileLock(context.Background(), dir, LockFile)
	if err != nil {
		t.Fatal(err)
	}
	mine.release()
	other.release()
	unlock, err := e.lock(context.Background())
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	unlock()
}

// applyHelperEnv marks the re-executed test binary as a process running
// applies; its value is the fixture root.
const applyHelperEnv = "STEERING_APPLY_HELPER_ROOT"

// logWriter is the real Writer that also logs each write with its process.
type logWriter struct {
	*FSWriter
	log, id string
}

func (w logWriter) WriteKnob(rel, value string) error {
	if err := appendLine(w.log, "write "+w.id); err != nil {
		return err
	}
	return w.FSWriter.WriteKnob(rel, value)
}

func (w logWriter) SetThreadAffinity(pid int, comm, cpus string) error {
	if err := appendLine(w.log, "write "+w.id); err != nil {
		return err
	}
	return w.FSWriter.SetThreadAffinity(pid, comm, cpus)
}

// applyHelper is the body of the processes
// TestAppliesFromTwoProcessesNeverInterleave starts (see TestMain).
func applyHelper() error {
	root := os.Getenv(applyHelperEnv)
	id := fmt.Sprint(os.Getpid())
	log := filepath.Join(root, "applies.log")
	e := NewEngine(root,
		WithWriter(logWriter{FSWriter: NewFSWriter(root), log: log, id: id}),
		// Each apply reads the machine once, under the lock, first.
		WithReader(func(ctx context.Context, r string) (*platform.Snapshot, error) {
			if err := appendLine(log, "begin "+id); err != nil {
				return nil, err
			}
			return platform.Read(ctx, r)
		}))
	modes := []plan.Mode{plan.ModeLegacy, plan.ModeAuto, plan.ModeOff}
	for i := 0; i < 12; i++ {
		res, err := e.SetMode(context.Background(), SetModeRequest{Mode: modes[i%len(modes)]})
		if err != nil {
			return err
		}
		if len(res.Failed) != 0 {
			return fmt.Errorf("failed: %+v", res.Failed)
		}
	}
	return nil
}

func TestAppliesFromTwoProcessesNeverInterleave(t *testing.T) {
	root := fixturetest.Root(t, "ipq807x", nil)
	runTwoHelpers(t, "apply", applyHelperEnv+"="+root)
	b, err := os.ReadFile(filepath.Join(root, "applies.log"))
	if err != nil {
		t.Fatal(err)
	}
	holder := ""
	applies, writes := map[string]int{}, 0
	for i, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		what, id, _ := strings.Cut(line, " ")
		switch what {
		case "begin":
			holder = id
			applies[id]++
		case "write":
			writes++
			if id != holder {
				t.Fatalf("line %d: process %s writes during an apply of %s", i+1, id, holder)
			}
		}
	}
	if len(applies) != 2 || writes == 0 {
		t.Fatalf("applies %v, %d writes: the helpers did not both apply", applies, writes)
	}
}

func TestLockApplies(t *testing.T) {
	dir := t.TempDir()
	release, err := LockApplies(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	// A second holder (another open file description, as another process
	// would have) waits, then gives up when its context ends.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = LockApplies(ctx, dir)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "another apply or tune") {
		t.Fatalf("second lock: err = %v", err)
	}
	if time.Since(start) > 2*time.Second {
		t.Errorf("waited %v", time.Since(start))
	}
	release()
	release() // a second release is harmless
	release2, err := LockApplies(context.Background(), dir)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	release2()
}
