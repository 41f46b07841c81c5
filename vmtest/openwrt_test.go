package vmtest

import (
	"bufio"
	"context"
	_ "embed"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/packet-steering/packet-steering/internal/netnstest"
)

// The real-OpenWrt test (make test-openwrt): each OpenWrt root file system
// in the images directory boots in QEMU with a Debian kernel, as an
// initramfs with rdinit=/sbin/init, so the image's own procd, ubusd,
// netifd, rpcd, uhttpd and logd run; vmtest/openwrt/check.sh, started from
// /etc/rc.local, installs the packages with the image's opkg and prints one
// "PSCHECK PASS|FAIL name" line per check on the console. See
// docs/testing-openwrt.md.
const (
	// openwrtGateEnv turns the test on.
	openwrtGateEnv = "PACKET_STEERING_OPENWRT"
	// openwrtImagesEnv is the directory of rootfs tarballs (default
	// ../shared/openwrt beside the checkout).
	openwrtImagesEnv = "PACKET_STEERING_OPENWRT_IMAGES"
	// openwrtOnlyEnv, when set, is a comma-separated list of image names
	// (as the subtests are named: "22.03.4-x86_64") to boot.
	openwrtOnlyEnv = "PACKET_STEERING_OPENWRT_ONLY"
	// packagesEnv and packagesNextEnv are the directories of the packages
	// to install and of the newer build to upgrade to.
	packagesEnv     = "PACKET_STEERING_PACKAGES"
	packagesNextEnv = "PACKET_STEERING_PACKAGES_NEXT"
	// openwrtChecksEnv, when set, is a space-separated list of the checks
	// to run (with the install); for working on one check.
	openwrtChecksEnv = "PACKET_STEERING_OPENWRT_CHECKS"
	// openwrtReplayEnv re-checks the console logs of the last run.
	openwrtReplayEnv = "PACKET_STEERING_OPENWRT_REPLAY"
)

// checkScript drives the checks inside the router.
//
//go:embed openwrt/check.sh
var checkScript []byte

// owArch is how a router architecture boots: the Debian kernel and QEMU
// machine for an OpenWrt package architecture.
type owArch struct {
	pkgArch    string // OpenWrt package architecture (DISTRIB_ARCH)
	debArch    string
	kernelMeta string
	qemu       string
	machine    []string
	console    string
	cmdline    string
	modules    []string // Debian modules the router loads (with their dependencies)
	timeout    time.Duration
}

func owArches() []owArch {
	tcg := []string{"-accel", "tcg,thread=multi"}
	return []owArch{
		{
			pkgArch: "x86_64", debArch: "amd64", kernelMeta: "linux-image-amd64",
			qemu:    "qemu-system-x86_64",
			machine: append([]string{"-M", "pc", "-cpu", "qemu64", "-m", "1024"}, tcg...),
			console: "ttyS0", cmdline: "no_timer_check",
			modules: []string{"virtio_pci", "virtio_net", "veth", "bridge"},
			timeout: 12 * time.Minute,
		},
		{
			pkgArch: "aarch64_generic", debArch: "arm64", kernelMeta: "linux-image-arm64",
			qemu:    "qemu-system-aarch64",
			machine: append([]string{"-M", "virt,gic-version=3", "-cpu", "cortex-a53", "-m", "1024"}, tcg...),
			console: "ttyAMA0",
			modules: []string{"virtio_pci", "virtio_net", "veth", "bridge"},
			timeout: 15 * time.Minute,
		},
	}
}

// owImage is one rootfs tarball and what its /etc/openwrt_release says.
type owImage struct {
	name    string // RELEASE-ARCH, the subtest name
	tarball string
	release string // DISTRIB_RELEASE
	arch    owArch
	cpus    int
	disk    string // the reboot pair's root disk: no initramfs (openwrt_reboot_test.go)
}

// releaseField reads KEY='value' from an openwrt_release file.
func releaseField(b []byte, key string) string {
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(key) + `=['"]?([^'"\n]*)`)
	if m := re.FindSubmatch(b); m != nil {
		return string(m[1])
	}
	return ""
}

// imagesDir is where the rootfs tarballs are: openwrtImagesEnv, or
// ../shared/openwrt beside the checkout.
func imagesDir(repo string) string {
	if d := os.Getenv(openwrtImagesEnv); d != "" {
		return d
	}
	d := filepath.Join(repo, "..", "shared", "openwrt")
	if _, err := os.Stat(d); err == nil {
		return d
	}
	// A git worktree: beside the main checkout, which holds the git
	// directory the worktree shares.
	if out, err := exec.Command("git", "-C", repo, "rev-parse", "--path-format=absolute", "--git-common-dir").Output(); err == nil {
		return filepath.Join(filepath.Dir(strings.TrimSpace(string(out))), "..", "shared", "openwrt")
	}
	return d
}

// unpackRootfs unpacks a tarball into dir (numeric owners, as root).
func unpackRootfs(ctx context.Context, tarball, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	_, err := runCmd(ctx, "", nil, "tar", "-C", dir, "--numeric-owner", "-xf", tarball)
	return err
}

// findPackage returns the newest file named name_*_arch.ipk in dir/arch/
// (where make packages puts them) or dir.
func findPackage(dir, name, arch string) (string, error) {
	m, _ := filepath.Glob(filepath.Join(dir, arch, name+"_*_"+arch+".ipk"))
	if len(m) == 0 {
		m, _ = filepath.Glob(filepath.Join(dir, name+"_*_"+arch+".ipk"))
	}
	sort.Strings(m)
	if len(m) == 0 {
		return "", fmt.Errorf("no %s_*_%s.ipk in %s (make packages builds them)", name, arch, dir)
	}
	return m[len(m)-1], nil
}

// TestOpenWrt boots every OpenWrt image and fails on any FAIL line or any
// check that did not report.
func TestOpenWrt(t *testing.T) {
	if os.Getenv(openwrtGateEnv) == "" {
		t.Skipf("set %s=1 (make test-openwrt) to boot the OpenWrt images", openwrtGateEnv)
	}
	if os.Geteuid() != 0 {
		t.Fatal("the OpenWrt test needs root (namespaces, taps, the rootfs owners)")
	}
	repo, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	c, err := newCache(repo)
	if err != nil {
		t.Fatal(err)
	}
	dir := imagesDir(repo)
	tarballs, _ := filepath.Glob(filepath.Join(dir, "*rootfs.tar*"))
	if len(tarballs) == 0 {
		t.Fatalf("no *rootfs.tar* in %s (set %s to a directory of OpenWrt rootfs tarballs)", dir, openwrtImagesEnv)
	}
	pkgDir := envOr(packagesEnv, filepath.Join(repo, "out", "packages"))
	nextDir := envOr(packagesNextEnv, filepath.Join(repo, "out", "packages-next"))
	removeStaleNamespaces(t)
	only := os.Getenv(openwrtOnlyEnv)
	begin := time.Now()
	t.Cleanup(func() { t.Logf("all images: %v", time.Since(begin).Round(time.Second)) })
	for _, tb := range tarballs {
		t.Run(strings.TrimSuffix(filepath.Base(tb), filepath.Ext(tb)), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(context.Background())
			t.Cleanup(cancel)
			start := time.Now()
			root := filepath.Join(t.TempDir(), "root")
			if err := unpackRootfs(ctx, tb, root); err != nil {
				t.Fatal(err)
			}
			img, err := identify(tb, root)
			if err != nil {
				t.Fatal(err)
			}
			// The reboot pair (openwrt_reboot_test.go); its time is not the initramfs'.
			start = start.Add(runRebootPair(ctx, t, c, img, root, pkgDir, nextDir, only))
			if only != "" && !strings.Contains(","+only+",", ","+img.name+",") {
				t.Skipf("%s not in %s", img.name, openwrtOnlyEnv)
			}
			img.cpus = 4
			runImage(ctx, t, c, img, root, pkgDir, nextDir, start)
			// A 1-CPU router too (rpcd serves the object there), for the
			// x86_64 images from 23.05 on: a second, short boot.
			if img.arch.pkgArch == "x86_64" && img.release >= "23" {
				img.cpus = 1
				img.name += "-1cpu"
				runImage(ctx, t, c, img, root, pkgDir, nextDir, time.Now())
			}
		})
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// identify names an unpacked image by its release and architecture.
func identify(tarball, root string) (owImage, error) {
	b, err := os.ReadFile(filepath.Join(root, "etc", "openwrt_release"))
	if err != nil {
		return owImage{}, fmt.Errorf("%s: not an OpenWrt rootfs: %w", tarball, err)
	}
	rel, arch := releaseField(b, "DISTRIB_RELEASE"), releaseField(b, "DISTRIB_ARCH")
	for _, a := range owArches() {
		if a.pkgArch == arch {
			return owImage{name: rel + "-" + arch, tarball: tarball, release: rel, arch: a}, nil
		}
	}
	return owImage{}, fmt.Errorf("%s: architecture %q: no QEMU machine for it here", tarball, arch)
}

// runImage builds the initramfs of one image, boots it and checks its
// console.
func runImage(ctx context.Context, t *testing.T, c *cache, img owImage, root, pkgDir, nextDir string, start time.Time) {
	logPath := filepath.Join(c.dir, "openwrt-"+img.name+".log")
	var out string
	var built time.Duration
	if os.Getenv(openwrtReplayEnv) != "" {
		b, err := os.ReadFile(logPath)
		if err != nil {
			t.Fatal(err)
		}
		out = string(b)
	} else {
		initrd, kern, err := c.buildOpenWrt(ctx, img, root, pkgDir, nextDir)
		if err != nil {
			t.Fatal(err)
		}
		built = time.Since(start)
		if out, err = bootOpenWrt(ctx, t, img, kern, initrd, logPath); err != nil {
			t.Fatal(err)
		}
	}
	res := parseChecks(out)
	t.Logf("%s: initramfs %v, guest %v (console: %s)", img.name, built.Round(time.Second), (time.Since(start) - built).Round(time.Second), logPath)
	for _, tm := range res.times {
		t.Logf("%s: %s", img.name, tm)
	}
	for _, f := range res.failed {
		t.Errorf("%s: FAIL %s", img.name, f)
	}
	for _, name := range res.missing() {
		t.Errorf("%s: check %s did not report (console ends:\n%s)", img.name, name, tail(out, 12))
	}
	if !res.done {
		t.Errorf("%s: the check script did not finish; console ends:\n%s", img.name, tail(out, 12))
	}
	t.Logf("%s: %d checks passed", img.name, len(res.passed))
}

// checkResult is what the check script reported.
type checkResult struct {
	expected []string // names announced with PSCHECK EXPECT
	passed   map[string]bool
	failed   []string
	times    []string
	done     bool
}

// missing lists the announced checks that reported neither PASS nor FAIL.
func (r checkResult) missing() []string {
	var m []string
	for _, e := range r.expected {
		if r.passed[e] {
			continue
		}
		found := false
		for _, f := range r.failed {
			if f == e || strings.HasPrefix(f, e+":") {
				found = true
			}
		}
		if !found {
			m = append(m, e)
		}
	}
	return m
}

// parseChecks reads the PSCHECK lines of a console log:
// "PSCHECK EXPECT name...", "PSCHECK PASS name", "PSCHECK FAIL name: why",
// "PSCHECK TIME text", "PSCHECK DONE".
func parseChecks(out string) checkResult {
	r := checkResult{passed: map[string]bool{}}
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimRight(line, "\r")
		i := strings.Index(line, "PSCHECK ")
		if i < 0 {
			continue
		}
		kind, rest, _ := strings.Cut(line[i+len("PSCHECK "):], " ")
		switch kind {
		case "EXPECT":
			r.expected = append(r.expected, strings.Fields(rest)...)
		case "PASS":
			r.passed[strings.TrimSpace(rest)] = true
		case "FAIL":
			r.failed = append(r.failed, rest)
		case "TIME":
			r.times = append(r.times, rest)
		case "DONE":
			r.done = true
		}
	}
	return r
}

// keepServices are the boot services left enabled in the guest: the ones
// the package works with. The others (DHCP and DNS, SSH, firewall, the
// images' own extras such as collectd or adblock) only cost emulated CPU
// time.
var keepServices = map[string]bool{
	"sysfixtime": true, "urngd": true, "boot": true, "system": true, "sysctl": true,
	"log": true, "rpcd": true, "network": true, "packet_steering": true,
	"uhttpd": true, "ucitrack": true, "done": true, "umount": true,
}

// buildOpenWrt writes the test's files into the unpacked root and packs it
// as an initramfs; it returns the initramfs and the kernel.
func (c *cache) buildOpenWrt(ctx context.Context, img owImage, root, pkgDir, nextDir string) (string, string, error) {
	a := img.arch
	kpkg, err := resolveMeta(ctx, a.kernelMeta, a.debArch)
	if err != nil {
		return "", "", err
	}
	ktree, err := c.deb(ctx, kpkg, a.debArch)
	if err != nil {
		return "", "", err
	}
	k, err := findKernel(ktree)
	if err != nil {
		return "", "", err
	}
	mods, err := moduleOrder(ctx, k, a.modules)
	if err != nil {
		return "", "", err
	}
	pkg, err := findPackage(pkgDir, "packet-steering", a.pkgArch)
	if err != nil {
		return "", "", err
	}
	next, err := findPackage(nextDir, "packet-steering", a.pkgArch)
	if err != nil {
		return "", "", err
	}
	if filepath.Base(pkg) == filepath.Base(next) {
		return "", "", fmt.Errorf("%s and %s: the upgrade needs a newer version", pkg, next)
	}
	files := map[string]string{ // path in the router -> source
		"root/pscheck/pkg/" + filepath.Base(pkg):   pkg,
		"root/pscheck/next/" + filepath.Base(next): next,
	}
	if luci, err := findPackage(pkgDir, "luci-app-packet-steering", "all"); err == nil {
		files["root/pscheck/pkg/"+filepath.Base(luci)] = luci
	}
	if err := addMonitoringFiles(files, pkgDir, root); err != nil { // openwrt_monitoring_test.go
		return "", "", err
	}
	// OpenWrt's kmodloader reads one directory: the modules flat in it,
	// named in modules.d (modules-boot.d loads virtio in preinit).
	kv := filepath.Base(k.modules)
	var names []string
	for _, m := range mods {
		files["lib/modules/"+kv+"/"+filepath.Base(m)] = m
		names = append(names, strings.TrimSuffix(filepath.Base(m), ".ko"))
	}
	for dst, src := range files {
		if err := copyFile(src, filepath.Join(root, dst), 0o644); err != nil {
			return "", "", err
		}
	}
	modList := []byte(strings.Join(names, "\n") + "\n")
	var stock string
	if _, err := os.Stat(filepath.Join(root, "etc/init.d/packet_steering")); err == nil {
		stock = "1"
	}
	conf := fmt.Sprintf("PSC_IMAGE=%q\nPSC_CPUS=%d\nPSC_STOCK=%q\nPSC_PKG=%q\nPSC_NEXT=%q\nPSC_ONLY=%q\n",
		img.name, img.cpus, stock, "/root/pscheck/pkg/"+filepath.Base(pkg), "/root/pscheck/next/"+filepath.Base(next),
		os.Getenv(openwrtChecksEnv))
	write := map[string]struct {
		b    []byte
		mode os.FileMode
	}{
		"etc/modules-boot.d/30-pscheck": {modList, 0o644},
		"etc/modules.d/30-pscheck":      {modList, 0o644},
		"etc/inittab": {[]byte("::sysinit:/etc/init.d/rcS S boot\n::shutdown:/etc/init.d/rcS K shutdown\n" +
			a.console + "::askfirst:/usr/libexec/login.sh\n"), 0o644},
		"etc/rc.local": {[]byte("# pscheck: the test's driver, on the console\n" +
			"(sh /root/pscheck/check.sh >/dev/console 2>&1; sync; poweroff) </dev/null &\nexit 0\n"), 0o644},
		"etc/config/network":            {[]byte(owNetworkConfig), 0o644},
		"root/pscheck/check.sh":         {checkScript, 0o755},
		"root/pscheck/check-seccomp.sh": {seccompCheckScript, 0o644}, // openwrt_seccomp_test.go
		"root/pscheck/conf":             {[]byte(conf), 0o644},
	}
	for p, f := range write {
		if err := writeFile(filepath.Join(root, p), f.b, f.mode); err != nil {
			return "", "", err
		}
	}
	if err := luciFiles(root); err != nil { // the LuCI checks (openwrt_luci_test.go)
		return "", "", err
	}
	for _, d := range []string{"dev", "proc", "sys", "tmp", "overlay", "mnt", "rom"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return "", "", err
		}
	}
	if err := os.Chmod(filepath.Join(root, "tmp"), 0o1777); err != nil {
		return "", "", err
	}
	if _, err := os.Lstat(filepath.Join(root, "var")); os.IsNotExist(err) {
		if err := os.Symlink("tmp", filepath.Join(root, "var")); err != nil {
			return "", "", err
		}
	}
	if err := trimServices(root); err != nil {
		return "", "", err
	}
	if img.disk != "" {
		return "", k.image, nil // the reboot pair makes a disk of root (openwrt_reboot_test.go)
	}
	initrd := filepath.Join(filepath.Dir(root), "initrd.gz")
	script := `cd "$1" && find . | cpio -o -H newc --quiet | gzip -1 > "$2"`
	if _, err := runCmd(ctx, "", nil, "sh", "-c", script, "sh", root, initrd); err != nil {
		return "", "", fmt.Errorf("initramfs: %w", err)
	}
	return initrd, k.image, nil
}

// trimServices removes the boot links of the services not in keepServices.
func trimServices(root string) error {
	links, _ := filepath.Glob(filepath.Join(root, "etc", "rc.d", "[SK][0-9][0-9]*"))
	for _, l := range links {
		name := filepath.Base(l)[3:]
		if !keepServices[name] {
			if err := os.Remove(l); err != nil {
				return err
			}
		}
	}
	return nil
}

// owNetworkConfig: lan is a bridge over the 4-queue NIC, as on a router.
const owNetworkConfig = `config interface 'loopback'
	option device 'lo'
	option proto 'static'
	option ipaddr '127.0.0.1'
	option netmask '255.0.0.0'

config globals 'globals'
	option packet_steering '1'

config device
	option name 'br-lan'
	option type 'bridge'
	list ports 'eth0'

config interface 'lan'
	option device 'br-lan'
	option proto 'static'
	option ipaddr '198.18.0.2'
	option netmask '255.255.255.0'
`

// owTap is the multi-queue tap's name inside the test's namespace.
const owTap = "owtq0"

// bootOpenWrt runs the router in a namespace of its own until it powers
// off and returns its console output.
func bootOpenWrt(ctx context.Context, t *testing.T, img owImage, kern, initrd, logPath string) (string, error) {
	ns := netnstest.New(t, "vm")
	a := img.arch
	ctx, cancel := context.WithTimeout(ctx, a.timeout+luciBudget(img)) // the LuCI checks' time (openwrt_luci_test.go)
	defer cancel()
	args := []string{"netns", "exec", ns.Name, a.qemu,
		"-nodefaults", "-display", "none", "-no-reboot", "-serial", "stdio", "-monitor", "none"}
	args = append(args, a.machine...)
	args = append(args, "-smp", fmt.Sprint(img.cpus),
		"-kernel", kern, "-initrd", initrd,
		"-append", strings.TrimSpace("console="+a.console+" rdinit=/sbin/init panic=-1 "+a.cmdline),
		"-netdev", fmt.Sprintf("tap,id=n0,ifname=%s,script=no,downscript=no,vhost=off,queues=4", owTap),
		"-device", "virtio-net-pci,netdev=n0,mq=on,vectors=10,romfile=")
	luci := startLuci(ctx, t, img, ns) // the LuCI checks' browser (openwrt_luci_test.go)
	stdout, logf, _, stop, err := startQEMU(t, args, logPath)
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
			mu.Lock()
			buf.WriteString(line + "\n")
			mu.Unlock()
			luci.line(line)
			if strings.Contains(line, "PSCHECK ") {
				t.Logf("%s: %s", img.name, line[strings.Index(line, "PSCHECK "):])
			}
		}
	}()
	// The host side of the tap: up, so the router's link is up.
	for {
		if _, err := ns.Exec("ip", "link", "set", owTap, "up"); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			stop()
			return "", fmt.Errorf("tap %s never appeared: %w", owTap, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	_, _ = ns.Exec("ip", "addr", "add", "198.18.0.1/24", "dev", owTap)
	select {
	case <-done:
	case <-ctx.Done():
		stop()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return buf.String(), fmt.Errorf("%s: no poweroff within %v (console in %s)", img.name, a.timeout, logPath)
	}
	stop()
	mu.Lock()
	defer mu.Unlock()
	return buf.String(), nil
}
