package vmtest

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// initScript is the guest's /init.
//
//go:embed init.sh
var initScript []byte

// cmdTimeout bounds each apt-get, dpkg-deb, go build and cpio run.
const cmdTimeout = 5 * time.Minute

// runCmd runs a command in dir and returns its combined output; the error
// carries the command line and its output.
func runCmd(ctx context.Context, dir string, env []string, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, cmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return string(out), nil
}

// cache holds what the guests are built from, under out/vm-cache of the
// repository (gitignored): deb/ the downloaded packages, x/ each one
// unpacked, bin/ the Go builds.
type cache struct {
	repo string // repository root
	dir  string
	// debMu serialises deb: guests booted in parallel (t.Parallel) ask for
	// the same kernel package, and one apt-get download and one unpack of
	// it must not race another (a fresh cache failed with a rename of the
	// other's temporary tree).
	debMu sync.Mutex
}

func newCache(repo string) (*cache, error) {
	c := &cache{repo: repo, dir: filepath.Join(repo, "out", "vm-cache")}
	for _, d := range []string{"deb", "x", "bin"} {
		if err := os.MkdirAll(filepath.Join(c.dir, d), 0o755); err != nil {
			return nil, fmt.Errorf("vm cache: %w", err)
		}
	}
	return c, nil
}

// resolveMeta returns the package a Debian meta package (linux-image-amd64)
// depends on for arch: the versioned kernel package.
func resolveMeta(ctx context.Context, meta, arch string, apt ...string) (string, error) {
	out, err := runCmd(ctx, "", nil, "apt-cache", append(apt, "depends", "--important", meta+":"+arch)...)
	if err != nil {
		return "", fmt.Errorf("resolve %s:%s (for a foreign architecture run scripts/deps.sh, which adds it): %w", meta, arch, err)
	}
	return parseDepends(out, "linux-image-")
}

// parseDepends returns the first "Depends:" package of `apt-cache depends`
// output that starts with prefix, without an ":arch" suffix.
func parseDepends(out, prefix string) (string, error) {
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && (f[0] == "Depends:" || f[0] == "|Depends:") && strings.HasPrefix(f[1], prefix) {
			name, _, _ := strings.Cut(f[1], ":")
			return name, nil
		}
	}
	return "", fmt.Errorf("no %s* dependency in %q", prefix, out)
}

// deb downloads pkg for arch into deb/ unless a copy is there, unpacks it
// into x/ unless done before, and returns the unpacked tree.
func (c *cache) deb(ctx context.Context, pkg, arch string, apt ...string) (string, error) {
	c.debMu.Lock()
	defer c.debMu.Unlock()
	debDir := filepath.Join(c.dir, "deb")
	find := func() string {
		m, _ := filepath.Glob(filepath.Join(debDir, pkg+"_*_"+arch+".deb"))
		sort.Strings(m)
		if len(m) == 0 {
			return ""
		}
		return m[len(m)-1]
	}
	file := find()
	if file == "" {
		if _, err := runCmd(ctx, debDir, nil, "apt-get", append(apt, "download", "-q", pkg+":"+arch)...); err != nil {
			return "", fmt.Errorf("download %s:%s: %w", pkg, arch, err)
		}
		if file = find(); file == "" {
			return "", fmt.Errorf("download %s:%s: no .deb appeared in %s", pkg, arch, debDir)
		}
	}
	tree := filepath.Join(c.dir, "x", strings.TrimSuffix(filepath.Base(file), ".deb"))
	if _, err := os.Stat(tree); err == nil {
		return tree, nil
	}
	tmp, err := os.MkdirTemp(filepath.Dir(tree), filepath.Base(tree)+".tmp")
	if err != nil {
		return "", fmt.Errorf("unpack %s: %w", file, err)
	}
	defer os.RemoveAll(tmp)
	if _, err := runCmd(ctx, "", nil, "dpkg-deb", "-x", file, tmp); err != nil {
		return "", fmt.Errorf("unpack %s: %w", file, err)
	}
	if err := os.Rename(tmp, tree); err != nil {
		return "", fmt.Errorf("unpack %s: %w", file, err)
	}
	return tree, nil
}

// goBuild builds a package of this repository for the guest's architecture
// as the Makefile builds router binaries (static, stripped, with tags,
// "router" for the router build) and returns the binary's path.
func (c *cache) goBuild(ctx context.Context, g *guest, pkg, name, tags string) (string, error) {
	out := filepath.Join(c.dir, "bin", g.goarch, name)
	args := []string{"build", "-tags", tags, "-trimpath", "-ldflags", "-s -w -buildid=", "-o", out}
	env := []string{"CGO_ENABLED=0", "GOOS=linux", "GOARCH=" + g.goarch}
	if g.gomips != "" {
		env = append(env, "GOMIPS="+g.gomips)
	}
	args = append(args, pkg)
	// go test puts its own GOROOT/bin first on PATH: the same go builds.
	if _, err := runCmd(ctx, c.repo, env, "go", args...); err != nil {
		return "", err
	}
	return out, nil
}

// kernel is an unpacked Debian kernel package.
type kernel struct {
	image   string // boot/vmlinuz-* or usr/lib/modules/<version>/vmlinuz
	modules string // [usr/]lib/modules/<version>
}

// modName is a module's name as the kernel spells it: file name without
// .ko, dashes as underscores.
func modName(file string) string {
	return strings.ReplaceAll(strings.TrimSuffix(strings.TrimSuffix(filepath.Base(file), ".xz"), ".ko"), "-", "_")
}

// modDepends reads the depends= entry of a module's .modinfo section: the
// modules it needs loaded first. Modules are uncompressed in Debian's
// packages; the entry is a NUL-terminated string in the file.
func modDepends(ko []byte) []string {
	const key = "depends="
	for off := 0; ; {
		i := bytes.Index(ko[off:], []byte(key))
		if i < 0 {
			return nil
		}
		i += off
		if i == 0 || ko[i-1] == 0 {
			v := ko[i+len(key):]
			if end := bytes.IndexByte(v, 0); end >= 0 {
				v = v[:end]
			}
			var deps []string
			for _, d := range strings.Split(string(v), ",") {
				if d = strings.TrimSpace(d); d != "" {
					deps = append(deps, strings.ReplaceAll(d, "-", "_"))
				}
			}
			return deps
		}
		off = i + len(key)
	}
}

// moduleOrder returns the .ko files that loading want needs, each after
// the modules it depends on; modules built into the kernel
// (modules.builtin) are left out.
func moduleOrder(ctx context.Context, k kernel, want []string) ([]string, error) {
	paths := map[string]string{}
	err := filepath.WalkDir(filepath.Join(k.modules, "kernel"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && (strings.HasSuffix(p, ".ko") || strings.HasSuffix(p, ".ko.xz")) {
			paths[modName(p)] = p
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("modules: %w", err)
	}
	builtin := map[string]bool{}
	b, err := os.ReadFile(filepath.Join(k.modules, "modules.builtin"))
	noList := errors.Is(err, fs.ErrNotExist) // split packages (sid) ship none
	if err == nil {
		for _, l := range strings.Fields(string(b)) {
			builtin[modName(l)] = true
		}
	}
	var order []string
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(m string, depth int) error
	visit = func(m string, depth int) error {
		if builtin[m] || state[m] == 2 {
			return nil
		}
		if state[m] == 1 || depth > 32 {
			return fmt.Errorf("modules: dependency loop at %s", m)
		}
		p, ok := paths[m]
		if !ok && noList {
			return nil // no module of that name: built in
		}
		if !ok {
			return fmt.Errorf("modules: %s is neither a module nor built in", m)
		}
		state[m] = 1
		p, err := unxz(ctx, p)
		if err != nil {
			return fmt.Errorf("modules: %w", err)
		}
		ko, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("modules: %w", err)
		}
		for _, d := range modDepends(ko) {
			if err := visit(d, depth+1); err != nil {
				return err
			}
		}
		state[m] = 2
		order = append(order, p)
		return nil
	}
	for _, m := range want {
		if err := visit(strings.ReplaceAll(m, "-", "_"), 0); err != nil {
			return nil, err
		}
	}
	return order, nil
}

// image is what one guest boots.
type image struct {
	kernel string
	initrd string
}

// buildImage fetches and builds everything the guest needs and writes its
// initramfs into dir.
func (c *cache) buildImage(ctx context.Context, g *guest, dir string) (image, error) {
	k, err := c.kernel(ctx, g)
	if err != nil {
		return image{}, err
	}
	bbtree, err := c.deb(ctx, "busybox-static", g.debArch)
	if err != nil {
		return image{}, err
	}
	mods, err := moduleOrder(ctx, k, g.modules)
	if err != nil {
		return image{}, err
	}
	router, err := c.goBuild(ctx, g, "./cmd/packet-steering", "packet-steering", "router")
	if err != nil {
		return image{}, err
	}
	helper, err := c.goBuild(ctx, g, "./vmtest/vmguest", "vmguest", "router")
	if err != nil {
		return image{}, err
	}

	root := filepath.Join(dir, "root")
	files := map[string]string{ // path in the guest -> source
		"bin/busybox":              filepath.Join(bbtree, "bin", "busybox"),
		"usr/sbin/packet-steering": router,
		"usr/bin/vmguest":          helper,
	}
	var names []string
	for _, m := range mods {
		files["lib/modules/"+filepath.Base(m)] = m
		names = append(names, strings.TrimSuffix(filepath.Base(m), ".ko"))
	}
	for dst, src := range files {
		if err := copyFile(src, filepath.Join(root, dst), 0o755); err != nil {
			return image{}, err
		}
	}
	conf := fmt.Sprintf("VMT_MODULES=%q\nVMT_TRAFFIC=%d\nVMT_ECHO=%d\nVMT_COUNT=%d\nVMT_DEVICES=%d\nVMT_ADAPTIVE=%d\nVMT_FLOOD=%d\nVMT_PPPOE=%d\nVMT_MEMORY=%d\n",
		strings.Join(names, " "), boolInt(g.queues > 0), echoPort, g.count, g.nics(), boolInt(g.adaptive && g.queues > 0), floodPort, boolInt(g.pppoe && g.queues > 0), boolInt(g.memory))
	if err := writeFile(filepath.Join(root, "etc", "vmtest.conf"), []byte(conf+g.conf), 0o644); err != nil {
		return image{}, err
	}
	init := initScript
	if g.init != nil {
		init = g.init
	}
	if err := writeFile(filepath.Join(root, "init"), init, 0o755); err != nil {
		return image{}, err
	}
	for dst, b := range g.files {
		if err := writeFile(filepath.Join(root, dst), b, 0o755); err != nil {
			return image{}, err
		}
	}
	initrd := filepath.Join(dir, "initrd.gz")
	script := `cd "$1" && find . | cpio -o -H newc --quiet | gzip -1 > "$2"`
	if _, err := runCmd(ctx, "", nil, "sh", "-c", script, "sh", root, initrd); err != nil {
		return image{}, fmt.Errorf("initramfs: %w", err)
	}
	return image{kernel: k.image, initrd: initrd}, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func writeFile(path string, b []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("initramfs: %w", err)
	}
	if err := os.WriteFile(path, b, mode); err != nil {
		return fmt.Errorf("initramfs: %w", err)
	}
	return os.Chmod(path, mode)
}

func copyFile(src, dst string, mode os.FileMode) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("initramfs: %w", err)
	}
	return writeFile(dst, b, mode)
}
