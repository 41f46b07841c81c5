// Package kfs reads and writes the kernel's file interfaces (sysfs, procfs)
// and fixture trees laid out like them, with plain system calls: openat,
// read, getdents64, readlinkat, write, close.
//
// It exists because a steering apply reads hundreds of small attributes:
// os.Open adds fcntl and netpoller registration (epoll_ctl, which fails for
// regular files) to every file, and the string-taking wrappers of x/sys copy
// each path, which would triple the system calls and allocations of a read.
// Here a Reader holds one goroutine's scratch buffers (file contents,
// directory records, the NUL-terminated path) and reuses them for every
// call; names are resolved relative to an open Dir, so a directory such as
// sys/class/net/eth0 is walked once and its files opened below it.
//
// The operations are: Attr (read an attribute, one read when the kernel
// prints it in one go), File (read a file to its end), Names (list a
// directory), Readlink, Sub (open a sub-directory), Exists, and, for
// absolute paths, ReadPath and WritePath. Errors are *fs.PathError with the
// errno inside, so errors.Is(err, fs.ErrNotExist) works. It never follows
// a caller's path out of the Dir it is given other than as the kernel
// resolves it, never retries anything but EINTR, and never keeps a file
// open past the call.
package kfs

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/packet-steering/packet-steering/internal/outline"
)

// MaxFile bounds what one read returns: sysfs attributes are at most a
// page, proc/interrupts of a big machine some hundreds of KiB.
const MaxFile = 16 << 20

// Dir is an open directory that names are resolved below. The zero Dir is
// not valid; Open and Reader.Sub make one, Close releases it.
type Dir struct {
	_     outline.NoCompare
	fd    int
	name  string  // for errors
	count *Counts // counts Close; nil: not counted
}

// Counts counts the system calls a Reader makes (and the closes of the
// Dirs it opens), for tests and benchmarks that measure how much one read
// of a machine costs. It is safe for concurrent use: Readers of several
// goroutines may share one.
type Counts struct {
	_                                             outline.NoCompare
	Openat, Read, Getdents, Readlink, Stat, Close atomic.Int64
	// Other is calls a caller makes on the Reader's files itself (flock,
	// fstat) and counts with AddOther.
	Other atomic.Int64
}

// AddOther counts n system calls made outside the Reader (see Other); a
// nil c counts nothing.
func (c *Counts) AddOther(n int) {
	if c != nil {
		c.Other.Add(int64(n))
	}
}

// Total is the sum of all counted system calls.
func (c *Counts) Total() int64 {
	return c.Openat.Load() + c.Read.Load() + c.Getdents.Load() + c.Readlink.Load() + c.Stat.Load() + c.Close.Load() + c.Other.Load()
}

// String is the counts as "openat N, read N, ...".
func (c *Counts) String() string {
	return fmt.Sprintf("openat %d, read %d, close %d, getdents64 %d, readlinkat %d, fstatat %d, other %d",
		c.Openat.Load(), c.Read.Load(), c.Close.Load(), c.Getdents.Load(), c.Readlink.Load(), c.Stat.Load(), c.Other.Load())
}

//go:noinline
func (c *Counts) add(n *atomic.Int64) {
	if c != nil {
		n.Add(1)
	}
}

// Open opens the directory path (O_PATH: for resolving names below it, not
// for listing it; use Reader.Names with a name, or Sub).
func Open(path string) (Dir, error) {
	for {
		fd, err := unix.Open(path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return Dir{fd: -1}, &fs.PathError{Op: "open", Path: path, Err: err}
		}
		return Dir{fd: fd, name: path}, nil
	}
}

// Close releases the directory.
func (d Dir) Close() error {
	if d.fd < 0 {
		return nil
	}
	if d.count != nil {
		d.count.add(&d.count.Close)
	}
	return unix.Close(d.fd)
}

// Name is the path the directory was opened with, relative to its parent
// Dir for one made by Sub.
func (d Dir) Name() string { return d.name }

// Fd is the directory's file descriptor, for system calls this package does
// not make (fstatat, flock); it stays owned by d.
func (d Dir) Fd() int { return d.fd }

// Reader holds the scratch buffers of one goroutine. The bytes Attr and
// File return are valid until the Reader's next call. A Reader must not be
// used by two goroutines at once; the zero Reader is ready to use.
type Reader struct {
	// BufSize is the first size of the content buffer (default 4096);
	// DentsSize the size of the directory-record buffer (default 8192).
	BufSize, DentsSize int
	// Count, when set, counts every system call the Reader makes.
	Count *Counts

	buf   []byte
	dents []byte
	path  []byte
}

// cpath fills the path buffer with parts joined by '/' and a terminating
// NUL; false when a part holds a NUL byte (a name no file can have).
func (r *Reader) cpath(parts []string) ([]byte, bool) {
	p := r.path[:0]
	for i, s := range parts {
		if strings.IndexByte(s, 0) >= 0 {
			return nil, false
		}
		if i > 0 {
			p = append(p, '/')
		}
		p = append(p, s...)
	}
	p = append(p, 0)
	r.path = p
	return p, true
}

//go:noinline
func join(parts []string) string { return strings.Join(parts, "/") }

// openat opens parts below d, retrying on EINTR.
func (r *Reader) openat(d Dir, flags int, parts []string) (int, error) {
	p, ok := r.cpath(parts)
	if !ok {
		return -1, &fs.PathError{Op: "open", Path: join(parts), Err: unix.EINVAL}
	}
	for {
		if r.Count != nil {
			r.Count.add(&r.Count.Openat)
		}
		fd, _, errno := syscall.Syscall6(unix.SYS_OPENAT, uintptr(d.fd), uintptr(unsafe.Pointer(&p[0])),
			uintptr(flags|unix.O_CLOEXEC|unix.O_LARGEFILE), 0, 0, 0)
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return -1, &fs.PathError{Op: "open", Path: join(parts), Err: errno}
		}
		return int(fd), nil
	}
}

// Sub opens the directory parts (joined by '/') below d, for listing it
// and for resolving names below it. The caller closes it.
func (r *Reader) Sub(d Dir, parts ...string) (Dir, error) {
	fd, err := r.openat(d, unix.O_RDONLY|unix.O_DIRECTORY, parts)
	if err != nil {
		return Dir{fd: -1}, err
	}
	return Dir{fd: fd, name: join(parts), count: r.Count}, nil
}

// Open is the package-level Open, counted in r.Count; the Dir's Close is
// counted too.
func (r *Reader) Open(path string) (Dir, error) {
	if r.Count != nil {
		r.Count.add(&r.Count.Openat)
	}
	d, err := Open(path)
	if err == nil {
		d.count = r.Count
	}
	return d, err
}

// Attr reads the file parts (joined by '/') below d, for a file the kernel
// prints in one go: a sysfs attribute (fs/kernfs/file.c: one ->show() into
// a buffer of at least a page), a procfs file made with single_open
// (fs/seq_file.c: the one record is retried in a bigger buffer until it
// fits) such as proc/PID/stat and status, a sysctl, or a regular file. For
// these a read that returns less than was asked for has reached the end,
// so the read that would return 0 is not made. Multi-record seq files
// (proc/interrupts, proc/net/softnet_stat) may return short reads before
// their end: read them with File.
//
//go:noinline
func (r *Reader) Attr(d Dir, parts ...string) ([]byte, error) {
	return r.read(d, parts, true)
}

// File reads the file parts (joined by '/') below d to its end.
//
//go:noinline
func (r *Reader) File(d Dir, parts ...string) ([]byte, error) {
	return r.read(d, parts, false)
}

func (r *Reader) read(d Dir, parts []string, shortIsEOF bool) ([]byte, error) {
	fd, err := r.openat(d, unix.O_RDONLY, parts)
	if err != nil {
		return nil, err
	}
	defer r.close(fd)
	return r.ReadFd(fd, join(parts), shortIsEOF)
}

// CloseFd closes fd (from OpenFile), counted in r.Count.
//
//go:noinline
func (r *Reader) CloseFd(fd int) { r.close(fd) }

// close closes fd, counted.
func (r *Reader) close(fd int) {
	if r.Count != nil {
		r.Count.add(&r.Count.Close)
	}
	unix.Close(fd)
}

// OpenFile opens the file parts (joined by '/') below d read-only, for a
// caller that must hold it open around the read (a shared flock, as
// libuci's readers take); read it with ReadFd and close it with
// CloseFd. It opens with O_NONBLOCK, so that a FIFO in the file's place
// does not block the open (regular files ignore the flag): the caller can
// refuse what fstat says is not a regular file.
func (r *Reader) OpenFile(d Dir, parts ...string) (int, error) {
	return r.openat(d, unix.O_RDONLY|unix.O_NONBLOCK, parts)
}

// ReadFd reads the open file fd (named name in errors) into the Reader's
// buffer, to its end or, with shortIsEOF, to the first short read (see
// Attr). It does not close fd.
func (r *Reader) ReadFd(fd int, name string, shortIsEOF bool) ([]byte, error) {
	if cap(r.buf) == 0 {
		size := r.BufSize
		if size <= 0 {
			size = 4096
		}
		r.buf = make([]byte, 0, size)
	}
	buf, err := readInto(fd, name, r.buf[:0], shortIsEOF, r.Count)
	if buf != nil {
		r.buf = buf
	}
	return buf, err
}

// readInto appends fd's contents to buf, growing it up to MaxFile.
// Reads are counted in c (nil: not counted).
func readInto(fd int, name string, buf []byte, shortIsEOF bool, c *Counts) ([]byte, error) {
	for {
		if len(buf) == cap(buf) {
			if cap(buf) >= MaxFile {
				return buf[:0], &fs.PathError{Op: "read", Path: name, Err: errors.New("file too large")}
			}
			nb := make([]byte, len(buf), max(2*cap(buf), 64))
			copy(nb, buf)
			buf = nb
		}
		want := cap(buf) - len(buf)
		if c != nil {
			c.add(&c.Read)
		}
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return buf[:0], &fs.PathError{Op: "read", Path: name, Err: err}
		}
		buf = buf[:len(buf)+n]
		if n == 0 || (shortIsEOF && n < want) {
			return buf, nil
		}
	}
}

// direntHeader is the size of struct linux_dirent64 before d_name: d_ino
// (8 bytes), d_off (8), d_reclen (2), d_type (1) (include/linux/dirent.h).
const direntHeader = 19

// Names calls fn with the name of each entry of the directory parts (joined
// by '/') below d, or of d itself (opened by Sub) when no parts are given,
// in the order the file system lists them, without "." and "..". The name
// is valid only during the call, so a directory of many entries costs no
// allocation per entry unless the caller keeps it.
func (r *Reader) Names(d Dir, fn func(name []byte), parts ...string) error {
	fd, name := d.fd, d.name
	if len(parts) > 0 {
		sub, err := r.Sub(d, parts...)
		if err != nil {
			return err
		}
		defer sub.Close()
		fd, name = sub.fd, sub.name
	}
	if r.dents == nil {
		size := r.DentsSize
		if size < 512 {
			size = 8192
		}
		r.dents = make([]byte, size)
	}
	for {
		if r.Count != nil {
			r.Count.add(&r.Count.Getdents)
		}
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

// Readlink returns the target of the symbolic link parts (joined by '/')
// below d, as stored (a relative target stays relative).
func (r *Reader) Readlink(d Dir, parts ...string) (string, error) {
	var stack [256]byte
	buf := stack[:]
	for {
		p, ok := r.cpath(parts)
		if !ok {
			return "", &fs.PathError{Op: "readlink", Path: join(parts), Err: unix.EINVAL}
		}
		if r.Count != nil {
			r.Count.add(&r.Count.Readlink)
		}
		n, _, errno := syscall.Syscall6(unix.SYS_READLINKAT, uintptr(d.fd), uintptr(unsafe.Pointer(&p[0])),
			uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), 0, 0)
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return "", &fs.PathError{Op: "readlink", Path: join(parts), Err: errno}
		}
		if int(n) < len(buf) {
			return string(buf[:n]), nil
		}
		if len(buf) >= 1<<16 {
			return "", &fs.PathError{Op: "readlink", Path: join(parts), Err: errors.New("target too long")}
		}
		buf = make([]byte, 2*len(buf))
	}
}

// LinkBase is the last element of Readlink's target, without resolving it
// ("../../../c080000.ethernet" -> "c080000.ethernet").
func (r *Reader) LinkBase(d Dir, parts ...string) (string, error) {
	t, err := r.Readlink(d, parts...)
	if err != nil {
		return "", err
	}
	return filepath.Base(t), nil
}

// Exists reports whether parts (joined by '/') exists below d, without
// following a final symbolic link.
func (r *Reader) Exists(d Dir, parts ...string) bool {
	var st unix.Stat_t
	if r.Count != nil {
		r.Count.add(&r.Count.Stat)
	}
	return unix.Fstatat(d.fd, join(parts), &st, unix.AT_SYMLINK_NOFOLLOW) == nil
}

// ReadPath reads the file at path to its end, appending to buf (which may
// be a caller's stack array), with open, read and close alone.
func ReadPath(path string, buf []byte) ([]byte, error) {
	fd, err := openPath(path, unix.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	b, err := readInto(fd, path, buf, false, nil)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// WritePath writes data to the existing file at path in one write(2) (a
// short write is continued), never opening it with O_TRUNC; with truncate
// the file is then cut to len(data), for an ordinary file standing in for
// a kernel attribute.
func WritePath(path string, data []byte, truncate bool) error {
	fd, err := openPath(path, unix.O_WRONLY)
	if err != nil {
		return err
	}
	werr := writeAll(fd, data)
	if werr != nil {
		werr = &fs.PathError{Op: "write", Path: path, Err: werr}
	} else if truncate {
		if err := unix.Ftruncate(fd, int64(len(data))); err != nil {
			werr = &fs.PathError{Op: "truncate", Path: path, Err: err}
		}
	}
	cerr := unix.Close(fd)
	if werr != nil {
		return werr
	}
	if cerr != nil {
		return &fs.PathError{Op: "close", Path: path, Err: cerr}
	}
	return nil
}

func openPath(path string, flags int) (int, error) {
	for {
		fd, err := unix.Open(path, flags|unix.O_CLOEXEC, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return -1, &fs.PathError{Op: "open", Path: path, Err: err}
		}
		return fd, nil
	}
}

func writeAll(fd int, data []byte) error {
	for len(data) > 0 {
		n, err := unix.Write(fd, data)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return io.ErrShortWrite
		}
		data = data[n:]
	}
	return nil
}
