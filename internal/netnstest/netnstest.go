// Package netnstest runs test code against the real kernel inside network
// namespaces that the test creates and always removes, with veth pairs whose
// queue count and threaded-NAPI setting the test chooses.
//
// It is for tests only (it takes a testing.TB) but lives outside _test files
// so every package's tests can share it. It must never touch anything outside
// the namespaces it created: it does not write the host's /sys/class/net, and
// it never changes the affinity of a process it did not start.
//
// Typical use, where the code under test reads /sys and so must run in a
// process whose sysfs shows the namespace (sysfs shows the network namespace
// of the process that mounted it; `ip netns exec` mounts a fresh one):
//
//	func TestKernel(t *testing.T) {
//		if netnstest.IsChild(t) {
//			// Runs inside the namespace, in a re-executed test binary.
//			snap, err := platform.Read(ctx, "/")
//			...
//			return
//		}
//		ns := netnstest.New(t, "plat")
//		ns.AddVeth(t, netnstest.Veth{Name: "v0", Peer: "v1", Queues: 4, Threaded: true})
//		ns.RunChild(t, nil) // re-runs TestKernel in ns; fails t if the child fails
//	}
//
// Code that only needs sockets or netlink (not /sys) can use NS.Do, which
// runs a function on an OS thread switched into the namespace.
//
// New skips the test when not running as root or when `ip` is missing.
package netnstest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/packet-steering/packet-steering/internal/testenv"
	"golang.org/x/sys/unix"
)

// ChildEnv is the environment variable that marks a re-executed test binary
// as the child of RunChild. Its value is "<test name>\n<namespace name>".
const ChildEnv = "NETNSTEST_CHILD"

// cmdTimeout bounds every `ip`/`ethtool` invocation.
const cmdTimeout = 30 * time.Second

// validName is what this package accepts as a namespace or interface name:
// it keeps names safe to pass to commands and to join into /sys paths.
var validName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,14}$`)

// NS is one network namespace created by New. It is removed by t.Cleanup,
// also when the test fails.
type NS struct {
	// Name is the namespace's name (as in `ip netns list`).
	Name string
}

// Skip skips t unless the process runs as root with `ip` on PATH (a
// failure instead with PACKET_STEERING_REQUIRE_KERNEL=1, see testenv). Under
// a user-mode emulator (make test-cross) it always skips, saying so: kernel
// and namespace tests run on the build machine's own architecture only,
// since qemu-user does not carry every system call and ioctl they use.
func Skip(t testing.TB) {
	t.Helper()
	if emu := testenv.Emulator(); emu != "" {
		t.Skip("netnstest: kernel and namespace tests run natively only, not under " + emu)
	}
	if os.Geteuid() != 0 {
		testenv.Skipf(t, "netnstest: needs root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		testenv.Skipf(t, "netnstest: needs iproute2 `ip`")
	}
}

// New creates a fresh network namespace named "<prefix>-<pid>-<random>" and
// registers its removal with t.Cleanup. The loopback device is brought up.
// It skips the test when not root or when `ip` is missing, and fails it when
// the namespace cannot be created. The prefix should name the calling task
// (short: the whole name stays below 32 bytes).
func New(t testing.TB, prefix string) *NS {
	t.Helper()
	Skip(t)
	var rnd [3]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		t.Fatalf("netnstest: random name: %v", err)
	}
	name := fmt.Sprintf("%s-%d-%s", prefix, os.Getpid(), hex.EncodeToString(rnd[:]))
	if strings.ContainsAny(name, "/ \n") || len(name) > 64 {
		t.Fatalf("netnstest: bad namespace name %q", name)
	}
	if out, err := run(context.Background(), "ip", "netns", "add", name); err != nil {
		t.Fatalf("netnstest: ip netns add %s: %v: %s", name, err, out)
	}
	ns := &NS{Name: name}
	t.Cleanup(func() {
		if out, err := run(context.Background(), "ip", "netns", "del", name); err != nil {
			t.Errorf("netnstest: ip netns del %s: %v: %s", name, err, out)
		}
	})
	if out, err := ns.Exec("ip", "link", "set", "lo", "up"); err != nil {
		t.Fatalf("netnstest: lo up in %s: %v: %s", name, err, out)
	}
	return ns
}

// Exec runs a command inside the namespace (`ip netns exec NAME cmd...`,
// which also gives the command a /sys of the namespace) and returns its
// combined output.
func (ns *NS) Exec(name string, args ...string) (string, error) {
	return run(context.Background(), "ip", append([]string{"netns", "exec", ns.Name, name}, args...)...)
}

// MustExec is Exec that fails the test on error.
func (ns *NS) MustExec(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := ns.Exec(name, args...)
	if err != nil {
		t.Fatalf("netnstest: in %s: %s %s: %v: %s", ns.Name, name, strings.Join(args, " "), err, out)
	}
	return out
}

// Veth describes a veth pair to create with AddVeth.
type Veth struct {
	// Name is the end created in the namespace; Peer the other end.
	Name, Peer string
	// PeerNS is the namespace the peer goes into; nil keeps it in the same
	// namespace as Name.
	PeerNS *NS
	// Queues is the rx and tx queue count of both ends (0 means 1).
	Queues int
	// Threaded turns on GRO and threaded NAPI on both ends, which makes
	// the kernel start one napi/<dev>-<id> thread per queue.
	Threaded bool
	// Addr and PeerAddr are optional CIDR addresses ("198.18.0.1/30").
	// Use only 198.18.0.0/15.
	Addr, PeerAddr string
}

// AddVeth creates the pair, brings both ends up and applies Threaded and the
// addresses. It fails the test on any error; the pair goes away with the
// namespace.
func (ns *NS) AddVeth(t testing.TB, v Veth) {
	t.Helper()
	if err := ns.addVeth(v); err != nil {
		t.Fatalf("netnstest: %v", err)
	}
}

func (ns *NS) addVeth(v Veth) error {
	if !validName.MatchString(v.Name) || !validName.MatchString(v.Peer) {
		return fmt.Errorf("veth names %q/%q: want 1-15 of [A-Za-z0-9_.-]", v.Name, v.Peer)
	}
	q := v.Queues
	if q <= 0 {
		q = 1
	}
	qs := strconv.Itoa(q)
	peerNS := ns
	if v.PeerNS != nil {
		peerNS = v.PeerNS
	}
	args := []string{"-n", ns.Name, "link", "add", v.Name, "numrxqueues", qs, "numtxqueues", qs,
		"type", "veth", "peer", "name", v.Peer}
	if peerNS != ns {
		args = append(args, "netns", peerNS.Name)
	}
	args = append(args, "numrxqueues", qs, "numtxqueues", qs)
	if out, err := run(context.Background(), "ip", args...); err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, out)
	}
	ends := []struct {
		ns   *NS
		dev  string
		addr string
	}{{ns, v.Name, v.Addr}, {peerNS, v.Peer, v.PeerAddr}}
	for _, e := range ends {
		if e.addr != "" {
			if out, err := run(context.Background(), "ip", "-n", e.ns.Name, "addr", "add", e.addr, "dev", e.dev); err != nil {
				return fmt.Errorf("address %s on %s: %w: %s", e.addr, e.dev, err, out)
			}
		}
		if out, err := run(context.Background(), "ip", "-n", e.ns.Name, "link", "set", e.dev, "up"); err != nil {
			return fmt.Errorf("%s up: %w: %s", e.dev, err, out)
		}
	}
	if !v.Threaded {
		return nil
	}
	for _, e := range ends {
		if err := e.ns.SetThreaded(e.dev, true); err != nil {
			return err
		}
	}
	return nil
}

// SetThreaded turns GRO on (veth needs it for NAPI) and writes the device's
// `threaded` file inside the namespace. The device must be up.
func (ns *NS) SetThreaded(dev string, on bool) error {
	if !validName.MatchString(dev) {
		return fmt.Errorf("device name %q", dev)
	}
	if on {
		if out, err := ns.Exec("ethtool", "-K", dev, "gro", "on"); err != nil {
			return fmt.Errorf("ethtool -K %s gro on: %w: %s", dev, err, out)
		}
	}
	val := "0"
	if on {
		val = "1"
	}
	// dev is validated above, so it is safe inside the shell word.
	if out, err := ns.Exec("sh", "-c", "echo "+val+" > /sys/class/net/"+dev+"/threaded"); err != nil {
		return fmt.Errorf("threaded=%s on %s: %w: %s", val, dev, err, out)
	}
	return nil
}

// NAPIThreads returns the PIDs of the kernel threads named napi/<dev>-<id>,
// sorted numerically, waiting up to two seconds for want of them to appear
// (want <= 0: return whatever exists now). Threads live in the host's PID
// namespace, so names can collide with a host device of the same name: pick
// device names the host does not use.
func NAPIThreads(dev string, want int) ([]int, error) {
	deadline := time.Now().Add(2 * time.Second)
	for {
		pids, err := napiThreads(dev)
		if err != nil || want <= 0 || len(pids) >= want || time.Now().After(deadline) {
			return pids, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func napiThreads(dev string) ([]int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list /proc: %w", err)
	}
	prefix := "napi/" + dev + "-"
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if err != nil {
			continue // exited
		}
		c := strings.TrimSuffix(string(comm), "\n")
		rest, ok := strings.CutPrefix(c, prefix)
		if !ok {
			continue
		}
		if _, err := strconv.Atoi(rest); err != nil {
			continue
		}
		pids = append(pids, pid)
	}
	sort.Ints(pids)
	return pids, nil
}

// Do runs fn on an OS thread switched into the namespace (setns
// CLONE_NEWNET) and switches back afterwards. Sockets and netlink opened in
// fn belong to the namespace; /sys does not follow (use RunChild or Exec for
// code that reads /sys). If the thread cannot be switched back it is
// discarded rather than returned to the Go scheduler.
func (ns *NS) Do(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("open own netns: %w", err)
			return
		}
		defer orig.Close()
		target, err := os.Open(filepath.Join("/var/run/netns", ns.Name))
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("open netns %s: %w", ns.Name, err)
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("setns %s: %w", ns.Name, err)
			return
		}
		ferr := fn()
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			// Leave the thread locked: it dies with this goroutine.
			errc <- errors.Join(ferr, fmt.Errorf("setns back: %w", err))
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// IsChild reports whether this process is the re-executed child that
// RunChild started for the running test t (and so is inside the namespace).
func IsChild(t testing.TB) bool {
	name, _, ok := strings.Cut(os.Getenv(ChildEnv), "\n")
	return ok && name == t.Name()
}

// ChildNS returns the namespace name the child runs in ("" outside a child).
func ChildNS() string {
	_, ns, _ := strings.Cut(os.Getenv(ChildEnv), "\n")
	return ns
}

// RunChild re-executes the test binary inside the namespace
// (`ip netns exec NAME <binary> -test.run ^<t.Name()>$`), with env added to
// its environment, and fails t with the child's output if the child fails.
// The child sees IsChild(t) == true. A child that skips is reported as a
// skip of t. It returns the child's output.
func (ns *NS) RunChild(t testing.TB, env map[string]string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("netnstest: own executable: %v", err)
	}
	// Subtest names contain '/', which -test.run splits on; anchor each part.
	parts := strings.Split(t.Name(), "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	prog, args := testenv.Argv(exe, "-test.run", strings.Join(parts, "/"), "-test.v", "-test.count=1")
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns.Name, prog}, args...)...)
	cmd.Env = append(os.Environ(), ChildEnv+"="+t.Name()+"\n"+ns.Name)
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		cmd.Env = append(cmd.Env, k+"="+env[k])
	}
	var buf bytes.Buffer
	cmd.Stdout = &buf
	cmd.Stderr = &buf
	err = cmd.Run()
	out := buf.String()
	if err != nil {
		t.Fatalf("netnstest: child %s in %s failed: %v\n%s", t.Name(), ns.Name, err, out)
	}
	if strings.Contains(out, "--- SKIP: "+t.Name()) && !strings.Contains(out, "--- PASS: "+t.Name()) {
		testenv.Skipf(t, "netnstest: child skipped:\n%s", out)
	}
	if !strings.Contains(out, "--- PASS: "+t.Name()) {
		t.Fatalf("netnstest: child did not run %s (no PASS line):\n%s", t.Name(), out)
	}
	return out
}

// run executes a command with a timeout and returns its combined output.
func run(ctx context.Context, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, cmdTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}
