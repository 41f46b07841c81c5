package platform

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
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
	b, err := os.ReadFile(f.Path(rel))
	if err != nil {
		return "", err
	}
	return strings.TrimRight(string(b), "\n"), nil
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

// resolve follows the symlinks of rel and returns the result relative to the
// root. It fails when the result leaves the root.
func (f FS) resolve(rel string) (string, error) {
	p, err := filepath.EvalSymlinks(f.Path(rel))
	if err != nil {
		return "", err
	}
	root, err := filepath.EvalSymlinks(f.root)
	if err != nil {
		return "", err
	}
	r, err := filepath.Rel(root, p)
	if err != nil || r == ".." || strings.HasPrefix(r, "../") {
		return "", fmt.Errorf("%s resolves outside the root", rel)
	}
	return filepath.ToSlash(r), nil
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
