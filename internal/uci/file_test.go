package uci

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/packet-steering/packet-steering/internal/testenv"
	"golang.org/x/sys/unix"
)

func writeFile(t *testing.T, path, text string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), mode); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "network"), networkConf, 0o644)
	writeFile(t, filepath.Join(dir, "broken"), "config t s\noption a 'b\n", 0o644)

	p, err := Load(dir, "network")
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "network" {
		t.Errorf("Name = %q", p.Name)
	}
	if v, _ := p.Get("globals", "packet_steering"); v != "1" {
		t.Errorf("packet_steering = %q", v)
	}

	if _, err := Load(dir, "absent"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load(absent) = %v, want fs.ErrNotExist", err)
	}
	var pe *ParseError
	if _, err := Load(dir, "broken"); !errors.As(err, &pe) || pe.Line != 2 || pe.File != filepath.Join(dir, "broken") {
		t.Errorf("Load(broken) = %v, want *ParseError at %s:2", err, filepath.Join(dir, "broken"))
	}
	for _, bad := range []string{"../network", "a/b", "", ".network"} {
		if _, err := Load(dir, bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("Load(%q) = %v, want ErrInvalid", bad, err)
		}
	}
}

func TestCommit(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "network")
	writeFile(t, path, networkConf, 0o640)
	p, err := Load(dir, "network")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Set("globals", "packet_steering", "0"); err != nil {
		t.Fatal(err)
	}
	if err := Commit(dir, p); err != nil {
		t.Fatal(err)
	}
	got := readFile(t, path)
	if !strings.Contains(got, "\toption packet_steering '0'\n") || !strings.HasPrefix(got, "\nconfig interface 'loopback'\n") {
		t.Errorf("committed file:\n%s", got)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o640 {
		t.Errorf("mode = %v, want 0640 kept", st.Mode().Perm())
	}
	assertNoTemp(t, dir)

	// An unchanged commit writes nothing: same inode.
	before := inode(t, path)
	if err := Commit(dir, p); err != nil {
		t.Fatal(err)
	}
	if inode(t, path) != before {
		t.Error("unchanged commit replaced the file")
	}

	// A new package creates its file with libuci's mode.
	q := &Package{Name: "packet_steering"}
	s, err := q.AddSection("globals", "globals")
	if err != nil {
		t.Fatal(err)
	}
	_ = s
	if err := q.Set("globals", "mode", "auto"); err != nil {
		t.Fatal(err)
	}
	if err := Commit(dir, q); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(dir, "packet_steering")); got != "\nconfig globals 'globals'\n\toption mode 'auto'\n\n" {
		t.Errorf("new file = %q", got)
	}
	if st, err := os.Stat(filepath.Join(dir, "packet_steering")); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("new file mode = %v, %v; want 0600", st.Mode().Perm(), err)
	}
}

func TestCommitThroughSymlink(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	if err := os.Mkdir(real, 0o755); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "conf")
	if err := os.Mkdir(conf, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(real, "x"), "config t s\n", 0o644)
	if err := os.Symlink("../real/x", filepath.Join(conf, "x")); err != nil {
		t.Fatal(err)
	}
	err := Update(conf, "x", func(p *Package) error { return p.Set("s", "a", "1") })
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(filepath.Join(conf, "x")); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("symlink replaced: %v %v", fi, err)
	}
	if got := readFile(t, filepath.Join(real, "x")); got != "\nconfig t 's'\n\toption a '1'\n\n" {
		t.Errorf("target = %q", got)
	}
}

func TestCommitRefusesUnparsableFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "network")
	const corrupt = "config interface 'lan'\n\toption ipaddr '192.168.1.1\n"
	writeFile(t, path, corrupt, 0o644)
	p := mustParse(t, "network", networkConf)

	var pe *ParseError
	if err := Commit(dir, p); !errors.As(err, &pe) {
		t.Errorf("Commit over a corrupt file = %v, want a *ParseError", err)
	}
	called := false
	if err := Update(dir, "network", func(*Package) error { called = true; return nil }); !errors.As(err, &pe) {
		t.Errorf("Update of a corrupt file = %v, want a *ParseError", err)
	}
	if called {
		t.Error("Update called fn on a corrupt file")
	}
	if got := readFile(t, path); got != corrupt {
		t.Errorf("corrupt file was changed to %q", got)
	}
	assertNoTemp(t, dir)
}

func TestUpdate(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "packet_steering")

	// Absent file: created; fn sees an empty package.
	err := Update(dir, "packet_steering", func(p *Package) error {
		if len(p.Sections) != 0 || p.Name != "packet_steering" {
			t.Errorf("fresh package = %+v", p)
		}
		if _, err := p.AddSection("globals", "globals"); err != nil {
			return err
		}
		return p.Set("globals", "mode", "legacy")
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, path); got != "\nconfig globals 'globals'\n\toption mode 'legacy'\n\n" {
		t.Errorf("file = %q", got)
	}

	// fn fails: nothing written, the error comes back wrapped.
	boom := errors.New("boom")
	before := inode(t, path)
	err = Update(dir, "packet_steering", func(p *Package) error {
		_ = p.Set("globals", "mode", "off")
		return boom
	})
	if !errors.Is(err, boom) {
		t.Errorf("Update = %v, want boom", err)
	}
	if inode(t, path) != before || !strings.Contains(readFile(t, path), "legacy") {
		t.Error("failed Update wrote the file")
	}

	// No change: nothing written.
	if err := Update(dir, "packet_steering", func(p *Package) error { return p.Set("globals", "mode", "legacy") }); err != nil {
		t.Fatal(err)
	}
	if inode(t, path) != before {
		t.Error("no-op Update replaced the file")
	}

	// Invalid content from fn: nothing written.
	err = Update(dir, "packet_steering", func(p *Package) error {
		p.Sections = append(p.Sections, &Section{Name: "bad name", Type: "t"})
		return nil
	})
	if !errors.Is(err, ErrInvalid) || inode(t, path) != before {
		t.Errorf("Update with invalid content = %v (file replaced: %v)", err, inode(t, path) != before)
	}

	// An absent file that fn leaves empty stays empty.
	if err := Update(dir, "empty", func(*Package) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(dir, "empty")); got != "" {
		t.Errorf("empty = %q", got)
	}
	assertNoTemp(t, dir)
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

func assertNoTemp(t *testing.T, dir string) {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, ".*.uci-*"))
	if len(m) > 0 {
		t.Errorf("temp files left: %q", m)
	}
}

// TestMain runs the tests, or, in a re-executed test binary, one of the
// helper processes they start (testenv.HelperCommand), working in the
// directory UCI_TEST_DIR.
func TestMain(m *testing.M) {
	dir := os.Getenv("UCI_TEST_DIR")
	testenv.Main(m, map[string]func() int{
		"increment": func() int {
			n, _ := strconv.Atoi(os.Getenv("UCI_TEST_N"))
			return testenv.Exit(increments(dir, "proc", 4, n))
		},
		"readonly": func() int { return testenv.Exit(helperReadOnly(dir)) },
		"full":     func() int { return testenv.Exit(helperFull(dir)) },
	})
}

// increments runs workers goroutines each doing n Updates of the counter
// file: n+1 and one list item naming the writer, in one Update.
func increments(dir, who string, workers, n int) error {
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < n; i++ {
				err := Update(dir, "counter", func(p *Package) error {
					if p.Section("c") == nil {
						if _, err := p.AddSection("counter", "c"); err != nil {
							return err
						}
					}
					v, _ := p.Get("c", "n")
					cur, _ := strconv.Atoi(v)
					if err := p.Set("c", "n", strconv.Itoa(cur+1)); err != nil {
						return err
					}
					items := append(p.Section("c").List("done"), fmt.Sprintf("%s_%d_%d", who, w, i))
					return p.SetList("c", "done", items)
				})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// readUnlocked reads path without a lock; current is whether the file read
// is still the one at path afterwards (not replaced by a commit meanwhile).
func readUnlocked(path string) (data []byte, current bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	data, err = io.ReadAll(f)
	if err != nil {
		return nil, false, err
	}
	held, err := f.Stat()
	if err != nil {
		return nil, false, err
	}
	now, err := os.Stat(path)
	if err != nil {
		return data, false, nil
	}
	return data, os.SameFile(held, now), nil
}

// TestConcurrentUpdates: goroutines here and in a second process update the
// same file; a reader checks every state it sees is whole (n equals the
// number of items), and at the end no update is lost.
func TestConcurrentUpdates(t *testing.T) {
	dir := t.TempDir()
	const perWorker = 25
	cmd, err := testenv.HelperCommand("increment", "UCI_TEST_DIR="+dir, "UCI_TEST_N="+strconv.Itoa(perWorker))
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}

	stop := make(chan struct{})
	readerDone := make(chan error, 1)
	go func() {
		seen := 0
		for {
			select {
			case <-stop:
				if seen == 0 {
					readerDone <- errors.New("reader saw no state")
				}
				readerDone <- nil
				return
			default:
			}
			// Locked read, and an unlocked one: rename makes both whole
			// as long as the file read is still the one at the path.
			// A file replaced during the read may be rewritten in place
			// (rewriteReplaced, for a stock uci waiting on it), so an
			// unlocked read of it is checked only when it was not.
			p, err := Load(dir, "counter")
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				readerDone <- err
				return
			}
			raw, current, err := readUnlocked(filepath.Join(dir, "counter"))
			if err != nil {
				readerDone <- err
				return
			}
			xs := []*Package{p}
			if current {
				q, err := Parse("raw", bytes.NewReader(raw))
				if err != nil {
					readerDone <- fmt.Errorf("unlocked read: %w", err)
					return
				}
				xs = append(xs, q)
			}
			for _, x := range xs {
				if x.Section("c") == nil {
					continue // created empty, not yet written
				}
				v, _ := x.Get("c", "n")
				if n, _ := strconv.Atoi(v); n != len(x.Section("c").List("done")) {
					readerDone <- fmt.Errorf("mixed state: n=%s with %d items", v, len(x.Section("c").List("done")))
					return
				}
				seen++
			}
		}
	}()

	if err := increments(dir, "test", 4, perWorker); err != nil {
		t.Error(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("helper process: %v\n%s", err, stderr.String())
	}
	close(stop)
	if err := <-readerDone; err != nil {
		t.Error(err)
	}

	p, err := Load(dir, "counter")
	if err != nil {
		t.Fatal(err)
	}
	const want = 2 * 4 * perWorker
	if v, _ := p.Get("c", "n"); v != strconv.Itoa(want) {
		t.Errorf("n = %s, want %d (lost updates)", v, want)
	}
	items := p.Section("c").List("done")
	uniq := map[string]bool{}
	for _, it := range items {
		uniq[it] = true
	}
	if len(items) != want || len(uniq) != want {
		t.Errorf("%d items (%d distinct), want %d", len(items), len(uniq), want)
	}
	assertNoTemp(t, dir)
}

// runHelperInMountNS re-executes the test binary in a new mount namespace
// (mounts made there vanish with it) running helper mode.
func runHelperInMountNS(t *testing.T, mode, dir string) {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.Skipf(t, "needs root for a private mount namespace")
	}
	cmd, err := testenv.HelperCommand(mode, "UCI_TEST_DIR="+dir)
	if err != nil {
		t.Fatal(err)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper %s: %v\n%s", mode, err, out)
	}
}

// TestReadOnlyDir: on a read-only config dir Commit and Update fail with
// a clear error and the file stays as it was.
func TestReadOnlyDir(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "network")
	writeFile(t, path, networkConf, 0o644)
	if os.Geteuid() != 0 {
		if err := os.Chmod(dir, 0o555); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(dir, 0o755) })
		if err := checkReadOnly(dir, unix.EACCES); err != nil {
			t.Fatal(err)
		}
	} else {
		runHelperInMountNS(t, "readonly", dir)
	}
	if got := readFile(t, path); got != networkConf {
		t.Errorf("file changed to %q", got)
	}
}

func checkReadOnly(dir string, want error) error {
	path := filepath.Join(dir, "network")
	p, err := Load(dir, "network")
	if err != nil {
		return fmt.Errorf("Load on a read-only dir: %w", err)
	}
	if err := p.Set("globals", "packet_steering", "0"); err != nil {
		return err
	}
	if err := Commit(dir, p); !errors.Is(err, want) {
		return fmt.Errorf("Commit = %v, want %v", err, want)
	} else if !strings.Contains(err.Error(), "network") {
		return fmt.Errorf("Commit error %q does not name the config", err)
	}
	err = Update(dir, "network", func(p *Package) error { return p.Set("globals", "packet_steering", "0") })
	if !errors.Is(err, want) {
		return fmt.Errorf("Update = %v, want %v", err, want)
	}
	if err := Update(dir, "absent", func(p *Package) error { return nil }); !errors.Is(err, want) {
		return fmt.Errorf("Update(absent) = %v, want %v", err, want)
	}
	b, err := os.ReadFile(path)
	if err != nil || string(b) != networkConf {
		return fmt.Errorf("file changed (%v)", err)
	}
	return nil
}

func helperReadOnly(dir string) error {
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind mount: %w", err)
	}
	if err := unix.Mount("", dir, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
		return fmt.Errorf("remount ro: %w", err)
	}
	return checkReadOnly(dir, unix.EROFS)
}

// TestFullDir: on a full file system Update fails with ENOSPC, the file
// stays as it was and no temp file is left behind.
func TestFullDir(t *testing.T) {
	runHelperInMountNS(t, "full", t.TempDir())
}

func helperFull(dir string) error {
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=64k"); err != nil {
		return fmt.Errorf("mount tmpfs: %w", err)
	}
	path := filepath.Join(dir, "network")
	if err := os.WriteFile(path, []byte(networkConf), 0o644); err != nil {
		return err
	}
	// Fill the file system.
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		return err
	}
	chunk := bytes.Repeat([]byte{'x'}, 4096)
	for {
		if _, err := f.Write(chunk); err != nil {
			break
		}
	}
	f.Close()
	err = Update(dir, "network", func(p *Package) error {
		return p.Set("lan", "description", strings.Repeat("y", 8192))
	})
	if !errors.Is(err, unix.ENOSPC) {
		return fmt.Errorf("Update on a full fs = %v, want ENOSPC", err)
	}
	b, err := os.ReadFile(path)
	if err != nil || string(b) != networkConf {
		return fmt.Errorf("file changed (%v)", err)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, ".*.uci-*")); len(m) > 0 {
		return fmt.Errorf("temp files left: %q", m)
	}
	return nil
}

// TestShippedDefaultConfig: the package's /etc/config/packet_steering reads
// as docs/design.md's UCI defaults and is already in the form a commit writes, so
// the first set_mode changes only the values.
func TestShippedDefaultConfig(t *testing.T) {
	dir := filepath.Join("..", "..", "files", "etc", "config")
	p, err := Load(dir, "packet_steering")
	if err != nil {
		t.Fatal(err)
	}
	for opt, want := range map[string]string{"mode": "auto", "flows": "0"} {
		if got, ok := p.Get("globals", opt); !ok || got != want {
			t.Errorf("globals.%s = %q, %v; want %q", opt, got, ok, want)
		}
	}
	if s := p.Section("@globals[0]"); s == nil || s.Name != "globals" {
		t.Errorf("@globals[0] = %+v, want the section named globals", s)
	}
	var b bytes.Buffer
	if err := p.Export(&b); err != nil {
		t.Fatal(err)
	}
	if raw := readFile(t, filepath.Join(dir, "packet_steering")); raw != b.String() {
		t.Errorf("shipped file is not in commit form:\n%q\nexport:\n%q", raw, b.String())
	}
}

// BenchmarkUpdate measures one locked read-modify-write with fsync and
// rename (the cost of a persisted set_mode, per file).
func BenchmarkUpdate(b *testing.B) {
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "network"), []byte(networkConf), 0o644); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < b.N; i++ {
		err := Update(dir, "network", func(p *Package) error {
			return p.Set("globals", "steering_flows", strconv.Itoa(i))
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLoad(b *testing.B) {
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "network"), []byte(networkConf), 0o644); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < b.N; i++ {
		if _, err := Load(dir, "network"); err != nil {
			b.Fatal(err)
		}
	}
}

// TestRefusedFiles: a config file beyond MaxFileSize or MaxSections, a
// directory or a FIFO in its place are refused by Load, Commit and Update
// with an error that names the reason, and are left exactly as they were.
func TestRefusedFiles(t *testing.T) {
	var many strings.Builder
	for range MaxSections + 1 {
		many.WriteString("config rule\n")
	}
	tests := []struct {
		name string
		make func(t *testing.T, path string)
		want string
	}{
		{"too large", func(t *testing.T, path string) {
			writeFile(t, path, "config globals 'globals'\n"+strings.Repeat("# pad\n", MaxFileSize/6+1), 0o644)
		}, "over the limit of 1048576 bytes"},
		{"too many sections", func(t *testing.T, path string) {
			writeFile(t, path, many.String(), 0o644)
		}, "more than 10000 sections"},
		{"directory", func(t *testing.T, path string) {
			if err := os.Mkdir(path, 0o755); err != nil {
				t.Fatal(err)
			}
		}, "is a directory"},
		{"fifo", func(t *testing.T, path string) {
			if err := unix.Mkfifo(path, 0o644); err != nil {
				t.Fatal(err)
			}
		}, "not a regular file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "network")
			tc.make(t, path)
			before, _ := os.Lstat(path)
			var beforeData []byte
			if before.Mode().IsRegular() {
				beforeData, _ = os.ReadFile(path)
			}
			_, loadErr := Load(dir, "network")
			p := mustParse(t, "network", networkConf)
			commitErr := Commit(dir, p)
			called := false
			updateErr := Update(dir, "network", func(*Package) error { called = true; return nil })
			for op, err := range map[string]error{"Load": loadErr, "Commit": commitErr, "Update": updateErr} {
				if op == "Load" && tc.name == "directory" {
					// Read-only open of a directory succeeds; the
					// regular-file check refuses it.
					if err == nil || !strings.Contains(err.Error(), "not a regular file") {
						t.Errorf("Load: err = %v", err)
					}
					continue
				}
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("%s: err = %v, want %q", op, err, tc.want)
				}
				if op != "Load" && (err == nil || !strings.Contains(err.Error(), "not overwritten")) {
					t.Errorf("%s: err = %v, want it to say the file is not overwritten", op, err)
				}
			}
			if called {
				t.Error("Update called fn on a refused file")
			}
			after, err := os.Lstat(path)
			if err != nil || after.Mode() != before.Mode() || after.Size() != before.Size() {
				t.Errorf("file changed: %v %v -> %v", err, before.Mode(), after)
			}
			if beforeData != nil {
				if got, _ := os.ReadFile(path); !bytes.Equal(got, beforeData) {
					t.Error("file content changed")
				}
			}
			assertNoTemp(t, dir)
		})
	}
}
