package vmtest

import (
	"context"
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The reboot pair (make test-openwrt, docs/testing-openwrt.md "Reboot"):
// an image's root file system, prepared as for the other boots, goes onto
// an ext4 virtio disk instead of into an initramfs, and the router boots
// twice from it. A shim initramfs (openwrt/shim-init.sh) loads Debian's
// virtio_blk and ext4 modules, mounts the disk and switch_roots to the
// image's procd, which boots as on OpenWrt's x86 ext4 images (mount_root
// remounts /dev/root read-write; no overlay): everything the router writes
// is on the disk. openwrt/check-reboot.sh changes the settings in boot 1
// and ends it with the router's own reboot (QEMU runs with -no-reboot and
// exits); boot 2, on the same disk, checks what survived and what the boot
// applied.

// checkRebootScript is the pair's driver inside the router, both boots.
//
//go:embed openwrt/check-reboot.sh
var checkRebootScript []byte

// shimInit is the shim initramfs' /init.
//
//go:embed openwrt/shim-init.sh
var shimInit []byte

// rebootModules are what the shim loads to mount the root disk (with
// their dependencies); crc32c_generic is ext4's metadata checksum, which
// ext4 asks the crypto API for (a modprobe the shim does not have).
var rebootModules = []string{"virtio_pci", "virtio_blk", "crc32c_generic", "ext4"}

// rebootBootTimeout bounds each boot of the pair (a boot, the install and
// a few checks: 3-4 minutes under load).
const rebootBootTimeout = 8 * time.Minute

// rebootWanted says whether img gets the reboot pair: the x86_64 images
// from 23.05 on (netifd's stock service to keep taken over), unless
// openwrtOnlyEnv names neither the image nor "<image>-reboot" (which runs
// the pair alone) or openwrtChecksEnv does not name "reboot".
func rebootWanted(img owImage, only, checks string) bool {
	if img.arch.pkgArch != "x86_64" || img.release < "23" {
		return false
	}
	if checks != "" && !strings.Contains(" "+checks+" ", " reboot ") {
		return false
	}
	if only == "" {
		return true
	}
	l := "," + only + ","
	return strings.Contains(l, ","+img.name+",") || strings.Contains(l, ","+img.name+"-reboot,")
}

// rebootWant are the checks each boot of the pair must report, whatever
// the console shows (check-reboot.sh announces the same with EXPECT).
func rebootWant(boot int, stock bool) []string {
	if boot == 1 {
		w := []string{"services-1", "install-1", "set_mode-1", "uci-flows-1", "knobs-noted-1"}
		if stock {
			w = append(w, "takeover-1")
		}
		return w
	}
	w := []string{"services-2", "settings-kept", "started-at-boot", "applied-at-boot", "in-sync", "knobs-kept"}
	if stock {
		w = append(w, "takeover-kept")
	}
	return w
}

// Kernel lines that tell how a boot ended (kernel/reboot.c, pr_emerg).
const (
	kernelRestart  = "reboot: Restarting system"
	kernelPowerOff = "reboot: Power down"
)

// rebootVerdict lists what is wrong with one boot's console: failed,
// missing or unfinished checks, and a boot 1 that did not end in the
// router's own reboot or a boot 2 that did not power off.
func rebootVerdict(out string, boot int, stock bool) []string {
	res := parseChecks(out)
	res.expected = append(res.expected, rebootWant(boot, stock)...)
	var bad []string
	for _, f := range res.failed {
		bad = append(bad, "FAIL "+f)
	}
	seen := map[string]bool{}
	for _, m := range res.missing() {
		if !seen[m] {
			seen[m] = true
			bad = append(bad, "check "+m+" did not report")
		}
	}
	if !res.done {
		bad = append(bad, "the check script did not finish")
	}
	switch {
	case boot == 1 && !strings.Contains(out, kernelRestart):
		bad = append(bad, "boot 1 did not end in a reboot (no "+strconv.Quote(kernelRestart)+")")
	case boot == 2 && !strings.Contains(out, kernelPowerOff):
		bad = append(bad, "boot 2 did not power off (no "+strconv.Quote(kernelPowerOff)+")")
	}
	return bad
}

// runRebootPair is TestOpenWrt's hook: for the images rebootWanted picks,
// the pair as subtest "reboot" of the image's subtest, before its other
// boots. root is the unpacked image; the pair's own files are taken out of
// it again once the disk is made. It returns how long the pair took.
func runRebootPair(ctx context.Context, t *testing.T, c *cache, img owImage, root, pkgDir, nextDir, only string) time.Duration {
	if !rebootWanted(img, only, os.Getenv(openwrtChecksEnv)) {
		return 0
	}
	begin := time.Now()
	defer func() { t.Logf("%s: the reboot pair took %v", img.name, time.Since(begin).Round(time.Second)) }()
	t.Run("reboot", func(t *testing.T) {
		start := time.Now()
		img.name += "-reboot"
		img.cpus = 4
		img.disk = filepath.Join(t.TempDir(), "root.ext4")
		img.arch.timeout = rebootBootTimeout
		// The shim's /init, not the image's /sbin/init (the last rdinit= counts).
		img.arch.cmdline = strings.TrimSpace(img.arch.cmdline + " rdinit=/init")
		img.arch.machine = append(append([]string(nil), img.arch.machine...),
			"-drive", "file="+strings.ReplaceAll(img.disk, ",", ",,")+",format=raw,if=virtio")
		stock := false
		if _, err := os.Stat(filepath.Join(root, "etc/init.d/packet_steering")); err == nil {
			stock = true
		}
		logs := [2]string{
			filepath.Join(c.dir, "openwrt-"+img.name+"-boot1.log"),
			filepath.Join(c.dir, "openwrt-"+img.name+"-boot2.log"),
		}
		var outs [2]string
		if os.Getenv(openwrtReplayEnv) != "" {
			for i, l := range logs {
				b, err := os.ReadFile(l)
				if err != nil {
					t.Fatal(err)
				}
				outs[i] = string(b)
			}
		} else {
			shim, kern, err := c.buildRebootDisk(ctx, img, root, pkgDir, nextDir)
			if err != nil {
				t.Fatal(err)
			}
			built := time.Since(start)
			t.Logf("%s: disk and shim %v", img.name, built.Round(time.Second))
			for i := range outs {
				t0 := time.Now()
				out, err := bootOpenWrt(ctx, t, img, kern, shim, logs[i])
				outs[i] = out
				t.Logf("%s: boot %d: guest %v (console: %s)", img.name, i+1, time.Since(t0).Round(time.Second), logs[i])
				if err != nil {
					t.Fatal(err)
				}
				if i == 0 {
					if st, err := runCmd(ctx, "", nil, "dumpe2fs", "-h", img.disk); err == nil {
						for _, l := range strings.Split(st, "\n") {
							if strings.HasPrefix(l, "Filesystem state:") {
								t.Logf("%s: after boot 1's reboot: %s", img.name, strings.Join(strings.Fields(l), " "))
							}
						}
					}
				}
			}
			t.Logf("%s: the pair: %v", img.name, time.Since(start).Round(time.Second))
		}
		for i, out := range outs {
			for _, tm := range parseChecks(out).times {
				t.Logf("%s: boot %d: %s", img.name, i+1, tm)
			}
			bad := rebootVerdict(out, i+1, stock)
			for _, b := range bad {
				t.Errorf("%s: boot %d: %s", img.name, i+1, b)
			}
			if len(bad) > 0 {
				t.Logf("%s: boot %d console ends:\n%s", img.name, i+1, tail(out, 15))
			}
		}
	})
	return time.Since(begin)
}

// buildRebootDisk prepares root as buildOpenWrt does for the other boots,
// adds the pair's files (its driver from rc.local, threaded NAPI turned on
// at boot), writes it as an ext4 file system into img.disk and takes the
// pair's files out of root again. It returns the shim initramfs and the
// kernel.
func (c *cache) buildRebootDisk(ctx context.Context, img owImage, root, pkgDir, nextDir string) (string, string, error) {
	_, kern, err := c.buildOpenWrt(ctx, img, root, pkgDir, nextDir)
	if err != nil {
		return "", "", err
	}
	rcLocal := filepath.Join(root, "etc/rc.local")
	saved, err := os.ReadFile(rcLocal)
	if err != nil {
		return "", "", err
	}
	files := map[string]struct {
		b    []byte
		mode os.FileMode
	}{
		"etc/rc.local": {[]byte("# pscheck: the reboot pair's driver, on the console (it reboots or powers off)\n" +
			"(sh /root/pscheck/check-reboot.sh >/dev/console 2>&1) </dev/null &\nexit 0\n"), 0o644},
		"root/pscheck/check-reboot.sh": {checkRebootScript, 0o755},
		// check.sh turns threaded NAPI on from rc.local, after the boot
		// apply it then runs by hand; here the boot's own apply is what is
		// checked, so it is on before the daemon starts (S25), as on a
		// router whose driver turns it on at probe.
		"etc/init.d/pscheck-napi": {[]byte("#!/bin/sh /etc/rc.common\n# pscheck: threaded NAPI on eth0, as a driver that enables it\nSTART=11\n" +
			"start() {\n\techo 1 >/sys/class/net/eth0/threaded\n}\n"), 0o755},
	}
	undo := func() {
		for p := range files {
			if p != "etc/rc.local" {
				os.Remove(filepath.Join(root, p))
			}
		}
		os.Remove(filepath.Join(root, "etc/rc.d/S11pscheck-napi"))
		_ = os.WriteFile(rcLocal, saved, 0o644)
	}
	defer undo()
	for p, f := range files {
		if err := writeFile(filepath.Join(root, p), f.b, f.mode); err != nil {
			return "", "", err
		}
	}
	if err := os.Symlink("../init.d/pscheck-napi", filepath.Join(root, "etc/rc.d/S11pscheck-napi")); err != nil {
		return "", "", err
	}
	if err := mkfsDisk(ctx, root, img.disk); err != nil {
		return "", "", err
	}
	shim, err := c.buildShim(ctx, img, filepath.Join(filepath.Dir(img.disk), "shim"))
	if err != nil {
		return "", "", err
	}
	return shim, kern, nil
}

// mkfsDisk writes the tree at root into a new ext4 image file disk (sparse,
// half as large again as the tree plus 64 MiB for what the router
// installs), owners and modes as they are in the tree.
func mkfsDisk(ctx context.Context, root, disk string) error {
	out, err := runCmd(ctx, "", nil, "du", "-sk", root)
	if err != nil {
		return fmt.Errorf("root disk: %w", err)
	}
	f := strings.Fields(out)
	if len(f) == 0 {
		return fmt.Errorf("root disk: du -sk %s: no size in %q", root, out)
	}
	kb, err := strconv.Atoi(f[0])
	if err != nil {
		return fmt.Errorf("root disk: du -sk %s: %w", root, err)
	}
	mb := kb/1024*3/2 + 64
	if _, err := runCmd(ctx, "", nil, "mkfs.ext4", "-q", "-F", "-L", "rootfs", "-m", "0",
		"-E", "root_owner=0:0", "-d", root, disk, fmt.Sprintf("%dM", mb)); err != nil {
		return fmt.Errorf("root disk (e2fsprogs; scripts/deps.sh installs it): %w", err)
	}
	return nil
}

// buildShim packs the shim initramfs in dir: Debian's static busybox, the
// modules rebootModules needs and shim-init.sh as /init.
func (c *cache) buildShim(ctx context.Context, img owImage, dir string) (string, error) {
	a := img.arch
	kpkg, err := resolveMeta(ctx, a.kernelMeta, a.debArch)
	if err != nil {
		return "", err
	}
	ktree, err := c.deb(ctx, kpkg, a.debArch)
	if err != nil {
		return "", err
	}
	k, err := findKernel(ktree)
	if err != nil {
		return "", err
	}
	mods, err := moduleOrder(ctx, k, rebootModules)
	if err != nil {
		return "", err
	}
	bb, err := c.deb(ctx, "busybox-static", a.debArch)
	if err != nil {
		return "", err
	}
	tree := filepath.Join(dir, "root")
	if err := copyFile(filepath.Join(bb, "bin", "busybox"), filepath.Join(tree, "bin", "busybox"), 0o755); err != nil {
		return "", err
	}
	var names []string
	for _, m := range mods {
		if err := copyFile(m, filepath.Join(tree, "lib", "modules", filepath.Base(m)), 0o644); err != nil {
			return "", err
		}
		names = append(names, filepath.Base(m))
	}
	if err := writeFile(filepath.Join(tree, "modules"), []byte(strings.Join(names, "\n")+"\n"), 0o644); err != nil {
		return "", err
	}
	if err := writeFile(filepath.Join(tree, "init"), shimInit, 0o755); err != nil {
		return "", err
	}
	shim := filepath.Join(dir, "shim.gz")
	script := `cd "$1" && find . | cpio -o -H newc --quiet | gzip -1 > "$2"`
	if _, err := runCmd(ctx, "", nil, "sh", "-c", script, "sh", tree, shim); err != nil {
		return "", fmt.Errorf("shim initramfs: %w", err)
	}
	return shim, nil
}
