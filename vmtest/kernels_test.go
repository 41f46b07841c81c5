package vmtest

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Kernels from other Debian suites than the system's (trixie's 6.12, the
// series of OpenWrt 25.12, and sid's newest): apt-get with a source list of
// the test's own under out/vm-cache/apt-<suite>, on the same archive mirror
// and keyring as the system's sources, so that nothing of the system's apt
// state changes:
//
//	-o Dir::Etc::SourceList=FILE -o Dir::Etc::SourceParts=/dev/null
//	-o Dir::State::Lists=DIR -o Dir::Cache=DIR
//
// Newer kernel packages differ from bookworm's in three ways handled here:
// modules under usr/lib/modules and xz-compressed (.ko.xz, unpacked on the
// host: the guest's busybox insmod takes plain .ko files), and in sid the
// image package split into linux-binary-<version> (the vmlinuz, under
// usr/lib/modules/<version>/) and linux-modules-<version>, without a
// modules.builtin list.

// archiveKeyring verifies the lists, as for the system's sources.
const archiveKeyring = "/usr/share/keyrings/debian-archive-keyring.gpg"

// x86Kernel is the x86_64 guest with the kernel of another suite.
func x86Kernel(name, suite, netlink, rxSource string) *guest {
	return &guest{
		name: name, debArch: "amd64", kernelMeta: "linux-image-amd64", goarch: "amd64", suite: suite,
		qemu:    "qemu-system-x86_64",
		machine: []string{"-M", "pc", "-cpu", "qemu64", "-smp", "4", "-m", "512", "-accel", "tcg,thread=multi"},
		console: "ttyS0", cpus: 4, queues: 4,
		cmdline: "no_timer_check",
		modules: []string{"virtio_pci", "virtio_net"},
		count:   300, timeout: 8 * time.Minute,
		wantNetlink: netlink, wantRxSource: rxSource,
	}
}

// aptOptions returns the apt-get/apt-cache options for suite ("" the
// system's own sources, no options), updating the suite's lists when
// they are missing.
func (c *cache) aptOptions(ctx context.Context, suite string) ([]string, error) {
	if suite == "" {
		return nil, nil
	}
	mirror, err := systemMirror()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(c.dir, "apt-"+suite)
	for _, d := range []string{"lists/partial", "cache/archives/partial"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	list := filepath.Join(dir, "sources.list")
	line := fmt.Sprintf("deb [signed-by=%s] %s %s main\n", archiveKeyring, mirror, suite)
	if old, err := os.ReadFile(list); err != nil || string(old) != line {
		if err := os.WriteFile(list, []byte(line), 0o644); err != nil {
			return nil, err
		}
		lists, _ := filepath.Glob(filepath.Join(dir, "lists", "*"))
		for _, l := range lists {
			if filepath.Base(l) != "partial" {
				_ = os.Remove(l)
			}
		}
	}
	opts := []string{"-o", "Dir::Etc::SourceList=" + list, "-o", "Dir::Etc::SourceParts=/dev/null",
		"-o", "Dir::State::Lists=" + filepath.Join(dir, "lists"), "-o", "Dir::Cache=" + filepath.Join(dir, "cache"),
		"-o", "Acquire::Languages=none", "-o", "APT::Sandbox::User=root"}
	if have, _ := filepath.Glob(filepath.Join(dir, "lists", "*_Packages")); len(have) == 0 {
		if _, err := runCmd(ctx, "", nil, "apt-get", append(opts, "-q", "update")...); err != nil {
			return nil, fmt.Errorf("apt-get update for %s: %w", suite, err)
		}
	}
	return opts, nil
}

// systemMirror is the Debian archive URI of the system's sources (the
// first deb822 URIs or one-line "deb" entry whose path ends in /debian).
func systemMirror() (string, error) {
	files, _ := filepath.Glob("/etc/apt/sources.list.d/*.sources")
	files = append(files, "/etc/apt/sources.list")
	files2, _ := filepath.Glob("/etc/apt/sources.list.d/*.list")
	files = append(files, files2...)
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			var uris []string
			switch {
			case len(fields) >= 2 && fields[0] == "URIs:":
				uris = fields[1:]
			case len(fields) >= 3 && fields[0] == "deb":
				for _, w := range fields[1:] {
					if strings.Contains(w, "://") {
						uris = append(uris, w)
						break
					}
				}
			}
			for _, u := range uris {
				if strings.HasSuffix(strings.TrimSuffix(u, "/"), "/debian") {
					fh.Close()
					return strings.TrimSuffix(u, "/"), nil
				}
			}
		}
		fh.Close()
	}
	return "", fmt.Errorf("no Debian archive in the system's apt sources")
}

// kernel fetches and unpacks g's kernel: the meta package's versioned
// kernel package, plus, when that is only a meta package itself (sid),
// its linux-binary- and linux-modules- packages.
func (c *cache) kernel(ctx context.Context, g *guest) (kernel, error) {
	apt, err := c.aptOptions(ctx, g.suite)
	if err != nil {
		return kernel{}, err
	}
	kpkg, err := resolveMeta(ctx, g.kernelMeta, g.debArch, apt...)
	if err != nil {
		return kernel{}, err
	}
	tree, err := c.deb(ctx, kpkg, g.debArch, apt...)
	if err != nil {
		return kernel{}, err
	}
	trees := []string{tree}
	if k, err := findKernel(trees...); err == nil {
		return k, nil
	}
	version := strings.TrimPrefix(kpkg, "linux-image-")
	for _, part := range []string{"linux-binary-", "linux-modules-"} {
		t, err := c.deb(ctx, part+version, g.debArch, apt...)
		if err != nil {
			return kernel{}, err
		}
		trees = append(trees, t)
	}
	return findKernel(trees...)
}

// findKernel finds the one kernel image and module tree in the unpacked
// packages.
func findKernel(trees ...string) (kernel, error) {
	var imgs, mods []string
	for _, tree := range trees {
		for _, pat := range []string{"boot/vmlinu[xz]-*", "usr/lib/modules/*/vmlinuz"} {
			m, _ := filepath.Glob(filepath.Join(tree, pat))
			imgs = append(imgs, m...)
		}
		for _, pat := range []string{"lib/modules/*/kernel", "usr/lib/modules/*/kernel"} {
			m, _ := filepath.Glob(filepath.Join(tree, pat))
			for _, k := range m {
				mods = append(mods, filepath.Dir(k))
			}
		}
	}
	sort.Strings(mods)
	if len(imgs) != 1 || len(mods) != 1 {
		return kernel{}, fmt.Errorf("%s: want one kernel image and one module tree, have %d and %d", strings.Join(trees, ", "), len(imgs), len(mods))
	}
	return kernel{image: imgs[0], modules: mods[0]}, nil
}

// unxz returns the plain .ko of a module: the file itself, or for a
// .ko.xz the file unpacked next to it (once).
func unxz(ctx context.Context, p string) (string, error) {
	plain, ok := strings.CutSuffix(p, ".xz")
	if !ok {
		return p, nil
	}
	if _, err := os.Stat(plain); err == nil {
		return plain, nil
	}
	if _, err := runCmd(ctx, "", nil, "xz", "-dk", p); err != nil {
		return "", fmt.Errorf("unpack %s: %w", p, err)
	}
	return plain, nil
}
