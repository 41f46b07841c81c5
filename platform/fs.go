package platform

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// FS is a machine's file tree below a root directory: "/" on a router, or a
// fixture root. Paths given to its methods are relative to the root and use
// forward slashes ("sys/class/net").
type FS struct {
	root string
}

// NewFS returns the tree below root. It fails when root is not an existing
// directory; nothing else about the tree is checked.
func NewFS(root string) (FS, error) {
	if root == "" {
		root = "/"
	}
	info, err := os.Stat(root)
	if err != nil {
		return FS{}, fmt.Errorf("platform: root %s: %w", root, err)
	}
	if !info.IsDir() {
		return FS{}, fmt.Errorf("platform: root %s: not a directory", root)
	}
	return FS{root: filepath.Clean(root)}, nil
}

// Root is the root directory.
func (f FS) Root() string { return f.root }

// Path joins a relative path below the root.
func (f FS) Path(rel ...string) string {
	return filepath.Join(append([]string{f.root}, rel...)...)
}

// reader is the I/O state of one Read: the root directory held open, so
// that every file is opened relative to it (openat) without building and
// walking the root's own path again, and scratch buffers reused by every
// file and directory read. Files are read with plain open/read/close system
// calls: sysfs and procfs attributes are read hundreds of times per
// snapshot, and os.Open's extra fcntl calls and netpoller registration
// (epoll_ctl, which fails for regular files) would triple the cost.
//
// A reader is used by one goroutine; its siblings share the directory.
// The first reader closes it when its Read ends.
type reader struct {
	FS
	dir int    // the root directory, O_PATH
	buf []byte // file contents; valid until the next read
	// bufSize is buf's first size: a page on the main reader, which reads
	// proc/interrupts, less on a sibling, which reads attributes.
	bufSize int
	dents   []byte // getdents64 records
	path    []byte // the NUL-terminated path of the current system call
	// dentsSize is the size of dents: big enough for proc/ of a router in
	// one call on the main reader, a netdev's directory on a sibling.
	dentsSize int
	memo      *configMemo // parsed config files; nil: parse every time
	// inputsOnly leaves out what only describes the machine (see
	// Reader.ReadInputs).
	inputsOnly bool
	// pool keeps scratch buffers between Reads of a Reader; nil: none.
	pool *sync.Pool
}

// newReader opens f's root for one Read.
func (f FS) newReader() (*reader, error) {
	fd, err := unix.Open(f.root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("platform: root %s: %w", f.root, &fs.PathError{Op: "open", Path: f.root, Err: err})
	}
	return &reader{FS: f, dir: fd, bufSize: 4096, dentsSize: 8192}, nil
}

// scratch is the buffers of one Read's readers, which a Reader keeps
// between Reads. No snapshot refers to them: everything kept is copied out
// of them.
type scratch struct {
	bufs [2]buffers
}

// buffers is one reader's scratch.
type buffers struct {
	buf, dents, path []byte
}

// useBuffers gives r the buffers b, where b has them.
func (r *reader) useBuffers(b buffers) {
	if b.buf != nil {
		r.buf = b.buf[:0]
	}
	if len(b.dents) >= r.dentsSize {
		r.dents = b.dents
	}
	r.path = b.path
}

// buffers returns r's buffers for the next Read.
func (r *reader) buffers() buffers {
	return buffers{buf: r.buf[:0], dents: r.dents, path: r.path[:0]}
}

// sibling returns a reader of the same root directory with scratch buffers
// of its own, for another goroutine; only r closes the directory.
func (r *reader) sibling() *reader {
	return &reader{FS: r.FS, dir: r.dir, bufSize: 512, dentsSize: 2048, memo: r.memo, inputsOnly: r.inputsOnly, pool: r.pool}
}

// close releases the root directory.
func (r *reader) close() {
	unix.Close(r.dir)
}

// maxSmallFile bounds readFileAt; sysfs attributes are at most a page,
// proc/interrupts of a big machine some hundreds of KiB.
const maxSmallFile = 16 << 20

// openAt opens name below the directory dirfd, retrying on EINTR.
func (r *reader) openAt(dirfd int, name string, flags int) (int, error) {
	return r.openIn(dirfd, "", name, flags)
}

// openIn opens sub/name (name alone when sub is "") below the directory
// dirfd, retrying on EINTR. The path is built in the reader's buffer and
// handed to openat(2) as it is, without the copy per call that the
// string-taking wrappers of x/sys make.
func (r *reader) openIn(dirfd int, sub, name string, flags int) (int, error) {
	p, ok := r.cpath(sub, name)
	if !ok {
		return -1, &fs.PathError{Op: "open", Path: joinSub(sub, name), Err: unix.EINVAL}
	}
	for {
		fd, _, errno := syscall.Syscall6(unix.SYS_OPENAT, uintptr(dirfd), uintptr(unsafe.Pointer(&p[0])),
			uintptr(flags|unix.O_CLOEXEC|unix.O_LARGEFILE), 0, 0, 0)
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return -1, &fs.PathError{Op: "open", Path: joinSub(sub, name), Err: errno}
		}
		return int(fd), nil
	}
}

// cpath fills the reader's path buffer with sub/name and a terminating NUL
// and returns it; false when a part holds a NUL byte itself (a name no file
// can have).
func (r *reader) cpath(sub, name string) ([]byte, bool) {
	if strings.IndexByte(sub, 0) >= 0 || strings.IndexByte(name, 0) >= 0 {
		return nil, false
	}
	p := r.path[:0]
	if sub != "" {
		p = append(append(p, sub...), '/')
	}
	p = append(append(p, name...), 0)
	r.path = p
	return p, true
}

// joinSub is sub/name, or name when sub is "".
func joinSub(sub, name string) string {
	if sub == "" {
		return name
	}
	return sub + "/" + name
}

// readFileAt reads the whole file name below the directory dirfd into the
// reader's buffer, reading until end of file. The bytes are valid until the
// next read.
func (r *reader) readFileAt(dirfd int, name string) ([]byte, error) {
	return r.readFull(dirfd, "", name, false)
}

// readAttrAt is readFileAt for a file the kernel prints in one go: a sysfs
// attribute (fs/kernfs/file.c: one ->show() into a buffer of at least a
// page, then copied out), a procfs file made with single_open
// (fs/seq_file.c: the one record is retried in a bigger buffer until it
// fits) such as proc/PID/stat, status and proc/irq/N/smp_affinity, a sysctl,
// or a regular file of a fixture root. For all of these a read that
// returns less than was asked for has reached the end, so the extra read
// that would return 0 is skipped. Multi-record seq files (proc/interrupts,
// proc/net/softnet_stat) may return short reads before the end and must
// use readFileAt.
func (r *reader) readAttrAt(dirfd int, name string) ([]byte, error) {
	return r.readFull(dirfd, "", name, true)
}

// readAttrIn is readAttrAt of sub/name.
func (r *reader) readAttrIn(dirfd int, sub, name string) ([]byte, error) {
	return r.readFull(dirfd, sub, name, true)
}

// readFull reads sub/name below dirfd; with shortIsEOF a short read ends
// the file.
func (r *reader) readFull(dirfd int, sub, name string, shortIsEOF bool) ([]byte, error) {
	fd, err := r.openIn(dirfd, sub, name, unix.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	b, err := r.readFrom(fd, name, shortIsEOF)
	if pe, ok := err.(*fs.PathError); ok && sub != "" {
		pe.Path = joinSub(sub, name)
	}
	return b, err
}

// readFd reads the open file fd (named name in errors) to its end into the
// reader's buffer.
func (r *reader) readFd(fd int, name string) ([]byte, error) {
	return r.readFrom(fd, name, false)
}

func (r *reader) readFrom(fd int, name string, shortIsEOF bool) ([]byte, error) {
	if cap(r.buf) == 0 {
		r.buf = make([]byte, 0, r.bufSize)
	}
	buf := r.buf[:0]
	for {
		if len(buf) == cap(buf) {
			if cap(buf) >= maxSmallFile {
				r.buf = buf
				return nil, &fs.PathError{Op: "read", Path: name, Err: errors.New("file too large")}
			}
			nb := make([]byte, len(buf), 2*cap(buf))
			copy(nb, buf)
			buf = nb
		}
		want := cap(buf) - len(buf)
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			r.buf = buf
			return nil, &fs.PathError{Op: "read", Path: name, Err: err}
		}
		buf = buf[:len(buf)+n]
		if n == 0 || (shortIsEOF && n < want) {
			r.buf = buf
			return buf, nil
		}
	}
}

// readFile reads the file rel below the root; see readFileAt.
func (r *reader) readFile(rel string) ([]byte, error) { return r.readFileAt(r.dir, rel) }

// trimNewlines drops trailing newlines.
func trimNewlines(b []byte) []byte {
	for len(b) > 0 && b[len(b)-1] == '\n' {
		b = b[:len(b)-1]
	}
	return b
}

// readStringAt reads an attribute (see readAttrAt) below dirfd and trims the trailing
// newline(s).
func (r *reader) readStringAt(dirfd int, name string) (string, error) {
	return r.readStringIn(dirfd, "", name)
}

// readStringIn is readStringAt of sub/name.
func (r *reader) readStringIn(dirfd int, sub, name string) (string, error) {
	b, err := r.readAttrIn(dirfd, sub, name)
	if err != nil {
		return "", err
	}
	return string(trimNewlines(b)), nil
}

// readString reads a small file below the root and trims the trailing
// newline(s).
func (r *reader) readString(rel string) (string, error) { return r.readStringAt(r.dir, rel) }

// readIntAt reads an attribute (see readAttrAt) below dirfd holding one
// decimal integer.
func (r *reader) readIntAt(dirfd int, name string) (int, error) {
	return r.readIntIn(dirfd, "", name)
}

// readIntIn is readIntAt of sub/name.
func (r *reader) readIntIn(dirfd int, sub, name string) (int, error) {
	b, err := r.readAttrIn(dirfd, sub, name)
	if err != nil {
		return 0, err
	}
	b = trimNewlines(b)
	n, ok := atoiBytes(b)
	if !ok {
		s := string(b)
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			return 0, &fs.PathError{Op: "parse", Path: joinSub(sub, name), Err: errors.New("not an integer: " + strconv.Quote(s))}
		}
	}
	return n, nil
}

// readInt reads a file below the root holding one decimal integer.
func (r *reader) readInt(rel string) (int, error) { return r.readIntAt(r.dir, rel) }

// atoiBytes parses an optionally signed decimal of at most 18 digits as
// strconv.Atoi does, without allocating; false means "not parsed here".
func atoiBytes(b []byte) (int, bool) {
	neg := false
	if len(b) > 0 && (b[0] == '-' || b[0] == '+') {
		neg = b[0] == '-'
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 18 {
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

// openDirAt opens the directory name below dirfd for listing and for
// opening files relative to it; the caller closes it.
func (r *reader) openDirAt(dirfd int, name string) (int, error) {
	return r.openAt(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY)
}

// dirNames lists the open directory fd's entry names (without "." and
// ".."), sorted by name.
func (r *reader) dirNames(fd int, name string) ([]string, error) {
	var names []string
	err := r.eachEntry(fd, name, func(e []byte) { names = append(names, string(e)) })
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	return names, nil
}

// direntHeader is the size of struct linux_dirent64 before d_name: d_ino
// (8 bytes), d_off (8), d_reclen (2), d_type (1) (include/linux/dirent.h).
const direntHeader = 19

// eachEntry calls fn with the name of each entry of the open directory fd
// (named name in errors), in the order the file system lists them, without
// "." and "..". The name is valid only during the call: callers keep only
// the names they need, so that a directory of many entries costs no
// allocation per entry.
func (r *reader) eachEntry(fd int, name string, fn func(entry []byte)) error {
	if r.dents == nil {
		r.dents = make([]byte, r.dentsSize)
	}
	for {
		n, err := unix.Getdents(fd, r.dents)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return &fs.PathError{Op: "readdirent", Path: name, Err: err}
		}
		if n <= 0 {
			return nil
		}
		for b := r.dents[:n]; len(b) > 0; {
			if len(b) < direntHeader {
				return &fs.PathError{Op: "readdirent", Path: name, Err: errors.New("short directory entry")}
			}
			reclen := int(binary.NativeEndian.Uint16(b[16:18]))
			if reclen < direntHeader || reclen > len(b) {
				return &fs.PathError{Op: "readdirent", Path: name, Err: errors.New("bad directory entry length")}
			}
			ino := binary.NativeEndian.Uint64(b[0:8])
			e := b[direntHeader:reclen]
			if i := bytes.IndexByte(e, 0); i >= 0 {
				e = e[:i]
			}
			b = b[reclen:]
			if ino == 0 || string(e) == "." || string(e) == ".." {
				continue
			}
			fn(e)
		}
	}
}

// readDirNamesAt lists the directory name below dirfd, sorted by name.
func (r *reader) readDirNamesAt(dirfd int, name string) ([]string, error) {
	fd, err := r.openDirAt(dirfd, name)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	return r.dirNames(fd, name)
}

// readDirNames lists the directory rel below the root, sorted by name.
func (r *reader) readDirNames(rel string) ([]string, error) { return r.readDirNamesAt(r.dir, rel) }

// readlinkAt returns the target of the symlink name below dirfd.
func (r *reader) readlinkAt(dirfd int, name string) (string, error) {
	var stack [256]byte
	buf := stack[:]
	for {
		p, ok := r.cpath("", name)
		if !ok {
			return "", &fs.PathError{Op: "readlink", Path: name, Err: unix.EINVAL}
		}
		n, _, errno := syscall.Syscall6(unix.SYS_READLINKAT, uintptr(dirfd), uintptr(unsafe.Pointer(&p[0])),
			uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), 0, 0)
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return "", &fs.PathError{Op: "readlink", Path: name, Err: errno}
		}
		if int(n) < len(buf) {
			return string(buf[:n]), nil
		}
		if len(buf) >= 1<<16 {
			return "", &fs.PathError{Op: "readlink", Path: name, Err: errors.New("target too long")}
		}
		buf = make([]byte, 2*len(buf))
	}
}

// linkBaseAt returns the last element of the target of the symlink name
// below dirfd, without resolving it ("../../../c080000.ethernet" ->
// "c080000.ethernet").
func (r *reader) linkBaseAt(dirfd int, name string) (string, error) {
	t, err := r.readlinkAt(dirfd, name)
	if err != nil {
		return "", err
	}
	return filepath.Base(t), nil
}

// linkBase is linkBaseAt below the root.
func (r *reader) linkBase(rel string) (string, error) { return r.linkBaseAt(r.dir, rel) }

// resolveLink returns where the symlink rel points, relative to the root,
// joining its relative target lexically to rel's directory (sysfs links are
// relative and point into real directories, so no further link is walked).
// It fails for absolute targets and for targets that leave the root.
func (r *reader) resolveLink(rel string) (string, error) {
	t, err := r.readlinkAt(r.dir, rel)
	if err != nil {
		return "", err
	}
	return joinLink(rel, t)
}

// joinLink joins the target t of the symlink rel to rel's directory; see
// resolveLink.
func joinLink(rel, t string) (string, error) {
	if filepath.IsAbs(t) {
		return "", fmt.Errorf("%s: absolute link target %q", rel, t)
	}
	res := filepath.ToSlash(filepath.Join(filepath.Dir(filepath.FromSlash(rel)), t))
	if res == ".." || strings.HasPrefix(res, "../") || res == "." {
		return "", fmt.Errorf("%s: link leaves the root", rel)
	}
	return res, nil
}

// statExists reports whether rel exists (without following a final link).
func (r *reader) statExists(rel string) bool {
	var st unix.Stat_t
	return unix.Fstatat(r.dir, rel, &st, unix.AT_SYMLINK_NOFOLLOW) == nil
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
