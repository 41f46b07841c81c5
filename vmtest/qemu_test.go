package vmtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/packet-steering/packet-steering/internal/netnstest"
	"github.com/packet-steering/packet-steering/platform"
)

// echoPort is the UDP echo server's port on the host side of the taps.
const echoPort = 9007

// Tap names inside the test's own namespace: the multi-queue and the
// single-queue NIC.
const (
	tapMQ = "vmtq0"
	tapSQ = "vmtq1"
)

// guest is one QEMU machine.
type guest struct {
	name       string // subtest name
	debArch    string // Debian architecture of the kernel and busybox
	kernelMeta string // meta package naming the kernel
	goarch     string
	gomips     string
	qemu       string
	machine    []string // -M/-cpu/-accel/-smp
	console    string
	cmdline    string // kernel command line additions
	cpus       int
	queues     int      // queue pairs of the multi-queue NIC; 0: no NICs
	modules    []string // loaded in the guest, with their dependencies
	count      int      // echo datagrams per traffic phase
	timeout    time.Duration
	// wantPolicy is the policy the plan must choose ("" any).
	wantPolicy string
	// adaptive: the guest also runs the adaptive mode's functional check
	// (the router build's daemon in mode adaptive, a CPU hog and traffic
	// into one rx queue; init.sh adaptive_check).
	adaptive bool
	// pppoe: the guest also checks that auto steers a PPPoE device (a
	// kernel-only session over the single-queue NIC; init.sh pppoe_check,
	// pppoe_check_test.go). Its modules must be in modules.
	pppoe bool
	// memory: the guest measures the daemon's RSS around 1,000 calls
	// (init.sh daemon-memory, checkMemory): the router build of the
	// budget's architecture, 32-bit MIPS.
	memory bool

	// suite is the Debian suite the kernel comes from through a source
	// list of the test's own (kernels_test.go); "" the system's sources.
	suite string
	// wantNetlink is the netdev netlink status the snapshot must show:
	// "ok" or "unavailable" (a prefix); wantRxSource how the multi-queue
	// NIC's rx queues must be paired (netlink_check_test.go).
	wantNetlink, wantRxSource string

	// The test beds' guests (bed_pppoe_test.go): init replaces init.sh as
	// /init, conf is appended to /etc/vmtest.conf, files are put into the
	// initramfs (path in the guest -> content), and watch, when set, sees
	// every console line as it arrives, with the namespace of the taps.
	init  []byte
	conf  string
	files map[string][]byte
	watch func(ns *netnstest.NS, line string)
	// mqOnly: the guest gets the multi-queue NIC only, without the
	// single-queue one (the big.LITTLE bed, bed_biglittle_test.go).
	mqOnly bool
	// started, when set, is called with QEMU's process id as soon as it
	// runs (before the guest has booted); an error stops the boot. The
	// big.LITTLE bed moves the vCPU threads into its cgroups there.
	started func(pid int) error
}

// nics is how many NICs the guest gets.
func (g *guest) nics() int {
	switch {
	case g.queues == 0:
		return 0
	case g.mqOnly:
		return 1
	}
	return 2
}

// taps are the host sides of the guest's NICs with their addresses:
// 198.18.0.1 multi-queue, 198.18.1.1 single-queue.
func (g *guest) taps() []tapAddr {
	all := []tapAddr{{tapMQ, "198.18.0.1/24"}, {tapSQ, "198.18.1.1/24"}}
	return all[:g.nics()]
}

// tapAddr is a tap in the test's namespace and its address there.
type tapAddr struct{ name, addr string }

// guests are the machines TestVM boots, in order.
func guests() []*guest {
	tcg := []string{"-accel", "tcg,thread=multi"}
	return []*guest{
		{
			name: "x86_64", debArch: "amd64", kernelMeta: "linux-image-amd64", goarch: "amd64",
			qemu:    "qemu-system-x86_64",
			machine: append([]string{"-M", "pc", "-cpu", "qemu64", "-smp", "4", "-m", "512"}, tcg...),
			console: "ttyS0", cpus: 4, queues: 4,
			// The boot-time check that the timer IRQ arrives times out when
			// the emulated CPUs are starved ("IO-APIC + timer doesn't work!").
			cmdline: "no_timer_check",
			modules: []string{"virtio_pci", "virtio_net", "pppoe"},
			count:   1000, timeout: 8 * time.Minute,
			adaptive: true, pppoe: true,
			wantNetlink: "unavailable", wantRxSource: platform.SourceNAPIOrder,
		},
		// OpenWrt 25.12's kernel series and the newest Debian kernel,
		// one boot each without the adaptive check (kernels_test.go).
		x86Kernel("x86_64-6.12", "trixie", "ok", platform.SourceNAPIOrder),
		x86Kernel("x86_64-sid", "sid", "ok", platform.SourceNetlink),
		{
			name: "arm64", debArch: "arm64", kernelMeta: "linux-image-arm64", goarch: "arm64",
			qemu:    "qemu-system-aarch64",
			machine: append([]string{"-M", "virt,gic-version=3", "-cpu", "cortex-a53", "-smp", "4", "-m", "512"}, tcg...),
			console: "ttyAMA0", cpus: 4, queues: 4,
			modules: []string{"virtio_pci", "virtio_net"},
			count:   300, timeout: 8 * time.Minute,
			adaptive:    true,
			wantNetlink: "unavailable", wantRxSource: platform.SourceNAPIOrder,
		},
		{
			name: "mipsel-malta", debArch: "mipsel", kernelMeta: "linux-image-4kc-malta", goarch: "mipsle", gomips: "softfloat",
			qemu:    "qemu-system-mipsel",
			machine: []string{"-M", "malta", "-cpu", "24Kf", "-m", "256"},
			console: "ttyS0", cpus: 1,
			timeout:    8 * time.Minute,
			wantPolicy: "single-cpu", wantNetlink: "unavailable",
			memory: true,
		},
	}
}

// qemuArgs is the QEMU command line for g.
func (g *guest) qemuArgs(img image) []string {
	args := []string{"-nodefaults", "-display", "none", "-no-reboot", "-serial", "stdio", "-monitor", "none"}
	args = append(args, g.machine...)
	args = append(args, "-kernel", img.kernel, "-initrd", img.initrd,
		"-append", strings.TrimSpace("console="+g.console+" rdinit=/init panic=-1 loglevel=1 "+g.cmdline))
	if g.queues > 0 {
		args = append(args,
			"-netdev", fmt.Sprintf("tap,id=n0,ifname=%s,script=no,downscript=no,vhost=off,queues=%d", tapMQ, g.queues),
			"-device", fmt.Sprintf("virtio-net-pci,netdev=n0,mq=on,vectors=%d,romfile=", 2*g.queues+2),
		)
	}
	if g.nics() > 1 {
		args = append(args,
			"-netdev", fmt.Sprintf("tap,id=n1,ifname=%s,script=no,downscript=no,vhost=off", tapSQ),
			"-device", "virtio-net-pci,netdev=n1,romfile=",
		)
	}
	return args
}

// staleNS matches the namespaces this package creates (netnstest names
// them "<prefix>-<pid>-<random>").
var staleNS = regexp.MustCompile(`^vm-([0-9]+)-[0-9a-f]{6}$`)

// removeStaleNamespaces deletes namespaces left by an earlier run of this
// test that was killed before its cleanup ran (its process is gone). The
// taps and QEMU went with that process.
func removeStaleNamespaces(t *testing.T) {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		m := staleNS.FindStringSubmatch(f[0])
		if m == nil {
			continue
		}
		pid, _ := strconv.Atoi(m[1])
		if pid == os.Getpid() || syscall.Kill(pid, 0) == nil {
			continue
		}
		if out, err := exec.Command("ip", "netns", "del", f[0]).CombinedOutput(); err != nil {
			t.Logf("remove stale namespace %s: %v: %s", f[0], err, out)
		}
	}
}

// boot runs g in a namespace of its own until the guest powers off, and
// returns the console output. QEMU, the taps and the namespace are removed
// when the test ends, also when it fails.
func boot(ctx context.Context, t *testing.T, g *guest, img image, logPath string) (string, error) {
	ns := netnstest.New(t, "vm")
	var echo net.PacketConn
	if g.queues > 0 {
		if err := ns.Do(func() error {
			var err error
			echo, err = net.ListenPacket("udp4", fmt.Sprintf("0.0.0.0:%d", echoPort))
			return err
		}); err != nil {
			return "", fmt.Errorf("echo server: %w", err)
		}
		t.Cleanup(func() { echo.Close() })
		go serveEcho(echo)
	}
	var flood *flooder
	if g.adaptive && g.queues > 0 {
		flood = &flooder{ns: ns, flows: g.queues}
		t.Cleanup(func() {
			n, err := flood.close()
			if err != nil {
				t.Errorf("%s: host-side flood: %v", g.name, err)
			}
			t.Logf("%s: host-side flood sent %d datagrams", g.name, n)
		})
	}

	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	args := append([]string{"netns", "exec", ns.Name, g.qemu}, g.qemuArgs(img)...)
	stdout, logf, pid, stop, err := startQEMU(t, args, logPath)
	if err != nil {
		return "", err
	}
	defer logf.Close()
	var (
		mu   sync.Mutex
		buf  strings.Builder
		done = make(chan struct{})
	)
	go func() {
		defer close(done)
		sc := bufio.NewScanner(io.TeeReader(stdout, logf))
		sc.Buffer(make([]byte, 1<<20), 4<<20)
		for sc.Scan() {
			line := strings.TrimRight(sc.Text(), "\r")
			if flood != nil {
				flood.line(line)
			}
			if g.watch != nil {
				g.watch(ns, line)
			}
			mu.Lock()
			buf.WriteString(line)
			buf.WriteByte('\n')
			mu.Unlock()
		}
	}()

	if g.started != nil {
		if err := g.started(pid); err != nil {
			stop()
			<-done
			return "", fmt.Errorf("%s: %w", g.name, err)
		}
	}
	if err := setupTaps(ctx, ns, g.taps()); err != nil {
		stop()
		return "", err
	}
	select {
	case <-done:
	case <-ctx.Done():
		stop()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return buf.String(), fmt.Errorf("%s: no poweroff within %v (console in %s)", g.name, g.timeout, logPath)
	}
	stop()
	mu.Lock()
	defer mu.Unlock()
	return buf.String(), nil
}

// setupTaps waits for QEMU to create the taps in the namespace and gives
// the host side its addresses (guest.taps).
func setupTaps(ctx context.Context, ns *netnstest.NS, taps []tapAddr) error {
	for _, tap := range taps {
		for {
			if _, err := ns.Exec("ip", "link", "show", tap.name); err == nil {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("tap %s never appeared: %w", tap.name, ctx.Err())
			case <-time.After(50 * time.Millisecond):
			}
		}
		if out, err := ns.Exec("ip", "addr", "add", tap.addr, "dev", tap.name); err != nil {
			return fmt.Errorf("tap %s: %w: %s", tap.name, err, out)
		}
		if out, err := ns.Exec("ip", "link", "set", tap.name, "up"); err != nil {
			return fmt.Errorf("tap %s: %w: %s", tap.name, err, out)
		}
	}
	return nil
}

// serveEcho sends every datagram back to where it came from until c is
// closed.
func serveEcho(c net.PacketConn) {
	buf := make([]byte, 2048)
	for {
		n, addr, err := c.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		_, _ = c.WriteTo(buf[:n], addr)
	}
}

// repoRoot is the repository this package is in.
func repoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	return filepath.Dir(wd), nil
}

// startQEMU starts `ip ARGS...` (`ip netns exec NS qemu-system-...`) in a
// process group of its own with its stderr on its stdout, and opens the
// console log at logPath. `ip netns exec` execs QEMU in this process: QEMU
// is killed with it when the test process dies (Pdeathsig), and stop (also
// registered with t.Cleanup, safe to call more than once) kills the group
// in every other case. The caller reads stdout and closes logf. pid is the
// process's id: `ip` until it has exec'd QEMU, QEMU after.
func startQEMU(t *testing.T, args []string, logPath string) (stdout io.Reader, logf *os.File, pid int, stop func(), err error) {
	cmd := exec.Command("ip", args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, 0, nil, fmt.Errorf("qemu: %w", err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return nil, nil, 0, nil, fmt.Errorf("qemu: %w", err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			_ = cmd.Wait()
		})
	}
	t.Cleanup(stop)
	logf, err = os.Create(logPath)
	if err != nil {
		stop()
		return nil, nil, 0, nil, fmt.Errorf("console log: %w", err)
	}
	return pipe, logf, cmd.Process.Pid, stop, nil
}
