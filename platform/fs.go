package platform

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

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

// readString reads a small file and trims the trailing newline(s).
func (f FS) readString(rel string) (string, error) {
	b, err := readSmall(f.Path(rel))
	if err != nil {
		return "", err
	}
	return strings.TrimRight(string(b), "\n"), nil
}

// maxSmallFile bounds readSmall; sysfs attributes are at most a page.
const maxSmallFile = 1 << 20

// readSmall reads a small file with plain open/read/close system calls:
// sysfs and procfs attributes are read hundreds of times per snapshot, and
// os.ReadFile's extra fstat and poller registration double the cost.
func readSmall(path string) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	var stack [512]byte
	buf := stack[:0]
	for {
		if len(buf) == cap(buf) {
			if cap(buf) >= maxSmallFile {
				return nil, &fs.PathError{Op: "read", Path: path, Err: errors.New("file too large")}
			}
			nb := make([]byte, len(buf), 2*cap(buf))
			copy(nb, buf)
			buf = nb
		}
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			return append([]byte(nil), buf...), nil
		}
		buf = buf[:len(buf)+n]
	}
}

// linkBase returns the last element of a symlink's target, without
// resolving it ("../../../c080000.ethernet" -> "c080000.ethernet").
func (f FS) linkBase(rel string) (string, error) {
	t, err := os.Readlink(f.Path(rel))
	if err != nil {
		return "", err
	}
	return filepath.Base(t), nil
}

// resolveLink returns where the symlink rel points, relative to the root,
// joining its relative target lexically to rel's directory (sysfs links are
// relative and point into real directories, so no further link is walked).
// It fails for absolute targets and for targets that leave the root.
func (f FS) resolveLink(rel string) (string, error) {
	t, err := os.Readlink(f.Path(rel))
	if err != nil {
		return "", err
	}
	if filepath.IsAbs(t) {
		return "", fmt.Errorf("%s: absolute link target %q", rel, t)
	}
	r := filepath.ToSlash(filepath.Join(filepath.Dir(filepath.FromSlash(rel)), t))
	if r == ".." || strings.HasPrefix(r, "../") || r == "." {
		return "", fmt.Errorf("%s: link leaves the root", rel)
	}
	return r, nil
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
