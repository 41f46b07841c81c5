package steering

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/packet-steering/packet-steering/internal/cpuset"
	"github.com/packet-steering/packet-steering/internal/testenv"
	"github.com/packet-steering/packet-steering/plan"
	"golang.org/x/sys/unix"
)

const napiStatus = "Name:\tnapi/eth0-257\nState:\tS (sleeping)\nPid:\t300\nCpus_allowed:\tf\nCpus_allowed_list:\t0-3\nMems_allowed:\t1\n"

func TestFSWriterFixtureThreadAffinity(t *testing.T) {
	root := t.TempDir()
	testenv.WriteTree(t, root, map[string]string{
		"proc/300/stat":   "300 (napi/eth0-257) S 2 0 0 0 -1 2129984 0 0 0 0 0 0 0 0 20 0 1 0 100 0 0",
		"proc/300/status": napiStatus,
		// A user process that named itself like a NAPI thread.
		"proc/400/stat":   "400 (napi/eth0-257) S 1 400 400 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 100 0 0",
		"proc/400/status": strings.ReplaceAll(napiStatus, "300", "400"),
	})
	w := NewFSWriter(root)

	got, err := w.ThreadAffinity(300, "napi/eth0-257")
	if err != nil || got != "0-3" {
		t.Fatalf("ThreadAffinity = %q, %v; want 0-3", got, err)
	}
	if err := w.SetThreadAffinity(300, "napi/eth0-257", "1"); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(root, "proc/300/status"))
	want := strings.Replace(strings.Replace(napiStatus, "Cpus_allowed:\tf", "Cpus_allowed:\t2", 1), "list:\t0-3", "list:\t1", 1)
	if string(b) != want {
		t.Fatalf("status after set:\n%s\nwant:\n%s", b, want)
	}
	if got, _ := w.ThreadAffinity(300, "napi/eth0-257"); got != "1" {
		t.Fatalf("read back %q, want 1", got)
	}

	for _, tc := range []struct {
		name string
		pid  int
		comm string
		want error
	}{
		{"user process with a NAPI name", 400, "napi/eth0-257", ErrNotKernelThread},
		{"thread renamed", 300, "napi/eth0-258", ErrNotKernelThread},
		{"thread gone", 301, "napi/eth0-258", unix.ESRCH},
		{"pid zero", 0, "swapper", ErrNotKernelThread},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := w.SetThreadAffinity(tc.pid, tc.comm, "0")
			if !errors.Is(err, tc.want) {
				t.Fatalf("SetThreadAffinity = %v, want %v", err, tc.want)
			}
			if _, err := w.ThreadAffinity(tc.pid, tc.comm); !errors.Is(err, tc.want) {
				t.Fatalf("ThreadAffinity = %v, want %v", err, tc.want)
			}
		})
	}
	b, _ = os.ReadFile(filepath.Join(root, "proc/400/status"))
	if !strings.Contains(string(b), "Cpus_allowed_list:\t0-3") {
		t.Fatalf("user process's status was rewritten:\n%s", b)
	}
}

func TestFSWriterKnobs(t *testing.T) {
	root := t.TempDir()
	testenv.WriteTree(t, root, map[string]string{"sys/class/net/eth0/queues/rx-0/rps_cpus": "0\n"})
	w := NewFSWriter(root)
	rel := "sys/class/net/eth0/queues/rx-0/rps_cpus"
	if err := w.WriteKnob(rel, "e"); err != nil {
		t.Fatal(err)
	}
	if got, err := w.ReadKnob(rel); err != nil || got != "e" {
		t.Fatalf("ReadKnob = %q, %v", got, err)
	}
	// Never creates a knob that is not there.
	err := w.WriteKnob("sys/class/net/eth0/queues/rx-1/rps_cpus", "e")
	if !errors.Is(err, fs.ErrNotExist) || !vanished(err) {
		t.Fatalf("write to a missing knob: %v, want ENOENT", err)
	}
	for _, bad := range []string{"", "/etc/passwd", "sys/../../etc/passwd"} {
		if err := w.WriteKnob(bad, "x"); err == nil || vanished(err) {
			t.Errorf("WriteKnob(%q) = %v, want a refusal", bad, err)
		}
	}
}

func TestCPUSetList(t *testing.T) {
	for _, cpus := range [][]int{{}, {0}, {0, 1, 2, 3}, {1, 3}, {0, 1, 5, 6, 7, 64, 100}} {
		var s unix.CPUSet
		for _, c := range cpus {
			s.Set(c)
		}
		got, err := cpuset.ParseList(cpuSetList(&s))
		if err != nil || !got.Equal(cpuset.Of(cpus...)) {
			t.Fatalf("round trip of %v: %q, %v", cpus, cpuSetList(&s), err)
		}
	}
}

// TestFSWriterRealRootRefuses checks the guards on the real root with
// targets that must never be touched: this test process (a user process,
// asked for under its own name) and kthreadd (a kernel thread, asked for
// under a NAPI thread's name). Both are refused before any syscall that
// changes anything.
func TestFSWriterRealRootRefuses(t *testing.T) {
	w := NewFSWriter("/")
	comm, err := os.ReadFile("/proc/self/comm")
	if err != nil {
		testenv.Skipf(t, "no /proc")
	}
	self := os.Getpid()
	var before unix.CPUSet
	if err := unix.SchedGetaffinity(self, &before); err != nil {
		t.Fatal(err)
	}
	if err := w.SetThreadAffinity(self, strings.TrimSpace(string(comm)), "0"); !errors.Is(err, ErrNotKernelThread) {
		t.Fatalf("own process: %v, want ErrNotKernelThread", err)
	}
	var after unix.CPUSet
	if err := unix.SchedGetaffinity(self, &after); err != nil || after != before {
		t.Fatalf("own affinity changed: %v -> %v (%v)", cpuSetList(&before), cpuSetList(&after), err)
	}
	if _, err := os.Stat("/proc/2/stat"); err == nil {
		if err := w.SetThreadAffinity(2, "napi/eth0-257", "0"); !errors.Is(err, ErrNotKernelThread) {
			t.Fatalf("kthreadd under a NAPI name: %v, want ErrNotKernelThread", err)
		}
	}
}

// The path-name checks must accept exactly what these patterns accept.
var (
	deviceNamePattern = regexp.MustCompile(`^[A-Za-z0-9_.:@-]{1,15}$`)
	rxQueuePattern    = regexp.MustCompile(`^rx-[0-9]+$`)
)

func checkPathNames(t *testing.T, s string) {
	t.Helper()
	wantDev := deviceNamePattern.MatchString(s) && s != "." && s != ".."
	if got := plan.ValidDeviceName(s); got != wantDev {
		t.Errorf("plan.ValidDeviceName(%q) = %v, want %v", s, got, wantDev)
	}
	if got, want := validQueueName(s, "rx-"), rxQueuePattern.MatchString(s); got != want {
		t.Errorf("validQueueName(%q, rx-) = %v, want %v", s, got, want)
	}
}

func TestPathNames(t *testing.T) {
	for _, s := range []string{"eth0", "br-lan", "lan1@eth0", "wlan0.sta1", "a:b", ".", "..", "...", "", "eth0/..",
		"eth 0", "0123456789abcdef", "0123456789abcde", "rx-0", "rx-10", "rx-", "rx-1a", "tx-1", "rx--1", "rx-0\n", "é"} {
		checkPathNames(t, s)
	}
}

func FuzzPathNames(f *testing.F) {
	for _, s := range []string{"eth0", "rx-1", "..", "a/b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { checkPathNames(t, s) })
}
