package kfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// tree builds a small sysfs-like tree:
//
//	class/net/eth0 -> ../../devices/eth0
//	devices/eth0/{ifindex, device -> ../bus/c080000.ethernet, queues/rx-0/rps_cpus}
//	big (three pages and a bit)
func tree(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	files := map[string]string{
		"devices/eth0/ifindex":                "2\n",
		"devices/eth0/queues/rx-0/rps_cpus":   "f\n",
		"devices/eth0/queues/rx-1/rps_cpus":   "0\n",
		"devices/bus/c080000.ethernet/uevent": "DRIVER=x\n",
		"big":                                 strings.Repeat("0123456789abcdef", 800) + "end",
	}
	for p, c := range files {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{
		"class/net/eth0":      "../../devices/eth0",
		"devices/eth0/device": "../bus/c080000.ethernet",
	}
	for p, target := range links {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, filepath.Join(root, p)); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func openRoot(t *testing.T, root string) Dir {
	t.Helper()
	d, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func TestRead(t *testing.T) {
	d := openRoot(t, tree(t))
	tests := []struct {
		name    string
		parts   []string
		attr    bool
		want    string
		notExit bool
		errNo   bool
	}{
		{name: "attribute through a link", parts: []string{"class/net/eth0/ifindex"}, attr: true, want: "2\n"},
		{name: "parts joined", parts: []string{"class/net/eth0", "queues", "rx-0/rps_cpus"}, attr: true, want: "f\n"},
		{name: "whole file grows the buffer", parts: []string{"big"}, want: strings.Repeat("0123456789abcdef", 800) + "end"},
		{name: "attribute of a big regular file", parts: []string{"big"}, attr: true, want: strings.Repeat("0123456789abcdef", 800) + "end"},
		{name: "missing", parts: []string{"class/net/eth1/ifindex"}, notExit: true},
		{name: "NUL in a name", parts: []string{"big\x00"}, errNo: true},
	}
	var r Reader
	r.BufSize = 64
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b []byte
			var err error
			if tt.attr {
				b, err = r.Attr(d, tt.parts...)
			} else {
				b, err = r.File(d, tt.parts...)
			}
			switch {
			case tt.notExit:
				if !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("err = %v, want not-exist", err)
				}
				var pe *fs.PathError
				if !errors.As(err, &pe) || pe.Path != strings.Join(tt.parts, "/") {
					t.Errorf("error %v does not name %q", err, strings.Join(tt.parts, "/"))
				}
			case tt.errNo:
				if err == nil {
					t.Fatalf("read of %q succeeded", tt.parts)
				}
			default:
				if err != nil {
					t.Fatal(err)
				}
				if string(b) != tt.want {
					t.Errorf("got %d bytes %.40q, want %d bytes", len(b), b, len(tt.want))
				}
			}
		})
	}
}

func TestNamesAndSub(t *testing.T) {
	d := openRoot(t, tree(t))
	var r Reader
	r.DentsSize = 512
	list := func(d Dir, parts ...string) ([]string, error) {
		var out []string
		err := r.Names(d, func(b []byte) { out = append(out, string(b)) }, parts...)
		sort.Strings(out)
		return out, err
	}
	got, err := list(d, "class/net/eth0")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"device", "ifindex", "queues"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("names = %v, want %v", got, want)
	}
	dev, err := r.Sub(d, "class/net", "eth0")
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	if dev.Name() != "class/net/eth0" {
		t.Errorf("Sub name %q", dev.Name())
	}
	// A Dir from Sub lists itself and resolves names below it.
	if got, err := list(dev, "queues"); err != nil || strings.Join(got, " ") != "rx-0 rx-1" {
		t.Errorf("queues = %v, %v", got, err)
	}
	if b, err := r.Attr(dev, "queues/rx-1", "rps_cpus"); err != nil || string(b) != "0\n" {
		t.Errorf("Attr below Sub = %q, %v", b, err)
	}
	q, err := r.Sub(dev, "queues")
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if got, err := list(q); err != nil || len(got) != 2 {
		t.Errorf("listing a Sub dir itself = %v, %v", got, err)
	}
	if _, err := list(d, "big"); err == nil {
		t.Error("listing a regular file succeeded")
	}
	if _, err := r.Sub(d, "nope"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Sub of a missing dir: %v", err)
	}
}

func TestReadlink(t *testing.T) {
	d := openRoot(t, tree(t))
	var r Reader
	tests := []struct {
		parts      []string
		want, base string
		err        bool
	}{
		{parts: []string{"class/net/eth0"}, want: "../../devices/eth0", base: "eth0"},
		{parts: []string{"class/net/eth0", "device"}, want: "../bus/c080000.ethernet", base: "c080000.ethernet"},
		{parts: []string{"big"}, err: true},
		{parts: []string{"missing"}, err: true},
	}
	for _, tt := range tests {
		got, err := r.Readlink(d, tt.parts...)
		base, berr := r.LinkBase(d, tt.parts...)
		if tt.err {
			if err == nil || berr == nil {
				t.Errorf("Readlink(%q) = %q, want an error", tt.parts, got)
			}
			continue
		}
		if err != nil || got != tt.want || berr != nil || base != tt.base {
			t.Errorf("Readlink(%q) = %q, %v; LinkBase %q, %v", tt.parts, got, err, base, berr)
		}
	}
	if !r.Exists(d, "class/net/eth0") || r.Exists(d, "class/net/eth9") {
		t.Error("Exists wrong")
	}
}

func TestPathReadWrite(t *testing.T) {
	root := tree(t)
	p := filepath.Join(root, "devices/eth0/queues/rx-0/rps_cpus")
	var stack [4]byte
	b, err := ReadPath(p, stack[:0])
	if err != nil || string(b) != "f\n" {
		t.Fatalf("ReadPath = %q, %v", b, err)
	}
	if err := WritePath(p, []byte("3\n"), true); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "3\n" {
		t.Errorf("after WritePath with truncate: %q", b)
	}
	if err := WritePath(p, []byte("1"), false); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "1\n" {
		t.Errorf("after WritePath without truncate: %q (kernel attributes are not cut)", b)
	}
	if err := WritePath(filepath.Join(root, "nope"), []byte("1"), false); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("WritePath of a missing file: %v (it must not create files)", err)
	}
	if _, err := ReadPath(filepath.Join(root, "nope"), nil); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadPath of a missing file: %v", err)
	}
}

// TestKernelFiles reads the running kernel's procfs: a single_open file
// (proc/self/stat) in one read, and a directory as big as /proc.
func TestKernelFiles(t *testing.T) {
	d, err := Open("/proc")
	if err != nil {
		t.Fatalf("open /proc: %v", err)
	}
	defer d.Close()
	var r Reader
	b, err := r.Attr(d, "self", "stat")
	if err != nil || !strings.Contains(string(b), ") ") {
		t.Fatalf("proc/self/stat = %q, %v", b, err)
	}
	n := 0
	if err := r.Names(d, func([]byte) { n++ }, "."); err != nil || n < 10 {
		t.Errorf("listing /proc: %d names, %v", n, err)
	}
}

// TestCounts checks that a counting Reader counts each system call of
// each operation: an attribute is openat, one read, close; a listing
// openat, getdents64 until it returns 0, close; a link one readlinkat.
func TestCounts(t *testing.T) {
	root := tree(t)
	tests := []struct {
		name string
		op   func(r *Reader, d Dir) error
		want string
	}{
		{"attr", func(r *Reader, d Dir) error { _, err := r.Attr(d, "devices/eth0/ifindex"); return err },
			"openat 1, read 1, close 1, getdents64 0, readlinkat 0, fstatat 0, other 0"},
		{"file", func(r *Reader, d Dir) error { _, err := r.File(d, "devices/eth0/ifindex"); return err },
			"openat 1, read 2, close 1, getdents64 0, readlinkat 0, fstatat 0, other 0"},
		{"names", func(r *Reader, d Dir) error { return r.Names(d, func([]byte) {}, "devices/eth0/queues") },
			"openat 1, read 0, close 1, getdents64 2, readlinkat 0, fstatat 0, other 0"},
		{"readlink", func(r *Reader, d Dir) error { _, err := r.Readlink(d, "class/net/eth0"); return err },
			"openat 0, read 0, close 0, getdents64 0, readlinkat 1, fstatat 0, other 0"},
		{"sub", func(r *Reader, d Dir) error {
			s, err := r.Sub(d, "devices")
			if err != nil {
				return err
			}
			return s.Close()
		}, "openat 1, read 0, close 1, getdents64 0, readlinkat 0, fstatat 0, other 0"},
		{"exists", func(r *Reader, d Dir) error { r.Exists(d, "big"); return nil },
			"openat 0, read 0, close 0, getdents64 0, readlinkat 0, fstatat 1, other 0"},
		{"missing", func(r *Reader, d Dir) error {
			if _, err := r.Attr(d, "nothing"); !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			return nil
		}, "openat 1, read 0, close 0, getdents64 0, readlinkat 0, fstatat 0, other 0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var c Counts
			r := &Reader{Count: &c}
			d, err := r.Open(root)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			c = Counts{} // the root's open is not the operation's
			if err := tc.op(r, d); err != nil {
				t.Fatal(err)
			}
			if got := c.String(); got != tc.want {
				t.Errorf("counts\n got  %s\n want %s", got, tc.want)
			}
			if c.Total() == 0 {
				t.Error("Total is 0")
			}
		})
	}
}
