package vmtest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// gateEnv turns the test on; `make test-vm` sets it.
const gateEnv = "PACKET_STEERING_VM"

// replayEnv, when set, checks the console logs of the last run
// (out/vm-cache/console-*.log) instead of booting the guests: for working
// on the checks without waiting for the guests.
const replayEnv = "PACKET_STEERING_VM_REPLAY"

// guestsEnv, when set, is a comma-separated list of the guests to run
// ("x86_64,arm64"); unset runs all.
const guestsEnv = "PACKET_STEERING_VM_GUESTS"

// TestVM boots each guest, runs packet-steering inside it and checks what
// the kernel reports; it prints one table per guest.
func TestVM(t *testing.T) {
	if os.Getenv(gateEnv) == "" {
		t.Skipf("set %s=1 (make test-vm) to boot the QEMU guests", gateEnv)
	}
	// Asked for explicitly: what is missing fails the test, so make test
	// cannot pass without having booted the guests.
	if os.Geteuid() != 0 {
		t.Fatal("the VM test needs root (namespaces and taps)")
	}
	tools := []string{"ip", "apt-get", "apt-cache", "dpkg-deb", "cpio", "gzip"}
	for _, g := range guests() {
		tools = append(tools, g.qemu)
	}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the VM test needs %s (scripts/deps.sh installs it): %v", tool, err)
		}
	}
	repo, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	c, err := newCache(repo)
	if err != nil {
		t.Fatal(err)
	}
	removeStaleNamespaces(t)
	// The guests run in parallel (make test-vm passes -parallel 3): TCG
	// keeps the host CPUs busy either way, and one guest's waits overlap
	// another's work.
	begin := time.Now()
	t.Cleanup(func() { t.Logf("all guests: %v", time.Since(begin).Round(time.Second)) })
	only := os.Getenv(guestsEnv)
	ran := 0
	for _, g := range guests() {
		if only != "" && !strings.Contains(","+only+",", ","+g.name+",") {
			continue
		}
		ran++
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			ctx, cancel := context.WithCancel(context.Background())
			t.Cleanup(cancel)
			logPath := filepath.Join(c.dir, "console-"+g.name+".log")
			var (
				out   string
				built time.Duration
			)
			if os.Getenv(replayEnv) != "" {
				b, err := os.ReadFile(logPath)
				if err != nil {
					t.Fatal(err)
				}
				out = string(b)
			} else {
				img, err := c.buildImage(ctx, g, t.TempDir())
				if err != nil {
					t.Fatal(err)
				}
				built = time.Since(start)
				if out, err = boot(ctx, t, g, img, logPath); err != nil {
					t.Fatal(err)
				}
			}
			t.Logf("%s: image %v, guest %v (console: %s)", g.name, built.Round(time.Millisecond), (time.Since(start) - built).Round(time.Millisecond), logPath)
			con, err := parseConsole(out)
			if err != nil {
				t.Fatal(err)
			}
			if !con.done {
				t.Fatalf("the guest did not finish its script; its console ended with:\n%s\n(all of it in %s)", tail(out, 8), logPath)
			}
			checkGuest(t, g, con)
		})
	}
	if ran == 0 {
		t.Fatalf("%s=%q names no guest", guestsEnv, only)
	}
}

// tail returns the last n non-empty lines of s.
func tail(s string, n int) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
