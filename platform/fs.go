package platform

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/packet-steering/packet-steering/internal/kfs"
	"github.com/packet-steering/packet-steering/internal/outline"
)

// FS is a machine's file tree below a root directory: "/" on a router, or a
// fixture root. Paths given to its methods are relative to the root and use
// forward slashes ("sys/class/net").
type FS struct {
	root string
	// netlink asks the kernel's netdev family (netlink.go); nil below a
	// root other than "/", whose /sys is not the running kernel's.
	netlink netlinkSource
}

// NewFS returns the tree below root. It fails when root is not an existing
// directory; nothing else about the tree is checked.
func NewFS(root string) (FS, error) {
	if root == "" {
		root = "/"
	}
	info, err := os.Stat(root)
	if err != nil {
		return FS{}, outline.Errorf("platform: root %s: %w", root, err)
	}
	if !info.IsDir() {
		return FS{}, outline.Errorf("platform: root %s: not a directory", root)
	}
	f := FS{root: filepath.Clean(root)}
	if f.root == "/" {
		f.netlink = kernelNetlinkSource()
	}
	return f, nil
}

// Root is the root directory.
func (f FS) Root() string { return f.root }

// Path joins a relative path below the root.
//
//go:noinline
func (f FS) Path(rel ...string) string {
	return outline.JoinPath(append([]string{f.root}, rel...)...)
}

// reader is the I/O state of one Read: the root directory held open, so
// that every file is opened relative to it, and the scratch buffers of an
// internal/kfs Reader, reused by every file and directory read (see kfs
// for why the files are read with plain system calls). Its methods below
// only add what the parsers need on top of kfs: trimmed strings, integers,
// sorted names, links resolved within the root.
//
// A reader is used by one goroutine; its siblings share the directory.
// The first reader closes it when its Read ends.
type reader struct {
	FS
	kfs.Reader
	dir  kfs.Dir     // the root
	memo *configMemo // parsed config files; nil: parse every time
	// inputsOnly leaves out what only describes the machine (see
	// Reader.ReadInputs).
	inputsOnly bool
	// decisionOnly also leaves out what only status and the adaptive mode
	// show (see Reader.ReadDecision); it implies inputsOnly.
	decisionOnly bool
	// pool keeps scratch buffers between Reads of a Reader; nil: none.
	pool *sync.Pool
	// scope narrows the read to one netdev's decision (Reader.ReadDevice);
	// nil: the whole machine.
	scope *DeviceScope
}

// newReader opens f's root for one Read. The main reader reads
// proc/interrupts and lists proc/ of a router in one call.
// With count set, every system call of the Read is counted there.
func (f FS) newReader(count *kfs.Counts) (*reader, error) {
	r := &reader{FS: f, Reader: kfs.Reader{BufSize: 4096, DentsSize: 8192, Count: count}}
	d, err := r.Open(f.root)
	if err != nil {
		return nil, outline.Errorf("platform: root %s: %w", f.root, err)
	}
	r.dir = d
	return r, nil
}

// scratch is the buffers of one Read's readers, which a Reader keeps
// between Reads. No snapshot refers to them: everything kept is copied out
// of them.
type scratch struct {
	bufs [2]kfs.Reader
}

// useBuffers gives r the buffers b, where b has them.
func (r *reader) useBuffers(b kfs.Reader) {
	if b.DentsSize >= r.DentsSize {
		count := r.Count
		r.Reader = b
		r.Count = count
	}
}

// buffers returns r's buffers for the next Read.
func (r *reader) buffers() kfs.Reader { return r.Reader }

// sibling returns a reader of the same root directory with scratch buffers
// of its own (smaller: it reads attributes and a netdev's directory), for
// another goroutine; only r closes the directory.
func (r *reader) sibling() *reader {
	return &reader{FS: r.FS, Reader: kfs.Reader{BufSize: 512, DentsSize: 2048, Count: r.Count}, dir: r.dir, memo: r.memo, inputsOnly: r.inputsOnly, decisionOnly: r.decisionOnly, pool: r.pool, scope: r.scope}
}

// close releases the root directory.
func (r *reader) close() {
	r.dir.Close()
}

// trimNewlines drops trailing newlines.
func trimNewlines(b []byte) []byte {
	for len(b) > 0 && b[len(b)-1] == '\n' {
		b = b[:len(b)-1]
	}
	return b
}

// str reads an attribute (kfs Reader.Attr) below d, without its trailing
// newline(s).
func (r *reader) str(d kfs.Dir, parts ...string) (string, error) {
	b, err := r.Attr(d, parts...)
	if err != nil {
		return "", err
	}
	return string(trimNewlines(b)), nil
}

// num reads an attribute below d holding one decimal integer.
func (r *reader) num(d kfs.Dir, parts ...string) (int, error) {
	b, err := r.Attr(d, parts...)
	if err != nil {
		return 0, err
	}
	b = trimNewlines(b)
	n, ok := atoiBytes(b)
	if !ok {
		s := string(b)
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			return 0, &fs.PathError{Op: "parse", Path: strings.Join(parts, "/"), Err: err}
		}
	}
	return n, nil
}

// atoiMaxDigits is how many decimal digits always fit an int: 18 where int
// has 64 bits, 9 where it has 32 (mips, mipsle, arm).
const atoiMaxDigits = strconv.IntSize * 9 / 32

// atoiBytes parses an optionally signed decimal of at most atoiMaxDigits
// digits as strconv.Atoi does, without allocating; false means "not parsed
// here" (callers fall back to strconv, which reports a range error).
func atoiBytes(b []byte) (int, bool) {
	neg := false
	if len(b) > 0 && (b[0] == '-' || b[0] == '+') {
		neg = b[0] == '-'
		b = b[1:]
	}
	if len(b) == 0 || len(b) > atoiMaxDigits {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	if neg {
		n = -n
	}
	return n, true
}

// names lists the directory parts below d (d itself with no parts),
// sorted by name.
func (r *reader) names(d kfs.Dir, parts ...string) ([]string, error) {
	var names []string
	if err := r.Names(d, func(e []byte) { names = append(names, string(e)) }, parts...); err != nil {
		return nil, err
	}
	outline.SortStrings(names)
	return names, nil
}

// resolveLink returns where the symlink rel points, relative to the root,
// joining its relative target lexically to rel's directory (sysfs links are
// relative and point into real directories, so no further link is walked).
// It fails for absolute targets and for targets that leave the root.
func (r *reader) resolveLink(rel string) (string, error) {
	t, err := r.Readlink(r.dir, rel)
	if err != nil {
		return "", err
	}
	return joinLink(rel, t)
}

// joinLink joins the target t of the symlink rel to rel's directory; see
// resolveLink.
func joinLink(rel, t string) (string, error) {
	if filepath.IsAbs(t) {
		return "", outline.Errorf("%s: absolute link target %q", rel, t)
	}
	res := filepath.ToSlash(outline.JoinPath(filepath.Dir(filepath.FromSlash(rel)), t))
	if res == ".." || strings.HasPrefix(res, "../") || res == "." {
		return "", outline.Errorf("%s: link leaves the root", rel)
	}
	return res, nil
}

// gaps collects what could not be read during one Read.
type gaps struct {
	list []Gap
}

// add records rel as unreadable with err's text, shortened to what a user
// needs (the path is already in Path).
func (g *gaps) add(rel string, err error) {
	msg := err.Error()
	var pe *fs.PathError
	if errors.As(err, &pe) {
		msg = pe.Err.Error()
	}
	g.list = append(g.list, Gap{Path: rel, Error: msg})
}
