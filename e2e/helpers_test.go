package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/packet-steering/packet-steering/internal/cpuset"
	"github.com/packet-steering/packet-steering/internal/netnstest"
	"github.com/packet-steering/packet-steering/internal/ubus"
	"github.com/packet-steering/packet-steering/internal/uci"
	"github.com/packet-steering/packet-steering/plan"
	"github.com/packet-steering/packet-steering/steering"
	"github.com/packet-steering/packet-steering/ubusobj"
	"golang.org/x/sys/unix"
)

// callTimeout bounds every ubus call the test makes.
const callTimeout = 10 * time.Second

// router is the machine under test: a namespace with veths, a chroot dir
// holding the daemon's root (config, locks, the binary, the broker's
// socket), the broker and a connection to it.
type router struct {
	// top is the whole test: processes started in a subtest outlive it.
	top *testing.T
	devNames
	ns   *netnstest.NS
	root string // host path of the daemon's chroot
	bin  string // host path of the binary (root/usr/bin/packet-steering)
	sock string // host path of the broker's socket
	conn *ubus.Conn
	cpus int // online CPUs

	daemon *daemonProc
	// baseline is the unmanaged peers' state before the first daemon ran.
	baseline map[string]*devState
}

// configDir is the host path of the daemon's /etc/config.
func (r *router) configDir() string { return filepath.Join(r.root, "etc", "config") }

// syncBuffer collects a process's output while it runs.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// daemonProc is one run of `packet-steering daemon` in the namespace.
type daemonProc struct {
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
	err  error // set before done is closed
}

// daemonScript runs inside `ip netns exec`, which gave it a mount namespace
// of its own (slave to the host's, so nothing mounted here reaches the host)
// and a /sys of the network namespace. It binds that /sys and the host's
// /proc into the chroot and replaces itself by the daemon, so the PID the
// test started is the daemon's.
const daemonScript = `set -e
r=$1
mount --bind /sys "$r/sys"
mount --bind /proc "$r/proc"
exec chroot "$r" /usr/bin/packet-steering daemon --log stderr --socket /var/run/ubus/ubus.sock --root /
`

// startDaemon starts the daemon in its own process group and registers its
// killing with the whole test's Cleanup (a no-op when it already stopped),
// so that a daemon started in a subtest keeps running after it.
func (r *router) startDaemon(t *testing.T) *daemonProc {
	t.Helper()
	cmd := exec.Command("ip", "netns", "exec", r.ns.Name, "sh", "-c", daemonScript, "sh", r.root)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	// Its own process group, killed by t.Cleanup; Pdeathsig (kept across
	// the execs of ip, sh and chroot) covers a test binary that dies
	// without running its cleanups.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start daemon: %v", err)
	}
	d := &daemonProc{cmd: cmd, out: out, done: make(chan struct{})}
	go func() {
		d.err = cmd.Wait()
		close(d.done)
	}()
	r.top.Cleanup(func() {
		select {
		case <-d.done:
			return
		default:
		}
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-d.done
	})
	r.daemon = d
	return d
}

// stop sends SIGTERM and waits for a clean exit.
func (d *daemonProc) stop(t *testing.T) {
	t.Helper()
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM daemon: %v", err)
	}
	select {
	case <-d.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
		<-d.done
		t.Fatalf("daemon did not stop within 10 s of SIGTERM; output:\n%s", d.out.String())
	}
	if d.err != nil {
		t.Fatalf("daemon exited with %v after SIGTERM; output:\n%s", d.err, d.out.String())
	}
}

// waitServing waits until the daemon's object is registered and its start
// apply is recorded, and returns a status read after that apply.
func (r *router) waitServing(t *testing.T) status {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-r.daemon.done:
			t.Fatalf("daemon exited (%v) before serving; output:\n%s", r.daemon.err, r.daemon.out.String())
		default:
		}
		st, err := r.status()
		if err == nil && st.LastApply != nil && st.LastApply.Reason == "start" {
			// A status read while the start apply ran can already
			// name it as the last apply while its in_sync comes
			// from the machine read before the apply finished
			// (steering.Engine.Status reads lastApply last). The
			// next status starts after the apply finished.
			if st, err = r.status(); err != nil {
				t.Fatal(err)
			}
			return st
		}
		last = err
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("daemon not serving with its start apply after 10 s (last error %v); output:\n%s", last, r.daemon.out.String())
	return status{}
}

// call invokes a packet_steering method and decodes the reply into out.
func (r *router) call(method, args string, out any) error {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	var attrs []ubus.Attr
	if args != "" {
		var err error
		if attrs, err = ubus.AttrsFromJSON([]byte(args)); err != nil {
			return fmt.Errorf("args %s: %w", args, err)
		}
	}
	reply, err := r.conn.Call(ctx, "packet_steering", method, attrs)
	if err != nil {
		return fmt.Errorf("call %s %s: %w", method, args, err)
	}
	b, err := ubus.AttrsToJSON(reply, "")
	if err != nil {
		return fmt.Errorf("reply of %s: %w", method, err)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("decode reply of %s: %w: %s", method, err, b)
	}
	return nil
}

// listenApplied subscribes (on a connection of its own, closed when t
// ends) to the daemon's packet_steering.applied events.
func (r *router) listenApplied(t *testing.T) <-chan map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	c, err := ubus.Dial(ctx, r.sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ch := make(chan map[string]any, 16)
	if _, err := c.Listen(ctx, ubusobj.EventApplied, func(_ string, data []ubus.Attr) {
		select {
		case ch <- ubus.AttrsValue(data):
		default:
		}
	}); err != nil {
		t.Fatal(err)
	}
	return ch
}

// status is the part of the `status` reply the test checks.
type status struct {
	Mode       string        `json:"mode"`
	Configured plan.Settings `json:"configured"`
	InSync     bool          `json:"in_sync"`
	LastApply  *struct {
		Reason  string `json:"reason"`
		Changed int    `json:"changed"`
		Failed  int    `json:"failed"`
	} `json:"last_apply"`
	ConfigErrors []struct {
		Path  string `json:"path"`
		Error string `json:"error"`
	} `json:"config_errors"`
}

func (r *router) status() (status, error) {
	var st status
	err := r.call("status", "", &st)
	return st, err
}

// applyReply is the reply of apply and set_mode.
type applyReply struct {
	Mode      string            `json:"mode"`
	Changed   []json.RawMessage `json:"changed"`
	Unchanged int               `json:"unchanged"`
	Failed    []json.RawMessage `json:"failed"`
}

// outOfSync describes, for a failure message, what a dry-run apply would
// change now: the knobs whose live value differs from the plan.
func (r *router) outOfSync() string {
	var rep applyReply
	if err := r.call("apply", `{"dry_run":true,"reason":"e2e diagnosis"}`, &rep); err != nil {
		return fmt.Sprintf(" (dry-run apply: %v)", err)
	}
	return fmt.Sprintf(" (a dry-run apply now would change %s)", rep.Changed)
}

// queues returns get_queues for one device.
func (r *router) queues(dev string) (steering.DeviceQueues, error) {
	var rep struct {
		Devices []steering.DeviceQueues `json:"devices"`
	}
	if err := r.call("get_queues", fmt.Sprintf(`{"device":%q}`, dev), &rep); err != nil {
		return steering.DeviceQueues{}, err
	}
	if len(rep.Devices) != 1 || rep.Devices[0].Name != dev {
		return steering.DeviceQueues{}, fmt.Errorf("get_queues %s: got %d devices", dev, len(rep.Devices))
	}
	return rep.Devices[0], nil
}

// devState is one device's knobs as the kernel holds them: per rx queue
// (by index) the RPS mask and flow count, per tx queue the XPS mask, and per
// NAPI thread its PID, NAPI id and affinity, in PID order: the order in
// which the stock script and the engine's rules pair threads with queues.
// (On veth, with threaded NAPI turned on after the device was created, PID
// order is the reverse of NAPI id order.)
type devState struct {
	rps   []uint64
	flows []int
	xps   []uint64
	napi  []napiThread
}

// napiThread is a napi/<dev>-<id> kernel thread and its real affinity.
type napiThread struct {
	pid, id int
	cpus    uint64
}

// readDevs reads the queue knobs of devs from the namespace's sysfs (one
// `grep` inside the namespace) and the NAPI threads' affinity with
// sched_getaffinity.
func (r *router) readDevs(devs ...string) (map[string]*devState, error) {
	script := `for d in "$@"; do set -- "$@" /sys/class/net/$d/queues/rx-*/rps_cpus /sys/class/net/$d/queues/rx-*/rps_flow_cnt /sys/class/net/$d/queues/tx-*/xps_cpus; shift; done; exec grep -H . "$@"`
	out, err := r.ns.Exec("sh", append([]string{"-c", script, "sh"}, devs...)...)
	if err != nil {
		return nil, fmt.Errorf("read queues of %v: %w: %s", devs, err, out)
	}
	state := map[string]*devState{}
	for _, d := range devs {
		state[d] = &devState{}
	}
	for _, line := range strings.Split(out, "\n") {
		path, val, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("grep line %q", line)
		}
		// /sys/class/net/DEV/queues/rx-N/FILE
		parts := strings.Split(path, "/")
		if len(parts) != 8 {
			return nil, fmt.Errorf("path %q", path)
		}
		ds := state[parts[4]]
		q, err := strconv.Atoi(strings.TrimPrefix(strings.TrimPrefix(parts[6], "rx-"), "tx-"))
		if ds == nil || err != nil {
			return nil, fmt.Errorf("path %q", path)
		}
		switch parts[7] {
		case "rps_cpus":
			m, err := parseMask(val)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			ds.rps = setAt(ds.rps, q, m)
		case "xps_cpus":
			m, err := parseMask(val)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			ds.xps = setAt(ds.xps, q, m)
		case "rps_flow_cnt":
			n, err := strconv.Atoi(strings.TrimSpace(val))
			if err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			ds.flows = setAt(ds.flows, q, n)
		}
	}
	for _, d := range devs {
		threads, err := napiThreads(d)
		if err != nil {
			return nil, err
		}
		state[d].napi = threads
	}
	return state, nil
}

func setAt[T any](s []T, i int, v T) []T {
	for len(s) <= i {
		var zero T
		s = append(s, zero)
	}
	s[i] = v
	return s
}

// parseMask reads a kernel hex CPU mask ("3", "00000000,00000001") of at
// most 64 CPUs.
func parseMask(s string) (uint64, error) {
	s = strings.ReplaceAll(strings.TrimSpace(s), ",", "")
	s = strings.TrimLeft(s, "0")
	if s == "" {
		return 0, nil
	}
	return strconv.ParseUint(s, 16, 64)
}

// napiThreads lists the NAPI threads of dev in PID order, with their
// affinity.
func napiThreads(dev string) ([]napiThread, error) {
	pids, err := netnstest.NAPIThreads(dev, 0)
	if err != nil {
		return nil, err
	}
	var out []napiThread
	for _, pid := range pids {
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err != nil {
			return nil, fmt.Errorf("thread %d of %s: %w", pid, dev, err)
		}
		id, err := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(string(comm)), "napi/"+dev+"-"))
		if err != nil {
			return nil, fmt.Errorf("thread %d name %q: %w", pid, comm, err)
		}
		var set unix.CPUSet
		if err := unix.SchedGetaffinity(pid, &set); err != nil {
			return nil, fmt.Errorf("sched_getaffinity %d: %w", pid, err)
		}
		var m uint64
		for c := 0; c < 64; c++ {
			if set.IsSet(c) {
				m |= 1 << c
			}
		}
		out = append(out, napiThread{pid: pid, id: id, cpus: m})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].pid < out[j].pid })
	return out, nil
}

// setNAPIAffinity pins one of the test's own NAPI threads (a perturbation
// while the daemon is down).
func setNAPIAffinity(pid int, mask uint64) error {
	var set unix.CPUSet
	for c := 0; c < 64; c++ {
		if mask&(1<<c) != 0 {
			set.Set(c)
		}
	}
	if err := unix.SchedSetaffinity(pid, &set); err != nil {
		return fmt.Errorf("sched_setaffinity %d: %w", pid, err)
	}
	return nil
}

// expect is what one device's knobs must hold; nil slices are not checked.
type expect struct {
	rps   []uint64
	flows []int
	xps   []uint64
	napi  []uint64
	// napiByID: napi lists the threads' CPUs in NAPI id order (the order
	// the driver registered its queues in), not in PID order.
	napiByID bool
	// rpsAwayFromNAPI: rx-i's RPS mask is one CPU, not the CPU of the
	// i-th NAPI thread (PID order), and each thread is pinned to one CPU,
	// the threads of the device covering every CPU (the stock rule).
	rpsAwayFromNAPI bool
}

// check compares a device's kernel state with e and returns what differs.
func (e expect) check(dev string, s *devState, cpus int) []string {
	var errs []string
	cmpMasks := func(what string, got, want []uint64) {
		if want == nil {
			return
		}
		if len(got) != len(want) {
			errs = append(errs, fmt.Sprintf("%s %s: %d queues, want %d", dev, what, len(got), len(want)))
			return
		}
		for i := range want {
			if got[i] != want[i] {
				errs = append(errs, fmt.Sprintf("%s %s[%d] = %x, want %x", dev, what, i, got[i], want[i]))
			}
		}
	}
	cmpMasks("rps_cpus", s.rps, e.rps)
	cmpMasks("xps_cpus", s.xps, e.xps)
	if e.flows != nil && fmt.Sprint(s.flows) != fmt.Sprint(e.flows) {
		errs = append(errs, fmt.Sprintf("%s rps_flow_cnt = %v, want %v", dev, s.flows, e.flows))
	}
	threads := append([]napiThread(nil), s.napi...)
	if e.napiByID {
		sort.Slice(threads, func(i, j int) bool { return threads[i].id < threads[j].id })
	}
	got := make([]uint64, len(threads))
	for i, th := range threads {
		got[i] = th.cpus
	}
	cmpMasks("napi affinity", got, e.napi)
	if e.rpsAwayFromNAPI {
		if len(s.napi) != len(s.rps) {
			errs = append(errs, fmt.Sprintf("%s: %d NAPI threads for %d rx queues", dev, len(s.napi), len(s.rps)))
			return errs
		}
		var used uint64
		for i, th := range s.napi {
			used |= th.cpus
			if !oneCPU(th.cpus) || !oneCPU(s.rps[i]) || th.cpus == s.rps[i] {
				errs = append(errs, fmt.Sprintf("%s rx-%d: NAPI thread on %x, RPS %x; want one CPU each, different", dev, i, th.cpus, s.rps[i]))
			}
		}
		if used != allCPUs(cpus) {
			errs = append(errs, fmt.Sprintf("%s: NAPI threads use CPUs %x, want all %x", dev, used, allCPUs(cpus)))
		}
	}
	return errs
}

// cpuList formats a mask as a cpu list ("0,1").
func cpuList(m uint64) string {
	var cpus []string
	for c := 0; c < 64; c++ {
		if m&(1<<c) != 0 {
			cpus = append(cpus, strconv.Itoa(c))
		}
	}
	return strings.Join(cpus, ",")
}

func oneCPU(m uint64) bool { return m != 0 && m&(m-1) == 0 }

func allCPUs(n int) uint64 { return 1<<n - 1 }

// repeat returns n copies of v.
func repeat[T any](v T, n int) []T {
	s := make([]T, n)
	for i := range s {
		s[i] = v
	}
	return s
}

// roundRobin is queue i on CPU i mod cpus, as masks.
func roundRobin(queues, cpus int) []uint64 {
	s := make([]uint64, queues)
	for i := range s {
		s[i] = 1 << (i % cpus)
	}
	return s
}

// checkAgainstDaemon compares the kernel state with the wanted values the
// daemon reports in get_queues (every rx and tx queue and NAPI thread it
// manages), and requires every queue of dev to be managed.
func (r *router) checkAgainstDaemon(dev string, s *devState) []string {
	q, err := r.queues(dev)
	if err != nil {
		return []string{err.Error()}
	}
	var errs []string
	if len(q.Rx) != len(s.rps) || len(q.Tx) != len(s.xps) {
		return []string{fmt.Sprintf("%s: get_queues has %d rx, %d tx; kernel %d, %d", dev, len(q.Rx), len(q.Tx), len(s.rps), len(s.xps))}
	}
	threads := map[int]napiThread{}
	for _, th := range s.napi {
		threads[th.pid] = th
	}
	for i, rx := range q.Rx {
		if rx.WantRPSCPUs == "" {
			errs = append(errs, fmt.Sprintf("%s %s: not managed (no want_rps_cpus)", dev, rx.Queue))
		} else if !cpuset.SameMask(rx.WantRPSCPUs, strconv.FormatUint(s.rps[i], 16)) {
			errs = append(errs, fmt.Sprintf("%s %s: kernel rps_cpus %x, daemon wants %s", dev, rx.Queue, s.rps[i], rx.WantRPSCPUs))
		}
		if rx.NAPI == nil || rx.NAPI.WantCPUs == "" {
			continue
		}
		th, ok := threads[rx.NAPI.PID]
		if !ok {
			errs = append(errs, fmt.Sprintf("%s %s: daemon names NAPI pid %d, not a thread of %s", dev, rx.Queue, rx.NAPI.PID, dev))
			continue
		}
		if !cpuset.SameList(rx.NAPI.WantCPUs, cpuList(th.cpus)) {
			errs = append(errs, fmt.Sprintf("%s %s: %s runs on %x, daemon wants %s", dev, rx.Queue, rx.NAPI.Thread, th.cpus, rx.NAPI.WantCPUs))
		}
	}
	for i, tx := range q.Tx {
		if tx.WantXPSCPUs != "" && !cpuset.SameMask(tx.WantXPSCPUs, strconv.FormatUint(s.xps[i], 16)) {
			errs = append(errs, fmt.Sprintf("%s %s: kernel xps_cpus %x, daemon wants %s", dev, tx.Queue, s.xps[i], tx.WantXPSCPUs))
		}
	}
	return errs
}

// uciOptions reads option values from the daemon's config dir on disk:
// refs are "package.section.option" with section refs as uci takes them.
func (r *router) uciOptions(refs ...string) (map[string]string, error) {
	out := map[string]string{}
	pkgs := map[string]*uci.Package{}
	for _, ref := range refs {
		parts := strings.SplitN(ref, ".", 3)
		if len(parts) != 3 {
			return nil, fmt.Errorf("ref %q", ref)
		}
		p := pkgs[parts[0]]
		if p == nil {
			var err error
			if p, err = uci.Load(r.configDir(), parts[0]); err != nil {
				return nil, fmt.Errorf("load %s: %w", parts[0], err)
			}
			pkgs[parts[0]] = p
		}
		out[ref], _ = p.Get(parts[1], parts[2])
	}
	return out, nil
}

// errStatus is the ubus status of a failed call (0 when err is nil).
func errStatus(err error) ubus.Status {
	if err == nil {
		return 0
	}
	var st ubus.Status
	if errors.As(err, &st) {
		return st
	}
	return ubus.StatusUnknownError
}
